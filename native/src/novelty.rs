//! The shingles each two options of a batch share, for the novelty of the admission loop
//! (`GreedyAdmission._reach` in `ctxbudget/admission.py`): how much of a waiting passage an
//! admitted one already says.
//!
//! The reference is `admission.shared_shingles_reference` (`len(a & b)` for every two sets);
//! `tests/property/test_native_rank.py` compares the two. Written by hand because the Python
//! loop intersects frozensets pair by pair as admissions come, while here every set is read
//! once and the table counted from one sort of (shingle, set) pairs.

use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyInt};

/// The value of an int in `0..2**64`, else None. `PyLong_AsUnsignedLong` (64 bits on the
/// platforms the extension is built for) rather than `extract::<u64>`, whose
/// `PyLong_AsUnsignedLongLong` converts through a byte array on CPython 3.11: the ids are
/// most of what the table reads.
fn shingle_id(id: &Bound<'_, PyAny>) -> Option<u64> {
    if std::mem::size_of::<std::ffi::c_ulong>() != 8 || !id.is_instance_of::<PyInt>() {
        return id.extract::<u64>().ok();
    }
    // SAFETY: `id` is a live int; the call only reads it, and an error it sets (negative,
    // too large) is taken back at once.
    let value = unsafe { pyo3::ffi::PyLong_AsUnsignedLong(id.as_ptr()) };
    if value == std::ffi::c_ulong::MAX && PyErr::take(id.py()).is_some() {
        return None;
    }
    Some(value as u64)
}

/// `[[len(a & b) for b in sets] for a in sets]` of sets of shingle ids (ints in
/// `0..2**64`), or None when a set holds anything else (the caller then intersects them).
#[pyfunction]
pub(crate) fn shared_shingles(sets: Vec<Bound<'_, PyFrozenSet>>) -> Option<Vec<Vec<u32>>> {
    let n = sets.len();
    let mut ids: Vec<u64> = Vec::with_capacity(sets.iter().map(|s| s.len()).sum());
    let mut rows: Vec<u32> = Vec::with_capacity(ids.capacity());
    for (row, set) in sets.iter().enumerate() {
        for id in set.iter() {
            ids.push(shingle_id(&id)?);
            rows.push(row as u32);
        }
    }
    let mut table = vec![vec![0u32; n]; n];
    // A set holds each id once, so a run of one id lists each set holding it once.
    let mut run: Vec<usize> = Vec::with_capacity(n);
    if n <= 1 << ROW_BITS && ids.iter().all(|&id| id < 1 << (64 - ROW_BITS)) {
        // The usual case (ids of 48 bits, `text.SHINGLE_MASK`): id and row packed in one
        // word, so one plain sort of words groups the runs.
        let mut keys: Vec<u64> =
            ids.iter().zip(&rows).map(|(&id, &row)| id << ROW_BITS | u64::from(row)).collect();
        keys.sort_unstable();
        for group in keys.chunk_by(|a, b| a >> ROW_BITS == b >> ROW_BITS) {
            run.clear();
            run.extend(group.iter().map(|&k| (k & ((1 << ROW_BITS) - 1)) as usize));
            count_run(&mut table, &run);
        }
    } else {
        let mut pairs: Vec<(u64, u32)> = ids.into_iter().zip(rows).collect();
        pairs.sort_unstable();
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            run.clear();
            run.extend(group.iter().map(|&(_, row)| row as usize));
            count_run(&mut table, &run);
        }
    }
    Some(table)
}

/// Count one shingle held by the sets of `run` (each once): one on each one's diagonal and
/// one for each two of them.
fn count_run(table: &mut [Vec<u32>], run: &[usize]) {
    for (k, &a) in run.iter().enumerate() {
        table[a][a] += 1;
        for &b in &run[k + 1..] {
            table[a][b] += 1;
            table[b][a] += 1;
        }
    }
}

/// Bits of a packed sort key that hold the set's row.
const ROW_BITS: u32 = 16;
