//! The catalogue of intrinsics: every built-in function with its signature in rubric syntax,
//! its documentation, its doc examples and its one Rust implementation, shared by all engines.
//!
//! Pipeline position: `types` reads the signatures, `interp` (and later the Wasm host imports
//! and the JIT) call the implementations; each submodule holds one family of functions.
//!
//! **Architecture Invariant:** the IR names an intrinsic by its name and its overload rank
//! (its position among the entries of that name), so a new overload of an existing name goes
//! after the existing ones, never before; entries with new names may go anywhere.

mod exec;
mod ifeval;
mod images;
mod json;
mod json_patch;
mod lists;
mod markdown;
mod numbers;
mod pattern;
mod semantic;
mod similarity;
mod text;
pub(crate) mod trajectory;

pub(crate) use numbers::{larger, number_pair_extreme, smaller};

use super::{EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::Value;
use serde_json::Value as JsonValue;
use std::borrow::Cow;
use std::sync::Arc;

/// Every intrinsic, grouped by family. Overloads of one name are adjacent, most specific
/// first (the checker picks the first whose parameters accept the arguments).
pub static ALL: &[Intrinsic] = &[
    // text: counts and views through the shared text index
    text::WORD_COUNT,
    text::SENTENCE_COUNT,
    text::PARAGRAPH_COUNT,
    text::LINE_COUNT,
    text::CHAR_COUNT,
    text::LEN_TEXT,
    lists::LEN_LIST,
    text::WORDS,
    text::SENTENCES,
    text::PARAGRAPHS,
    text::LINES,
    // text: transformations and tests
    text::LOWER,
    text::UPPER,
    text::TRIM,
    text::STRIP_CHARS,
    text::STRIP_PREFIX,
    text::STRIP_SUFFIX,
    text::CONTAINS_TEXT,
    lists::CONTAINS_LIST,
    text::CONTAINS_CI,
    text::STARTS_WITH,
    text::ENDS_WITH,
    text::COUNT_OCCURRENCES,
    text::KEYWORD_COUNT,
    text::IS_LOWERCASE,
    text::IS_UPPERCASE,
    text::CAPITAL_WORD_COUNT,
    text::SPLIT,
    text::JOIN,
    text::REPLACE,
    text::PLACEHOLDER_COUNT,
    text::LETTER_COUNT,
    // normalisation for exact-match answers
    text::NORMALIZE_WS,
    text::STRIP_PUNCT,
    text::NORMALIZE,
    text::EXACT_MATCH,
    // regular expressions
    pattern::MATCHES,
    pattern::FULL_MATCH,
    pattern::FIND_ALL,
    pattern::COUNT_MATCHES,
    // markdown structure
    markdown::HEADINGS,
    markdown::HEADING_COUNT,
    markdown::BULLET_COUNT,
    markdown::NUMBERED_COUNT,
    markdown::LIST_ITEMS,
    markdown::SECTIONS,
    markdown::HIGHLIGHTED_COUNT,
    markdown::CODE_BLOCKS,
    markdown::CODE_BLOCK_LANGS,
    // JSON and JSON Schema
    json::JSON,
    json::PARSE_JSON,
    json::IS_JSON,
    json::JSON_GET,
    json::JSON_TEXT,
    json::JSON_NUMBER,
    json::JSON_BOOL,
    json::JSON_LEN,
    json::JSON_KEYS,
    json::JSON_TYPE,
    json::JSON_VALID,
    json::TO_JSON,
    // numbers
    numbers::NUMBERS,
    numbers::PARSE_NUMBER,
    numbers::APPROX_EQ,
    numbers::REL_CLOSE,
    numbers::ABS,
    numbers::ROUND,
    numbers::FLOOR,
    numbers::CEIL,
    numbers::MIN2,
    numbers::MIN_LIST,
    numbers::MAX2,
    numbers::MAX_LIST,
    numbers::CLIP,
    numbers::SUM,
    numbers::MEAN,
    // lists
    lists::FIRST,
    lists::LAST,
    lists::UNIQUE_COUNT,
    lists::SORT_NUMBERS,
    lists::SORT_TEXTS,
    lists::REVERSE,
    // conversations
    lists::LAST_USER,
    lists::LAST_ASSISTANT,
    lists::TURN_COUNT,
    lists::RENDER,
    // IFEval's reference measures (Python, NLTK and langdetect semantics)
    ifeval::IFEVAL_WORD_COUNT,
    ifeval::IFEVAL_SENTENCES,
    ifeval::IFEVAL_SENTENCE_COUNT,
    ifeval::IFEVAL_TOKENS,
    ifeval::IFEVAL_CAPITAL_WORD_COUNT,
    ifeval::PYTHON_ISUPPER,
    ifeval::PYTHON_ISLOWER,
    ifeval::PYTHON_STRIP,
    ifeval::PYTHON_JSON_VALID,
    ifeval::DETECT_LANGUAGE,
    // embedding verifiers (a sentence-embedding model)
    semantic::SIMILARITY,
    semantic::COVERS,
    semantic::BEST_MATCH,
    // code execution in the sandbox
    exec::EXEC,
    // reference-based similarity (sacreBLEU, rouge-score, rapidfuzz semantics)
    similarity::EDIT_DISTANCE,
    similarity::EDIT_SIMILARITY,
    similarity::BLEU,
    similarity::ROUGE,
    // JSON Patch (RFC 6902)
    json_patch::JSON_PATCH,
    json_patch::JSON_DIFF,
    json_patch::JSON_EQUAL,
    // JSON embedded in prose (promptfoo's `contains-json`)
    json::JSON_OBJECTS,
    // agent trajectories (OpenAI messages with tool calls; agentevals' trajectory match)
    trajectory::TOOL_CALLS,
    trajectory::TOOL_CALLS_OF,
    trajectory::CALLED,
    trajectory::CALLED_OF,
    trajectory::CALL_COUNT,
    trajectory::CALL_COUNT_OF,
    trajectory::CALLED_IN_ORDER,
    trajectory::CALLED_IN_ORDER_OF,
    trajectory::TRAJECTORY_MATCH,
    trajectory::TRAJECTORY_MATCH_OF,
    trajectory::TRAJECTORY_MATCH_BOTH,
    trajectory::TRAJECTORY_MATCH_OVERRIDES,
    trajectory::TRAJECTORY_MATCH_OF_OVERRIDES,
    trajectory::TRAJECTORY_MATCH_BOTH_OVERRIDES,
    // the `Trajectory` type from chat messages (the functions above take one too)
    trajectory::TRAJECTORY,
    // images (`Image` inputs): header facts and perceptual-hash similarity
    images::IMAGE_FORMAT,
    images::IMAGE_WIDTH,
    images::IMAGE_HEIGHT,
    images::IMAGE_SIMILARITY,
];

// ---------------------------------------------------------------- argument access
//
// The checker guarantees argument types, so a mismatch here is an engine bug; it is still
// reported as a `Type` trap rather than a panic.

fn missing(i: usize) -> Trap {
    Trap::new(TrapKind::Type, format!("missing argument {}", i + 1))
}

fn wrong(i: usize, expected: &str, got: &Value) -> Trap {
    Trap::new(TrapKind::Type, format!("argument {} must be {expected}, got `{got}`", i + 1))
}

pub(super) fn arg(args: &[Value], i: usize) -> Result<&Value, Trap> {
    args.get(i).ok_or_else(|| missing(i))
}

/// What intrinsic `name` loads on its first call, if anything: a fixed cost that
/// `stdlib::warm_up` can pay on a thread of its own.
pub(super) fn loader(name: &str) -> Option<fn()> {
    match name {
        "detect_language" => Some(ifeval::load_detector),
        "ifeval_sentences" | "ifeval_sentence_count" => Some(ifeval::load_sentence_splitter),
        "ifeval_tokens" | "ifeval_capital_word_count" => Some(ifeval::load_word_tokenizer),
        "python_isupper" | "python_islower" | "python_strip" | "ifeval_word_count" => {
            Some(ifeval::load_character_classes)
        }
        _ => None,
    }
}

pub(super) fn text_arg(args: &[Value], i: usize) -> Result<&Arc<str>, Trap> {
    match arg(args, i)? {
        Value::Text(t) => Ok(t),
        other => Err(wrong(i, "text", other)),
    }
}

/// `part` of the text `t` as a value: `t` itself when `part` is all of it, so that a text an
/// intrinsic leaves unchanged (nothing to strip or replace) is shared, not copied.
pub(super) fn text_part(t: &Arc<str>, part: &str) -> Value {
    if part.len() == t.len() {
        Value::Text(t.clone())
    } else {
        Value::text(part)
    }
}

pub(super) fn opt_text_arg(args: &[Value], i: usize) -> Result<Option<&Arc<str>>, Trap> {
    match args.get(i) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Text(t)) => Ok(Some(t)),
        Some(other) => Err(wrong(i, "text or null", other)),
    }
}

pub(super) fn num_arg(args: &[Value], i: usize) -> Result<f64, Trap> {
    match arg(args, i)? {
        Value::Number(n) => Ok(*n),
        other => Err(wrong(i, "a number", other)),
    }
}

pub(super) fn opt_num_arg(args: &[Value], i: usize) -> Result<Option<f64>, Trap> {
    match args.get(i) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(*n)),
        Some(other) => Err(wrong(i, "a number or null", other)),
    }
}

pub(super) fn list_arg(args: &[Value], i: usize) -> Result<&[Value], Trap> {
    match arg(args, i)? {
        Value::List(l) => Ok(l),
        other => Err(wrong(i, "a list", other)),
    }
}

/// A list of numbers.
pub(super) fn numbers_arg(args: &[Value], i: usize) -> Result<Vec<f64>, Trap> {
    list_arg(args, i)?.iter().map(|v| v.as_number().ok_or_else(|| wrong(i, "a list of numbers", v))).collect()
}

/// A list of texts.
pub(super) fn texts_arg(args: &[Value], i: usize) -> Result<Vec<&str>, Trap> {
    list_arg(args, i)?.iter().map(|v| v.as_text().ok_or_else(|| wrong(i, "a list of texts", v))).collect()
}

/// A `Json` argument. Values of other kinds (an engine that kept a structural value) are
/// converted with `Value::to_json`; `None` for `Value::Null` (an absent `Json?`).
pub(super) fn opt_json_arg(args: &[Value], i: usize) -> Result<Option<Cow<'_, JsonValue>>, Trap> {
    match arg(args, i)? {
        Value::Null => Ok(None),
        Value::Json(j) => Ok(Some(Cow::Borrowed(&**j))),
        Value::Unscored(_) => Err(wrong(i, "JSON", &args[i])),
        other => Ok(Some(Cow::Owned(other.to_json()))),
    }
}

pub(super) fn json_arg(args: &[Value], i: usize) -> Result<Cow<'_, JsonValue>, Trap> {
    opt_json_arg(args, i)?.ok_or_else(|| wrong(i, "JSON", &Value::Null))
}

/// A non-negative integer argument (a count, a level, a number of digits).
pub(super) fn count_arg(args: &[Value], i: usize, what: &str) -> Result<usize, Trap> {
    let n = num_arg(args, i)?;
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 {
        Ok(n as usize)
    } else {
        Err(Trap::new(
            TrapKind::InvalidArgument,
            format!("{what} must be a non-negative integer, got {}", Value::Number(n)),
        ))
    }
}

pub(super) fn invalid(message: impl Into<String>) -> Trap {
    Trap::new(TrapKind::InvalidArgument, message)
}

// ---------------------------------------------------------------- results

pub(super) fn number(n: usize) -> Value {
    Value::Number(n as f64)
}

/// Bytes one text of a list takes besides its characters: the value and the text's header.
const TEXT_ITEM_BYTES: usize = std::mem::size_of::<Value>() + 16;

/// A list of texts, built within the row's budget: each item is charged as work and checked
/// against the memory limit, and the list's growth is checked before it happens, so a list of
/// millions of pieces stops at the limit.
pub(super) fn texts<'a>(ctx: &mut EvalCtx, items: impl IntoIterator<Item = &'a str>) -> Result<Value, Trap> {
    let mut out: Vec<Value> = Vec::new();
    for s in items {
        if out.len() == out.capacity() {
            // Growing allocates the new buffer while the old one is still held.
            ctx.reserve(out.capacity().max(4) * 2 * TEXT_ITEM_BYTES)?;
        }
        ctx.work(s.len() + 1)?;
        out.push(Value::text(s));
    }
    Ok(Value::list(out))
}

pub(super) fn json_value(j: JsonValue) -> Value {
    Value::Json(Arc::new(j))
}

/// Run an implementation on literal arguments (unit tests).
#[cfg(test)]
pub(super) fn call(imp: super::IntrinsicFn, args: &[Value]) -> Result<Value, Trap> {
    imp(args, &mut super::EvalCtx::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn catalogue_is_well_formed() {
        let mut seen = HashSet::new();
        for i in ALL {
            assert!(!i.doc.trim().is_empty(), "{} has no doc", i.name);
            assert!(!i.examples.is_empty(), "{} has no example", i.name);
            assert!(i.sig.starts_with('(') && i.sig.contains(") -> "), "{}: bad sig", i.name);
            assert!(seen.insert((i.name, i.sig)), "{} {} is listed twice", i.name, i.sig);
            assert!(
                i.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{} is not snake_case",
                i.name
            );
        }
    }

    /// Every intrinsic with a loader exists (a rename would silently end its warm-up), and the
    /// loader is what its first call loads: language detection after it gives its answer.
    #[test]
    fn loaders_belong_to_intrinsics() {
        let with_loader: Vec<&str> = ALL.iter().map(|i| i.name).filter(|n| loader(n).is_some()).collect();
        let mut sorted = with_loader.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            [
                "detect_language",
                "ifeval_capital_word_count",
                "ifeval_sentence_count",
                "ifeval_sentences",
                "ifeval_tokens",
                "ifeval_word_count",
                "python_islower",
                "python_isupper",
                "python_strip"
            ]
        );
        assert!(loader("contains").is_none());
        for name in with_loader {
            if let Some(load) = loader(name) {
                load();
            }
        }
        assert_eq!(ifeval::detect_language("The weather is fine and the sea is calm today.").as_deref(), Some("en"));
    }

    #[test]
    fn overloads_are_adjacent() {
        let mut finished = HashSet::new();
        let mut prev = "";
        for i in ALL {
            if i.name != prev {
                assert!(finished.insert(prev), "overloads of `{prev}` are not adjacent");
                prev = i.name;
            }
        }
    }
}
