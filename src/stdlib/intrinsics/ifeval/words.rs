//! A port of `nltk.word_tokenize` (NLTK 3.8): Punkt sentences, each split by the improved
//! Treebank word tokenizer (`NLTKWordTokenizer`), a fixed sequence of regular-expression
//! substitutions that pad punctuation, quotes and contractions with spaces before splitting on
//! white space. IFEval's `change_case:capital_word_frequency` counts the tokens it returns.
//!
//! Pipeline position: used by `stdlib::intrinsics::ifeval` only.

use super::punkt::sentence_spans;
use super::pychar::{is_space, is_word};
use regex::Regex;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::LazyLock;

/// One substitution: a pattern and its replacement (`$1` for Python's `\1`).
struct Rule(Regex, &'static str);

#[expect(clippy::expect_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
fn rules(list: &[(&str, &'static str)]) -> Vec<Rule> {
    list.iter().map(|(p, r)| Rule(Regex::new(p).expect("word tokenizer pattern"), r)).collect()
}

/// `STARTING_QUOTES`, except the look-ahead rule for a quote before one letter
/// (see [`split_quote_before_letter`]).
static STARTING_QUOTES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(&[(r"([«“‘„]|[`]+)", " ${1} "), (r#"^""#, "``"), (r"(``)", " ${1} "), (r#"([ (\[{<])("|'{2})"#, "${1} `` ")])
});

/// `PUNCTUATION`, `PARENS_BRACKETS` and `DOUBLE_DASHES`.
static PUNCTUATION: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(&[
        (r#"([^.])(\.)([\])}>"'»”’ ]*)\s*$"#, "${1} ${2} ${3} "),
        (r"([:,])([^\d])", " ${1} ${2}"),
        (r"([:,])$", " ${1} "),
        (r"\.{2,}", " ${0} "),
        (r"[;@#$%&]", " ${0} "),
        (r#"([^.])(\.)([\])}>"']*)\s*$"#, "${1} ${2}${3} "),
        (r"[?!]", " ${0} "),
        (r"([^'])' ", "${1} ' "),
        (r"[*]", " ${0} "),
        (r"[\]\[(){}<>]", " ${0} "),
        (r"--", " -- "),
    ])
});

/// `ENDING_QUOTES`.
static ENDING_QUOTES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(&[
        (r"([»”’])", " ${1} "),
        (r"''", " '' "),
        (r#"""#, " '' "),
        (r"([^' ])('[sS]|'[mM]|'[dD]|') ", "${1} ${2} "),
        (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", "${1} ${2} "),
    ])
});

/// `CONTRACTIONS2` in one pattern (the words cannot overlap, so one pass splits as NLTK's eight
/// passes do): each alternative is a pair of groups, split apart by a space; `(?=\s)` after
/// `wanna` becomes a captured white-space character put back in place.
#[expect(clippy::expect_used, reason = "a constant pattern of this file; the unit tests and doc examples compile it")]
static CONTRACTIONS2: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:(can)(not)\b|(d)('ye)\b|(gim)(me)\b|(gon)(na)\b|(got)(ta)\b|(lem)(me)\b|(more)('n)\b|(wan)(na)(\s))",
    )
    .expect("contraction pattern")
});

/// `CONTRACTIONS3`: `'tis` and `'twas` after a space.
static CONTRACTIONS3: LazyLock<Vec<Rule>> = LazyLock::new(|| rules(&[(r"(?i) ('t)(is|was)\b", " ${1} ${2} ")]));

/// Compiles the substitutions now, if no thread has yet.
pub(super) fn load() {
    for rules in [&STARTING_QUOTES, &PUNCTUATION, &ENDING_QUOTES, &CONTRACTIONS3] {
        LazyLock::force(rules);
    }
    LazyLock::force(&CONTRACTIONS2);
}

#[expect(clippy::expect_used, reason = "every alternative of `CONTRACTIONS2` is a pair of groups, so a match has one")]
fn split_contractions(text: String) -> String {
    match CONTRACTIONS2.replace_all(&text, |c: &regex::Captures| {
        let pair = (1..=16).step_by(2).find(|&g| c.get(g).is_some()).expect("one alternative matched");
        let tail = c.get(17).map_or("", |m| m.as_str());
        format!(" {} {} {tail}", &c[pair], &c[pair + 1])
    }) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(s) => s,
    }
}

fn apply(text: String, rules: &[Rule]) -> String {
    rules.iter().fold(text, |t, Rule(re, rep)| match re.replace_all(&t, *rep) {
        std::borrow::Cow::Borrowed(_) => t,
        std::borrow::Cow::Owned(s) => s,
    })
}

/// `(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b` → `\1 \2`: a quote before a one-letter word other
/// than `m`, `t`, `s`, `d` or `n` is split from it.
fn split_quote_before_letter(text: String) -> String {
    if !text.contains('\'') {
        return text;
    }
    let cs: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        out.push(c);
        if c == '\'' {
            if let Some(&w) = cs.get(i + 1) {
                let bounded = !cs.get(i + 2).is_some_and(|&n| is_word(n));
                if is_word(w) && bounded && !"mMtTsSdDnN".contains(w) {
                    out.push(' ');
                    out.push(w);
                    i += 2;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// `NLTKWordTokenizer().tokenize(sentence)`.
fn tokenize_sentence(sentence: &str, out: &mut Vec<String>) {
    let text = apply(sentence.to_string(), &STARTING_QUOTES);
    let text = split_quote_before_letter(text);
    let text = apply(text, &PUNCTUATION);
    let text = apply(format!(" {text} "), &ENDING_QUOTES);
    let text = apply(split_contractions(text), &CONTRACTIONS3);
    out.extend(text.split(is_space).filter(|t| !t.is_empty()).map(str::to_string));
}

/// Sentences tokenized lately on this thread and their tokens, at most this many.
const SENTENCE_MEMO_LIMIT: usize = 2048;

thread_local! {
    /// The tokens of each sentence tokenized lately: the texts a row's checks tokenize share
    /// most of their sentences (IFEval's loose variants are the response without its first or
    /// last line, or without `*`), and a sentence's tokens depend on it alone.
    static SENTENCES: RefCell<FxHashMap<Box<str>, Rc<[String]>>> = RefCell::new(FxHashMap::default());
}

/// [`tokenize_sentence`], remembered.
fn sentence_tokens(sentence: &str) -> Rc<[String]> {
    if let Some(tokens) = SENTENCES.with_borrow(|m| m.get(sentence).cloned()) {
        return tokens;
    }
    let mut out = Vec::new();
    tokenize_sentence(sentence, &mut out);
    let tokens: Rc<[String]> = out.into();
    SENTENCES.with_borrow_mut(|m| {
        if m.len() >= SENTENCE_MEMO_LIMIT {
            m.clear();
        }
        m.insert(sentence.into(), tokens.clone());
    });
    tokens
}

/// `nltk.word_tokenize(text)`: the tokens of every Punkt sentence of `text`.
pub fn word_tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (s, e) in sentence_spans(text) {
        out.extend(sentence_tokens(&text[s..e]).iter().cloned());
    }
    out
}

/// How many tokens of `nltk.word_tokenize(text)` satisfy `keep`.
pub fn count_tokens(text: &str, keep: impl Fn(&str) -> bool) -> usize {
    sentence_spans(text).into_iter().map(|(s, e)| sentence_tokens(&text[s..e]).iter().filter(|t| keep(t)).count()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_nltk() {
        assert_eq!(
            word_tokenize("I'm in the U.S. Don't go."),
            ["I", "'m", "in", "the", "U.S.", "Do", "n't", "go", "."]
        );
        assert_eq!(
            word_tokenize("Good muffins cost $3.88\nin New York.  Please buy me\ntwo of them.\nThanks."),
            [
                "Good", "muffins", "cost", "$", "3.88", "in", "New", "York", ".", "Please", "buy", "me", "two", "of",
                "them", ".", "Thanks", "."
            ]
        );
        assert_eq!(
            word_tokenize("\"CANNOT\" (AT&T) wanna go"),
            ["``", "CAN", "NOT", "''", "(", "AT", "&", "T", ")", "wan", "na", "go"]
        );
    }
}
