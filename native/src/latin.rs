//! The leaf computations of `ctxbudget.text` and `ctxbudget.extractive` on Latin text: text
//! whose every character is in the character table the Python side builds from its own
//! Unicode database (`text.latin_table`: ASCII, Latin-1, Latin Extended, general
//! punctuation...). For those characters the table gives what the reference's regular
//! expressions see: `\w`, `\d`, `\s` (`str.isspace`), `str.isdigit`, `str.islower` and the one character
//! `str.lower` makes of each, so the scans below match the regexes character by character.
//! Offsets are character offsets (Python's), never byte offsets. Text with any other
//! character is answered with None: the caller runs the reference.

/// The character is in the table.
const KNOWN: u8 = 1;
/// The regex `\w`.
const WORD: u8 = 2;
/// The regex `\d` (a decimal digit).
const DIGIT: u8 = 4;
/// The regex `\s` and `str.isspace`.
const SPACE: u8 = 8;
/// `str.isdigit`.
const ISDIGIT: u8 = 16;
/// `str.islower` (of the character alone).
const ISLOWER: u8 = 32;

/// What the reference's regexes and `str` methods see of each character of the table.
pub(crate) struct Table {
    flags: Vec<u8>,
    lower: Vec<char>,
}

impl Table {
    /// From `(code point, flags, code point of its lower case)` entries; a character whose
    /// lower case is not in the table is left out of it (the text goes to the reference).
    pub(crate) fn new(entries: &[(u32, u8, u32)]) -> Table {
        let size = entries.iter().map(|e| e.0 as usize + 1).max().unwrap_or(0);
        let mut flags = vec![0u8; size];
        let mut lower = vec!['\0'; size];
        for &(cp, f, low) in entries {
            if let (Some(_), Some(l)) = (char::from_u32(cp), char::from_u32(low)) {
                flags[cp as usize] = f | KNOWN;
                lower[cp as usize] = l;
            }
        }
        for cp in 0..size {
            let l = lower[cp] as usize;
            if flags[cp] & KNOWN != 0 && (l >= size || flags[l] & KNOWN == 0) {
                flags[cp] = 0;
            }
        }
        Table { flags, lower }
    }

    fn flags(&self, c: char) -> u8 {
        self.flags.get(c as usize).copied().unwrap_or(0)
    }

    /// The characters of `text`, or None when one of them is not in the table.
    pub(crate) fn chars(&self, text: &str) -> Option<Vec<char>> {
        let mut out = Vec::with_capacity(text.len());
        for c in text.chars() {
            if self.flags(c) & KNOWN == 0 {
                return None;
            }
            out.push(c);
        }
        Some(out)
    }

    /// The first `limit` characters of `text`, or None when one of them is not in the table.
    pub(crate) fn head(&self, text: &str, limit: usize) -> Option<Vec<char>> {
        let mut out = Vec::with_capacity(text.len().min(limit));
        for c in text.chars().take(limit) {
            if self.flags(c) & KNOWN == 0 {
                return None;
            }
            out.push(c);
        }
        Some(out)
    }

    pub(crate) fn is_word(&self, c: char) -> bool {
        self.flags(c) & WORD != 0
    }

    pub(crate) fn is_digit(&self, c: char) -> bool {
        self.flags(c) & DIGIT != 0
    }

    pub(crate) fn is_space(&self, c: char) -> bool {
        self.flags(c) & SPACE != 0
    }

    pub(crate) fn is_str_digit(&self, c: char) -> bool {
        self.flags(c) & ISDIGIT != 0
    }

    /// Whether `c` is in the table.
    pub(crate) fn knows(&self, c: char) -> bool {
        self.flags(c) & KNOWN != 0
    }

    pub(crate) fn is_lower(&self, c: char) -> bool {
        self.flags(c) & ISLOWER != 0
    }

    /// `str.lower` of a character of the table (one character).
    pub(crate) fn lower(&self, c: char) -> char {
        self.lower[c as usize]
    }

    /// `text.words`: the runs of `[^\W_]` of the lower-cased characters.
    pub(crate) fn words(&self, cs: &[char]) -> Vec<String> {
        self.split_words(cs.iter().copied())
    }

    /// `text.words` of `text` read straight from its UTF-8, or None when a character of it
    /// is not in the table.
    pub(crate) fn words_of(&self, text: &str) -> Option<Vec<String>> {
        if text.chars().any(|c| self.flags(c) & KNOWN == 0) {
            return None;
        }
        Some(self.split_words(text.chars()))
    }

    /// The runs of `[^\W_]` of the lower-cased characters of `chars` (all in the table).
    fn split_words(&self, chars: impl Iterator<Item = char>) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        for c in chars {
            let l = self.lower(c);
            if l != '_' && self.is_word(l) {
                cur.push(l);
            } else if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    /// `str.lower` of the characters.
    pub(crate) fn lowered(&self, cs: &[char]) -> String {
        cs.iter().map(|&c| self.lower(c)).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Sentences: `text.sentences_reference`.

/// `text._SENTENCE_END` tried at `i`: the end of the match, or None.
fn sentence_end_at(tb: &Table, t: &[char], i: usize) -> Option<usize> {
    match t[i] {
        '\n' => {
            let mut j = i + 1;
            while j < t.len() && t[j] == '\n' {
                j += 1;
            }
            Some(j)
        }
        '.' | '!' | '?' => {
            let mut j = i + 1;
            while j < t.len() && matches!(t[j], '"' | '\'' | ')' | ']') {
                j += 1;
            }
            if j < t.len() && tb.is_space(t[j]) {
                while j < t.len() && tb.is_space(t[j]) {
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
fn is_initials(s: &[char]) -> bool {
    s.len() % 2 == 1
        && s.iter().enumerate().all(|(k, &c)| {
            if k % 2 == 0 {
                c.is_ascii_alphabetic()
            } else {
                c == '.'
            }
        })
}

/// The one word `text._LAST_WORD` can capture in `piece[-12:]` (see `lib.rs`: its word is
/// the run of ASCII letters and periods before the final period, opened by the window's
/// start or by a delimiter: a space, `([\"'/-` or an en dash).
fn last_word<'a>(tb: &Table, piece: &'a [char]) -> Option<&'a [char]> {
    let window = &piece[piece.len().saturating_sub(12)..];
    let (&last, body) = window.split_last()?;
    if last != '.' {
        return None;
    }
    let start = match body.iter().rposition(|&c| !(c.is_ascii_alphabetic() || c == '.')) {
        None => 0,
        Some(q)
            if tb.is_space(body[q])
                || matches!(body[q], '(' | '[' | '"' | '\'' | '/' | '-' | '\u{2013}') =>
        {
            q + 1
        }
        Some(_) => return None,
    };
    let word = &body[start..];
    let letters = word.iter().all(char::is_ascii_alphabetic);
    if is_initials(word) || (letters && (2..=5).contains(&word.len())) {
        Some(word)
    } else {
        None
    }
}

fn trimmed(tb: &Table, t: &[char], mut start: usize, mut end: usize, out: &mut Vec<(usize, usize)>) {
    while start < end && tb.is_space(t[start]) {
        start += 1;
    }
    while end > start && tb.is_space(t[end - 1]) {
        end -= 1;
    }
    if end > start {
        out.push((start, end));
    }
}

/// `text.sentences_reference` of Latin text, in character offsets.
pub(crate) fn split(
    tb: &Table,
    abbreviations: &std::collections::HashSet<Vec<u8>>,
    t: &[char],
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < t.len() {
        let Some(m_end) = sentence_end_at(tb, t, i) else {
            i += 1;
            continue;
        };
        let mut end = i;
        if t[i] != '\n' {
            end += 1;
            let newline = t[i..m_end].contains(&'\n');
            if !newline {
                let abbreviated = match last_word(tb, &t[start..end]) {
                    None => false,
                    Some(word) => {
                        word.len() == 1
                            || word.contains(&'.')
                            || abbreviations.contains(
                                &word.iter().map(|c| c.to_ascii_lowercase() as u8).collect::<Vec<u8>>(),
                            )
                    }
                };
                if abbreviated {
                    i = m_end;
                    continue;
                }
            }
        }
        trimmed(tb, t, start, end, &mut out);
        start = m_end;
        i = m_end;
    }
    trimmed(tb, t, start, t.len(), &mut out);
    out
}

// ---------------------------------------------------------------------------------------
// Names: `text.name_phrases_reference` with `text._NAME_RUN` (text beyond ASCII).

/// `[^\W\d_a-z]`: a word character that is no decimal digit, underscore or ASCII small letter.
fn is_cap(tb: &Table, c: char) -> bool {
    tb.is_word(c) && !tb.is_digit(c) && c != '_' && !c.is_ascii_lowercase()
}

/// `[\w'’\-]`.
fn is_name_char(tb: &Table, c: char) -> bool {
    tb.is_word(c) || matches!(c, '\'' | '\u{2019}' | '-')
}

fn skip_name(tb: &Table, t: &[char], mut i: usize) -> usize {
    while i < t.len() && is_name_char(tb, t[i]) {
        i += 1;
    }
    i
}

fn skip_space(tb: &Table, t: &[char], mut i: usize) -> usize {
    while i < t.len() && tb.is_space(t[i]) {
        i += 1;
    }
    i
}

fn starts_with(t: &[char], at: usize, p: &[u8]) -> bool {
    t.len() >= at + p.len() && p.iter().enumerate().all(|(k, &b)| t[at + k] == b as char)
}

/// `text._NAME_RUN` matched at `i` (a capital the look-behind allows): the end of the run.
fn name_run_end(tb: &Table, t: &[char], i: usize, particles: &[&[u8]]) -> usize {
    let mut end = skip_name(tb, t, i + 1);
    loop {
        let after_space = skip_space(tb, t, end);
        if after_space == end {
            return end;
        }
        let mut next = None;
        for p in particles {
            if starts_with(t, after_space, p) {
                let k = after_space + p.len();
                let cap = skip_space(tb, t, k);
                if cap > k && cap < t.len() && is_cap(tb, t[cap]) {
                    next = Some(cap);
                    break;
                }
            }
        }
        if next.is_none() && after_space < t.len() && is_cap(tb, t[after_space]) {
            next = Some(after_space);
        }
        match next {
            Some(cap) => end = skip_name(tb, t, cap + 1),
            None => return end,
        }
    }
}

/// The runs of `text._NAME_RUN` in `t`, each with whether it opens a sentence and its words
/// (`text.words` of the run).
pub(crate) fn name_runs(tb: &Table, t: &[char], particles: &[&[u8]]) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let allowed = is_cap(tb, t[i])
            && (i == 0 || !(tb.is_word(t[i - 1]) || matches!(t[i - 1], '\'' | '\u{2019}')));
        if !allowed {
            i += 1;
            continue;
        }
        let end = name_run_end(tb, t, i, particles);
        let mut j = i;
        while j > 0 && matches!(t[j - 1], ' ' | '\t' | '\r' | '\x0c' | '\x0b') {
            j -= 1;
        }
        let opens = j == 0
            || matches!(t[j - 1], '.' | '!' | '?' | ':' | ';' | '"' | '\u{201c}' | '(' | '\n');
        out.push((opens, tb.words(&t[i..end])));
        i = end;
    }
    out
}

// ---------------------------------------------------------------------------------------
// Sentence analysis: the non-ASCII branch of `extractive.analyse`.

/// `extractive.stem` of a word (lengths in characters).
pub(crate) fn stem<'a>(word: &'a str, suffixes: &[&[u8]]) -> &'a str {
    let chars = word.chars().count();
    for suffix in suffixes {
        if word.as_bytes().ends_with(suffix) && chars - suffix.len() >= 4 {
            return &word[..word.len() - suffix.len()];
        }
    }
    word
}

// ---------------------------------------------------------------------------------------
// Modifiers: `entities.modifier_only`.

/// `entities.modifier_only` of the word whose capitalised form is `cap`: whether every use
/// of `cap` in `text` as a whole word (`(?<!\w)Cap(?!\w)`) is followed on its line
/// (`[ \t]*(\w*)`) by a word opening with a small letter that is not a stopword, and
/// there is one use at least. None when a character the answer rests on is not in the
/// table (the caller runs the reference).
pub(crate) fn modifier_only(
    tb: &Table,
    stopwords: &std::collections::HashSet<Vec<u8>>,
    cap: &str,
    text: &str,
) -> Option<bool> {
    let step = cap.chars().next()?.len_utf8();
    let word_at = |c: Option<char>| -> Option<bool> {
        match c {
            None => Some(false),
            Some(c) if tb.knows(c) => Some(tb.is_word(c)),
            Some(_) => None,
        }
    };
    let mut from = 0;
    let mut used = false;
    while let Some(rel) = text[from..].find(cap) {
        let at = from + rel;
        let end = at + cap.len();
        if word_at(text[..at].chars().next_back())? || word_at(text[end..].chars().next())? {
            from = at + step;
            continue;
        }
        let rest = &text[end..];
        let start = end + (rest.len() - rest.trim_start_matches([' ', '\t']).len());
        let mut stop = start;
        for c in text[start..].chars() {
            if !tb.knows(c) {
                return None;
            }
            if !tb.is_word(c) {
                break;
            }
            stop += c.len_utf8();
        }
        let follower = &text[start..stop];
        let first = follower.chars().next();
        if !(first.is_some_and(|c| tb.is_lower(c)) && !stopwords.contains(follower.as_bytes())) {
            return Some(false);
        }
        used = true;
        from = stop;
    }
    Some(used)
}
