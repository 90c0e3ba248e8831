//! A port of NLTK's Punkt sentence tokenizer (`PunktSentenceTokenizer.tokenize`, NLTK 3.8) with
//! its English model, the splitter behind IFEval's `count_sentences` and `nltk.word_tokenize`.
//!
//! Pipeline position: used by `stdlib::intrinsics::ifeval` only. The model's parameters are read
//! once from `punkt_english.txt`.
//!
//! The algorithm, as NLTK runs it on a text:
//! 1. every `.`, `?` or `!` followed by punctuation, or by white space and a token, is a
//!    candidate break; its context is the word before it, itself and what follows;
//! 2. the context is split into Punkt word tokens and annotated: a first pass by token type
//!    (`?`/`!`/`.` tokens and period-final tokens break, unless the token is a known
//!    abbreviation or an ellipsis), a second pass by the following token (collocations, the
//!    orthographic heuristic, frequent sentence starters, initials and numbers);
//! 3. a candidate breaks the text when its context holds a break followed by another token;
//! 4. closing quotes and brackets at the start of a sentence move to the previous one, and empty
//!    sentences are dropped.

use super::pychar::{is_decimal, is_space, is_word, rstrip, strip};
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::sync::LazyLock;

const ORTHO_BEG_UC: u8 = 1 << 1;
const ORTHO_MID_UC: u8 = 1 << 2;
const ORTHO_UNK_UC: u8 = 1 << 3;
const ORTHO_BEG_LC: u8 = 1 << 4;
const ORTHO_MID_LC: u8 = 1 << 5;
const ORTHO_UNK_LC: u8 = 1 << 6;
const ORTHO_UC: u8 = ORTHO_BEG_UC | ORTHO_MID_UC | ORTHO_UNK_UC;
const ORTHO_LC: u8 = ORTHO_BEG_LC | ORTHO_MID_LC | ORTHO_UNK_LC;

/// The parameters of a trained Punkt model. Entries borrow the embedded model text, except
/// the few that hold an escaped space. The tables are fixed (the model's), so a fast hash
/// without a random key serves: the text looked up in them cannot change what they hold.
struct Params {
    abbrev_types: FxHashSet<Cow<'static, str>>,
    collocations: FxHashSet<(Cow<'static, str>, Cow<'static, str>)>,
    sent_starters: FxHashSet<Cow<'static, str>>,
    ortho_context: FxHashMap<Cow<'static, str>, u8>,
}

/// An entry of the model file, with `\s` standing for a space.
fn entry(s: &'static str) -> Cow<'static, str> {
    if s.contains("\\s") {
        Cow::Owned(s.replace("\\s", " "))
    } else {
        Cow::Borrowed(s)
    }
}

impl Params {
    #[expect(
        clippy::expect_used,
        clippy::panic,
        reason = "the Punkt model is a file of this crate (`include_str!`), read whole by the IFEval tests"
    )]
    fn parse(text: &'static str) -> Params {
        let mut p = Params {
            abbrev_types: FxHashSet::default(),
            collocations: FxHashSet::default(),
            sent_starters: FxHashSet::default(),
            ortho_context: FxHashMap::with_capacity_and_hasher(16_384, Default::default()),
        };
        let mut section = "";
        for line in text.lines() {
            // `#` comments only head the file: a collocation may start with `##number##`
            if (section.is_empty() && line.starts_with('#')) || line.is_empty() {
                continue;
            }
            if let Some(s) = line.strip_prefix('@') {
                section = s;
                continue;
            }
            match section {
                "abbrev" => {
                    p.abbrev_types.insert(entry(line));
                }
                "sent_starters" => {
                    p.sent_starters.insert(entry(line));
                }
                "collocations" => {
                    let (a, b) = line.split_once('\t').expect("collocation without a tab");
                    p.collocations.insert((entry(a), entry(b)));
                }
                "ortho" => {
                    let (w, f) = line.split_once('\t').expect("ortho context without a tab");
                    p.ortho_context.insert(entry(w), f.parse().expect("ortho flags"));
                }
                other => panic!("unknown section `{other}` in the Punkt model"),
            }
        }
        p
    }

    fn ortho(&self, typ: &str) -> u8 {
        self.ortho_context.get(typ).copied().unwrap_or(0)
    }
}

static ENGLISH: LazyLock<Params> = LazyLock::new(|| Params::parse(include_str!("punkt_english.txt")));

/// Reads the English parameters now, if no thread has yet.
pub(super) fn load() {
    LazyLock::force(&ENGLISH);
}

// ---------------------------------------------------------------- Punkt word tokens

/// `PunktLanguageVars._re_non_word_chars`: characters that cannot appear within words.
fn is_non_word(c: char) -> bool {
    matches!(c, ')' | '"' | ';' | '}' | ']' | '*' | ':' | '@' | '\'' | '(' | '{' | '[' | '?' | '!')
}

/// `PunktLanguageVars._re_word_start`: characters a word token may start with.
fn is_word_start(c: char) -> bool {
    !matches!(c, '(' | '"' | '`' | '{' | '[' | ':' | ';' | '&' | '#' | '*' | '@' | ')' | '}' | ']' | '-' | ',')
}

/// The characters of a text with their byte offsets, plus the text's length as a sentinel.
struct Chars {
    chars: Vec<char>,
    offsets: Vec<usize>,
}

impl Chars {
    fn new(s: &str) -> Chars {
        if s.is_ascii() {
            // one character per byte: collected without decoding, offsets counted
            return Chars { chars: s.bytes().map(char::from).collect(), offsets: (0..=s.len()).collect() };
        }
        let mut chars = Vec::with_capacity(s.len());
        let mut offsets = Vec::with_capacity(s.len() + 1);
        for (i, c) in s.char_indices() {
            chars.push(c);
            offsets.push(i);
        }
        offsets.push(s.len());
        Chars { chars, offsets }
    }

    fn get(&self, i: usize) -> Option<char> {
        self.chars.get(i).copied()
    }
}

/// `_re_multi_char_punct` matched at character `i`: `--+`, `..+` or `. . .`; its length.
fn multi_char_at(cs: &Chars, i: usize) -> Option<usize> {
    let c = cs.get(i)?;
    if c == '-' || c == '.' {
        let run = cs.chars[i..].iter().take_while(|&&x| x == c).count();
        if run >= 2 {
            return Some(run);
        }
    }
    if c == '.' {
        // (?:\.\s){2,}\.
        let mut reps = 0;
        while cs.get(i + 2 * reps) == Some('.') && cs.get(i + 2 * reps + 1).is_some_and(is_space) {
            reps += 1;
        }
        if reps >= 2 && cs.get(i + 2 * reps) == Some('.') {
            return Some(2 * reps + 1);
        }
        if reps >= 3 {
            return Some(2 * (reps - 1) + 1);
        }
    }
    None
}

/// Whether a word token may end before character `i` (the lookahead of `_word_tokenize_fmt`).
fn word_ends_at(cs: &Chars, i: usize) -> bool {
    let Some(c) = cs.get(i) else { return true };
    if is_space(c) || is_non_word(c) || multi_char_at(cs, i).is_some() {
        return true;
    }
    c == ',' && cs.get(i + 1).is_none_or(|n| is_space(n) || is_non_word(n) || multi_char_at(cs, i + 1).is_some())
}

/// `PunktLanguageVars.word_tokenize` on one line: the tokens as byte ranges of `line`.
fn word_tokens(line: &str) -> Vec<(usize, usize)> {
    let cs = Chars::new(line);
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.chars.len() {
        let c = cs.chars[i];
        if is_space(c) {
            i += 1;
            continue;
        }
        let len = if let Some(n) = multi_char_at(&cs, i) {
            n
        } else if is_word_start(c) {
            let mut e = i + 1;
            while !word_ends_at(&cs, e) {
                e += 1;
            }
            e - i
        } else {
            1
        };
        out.push((cs.offsets[i], cs.offsets[i + len]));
        i += len;
    }
    out
}

/// A token with Punkt's annotations.
struct Token<'a> {
    tok: &'a str,
    /// The lowercased token, or `##number##` for a number.
    typ: String,
    period_final: bool,
    sentbreak: bool,
    abbr: bool,
    ellipsis: bool,
}

/// `PunktToken._RE_NUMERIC`: `^-?[\.,]?\d[\d,\.-]*\.?$`.
fn is_numeric(t: &str) -> bool {
    let mut cs = t.chars().peekable();
    if cs.peek() == Some(&'-') {
        cs.next();
    }
    if matches!(cs.peek(), Some('.') | Some(',')) {
        cs.next();
    }
    if !cs.next().is_some_and(is_decimal) {
        return false;
    }
    let rest: Vec<char> = cs.collect();
    let body = match rest.last() {
        Some('.') => &rest[..rest.len() - 1],
        _ => &rest[..],
    };
    // `[\d,\.-]*\.?`: a final period may belong to either part; both accept it.
    body.iter().all(|&c| is_decimal(c) || matches!(c, ',' | '.' | '-'))
}

impl<'a> Token<'a> {
    fn new(tok: &'a str) -> Token<'a> {
        let lower = tok.to_lowercase();
        let typ = if is_numeric(&lower) { "##number##".to_string() } else { lower };
        Token { tok, typ, period_final: tok.ends_with('.'), sentbreak: false, abbr: false, ellipsis: false }
    }

    fn type_no_period(&self) -> &str {
        if self.typ.chars().count() > 1 && self.typ.ends_with('.') {
            &self.typ[..self.typ.len() - 1]
        } else {
            &self.typ
        }
    }

    fn type_no_sentperiod(&self) -> &str {
        if self.sentbreak {
            self.type_no_period()
        } else {
            &self.typ
        }
    }

    fn first_upper(&self) -> bool {
        self.tok.chars().next().is_some_and(char::is_uppercase)
    }

    fn first_lower(&self) -> bool {
        self.tok.chars().next().is_some_and(char::is_lowercase)
    }

    fn is_ellipsis(&self) -> bool {
        self.tok.len() >= 2 && self.tok.bytes().all(|b| b == b'.')
    }

    /// `[^\W\d]\.$`: a letter (or `_`) and a period.
    fn is_initial(&self) -> bool {
        let mut cs = self.tok.chars();
        matches!((cs.next(), cs.next(), cs.next()), (Some(c), Some('.'), None) if is_word(c) && !is_decimal(c))
    }
}

/// Punkt's word tokens of `text` (`_tokenize_words`: line by line).
fn tokenize_words(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    for line in text.split('\n') {
        if strip(line).is_empty() {
            continue;
        }
        out.extend(word_tokens(line).into_iter().map(|(s, e)| Token::new(&line[s..e])));
    }
    out
}

fn first_pass(p: &Params, t: &mut Token) {
    let tok = t.tok;
    if matches!(tok, "." | "?" | "!") {
        t.sentbreak = true;
    } else if t.is_ellipsis() {
        t.ellipsis = true;
    } else if t.period_final && !tok.ends_with("..") {
        let stem = tok[..tok.len() - 1].to_lowercase();
        let last_part = stem.rsplit('-').next().unwrap_or("");
        if p.abbrev_types.contains(stem.as_str()) || p.abbrev_types.contains(last_part) {
            t.abbr = true;
        } else {
            t.sentbreak = true;
        }
    }
}

enum Starter {
    Yes,
    No,
    Unknown,
}

/// `_ortho_heuristic`: whether `t` starts a sentence, judging by its case and where its type
/// was seen in training.
fn ortho_heuristic(p: &Params, t: &Token) -> Starter {
    if matches!(t.tok, ";" | ":" | "," | "." | "!" | "?") {
        return Starter::No;
    }
    let ctx = p.ortho(t.type_no_sentperiod());
    if t.first_upper() && ctx & ORTHO_LC != 0 && ctx & ORTHO_MID_UC == 0 {
        return Starter::Yes;
    }
    if t.first_lower() && (ctx & ORTHO_UC != 0 || ctx & ORTHO_BEG_LC == 0) {
        return Starter::No;
    }
    Starter::Unknown
}

/// `_second_pass_annotation` of `t1` given the token after it.
fn second_pass(p: &Params, t1: &mut Token, t2: &Token) {
    if !t1.period_final {
        return;
    }
    let typ = t1.type_no_period().to_string();
    let next_typ = t2.type_no_sentperiod();
    let initial = t1.is_initial();
    if p.collocations.contains(&(Cow::Borrowed(typ.as_str()), Cow::Borrowed(next_typ))) {
        t1.sentbreak = false;
        t1.abbr = true;
        return;
    }
    if (t1.abbr || t1.ellipsis) && !initial {
        match ortho_heuristic(p, t2) {
            Starter::Yes => {
                t1.sentbreak = true;
                return;
            }
            _ if t2.first_upper() && p.sent_starters.contains(next_typ) => {
                t1.sentbreak = true;
                return;
            }
            _ => {}
        }
    }
    if initial || typ == "##number##" {
        match ortho_heuristic(p, t2) {
            Starter::No => {
                t1.sentbreak = false;
                t1.abbr = true;
            }
            Starter::Unknown if initial && t2.first_upper() && p.ortho(next_typ) & ORTHO_LC == 0 => {
                t1.sentbreak = false;
                t1.abbr = true;
            }
            _ => {}
        }
    }
}

/// `text_contains_sentbreak`: whether an annotated token of `context` breaks and another token
/// follows it.
fn contains_sentbreak(p: &Params, context: &str) -> bool {
    let mut toks = tokenize_words(context);
    for t in toks.iter_mut() {
        first_pass(p, t);
    }
    let n = toks.len();
    for i in 0..n {
        if i + 1 < n {
            let (a, b) = toks.split_at_mut(i + 1);
            second_pass(p, &mut a[i], &b[0]);
        }
        if toks[i].sentbreak {
            return i + 1 < n;
        }
    }
    false
}

/// A candidate break: the byte offset of the `.`, `?` or `!`, and where the following token
/// starts when white space separates them (`next_tok`).
struct Candidate {
    at: usize,
    after_end: usize,
    next_tok: Option<usize>,
}

/// `period_context_re().finditer(text)`.
fn candidates(text: &str) -> Vec<Candidate> {
    let cs = Chars::new(text);
    let mut out = Vec::new();
    for (i, &c) in cs.chars.iter().enumerate() {
        if !matches!(c, '.' | '?' | '!') {
            continue;
        }
        let Some(n) = cs.get(i + 1) else { continue };
        if is_non_word(n) {
            out.push(Candidate { at: cs.offsets[i], after_end: cs.offsets[i + 2], next_tok: None });
        } else if is_space(n) {
            let mut j = i + 1;
            while cs.get(j).is_some_and(is_space) {
                j += 1;
            }
            if j == cs.chars.len() {
                continue;
            }
            let mut k = j;
            while cs.get(k).is_some_and(|x| !is_space(x)) {
                k += 1;
            }
            out.push(Candidate { at: cs.offsets[i], after_end: cs.offsets[k], next_tok: Some(cs.offsets[j]) });
        }
    }
    out
}

/// `_get_last_whitespace_index`: the index of the last ASCII white space in `s`, or 0.
fn last_whitespace_index(s: &str) -> usize {
    s.bytes().rposition(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)).unwrap_or(0)
}

/// `_slices_from_text`: sentence slices before realignment, as byte ranges.
fn slices(p: &Params, text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut last_break = 0;
    let mut decide = |m: &Candidate, prev: (usize, usize), out: &mut Vec<(usize, usize)>| {
        let context = format!("{}{}", &text[prev.0..prev.1], &text[m.at..m.after_end]);
        if contains_sentbreak(p, &context) {
            out.push((last_break, m.at + 1));
            last_break = m.next_tok.unwrap_or(m.at + 1);
        }
    };
    // `_match_potential_end_contexts`: each candidate with the word before it, skipping a
    // candidate whose word overlaps the next one's.
    let mut prev_slice = (0, 0);
    let mut prev: Option<&Candidate> = None;
    let cands = candidates(text);
    for m in &cands {
        let before = &text[prev_slice.1..m.at];
        let ws = last_whitespace_index(before);
        let start = if ws != 0 { ws + prev_slice.1 + 1 } else { prev_slice.0 };
        let word = (start, m.at);
        if let Some(pm) = prev {
            if prev_slice.1 <= word.0 {
                decide(pm, prev_slice, &mut out);
            }
        }
        prev = Some(m);
        prev_slice = word;
    }
    if let Some(pm) = prev {
        decide(pm, prev_slice, &mut out);
    }
    out.push((last_break, rstrip(text).len()));
    out
}

/// `re_boundary_realignment.match(s)`: closing quotes or brackets at the start of `s` followed by
/// white space, `--` or the end of a line; the length of the quotes and of the whole match.
fn realignment(s: &str) -> Option<(usize, usize)> {
    let cs = Chars::new(s);
    let mut i = 0;
    while cs.get(i).is_some_and(|c| matches!(c, '"' | '\'' | ')' | ']' | '}')) {
        i += 1;
        // lazy `+?`: the shortest run after which `\s+`, `(?=--)` or `$` matches, tried in
        // that order (a line break is white space, so `$` before one is never reached)
        match cs.get(i) {
            Some(c) if is_space(c) => {
                let mut j = i;
                while cs.get(j).is_some_and(is_space) {
                    j += 1;
                }
                return Some((cs.offsets[i], cs.offsets[j]));
            }
            Some('-') if cs.get(i + 1) == Some('-') => return Some((cs.offsets[i], cs.offsets[i])),
            None => return Some((cs.offsets[i], cs.offsets[i])),
            _ => {}
        }
    }
    None
}

/// `PunktSentenceTokenizer.span_tokenize(text)`: the sentences of `text` as byte ranges.
pub fn sentence_spans(text: &str) -> Vec<(usize, usize)> {
    let p = &*ENGLISH;
    let raw = slices(p, text);
    let mut out = Vec::new();
    let mut realign = 0;
    for (k, s1) in raw.iter().enumerate() {
        let s1 = (s1.0 + realign, s1.1);
        let nonempty = s1.0 < s1.1;
        match raw.get(k + 1) {
            None => {
                if nonempty {
                    out.push(s1);
                }
            }
            Some(s2) => match realignment(&text[s2.0..s2.1]) {
                Some((quotes, whole)) => {
                    out.push((s1.0, s2.0 + quotes));
                    realign = whole;
                }
                None => {
                    realign = 0;
                    if nonempty {
                        out.push(s1);
                    }
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sents(t: &str) -> Vec<&str> {
        sentence_spans(t).into_iter().map(|(s, e)| &t[s..e]).collect()
    }

    #[test]
    fn splits_like_nltk() {
        assert_eq!(
            sents("Mr. Smith went to Washington. He said hi! 1. apples\n2. pears. e.g. This"),
            ["Mr. Smith went to Washington.", "He said hi!", "1. apples\n2. pears.", "e.g.", "This"]
        );
        assert_eq!(sents("(Sent1.) Sent2."), ["(Sent1.)", "Sent2."]);
        assert_eq!(sents("Very bad acting!!! I promise."), ["Very bad acting!!!", "I promise."]);
        assert_eq!(sents(""), Vec::<&str>::new());
        assert_eq!(sents("  \n "), Vec::<&str>::new());
        assert_eq!(sents("No period at the end"), ["No period at the end"]);
    }

    #[test]
    fn collocations_and_the_orthographic_heuristic_keep_breaks_out() {
        // (`##number##`, `letters`) is a collocation of the model: no break after `5.`
        assert_eq!(sents("Steps:\n\n5. Letters of support. Done."), ["Steps:\n\n5. Letters of support.", "Done."]);
        // an initial followed by a word seen capitalised mid-sentence stays in the sentence
        assert_eq!(sents("Bake at 200 C. Done!"), ["Bake at 200 C. Done!"]);
        assert_eq!(sents("It was 3 a.m. We slept."), ["It was 3 a.m. We slept."]);
    }

    #[test]
    fn word_tokens_split_punctuation_but_not_periods() {
        let line = "He said, \"stop...\" (now)--then. . . left";
        let toks: Vec<&str> = word_tokens(line).into_iter().map(|(s, e)| &line[s..e]).collect();
        assert_eq!(
            toks,
            ["He", "said", ",", "\"", "stop", "...", "\"", "(", "now", ")", "--", "then", ". . .", "left"]
        );
    }

    #[test]
    fn numbers_are_typed() {
        assert!(is_numeric("3.14") && is_numeric("-1,000.") && is_numeric(".5") && !is_numeric("a1"));
        assert_eq!(Token::new("1.").typ, "##number##");
    }
}
