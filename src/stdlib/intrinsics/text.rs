//! Text intrinsics: counts and views read from the shared per-row text index, plain string
//! operations, and the SQuAD-style normalisation used by exact-match answers.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{invalid, number, opt_text_arg, text_arg, text_part, texts, texts_arg};
use crate::stdlib::text_index::ByteRange;
use crate::stdlib::{EvalCtx, Intrinsic, Trap};
use crate::value::Value;
use std::sync::Arc;

// ---------------------------------------------------------------- index-backed counts

/// The ranges of one view of the text index, as texts.
fn view(args: &[Value], ctx: &mut EvalCtx, pick: fn(&crate::stdlib::TextIndex) -> &[ByteRange]) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let idx = ctx.text_index(t)?;
    texts(ctx, pick(&idx).iter().map(|r| r.get(t)))
}

fn view_count(
    args: &[Value],
    ctx: &mut EvalCtx,
    pick: fn(&crate::stdlib::TextIndex) -> &[ByteRange],
) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let idx = ctx.text_index(t)?;
    Ok(number(pick(&idx).len()))
}

pub(super) const WORD_COUNT: Intrinsic = Intrinsic {
    name: "word_count",
    sig: "(text: Text) -> Number",
    doc: "The number of words in `text`. A word is a run of Unicode letters and digits in which \
          single apostrophes and hyphens may join two such characters (`don't`, `well-known` and \
          `COVID-19` are one word each; `3.14` is two). Punctuation, markdown markers and \
          underscores are not part of words.",
    examples: &[
        r##"word_count("one two three") == 3"##,
        r##"word_count("Don't stop: it's well-known!") == 4"##,
        r##"word_count("") == 0"##,
    ],
    imp: |a, c| view_count(a, c, |i| i.words()),
};

pub(super) const SENTENCE_COUNT: Intrinsic = Intrinsic {
    name: "sentence_count",
    sig: "(text: Text) -> Number",
    doc: "The number of sentences in `text`, split as `sentences` does: an approximation of NLTK \
          Punkt for English (IFEval's sentence counter). A run of `.`, `!`, `?` followed by \
          whitespace ends a sentence, except a period closing an abbreviation (`Dr.`, `e.g.`) or \
          an initial (`J. Smith`); after a number (`1.`) or an ellipsis it ends one only when the \
          next word is not lowercase. Line breaks alone do not split.",
    examples: &[
        r##"sentence_count("Hi there. How are you? Fine!") == 3"##,
        r##"sentence_count("Dr. Smith arrived at 3.30 today.") == 1"##,
    ],
    imp: |a, c| view_count(a, c, |i| i.sentences()),
};

pub(super) const PARAGRAPH_COUNT: Intrinsic = Intrinsic {
    name: "paragraph_count",
    sig: "(text: Text) -> Number",
    doc: "The number of paragraphs in `text`: maximal runs of non-blank lines, separated by one \
          or more blank (whitespace-only) lines.",
    examples: &[r##"paragraph_count("one\ntwo\n\nthree") == 2"##, r##"paragraph_count("  \n") == 0"##],
    imp: |a, c| view_count(a, c, |i| i.paragraphs()),
};

pub(super) const LINE_COUNT: Intrinsic = Intrinsic {
    name: "line_count",
    sig: "(text: Text) -> Number",
    doc: "The number of lines in `text`, split on `\\n` (a `\\r` before it is dropped). A final \
          line break does not open an empty line, so `\"a\\n\"` has one line and `\"\"` none. \
          Blank lines count.",
    examples: &[r##"line_count("a\nb\n\nc\n") == 4"##, r##"line_count("") == 0"##],
    imp: |a, c| view_count(a, c, |i| i.lines()),
};

fn char_len(args: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    Ok(number(text_arg(args, 0)?.chars().count()))
}

pub(super) const CHAR_COUNT: Intrinsic = Intrinsic {
    name: "char_count",
    sig: "(text: Text) -> Number",
    doc: "The number of characters (Unicode scalar values, not bytes and not grapheme clusters) \
          in `text`, whitespace included. The same as `len` on a text.",
    examples: &[r##"char_count("héllo!") == 6"##, r##"char_count("a b") == 3"##],
    imp: char_len,
};

pub(super) const LEN_TEXT: Intrinsic = Intrinsic {
    name: "len",
    sig: "(text: Text) -> Number",
    doc: "The length of `text` in characters (Unicode scalar values), as `char_count`.",
    examples: &[r##""abc".len() == 3"##, r##"len("") == 0"##],
    imp: char_len,
};

pub(super) const WORDS: Intrinsic = Intrinsic {
    name: "words",
    sig: "(text: Text) -> List[Text]",
    doc: "The words of `text` in order, as defined for `word_count`.",
    examples: &[r##"words("Hello, world! It's me.") == ["Hello", "world", "It's", "me"]"##],
    imp: |a, c| view(a, c, |i| i.words()),
};

pub(super) const SENTENCES: Intrinsic = Intrinsic {
    name: "sentences",
    sig: "(text: Text) -> List[Text]",
    doc: "The sentences of `text` in order, as defined for `sentence_count`; each keeps its final \
          punctuation and any closing quote, without surrounding whitespace.",
    examples: &[r##"sentences("It works. Mr. Lee agrees! OK") == ["It works.", "Mr. Lee agrees!", "OK"]"##],
    imp: |a, c| view(a, c, |i| i.sentences()),
};

pub(super) const PARAGRAPHS: Intrinsic = Intrinsic {
    name: "paragraphs",
    sig: "(text: Text) -> List[Text]",
    doc: "The paragraphs of `text` in order (blank-line separated); inner line breaks are kept.",
    examples: &[r##"paragraphs("a\nb\n\n\nc") == ["a\nb", "c"]"##],
    imp: |a, c| view(a, c, |i| i.paragraphs()),
};

pub(super) const LINES: Intrinsic = Intrinsic {
    name: "lines",
    sig: "(text: Text) -> List[Text]",
    doc: "The lines of `text` in order, without their line terminators; blank lines are kept.",
    examples: &[r##"lines("a\r\nb\n\nc") == ["a", "b", "", "c"]"##],
    imp: |a, c| view(a, c, |i| i.lines()),
};

// ---------------------------------------------------------------- transformations

pub(super) const LOWER: Intrinsic = Intrinsic {
    name: "lower",
    sig: "(text: Text) -> Text",
    doc: "`text` in lowercase (Unicode case mapping).",
    examples: &[r##"lower("Hello WORLD") == "hello world""##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        Ok(Value::Text(ctx.lowered(t)))
    },
};

pub(super) const UPPER: Intrinsic = Intrinsic {
    name: "upper",
    sig: "(text: Text) -> Text",
    doc: "`text` in uppercase (Unicode case mapping).",
    examples: &[r##"upper("Hello") == "HELLO""##],
    imp: |a, _| Ok(Value::text(text_arg(a, 0)?.to_uppercase())),
};

pub(super) const TRIM: Intrinsic = Intrinsic {
    name: "trim",
    sig: "(text: Text) -> Text",
    doc: "`text` without leading and trailing whitespace.",
    examples: &[r##"trim("  hi \n") == "hi""##],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        Ok(text_part(t, t.trim()))
    },
};

pub(super) const STRIP_CHARS: Intrinsic = Intrinsic {
    name: "strip_chars",
    sig: "(text: Text, chars: Text) -> Text",
    doc: "`text` without any of the characters in `chars` at either end, like Python's \
          `str.strip(chars)`: `strip_chars(t, \"\\\"\")` removes surrounding double quotes.",
    examples: &[r##"strip_chars("**bold**", "*") == "bold""##, r##"strip_chars("\"q\"", "\"") == "q""##],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        let chars = text_arg(a, 1)?;
        Ok(text_part(t, t.trim_matches(|c| chars.contains(c))))
    },
};

pub(super) const STRIP_PREFIX: Intrinsic = Intrinsic {
    name: "strip_prefix",
    sig: "(text: Text, prefix: Text) -> Text",
    doc: "`text` without `prefix` at its start, removed once; `text` unchanged when it does not \
          start with `prefix` (Python's `str.removeprefix`).",
    examples: &[r##"strip_prefix("```json", "```") == "json""##, r##"strip_prefix("abc", "x") == "abc""##],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        let p = text_arg(a, 1)?;
        Ok(text_part(t, t.strip_prefix(&**p).unwrap_or(t)))
    },
};

pub(super) const STRIP_SUFFIX: Intrinsic = Intrinsic {
    name: "strip_suffix",
    sig: "(text: Text, suffix: Text) -> Text",
    doc: "`text` without `suffix` at its end, removed once; `text` unchanged when it does not end \
          with `suffix` (Python's `str.removesuffix`).",
    examples: &[r##"strip_suffix("a.txt", ".txt") == "a""##],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        let s = text_arg(a, 1)?;
        Ok(text_part(t, t.strip_suffix(&**s).unwrap_or(t)))
    },
};

// ---------------------------------------------------------------- plain substring search

/// The non-overlapping occurrences of `needle` (not empty) in `t`, left to right: the
/// positions `str::matches` finds, found with memchr's vectorised searcher (a one-byte needle,
/// such as the `"\n"` and `"*"` of IFEval's loose variants, is a `memchr` scan; `str`'s own
/// searcher is several times slower on short needles). A match of a UTF-8 needle in a UTF-8
/// text starts and ends on character boundaries, so every slice below is valid.
fn occurrences<'a>(t: &'a str, needle: &'a str) -> memchr::memmem::FindIter<'a, 'a> {
    memchr::memmem::find_iter(t.as_bytes(), needle.as_bytes())
}

/// How many times `needle` (not empty) occurs in `t`, without overlaps (`t.matches(needle).count()`).
pub(crate) fn count_substring(t: &str, needle: &str) -> usize {
    occurrences(t, needle).count()
}

/// Whether `needle` occurs in `t` (`t.contains(needle)`).
pub(crate) fn has_substring(t: &str, needle: &str) -> bool {
    needle.is_empty() || memchr::memmem::find(t.as_bytes(), needle.as_bytes()).is_some()
}

/// The pieces of `t` between occurrences of `sep` (not empty): `t.split(sep)`.
fn split_on<'a>(t: &'a str, sep: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let mut start = 0;
    let mut found = occurrences(t, sep);
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        match found.next() {
            Some(at) => {
                let piece = &t[start..at];
                start = at + sep.len();
                Some(piece)
            }
            None => {
                done = true;
                Some(&t[start..])
            }
        }
    })
}

/// `t` with every occurrence of `from` (not empty) replaced by `to`: `t.replace(from, to)`.
fn replace_all(t: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut start = 0;
    for at in occurrences(t, from) {
        out.push_str(&t[start..at]);
        out.push_str(to);
        start = at + from.len();
    }
    out.push_str(&t[start..]);
    out
}

// ---------------------------------------------------------------- tests on text

pub(super) const CONTAINS_TEXT: Intrinsic = Intrinsic {
    name: "contains",
    sig: "(text: Text, needle: Text) -> Bool",
    doc: "Whether `needle` occurs in `text` (case-sensitive substring; the empty text occurs \
          everywhere). See `contains_ci` and `keyword_count` for looser matches.",
    examples: &[r##""hello world".contains("lo w")"##, r##"not contains("Hello", "hello")"##],
    imp: |a, ctx| {
        let (t, n) = (text_arg(a, 0)?, text_arg(a, 1)?);
        Ok(Value::Bool(match ctx.planned_contains(t, n) {
            Some(found) => found,
            None => has_substring(t, n),
        }))
    },
};

pub(super) const CONTAINS_CI: Intrinsic = Intrinsic {
    name: "contains_ci",
    sig: "(text: Text, needle: Text) -> Bool",
    doc: "Whether `needle` occurs in `text`, ignoring case (both are lowercased first).",
    examples: &[r##"contains_ci("Hello World", "WORLD")"##],
    imp: |a, ctx| {
        let (t, n) = (text_arg(a, 0)?, text_arg(a, 1)?);
        if let Some(found) = ctx.planned_contains_ci(t, n) {
            return Ok(Value::Bool(found));
        }
        let t = ctx.lowered(t);
        Ok(Value::Bool(has_substring(&t, &n.to_lowercase())))
    },
};

pub(super) const STARTS_WITH: Intrinsic = Intrinsic {
    name: "starts_with",
    sig: "(text: Text, prefix: Text) -> Bool",
    doc: "Whether `text` starts with `prefix` (case-sensitive, no trimming).",
    examples: &[r##"starts_with("Dear Sir", "Dear")"##, r##"not " Dear".starts_with("Dear")"##],
    imp: |a, _| Ok(Value::Bool(text_arg(a, 0)?.starts_with(&**text_arg(a, 1)?))),
};

pub(super) const ENDS_WITH: Intrinsic = Intrinsic {
    name: "ends_with",
    sig: "(text: Text, suffix: Text) -> Bool",
    doc: "Whether `text` ends with `suffix` (case-sensitive, no trimming: trailing whitespace \
          counts, so combine with `trim` when it should not).",
    examples: &[r##"ends_with("Is there anything else?", "else?")"##, r##"not ends_with("end \n", "end")"##],
    imp: |a, _| Ok(Value::Bool(text_arg(a, 0)?.ends_with(&**text_arg(a, 1)?))),
};

fn nonempty<'a>(t: &'a Arc<str>, what: &str) -> Result<&'a str, Trap> {
    if t.is_empty() {
        Err(invalid(format!("{what} must not be empty")))
    } else {
        Ok(t)
    }
}

pub(super) const COUNT_OCCURRENCES: Intrinsic = Intrinsic {
    name: "count_occurrences",
    sig: "(text: Text, needle: Text) -> Number",
    doc: "The number of non-overlapping occurrences of `needle` in `text`, scanning left to right \
          (case-sensitive substring, like Python's `str.count`). An empty `needle` is an invalid \
          argument.",
    examples: &[r##"count_occurrences("banana", "an") == 2"##, r##"count_occurrences("aaaa", "aa") == 2"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let n = nonempty(text_arg(a, 1)?, "the text to count")?;
        Ok(match ctx.planned_count(t, n) {
            Some(count) => number(count as usize),
            None => number(count_substring(t, n)),
        })
    },
};

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn keyword_count(args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let kw = text_arg(args, 1)?;
    let parts: Vec<String> = kw.split_whitespace().map(regex::escape).collect();
    if parts.is_empty() {
        return Err(invalid("the keyword must not be empty"));
    }
    let re = ctx.regex(&format!("(?i){}", parts.join(r"\s+")))?;
    let first_is_word = kw.trim().chars().next().is_some_and(is_word_char);
    let last_is_word = kw.trim().chars().last().is_some_and(is_word_char);
    let mut count = 0;
    let mut pos = 0;
    while let Some(m) = re.find_at(t, pos) {
        let before_ok = !first_is_word || !t[..m.start()].chars().last().is_some_and(is_word_char);
        let after_ok = !last_is_word || !t[m.end()..].chars().next().is_some_and(is_word_char);
        if before_ok && after_ok {
            count += 1;
            pos = m.end().max(m.start() + 1);
        } else {
            pos = m.start() + t[m.start()..].chars().next().map_or(1, char::len_utf8);
        }
        if pos > t.len() {
            break;
        }
    }
    Ok(number(count))
}

pub(super) const KEYWORD_COUNT: Intrinsic = Intrinsic {
    name: "keyword_count",
    sig: "(text: Text, keyword: Text) -> Number",
    doc: "The number of whole-word, case-insensitive occurrences of `keyword` (a word or a phrase) \
          in `text`. A phrase matches across any run of whitespace. Whole-word means the match is \
          not preceded or followed by a letter, a digit or `_`, so hyphens and apostrophes are \
          boundaries: `known` occurs once in `well-known`, and `cat` not at all in `cats`.",
    examples: &[
        r##"keyword_count("The cat sat. CAT! cats and concat.", "cat") == 2"##,
        r##"keyword_count("New  York and new\nyork", "new york") == 2"##,
    ],
    imp: keyword_count,
};

pub(super) const IS_LOWERCASE: Intrinsic = Intrinsic {
    name: "is_lowercase",
    sig: "(text: Text) -> Bool",
    doc: "Whether `text` equals its lowercase form (so a text without letters is lowercase), as \
          IFEval's `change_case:english_lowercase` compares `value == value.lower()`.",
    examples: &[r##"is_lowercase("all lower, 123!")"##, r##"not is_lowercase("Not")"##],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        Ok(Value::Bool(t.to_lowercase() == **t))
    },
};

pub(super) const IS_UPPERCASE: Intrinsic = Intrinsic {
    name: "is_uppercase",
    sig: "(text: Text) -> Bool",
    doc: "Whether `text` equals its uppercase form (so a text without letters is uppercase).",
    examples: &[r##"is_uppercase("ALL CAPS 42!")"##, r##"not is_uppercase("ALL CAPs")"##],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        Ok(Value::Bool(t.to_uppercase() == **t))
    },
};

pub(super) const CAPITAL_WORD_COUNT: Intrinsic = Intrinsic {
    name: "capital_word_count",
    sig: "(text: Text) -> Number",
    doc: "The number of words (as `words` defines them) written fully in capitals: at least one \
          cased letter and no lowercase letter, like Python's `str.isupper` (`I`, `NASA` and \
          `COVID-19` count; `Hello` and `42` do not).",
    examples: &[r##"capital_word_count("I saw NASA and COVID-19 data, not Hello or 42") == 3"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let idx = ctx.text_index(t)?;
        let n = idx
            .words()
            .iter()
            .map(|r| r.get(t))
            .filter(|w| w.chars().any(char::is_uppercase) && !w.chars().any(char::is_lowercase))
            .count();
        Ok(number(n))
    },
};

pub(super) const SPLIT: Intrinsic = Intrinsic {
    name: "split",
    sig: "(text: Text, sep: Text? = null) -> List[Text]",
    doc: "`text` split on `sep`, keeping empty pieces (Python's `str.split(sep)`); without `sep`, \
          split on runs of whitespace with no empty pieces (Python's `str.split()`). An empty \
          `sep` is an invalid argument.",
    examples: &[r##"split("a,b,,c", ",") == ["a", "b", "", "c"]"##, r##"split("  two   words ") == ["two", "words"]"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        match opt_text_arg(a, 1)? {
            None => texts(ctx, t.split_whitespace()),
            Some(sep) => texts(ctx, split_on(t, nonempty(sep, "the separator")?)),
        }
    },
};

pub(super) const JOIN: Intrinsic = Intrinsic {
    name: "join",
    sig: "(parts: List[Text], sep: Text = \"\") -> Text",
    doc: "The texts of `parts` joined with `sep` between them.",
    examples: &[r##"join(["a", "b", "c"], ", ") == "a, b, c""##, r##"["x", "y"].join() == "xy""##],
    imp: |a, ctx| {
        let parts = texts_arg(a, 0)?;
        let sep = match a.get(1) {
            None | Some(Value::Null) => "",
            Some(_) => text_arg(a, 1)?,
        };
        // The result can be far larger than the inputs (a long separator): sized first.
        let len = parts.iter().map(|p| p.len()).sum::<usize>().saturating_add(sep.len().saturating_mul(parts.len()));
        ctx.reserve(len)?;
        ctx.work(len)?;
        Ok(Value::text(parts.join(sep)))
    },
};

pub(super) const REPLACE: Intrinsic = Intrinsic {
    name: "replace",
    sig: "(text: Text, old: Text, new: Text) -> Text",
    doc: "`text` with every non-overlapping occurrence of `old` replaced by `new`, left to right \
          (plain text, not a pattern). An empty `old` is an invalid argument.",
    examples: &[r##"replace("a-b-c", "-", "+") == "a+b+c""##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let from = nonempty(text_arg(a, 1)?, "the text to replace")?;
        let to = text_arg(a, 2)?;
        if !has_substring(t, from) {
            return Ok(Value::Text(t.clone()));
        }
        // The result can be far larger than the inputs (`replace(r, "a", r)` is quadratic):
        // sized first, from the number of occurrences.
        if to.len() > from.len() {
            let n = count_substring(t, from);
            let len = t.len().saturating_add(n.saturating_mul(to.len() - from.len()));
            ctx.reserve(len)?;
            ctx.work(len)?;
        }
        Ok(Value::text(replace_all(t, from, to)))
    },
};

pub(super) const PLACEHOLDER_COUNT: Intrinsic = Intrinsic {
    name: "placeholder_count",
    sig: "(text: Text) -> Number",
    doc: "The number of square-bracket placeholders such as `[address]` in `text`, matched as \
          IFEval's `detectable_content:number_placeholders` does: the shortest `[...]` spans on \
          one line, found left to right (`[]` counts too).",
    examples: &[r##"placeholder_count("Send it to [name] at [address].") == 2"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let re = ctx.regex(r"\[.*?\]")?;
        Ok(number(re.find_iter(t).count()))
    },
};

pub(super) const LETTER_COUNT: Intrinsic = Intrinsic {
    name: "letter_count",
    sig: "(text: Text, letter: Text) -> Number",
    doc: "How many times the single character `letter` occurs in `text`, ignoring case (both are \
          lowercased, as IFEval's `keywords:letter_frequency` does). `letter` must be exactly one \
          character.",
    examples: &[r##"letter_count("Banana bread", "B") == 2"##, r##"letter_count("Banana", "a") == 3"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let l = text_arg(a, 1)?;
        let mut chars = l.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return Err(invalid(format!("`{l}` is not a single character")));
        };
        // A letter whose lowercase is one character (most) is answered from the text's count
        // of every character, with no lowered copy of the letter made.
        let mut lower = c.to_lowercase();
        if let (Some(one), None) = (lower.next(), lower.next()) {
            if let Some(n) = ctx.lowercase_letter_count(t, one) {
                return Ok(number(n as usize));
            }
        }
        let target: String = c.to_lowercase().collect();
        let lowered = ctx.lowered(t);
        Ok(number(count_substring(&lowered, &target)))
    },
};

// ---------------------------------------------------------------- normalisation

/// Python's `string.punctuation`, the set SQuAD's answer normalisation removes.
const ASCII_PUNCTUATION: &str = r##"!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~"##;

fn normalize_ws(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn strip_punct(t: &str) -> String {
    t.chars().filter(|c| !ASCII_PUNCTUATION.contains(*c)).collect()
}

/// SQuAD's `normalize_answer`: lowercase, remove punctuation, remove the articles `a`, `an`,
/// `the` as whole words, collapse whitespace.
fn normalize(t: &str) -> String {
    let lowered = strip_punct(&t.to_lowercase());
    normalize_ws(
        &lowered.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" "),
    )
}

pub(super) const NORMALIZE_WS: Intrinsic = Intrinsic {
    name: "normalize_ws",
    sig: "(text: Text) -> Text",
    doc: "`text` with every run of whitespace (spaces, tabs, line breaks) collapsed to one space \
          and no leading or trailing whitespace.",
    examples: &[r##"normalize_ws("  a \n\t b  ") == "a b""##],
    imp: |a, _| Ok(Value::text(normalize_ws(text_arg(a, 0)?))),
};

pub(super) const STRIP_PUNCT: Intrinsic = Intrinsic {
    name: "strip_punct",
    sig: "(text: Text) -> Text",
    doc: "`text` without ASCII punctuation (Python's `string.punctuation`, the set SQuAD's \
          normalisation removes: ``!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~``). Other characters, \
          including non-ASCII punctuation such as curly quotes, are kept.",
    examples: &[r##"strip_punct("Hello, world! (ok)") == "Hello world ok""##],
    imp: |a, _| Ok(Value::text(strip_punct(text_arg(a, 0)?))),
};

pub(super) const NORMALIZE: Intrinsic = Intrinsic {
    name: "normalize",
    sig: "(text: Text) -> Text",
    doc: "SQuAD's answer normalisation: lowercase, remove ASCII punctuation, remove the articles \
          `a`, `an` and `the` wherever they stand as whole words, collapse whitespace.",
    examples: &[
        r##"normalize("The  Eiffel Tower!") == "eiffel tower""##,
        r##"normalize("A cat, an owl") == "cat owl""##,
    ],
    imp: |a, _| Ok(Value::text(normalize(text_arg(a, 0)?))),
};

pub(super) const EXACT_MATCH: Intrinsic = Intrinsic {
    name: "exact_match",
    sig: "(a: Text, b: Text) -> Bool",
    doc: "Whether `a` and `b` are equal after `normalize` (SQuAD's exact-match metric).",
    examples: &[r##"exact_match("The Beatles.", "beatles")"##, r##"not exact_match("Paris", "London")"##],
    imp: |a, _| Ok(Value::Bool(normalize(text_arg(a, 0)?) == normalize(text_arg(a, 1)?))),
};

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    fn t(s: &str) -> Value {
        Value::text(s)
    }

    #[test]
    fn keyword_count_respects_word_boundaries() {
        let k = |text: &str, kw: &str| call(KEYWORD_COUNT.imp, &[t(text), t(kw)]).unwrap();
        assert_eq!(k("cat Cat CAT cats concat", "cat"), Value::Number(3.0));
        assert_eq!(k("well-known, known", "known"), Value::Number(2.0));
        assert_eq!(k("I use C++ and c++.", "C++"), Value::Number(2.0));
        assert_eq!(k("aaa", "aa"), Value::Number(0.0));
        assert_eq!(k("xcat cat", "cat"), Value::Number(1.0));
        assert_eq!(k("über Über", "über"), Value::Number(2.0));
        assert!(call(KEYWORD_COUNT.imp, &[t("x"), t("  ")]).is_err());
    }

    #[test]
    fn normalisation_follows_squad() {
        assert_eq!(normalize("  The  quick, brown fox's tale!  "), "quick brown foxs tale");
        assert_eq!(normalize("theater an"), "theater");
        assert_eq!(normalize("A"), "");
    }

    #[test]
    fn letter_count_needs_one_character() {
        assert!(call(LETTER_COUNT.imp, &[t("abc"), t("ab")]).is_err());
        assert!(call(LETTER_COUNT.imp, &[t("abc"), t("")]).is_err());
        assert_eq!(call(LETTER_COUNT.imp, &[t("ÉtÉ été"), t("é")]).unwrap(), Value::Number(4.0));
    }

    #[test]
    fn empty_needles_are_invalid() {
        assert!(call(COUNT_OCCURRENCES.imp, &[t("abc"), t("")]).is_err());
        assert!(call(REPLACE.imp, &[t("abc"), t(""), t("x")]).is_err());
        assert!(call(SPLIT.imp, &[t("abc"), t("")]).is_err());
    }

    #[test]
    fn index_is_shared_across_calls() {
        let text: Arc<str> = Arc::from("One two. Three four.");
        let mut ctx = EvalCtx::new();
        let v = Value::Text(text.clone());
        (WORD_COUNT.imp)(std::slice::from_ref(&v), &mut ctx).unwrap();
        (SENTENCE_COUNT.imp)(std::slice::from_ref(&v), &mut ctx).unwrap();
        (CAPITAL_WORD_COUNT.imp)(&[v], &mut ctx).unwrap();
        assert_eq!(ctx.lex_count, 1);
    }

    /// The memchr-backed search gives exactly `str`'s answers: overlapping candidates, needles
    /// at the ends, multi-byte characters, one-byte and longer needles, no match at all.
    #[test]
    fn substring_search_agrees_with_str() {
        let texts = ["", "a", "aaaa", "banana", "*a**b*", "\nx\n\ny\n", "héllo wörld é", "日本語の本日", "abcabcab"];
        let needles = ["a", "aa", "an", "*", "**", "\n", "\n\n", "é", "本", "本日", "abc", "zz", "héllo wörld é!"];
        for t in texts {
            for n in needles {
                assert_eq!(count_substring(t, n), t.matches(n).count(), "count {n:?} in {t:?}");
                assert_eq!(has_substring(t, n), t.contains(n), "contains {n:?} in {t:?}");
                assert_eq!(split_on(t, n).collect::<Vec<_>>(), t.split(n).collect::<Vec<_>>(), "split {t:?} on {n:?}");
                assert_eq!(replace_all(t, n, "<>"), t.replace(n, "<>"), "replace {n:?} in {t:?}");
                assert_eq!(replace_all(t, n, ""), t.replace(n, ""), "remove {n:?} from {t:?}");
            }
        }
        assert!(has_substring("abc", ""));
    }
}
