//! Python's character classes and case tests on `str`, as IFEval's reference implementation
//! sees text: `\w`, `\d` and `\s` of `re` on `str` patterns, `str.isspace`, `str.isupper` and
//! `str.islower`. The IFEval checks are only exact when they classify characters as CPython does.
//!
//! Pipeline position: helpers of `stdlib::intrinsics::ifeval` (and its Punkt and word tokenizer
//! ports); nothing else uses them.

use regex::Regex;
use std::sync::LazyLock;

/// Non-ASCII letters (`\p{L}`) and numbers (`\p{N}`): CPython's `str.isalnum` for one character.
#[expect(clippy::unwrap_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
static ALNUM: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\A[\p{L}\p{N}]\z").unwrap());
/// Unicode decimal digits (`\p{Nd}`): `\d` of `re`.
#[expect(clippy::unwrap_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
static DECIMAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\A\p{Nd}\z").unwrap());

/// Compiles the patterns now, if no thread has yet.
pub(super) fn load() {
    LazyLock::force(&ALNUM);
    LazyLock::force(&DECIMAL);
}

fn one(re: &Regex, c: char) -> bool {
    let mut buf = [0u8; 4];
    re.is_match(c.encode_utf8(&mut buf))
}

/// `\w` of Python's `re` on a `str` pattern: a letter, a number or `_` (`str.isalnum()` or `_`).
/// Unlike Rust's `\w`, combining marks are not word characters.
pub fn is_word(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || c == '_'
    } else {
        one(&ALNUM, c)
    }
}

/// `\d` of Python's `re` on a `str` pattern: a Unicode decimal digit.
pub fn is_decimal(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        one(&DECIMAL, c)
    }
}

/// `str.isspace()` (and `\s` of `re`): Unicode white space plus the ASCII information separators
/// U+001C to U+001F, which Python counts as white space and Unicode does not.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `str.strip()`.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// `str.rstrip()`.
pub fn rstrip(s: &str) -> &str {
    s.trim_end_matches(is_space)
}

/// The titlecase letters (general category Lt), which Python counts as cased but neither upper
/// nor lower case.
fn is_title(c: char) -> bool {
    matches!(c as u32, 0x01C5 | 0x01C8 | 0x01CB | 0x01F2 | 0x1F88..=0x1F8F | 0x1F98..=0x1F9F | 0x1FA8..=0x1FAF | 0x1FBC | 0x1FCC | 0x1FFC)
}

/// `str.isupper()`: at least one cased character and no lowercase or titlecase one.
pub fn is_upper(s: &str) -> bool {
    let mut cased = false;
    for c in s.chars() {
        if c.is_lowercase() || is_title(c) {
            return false;
        }
        cased |= c.is_uppercase();
    }
    cased
}

/// `str.islower()`: at least one cased character and no uppercase or titlecase one.
pub fn is_lower(s: &str) -> bool {
    let mut cased = false;
    for c in s.chars() {
        if c.is_uppercase() || is_title(c) {
            return false;
        }
        cased |= c.is_lowercase();
    }
    cased
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_python() {
        assert!(is_word('é') && is_word('_') && is_word('٣') && is_word('½'));
        assert!(!is_word('\u{0301}') && !is_word('-') && !is_word('\u{093f}'));
        assert!(is_decimal('٣') && !is_decimal('½'));
        assert!(is_space('\u{1f}') && is_space('\u{a0}') && !is_space('\u{200b}'));
    }

    #[test]
    fn case_tests_follow_python() {
        assert!(is_upper("HELLO, 42!") && !is_upper("42") && !is_upper("HeLLO"));
        assert!(is_lower("hello, 42!") && !is_lower("") && !is_lower("hello I"));
        assert!(!is_upper("\u{01C5}A") && !is_lower("\u{01C5}a"));
    }
}
