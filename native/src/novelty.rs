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
    let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(sets.iter().map(|s| s.len()).sum());
    for (row, set) in sets.iter().enumerate() {
        for id in set.iter() {
            pairs.push((shingle_id(&id)?, row as u32));
        }
    }
    // A set holds each id once, so a run of one id lists each set holding it once.
    pairs.sort_unstable();
    let mut table = vec![vec![0u32; n]; n];
    let mut start = 0;
    while start < pairs.len() {
        let id = pairs[start].0;
        let mut end = start + 1;
        while end < pairs.len() && pairs[end].0 == id {
            end += 1;
        }
        let run = &pairs[start..end];
        for (k, &(_, a)) in run.iter().enumerate() {
            table[a as usize][a as usize] += 1;
            for &(_, b) in &run[k + 1..] {
                table[a as usize][b as usize] += 1;
                table[b as usize][a as usize] += 1;
            }
        }
        start = end;
    }
    Some(table)
}
