//! Compiled leaf computations of `ctxbudget.text` for ASCII text (and, in `latin.rs`, for
//! text of the Latin character table).
//!
//! Each function here computes exactly what its pure-Python twin in `ctxbudget/text.py`
//! computes (that code is the reference; the fidelity tests run both). Only ASCII input
//! reaches them: on ASCII text Python's `\w` is `[A-Za-z0-9_]`, `\s` is the ten bytes of
//! `is_py_space` and character offsets are byte offsets, so the regular expressions of the
//! reference reduce to the byte scans below.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFrozenSet, PyList, PyString, PyTuple};
use std::collections::HashSet;

mod bpe;
mod gate;
mod json_scan;
mod latin;
mod overlaps;

/// `str.isspace()` (and the regex `\s`) on an ASCII byte.
fn is_py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

/// The regex `\w` on an ASCII byte.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn ascii_str(text: &str) -> PyResult<&[u8]> {
    if !text.is_ascii() {
        return Err(PyValueError::new_err("ASCII text only"));
    }
    Ok(text.as_bytes())
}

// ---------------------------------------------------------------------------------------
// Shingles: `text._fold` over the concatenated words of several texts.

pub(crate) const SHINGLE_MULT: u64 = 1_000_003;
pub(crate) const SHINGLE_MASK: u64 = 0xFFFF_FFFF_FFFF;

/// The folded id of every window of `size` consecutive words of the texts' words laid end
/// to end, as native-endian uint64 bytes (`numpy.frombuffer(..., dtype=numpy.uint64)`):
/// `text._fold(ids, size)` where `ids` are the crc32 of each word's UTF-8 bytes.
#[pyfunction]
fn fold_windows<'py>(
    py: Python<'py>,
    token_lists: Vec<Bound<'py, PyList>>,
    size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    if size == 0 {
        return Err(PyValueError::new_err("size must be positive"));
    }
    let total: usize = token_lists.iter().map(|l| l.len()).sum();
    let mut ids: Vec<u64> = Vec::with_capacity(total);
    for list in &token_lists {
        for item in list.iter() {
            let word = item.downcast::<PyString>()?;
            ids.push(u64::from(crc32fast::hash(word.to_str()?.as_bytes())));
        }
    }
    if total < size {
        return Err(PyValueError::new_err("fewer words than the window size"));
    }
    let windows = total - size + 1;
    let mut out: Vec<u8> = Vec::with_capacity(windows * 8);
    for i in 0..windows {
        let mut acc = ids[i];
        for &id in &ids[i + 1..i + size] {
            acc = acc.wrapping_mul(SHINGLE_MULT).wrapping_add(id);
        }
        out.extend_from_slice(&(acc & SHINGLE_MASK).to_ne_bytes());
    }
    Ok(PyBytes::new(py, &out))
}

// ---------------------------------------------------------------------------------------
// Sentences: `text.sentences` on ASCII text.

/// `text._SENTENCE_END` tried at `i`: the end of the match, or None.
fn sentence_end_at(t: &[u8], i: usize) -> Option<usize> {
    match t[i] {
        b'\n' => {
            let mut j = i + 1;
            while j < t.len() && t[j] == b'\n' {
                j += 1;
            }
            Some(j)
        }
        b'.' | b'!' | b'?' => {
            let mut j = i + 1;
            while j < t.len() && matches!(t[j], b'"' | b'\'' | b')' | b']') {
                j += 1;
            }
            if j < t.len() && is_py_space(t[j]) {
                while j < t.len() && is_py_space(t[j]) {
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

/// A delimiter before the last word in `text._LAST_WORD` (whitespace or ``(["'/-``).
fn is_last_word_delimiter(b: u8) -> bool {
    is_py_space(b) || matches!(b, b'(' | b'[' | b'"' | b'\'' | b'/' | b'-')
}

/// `L(.L)*` with `L` an ASCII letter.
fn is_initials(s: &[u8]) -> bool {
    s.len() % 2 == 1
        && s.iter().enumerate().all(|(k, &b)| {
            if k % 2 == 0 {
                b.is_ascii_alphabetic()
            } else {
                b == b'.'
            }
        })
}

/// The one word `text._LAST_WORD` can capture in `piece[-12:]`: the match must end at the
/// final period, so its word is the run of letters and periods before it, opened by the
/// window's start or by a delimiter.
fn last_word(piece: &[u8]) -> Option<&[u8]> {
    let window = &piece[piece.len().saturating_sub(12)..];
    let (&last, body) = window.split_last()?;
    if last != b'.' {
        return None;
    }
    let start = match body.iter().rposition(|&b| !(b.is_ascii_alphabetic() || b == b'.')) {
        None => 0,
        Some(q) if is_last_word_delimiter(body[q]) => q + 1,
        Some(_) => return None,
    };
    let word = &body[start..];
    let letters = word.iter().all(u8::is_ascii_alphabetic);
    if is_initials(word) || (letters && (2..=5).contains(&word.len())) {
        Some(word)
    } else {
        None
    }
}

fn trimmed(t: &[u8], mut start: usize, mut end: usize, out: &mut Vec<(usize, usize)>) {
    while start < end && is_py_space(t[start]) {
        start += 1;
    }
    while end > start && is_py_space(t[end - 1]) {
        end -= 1;
    }
    if end > start {
        out.push((start, end));
    }
}

/// `text.sentences` of ASCII text, with the abbreviations of `text._ABBREVIATIONS`.
#[pyclass(frozen)]
struct SentenceSplitter {
    abbreviations: HashSet<Vec<u8>>,
    table: latin::Table,
}

#[pymethods]
impl SentenceSplitter {
    #[new]
    #[pyo3(signature = (abbreviations, table = Vec::new()))]
    fn new(abbreviations: Vec<String>, table: Vec<(u32, u8, u32)>) -> Self {
        let abbreviations = abbreviations.into_iter().map(String::into_bytes).collect();
        SentenceSplitter { abbreviations, table: latin::Table::new(&table) }
    }

    /// `text.sentences_reference` of text of the character table (character offsets), or
    /// None for text with another character.
    fn split_latin(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let t = self.table.chars(text)?;
        Some(latin::split(&self.table, &self.abbreviations, &t))
    }

    fn split(&self, text: &str) -> PyResult<Vec<(usize, usize)>> {
        let t = ascii_str(text)?;
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < t.len() {
            let Some(m_end) = sentence_end_at(t, i) else {
                i += 1;
                continue;
            };
            let mut end = i;
            if t[i] != b'\n' {
                end += 1;
                let newline = t[i..m_end].contains(&b'\n');
                if !newline && self.abbreviated(&t[start..end]) {
                    i = m_end;
                    continue;
                }
            }
            trimmed(t, start, end, &mut out);
            start = m_end;
            i = m_end;
        }
        trimmed(t, start, t.len(), &mut out);
        Ok(out)
    }
}

impl SentenceSplitter {
    fn abbreviated(&self, piece: &[u8]) -> bool {
        match last_word(piece) {
            None => false,
            Some(word) => {
                word.len() == 1
                    || word.contains(&b'.')
                    || self.abbreviations.contains(&word.to_ascii_lowercase())
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Words: `text.words` on Latin text beyond ASCII.

/// `text.words_reference` of text of the character table (ASCII text stays on the Python
/// side's byte translation).
#[pyclass(frozen)]
struct WordSplitter {
    table: latin::Table,
}

#[pymethods]
impl WordSplitter {
    #[new]
    fn new(table: Vec<(u32, u8, u32)>) -> Self {
        WordSplitter { table: latin::Table::new(&table) }
    }

    /// The lower-cased words of `text`, or None for text with a character beyond the table.
    fn words(&self, text: &str) -> Option<Vec<String>> {
        self.table.words_of(text)
    }
}

// ---------------------------------------------------------------------------------------
// Names: `text.name_phrases` on ASCII text.

/// The name particles of `text._NAME_RUN_ASCII`, in its order.
const PARTICLES: [&[u8]; 15] = [
    b"of", b"the", b"de", b"del", b"la", b"le", b"du", b"da", b"von", b"van", b"der", b"den",
    b"y", b"upon", b"on",
];

fn is_name_char(b: u8) -> bool {
    is_word(b) || b == b'\'' || b == b'-'
}

fn skip(t: &[u8], mut i: usize, pred: fn(u8) -> bool) -> usize {
    while i < t.len() && pred(t[i]) {
        i += 1;
    }
    i
}

/// Where a name word opening at `i` (a capital) ends.
fn name_word_end(t: &[u8], i: usize) -> usize {
    skip(t, i + 1, is_name_char)
}

/// `text._NAME_RUN_ASCII` matched at `i`, whose byte is a capital the look-behind allows:
/// the end of the run.
fn name_run_end(t: &[u8], i: usize) -> usize {
    let mut end = name_word_end(t, i);
    loop {
        let after_space = skip(t, end, is_py_space);
        if after_space == end {
            return end;
        }
        let mut next = None;
        for p in PARTICLES {
            if t[after_space..].starts_with(p) {
                let k = after_space + p.len();
                let cap = skip(t, k, is_py_space);
                if cap > k && cap < t.len() && t[cap].is_ascii_uppercase() {
                    next = Some(cap);
                    break;
                }
            }
        }
        if next.is_none() && after_space < t.len() && t[after_space].is_ascii_uppercase() {
            next = Some(after_space);
        }
        match next {
            Some(cap) => end = name_word_end(t, cap),
            None => return end,
        }
    }
}

/// The lower-case `[a-z0-9]+` runs of `run`.
fn ascii_words(run: &[u8]) -> Vec<Vec<u8>> {
    run.split(|b| !b.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(<[u8]>::to_ascii_lowercase)
        .collect()
}

/// `text.name_phrases` of ASCII text, with `text.STOPWORDS`, `text.NAME_MIN_CHARS` and
/// `text.NAME_SCAN_CHARS`.
#[pyclass(frozen)]
struct NameFinder {
    stopwords: HashSet<Vec<u8>>,
    min_chars: usize,
    scan_chars: usize,
    table: latin::Table,
}

fn frozenset_of<'py>(py: Python<'py>, out: &HashSet<Vec<u8>>) -> PyResult<Bound<'py, PyFrozenSet>> {
    let names: Vec<Bound<'py, PyString>> = out
        .iter()
        .map(|w| PyString::new(py, std::str::from_utf8(w).unwrap_or_default()))
        .collect();
    PyFrozenSet::new(py, &names)
}

#[pymethods]
impl NameFinder {
    #[new]
    #[pyo3(signature = (stopwords, min_chars, scan_chars, table = Vec::new()))]
    fn new(
        stopwords: Vec<String>,
        min_chars: usize,
        scan_chars: usize,
        table: Vec<(u32, u8, u32)>,
    ) -> Self {
        let stopwords = stopwords.into_iter().map(String::into_bytes).collect();
        NameFinder { stopwords, min_chars, scan_chars, table: latin::Table::new(&table) }
    }

    /// The names, as a frozenset of str.
    fn names<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyFrozenSet>> {
        let full = ascii_str(text)?;
        let t = &full[..full.len().min(self.scan_chars)];
        frozenset_of(py, &self.ascii_names(t))
    }

    /// `text.name_phrases_reference` of any text whose scanned head is of the character
    /// table (an ASCII head is read as ASCII, as the reference does), or None.
    fn names_latin<'py>(
        &self,
        py: Python<'py>,
        text: &str,
    ) -> PyResult<Option<Bound<'py, PyFrozenSet>>> {
        let Some(head) = self.table.head(text, self.scan_chars) else {
            return Ok(None);
        };
        if head.iter().all(char::is_ascii) {
            let bytes: Vec<u8> = head.iter().map(|&c| c as u8).collect();
            return Ok(Some(frozenset_of(py, &self.ascii_names(&bytes))?));
        }
        let mut out: HashSet<Vec<u8>> = HashSet::new();
        for (opens, toks) in latin::name_runs(&self.table, &head, &PARTICLES) {
            if toks.len() > 1 {
                if opens {
                    self.add_latin(&toks[1..], &mut out, false);
                }
                self.add_latin(&toks, &mut out, opens);
            } else if !toks.is_empty() && !opens {
                self.add_latin(&toks, &mut out, false);
            }
        }
        Ok(Some(frozenset_of(py, &out)?))
    }

    /// `entities.modifier_only` of the one-word name whose capitalised form is `cap`, or
    /// None when a character it rests on is beyond the character table.
    fn modifier_only(&self, cap: &str, text: &str) -> Option<bool> {
        latin::modifier_only(&self.table, &self.stopwords, cap, text)
    }
}

impl NameFinder {
    fn ascii_names(&self, t: &[u8]) -> HashSet<Vec<u8>> {
        let mut out: HashSet<Vec<u8>> = HashSet::new();
        let mut i = 0;
        while i < t.len() {
            let allowed = t[i].is_ascii_uppercase()
                && (i == 0 || !(is_word(t[i - 1]) || t[i - 1] == b'\''));
            if !allowed {
                i += 1;
                continue;
            }
            let end = name_run_end(t, i);
            let mut j = i;
            while j > 0 && matches!(t[j - 1], b' ' | b'\t' | b'\r' | 0x0c | 0x0b) {
                j -= 1;
            }
            let opens = j == 0 || matches!(t[j - 1], b'.' | b'!' | b'?' | b':' | b';' | b'"' | b'(' | b'\n');
            let toks = ascii_words(&t[i..end]);
            if toks.len() > 1 {
                if opens {
                    self.add(&toks[1..], &mut out, false);
                }
                self.add(&toks, &mut out, opens);
            } else if !toks.is_empty() && !opens {
                self.add(&toks, &mut out, false);
            }
            i = end;
        }
        out
    }

    /// `text._add_name` of words beyond ASCII (lengths in characters, `str.isdigit`).
    fn add_latin(&self, toks: &[String], out: &mut HashSet<Vec<u8>>, opens: bool) {
        let (mut lo, mut hi) = (0, toks.len());
        while lo < hi && self.stopwords.contains(toks[lo].as_bytes()) {
            lo += 1;
        }
        while hi > lo && self.stopwords.contains(toks[hi - 1].as_bytes()) {
            hi -= 1;
        }
        if hi - lo == 1 {
            let word = &toks[lo];
            if opens
                || word.chars().count() < self.min_chars
                || word.chars().all(|c| self.table.is_str_digit(c))
            {
                return;
            }
            out.insert(word.clone().into_bytes());
        } else if hi > lo {
            out.insert(toks[lo..hi].join(" ").into_bytes());
        }
    }

    fn add(&self, toks: &[Vec<u8>], out: &mut HashSet<Vec<u8>>, opens: bool) {
        let (mut lo, mut hi) = (0, toks.len());
        while lo < hi && self.stopwords.contains(&toks[lo]) {
            lo += 1;
        }
        while hi > lo && self.stopwords.contains(&toks[hi - 1]) {
            hi -= 1;
        }
        if hi - lo == 1 {
            let word = &toks[lo];
            if opens || word.len() < self.min_chars || word.iter().all(u8::is_ascii_digit) {
                return;
            }
            out.insert(word.clone());
        } else if hi > lo {
            out.insert(toks[lo..hi].join(&b' '));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sentence analysis: `extractive._analyse_ascii`.

/// The suffixes `extractive.stem` strips, in its order.
const SUFFIXES: [&[u8]; 7] = [b"ings", b"ing", b"ers", b"er", b"ed", b"es", b"s"];
/// The months `extractive._PROTECTED_PHRASES` reads (a word opening with one, then letters).
const MONTHS: [&[u8]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
    b"dec",
];
/// The two-word phrases of `extractive._PROTECTED_PHRASES`.
const PHRASES: [(&[u8], &[u8]); 6] = [
    (b"only", b"if"),
    (b"provided", b"that"),
    (b"at", b"least"),
    (b"at", b"most"),
    (b"less", b"than"),
    (b"more", b"than"),
];

/// `extractive.stem` of an ASCII word.
fn stem(word: &[u8]) -> &[u8] {
    for suffix in SUFFIXES {
        if word.ends_with(suffix) && word.len() - suffix.len() >= 4 {
            return &word[..word.len() - suffix.len()];
        }
    }
    word
}

fn is_month_word(word: &[u8]) -> bool {
    word.len() >= 3
        && MONTHS.contains(&&word[..3])
        && word[3..].iter().all(u8::is_ascii_lowercase)
}

/// `extractive._analyse_ascii` with the words of `text.NOT_TERMS`,
/// `extractive._PROTECTED_WORDS` and `extractive._CONTRACTIONS`.
#[pyclass(frozen)]
struct SentenceAnalyser {
    not_terms: HashSet<Vec<u8>>,
    protected_words: HashSet<Vec<u8>>,
    contractions: Vec<Vec<u8>>,
    table: latin::Table,
}

#[pymethods]
impl SentenceAnalyser {
    #[new]
    #[pyo3(signature = (not_terms, protected_words, contractions, table = Vec::new()))]
    fn new(
        not_terms: Vec<String>,
        protected_words: Vec<String>,
        contractions: Vec<String>,
        table: Vec<(u32, u8, u32)>,
    ) -> Self {
        SentenceAnalyser {
            not_terms: not_terms.into_iter().map(String::into_bytes).collect(),
            protected_words: protected_words.into_iter().map(String::into_bytes).collect(),
            contractions: contractions.into_iter().map(String::into_bytes).collect(),
            table: latin::Table::new(&table),
        }
    }

    /// The non-ASCII branch of `extractive.analyse` on text of the character table
    /// (`bounds` in character offsets): the three tuples of `analyse`, or None for text
    /// with another character.
    fn analyse_latin<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        bounds: Vec<(usize, usize)>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some(t) = self.table.chars(text) else {
            return Ok(None);
        };
        let tb = &self.table;
        let mut stems = Vec::with_capacity(bounds.len());
        let mut protected = Vec::with_capacity(bounds.len());
        let mut padded = Vec::with_capacity(bounds.len());
        for (s, e) in bounds {
            if s > e || e > t.len() {
                return Err(PyValueError::new_err("a sentence bound outside the text"));
            }
            let sentence = &t[s..e];
            let ws = tb.words(sentence);
            let mut joined = String::with_capacity(sentence.len() + 2);
            joined.push(' ');
            for w in &ws {
                joined.push_str(w);
                joined.push(' ');
            }
            if ws.is_empty() {
                joined.push(' ');
            }
            let terms: HashSet<&str> = ws
                .iter()
                .filter(|w| {
                    !self.not_terms.contains(w.as_bytes())
                        && (w.chars().nth(1).is_some() || w.chars().all(|c| tb.is_str_digit(c)))
                })
                .map(|w| latin::stem(w, &SUFFIXES))
                .collect();
            let terms: Vec<Bound<'py, PyString>> =
                terms.into_iter().map(|w| PyString::new(py, w)).collect();
            stems.push(PyFrozenSet::new(py, &terms)?);
            let bytes: Vec<Vec<u8>> = ws.iter().map(|w| w.clone().into_bytes()).collect();
            let fact = sentence.iter().any(|&c| tb.is_digit(c) || c == '%' || c == '\u{b0}')
                || bytes.iter().any(|w| self.protected_words.contains(w))
                || bytes.iter().any(|w| is_month_word(w))
                || bytes
                    .windows(2)
                    .any(|p| PHRASES.contains(&(p[0].as_slice(), p[1].as_slice())));
            let fact = fact
                || (sentence.contains(&'\'') && {
                    let low = tb.lowered(sentence).into_bytes();
                    self.contractions
                        .iter()
                        .any(|c| c.is_empty() || low.windows(c.len()).any(|w| w == c.as_slice()))
                });
            protected.push(fact);
            padded.push(PyString::new(py, &joined));
        }
        let protected: Vec<Bound<'py, PyBool>> =
            protected.into_iter().map(|b| PyBool::new(py, b).to_owned()).collect();
        Ok(Some(PyTuple::new(
            py,
            [
                PyTuple::new(py, stems)?.into_any(),
                PyTuple::new(py, protected)?.into_any(),
                PyTuple::new(py, padded)?.into_any(),
            ],
        )?))
    }

    /// Per sentence of `bounds`: its stemmed terms (frozensets), whether it holds a
    /// protected fact, and its words space-padded; three tuples.
    fn analyse<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        bounds: Vec<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let t = ascii_str(text)?;
        let percent = t.contains(&b'%');
        let quote = t.contains(&b'\'');
        let mut stems = Vec::with_capacity(bounds.len());
        let mut protected = Vec::with_capacity(bounds.len());
        let mut padded = Vec::with_capacity(bounds.len());
        for (s, e) in bounds {
            if s > e || e > t.len() {
                return Err(PyValueError::new_err("a sentence bound outside the text"));
            }
            let sentence = &t[s..e];
            let ws = ascii_words(sentence);
            let mut joined = Vec::with_capacity(sentence.len() + 2);
            joined.push(b' ');
            for w in &ws {
                joined.extend_from_slice(w);
                joined.push(b' ');
            }
            if ws.is_empty() {
                joined.push(b' ');
            }
            let terms: HashSet<&[u8]> = ws
                .iter()
                .filter(|w| !self.not_terms.contains(*w))
                .map(|w| stem(w))
                .collect();
            let terms: Vec<Bound<'py, PyString>> = terms
                .into_iter()
                .map(|w| PyString::new(py, std::str::from_utf8(w).unwrap_or_default()))
                .collect();
            stems.push(PyFrozenSet::new(py, &terms)?);
            protected.push(self.protected(sentence, &ws, percent, quote));
            padded.push(PyString::new(py, std::str::from_utf8(&joined).unwrap_or_default()));
        }
        let protected: Vec<Bound<'py, PyBool>> =
            protected.into_iter().map(|b| PyBool::new(py, b).to_owned()).collect();
        PyTuple::new(
            py,
            [
                PyTuple::new(py, stems)?.into_any(),
                PyTuple::new(py, protected)?.into_any(),
                PyTuple::new(py, padded)?.into_any(),
            ],
        )
    }
}

impl SentenceAnalyser {
    fn protected(&self, sentence: &[u8], ws: &[Vec<u8>], percent: bool, quote: bool) -> bool {
        let digit = ws.iter().any(|w| w.iter().any(u8::is_ascii_digit));
        if digit
            || (percent && sentence.contains(&b'%'))
            || ws.iter().any(|w| self.protected_words.contains(w))
            || ws.iter().any(|w| is_month_word(w))
            || ws.windows(2).any(|p| PHRASES.contains(&(p[0].as_slice(), p[1].as_slice())))
        {
            return true;
        }
        if quote && sentence.contains(&b'\'') {
            let low = sentence.to_ascii_lowercase();
            return self
                .contractions
                .iter()
                .any(|c| c.is_empty() || low.windows(c.len()).any(|w| w == c.as_slice()));
        }
        false
    }
}

#[pymodule]
fn ctxbudget_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The interface version `ctxbudget.native.API_VERSION` checks.
    m.add("API_VERSION", 7)?;
    m.add_function(wrap_pyfunction!(fold_windows, m)?)?;
    m.add_function(wrap_pyfunction!(overlaps::overlaps, m)?)?;
    m.add_class::<SentenceSplitter>()?;
    m.add_class::<NameFinder>()?;
    m.add_class::<SentenceAnalyser>()?;
    m.add_class::<WordSplitter>()?;
    gate::register(m)?;
    m.add_function(wrap_pyfunction!(json_scan::scan_json, m)?)?;
    m.add_class::<bpe::PieceCounter>()?;
    Ok(())
}
