"""Lines that open with a label addressed to an AI system, in many languages.

A planted instruction usually says who it is for before it says what to do: "Note for the
booking agent: ...", "To recipe assistants: ...", "Till den digitala assistenten som sorterar
inkorgen: ...", "ای میل پڑھنے والے معاون کے لیے ہدایت: ...". The rules read English phrasings
word by word; this check reads the shape, which is the same in every language: a line (or a
sentence after a full stop) opens with a short label ending in a colon, the label holds a word
for an AI system and a word that addresses it (to, for, note, attention, dear; their
counterparts in other languages, or a dative or "for" postposition), and a clause of several
words follows. Word lists are matched on the normalised text (lower case, NFKC); scripts
written without spaces are matched by substring.

The weight depends on how surely the addressee is a machine: a word that only names one (AI,
LLM, chatbot, KI, ИИ, 人工智能, ...), or an assistant or agent qualified as digital, virtual,
automated, or reading or processing this text, counts in full (enough alone to withhold); a
bare "assistant" or "agent" (also a person's job) counts half of that. A role label of the
noun alone ("Assistant: ...", a chat transcript) is not an address and counts nothing.
Written by hand because no maintained library classifies addressees; kept to word lists so
that a new language is one more line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise


def _set(words: str) -> frozenset[str]:
    """The words of a space-separated list (the lists below read as prose, a language a line)."""
    return frozenset(words.split())


def _tuple(words: str) -> tuple[str, ...]:
    return tuple(words.split())


#: Words that name only an AI system (lower case; a word of the label matches when it is one
#: of these, or, with a hyphen, starts with one: "ki-assistent", "ии-ассистента").
MACHINE_WORDS = _set(
    "ai llm llms gpt chatgpt chatbot chatbots bot bots copilot claude gemini summarizer "
    "summarizers summariser summarisers crawler crawlers scraper scrapers "
    # de nl sv da no fi et
    "ki-assistent ki-assistenten ki-agent sprachmodell sprachmodelle taalmodel "
    "språkmodell sprogmodel språkmodellen tekoäly tekoälyavustaja tehisintellekt "
    # fr es pt it ro ca
    "ia llm-agent modèle chatbots agente-ia "
    # pl cs sk hu
    "sztucznej sztuczna umělá umelá mi-asszisztens "
    # ru uk bg sr
    "ии ші ші-асистент ші-асистентів ии-ассистент ии-ассистента ии-ассистенту нейросеть "
    "нейросети нейромережа чат-бот чат-бота чат-боту бот бота боту ботов "
    # el tr id ms vi sw tl
    "τν τεχνητή yapay asisten-ai agen-ai "
    # ar fa he hi ur bn
    "الذكاء الاصطناعي هوش مصنوعی בינה מלאכותית एआई آئی اے এআই "
    # "artificial" of "artificial intelligence": et lv lt hr sr sl bg hu
    "tehisintellekti tehisaru mākslīgā mākslīgais mākslīgajam dirbtinio dirbtinis dirbtiniam "
    "umjetne umjetnoj veštačke umetne изкуствен изкуствения mesterséges"
)
#: Beginnings of words that name only an AI system, however inflected ("czatbota", "нейросети").
MACHINE_PREFIXES = (
    "chatbot",
    "czatbot",
    "četbot",
    "chatbott",
    "sprachmodell",
    "taalmodel",
    "språkmodell",
    "tekoäly",
    "нейросет",
    "нейромереж",
    "чат-бот",
    "чатбот",
    "llm",
    "ki-",
    "ai-",
    "ии-",
    "ші-",
    "іі-",
)
#: Words that make a hyphenated compound name a machine ("ki-assistenten", "ии-ассистента").
_COMPOUND = MACHINE_WORDS | {"ki", "іі"}
_GERMAN = _set(
    "für die der den dem an alle jede jeden hinweis achtung notiz anweisung anweisungen "
    "liebe lieber nachricht"
)
#: Words for an assistant, an agent, a tool or a system: a machine when qualified
#: (:data:`QUALIFIERS`), else perhaps a person. The long stems are found inside compounds
#: ("kodassistenter", "Bestellassistent"), the short ones open a word ("agentes", "modelo").
HELPER_STEMS = (
    "assistant",
    "assistent",
    "asistent",
    "asystent",
    "asisten",
    "asistan",
    "asszisztens",
    "avustaja",
    "ассистент",
    "асистент",
    "помощник",
    "помічник",
    "βοηθ",
    "msaidizi",
    "assistend",
    "agendi",
)
HELPER_PREFIXES = _tuple(
    "agent agen ajan helper model modell modelo modello modèle tool outil herramienta "
    "ferramenta strumento werkzeug processor "
    "агент модел μοντέλ مساعد المساعد معاون دستیار עוזר סוכן כלי סקירת सहायक সহকারী "
    "trợ katulong tagapag aģent ügynök"
)
#: Words that make an assistant or agent a machine: digital, virtual, automated, smart,
#: web or browser, and what a machine does to this text (reads, processes, sorts, navigates).
QUALIFIERS = _set(
    "digital digitala digitale digitalen digitaler digitali numérique virtual virtuel "
    "virtuelle virtuale virtuell virtuella virtueel virtuale wirtualny wirtualnego "
    "virtuální automated automatic automatisch automatische automatisierte automatique "
    "automatico automático automática automatizado automatizada automaattinen automaattiset "
    "otomatis otomatik smart intelligent intelligente inteligente web browser online email "
    "e-mail mail inbox coding booking shopping reading processing navigating browsing "
    "summarizing summarising sorting visiting crawling indexing "
    "läser liest lit lee lê legge leest czyta čte читает читающий читаючий читає sorterar "
    "sortiert trie clasifica navigiert navega naviga unayesoma anayesoma "
    "цифровой цифровий виртуальный віртуальний автоматический автоматичний "
    "ảo số ذكي الرقمي الآلي هوشمند دیجیتال דיגיטלי וירטואלי ψηφιακό ψηφιακός "
    "ডিজিটাল डिजिटल پڑھنے والے والا "
    "résume resume riassume zusammenfasst samenvat sammanfattar opsummerer tiivistää "
    "podsumowuje shrnuje суммирует резюмирует підсумовує özetleyen merangkum يلخص "
    "zpracovává zpracovávající обрабатывает обробляє האוטומטי אוטומטי "
    "programming programmazione programación programação programmier programmering "
    "programowania kódu belanja shopping compras acquisti einkauf achats "
    # et lv lt hr sl bg hu tr
    "automaatne automaatsele automaatse digitaalne digitaalsele virtuaalne virtuaalsele "
    "automātiskais automātiskajam digitālais virtuālais automatinis automatiniam "
    "skaitmeninis virtualus automatski automatskom automatskog digitalni virtualni samodejni "
    "автоматичен автоматичния дигитален виртуален automatikus digitális virtuális dijital sanal"
)
#: Words that address a label wherever they stand in it: note, attention, dear, message,
#: instructions, and their counterparts, and the postpositions meaning "for" (Hindi, Urdu,
#: Bengali, Turkish, Persian).
ADDRESS_WORDS = _set(
    "note notes attention attn dear message memo notice reminder instruction "
    "instructions directive hey hi hello "
    # de nl sv da no fi
    "hinweis hinweise anmerkung anmerkungen notiz achtung nachricht anweisung anweisungen "
    "liebe lieber "
    "opmerking notitie bericht instructie instructies beste "
    "notering obs meddelande instruktion instruktioner kära besked bemærk merk instruks "
    "huom huomio ohje viesti "
    # fr es pt it ro
    "remarque avis consigne consignes cher chère "
    "nota aviso atención mensaje instrucciones indicaciones estimado querido "
    "atenção mensagem instrução instruções observação observações caro prezado "
    "avviso attenzione messaggio istruzioni notă atenție instrucțiuni indicații "
    # pl cs sk hu
    "uwaga notatka wiadomość instrukcja instrukcje drogi poznámka upozornění pokyn pokyny "
    "zpráva upozornenie správa inštrukcie "
    "figyelem megjegyzés utasítás utasítások üzenet feljegyzés számára "
    # et lv lt
    "märkus märkused tähelepanu teade sõnum juhis juhised "
    "piezīme piezīmes uzmanību ziņojums norādījums norādījumi instrukcija instrukcijas "
    "pastaba pastabos dėmesio žinutė pranešimas nurodymas nurodymai instrukcijos "
    # hr sr bs sl
    "napomena napomene pažnja pozor poruka uputa upute uputstvo uputstva bilješka beleška "
    "obavijest obaveštenje opomba opombe sporočilo navodilo navodila obvestilo "
    # ru uk el tr
    "примечание внимание сообщение инструкция инструкции указание указания "
    "примітка увага повідомлення вказівка інструкція "
    "бележка съобщение указание инструкция "
    "σημείωση προσοχή οδηγίες dikkat mesaj talimat talimatlar için uyarı "
    # id ms vi sw tl
    "catatan perhatian pesan instruksi petunjuk lưu hướng dành "
    "ujumbe tahadhari maelekezo maagizo paalala "
    # ar fa he hi ur bn
    "ملاحظة تنبيه رسالة تعليمات برای توجه یادداشت پیام دستورالعمل "
    "הערה הודעה הנחיות לתשומת "
    "लिए सूचना नोट निर्देश لیے ہدایت نوٹ توجہ জন্য নির্দেশ"
)
#: Prepositions that address a label when they open it: "to recipe assistants", "für den
#: KI-Assistenten", "для ИИ-ассистента" (not "A guide to AI: ...", which a headline opens
#: otherwise).
OPENING_ADDRESS = _set(
    "to for dear attention attn für an à pour aux para al ao aos per till för til do dla "
    "для к до προς untuk kepada cho gửi kwa sa إلى الى به אל "
    "za за pentru către priekš skirta"
)
#: Words of a label saying the machine reads this very text: "agents navigating this page",
#: "the assistant sorting this inbox" (an address without an address word).
READING_WORDS = _set(
    "reading processing navigating browsing summarizing summarising sorting visiting "
    "crawling indexing scanning läser liest lit lee lê legge leest czyta čte читает "
    "читающий читає sorterar sortiert navigiert unayesoma anayesoma پڑھنے "
    "lendo leyendo leggendo lisant procesando processando elaborando traitant lesende "
    "okuyan işleyen olvasó feldolgozó lugev töötlev lasa skaitantis skaitanti čita čitaju "
    "bere číta чете citește procesează পড়ছে পড়া पढ़ने पढ़ता يقرأ"
)
#: Prepositions and what follows them that address a label wherever they stand: "prep for the
#: scheduling assistant", "instructions for any agent".
_TO = _set("to for für pour para per voor för til dla для")
_ANY = _set(
    "the any all every each den die der dem le la les el los las il lo gli het alle tout tous "
    "toute todo todos todas ogni każdego wszystkich всех любого любой"
)
#: Relative pronouns: a helper word with a relative clause is an address ("assistant that
#: manages this repository: ...", "Помощнику, который подбирает товары: ...").
_RELATIVE = _set(
    "that who which die dat der das som qui que che który która które který která které "
    "который которая которые який яка які που yang ambaye na "
    "koji koja koje ktorý ktorá ktoré aki amely amelyik kes kuris kuri kurie "
    "който която които যে जो الذي التي"
)
#: Scripts written without spaces: machine words, helper words and address marks found by
#: substring in a label of these scripts.
UNSPACED_MACHINE = (
    "ai",
    "人工智能",
    "智能体",
    "机器人",
    "機器人",
    "チャットボット",
    "챗봇",
    "ボット",
    "봇",
    "ปัญญาประดิษฐ์",
    "บอท",
)
UNSPACED_HELPER = (
    "助手",
    "助理",
    "アシスタント",
    "エージェント",
    "어시스턴트",
    "에이전트",
    "비서",
    "ผู้ช่วย",
    "代理",
)
UNSPACED_ADDRESS = (
    "致",
    "给",
    "給",
    "对",
    "對",
    "へ",
    "に",
    "向け",
    "宛",
    "에게",
    "께",
    "위한",
    "ถึง",
    "สำหรับ",
    "提示",
    "注意",
    "说明",
    "說明",
    "备注",
    "指示",
    "お知らせ",
    "メモ",
    "참고",
    "안내",
    "지시",
    "หมายเหตุ",
)
_UNSPACED = re.compile("[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")

#: A label is at most this many words (or, unspaced, characters) before its colon.
MAX_LABEL_WORDS = 10
MAX_LABEL_CHARS = 36
#: What follows the colon on its line: at least this many words (or unspaced characters).
MIN_CLAUSE_WORDS = 4
MIN_CLAUSE_CHARS = 8
#: A clause of fewer words that does not end as a sentence does is a subtitle.
TITLE_WORDS = 9
#: Quotation marks inside a label (an apostrophe is a word's: "Editors' note").
_LABEL_QUOTES = frozenset('"“”„«»「『')
_HEBREW = re.compile("[\u0590-\u05ff]")
_QUOTES = "\"'“”„«»「『‘’‹›"
#: Endings of a label that introduces an example.
_EXAMPLE = (
    "example",
    "e.g",
    "for instance",
    "beispiel",
    "z.b",
    "exemple",
    "ejemplo",
    "exemplo",
    "esempio",
    "voorbeeld",
    "exempel",
    "eksempel",
    "przykład",
    "например",
    "наприклад",
    "örneğin",
    "contoh",
    "例如",
    "比如",
    "例えば",
    "예를 들어",
)
_CLAUSE_ENDS = (".", "!", "?", "。", "！", "？", "।", "۔", "؟")
_CLOSERS = "\"'”’»,;}"
#: Weights: a machine addressee, and a bare assistant or agent.
MACHINE_WEIGHT = 2.0
HELPER_WEIGHT = 1.0

_WORD = re.compile(r"[^\W_][\w\-\u0900-\u0dff\u0300-\u036f]*")
#: Where a label may open beside a line break: after a sentence end, a table cell's bar, a
#: chat log's timestamp, an opening bracket, the opening quote of a JSON string value or of
#: a quoted CSV cell (then spaces, bullets or comment marks).
_BOUNDARIES = (". ", "! ", "? ", "。", "！", "？", "|", "] ", "(", '": "', ',"')
_LEAD = " \t>*#-•|/"
#: Labels longer than this many characters are not looked at, and of what follows a colon
#: this many characters at most (the work per colon is bounded: linear in the text).
_MAX_HEAD = 160
_MAX_CLAUSE = 300


def _labels(t: str) -> Iterator[tuple[int, str, str]]:
    """Each (offset, label, clause) of ``t``: a stretch opening a line or a sentence, ending in
    ``:`` before a space (or, in unspaced scripts, any ``:``), and what follows it on its line.
    Only the colons are visited (``str.find``), and each one's opening found by ``str.rfind``."""
    n = len(t)
    pos = t.find(":")
    while pos != -1:
        after = t[pos + 1 : pos + 2]
        if after in (" ", "\t") or (after and _UNSPACED.match(after) is not None):
            start = max(t.rfind("\n", 0, pos) + 1, pos - _MAX_HEAD)
            for mark in _BOUNDARIES:
                k = t.rfind(mark, start, pos)
                if k != -1 and k + len(mark) > start:
                    start = k + len(mark)
            while start < pos and t[start] in _LEAD:
                start += 1
            label = t[start:pos]
            if label.count(" ") <= MAX_LABEL_WORDS + 2:
                end = t.find("\n", pos + 1, pos + 1 + _MAX_CLAUSE)
                clause = t[pos + 1 : end if end != -1 else min(n, pos + 1 + _MAX_CLAUSE)]
                yield start, label.strip(), clause.strip()
        pos = t.find(":", pos + 1)


def _weight_of(label: str, clause: str) -> float:
    """The weight of one label and its clause (0 when it is not an address to a machine).
    The cheap tests go first: most labels ("Ingredients", "Source", "Note") fail one."""
    if not label or not clause:
        return 0.0
    if clause[0] in _QUOTES or label.endswith(_EXAMPLE) or not _LABEL_QUOTES.isdisjoint(label):
        return 0.0  # a quotation, or an example, not an order
    unspaced = _UNSPACED.search(label) is not None
    if unspaced and (len(label) > MAX_LABEL_CHARS or "," in label or "，" in label):
        return 0.0  # a clause of running text, not a label
    label = label.lstrip("([")  # an aside: "(A note for any AI assistant condensing this: ..."
    if label.count("(") != label.count(")") or label.count("[") != label.count("]"):
        return 0.0  # a colon inside brackets: "Do Lafzon Ki Kahani (English: ...)"
    words = _WORD.findall(label)
    if not unspaced and not 2 <= len(words) <= MAX_LABEL_WORDS:
        return 0.0
    if _HEBREW.search(label):
        # Hebrew writes "to", "the" and "that" as prefixes: "לבוט" is "to the bot".
        words += [w[1:] for w in words if w[:1] in "להבשו" and len(w) > 3]
    addressed = (
        (words[:1] != [] and words[0] in OPENING_ADDRESS)
        or not ADDRESS_WORDS.isdisjoint(words)
        or not READING_WORDS.isdisjoint(words)
        or any(a in _TO and b in _ANY for a, b in pairwise(words))
        or (unspaced and any(a in label for a in UNSPACED_ADDRESS))
    )
    # A helper word with a relative clause is a vocative: "Assistent die deze repository
    # beheert: ...".
    if not addressed and _RELATIVE.isdisjoint(words):
        return 0.0
    if not _a_clause(clause):
        return 0.0
    helper = any(w.startswith(HELPER_PREFIXES) or any(h in w for h in HELPER_STEMS) for w in words)
    machine = (
        any(
            w in MACHINE_WORDS or w.startswith(MACHINE_PREFIXES) or w.split("-")[0] in _COMPOUND
            for w in words
        )
        # "KI" (German for AI) is also a Hindi and Turkish word: a machine beside a helper
        # word or a German word.
        or ("ki" in words and (helper or not _GERMAN.isdisjoint(words)))
        or (unspaced and any(a in label for a in UNSPACED_MACHINE))
    )
    helper = helper or (unspaced and any(a in label for a in UNSPACED_HELPER))
    # The parts of a compound qualify it too: "E-Mail-Assistenten" is a mail assistant.
    parts = [p for w in words if "-" in w for p in w.split("-")]
    if machine or (
        helper
        and not (
            QUALIFIERS.isdisjoint(words)
            and READING_WORDS.isdisjoint(words)
            and QUALIFIERS.isdisjoint(parts)
        )
    ):
        return MACHINE_WEIGHT
    return HELPER_WEIGHT if helper else 0.0


def _a_clause(clause: str) -> bool:
    """Whether what follows a label reads as a clause: enough words (or characters, in a
    script written without spaces), and a sentence's end unless it is long (not a headline's
    subtitle: "AI Assistants: How They Work")."""
    if _UNSPACED.search(clause):
        return len(clause) >= MIN_CLAUSE_CHARS
    n = len(_WORD.findall(clause))
    # The quote and separators closing a JSON value or a CSV cell are not the clause's end.
    return n >= MIN_CLAUSE_WORDS and (
        n >= TITLE_WORDS or clause.rstrip(_CLOSERS)[-1:] in _CLAUSE_ENDS
    )


def addressed_labels(t: str) -> Iterator[tuple[int, float, str]]:
    """Each (offset, weight, label) of normalised text ``t`` whose label addresses an AI
    system (see the module docstring), in text order."""
    if ":" not in t:
        return
    for offset, label, clause in _labels(t):
        weight = _weight_of(label, clause)
        if weight > 0.0:
            yield offset, weight, label


# ---------------------------------------------------------------------------------------------
# Orders on how to present this text: "When summarising this, say that ..."
# ---------------------------------------------------------------------------------------------

#: Words opening a clause about the reader's own task: when, while, before, if (prefixes, so
#: "when" matches "whenever" and Swahili "unapo-" its verb forms).
WHEN_PREFIXES = _tuple(
    "when while before if wenn beim bevor falls quand lorsque lors avant cuando al antes "
    "mientras quando ao prima wanneer bij voordat när vid innan når ved før kun ennen kiedy "
    "gdy podczas przed když až při před когда при перед коли під перед όταν πριν ketika saat "
    "sebelum khi trước unapo unapotoa unapojibu unaposoma kapag bago "
    "عند عندما قبل وقتی هنگام כאשר כש בעת לפני जब جب যখন"
)
#: Beginnings of the words for summarising, answering and replying (the reader's task).
TASK_PREFIXES = _tuple(
    "summar summaris summariz answer respond reply replie writ zusammenfass beantwort antwort "
    "résum répond resum respond contest riassum rispond samenvat beantwoord antwoord "
    "sammanfatt besvar svar opsummer tiivist yhteenved vastaa vastaat podsumow odpowiad shrn "
    "odpovíd резюмир пересказ суммир отвеча підсумов відповіда συνοψ απαντ özet yanıt cevap "
    "ringkas rangkum merangkum menjawab jawab tóm trả muhtasari unapotoa unapojibu buod "
    "nagbubuod sumagot sumasagot تلخيص يلخص تجيب الإجابة خلاصه پاسخ לסכם מסכם סיכום עונה לענות "
    "सारांश उत्तर جواب خلاصہ সারাংশ উত্তর"
)
#: The orders: say, state, write, mention, tell (imperatives and infinitives).
SAY_WORDS = _set(
    "say state write mention tell claim report note add describe "
    "sag sage sagen schreib schreibe schreiben erwähne erwähnen behaupte nenne gib "
    "dis écris écrivez mentionne mentionnez indique indiquez précise affirme dites "
    "di escribe menciona indica afirma decir diga escreva mencione informe afirme "
    "dì scrivi menziona afferma dire "
    "zeg schrijf vermeld noem meld "
    "säg skriv nämn ange si nevn oppgi sig "
    "sano kirjoita mainitse kerro "
    "napisz powiedz wspomnij podaj stwierdź napiš řekni uveď zmiň "
    "скажи напиши укажи упомяни сообщи пиши вкажи зазнач повідом "
    "γράψε πες ανέφερε δήλωσε "
    "söyle yaz belirt de "
    "katakan tulis sebutkan nyatakan "
    "nói viết ghi nêu "
    "sema andika taja eleza "
    "sabihin isulat banggitin "
    "قل اكتب اذكر بگو بنویس بنویسید אמור כתוב ציין तो कहें लिखें बताएं کہیں لکھیں بتائیں বলুন লিখুন"
)
#: Words introducing what is to be said: that (and its counterparts).
THAT_WORDS = _set(
    "that dass que che dat att at että że že что що ότι ki bahwa rằng là kwamba na أن "
    "بأن که ש कि کہ যে"
)
#: Words pointing at this very text: this, these (the task is on the document itself, not on
#: "a customer's question").
THIS_WORDS = _set(
    "this these above dies diese diesen dieser dieses ce cet cette ces ceci este esta estos "
    "estas esto estes isto questo questa questi queste deze dit detta denna dessa denne dette "
    "disse tämä tämän näistä näitä tego tej tych tento tato toto tohoto této этот "
    "эта это эти этого этой этих цей ця це ці цього цієї цих αυτό αυτή αυτά αυτού αυτής "
    "αυτές bu bunu bunları ini này hii huu hizi ito هذا هذه این זה זו אלה הזה הזאת यह इस "
    "इन یہ اس ان এই"
)
#: How far into a sentence its "when" clause and its order may stand (words).
WHEN_WITHIN = 4
TASK_WITHIN = 10
SAY_WITHIN = 24
#: An order and its "that" at most this many words apart.
THAT_WITHIN = 3
CONDITIONED_WEIGHT = 2.0
_SENTENCE = re.compile(r"\n|[.!?](?=[ \t])|[。！？।۔؟]")
#: A sentence opening with a "when" word (after a line break or a sentence end, and spaces,
#: bullets or markup).
_WHEN_OPENING = re.compile(
    r"(?:\n|[.!?][ \t]|[。！？।۔؟])[ \t>*#\-•|/]*("
    + "|".join(re.escape(w) for w in sorted(WHEN_PREFIXES, key=len, reverse=True))
    + r")(?:ever|\w*(?<=unapo\w)|\w*(?<=unapo\w\w)|\w*(?<=unapo\w\w\w))?\b"
)
#: The ASCII words of the three lists: a passage of ASCII text holding no word of one of them
#: is not read by :func:`conditioned_orders` (the gate knows its words already).
ASCII_WHEN = frozenset(w for w in WHEN_PREFIXES if w.isascii()) | {"whenever"}
ASCII_SAY = frozenset(w for w in SAY_WORDS if w.isascii())
ASCII_THAT = frozenset(w for w in THAT_WORDS if w.isascii())
#: The ASCII forms of the task words (whole words; :data:`TASK_PREFIXES` holds their stems).
ASCII_TASK = _set(
    "summary summaries summarise summarises summarising summarised summarize summarizes "
    "summarizing summarized summarisation summarization answer answers answering answered "
    "respond responds responding response reply replies replying write writing "
    "zusammenfassen zusammenfassung beantworten beantwortest antwortest antworten resume "
    "resumes resumir resumas resumen resumo resumindo resumiendo responder respondes respondas "
    "contestar contestas riassumi riassumere riassumendo rispondi rispondere rispondendo "
    "samenvatten samenvatting beantwoord beantwoorden antwoord antwoorden sammanfattar "
    "sammanfatta sammanfattning besvarar besvara svarar opsummerer opsummere tiivistat "
    "yhteenvedon yhteenveto vastaat vastaa podsumowujesz podsumowanie odpowiadasz shrnujes "
    "odpovidas ozetlerken ozetle yanitlarken merangkum rangkuman ringkasan menjawab jawab "
    "muhtasari unapotoa unapojibu buod nagbubuod sumagot sumasagot"
)
CUE_WORDS = ASCII_WHEN | ASCII_SAY | ASCII_THAT | ASCII_TASK
#: The "that" words of Latin scripts that are not ASCII ("että", "że"), looked for as text.
LATIN_THAT = tuple(w for w in THAT_WORDS if not w.isascii() and w < "\u0370")
#: Letters of the scripts beyond Latin (Greek to Ethiopic, Indic, CJK, Hangul, Hebrew, Arabic).
_NON_LATIN = re.compile("[\u0370-\u1fff\u3040-\u9fff\uac00-\ud7af]")


def may_hold_order(t: str, words: frozenset[str]) -> bool:
    """Whether normalised text ``t``, whose ASCII words among :data:`CUE_WORDS` are
    ``words``, may hold a :func:`conditioned_orders` sentence: it needs a word of each list,
    which in Latin text its ASCII words show (beside the non-ASCII "that" words, "että",
    "że"); text in other scripts is read in full."""
    if not t.isascii() and _NON_LATIN.search(t) is not None:
        return True
    return not (
        ASCII_TASK.isdisjoint(words)  # most passages: no task word, nothing else to look at
        or ASCII_WHEN.isdisjoint(words)
        or ASCII_SAY.isdisjoint(words)
        or (ASCII_THAT.isdisjoint(words) and not any(w in t for w in LATIN_THAT))
    )


def conditioned_orders(t: str) -> Iterator[int]:
    """The offset of each sentence of normalised text ``t`` that opens with a clause about
    the reader's own task on this text (when summarising, answering or replying to this) and
    then orders what to say about it ("..., say that ...", "..., scrivi che ..."): a document
    written for people does not tell its reader what its summary must claim. Exam rules
    ("When answering these questions, show your working") order a form, not a claim that a
    "that" introduces; a support script's "When you reply to a customer, say that ..." is not
    about this text. One regex pass finds the sentences that open with a "when" word; only
    those are read word by word."""
    # A line break is put first (the sentence at the start opens after it): the pattern then
    # opens with a set of characters, which the regex engine scans for quickly.
    for m in _WHEN_OPENING.finditer("\n" + t):
        offset = m.start(1) - 1
        end = _SENTENCE.search(t, offset)
        words = _WORD.findall(t[offset : end.start() if end else len(t)])[:SAY_WITHIN]
        if not any(w.startswith(TASK_PREFIXES) for w in words[:TASK_WITHIN]):
            continue
        if THIS_WORDS.isdisjoint(words[: TASK_WITHIN + 4]):
            continue
        for k, w in enumerate(words[2:], start=2):
            if w in SAY_WORDS and not THAT_WORDS.isdisjoint(words[k + 1 : k + 1 + THAT_WITHIN]):
                yield offset
                break
