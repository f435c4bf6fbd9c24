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
/// surrogate), left to the regex.
#[pyfunction]
pub(crate) fn rough_sentence_count(text: &Bound<'_, PyString>) -> Option<usize> {
    let chars: Vec<char> = text.to_str().ok()?.chars().collect();
    let mut count = 1;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\n' => {
                count += 1;
                i += 1;
            }
            '.' | '!' | '?' => {
                let mut j = i + 1;
                while j < chars.len() && matches!(chars[j], '"' | '\'' | ')' | ']') {
                    j += 1;
                }
                if j < chars.len() && is_py_space(chars[j]) {
                    // the match takes the space too (a line break after "." counts once)
                    count += 1;
                    i = j + 1;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    Some(count)
}
