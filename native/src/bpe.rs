//! Exact token counts of ASCII text for the `cl100k_base` encoding, for `TiktokenCounter.count`
//! in `ctxbudget/tokens.py`.
//!
//! tiktoken counts a text in two steps: its pre-tokenizer (a regular expression) cuts the
//! text into pieces, and each piece is one token when the encoding has it, else the result of
//! byte-pair merging (repeatedly join the adjacent pair of parts whose joined bytes rank
//! lowest, the leftmost on a tie). On ASCII text the expression reduces to a few character
//! classes, scanned here by hand (`piece_end`); the merging is the same rule. Text with any
//! other character, and any piece of `LONG_PIECE` bytes or more, is left to tiktoken
//! (`count` answers None). The reference is tiktoken itself: `tests/property/test_native_paths.py`
//! and `tests/unit/test_tokens.py` compare the two.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::prelude::*;

/// Pieces this long or longer are left to tiktoken (which merges them another way).
const LONG_PIECE: usize = 100;
const NO_MERGE: u32 = u32::MAX;

/// A small multiplicative hasher for byte strings (the rank table is read, never attacked:
/// its keys are the encoding's).
#[derive(Default)]
struct ByteHasher(u64);

impl Hasher for ByteHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h.rotate_left(5) ^ v).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Ranks = HashMap<Vec<u8>, u32, BuildHasherDefault<ByteHasher>>;

fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// `\s` on ASCII: tab, line feed, vertical tab, form feed, carriage return, space.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_line_break(b: u8) -> bool {
    b == b'\r' || b == b'\n'
}

/// `[^\s\p{L}\p{N}]` on ASCII: punctuation, symbols and control characters.
fn is_other(b: u8) -> bool {
    !is_space(b) && !is_letter(b) && !is_digit(b)
}

fn run_end(t: &[u8], mut i: usize, pred: fn(u8) -> bool) -> usize {
    while i < t.len() && pred(t[i]) {
        i += 1;
    }
    i
}

/// Where the pre-tokenizer's piece starting at `i` ends (`i < t.len()`). The alternatives of
/// the cl100k expression, in its order: a contraction (`'s`, `'d`, `'m`, `'t`, `'ll`, `'ve`,
/// `'re`, any case); letters, with one optional leading character that is neither a line
/// break, a letter nor a digit; one to three digits; an optional space, a run of other
/// characters and the line breaks after it; spaces that run to the end of the text; spaces up
/// to and including their last line break; spaces but the last; one space.
fn piece_end(t: &[u8], i: usize) -> usize {
    let n = t.len();
    let c = t[i];
    if c == b'\'' && i + 1 < n {
        let a = t[i + 1].to_ascii_lowercase();
        if matches!(a, b's' | b'd' | b'm' | b't') {
            return i + 2;
        }
        if i + 2 < n {
            let b = t[i + 2].to_ascii_lowercase();
            if matches!((a, b), (b'l', b'l') | (b'v', b'e') | (b'r', b'e')) {
                return i + 3;
            }
        }
    }
    if is_letter(c) {
        return run_end(t, i, is_letter);
    }
    if !is_line_break(c) && !is_digit(c) && i + 1 < n && is_letter(t[i + 1]) {
        return run_end(t, i + 1, is_letter);
    }
    if is_digit(c) {
        let mut j = i;
        while j < n && j < i + 3 && is_digit(t[j]) {
            j += 1;
        }
        return j;
    }
    let p = if c == b' ' && i + 1 < n && is_other(t[i + 1]) { i + 1 } else { i };
    if is_other(t[p]) {
        return run_end(t, run_end(t, p, is_other), is_line_break);
    }
    // `c` is a space character from here on.
    let end = run_end(t, i, is_space);
    if end == n {
        return n;
    }
    if let Some(k) = (i..end).rev().find(|&k| is_line_break(t[k])) {
        return k + 1;
    }
    if end - i >= 2 {
        return end - 1;
    }
    i + 1
}

/// Counts tokens of ASCII text with one encoding's ranks (built once per encoding).
#[pyclass(frozen)]
pub struct PieceCounter {
    ranks: Ranks,
}

impl PieceCounter {
    fn rank(&self, bytes: &[u8]) -> u32 {
        self.ranks.get(bytes).copied().unwrap_or(NO_MERGE)
    }

    /// Tokens of one piece the encoding does not hold whole: parts start as single bytes, and
    /// the adjacent pair whose joined bytes rank lowest (the leftmost on a tie) is joined until
    /// no joined pair has a rank.
    fn merged(&self, piece: &[u8]) -> usize {
        let mut starts: Vec<usize> = (0..=piece.len()).collect();
        let pair_rank = |starts: &[usize], k: usize| -> u32 {
            if k + 2 < starts.len() {
                self.rank(&piece[starts[k]..starts[k + 2]])
            } else {
                NO_MERGE
            }
        };
        let mut pairs: Vec<u32> = (0..piece.len()).map(|k| pair_rank(&starts, k)).collect();
        loop {
            let mut best = NO_MERGE;
            let mut at = 0;
            for (k, &r) in pairs.iter().enumerate() {
                if r < best {
                    best = r;
                    at = k;
                }
            }
            if best == NO_MERGE {
                break;
            }
            starts.remove(at + 1);
            pairs.remove(at + 1);
            pairs[at] = pair_rank(&starts, at);
            if at > 0 {
                pairs[at - 1] = pair_rank(&starts, at - 1);
            }
        }
        starts.len() - 1
    }

    fn count_ascii(&self, t: &[u8]) -> Option<usize> {
        let mut total = 0;
        let mut i = 0;
        while i < t.len() {
            let end = piece_end(t, i);
            let piece = &t[i..end];
            if piece.len() == 1 || self.ranks.contains_key(piece) {
                total += 1;
            } else if piece.len() >= LONG_PIECE {
                return None;
            } else {
                total += self.merged(piece);
            }
            i = end;
        }
        Some(total)
    }
}

#[pymethods]
impl PieceCounter {
    #[new]
    fn new(ranks: HashMap<Vec<u8>, u32>) -> Self {
        let mut table = Ranks::default();
        table.reserve(ranks.len());
        table.extend(ranks);
        PieceCounter { ranks: table }
    }

    /// The number of tokens of `text`, or None when the text is not ASCII or holds a piece
    /// left to tiktoken.
    fn count(&self, py: Python<'_>, text: &str) -> Option<usize> {
        let t = text.as_bytes();
        if !t.is_ascii() {
            return None;
        }
        py.allow_threads(|| self.count_ascii(t))
    }
}
