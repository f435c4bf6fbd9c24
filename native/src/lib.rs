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
mod novelty;
mod overlaps;
mod rank;
mod rough;
mod script;

use script::{Ascii, Script};

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
// Sentences: `text.sentences` (`script::split`).

/// `text.sentences` of ASCII text, and `text.sentences_reference` of Latin text, with the
/// abbreviations of `text._ABBREVIATIONS`.
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
        Some(script::split(&self.table, &self.abbreviations, &t))
    }

    fn split(&self, text: &str) -> PyResult<Vec<(usize, usize)>> {
        Ok(script::split(&Ascii, &self.abbreviations, ascii_str(text)?))
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
// Names: `text.name_phrases` (`script::names`).

/// The name particles of `text._NAME_RUN_ASCII`, in its order.
const PARTICLES: [&[u8]; 15] = [
    b"of", b"the", b"de", b"del", b"la", b"le", b"du", b"da", b"von", b"van", b"der", b"den",
    b"y", b"upon", b"on",
];

/// `text.name_phrases` of ASCII and Latin text, with `text.STOPWORDS`, `text.NAME_MIN_CHARS`
/// and `text.NAME_SCAN_CHARS`.
#[pyclass(frozen)]
struct NameFinder {
    stopwords: HashSet<Vec<u8>>,
    min_chars: usize,
    scan_chars: usize,
    table: latin::Table,
}

fn frozenset_of<'py>(py: Python<'py>, out: &HashSet<String>) -> PyResult<Bound<'py, PyFrozenSet>> {
    let names: Vec<Bound<'py, PyString>> = out.iter().map(|w| PyString::new(py, w)).collect();
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
        frozenset_of(py, &self.names_of(&Ascii, t))
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
        let found = if head.iter().all(char::is_ascii) {
            let bytes: Vec<u8> = head.iter().map(|&c| c as u8).collect();
            self.names_of(&Ascii, &bytes)
        } else {
            self.names_of(&self.table, &head)
        };
        Ok(Some(frozenset_of(py, &found)?))
    }

    /// `entities.modifier_only` of the one-word name whose capitalised form is `cap`, or
    /// None when a character it rests on is beyond the character table.
    fn modifier_only(&self, cap: &str, text: &str) -> Option<bool> {
        latin::modifier_only(&self.table, &self.stopwords, cap, text)
    }
}

impl NameFinder {
    fn names_of<S: Script>(&self, s: &S, t: &[S::Unit]) -> HashSet<String> {
        script::names(s, &self.stopwords, self.min_chars, t, &PARTICLES)
    }
}

// ---------------------------------------------------------------------------------------
// Sentence analysis: `extractive.analyse` (`script::analyse_sentence`).

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

/// `extractive._analyse_ascii` and the non-ASCII branch of `extractive.analyse`, with the
/// words of `text.NOT_TERMS`, `extractive._PROTECTED_WORDS` and `extractive._CONTRACTIONS`.
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
        Ok(Some(self.analyse_with(py, &self.table, &t, bounds)?))
    }

    /// Per sentence of `bounds`: its stemmed terms (frozensets), whether it holds a
    /// protected fact, and its words space-padded; three tuples.
    fn analyse<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        bounds: Vec<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.analyse_with(py, &Ascii, ascii_str(text)?, bounds)
    }
}

impl SentenceAnalyser {
    fn analyse_with<'py, S: Script>(
        &self,
        py: Python<'py>,
        s: &S,
        t: &[S::Unit],
        bounds: Vec<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let aw = script::AnalysisWords {
            not_terms: &self.not_terms,
            protected_words: &self.protected_words,
            contractions: &self.contractions,
            suffixes: &SUFFIXES,
            months: &MONTHS,
            phrases: &PHRASES,
        };
        let mut stems = Vec::with_capacity(bounds.len());
        let mut protected = Vec::with_capacity(bounds.len());
        let mut padded = Vec::with_capacity(bounds.len());
        for (start, end) in bounds {
            if start > end || end > t.len() {
                return Err(PyValueError::new_err("a sentence bound outside the text"));
            }
            let sentence = &t[start..end];
            let ws = script::words(s, sentence);
            let (terms, fact, joined) = script::analyse_sentence(s, &aw, sentence, &ws);
            let terms: Vec<Bound<'py, PyString>> =
                terms.into_iter().map(|w| PyString::new(py, w)).collect();
            stems.push(PyFrozenSet::new(py, &terms)?);
            protected.push(PyBool::new(py, fact).to_owned());
            padded.push(PyString::new(py, &joined));
        }
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

#[pymodule]
fn ctxbudget_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The interface version `ctxbudget.native.API_VERSION` checks.
    m.add("API_VERSION", 8)?;
    m.add_function(wrap_pyfunction!(fold_windows, m)?)?;
    m.add_function(wrap_pyfunction!(overlaps::overlaps, m)?)?;
    m.add_class::<SentenceSplitter>()?;
    m.add_class::<NameFinder>()?;
    m.add_class::<SentenceAnalyser>()?;
    m.add_class::<WordSplitter>()?;
    m.add_class::<rank::SentenceRanker>()?;
    m.add_function(wrap_pyfunction!(novelty::shared_shingles, m)?)?;
    m.add_function(wrap_pyfunction!(rough::rough_sentence_count, m)?)?;
    gate::register(m)?;
    m.add_function(wrap_pyfunction!(json_scan::scan_json, m)?)?;
    m.add_class::<bpe::PieceCounter>()?;
    Ok(())
}
