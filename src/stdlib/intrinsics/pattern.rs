//! Regular-expression intrinsics (Rust `regex` syntax: no look-around or back-references, so
//! every match runs in linear time), compiled once per row through `EvalCtx::regex`.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{number, text_arg, texts};
use crate::stdlib::{EvalCtx, Intrinsic, Trap};
use crate::value::Value;

pub(super) const MATCHES: Intrinsic = Intrinsic {
    name: "matches",
    sig: "(text: Text, pattern: Text) -> Bool",
    doc: "Whether the regular expression `pattern` matches anywhere in `text` (Rust `regex` \
          syntax; use `(?i)` for case-insensitive and `(?m)` for `^`/`$` at line boundaries). \
          A pattern that does not compile is a `regex` trap.",
    examples: &[r##"matches("Order #123", "#\\d+")"##, r#"matches("ABC", "(?i)^abc$")"#],
    imp: |a, ctx| {
        let (t, p) = (text_arg(a, 0)?, text_arg(a, 1)?);
        if let Some(found) = ctx.planned_matches(t, p) {
            return Ok(Value::Bool(found));
        }
        if let Some(found) = literal(p).and_then(|l| l.find(t)) {
            return Ok(Value::Bool(found));
        }
        Ok(Value::Bool(ctx.regex(p)?.is_match(t)))
    },
};

fn full_match(args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let p = text_arg(args, 1)?;
    // Compile the user's pattern alone first so that its errors name the user's text.
    ctx.regex(p)?;
    let anchored = ctx.regex(&format!(r"\A(?:{p})\z"))?;
    Ok(Value::Bool(anchored.is_match(t)))
}

pub(super) const FULL_MATCH: Intrinsic = Intrinsic {
    name: "full_match",
    sig: "(text: Text, pattern: Text) -> Bool",
    doc: "Whether the regular expression `pattern` matches the whole of `text`, from its first to \
          its last character (a final line break is not skipped).",
    examples: &[r##"full_match("2024-01-31", "\\d{4}-\\d{2}-\\d{2}")"##, r##"not full_match("x 2024", "\\d+")"##],
    imp: full_match,
};

pub(super) const FIND_ALL: Intrinsic = Intrinsic {
    name: "find_all",
    sig: "(text: Text, pattern: Text) -> List[Text]",
    doc: "Every non-overlapping match of `pattern` in `text`, left to right, as the whole matched \
          text (capture groups are ignored, unlike Python's `re.findall`).",
    examples: &[r##"find_all("a1 b22 c333", "\\d+") == ["1", "22", "333"]"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let re = ctx.regex(text_arg(a, 1)?)?;
        texts(ctx, re.find_iter(t).map(|m| m.as_str()))
    },
};

pub(super) const COUNT_MATCHES: Intrinsic = Intrinsic {
    name: "count_matches",
    sig: "(text: Text, pattern: Text) -> Number",
    doc: "The number of non-overlapping matches of `pattern` in `text`, left to right.",
    examples: &[r##"count_matches("one. two. three.", "\\w+\\.") == 3"##],
    imp: |a, ctx| {
        let (t, p) = (text_arg(a, 0)?, text_arg(a, 1)?);
        if let Some(n) = literal(p).and_then(|l| l.count(t)) {
            return Ok(number(n));
        }
        Ok(number(ctx.regex(p)?.find_iter(t).count()))
    },
};

/// A pattern that stands for a literal text, which `matches` and `count_matches` answer with a
/// substring search instead of compiling a regex: rubrics build such patterns from their data
/// (`"(?i)" + keyword`, `"(?i)\\b" + word + "\\b"`), one compilation per distinct word, and
/// compiling was a tenth of IFEval's run. Only patterns whose meaning is plain are taken: the
/// body is letters, digits and punctuation that is literal in regex syntax; under `(?i)` it is
/// ASCII, and `\b` on both sides needs word characters at both ends of the body. Anything else
/// (and any text where the answer could differ, see [`Literal::find`]) goes to the regex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Literal<'p> {
    body: &'p str,
    /// `(?i)`: ASCII letters match either case.
    fold: bool,
    /// `\b...\b`: a match needs a word boundary on both sides.
    bounded: bool,
}

/// Longer literals go to the regex, so that its size limit applies to them as before.
const LITERAL_LIMIT: usize = 256;

/// ASCII characters other than letters and digits that regex syntax reads as themselves
/// outside a class and without the `x` flag.
const LITERAL_PUNCTUATION: &str = " !\"%&',-/:;<=>@_`~";

fn literal(pattern: &str) -> Option<Literal<'_>> {
    let (fold, rest) = match pattern.strip_prefix("(?i)") {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (bounded, body) = match rest.strip_prefix(r"\b").and_then(|r| r.strip_suffix(r"\b")) {
        Some(body) => (true, body),
        None => (false, rest),
    };
    if body.is_empty() || body.len() > LITERAL_LIMIT {
        return None;
    }
    let plain = |c: char| {
        if c.is_ascii() {
            c.is_ascii_alphanumeric() || LITERAL_PUNCTUATION.contains(c)
        } else {
            !fold
        }
    };
    if !body.chars().all(plain) {
        return None;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if bounded && !(word(body.chars().next()) && word(body.chars().next_back())) {
        return None;
    }
    Some(Literal { body, fold, bounded })
}

/// The characters outside ASCII that `(?i)` matches with an ASCII letter (the Kelvin sign with
/// `k`, the long s with `s`): where a text has one, a folded literal goes to the regex.
const FOLDS_TO_ASCII: [char; 2] = ['\u{17F}', '\u{212A}'];

impl Literal<'_> {
    /// Whether the literal occurs in `text`, `None` when the regex must answer.
    fn find(&self, text: &str) -> Option<bool> {
        let mut found = false;
        self.each(text, |_| {
            found = true;
            false
        })?;
        Some(found)
    }

    /// How many non-overlapping occurrences, left to right, `None` when the regex must answer.
    fn count(&self, text: &str) -> Option<usize> {
        let mut n = 0;
        self.each(text, |_| {
            n += 1;
            true
        })?;
        Some(n)
    }

    /// Calls `f` with the start of each match the regex would find, left to right and not
    /// overlapping, while `f` says go on. Every match of a literal has its length, so the
    /// leftmost match from a position is the first occurrence there that has its boundaries.
    fn each(&self, text: &str, mut f: impl FnMut(usize) -> bool) -> Option<()> {
        let lowered;
        let (hay, needle) = if self.fold {
            if !text.is_ascii() && text.contains(FOLDS_TO_ASCII) {
                return None;
            }
            lowered = (text.to_ascii_lowercase(), self.body.to_ascii_lowercase());
            (lowered.0.as_bytes(), lowered.1.as_bytes())
        } else {
            (text.as_bytes(), self.body.as_bytes())
        };
        let finder = memchr::memmem::Finder::new(needle);
        let mut at = 0;
        while let Some(i) = finder.find(&hay[at..]) {
            let start = at + i;
            let end = start + needle.len();
            if self.bounded && !(boundary_before(text, start) && boundary_after(text, end)) {
                // Not a match here; the next occurrence may overlap this one.
                at = start + text[start..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            if !f(start) {
                return Some(());
            }
            at = end;
        }
        Some(())
    }
}

/// Whether the character before byte `i` (a body starting with a word character) leaves a
/// word boundary there: none, or one that is not a word character in the regex's Unicode sense.
fn boundary_before(text: &str, i: usize) -> bool {
    !text[..i].chars().next_back().is_some_and(regex_syntax::is_word_character)
}

/// The same after byte `i`, for a body ending with a word character.
fn boundary_after(text: &str, i: usize) -> bool {
    !text[i..].chars().next().is_some_and(regex_syntax::is_word_character)
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;
    use crate::stdlib::TrapKind;

    #[test]
    fn bad_patterns_trap_with_the_users_pattern() {
        let err = call(FULL_MATCH.imp, &[Value::text("a"), Value::text("(")]).unwrap_err();
        assert_eq!(err.kind, TrapKind::Regex);
        assert!(err.message.contains("`(`"), "{}", err.message);
        let err = call(MATCHES.imp, &[Value::text("a"), Value::text("[")]).unwrap_err();
        assert_eq!(err.kind, TrapKind::Regex);
    }

    #[test]
    fn literal_patterns_are_answered_as_the_regex_answers_them() {
        let patterns = [
            "(?i)cat",
            "cat",
            "(?i)\\bcat\\b",
            "\\bcat\\b",
            "(?i)ice cream",
            "(?i)\\bk\\b",
            "(?i)sun",
            "naïve",
            "(?i)don't",
            "(?i)\\bfoo_bar\\b",
            "aa",
            "(?i)\\baa\\b",
            "a-b",
            "100%",
        ];
        let texts = [
            "",
            "cat",
            "The Cat sat on the CAT-mat; concatenate cats.",
            "k K \u{212A} kelvin",
            "\u{17F}un SUN",
            "naïve NAÏVE naive",
            "Don't DON'T dont",
            "foo_bar foo_barx xfoo_bar FOO_BAR",
            "aaaa aa aaa a",
            "a-b A-B a-bc",
            "100% 100 %",
            "écat cat_ caté cat1 (cat)",
            "çat \u{130}cat ıcat",
        ];
        for p in patterns {
            assert!(literal(p).is_some(), "{p:?} is searched as a literal");
            let re = crate::stdlib::compile_regex(p).unwrap();
            for t in texts {
                let matches = call(MATCHES.imp, &[Value::text(t), Value::text(p)]).unwrap();
                let count = call(COUNT_MATCHES.imp, &[Value::text(t), Value::text(p)]).unwrap();
                assert_eq!(matches, Value::Bool(re.is_match(t)), "matches({t:?}, {p:?})");
                assert_eq!(count, number(re.find_iter(t).count()), "count_matches({t:?}, {p:?})");
            }
        }
        // The patterns above are the fast path's; these are not.
        for p in ["(?i)naïve", "c.t", "(?i)\\b-x\\b", "\\b\\b", "", "(?i)", "a+", "(?x)a b", "a\\.b"] {
            assert_eq!(literal(p), None, "{p:?}");
        }
        assert!(literal("(?i)\\bcat\\b").is_some_and(|l| l.fold && l.bounded && l.body == "cat"));
    }

    /// `(?i)` on an ASCII literal matches ASCII case variants and, outside ASCII, only the
    /// characters of `FOLDS_TO_ASCII`: what lets a folded literal be searched in ASCII-lowered
    /// text. Every scalar value is tried against the class of all printable ASCII characters.
    #[test]
    fn only_the_known_characters_fold_to_ascii() {
        let re = regex::Regex::new(r"(?i)\A[\x20-\x7E]\z").unwrap();
        let mut buf = [0u8; 4];
        let folding: Vec<char> =
            (0x80..=0x10FFFFu32).filter_map(char::from_u32).filter(|c| re.is_match(c.encode_utf8(&mut buf))).collect();
        assert_eq!(folding, FOLDS_TO_ASCII);
    }

    #[test]
    fn full_match_anchors_alternations() {
        let f = |t: &str, p: &str| call(FULL_MATCH.imp, &[Value::text(t), Value::text(p)]).unwrap();
        assert_eq!(f("ab", "a|ab"), Value::Bool(true));
        assert_eq!(f("abc\n", "abc"), Value::Bool(false));
        assert_eq!(f("ABC", "(?i)abc"), Value::Bool(true));
    }
}
