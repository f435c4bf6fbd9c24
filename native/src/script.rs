//! The scans of `ctxbudget.text` and `ctxbudget.extractive` written once, over what the
//! reference's regular expressions and `str` methods see of a character: ASCII text read as
//! bytes (`Ascii`: byte offsets are character offsets) and text of the Latin character table
//! read as characters (`latin::Table`). Each scan is monomorphised per reading, so the ASCII
//! one compiles to the byte scan it was.

use std::collections::HashSet;

/// What the reference sees of one unit of text (a byte of ASCII text, a character of Latin
/// text).
pub(crate) trait Script {
    type Unit: Copy + PartialEq;
    /// The regex `\w`.
    fn is_word(&self, u: Self::Unit) -> bool;
    /// The regex `\d`.
    fn is_digit(&self, u: Self::Unit) -> bool;
    /// The regex `\s` and `str.isspace`.
    fn is_space(&self, u: Self::Unit) -> bool;
    /// `str.lower` (one unit).
    fn lower(&self, u: Self::Unit) -> Self::Unit;
    /// `str.isdigit` of a character of a word this reading made.
    fn is_str_digit(&self, c: char) -> bool;
    /// The character of a unit.
    fn char_of(u: Self::Unit) -> char;
}

/// ASCII text, byte by byte.
pub(crate) struct Ascii;

/// `str.isspace()` (and the regex `\s`) on an ASCII byte.
fn is_py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

impl Script for Ascii {
    type Unit = u8;
    fn is_word(&self, b: u8) -> bool {
        b.is_ascii_alphanumeric() || b == b'_'
    }
    fn is_digit(&self, b: u8) -> bool {
        b.is_ascii_digit()
    }
    fn is_space(&self, b: u8) -> bool {
        is_py_space(b)
    }
    fn lower(&self, b: u8) -> u8 {
        b.to_ascii_lowercase()
    }
    fn is_str_digit(&self, c: char) -> bool {
        c.is_ascii_digit()
    }
    fn char_of(b: u8) -> char {
        char::from(b)
    }
}

// ---------------------------------------------------------------------------------------
// Words: `text.words`, the runs of `[^\W_]` of the lower-cased text.

pub(crate) fn words<S: Script>(s: &S, t: &[S::Unit]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for &u in t {
        let l = s.lower(u);
        let c = S::char_of(l);
        if c != '_' && s.is_word(l) {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Sentences: `text.sentences_reference`.

/// `text._SENTENCE_END` tried at `i`: the end of the match, or None.
fn sentence_end_at<S: Script>(s: &S, t: &[S::Unit], i: usize) -> Option<usize> {
    match S::char_of(t[i]) {
        '\n' => {
            let mut j = i + 1;
            while j < t.len() && S::char_of(t[j]) == '\n' {
                j += 1;
            }
            Some(j)
        }
        '.' | '!' | '?' => {
            let mut j = i + 1;
            while j < t.len() && matches!(S::char_of(t[j]), '"' | '\'' | ')' | ']') {
                j += 1;
            }
            if j < t.len() && s.is_space(t[j]) {
                while j < t.len() && s.is_space(t[j]) {
                    j += 1;
                }
                Some(j)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `L(.L)*` with `L` an ASCII letter.
fn is_initials<S: Script>(w: &[S::Unit]) -> bool {
    w.len() % 2 == 1
        && w.iter().enumerate().all(|(k, &u)| {
            let c = S::char_of(u);
            if k % 2 == 0 {
                c.is_ascii_alphabetic()
            } else {
                c == '.'
            }
        })
}

/// The one word `text._LAST_WORD` can capture in `piece[-12:]`: the match must end at the
/// final period, so its word is the run of ASCII letters and periods before it, opened by
/// the window's start or by a delimiter (a space, `([\"'/-` or an en dash).
fn last_word<'a, S: Script>(s: &S, piece: &'a [S::Unit]) -> Option<&'a [S::Unit]> {
    let window = &piece[piece.len().saturating_sub(12)..];
    let (&last, body) = window.split_last()?;
    if S::char_of(last) != '.' {
        return None;
    }
    let letter = |u: S::Unit| S::char_of(u).is_ascii_alphabetic();
    let start = match body.iter().rposition(|&u| !(letter(u) || S::char_of(u) == '.')) {
        None => 0,
        Some(q)
            if s.is_space(body[q])
                || matches!(
                    S::char_of(body[q]),
                    '(' | '[' | '"' | '\'' | '/' | '-' | '\u{2013}'
                ) =>
        {
            q + 1
        }
        Some(_) => return None,
    };
    let word = &body[start..];
    if is_initials::<S>(word) || (word.iter().all(|&u| letter(u)) && (2..=5).contains(&word.len()))
    {
        Some(word)
    } else {
        None
    }
}

fn trimmed<S: Script>(
    s: &S,
    t: &[S::Unit],
    mut start: usize,
    mut end: usize,
    out: &mut Vec<(usize, usize)>,
) {
    while start < end && s.is_space(t[start]) {
        start += 1;
    }
    while end > start && s.is_space(t[end - 1]) {
        end -= 1;
    }
    if end > start {
        out.push((start, end));
    }
}

/// `text.sentences_reference` of `t`, in unit offsets, with the abbreviations of
/// `text._ABBREVIATIONS`.
pub(crate) fn split<S: Script>(
    s: &S,
    abbreviations: &HashSet<Vec<u8>>,
    t: &[S::Unit],
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < t.len() {
        let Some(m_end) = sentence_end_at(s, t, i) else {
            i += 1;
            continue;
        };
        let mut end = i;
        if S::char_of(t[i]) != '\n' {
            end += 1;
            let newline = t[i..m_end].iter().any(|&u| S::char_of(u) == '\n');
            if !newline {
                let abbreviated = match last_word(s, &t[start..end]) {
                    None => false,
                    Some(word) => {
                        word.len() == 1
                            || word.iter().any(|&u| S::char_of(u) == '.')
                            || abbreviations.contains(
                                &word
                                    .iter()
                                    .map(|&u| S::char_of(u).to_ascii_lowercase() as u8)
                                    .collect::<Vec<u8>>(),
                            )
                    }
                };
                if abbreviated {
                    i = m_end;
                    continue;
                }
            }
        }
        trimmed(s, t, start, end, &mut out);
        start = m_end;
        i = m_end;
    }
    trimmed(s, t, start, t.len(), &mut out);
    out
}

// ---------------------------------------------------------------------------------------
// Names: the runs of `text._NAME_RUN` (`text._NAME_RUN_ASCII` on ASCII text).

/// `[^\W\d_a-z]`: a word character that is no decimal digit, underscore or ASCII small letter.
fn is_cap<S: Script>(s: &S, u: S::Unit) -> bool {
    let c = S::char_of(u);
    s.is_word(u) && !s.is_digit(u) && c != '_' && !c.is_ascii_lowercase()
}

/// `[\w'’\-]`.
fn is_name_char<S: Script>(s: &S, u: S::Unit) -> bool {
    s.is_word(u) || matches!(S::char_of(u), '\'' | '\u{2019}' | '-')
}

fn skip_name<S: Script>(s: &S, t: &[S::Unit], mut i: usize) -> usize {
    while i < t.len() && is_name_char(s, t[i]) {
        i += 1;
    }
    i
}

fn skip_space<S: Script>(s: &S, t: &[S::Unit], mut i: usize) -> usize {
    while i < t.len() && s.is_space(t[i]) {
        i += 1;
    }
    i
}

fn starts_with<S: Script>(t: &[S::Unit], at: usize, p: &[u8]) -> bool {
    t.len() >= at + p.len()
        && p.iter().enumerate().all(|(k, &b)| S::char_of(t[at + k]) == char::from(b))
}

/// The name run matched at `i` (a capital the look-behind allows): the end of the run.
fn name_run_end<S: Script>(s: &S, t: &[S::Unit], i: usize, particles: &[&[u8]]) -> usize {
    let mut end = skip_name(s, t, i + 1);
    loop {
        let after_space = skip_space(s, t, end);
        if after_space == end {
            return end;
        }
        let mut next = None;
        for p in particles {
            if starts_with::<S>(t, after_space, p) {
                let k = after_space + p.len();
                let cap = skip_space(s, t, k);
                if cap > k && cap < t.len() && is_cap(s, t[cap]) {
                    next = Some(cap);
                    break;
                }
            }
        }
        if next.is_none() && after_space < t.len() && is_cap(s, t[after_space]) {
            next = Some(after_space);
        }
        match next {
            Some(cap) => end = skip_name(s, t, cap + 1),
            None => return end,
        }
    }
}

/// The name runs in `t`, each with whether it opens a sentence and its words (`text.words`
/// of the run).
pub(crate) fn name_runs<S: Script>(
    s: &S,
    t: &[S::Unit],
    particles: &[&[u8]],
) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let allowed = is_cap(s, t[i])
            && (i == 0
                || !(s.is_word(t[i - 1]) || matches!(S::char_of(t[i - 1]), '\'' | '\u{2019}')));
        if !allowed {
            i += 1;
            continue;
        }
        let end = name_run_end(s, t, i, particles);
        let mut j = i;
        while j > 0 && matches!(S::char_of(t[j - 1]), ' ' | '\t' | '\r' | '\x0c' | '\x0b') {
            j -= 1;
        }
        let opens = j == 0
            || matches!(
                S::char_of(t[j - 1]),
                '.' | '!' | '?' | ':' | ';' | '"' | '\u{201c}' | '(' | '\n'
            );
        out.push((opens, words(s, &t[i..end])));
        i = end;
    }
    out
}

/// `text._add_name`: the words of a run, stopwords stripped at both ends, added as a name
/// (lengths in characters, `str.isdigit`).
pub(crate) fn add_name<S: Script>(
    s: &S,
    stopwords: &HashSet<Vec<u8>>,
    min_chars: usize,
    toks: &[String],
    out: &mut HashSet<String>,
    opens: bool,
) {
    let (mut lo, mut hi) = (0, toks.len());
    while lo < hi && stopwords.contains(toks[lo].as_bytes()) {
        lo += 1;
    }
    while hi > lo && stopwords.contains(toks[hi - 1].as_bytes()) {
        hi -= 1;
    }
    if hi - lo == 1 {
        let word = &toks[lo];
        if opens || word.chars().count() < min_chars || word.chars().all(|c| s.is_str_digit(c)) {
            return;
        }
        out.insert(word.clone());
    } else if hi > lo {
        out.insert(toks[lo..hi].join(" "));
    }
}

/// The names of `t` (`text.name_phrases_reference` of a scanned head).
pub(crate) fn names<S: Script>(
    s: &S,
    stopwords: &HashSet<Vec<u8>>,
    min_chars: usize,
    t: &[S::Unit],
    particles: &[&[u8]],
) -> HashSet<String> {
    let mut out = HashSet::new();
    for (opens, toks) in name_runs(s, t, particles) {
        if toks.len() > 1 {
            if opens {
                add_name(s, stopwords, min_chars, &toks[1..], &mut out, false);
            }
            add_name(s, stopwords, min_chars, &toks, &mut out, opens);
        } else if !toks.is_empty() && !opens {
            add_name(s, stopwords, min_chars, &toks, &mut out, false);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Sentence analysis: `extractive.analyse_reference`, one sentence.

/// `extractive.stem` of a word (lengths in characters).
pub(crate) fn stem<'a>(word: &'a str, suffixes: &[&[u8]]) -> &'a str {
    let chars = if word.is_ascii() { word.len() } else { word.chars().count() };
    for suffix in suffixes {
        if word.as_bytes().ends_with(suffix) && chars - suffix.len() >= 4 {
            return &word[..word.len() - suffix.len()];
        }
    }
    word
}

/// What the analysis reads of the words of `text.NOT_TERMS`, `extractive._PROTECTED_WORDS`
/// and `extractive._CONTRACTIONS`, the suffixes of `extractive.stem`, the months and
/// two-word phrases of `extractive._PROTECTED_PHRASES`.
pub(crate) struct AnalysisWords<'a> {
    pub not_terms: &'a HashSet<Vec<u8>>,
    pub protected_words: &'a HashSet<Vec<u8>>,
    pub contractions: &'a [Vec<u8>],
    pub suffixes: &'a [&'a [u8]],
    pub months: &'a [&'a [u8]],
    pub phrases: &'a [(&'a [u8], &'a [u8])],
}

/// One sentence analysed: its stemmed terms, whether it holds a protected fact, and its
/// words space-padded.
pub(crate) fn analyse_sentence<'w, S: Script>(
    s: &S,
    aw: &AnalysisWords<'_>,
    sentence: &[S::Unit],
    ws: &'w [String],
) -> (HashSet<&'w str>, bool, String) {
    let mut joined = String::with_capacity(sentence.len() + 2);
    joined.push(' ');
    for w in ws {
        joined.push_str(w);
        joined.push(' ');
    }
    if ws.is_empty() {
        joined.push(' ');
    }
    let terms: HashSet<&str> = ws
        .iter()
        .filter(|w| {
            !aw.not_terms.contains(w.as_bytes())
                && (w.chars().nth(1).is_some() || w.chars().all(|c| s.is_str_digit(c)))
        })
        .map(|w| stem(w, aw.suffixes))
        .collect();
    let is_month = |w: &[u8]| {
        w.len() >= 3 && aw.months.contains(&&w[..3]) && w[3..].iter().all(u8::is_ascii_lowercase)
    };
    let fact = sentence.iter().any(|&u| s.is_digit(u) || matches!(S::char_of(u), '%' | '\u{b0}'))
        || ws.iter().any(|w| aw.protected_words.contains(w.as_bytes()))
        || ws.iter().any(|w| is_month(w.as_bytes()))
        || ws.windows(2).any(|p| aw.phrases.contains(&(p[0].as_bytes(), p[1].as_bytes())));
    let fact = fact
        || (sentence.iter().any(|&u| S::char_of(u) == '\'') && {
            let low: String = sentence.iter().map(|&u| S::char_of(s.lower(u))).collect();
            let low = low.as_bytes();
            aw.contractions
                .iter()
                .any(|c| c.is_empty() || low.windows(c.len()).any(|w| w == c.as_slice()))
        });
    (terms, fact, joined)
}
