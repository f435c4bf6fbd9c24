//! Exact token counts for the `cl100k_base` encoding, for `TiktokenCounter.count` in
//! `ctxbudget/tokens.py`.
//!
//! tiktoken counts a text in two steps: its pre-tokenizer (a regular expression) cuts the
//! text into pieces, and each piece is one token when the encoding has it, else the result of
//! byte-pair merging (repeatedly join the adjacent pair of parts whose joined bytes rank
//! lowest, the leftmost on a tie). On ASCII and the few blocks beyond it listed in
//! `BEYOND_ASCII`, the expression reduces to five character classes, scanned here by hand
//! (`piece_end`); the merging is the same rule. Text with any other character, and any piece
//! of `LONG_PIECE` bytes or more, is left to tiktoken (`count` answers None). The reference is
//! tiktoken itself: `tests/property/test_native_paths.py` compares the two.
//!
//! Why by hand: tiktoken stays the tokenizer of record (and the fallback), but a count through
//! it pays a Python call, a general backtracking regex and a list of token ids per text;
//! compress counts every sentence it weighs, and those costs were most of the stage. The Rust
//! ports of tiktoken keep the same regex engine, so they would not remove the main cost.

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

/// What the pre-tokenizer tells apart about a character.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `\p{L}`.
    Letter,
    /// `\p{N}`.
    Digit,
    /// `\s` other than a line break.
    Space,
    /// `\r` or `\n`.
    Break,
    /// Everything else: punctuation, symbols, format and control characters.
    Other,
}

use Class::{Break, Digit, Letter, Other, Space};

/// The classes of the characters beyond ASCII this counter takes, from Unicode's general
/// categories (Latin-1, the Latin extensions, IPA, the spacing modifiers, general punctuation
/// but its spaces and separators, the minus sign); long s (U+017F) is left out, since the
/// contractions match it case-insensitively as `s`. Any other character leaves the text to
/// tiktoken.
const BEYOND_ASCII: [(u32, u32, Class); 31] = [
    (0x00A0, 0x00A0, Space),
    (0x00A1, 0x00A9, Other),
    (0x00AA, 0x00AA, Letter),
    (0x00AB, 0x00B1, Other),
    (0x00B2, 0x00B3, Digit),
    (0x00B4, 0x00B4, Other),
    (0x00B5, 0x00B5, Letter),
    (0x00B6, 0x00B8, Other),
    (0x00B9, 0x00B9, Digit),
    (0x00BA, 0x00BA, Letter),
    (0x00BB, 0x00BB, Other),
    (0x00BC, 0x00BE, Digit),
    (0x00BF, 0x00BF, Other),
    (0x00C0, 0x00D6, Letter),
    (0x00D7, 0x00D7, Other),
    (0x00D8, 0x00F6, Letter),
    (0x00F7, 0x00F7, Other),
    (0x00F8, 0x017E, Letter),
    (0x0180, 0x02C1, Letter),
    (0x02C2, 0x02C5, Other),
    (0x02C6, 0x02D1, Letter),
    (0x02D2, 0x02DF, Other),
    (0x02E0, 0x02E4, Letter),
    (0x02E5, 0x02EB, Other),
    (0x02EC, 0x02EC, Letter),
    (0x02ED, 0x02ED, Other),
    (0x02EE, 0x02EE, Letter),
    (0x02EF, 0x02FF, Other),
    (0x2010, 0x2027, Other),
    (0x2030, 0x205E, Other),
    (0x2212, 0x2212, Other),
];

fn class_of(c: u32) -> Option<Class> {
    if c < 0x80 {
        let b = c as u8;
        return Some(if b.is_ascii_alphabetic() {
            Letter
        } else if b.is_ascii_digit() {
            Digit
        } else if b == b'\r' || b == b'\n' {
            Break
        } else if matches!(b, b'\t' | 0x0b | 0x0c | b' ') {
            Space
        } else {
            Other
        });
    }
    BEYOND_ASCII
        .iter()
        .find(|&&(lo, hi, _)| lo <= c && c <= hi)
        .map(|&(_, _, k)| k)
}

fn is_space(k: Class) -> bool {
    k == Space || k == Break
}

fn run_end(t: &[Class], mut i: usize, pred: fn(Class) -> bool) -> usize {
    while i < t.len() && pred(t[i]) {
        i += 1;
    }
    i
}

fn lower(c: u32) -> u32 {
    if (0x41..=0x5a).contains(&c) {
        c + 0x20
    } else {
        c
    }
}

/// Where the pre-tokenizer's piece starting at character `i` ends (`i < k.len()`), for
/// characters `c` of classes `k`. The alternatives of the cl100k expression, in its order: a
/// contraction (`'s`, `'d`, `'m`, `'t`, `'ll`, `'ve`, `'re`, any case); letters, with one
/// optional leading character that is neither a line break, a letter nor a digit; one to
/// three digits; an optional space, a run of other characters and the line breaks after it;
/// spaces that run to the end of the text; spaces up to and including their last line break;
/// spaces but the last; one space.
fn piece_end(c: &[u32], k: &[Class], i: usize) -> usize {
    let n = k.len();
    const QUOTE: u32 = b'\'' as u32;
    if c[i] == QUOTE && i + 1 < n {
        let a = lower(c[i + 1]);
        if [b's', b'd', b'm', b't'].iter().any(|&x| a == u32::from(x)) {
            return i + 2;
        }
        if i + 2 < n {
            let b = lower(c[i + 2]);
            let pair = |x: u8, y: u8| a == u32::from(x) && b == u32::from(y);
            if pair(b'l', b'l') || pair(b'v', b'e') || pair(b'r', b'e') {
                return i + 3;
            }
        }
    }
    let letter = |x: Class| x == Letter;
    if k[i] == Letter {
        return run_end(k, i, letter);
    }
    if k[i] != Break && k[i] != Digit && i + 1 < n && k[i + 1] == Letter {
        return run_end(k, i + 1, letter);
    }
    if k[i] == Digit {
        let mut j = i;
        while j < n && j < i + 3 && k[j] == Digit {
            j += 1;
        }
        return j;
    }
    let p = if c[i] == u32::from(b' ') && i + 1 < n && k[i + 1] == Other { i + 1 } else { i };
    if k[p] == Other {
        return run_end(k, run_end(k, p, |x| x == Other), |x| x == Break);
    }
    // A space character from here on.
    let end = run_end(k, i, is_space);
    if end == n {
        return n;
    }
    if let Some(j) = (i..end).rev().find(|&j| k[j] == Break) {
        return j + 1;
    }
    if end - i >= 2 {
        return end - 1;
    }
    i + 1
}

/// Counts tokens of text with one encoding's ranks (built once per encoding).
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

    fn count_text(&self, text: &str) -> Option<usize> {
        let mut chars = Vec::with_capacity(text.len());
        let mut classes = Vec::with_capacity(text.len());
        let mut offsets = Vec::with_capacity(text.len() + 1);
        for (at, ch) in text.char_indices() {
            classes.push(class_of(u32::from(ch))?);
            chars.push(u32::from(ch));
            offsets.push(at);
        }
        offsets.push(text.len());
        let t = text.as_bytes();
        let mut total = 0;
        let mut i = 0;
        while i < classes.len() {
            let end = piece_end(&chars, &classes, i);
            let piece = &t[offsets[i]..offsets[end]];
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

    /// The number of tokens of `text`, or None when it holds a character or a piece left to
    /// tiktoken.
    fn count(&self, py: Python<'_>, text: &str) -> Option<usize> {
        py.allow_threads(|| self.count_text(text))
    }
}
