//! One pass over a JSON document that `ctxbudget.codec.decode` has already validated:
//! whether any object may repeat a key, and whether any number holds a run of 19 digits
//! (the only way to write an integer beyond 64 bits).
//!
//! The answer may err only towards "maybe": a key written with an escape, or anything
//! this scanner does not expect, answers "may repeat a key", and the caller then runs its
//! exact Python check (`codec.check_unique_keys`), which also writes the error message.

use pyo3::prelude::*;
use std::collections::HashSet;

/// Bit of the answer: some object may hold a key twice (or the scan could not tell).
pub const MAY_REPEAT_KEY: u8 = 1;
/// Bit of the answer: some number holds a run of at least 19 digits.
pub const LONG_NUMBER: u8 = 2;

/// A run of this many digits is the shortest integer that may lie beyond 64 bits.
const LONG_DIGITS: usize = 19;

/// The keys of one object seen so far: a list while short (objects here hold a dozen
/// keys), a hash set beyond, so that a huge object stays linear.
struct Keys<'a> {
    few: Vec<&'a [u8]>,
    many: HashSet<&'a [u8]>,
}

/// A list of keys longer than this becomes a hash set.
const FEW_KEYS: usize = 24;

impl<'a> Keys<'a> {
    fn new() -> Self {
        Keys {
            few: Vec::new(),
            many: HashSet::new(),
        }
    }

    /// Records `key`; false when it was seen already.
    fn insert(&mut self, key: &'a [u8]) -> bool {
        if self.few.len() < FEW_KEYS {
            if self.few.contains(&key) {
                return false;
            }
            self.few.push(key);
            return true;
        }
        if self.many.is_empty() {
            self.many.extend(self.few.iter().copied());
        }
        self.many.insert(key)
    }
}

enum Frame<'a> {
    Object(Keys<'a>),
    Array,
}

struct Scanner<'a> {
    t: &'a [u8],
    i: usize,
    long_number: bool,
}

impl<'a> Scanner<'a> {
    fn skip_blank(&mut self) {
        while self.i < self.t.len() && matches!(self.t[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.t.get(self.i).copied()
    }

    /// A string opening at `self.i` (a quote): its raw body, and whether it holds an
    /// escape. None when it does not close.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        let start = self.i + 1;
        let mut j = start;
        let mut escaped = false;
        loop {
            let at = j + self
                .t
                .get(j..)?
                .iter()
                .position(|&b| b == b'"' || b == b'\\')?;
            if self.t[at] == b'"' {
                self.i = at + 1;
                return Some((&self.t[start..at], escaped));
            }
            escaped = true;
            j = at + 2;
        }
    }

    fn number(&mut self) {
        let mut run = 0;
        while let Some(b) = self.peek() {
            match b {
                b'0'..=b'9' => {
                    run += 1;
                    if run >= LONG_DIGITS {
                        self.long_number = true;
                    }
                }
                b'-' | b'+' | b'.' | b'e' | b'E' => run = 0,
                _ => break,
            }
            self.i += 1;
        }
    }

    fn literal(&mut self) -> bool {
        for word in [&b"true"[..], b"false", b"null"] {
            if self.t[self.i..].starts_with(word) {
                self.i += word.len();
                return true;
            }
        }
        false
    }

    /// The answer's bits; `MAY_REPEAT_KEY` for anything unexpected.
    fn run(&mut self) -> u8 {
        let unsure = MAY_REPEAT_KEY;
        let mut stack: Vec<Frame<'a>> = Vec::new();
        // Whether a value is awaited next (else a separator or a closing bracket).
        let mut want_value = true;
        loop {
            self.skip_blank();
            let Some(b) = self.peek() else {
                return if stack.is_empty() && !want_value {
                    self.bits(0)
                } else {
                    unsure
                };
            };
            if want_value {
                match b {
                    b'{' => {
                        self.i += 1;
                        self.skip_blank();
                        if self.peek() == Some(b'}') {
                            self.i += 1;
                            want_value = false;
                            continue;
                        }
                        stack.push(Frame::Object(Keys::new()));
                        if !self.key(&mut stack) {
                            return unsure;
                        }
                        continue;
                    }
                    b'[' => {
                        self.i += 1;
                        self.skip_blank();
                        if self.peek() == Some(b']') {
                            self.i += 1;
                            want_value = false;
                            continue;
                        }
                        stack.push(Frame::Array);
                        continue;
                    }
                    b'"' => {
                        if self.string().is_none() {
                            return unsure;
                        }
                    }
                    b'-' | b'0'..=b'9' => self.number(),
                    _ => {
                        if !self.literal() {
                            return unsure;
                        }
                    }
                }
                want_value = false;
                continue;
            }
            // after a value: a comma, or the close of the innermost container
            match (b, stack.last()) {
                (b',', Some(Frame::Object(_))) => {
                    self.i += 1;
                    if !self.key(&mut stack) {
                        return unsure;
                    }
                    want_value = true;
                }
                (b',', Some(Frame::Array)) => {
                    self.i += 1;
                    want_value = true;
                }
                (b'}', Some(Frame::Object(_))) | (b']', Some(Frame::Array)) => {
                    self.i += 1;
                    stack.pop();
                }
                _ => return unsure,
            }
        }
    }

    /// A key and its colon, recorded in the innermost object; false for a repeated or
    /// escaped key, or for anything but a key.
    fn key(&mut self, stack: &mut [Frame<'a>]) -> bool {
        self.skip_blank();
        if self.peek() != Some(b'"') {
            return false;
        }
        let Some((key, escaped)) = self.string() else {
            return false;
        };
        if escaped {
            return false;
        }
        let Some(Frame::Object(seen)) = stack.last_mut() else {
            return false;
        };
        if !seen.insert(key) {
            return false;
        }
        self.skip_blank();
        if self.peek() != Some(b':') {
            return false;
        }
        self.i += 1;
        true
    }

    fn bits(&self, base: u8) -> u8 {
        base | if self.long_number { LONG_NUMBER } else { 0 }
    }
}

/// The bits `MAY_REPEAT_KEY` (1) and `LONG_NUMBER` (2) of one JSON document's bytes. A
/// document without either bit has no repeated key in any object and no integer beyond
/// 64 bits; with bit 1 set, nothing is known of bit 2.
#[pyfunction]
pub fn scan_json(data: &[u8]) -> u8 {
    Scanner {
        t: data,
        i: 0,
        long_number: false,
    }
    .run()
}
