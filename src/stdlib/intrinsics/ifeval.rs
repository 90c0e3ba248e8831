//! IFEval intrinsics: the text measures of IFEval's reference implementation that the language
//! cannot express, reproduced exactly: its word count (`\w+` runs), NLTK's Punkt sentence
//! splitter and word tokenizer, Python's `str.isupper`/`str.islower`, and `langdetect`'s
//! language detection (a bit-for-bit port, with a fixed seed). `stdlib/std/ifeval.rubric`
//! builds the 25 instruction checks on these and on the general intrinsics.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

mod langid;
mod punkt;
mod pychar;
mod words;

use super::{number, text_arg, texts};
use crate::stdlib::{Intrinsic, Trap};
use crate::value::Value;
use regex::Regex;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::LazyLock;

/// Results of the costlier measures for the texts a thread saw last: loose mode asks the same
/// question of up to eight variants of a response, often equal to each other or to the
/// response itself. Bounded: cleared when it holds too many texts.
#[derive(Default)]
struct Memo {
    sentences: FxHashMap<String, usize>,
    capitals: FxHashMap<String, usize>,
    languages: FxHashMap<String, Option<String>>,
}

const MEMO_LIMIT: usize = 256;

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

fn memoized<V: Clone>(
    text: &str,
    table: fn(&mut Memo) -> &mut FxHashMap<String, V>,
    compute: impl FnOnce(&str) -> V,
) -> V {
    if let Some(v) = MEMO.with(|m| table(&mut m.borrow_mut()).get(text).cloned()) {
        return v;
    }
    let v = compute(text);
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let t = table(&mut m);
        if t.len() >= MEMO_LIMIT {
            t.clear();
        }
        t.insert(text.to_string(), v.clone());
    });
    v
}

/// `\w+` of Python's `re` on `str`: runs of letters, numbers and `_` (no combining marks).
#[expect(clippy::unwrap_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
static PY_WORD_RUN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[\p{L}\p{N}_]+").unwrap());

/// Python's `\w+` run count: what IFEval's `count_words` (`nltk.tokenize.RegexpTokenizer(r"\w+")`)
/// returns.
pub fn word_count(text: &str) -> usize {
    if !text.is_ascii() {
        return PY_WORD_RUN.find_iter(text).count();
    }
    // In ASCII the class is `[A-Za-z0-9_]`: count the bytes that start a run.
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut previous = false;
    text.bytes()
        .filter(|&b| {
            let w = word(b);
            let starts = w && !previous;
            previous = w;
            starts
        })
        .count()
}

pub(super) const IFEVAL_WORD_COUNT: Intrinsic = Intrinsic {
    name: "ifeval_word_count",
    sig: "(text: Text) -> Number",
    doc: "The number of words in `text` as IFEval counts them: maximal runs of letters, numbers and \
          `_` (Python's `\\w+`), so apostrophes, hyphens and periods split words (`don't` is two \
          words, `3.14` two, `snake_case` one). Compare `word_count`, which keeps `don't` and \
          `well-known` whole.",
    examples: &[
        r##"ifeval_word_count("Don't stop: it's well-known!") == 7"##,
        r##"ifeval_word_count("snake_case, naïve, 3.14") == 4"##,
        r##"ifeval_word_count("") == 0"##,
    ],
    imp: |a, _| Ok(number(word_count(text_arg(a, 0)?))),
};

/// The number of Punkt sentences of `text`.
pub fn sentence_count(text: &str) -> usize {
    memoized(text, |m| &mut m.sentences, |t| punkt::sentence_spans(t).len())
}

/// The Punkt sentences of `text`.
pub fn sentences(text: &str) -> Vec<&str> {
    punkt::sentence_spans(text).into_iter().map(|(s, e)| &text[s..e]).collect()
}

pub(super) const IFEVAL_SENTENCES: Intrinsic = Intrinsic {
    name: "ifeval_sentences",
    sig: "(text: Text) -> List[Text]",
    doc: "The sentences of `text` as NLTK's Punkt tokenizer splits them with its English model \
          (the splitter IFEval counts sentences with). A `.`, `?` or `!` followed by white space \
          ends a sentence unless Punkt takes it for an abbreviation (`Dr.`, `e.g.`), an initial \
          or a number followed by a word that usually starts no sentence; closing quotes and \
          brackets stay with the sentence they close. Line breaks alone never split.",
    examples: &[
        r##"ifeval_sentences("Mr. Smith went to Washington. He said hi!") == ["Mr. Smith went to Washington.", "He said hi!"]"##,
        r##"ifeval_sentences("(It works.) Next\nline.") == ["(It works.)", "Next\nline."]"##,
    ],
    imp: |a, ctx| texts(ctx, sentences(text_arg(a, 0)?)),
};

pub(super) const IFEVAL_SENTENCE_COUNT: Intrinsic = Intrinsic {
    name: "ifeval_sentence_count",
    sig: "(text: Text) -> Number",
    doc: "The number of sentences in `text` as `ifeval_sentences` splits them: IFEval's \
          `length_constraints:number_sentences` measure. Compare `sentence_count`, a faster \
          approximation without Punkt's trained model.",
    examples: &[
        r##"ifeval_sentence_count("1. Mix well. 2. Bake at 200 C. Done!") == 4"##,
        r##"ifeval_sentence_count("Dr. Smith met Mr. Jones at 5 p.m. today.") == 1"##,
        r##"ifeval_sentence_count("  ") == 0"##,
    ],
    imp: |a, _| Ok(number(sentence_count(text_arg(a, 0)?))),
};

pub(super) const IFEVAL_TOKENS: Intrinsic = Intrinsic {
    name: "ifeval_tokens",
    sig: "(text: Text) -> List[Text]",
    doc: "The tokens of `text` as `nltk.word_tokenize` returns them (NLTK 3.8): each Punkt sentence \
          split by the Treebank rules, which separate punctuation, brackets and quotes (a double \
          quote becomes ``` `` ``` or `''`), split contractions (`don't` → `do`, `n't`; `I'm` → \
          `I`, `'m`) and keep a period inside a sentence on its word (`U.S.`).",
    examples: &[
        r##"ifeval_tokens("I'm in the U.S. Don't go.") == ["I", "'m", "in", "the", "U.S.", "Do", "n't", "go", "."]"##,
        r##"ifeval_tokens("AT&T (NYSE)") == ["AT", "&", "T", "(", "NYSE", ")"]"##,
    ],
    imp: |a, ctx| texts(ctx, words::word_tokenize(text_arg(a, 0)?).iter().map(|w| w.as_str())),
};

/// How many `nltk.word_tokenize` tokens of `text` are uppercase by `str.isupper`.
pub fn capital_word_count(text: &str) -> usize {
    memoized(text, |m| &mut m.capitals, |t| words::count_tokens(t, pychar::is_upper))
}

pub(super) const IFEVAL_CAPITAL_WORD_COUNT: Intrinsic = Intrinsic {
    name: "ifeval_capital_word_count",
    sig: "(text: Text) -> Number",
    doc: "The number of tokens of `ifeval_tokens` that are uppercase as Python's `str.isupper` \
          decides (at least one cased letter, none lowercase): IFEval's \
          `change_case:capital_word_frequency` measure. Contractions count apart (`DON'T` is \
          `DO` and `N'T`, two), `I` counts, `42` does not.",
    examples: &[
        r##"ifeval_capital_word_count("I DON'T KNOW, said NASA's chief.") == 5"##,
        r##"ifeval_capital_word_count("no capitals 42") == 0"##,
    ],
    imp: |a, _| Ok(number(capital_word_count(text_arg(a, 0)?))),
};

pub(super) const PYTHON_ISUPPER: Intrinsic = Intrinsic {
    name: "python_isupper",
    sig: "(text: Text) -> Bool",
    doc: "Python's `str.isupper()`: whether `text` has at least one cased letter and no lowercase \
          (or titlecase) one. Unlike `is_uppercase`, a text without letters is not uppercase.",
    examples: &[
        r##"python_isupper("ALL CAPS 42!")"##,
        r##"not python_isupper("42!")"##,
        r##"not python_isupper("CAPs")"##,
    ],
    imp: |a, _| Ok(Value::Bool(pychar::is_upper(text_arg(a, 0)?))),
};

pub(super) const PYTHON_ISLOWER: Intrinsic = Intrinsic {
    name: "python_islower",
    sig: "(text: Text) -> Bool",
    doc: "Python's `str.islower()`: whether `text` has at least one cased letter and no uppercase \
          (or titlecase) one. Unlike `is_lowercase`, a text without letters is not lowercase.",
    examples: &[
        r##"python_islower("all lower, 42!")"##,
        r##"not python_islower("42!")"##,
        r##"not python_islower("Not")"##,
    ],
    imp: |a, _| Ok(Value::Bool(pychar::is_lower(text_arg(a, 0)?))),
};

pub(super) const PYTHON_STRIP: Intrinsic = Intrinsic {
    name: "python_strip",
    sig: "(text: Text) -> Text",
    doc: "`text` without leading and trailing white space as Python's `str.strip()` removes it: \
          Unicode white space plus the ASCII separators U+001C to U+001F, which `trim` keeps.",
    examples: &[
        r##"python_strip("  hi \n") == "hi""##,
        r##"python_strip("\u{1f}x\u{1c}") == "x" and trim("\u{1f}x") != "x""##,
    ],
    imp: |a, _| {
        let t = text_arg(a, 0)?;
        Ok(super::text_part(t, pychar::strip(t)))
    },
};

/// Whether `s` is one JSON document as Python's `json.loads` accepts it.
pub fn python_json_valid(s: &str) -> bool {
    let b = s.as_bytes();
    let mut p = JsonScan { b, i: 0 };
    p.ws();
    if !p.value(0) {
        return false;
    }
    p.ws();
    p.i == b.len()
}

/// A validating scanner with the grammar of CPython's `json` decoder: JSON plus `NaN`,
/// `Infinity` and `-Infinity`, numbers of any size, lone surrogate escapes, no control
/// characters inside strings, white space limited to space, tab, line feed and carriage return.
struct JsonScan<'a> {
    b: &'a [u8],
    i: usize,
}

impl JsonScan<'_> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.b[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> bool {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return false,
        }
        // A fraction or an exponent without digits is not part of the number.
        if self.b.get(self.i) == Some(&b'.') && self.b.get(self.i + 1).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
            self.digits();
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            let save = self.i;
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                self.i = save;
            }
        }
        true
    }

    fn string(&mut self) -> bool {
        self.i += 1; // the opening quote
        loop {
            match self.b.get(self.i) {
                None => return false,
                Some(b'"') => {
                    self.i += 1;
                    return true;
                }
                Some(c) if *c < 0x20 => return false,
                Some(b'\\') => match self.b.get(self.i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 2,
                    Some(b'u') => {
                        let hex = self.b.get(self.i + 2..self.i + 6);
                        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                            return false;
                        }
                        self.i += 6;
                    }
                    _ => return false,
                },
                Some(_) => self.i += 1,
            }
        }
    }

    fn value(&mut self, depth: usize) -> bool {
        if depth > 10_000 {
            return false;
        }
        match self.b.get(self.i) {
            Some(b'"') => self.string(),
            Some(b'{') => {
                self.i += 1;
                self.ws();
                if self.eat("}") {
                    return true;
                }
                loop {
                    if self.b.get(self.i) != Some(&b'"') || !self.string() {
                        return false;
                    }
                    self.ws();
                    if !self.eat(":") {
                        return false;
                    }
                    self.ws();
                    if !self.value(depth + 1) {
                        return false;
                    }
                    self.ws();
                    if self.eat("}") {
                        return true;
                    }
                    if !self.eat(",") {
                        return false;
                    }
                    self.ws();
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.eat("]") {
                    return true;
                }
                loop {
                    if !self.value(depth + 1) {
                        return false;
                    }
                    self.ws();
                    if self.eat("]") {
                        return true;
                    }
                    if !self.eat(",") {
                        return false;
                    }
                    self.ws();
                }
            }
            Some(_) => {
                self.eat("null")
                    || self.eat("true")
                    || self.eat("false")
                    || self.eat("NaN")
                    || self.eat("Infinity")
                    || self.eat("-Infinity")
                    || self.number()
            }
            None => false,
        }
    }
}

pub(super) const PYTHON_JSON_VALID: Intrinsic = Intrinsic {
    name: "python_json_valid",
    sig: "(text: Text) -> Bool",
    doc: "Whether Python's `json.loads` accepts `text`: one JSON value with only spaces, tabs and \
          line breaks around it, where Python also allows `NaN`, `Infinity`, `-Infinity` and \
          numbers out of the range of a float. IFEval's `detectable_format:json_format` decides \
          with it. Compare `is_json`, which follows the JSON standard.",
    examples: &[
        r##"python_json_valid(" {\"a\": [1, 2.5e3, null]}\n")"##,
        r##"python_json_valid("[NaN, -Infinity, 1e999]") and not is_json("[NaN]")"##,
        r##"not python_json_valid("{\"a\": 1,}")"##,
        r##"not python_json_valid("{\"a\": 1} and more")"##,
    ],
    imp: |a, _| Ok(Value::Bool(python_json_valid(text_arg(a, 0)?))),
};

/// Reads the tables of language detection and compiles its text preparation's patterns now, if
/// no thread has yet (`stdlib::warm_up`).
pub(super) fn load_detector() {
    langid::load();
}

/// Reads Punkt's English parameters now, if no thread has yet (`stdlib::warm_up`).
pub(super) fn load_sentence_splitter() {
    punkt::load();
}

/// Compiles the word tokenizer's substitutions now (and what it uses: Punkt's parameters,
/// Python's character classes), if no thread has yet (`stdlib::warm_up`).
pub(super) fn load_word_tokenizer() {
    words::load();
    load_character_classes();
    punkt::load();
}

/// Compiles the patterns of Python's character classes now, if no thread has yet
/// (`stdlib::warm_up`).
pub(super) fn load_character_classes() {
    pychar::load();
    LazyLock::force(&PY_WORD_RUN);
}

/// The language `langdetect.detect` finds in `text` (with `DetectorFactory.seed = 0`), or `None`
/// when the text has no features to detect a language from.
pub fn detect_language(text: &str) -> Option<String> {
    memoized(text, |m| &mut m.languages, |t| langid::detect(t).map(str::to_string))
}

fn detect(args: &[Value], _: &mut crate::stdlib::EvalCtx) -> Result<Value, Trap> {
    Ok(detect_language(text_arg(args, 0)?).map_or(Value::Null, Value::text))
}

pub(super) const DETECT_LANGUAGE: Intrinsic = Intrinsic {
    name: "detect_language",
    sig: "(text: Text) -> Text?",
    doc: "The language of `text` as an ISO 639-1 code (`en`, `de`, `hi`...; Chinese is `zh-cn` or \
          `zh-tw`), or null when `text` has nothing to detect a language from (no letters). This \
          is `langdetect` (the detector IFEval uses) reproduced bit for bit: character n-gram \
          profiles of 55 languages and its random walk, seeded with 0 so that a text always gets \
          the same answer. Short or mixed texts can get surprising answers, as in `langdetect`.",
    examples: &[
        r##"detect_language("The quick brown fox jumps over the lazy dog.") == "en""##,
        r##"detect_language("Der schnelle braune Fuchs springt über den faulen Hund.") == "de""##,
        r##"detect_language("1234 !!") == null"##,
    ],
    imp: detect,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte loop for ASCII text counts the runs `\w+` finds.
    #[test]
    fn ascii_word_count_is_the_regex_count() {
        for t in [
            "",
            " ",
            "a",
            "_",
            "Don't stop: it's well-known!",
            "snake_case 3.14 x1_y2",
            "  lead and trail  ",
            "a\tb\nc\r\nd",
            "**bold** [x](y) #tag @me",
            "___ --- ...",
            "e.g. U.S.A. 1,000,000",
        ] {
            assert!(t.is_ascii());
            assert_eq!(word_count(t), PY_WORD_RUN.find_iter(t).count(), "{t:?}");
        }
        assert_eq!(word_count("naïve café"), 2);
    }

    #[test]
    fn word_runs_follow_python() {
        assert_eq!(word_count("don't stop"), 3);
        // a combining mark is not a word character in Python: `e` + U+0301 is one run then none
        assert_eq!(word_count("cafe\u{301} ok"), 2);
        assert_eq!(word_count("हिन्दी"), 3);
    }

    #[test]
    fn json_follows_pythons_decoder() {
        for ok in ["0", "-0.5e-3", " [1, {\"a\": \"\\ud800\"}]\r\n", "NaN", "-Infinity", "1e999", "\"\\u00e9\""] {
            assert!(python_json_valid(ok), "{ok:?} should be accepted");
        }
        for bad in
            ["", "01", "1.", ".5", "[1,]", "{\"a\":1,}", "\"\\x\"", "\"a\tb\"", "\u{feff}{}", "{} x", "nan", "\u{a0}1"]
        {
            assert!(!python_json_valid(bad), "{bad:?} should be refused");
        }
    }

    #[test]
    fn measures_are_memoized_per_text() {
        let t = "Every word here. Two sentences!";
        assert_eq!(sentence_count(t), 2);
        assert_eq!(sentence_count(t), 2);
        assert!(MEMO.with(|m| m.borrow().sentences.contains_key(t)));
        assert_eq!(capital_word_count("I SAW IT"), capital_word_count("I SAW IT"));
    }

    #[test]
    fn detection_without_features_is_none() {
        assert_eq!(detect_language(""), None);
        assert_eq!(detect_language("12 34"), None);
        assert_eq!(detect_language("Привет, как дела? Всё хорошо.").as_deref(), Some("ru"));
    }
}
