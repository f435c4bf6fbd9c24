//! The leaf computations of `ctxbudget.text` and `ctxbudget.extractive` on Latin text: text
//! whose every character is in the character table the Python side builds from its own
//! Unicode database (`text.latin_table`: ASCII, Latin-1, Latin Extended, general
//! punctuation...). For those characters the table gives what the reference's regular
//! expressions see: `\w`, `\d`, `\s` (`str.isspace`), `str.isdigit`, `str.islower` and the one character
//! `str.lower` makes of each, so the scans below match the regexes character by character.
//! The scans themselves are in `script.rs`, over `Script`, which the table implements.
//! Offsets are character offsets (Python's), never byte offsets. Text with any other
//! character is answered with None: the caller runs the reference.

use crate::script::Script;

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

impl crate::script::Script for Table {
    type Unit = char;
    fn is_word(&self, c: char) -> bool {
        self.flags(c) & WORD != 0
    }
    fn is_digit(&self, c: char) -> bool {
        self.flags(c) & DIGIT != 0
    }
    fn is_space(&self, c: char) -> bool {
        self.flags(c) & SPACE != 0
    }
    fn lower(&self, c: char) -> char {
        self.lower[c as usize]
    }
    fn is_str_digit(&self, c: char) -> bool {
        self.flags(c) & ISDIGIT != 0
    }
    fn char_of(c: char) -> char {
        c
    }
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

    /// Whether `c` is in the table.
    pub(crate) fn knows(&self, c: char) -> bool {
        self.flags(c) & KNOWN != 0
    }

    pub(crate) fn is_lower(&self, c: char) -> bool {
        self.flags(c) & ISLOWER != 0
    }

    /// `text.words` of `text` read straight from its UTF-8, or None when a character of it
    /// is not in the table.
    pub(crate) fn words_of(&self, text: &str) -> Option<Vec<String>> {
        let cs: Vec<char> = text.chars().collect();
        if cs.iter().any(|&c| !self.knows(c)) {
            return None;
        }
        Some(crate::script::words(self, &cs))
    }
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
