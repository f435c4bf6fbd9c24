//! What finding copies among texts needs, for `ShingleCache.text_overlaps` in
//! `ctxbudget/text.py`: each ASCII text's words (their normal form, their count and their
//! shingle set) and the table of shingles each two sets share.
//!
//! The reference is `ShingleCache.text_overlaps_reference`; `tests/property/test_native_paths.py`
//! compares the two.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyFrozenSet, PyList, PyString, PyTuple};
use std::collections::HashMap;

use crate::{SHINGLE_MASK, SHINGLE_MULT};

/// The lower-cased words of ASCII text: its runs of letters and digits (`text.words`).
fn ascii_words(t: &[u8]) -> Vec<&[u8]> {
    t.split(|b| !b.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect()
}

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

/// For each ASCII text: its `text.normalize` form (its words joined by spaces), its number of
/// words, and, where `want_set` says so, `text.shingles(words, size)` as a frozenset built
/// in window order (as the reference builds it), else None.
#[pyfunction]
pub fn shingle_texts<'py>(
    py: Python<'py>,
    texts: Vec<Bound<'py, PyString>>,
    size: usize,
    want_set: Vec<bool>,
) -> PyResult<Bound<'py, PyTuple>> {
    if size == 0 {
        return Err(PyValueError::new_err("size must be positive"));
    }
    if want_set.len() != texts.len() {
        return Err(PyValueError::new_err("one want_set flag per text"));
    }
    let norms = PyList::empty(py);
    let counts = PyList::empty(py);
    let sets = PyList::empty(py);
    let mut lower: Vec<u8> = Vec::new();
    let mut norm: Vec<u8> = Vec::new();
    for (text, want) in texts.iter().zip(want_set) {
        let s = text.to_str()?;
        if !s.is_ascii() {
            return Err(PyValueError::new_err("ASCII text only"));
        }
        lower.clear();
        lower.extend(s.bytes().map(|b| b.to_ascii_lowercase()));
        let words = ascii_words(&lower);
        norm.clear();
        for (k, w) in words.iter().enumerate() {
            if k > 0 {
                norm.push(b' ');
            }
            norm.extend_from_slice(w);
        }
        // ASCII bytes, so this is valid UTF-8
        norms.append(PyString::new(py, std::str::from_utf8(&norm)?))?;
        counts.append(words.len())?;
        if want {
            let ids: Vec<u64> = words
                .iter()
                .map(|w| u64::from(crc32fast::hash(w)))
                .collect();
            sets.append(PyFrozenSet::new(py, windows(&ids, size))?)?;
        } else {
            sets.append(py.None())?;
        }
    }
    PyTuple::new(py, [norms.into_any(), counts.into_any(), sets.into_any()])
}

/// How many shingles each two of `sets` share, as the row-major bytes of an `n x n` float64
/// table (native byte order; the diagonal holds the set sizes): `text.common_shingles`.
#[pyfunction]
pub fn common_counts<'py>(
    py: Python<'py>,
    sets: Vec<Bound<'py, PyFrozenSet>>,
) -> PyResult<Bound<'py, PyByteArray>> {
    let n = sets.len();
    let mut holders: HashMap<u64, Vec<u32>> = HashMap::new();
    for (row, set) in sets.iter().enumerate() {
        for item in set.iter() {
            let gram: u64 = item.extract()?;
            holders.entry(gram).or_default().push(row as u32);
        }
    }
    let mut table = vec![0u32; n * n];
    for rows in holders.values() {
        for &a in rows {
            let base = a as usize * n;
            for &b in rows {
                table[base + b as usize] += 1;
            }
        }
    }
    let mut out: Vec<u8> = Vec::with_capacity(n * n * 8);
    for &count in &table {
        out.extend_from_slice(&f64::from(count).to_ne_bytes());
    }
    Ok(PyByteArray::new(py, &out))
}
