//! Number intrinsics: extraction from text, strict parsing, comparison with tolerance,
//! rounding and the small arithmetic helpers aggregations and checks need.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{invalid, num_arg, numbers_arg, text_arg};
use crate::stdlib::{EvalCtx, Intrinsic, Trap};
use crate::value::Value;
use std::sync::LazyLock;

/// Numbers in prose: `1,234.5` (well-formed thousands groups), `3.14`, `42`. Signs are
/// decided by hand (the regex crate has no look-behind).
#[expect(clippy::expect_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
static NUMBER_IN_TEXT: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?").expect("valid regex"));

/// A whole text that is one number: optional sign, digits with optional well-formed
/// thousands groups, optional fraction, optional exponent; or a bare fraction `.5`.
#[expect(clippy::expect_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
static NUMBER_TEXT: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"\A[+\-−]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+\-]?\d+)?\z")
        .expect("valid regex")
});

fn to_f64(digits: &str) -> f64 {
    // A run of up to 15 ASCII digits is an integer below 2^53: summed exactly, it is the
    // number the parser gives.
    if digits.len() <= 15 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return digits.bytes().fold(0u64, |n, b| n * 10 + u64::from(b - b'0')) as f64;
    }
    // Most numbers have no separator and no Unicode minus: parsed as they are, with no copy.
    if !digits.contains([',', '−']) {
        return digits.parse().unwrap_or(f64::NAN);
    }
    digits.replace(',', "").replace('−', "-").parse().unwrap_or(f64::NAN)
}

/// Where [`NUMBER_IN_TEXT`]'s matches are in an ASCII text, read off its bytes (in ASCII `\d`
/// is `0-9`): each leftmost-first match starts at the first digit of a run of digits. The first
/// alternative matches there when the run has one to three digits and a `,ddd` group follows
/// (then every group that follows, greedily); else the second takes the whole run. Either takes
/// a fraction `.d+` after it when one follows. `ascii_spans_are_the_regexs` compares the two.
fn ascii_number_spans(b: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let digits_from = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let group_at =
        |i: usize| b.get(i) == Some(&b',') && b.get(i + 1..i + 4).is_some_and(|g| g.iter().all(u8::is_ascii_digit));
    let mut i = 0;
    std::iter::from_fn(move || {
        i += b.get(i..)?.iter().position(u8::is_ascii_digit)?;
        let start = i;
        let mut end = digits_from(start);
        if end - start <= 3 && group_at(end) {
            while group_at(end) {
                end += 4;
            }
        }
        if b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
            end = digits_from(end + 1);
        }
        i = end;
        Some((start, end))
    })
}

fn numbers(args: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let number = |(start, end): (usize, usize)| {
        let mut n = to_f64(&t[start..end]);
        let mut rest = t[..start].chars().rev();
        // A sign, unless it joins two words or numbers (`3-4`, `COVID-19`).
        if matches!(rest.next(), Some('-' | '−')) && !rest.next().is_some_and(char::is_alphanumeric) {
            n = -n;
        }
        Value::Number(n)
    };
    let out: Vec<Value> = if t.is_ascii() {
        ascii_number_spans(t.as_bytes()).map(number).collect()
    } else {
        NUMBER_IN_TEXT.find_iter(t).map(|m| number((m.start(), m.end()))).collect()
    };
    Ok(Value::list(out))
}

pub(super) const NUMBERS: Intrinsic = Intrinsic {
    name: "numbers",
    sig: "(text: Text) -> List[Number]",
    doc: "Every number written in `text`, in order: integers, decimals (`3.14`), thousands \
          separated with commas (`1,234,567`), and negatives (`-5`, but the `-` of a range \
          `3-4` or of `COVID-19` is not a sign). Exponents, fractions such as `1/2` and number \
          words are not recognised; a group that is not three digits ends a number (`1,23` is \
          `1` and `23`).",
    examples: &[
        r##"numbers("It costs $1,234.50, not -5 or 3-4.") == [1234.5, -5, 3, 4]"##,
        r##"numbers("no digits").len() == 0"##,
    ],
    imp: numbers,
};

pub(super) const PARSE_NUMBER: Intrinsic = Intrinsic {
    name: "parse_number",
    sig: "(text: Text) -> Number?",
    doc: "`text` as a number, or `null` when, once trimmed, it is not exactly one number: an \
          optional sign, digits (thousands may be grouped with commas), an optional fraction and \
          an optional exponent (`-1,234.5`, `.5`, `2e3`). Units, percent signs and words make it \
          `null`.",
    examples: &[
        r##"parse_number(" -1,234.5 ") == -1234.5"##,
        r##"parse_number("2e3") == 2000"##,
        r##"parse_number("12 apples") == null"##,
    ],
    imp: |a, _| {
        let t = text_arg(a, 0)?.trim();
        Ok(if NUMBER_TEXT.is_match(t) { Value::Number(to_f64(t)) } else { Value::Null })
    },
};

fn tolerance(args: &[Value], i: usize, what: &str) -> Result<f64, Trap> {
    let tol = num_arg(args, i)?;
    if tol.is_nan() || tol < 0.0 {
        return Err(invalid(format!("{what} must be a non-negative number, got {}", Value::Number(tol))));
    }
    Ok(tol)
}

pub(super) const APPROX_EQ: Intrinsic = Intrinsic {
    name: "approx_eq",
    sig: "(a: Number, b: Number, tol: Number = 1e-9) -> Bool",
    doc: "Whether `a` and `b` differ by at most the absolute tolerance `tol` (`|a - b| <= tol`). A \
          negative tolerance is an invalid argument.",
    examples: &[r##"approx_eq(0.1 + 0.2, 0.3)"##, r##"approx_eq(9.8, 10, tol: 0.5)"##, r##"not approx_eq(1, 2)"##],
    imp: |a, _| {
        let (x, y) = (num_arg(a, 0)?, num_arg(a, 1)?);
        let tol = if a.len() > 2 { tolerance(a, 2, "the tolerance")? } else { 1e-9 };
        Ok(Value::Bool((x - y).abs() <= tol || x == y))
    },
};

pub(super) const REL_CLOSE: Intrinsic = Intrinsic {
    name: "rel_close",
    sig: "(a: Number, b: Number, rel: Number) -> Bool",
    doc: "Whether `a` and `b` differ by at most `rel` times the larger of their magnitudes \
          (`|a - b| <= rel * max(|a|, |b|)`, Python's `math.isclose` without an absolute term): \
          `rel: 0.01` accepts a 1% difference. A negative `rel` is an invalid argument.",
    examples: &[r##"rel_close(101, 100, 0.01)"##, r##"not rel_close(103, 100, 0.01)"##],
    imp: |a, _| {
        let (x, y) = (num_arg(a, 0)?, num_arg(a, 1)?);
        let rel = tolerance(a, 2, "the relative tolerance")?;
        Ok(Value::Bool(x == y || (x - y).abs() <= rel * x.abs().max(y.abs())))
    },
};

pub(super) const ABS: Intrinsic = Intrinsic {
    name: "abs",
    sig: "(x: Number) -> Number",
    doc: "The absolute value of `x`.",
    examples: &[r##"abs(-3) == 3"##, r##"abs(2.5) == 2.5"##],
    imp: |a, _| Ok(Value::Number(num_arg(a, 0)?.abs())),
};

fn round(args: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    let x = num_arg(args, 0)?;
    let digits = match args.get(1) {
        None | Some(Value::Null) => 0.0,
        Some(_) => num_arg(args, 1)?,
    };
    if digits.fract() != 0.0 || !(-15.0..=15.0).contains(&digits) {
        return Err(invalid(format!(
            "the number of digits must be an integer from -15 to 15, got {}",
            Value::Number(digits)
        )));
    }
    let scale = 10f64.powi(digits as i32);
    let r = (x * scale).round() / scale;
    Ok(Value::Number(if r.is_finite() { r } else { x }))
}

pub(super) const ROUND: Intrinsic = Intrinsic {
    name: "round",
    sig: "(x: Number, digits: Number = 0) -> Number",
    doc: "`x` rounded to `digits` decimal places (negative `digits` round to tens, hundreds...), \
          halves away from zero (`round(2.5) == 3`, `round(-2.5) == -3`; unlike Python, no \
          banker's rounding). The rounding is done on `x * 10^digits`, so a binary fraction just \
          below a half rounds down. `digits` must be an integer from -15 to 15.",
    examples: &[r##"round(2.5) == 3"##, r##"round(3.14159, digits: 2) == 3.14"##, r##"round(1234, -2) == 1200"##],
    imp: round,
};

pub(super) const FLOOR: Intrinsic = Intrinsic {
    name: "floor",
    sig: "(x: Number) -> Number",
    doc: "The largest integer not greater than `x`.",
    examples: &[r##"floor(2.7) == 2"##, r##"floor(-2.1) == -3"##],
    imp: |a, _| Ok(Value::Number(num_arg(a, 0)?.floor())),
};

pub(super) const CEIL: Intrinsic = Intrinsic {
    name: "ceil",
    sig: "(x: Number) -> Number",
    doc: "The smallest integer not less than `x`.",
    examples: &[r##"ceil(2.1) == 3"##, r##"ceil(-2.7) == -2"##],
    imp: |a, _| Ok(Value::Number(num_arg(a, 0)?.ceil())),
};

pub(super) const MIN2: Intrinsic = Intrinsic {
    name: "min",
    sig: "(a: Number, b: Number) -> Number",
    doc: "The smaller of `a` and `b`.",
    examples: &[r##"min(3, -1) == -1"##],
    imp: |a, _| Ok(Value::Number(smaller(num_arg(a, 0)?, num_arg(a, 1)?))),
};

pub(super) const MIN_LIST: Intrinsic = Intrinsic {
    name: "min",
    sig: "(xs: List[Number]) -> Number?",
    doc: "The smallest number of `xs`, or `null` when `xs` is empty.",
    examples: &[r##"min([4, 2, 8]) == 2"##, r##"min(numbers("none")) == null"##],
    imp: |a, _| Ok(numbers_arg(a, 0)?.into_iter().reduce(f64::min).map_or(Value::Null, Value::Number)),
};

pub(super) const MAX2: Intrinsic = Intrinsic {
    name: "max",
    sig: "(a: Number, b: Number) -> Number",
    doc: "The larger of `a` and `b`.",
    examples: &[r##"max(3, -1) == 3"##],
    imp: |a, _| Ok(Value::Number(larger(num_arg(a, 0)?, num_arg(a, 1)?))),
};

/// `max(a, b)` of two Numbers: the one function behind the intrinsic and behind the JIT's
/// direct call of it (`backend::jit`), so that the two agree on every pair, `-0` and NaN
/// included. Not inlined, so both run the same machine code.
#[inline(never)]
pub fn larger(a: f64, b: f64) -> f64 {
    a.max(b)
}

/// `min(a, b)` of two Numbers, as [`larger`] is `max`.
#[inline(never)]
pub fn smaller(a: f64, b: f64) -> f64 {
    a.min(b)
}

/// Whether `i` is `max` (`Some(true)`) or `min` (`Some(false)`) of two Numbers: the calls a
/// compiled engine may make directly, on plain numbers, with [`larger`] and [`smaller`].
pub fn number_pair_extreme(i: &Intrinsic) -> Option<bool> {
    let is = |c: &Intrinsic| i.name == c.name && i.sig == c.sig;
    if is(&MAX2) {
        Some(true)
    } else if is(&MIN2) {
        Some(false)
    } else {
        None
    }
}

pub(super) const MAX_LIST: Intrinsic = Intrinsic {
    name: "max",
    sig: "(xs: List[Number]) -> Number?",
    doc: "The largest number of `xs`, or `null` when `xs` is empty.",
    examples: &[r##"max([4, 2, 8]) == 8"##],
    imp: |a, _| Ok(numbers_arg(a, 0)?.into_iter().reduce(f64::max).map_or(Value::Null, Value::Number)),
};

pub(super) const CLIP: Intrinsic = Intrinsic {
    name: "clip",
    sig: "(x: Number, lo: Number, hi: Number) -> Number",
    doc: "`x` limited to the range `lo` to `hi`: `lo` when below, `hi` when above. `lo` greater \
          than `hi` is an invalid argument.",
    examples: &[r##"clip(1.7, 0, 1) == 1"##, r##"clip(-0.2, 0, 1) == 0"##, r##"clip(0.5, 0, 1) == 0.5"##],
    imp: |a, _| {
        let (x, lo, hi) = (num_arg(a, 0)?, num_arg(a, 1)?, num_arg(a, 2)?);
        if lo.is_nan() || hi.is_nan() || lo > hi {
            return Err(invalid(format!(
                "clip needs lo <= hi, got lo = {} and hi = {}",
                Value::Number(lo),
                Value::Number(hi)
            )));
        }
        Ok(Value::Number(x.clamp(lo, hi)))
    },
};

pub(super) const SUM: Intrinsic = Intrinsic {
    name: "sum",
    sig: "(xs: List[Number]) -> Number",
    doc: "The sum of `xs`, added left to right (0 for an empty list).",
    examples: &[r##"sum([1, 2, 3.5]) == 6.5"##, r##"sum(numbers("")) == 0"##],
    imp: |a, _| Ok(Value::Number(numbers_arg(a, 0)?.into_iter().sum())),
};

pub(super) const MEAN: Intrinsic = Intrinsic {
    name: "mean",
    sig: "(xs: List[Number]) -> Number?",
    doc: "The arithmetic mean of `xs` (the sum added left to right, divided by the count), or \
          `null` when `xs` is empty.",
    examples: &[r##"mean([1, 2, 6]) == 3"##, r##"mean(numbers("")) == null"##],
    imp: |a, _| {
        let xs = numbers_arg(a, 0)?;
        Ok(if xs.is_empty() { Value::Null } else { Value::Number(xs.iter().sum::<f64>() / xs.len() as f64) })
    },
};

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    fn nums(t: &str) -> Vec<f64> {
        match call(NUMBERS.imp, &[Value::text(t)]).unwrap() {
            Value::List(l) => l.iter().map(|v| v.as_number().unwrap()).collect(),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn numbers_in_prose() {
        assert_eq!(
            nums("-5 and -3.5, (−2) 12,345,678 1,23 x-1 v1.2.3 7."),
            [-5.0, -3.5, -2.0, 12345678.0, 1.0, 23.0, 1.0, 1.2, 3.0, 7.0]
        );
        assert_eq!(nums("range 10-20, COVID-19"), [10.0, 20.0, 19.0]);
        assert!(nums("").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn ascii_spans_are_the_regexs(t in "[0-9,.\\-a x]{0,40}") {
            let regex: Vec<(usize, usize)> = NUMBER_IN_TEXT.find_iter(&t).map(|m| (m.start(), m.end())).collect();
            let ascii: Vec<(usize, usize)> = ascii_number_spans(t.as_bytes()).collect();
            proptest::prop_assert_eq!(ascii, regex);
        }
    }

    #[test]
    fn ascii_spans_are_the_regexs_on_their_edges() {
        for t in [
            "1234,567",
            "1,2345",
            "1,234,56",
            "1,234.5.6",
            "12.34.56",
            "1,234,567.89,1",
            "123,456,",
            "1.,2",
            ",123",
            "9,999,999x",
            "0.5",
            "a1b22c333,444",
        ] {
            let regex: Vec<(usize, usize)> = NUMBER_IN_TEXT.find_iter(t).map(|m| (m.start(), m.end())).collect();
            let ascii: Vec<(usize, usize)> = ascii_number_spans(t.as_bytes()).collect();
            assert_eq!(ascii, regex, "{t:?}");
        }
    }

    #[test]
    fn integers_are_what_the_parser_gives() {
        for t in ["0", "7", "007", "42", "999999999999999", "123456789012345", "1234567890123456", "12.5", "1,234"] {
            let parsed: f64 = t.replace(',', "").parse().unwrap();
            assert_eq!(to_f64(t).to_bits(), parsed.to_bits(), "{t}");
        }
    }

    #[test]
    fn parse_number_is_strict() {
        let p = |t: &str| call(PARSE_NUMBER.imp, &[Value::text(t)]).unwrap();
        assert_eq!(p("42"), Value::Number(42.0));
        assert_eq!(p("+.5"), Value::Number(0.5));
        assert_eq!(p("1."), Value::Number(1.0));
        assert_eq!(p("1,000"), Value::Number(1000.0));
        for bad in ["", "1,00", "inf", "NaN", "1 000", "5%", "0x10", "--1", "1e"] {
            assert_eq!(p(bad), Value::Null, "{bad}");
        }
    }

    #[test]
    fn domain_errors() {
        let n = Value::Number;
        assert!(call(APPROX_EQ.imp, &[n(1.0), n(1.0), n(-1.0)]).is_err());
        assert!(call(REL_CLOSE.imp, &[n(1.0), n(1.0), n(f64::NAN)]).is_err());
        assert!(call(CLIP.imp, &[n(1.0), n(2.0), n(0.0)]).is_err());
        assert!(call(ROUND.imp, &[n(1.0), n(0.5)]).is_err());
        assert_eq!(call(ROUND.imp, &[n(-2.5)]).unwrap(), n(-3.0));
        assert_eq!(call(REL_CLOSE.imp, &[n(0.0), n(0.0), n(0.0)]).unwrap(), Value::Bool(true));
    }
}
