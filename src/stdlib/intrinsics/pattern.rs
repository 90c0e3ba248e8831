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
        let t = text_arg(a, 0)?;
        let re = ctx.regex(text_arg(a, 1)?)?;
        Ok(number(re.find_iter(t).count()))
    },
};

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
    fn full_match_anchors_alternations() {
        let f = |t: &str, p: &str| call(FULL_MATCH.imp, &[Value::text(t), Value::text(p)]).unwrap();
        assert_eq!(f("ab", "a|ab"), Value::Bool(true));
        assert_eq!(f("abc\n", "abc"), Value::Bool(false));
        assert_eq!(f("ABC", "(?i)abc"), Value::Bool(true));
    }
}
