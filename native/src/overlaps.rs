//! What finding copies among texts needs, for `ShingleCache.text_overlaps` in
//! `ctxbudget/text.py`: each ASCII text's normal form, word count and shingle set, and the
//! table of shingles each two sets share.
//!
//! The reference is `ShingleCache.text_overlaps_reference`; `tests/property/test_native_paths.py`
//! compares the two.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyFrozenSet, PyList, PyString, PyTuple};

use crate::{SHINGLE_MASK, SHINGLE_MULT};

/// The shingle ids of `ids` in window order: every window of `min(size, len)` consecutive
/// ids folded as `text._fold` folds them (none for no ids).
fn windows(ids: &[u64], size: usize) -> Vec<u64> {
    if ids.is_empty() {
        return Vec::new();
    }
    let size = size.min(ids.len());
    (0..=ids.len() - size)
        .map(|i| {
            let mut acc = ids[i];
            for &id in &ids[i + 1..i + size] {
                acc = acc.wrapping_mul(SHINGLE_MULT).wrapping_add(id);
            }
            acc & SHINGLE_MASK
        })
        .collect()
}

/// One ASCII text read: its normal form (its lower-cased words joined by spaces), its word
/// count, and its shingle ids in window order when asked for.
fn read_ascii(text: &[u8], size: usize, want_ids: bool) -> (String, usize, Vec<u64>) {
    let mut norm = String::with_capacity(text.len());
    let mut ids: Vec<u64> = Vec::new();
    let mut count = 0;
    for word in text.split(|b| !b.is_ascii_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        if count > 0 {
            norm.push(' ');
        }
        let start = norm.len();
        norm.extend(word.iter().map(|&b| char::from(b.to_ascii_lowercase())));
        if want_ids {
            ids.push(u64::from(crc32fast::hash(&norm.as_bytes()[start..])));
        }
        count += 1;
    }
    let grams = if want_ids { windows(&ids, size) } else { Vec::new() };
    (norm, count, grams)
}

/// `n x n` counts of the distinct values each two rows share (row sizes on the diagonal),
/// from (value, row) pairs that hold each pair once, as float64 bytes in native order.
fn shared_counts(mut pairs: Vec<(u64, u32)>, n: usize) -> Vec<u8> {
    pairs.sort_unstable();
    let mut table = vec![0u32; n * n];
    let mut at = 0;
    while at < pairs.len() {
        let mut end = at + 1;
        while end < pairs.len() && pairs[end].0 == pairs[at].0 {
            end += 1;
        }
        for &(_, a) in &pairs[at..end] {
            let base = a as usize * n;
            for &(_, b) in &pairs[at..end] {
                table[base + b as usize] += 1;
            }
        }
        at = end;
    }
    let mut out: Vec<u8> = Vec::with_capacity(n * n * 8);
    for &count in &table {
        out.extend_from_slice(&f64::from(count).to_ne_bytes());
    }
    out
}

/// The overlaps of `texts` (`ShingleCache.text_overlaps`). `known[i]` is the remembered
/// shingle set of a text, or None; `tokens[i]` the words (`text.words`) of a text that is
/// not ASCII, which only Python splits, and None for an ASCII text.
///
/// Returns the normal forms (None for a text that is not ASCII), the word counts, the sets
/// made (None where one was known), and the table of shared shingles as float64 bytes, or
/// None past the reference's dense bounds: more than `dense_texts` texts, or `n` times the
/// (shingle, text) incidences the reference would hand its table over `dense_cells`.
#[pyfunction]
pub fn overlaps<'py>(
    py: Python<'py>,
    texts: Vec<Bound<'py, PyString>>,
    known: Vec<Option<Bound<'py, PyFrozenSet>>>,
    tokens: Vec<Option<Vec<Bound<'py, PyString>>>>,
    size: usize,
    dense_texts: usize,
    dense_cells: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let n = texts.len();
    if known.len() != n || tokens.len() != n {
        return Err(PyValueError::new_err("one entry per text in every list"));
    }
    if size == 0 {
        return Err(PyValueError::new_err("size must be positive"));
    }
    let norms = PyList::empty(py);
    let made = PyList::empty(py);
    let mut word_counts: Vec<usize> = Vec::with_capacity(n);
    let mut grams_of: Vec<Vec<u64>> = Vec::with_capacity(n);
    for (i, text) in texts.iter().enumerate() {
        let s = text.to_str()?;
        if !s.is_ascii() {
            let Some(words) = &tokens[i] else {
                return Err(PyValueError::new_err("a text that is not ASCII needs its words"));
            };
            norms.append(py.None())?;
            word_counts.push(words.len());
            if known[i].is_none() {
                let mut ids: Vec<u64> = Vec::with_capacity(words.len());
                for w in words {
                    ids.push(u64::from(crc32fast::hash(w.to_str()?.as_bytes())));
                }
                let grams = windows(&ids, size);
                made.append(PyFrozenSet::new(py, &grams)?)?;
                grams_of.push(grams);
            } else {
                made.append(py.None())?;
                grams_of.push(Vec::new());
            }
            continue;
        }
        let (norm, count, ids) = read_ascii(s.as_bytes(), size, known[i].is_none());
        norms.append(PyString::new(py, &norm))?;
        word_counts.push(count);
        if known[i].is_none() {
            made.append(PyFrozenSet::new(py, &ids)?)?;
        } else {
            made.append(py.None())?;
        }
        grams_of.push(ids);
    }
    let set_len = |i: usize| -> usize {
        match &known[i] {
            Some(set) => set.len(),
            None => {
                let mut distinct = grams_of[i].clone();
                distinct.sort_unstable();
                distinct.dedup();
                distinct.len()
            }
        }
    };
    let table = if n > dense_texts {
        None
    } else {
        // what the reference hands its table: the windows folded over the missing texts'
        // words laid end to end (straddling ones too) and the sets of the others; or every
        // set when nothing is folded
        let missing: Vec<usize> = (0..n).filter(|&i| known[i].is_none()).collect();
        let words: usize = missing.iter().map(|&i| word_counts[i]).sum();
        let total = if !missing.is_empty() && words >= size && size > 1 {
            let from_sets: usize = (0..n)
                .filter(|&i| known[i].is_some() || (0 < word_counts[i] && word_counts[i] < size))
                .map(set_len)
                .sum();
            words - size + 1 + from_sets
        } else {
            (0..n).map(set_len).sum()
        };
        if n.saturating_mul(total) > dense_cells {
            None
        } else {
            let mut pairs: Vec<(u64, u32)> = Vec::new();
            for (row, ids) in grams_of.iter().enumerate() {
                let start = pairs.len();
                match &known[row] {
                    Some(set) => {
                        for item in set.iter() {
                            pairs.push((item.extract::<u64>()?, row as u32));
                        }
                    }
                    None => {
                        pairs.extend(ids.iter().map(|&g| (g, row as u32)));
                        pairs[start..].sort_unstable();
                        let mut kept = start;
                        for k in start..pairs.len() {
                            if k == start || pairs[k] != pairs[kept - 1] {
                                pairs[kept] = pairs[k];
                                kept += 1;
                            }
                        }
                        pairs.truncate(kept);
                    }
                }
            }
            Some(PyByteArray::new(py, &shared_counts(pairs, n)))
        }
    };
    let counts_out = PyList::new(py, &word_counts)?;
    let table_out = match table {
        Some(t) => t.into_any(),
        None => py.None().into_bound(py),
    };
    PyTuple::new(
        py,
        [
            norms.into_any(),
            counts_out.into_any(),
            made.into_any(),
            table_out,
        ],
    )
}
