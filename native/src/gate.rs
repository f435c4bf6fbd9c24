//! Compiled hot path of the injection gate (`ctxbudget.safety`): the words a passage's rule
//! gates look for, and the sentence model's scores (`ctxbudget.safety.model`).
//!
//! The Python code stays the reference, and every table comes from it: the weights from the
//! model the Python side loaded (never compiled in), the word characters from its regex, the
//! constants from its module. Weights are whole numbers, so every sum here is the exact
//! integer the reference adds up, in whatever order; the division by the scale and the
//! sigmoid stay in Python.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyString};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A small multiplicative hash (the one rustc uses): the keys are short words from a fixed
/// table, so collision attacks buy nothing and SipHash's cost is not needed.
#[derive(Default)]
struct WordHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// Words to ids. Words of up to 15 bytes (nearly all) are keys of their own, packed with
/// their length into one integer: a look-up reads no memory beyond the table's own.
#[derive(Default)]
struct Vocab {
    short: FastMap<u128, u32>,
    long: FastMap<Box<[u8]>, u32>,
}

impl Vocab {
    fn packed(word: &[u8]) -> Option<u128> {
        if word.len() > 15 {
            return None;
        }
        let mut key = [0u8; 16];
        key[..word.len()].copy_from_slice(word);
        key[15] = word.len() as u8;
        Some(u128::from_le_bytes(key))
    }

    fn get(&self, word: &[u8]) -> Option<u32> {
        match Vocab::packed(word) {
            Some(key) => self.short.get(&key).copied(),
            None => self.long.get(word).copied(),
        }
    }

    fn insert(&mut self, word: &[u8], id: u32) {
        match Vocab::packed(word) {
            Some(key) => self.short.insert(key, id),
            None => self.long.insert(word.to_vec().into_boxed_slice(), id),
        };
    }
}

/// Whether `c` falls in one of `ranges` (sorted, disjoint, inclusive).
fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    let i = ranges.partition_point(|&(lo, _)| lo <= c);
    i > 0 && c <= ranges[i - 1].1
}

// ---------------------------------------------------------------------------------------
// Rule gates: `gate._Text.words` and `rules.candidate_rules`.

/// A set of small indices, as bits.
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }

    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// The words the rule gates look for (`gate._CUE_WORDS`) and each rule's two gates, from the
/// tables of `ctxbudget.safety.rules`.
#[pyclass(frozen)]
struct RuleGates {
    /// Cue word -> its index among the cue words.
    cues: Vocab,
    /// The cue words as Python strings, made once (a passage's set shares them).
    cue_text: Vec<Py<PyString>>,
    /// Per cue word, the rules whose first gate it opens.
    opens: Vec<Vec<usize>>,
    /// Substrings that open rules' first gates, and those that do so only in text of the
    /// scripts `rules.OTHER_SCRIPTS` names.
    needles: Vec<(String, Vec<usize>)>,
    nonascii: Vec<(String, Vec<usize>)>,
    /// Per rule, its second gate: cue words (one needed when any) and substrings (likewise).
    words2: Vec<Vec<usize>>,
    requires: Vec<Vec<String>>,
}

#[pymethods]
impl RuleGates {
    #[new]
    #[pyo3(signature = (*, cue_words, opened_by, needles, nonascii, second))]
    fn new(
        py: Python<'_>,
        cue_words: Vec<String>,
        opened_by: HashMap<String, Vec<usize>>,
        needles: Vec<(String, Vec<usize>)>,
        nonascii: Vec<(String, Vec<usize>)>,
        second: Vec<(Vec<String>, Vec<String>)>,
    ) -> Self {
        let mut cues = Vocab::default();
        for (i, w) in cue_words.iter().enumerate() {
            cues.insert(w.as_bytes(), i as u32);
        }
        let opens = cue_words
            .iter()
            .map(|w| opened_by.get(w).cloned().unwrap_or_default())
            .collect();
        let words2 = second
            .iter()
            .map(|(ws, _)| ws.iter().filter_map(|w| cues.get(w.as_bytes())).map(|i| i as usize).collect())
            .collect();
        let requires = second.into_iter().map(|(_, r)| r).collect();
        let cue_text = cue_words.iter().map(|w| PyString::intern(py, w).unbind()).collect();
        RuleGates { cues, cue_text, opens, needles, nonascii, words2, requires }
    }

    /// The cue words of normalised text `t` (a frozenset of str) and the rules whose gates are
    /// open for it (ascending); `other_scripts` when `t` holds a character of
    /// `rules.OTHER_SCRIPTS`.
    fn read<'py>(
        &self,
        py: Python<'py>,
        t: &str,
        other_scripts: bool,
    ) -> PyResult<(Bound<'py, PyFrozenSet>, Vec<usize>)> {
        let bytes = t.as_bytes();
        let mut found = Bits::new(self.cue_text.len());
        let mut found_list: Vec<usize> = Vec::new();
        let mut first = Bits::new(self.words2.len());
        let mut i = 0;
        while i < bytes.len() {
            if !bytes[i].is_ascii_lowercase() {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_lowercase() {
                i += 1;
            }
            if let Some(cue) = self.cues.get(&bytes[start..i]) {
                let cue = cue as usize;
                if !found.get(cue) {
                    found.set(cue);
                    found_list.push(cue);
                    for &rule in &self.opens[cue] {
                        first.set(rule);
                    }
                }
            }
        }
        let mut open_by = |table: &[(String, Vec<usize>)]| {
            for (needle, rules) in table {
                if t.contains(needle.as_str()) {
                    for &rule in rules {
                        first.set(rule);
                    }
                }
            }
        };
        open_by(&self.needles);
        if other_scripts {
            open_by(&self.nonascii);
        }
        let candidates = (0..self.words2.len())
            .filter(|&rule| {
                first.get(rule)
                    && (self.words2[rule].is_empty()
                        || self.words2[rule].iter().any(|&w| found.get(w)))
                    && (self.requires[rule].is_empty()
                        || self.requires[rule].iter().any(|r| t.contains(r.as_str())))
            })
            .collect();
        let words: Vec<&Bound<'py, PyString>> =
            found_list.iter().map(|&w| self.cue_text[w].bind(py)).collect();
        Ok((PyFrozenSet::new(py, &words)?, candidates))
    }
}

// ---------------------------------------------------------------------------------------
// Sentence model: `model.sentences`, `LinearModel._best` and `LinearModel.weak_probability`.

/// One word of a passage: its id in the model's vocabulary (None: no weight names it).
type WordId = Option<u32>;

/// A model's weights by word id, from the tables of a `model.LinearModel`.
#[pyclass(frozen)]
struct SentenceScorer {
    ids: Vocab,
    /// Per id: the feature `w`, `^w` and `@w`; the pre-check's bound and openings.
    single: Vec<i64>,
    caret: Vec<i64>,
    at: Vec<i64>,
    bound: Vec<i64>,
    opening: Vec<Option<i64>>,
    opening_doc: Vec<Option<i64>>,
    /// Word pairs `(a, b)` and document openings `("@" + a, b)`, keyed by `pair_key`.
    pairs: FastMap<u64, i64>,
    doc_pairs: FastMap<u64, i64>,
    /// The weights of the length features `#0`, `#1`, ...
    lengths: Vec<i64>,
    doc: i64,
    weak_sum: Option<i64>,
    word_ranges: Vec<(u32, u32)>,
    /// The first code point `word_ranges` does not cover: text with one is left to Python.
    table_end: u32,
    unspaced_ranges: Vec<(u32, u32)>,
    min_words: usize,
    window: usize,
    document_words: usize,
    length_step: usize,
}

fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// Sentence-end characters beside `.`, `!` and `?` before a space or tab, and the newline.
const FULL_STOPS: [char; 7] =
    ['\u{3002}', '\u{ff01}', '\u{ff1f}', '\u{0964}', '\u{0965}', '\u{061f}', '\u{06d4}'];

#[pymethods]
impl SentenceScorer {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        *, singles, pairs, bound, opening, opening_doc, lengths, doc_feature, weak_sum,
        word_ranges, table_end, unspaced_ranges, min_words, window, document_words, length_step
    ))]
    fn new(
        singles: HashMap<String, i64>,
        pairs: HashMap<(String, String), i64>,
        bound: HashMap<String, i64>,
        opening: HashMap<String, i64>,
        opening_doc: HashMap<String, i64>,
        lengths: Vec<i64>,
        doc_feature: String,
        weak_sum: Option<i64>,
        word_ranges: Vec<(u32, u32)>,
        table_end: u32,
        unspaced_ranges: Vec<(u32, u32)>,
        min_words: usize,
        window: usize,
        document_words: usize,
        length_step: usize,
    ) -> Self {
        let mut s = SentenceScorer {
            ids: Vocab::default(),
            single: Vec::new(),
            caret: Vec::new(),
            at: Vec::new(),
            bound: Vec::new(),
            opening: Vec::new(),
            opening_doc: Vec::new(),
            pairs: FastMap::default(),
            doc_pairs: FastMap::default(),
            lengths,
            doc: singles.get(&doc_feature).copied().unwrap_or(0),
            weak_sum,
            word_ranges,
            table_end,
            unspaced_ranges,
            min_words,
            window: window.max(2),
            document_words,
            length_step: length_step.max(1),
        };
        for (k, &v) in &singles {
            let id = s.id(k);
            s.single[id] = v;
            if let Some(w) = k.strip_prefix('^') {
                let id = s.id(w);
                s.caret[id] = v;
            } else if let Some(w) = k.strip_prefix('@') {
                let id = s.id(w);
                s.at[id] = v;
            }
        }
        for (k, &v) in &bound {
            let id = s.id(k);
            s.bound[id] = v;
        }
        for (k, &v) in &opening {
            let id = s.id(k);
            s.opening[id] = Some(v);
        }
        for (k, &v) in &opening_doc {
            let id = s.id(k);
            s.opening_doc[id] = Some(v);
        }
        for ((a, b), &v) in &pairs {
            let (ia, ib) = (s.id(a) as u32, s.id(b) as u32);
            s.pairs.insert(pair_key(ia, ib), v);
            if let Some(w) = a.strip_prefix('@') {
                let iw = s.id(w) as u32;
                s.doc_pairs.insert(pair_key(iw, ib), v);
            }
        }
        s
    }

    /// `LinearModel._best` of normalised text `t` before the bias: the highest sentence sum,
    /// or None when no sentence has enough words. ValueError for a character beyond the
    /// word table.
    fn best(&self, t: &str) -> PyResult<Option<i64>> {
        let (ids, split) = self.sentences(t)?;
        let total: usize = split.iter().map(|&(_, n)| n).sum();
        Ok(split.iter().map(|&(start, n)| self.sum(&ids[start..start + n], total)).max())
    }

    /// What `LinearModel.weak_probability` scores of `t`: the highest sum (before the bias)
    /// among the sentences whose bound reaches the weak threshold's sum, or None when none
    /// does (every sentence when there is no such sum).
    fn weak_best(&self, t: &str) -> PyResult<Option<i64>> {
        let Some(limit) = self.weak_sum else {
            return self.best(t);
        };
        let (ids, split) = self.sentences(t)?;
        let total: usize = split.iter().map(|&(_, n)| n).sum();
        Ok(split
            .iter()
            .map(|&(start, n)| &ids[start..start + n])
            .filter(|words| self.upper_bound(words, total) >= limit)
            .map(|words| self.sum(words, total))
            .max())
    }
}

impl SentenceScorer {
    /// The id of `word`, added to the vocabulary when new.
    fn id(&mut self, word: &str) -> usize {
        let key = word.as_bytes();
        if let Some(id) = self.ids.get(key) {
            return id as usize;
        }
        let id = self.single.len();
        self.ids.insert(key, id as u32);
        self.single.push(0);
        self.caret.push(0);
        self.at.push(0);
        self.bound.push(0);
        self.opening.push(None);
        self.opening_doc.push(None);
        id
    }

    fn length_weight(&self, n: usize) -> i64 {
        let step = (n / self.length_step).min(self.lengths.len().saturating_sub(1));
        self.lengths.get(step).copied().unwrap_or(0)
    }

    fn inside(&self, n: usize, total: usize) -> bool {
        total - n >= self.document_words
    }

    /// The pre-check's bound of one sentence (`weak_probability`'s `s + by_length(n) + ...`).
    fn upper_bound(&self, words: &[WordId], total: usize) -> i64 {
        let n = words.len();
        let first = words[0].map(|id| id as usize);
        let opening = if self.inside(n, total) {
            first.and_then(|id| self.opening_doc[id]).unwrap_or(self.doc)
        } else {
            first.and_then(|id| self.opening[id]).unwrap_or(0)
        };
        let bound: i64 = words.iter().flatten().map(|&id| self.bound[id as usize]).sum();
        opening + self.length_weight(n) + bound
    }

    /// One sentence's sum of feature weights (`_best`'s loop body): words, pairs, opening,
    /// length and the document marks.
    fn sum(&self, words: &[WordId], total: usize) -> i64 {
        let n = words.len();
        let mut s: i64 = words.iter().flatten().map(|&id| self.single[id as usize]).sum();
        for pair in words.windows(2) {
            if let (Some(a), Some(b)) = (pair[0], pair[1]) {
                s += self.pairs.get(&pair_key(a, b)).copied().unwrap_or(0);
            }
        }
        s += self.length_weight(n);
        if let Some(first) = words[0] {
            s += self.caret[first as usize];
        }
        if self.inside(n, total) {
            s += self.doc;
            if let Some(first) = words[0] {
                s += self.at[first as usize];
                if let Some(second) = words.get(1).copied().flatten() {
                    s += self.doc_pairs.get(&pair_key(first, second)).copied().unwrap_or(0);
                }
            }
        }
        s
    }

    /// Whether `c` is a word character; None beyond the word table.
    fn is_word(&self, c: char) -> Option<bool> {
        if c.is_ascii() {
            Some(c.is_ascii_alphanumeric())
        } else if (c as u32) < self.table_end {
            Some(in_ranges(&self.word_ranges, c))
        } else {
            None
        }
    }

    /// `model.sentences` of `t`: the id of every word, and each sentence as (offset, length)
    /// into them.
    fn sentences(&self, t: &str) -> PyResult<(Vec<WordId>, Vec<(usize, usize)>)> {
        let mut ids: Vec<WordId> = Vec::with_capacity(t.len() / 4 + 1);
        let mut split: Vec<(usize, usize)> = Vec::with_capacity(t.len() / 32 + 1);
        let mut piece_start = 0;
        let mut word_start: Option<usize> = None;
        let mut unspaced = false;
        let mut chars = t.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let Some(word) = self.is_word(c) else {
                return Err(PyValueError::new_err("a character beyond the word table"));
            };
            if word {
                if word_start.is_none() {
                    word_start = Some(i);
                    unspaced = false;
                }
                unspaced |= !c.is_ascii() && in_ranges(&self.unspaced_ranges, c);
                continue;
            }
            if let Some(start) = word_start.take() {
                self.push_word(&t[start..i], unspaced, &mut ids);
            }
            let end = match c {
                '\n' => true,
                '.' | '!' | '?' => matches!(chars.peek(), Some(&(_, ' ' | '\t'))),
                _ => FULL_STOPS.contains(&c),
            };
            if end {
                self.push_piece(piece_start, ids.len(), &mut split);
                piece_start = ids.len();
            }
        }
        if let Some(start) = word_start {
            self.push_word(&t[start..], unspaced, &mut ids);
        }
        self.push_piece(piece_start, ids.len(), &mut split);
        Ok((ids, split))
    }

    /// One word's ids: the word's, or its character pairs' in a script written without spaces.
    fn push_word(&self, word: &str, unspaced: bool, ids: &mut Vec<WordId>) {
        if unspaced && word.chars().nth(1).is_some() {
            let bounds: Vec<usize> =
                word.char_indices().map(|(i, _)| i).chain(std::iter::once(word.len())).collect();
            for k in 0..bounds.len() - 2 {
                ids.push(self.lookup(&word[bounds[k]..bounds[k + 2]]));
            }
        } else {
            ids.push(self.lookup(word));
        }
    }

    fn lookup(&self, word: &str) -> WordId {
        self.ids.get(word.as_bytes())
    }

    /// The sentences of the piece of words `start..end`: none when a fragment, half-overlapping
    /// windows when long.
    fn push_piece(&self, start: usize, end: usize, split: &mut Vec<(usize, usize)>) {
        let n = end - start;
        if n < self.min_words {
            return;
        }
        if n <= self.window {
            split.push((start, n));
            return;
        }
        let step = self.window / 2;
        let mut k = 0;
        while k < n - step {
            split.push((start + k, self.window.min(n - k)));
            k += step;
        }
    }
}

/// Registers the gate's classes on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RuleGates>()?;
    m.add_class::<SentenceScorer>()?;
    Ok(())
}
