//! The rough sentence count of `excerpts.rough_sentence_count` (`ctxbudget/excerpts.py`):
//! how the select stage sizes an excerpt before it reads the passage's sentences.
//!
//! The reference is `len(excerpts.ROUGH_END.findall(text)) + 1`;
//! `tests/property/test_native_rank.py` compares the two. Written by hand because the regex
//! pass over every option's whole text is one of the select stage's larger costs, while the
//! pattern is a plain left-to-right scan: a line break, or one of `.!?` then any closing
//! quotes or brackets then a space, each match starting after the one before.

use pyo3::prelude::*;
use pyo3::types::PyString;

/// Python's `\s` of a str pattern (`str.isspace`): Unicode's white space and the four
/// information separators U+001C..U+001F.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `len(ROUGH_END.findall(text)) + 1`, or None for text that is no valid UTF-8 (a lone
/// surrogate), left to the regex. The scan reads UTF-8 bytes: the stops, line breaks,
/// quotes and brackets are ASCII, and no byte of a longer character is ASCII, so only the
/// space after a stop is read as a character.
#[pyfunction]
pub(crate) fn rough_sentence_count(text: &Bound<'_, PyString>) -> Option<usize> {
    let text = text.to_str().ok()?;
    let bytes = text.as_bytes();
    let mut count = 1;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                count += 1;
                i += 1;
            }
            b'.' | b'!' | b'?' => {
                let mut j = i + 1;
                while j < bytes.len() && matches!(bytes[j], b'"' | b'\'' | b')' | b']') {
                    j += 1;
                }
                match text[j..].chars().next() {
                    Some(c) if is_py_space(c) => {
                        // the match takes the space too (a line break after "." counts once)
                        count += 1;
                        i = j + c.len_utf8();
                    }
                    _ => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    Some(count)
}
