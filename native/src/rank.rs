//! The sentence ranking of `extractive.rank_stemmed` (`ctxbudget/extractive.py`), which the
//! select stage runs for every excerpt it sizes and the compress stage for every excerpt it
//! cuts, and the two sentence scans of the select stage's entity links (`ctxbudget/hops.py`:
//! the hop sentences an admitted text hands names on from, and whether a waiting text names
//! a shared name beside a query term).
//!
//! The references are `extractive.rank_stemmed_reference`, `hops.hop_sentences_reference`
//! and `hops.names_beside_query_reference`; `tests/property/test_native_rank.py` compares
//! each pair. It is written out by hand rather than compiled from the Python (mypyc,
//! Cython) because its cost in Python is the interpreter's per-sentence loop over sets and
//! substrings: here the query stems a sentence carries are a bit row, the covered stems a bit
//! row, and the link look-ups plain byte searches, while the scores stay the reference's
//! floats, summed in its order (`bonus` then `overlap + bonus`), so the order is the same.

use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyString, PyTuple};

/// The bonuses and pick count of `extractive` (`PROTECTED_BONUS`, `LEAD_BONUS`,
/// `LINK_BONUS`, `COVERAGE_PICKS`), given by the Python side so they live in one place.
#[pyclass(frozen)]
pub(crate) struct SentenceRanker {
    protected_bonus: f64,
    lead_bonus: f64,
    link_bonus: f64,
    coverage_picks: usize,
}

/// The query stems (by index) each sentence carries, one bit per stem.
struct Hits {
    words: usize,
    bits: Vec<u64>,
}

impl Hits {
    fn row(&self, i: usize) -> &[u64] {
        &self.bits[i * self.words..(i + 1) * self.words]
    }

    fn count(&self, i: usize) -> usize {
        self.row(i).iter().map(|w| w.count_ones() as usize).sum()
    }

    /// `len(hits[i] - covered)`.
    fn count_new(&self, i: usize, covered: &[u64]) -> usize {
        self.row(i).iter().zip(covered).map(|(w, c)| (w & !c).count_ones() as usize).sum()
    }
}

/// The text of a Python str, or None for one that is no valid UTF-8 (a lone surrogate):
/// such text is left to the reference.
fn utf8<'a>(s: &'a Bound<'_, PyString>) -> Option<&'a str> {
    s.to_str().ok()
}

/// Whether a sentence's stems (a frozenset) hold one of `query`: `not st.isdisjoint(qstems)`.
fn meets(st: &Bound<'_, PyAny>, query: &[Bound<'_, PyAny>]) -> PyResult<bool> {
    let st = st.downcast::<PyFrozenSet>()?;
    for q in query {
        if st.contains(q)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The text of each of `keys`, or None when one is no valid UTF-8.
fn texts_of<'a>(keys: &'a [Bound<'_, PyString>]) -> Option<Vec<&'a str>> {
    keys.iter().map(utf8).collect()
}

#[pymethods]
impl SentenceRanker {
    /// `hops.hop_sentences_reference` from an analysis's `stems` and `padded`: the padded
    /// words of the sentences whose stems meet `qstems` or whose padded words hold one of
    /// `keys`, in order; None when a text is no valid UTF-8.
    fn hop_sentences<'py>(
        &self,
        stems: &Bound<'py, PyTuple>,
        padded: &Bound<'py, PyTuple>,
        qstems: &Bound<'py, PyFrozenSet>,
        keys: Vec<Bound<'py, PyString>>,
    ) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
        if stems.len() != padded.len() {
            return Err(pyo3::exceptions::PyValueError::new_err("stems and padded differ in length"));
        }
        let query: Vec<Bound<'py, PyAny>> = qstems.iter().collect();
        let Some(keys) = texts_of(&keys) else { return Ok(None) };
        let mut out = Vec::new();
        for (st, pad) in stems.iter().zip(padded.iter()) {
            let hit = if meets(&st, &query)? {
                true
            } else {
                let Some(text) = utf8(pad.downcast::<PyString>()?) else { return Ok(None) };
                keys.iter().any(|k| text.contains(k))
            };
            if hit {
                out.push(pad);
            }
        }
        Ok(Some(out))
    }

    /// `hops.receives_reference`: whether a sentence's padded words hold `key` and its stems
    /// meet `qstems`; None when a text is no valid UTF-8.
    fn names_beside_query(
        &self,
        stems: &Bound<'_, PyTuple>,
        padded: &Bound<'_, PyTuple>,
        qstems: &Bound<'_, PyFrozenSet>,
        key: &Bound<'_, PyString>,
    ) -> PyResult<Option<bool>> {
        if stems.len() != padded.len() {
            return Err(pyo3::exceptions::PyValueError::new_err("stems and padded differ in length"));
        }
        let query: Vec<Bound<'_, PyAny>> = qstems.iter().collect();
        let Some(key) = utf8(key) else { return Ok(None) };
        for (st, pad) in stems.iter().zip(padded.iter()) {
            let Some(text) = utf8(pad.downcast::<PyString>()?) else { return Ok(None) };
            if text.contains(key) && meets(&st, &query)? {
                return Ok(Some(true));
            }
        }
        Ok(Some(false))
    }

    #[new]
    fn new(protected_bonus: f64, lead_bonus: f64, link_bonus: f64, coverage_picks: usize) -> Self {
        SentenceRanker { protected_bonus, lead_bonus, link_bonus, coverage_picks }
    }

    /// `rank_stemmed_reference(analysis, qstems, lead=lead, links=links)` from the
    /// analysis's `stems`, `protected` and `padded`: the per-sentence query overlap and the
    /// sentence indices best first; None when a text is no valid UTF-8.
    #[allow(clippy::too_many_arguments)]
    fn rank(
        &self,
        stems: &Bound<'_, PyTuple>,
        protected: Vec<bool>,
        padded: &Bound<'_, PyTuple>,
        qstems: &Bound<'_, PyFrozenSet>,
        lead: bool,
        links: Vec<Bound<'_, PyString>>,
    ) -> PyResult<Option<(Vec<usize>, Vec<usize>)>> {
        let n = stems.len();
        if protected.len() != n || padded.len() != n {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "stems, protected and padded differ in length",
            ));
        }
        // hits = [st & qstems for st in stems], as bit rows over the query stems.
        let query: Vec<Bound<'_, PyAny>> = qstems.iter().collect();
        let words = query.len().div_ceil(64).max(1);
        let mut hits = Hits { words, bits: vec![0u64; n * words] };
        for (i, st) in stems.iter().enumerate() {
            let st = st.downcast::<PyFrozenSet>()?;
            for (j, q) in query.iter().enumerate() {
                if st.contains(q)? {
                    hits.bits[i * words + j / 64] |= 1 << (j % 64);
                }
            }
        }
        let overlap: Vec<usize> = (0..n).map(|i| hits.count(i)).collect();
        let mut link_keys: Vec<&str> = Vec::with_capacity(links.len());
        for link in &links {
            let Some(key) = utf8(link) else { return Ok(None) };
            link_keys.push(key);
        }
        let mut bonus: Vec<f64> = Vec::with_capacity(n);
        for i in 0..n {
            let near = overlap[i] > 0
                || (i > 0 && overlap[i - 1] > 0)
                || (i + 1 < n && overlap[i + 1] > 0);
            let mut score = if near && protected[i] { self.protected_bonus } else { 0.0 };
            if lead && i == 0 {
                score += self.lead_bonus;
            }
            if !link_keys.is_empty() {
                let item = padded.get_item(i)?;
                let Some(pad) = utf8(item.downcast::<PyString>()?) else { return Ok(None) };
                if link_keys.iter().any(|k| pad.contains(k)) {
                    score += self.link_bonus;
                }
            }
            bonus.push(score);
        }
        // Best first: the higher score, then the earlier sentence (keys are distinct).
        let score = |i: usize| overlap[i] as f64 + bonus[i];
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
        let picks = self.coverage_picks.min(n.saturating_sub(1));
        if picks == 0 || query.is_empty() {
            return Ok(Some((overlap, order)));
        }
        let mut covered: Vec<u64> = hits.row(order[0]).to_vec();
        let mut chosen = vec![order[0]];
        let mut rest: Vec<usize> = order[1..].to_vec();
        for _ in 0..picks - 1 {
            // The most new query stems plus the bonus; equal scores: the earlier sentence.
            let gain = |i: usize| hits.count_new(i, &covered) as f64 + bonus[i];
            let mut at = 0;
            for k in 1..rest.len() {
                let (g, best) = (gain(rest[k]), gain(rest[at]));
                if g > best || (g == best && rest[k] < rest[at]) {
                    at = k;
                }
            }
            let pick = rest.remove(at);
            chosen.push(pick);
            for (c, w) in covered.iter_mut().zip(hits.row(pick)) {
                *c |= w;
            }
        }
        chosen.extend(rest);
        Ok(Some((overlap, chosen)))
    }
}
