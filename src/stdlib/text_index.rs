//! The per-response text index: a response is lexed once with logos into byte ranges of its
//! words, sentences, paragraphs, lines, markdown list items, headings and code fences, and
//! every text intrinsic of a row reads that one index (through `EvalCtx::text_index`).
//!
//! Pipeline position: built lazily by `stdlib::EvalCtx` at run time, read by the intrinsics in
//! `stdlib::intrinsics`; no other stage sees it.
//!
//! Definitions (each is what the intrinsics document to rubric authors):
//!
//! - **word**: a maximal run of Unicode alphabetic characters and decimal digits (combining
//!   marks may follow), in which single apostrophes (`'`, `’`) and hyphens (`-`) are allowed
//!   *between* two such characters: `don't`, `well-known`, `naïve`, `3rd` and `COVID-19` are
//!   one word each; `3.14` is two (`3`, `14`); `_`, `'quoted'` edges and `--` separate words.
//! - **line**: the text between `\n` terminators, without the terminator or a trailing `\r`;
//!   a final terminator does not open an empty last line (`"a\n"` has one line, `""` none).
//! - **paragraph**: a maximal run of consecutive non-blank lines (a blank line holds only
//!   whitespace); its range runs from its first line's start to its last line's end.
//! - **sentence**: an approximation of NLTK Punkt (English), the splitter IFEval counts
//!   with. A sentence ends after a run of `.`, `!`, `?` (plus any closing quotes or brackets
//!   right after it) that is followed by whitespace, or at the end of the text. Following
//!   Punkt's second pass, an ellipsis (`...`) or a period after a number (`1.`) ends a
//!   sentence only when the next word does not start with a lowercase letter, and a period
//!   closing a known abbreviation (`Mr.`, `Dr.`, `etc.`, `vs.`...), a dotted abbreviation
//!   (`e.g.`, `U.S.`, `p.m.`) or a single-letter initial (`J. Smith`) never does. A period
//!   inside a token (`3.14`, `example.com`) never splits, since no whitespace follows it.
//!   Line breaks alone do not end a sentence (Punkt does not split on them either).
//! - **code fence**: a line indented by at most three spaces opening with three or more
//!   backticks or tildes, an optional info string whose first word is the language tag, and a
//!   body up to a closing fence of the same character at least as long, or to the end of the
//!   text when it is never closed (as CommonMark does).
//! - **heading**: an ATX heading outside code fences: at most three spaces, 1 to 6 `#`, then
//!   a space, a tab or the end of the line; its text is trimmed and loses a closing `#` run.
//! - **list item**: a line outside code fences whose first non-blank characters are a bullet
//!   marker (`*`, `-`, `+`) or a number of 1 to 9 digits followed by `.` or `)`, then a space
//!   or a tab. Thematic breaks (`---`, `* * *`) are not list items. Any indentation is
//!   accepted, so nested items count too.

use super::{Budget, Trap};
use logos::Logos;

/// A half-open byte range into the text the index was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteRange {
    pub start: usize,
    pub end: usize,
}

impl ByteRange {
    pub fn new(start: usize, end: usize) -> ByteRange {
        ByteRange { start, end }
    }

    /// The slice of `text` this range covers. `text` must be the indexed text.
    pub fn get<'t>(&self, text: &'t str) -> &'t str {
        &text[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Bullet (`*`, `-`, `+`) or numbered (`1.`, `1)`) list item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Bullet,
    Numbered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListItem {
    pub kind: ListKind,
    /// The whole line, indentation included.
    pub line: ByteRange,
    /// The item's text after the marker and the whitespace following it.
    pub content: ByteRange,
    /// Bytes of indentation before the marker.
    pub indent: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heading {
    /// 1 to 6.
    pub level: u8,
    pub line: ByteRange,
    /// The heading text: trimmed, without the opening or closing `#` runs.
    pub text: ByteRange,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeFence {
    /// From the opening fence line's start to the closing fence line's end (or the text's end).
    pub range: ByteRange,
    /// The first word of the info string, if any (`python` in "```python title=x").
    pub lang: Option<ByteRange>,
    /// The lines between the fences, without the newline before the closing fence.
    pub body: ByteRange,
    /// Whether a closing fence was found.
    pub closed: bool,
}

/// Tokens of the one logos pass. Everything that is not a word, a sentence terminator or
/// whitespace is a single-character `Other` token.
#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    #[regex(
        r"[\p{Alphabetic}\p{Nd}][\p{Alphabetic}\p{Nd}\p{M}]*(?:['’\-][\p{Alphabetic}\p{Nd}][\p{Alphabetic}\p{Nd}\p{M}]*)*",
        priority = 10
    )]
    Word,
    #[regex(r"[.!?]+", priority = 10)]
    Terminal,
    #[regex(r"\r?\n", priority = 10)]
    Newline,
    #[regex(r"[^\S\n]+", priority = 10)]
    Space,
    #[regex(r"[^\n]", priority = 1)]
    Other,
}

/// The index of one text. Holds byte ranges only; pair it with the text it was built from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextIndex {
    words: Vec<ByteRange>,
    sentences: Vec<ByteRange>,
    paragraphs: Vec<ByteRange>,
    lines: Vec<ByteRange>,
    list_items: Vec<ListItem>,
    headings: Vec<Heading>,
    code_fences: Vec<CodeFence>,
}

/// Tokens a text's index makes room for before lexing, at most (its memory is checked first).
const TOKENS_AT_ONCE: usize = 4096;

/// Abbreviations after which a single `.` does not end a sentence (lowercase, without the
/// final period). Dotted forms (`e.g.`, `U.S.`) and single letters are handled by rule.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "inc", "ltd", "co", "corp", "fig", "figs",
    "approx", "dept", "est", "mt", "gen", "col", "lt", "sgt", "capt", "rev", "gov", "sen", "rep", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "cf", "al", "eq", "vol", "ed", "eds", "pp", "ca",
];

/// The length of the longest of [`ABBREVIATIONS`] (`approx`).
const LONGEST_ABBREVIATION: usize = 6;

impl TextIndex {
    /// Lex `text` once and build every view of it.
    pub fn new(text: &str) -> TextIndex {
        // An unlimited budget never refuses.
        TextIndex::build(text, &mut Budget::unlimited()).unwrap_or_default()
    }

    /// The index of `text`, built within `budget`: the lexing is charged one unit of work per
    /// byte, and every vector is checked against the memory limit before it grows, so a huge
    /// text stops at the limit instead of after it.
    pub fn build(text: &str, budget: &mut Budget) -> Result<TextIndex, Trap> {
        budget.work(text.len() as u64)?;
        let mut index = if text.is_ascii() { ascii_views(text, budget)? } else { token_views(text, budget)? };
        index.paragraphs = paragraphs_from_lines(text, &index.lines);
        index.scan_blocks(text);
        budget.check()?;
        Ok(index)
    }

    pub fn words(&self) -> &[ByteRange] {
        &self.words
    }
    pub fn sentences(&self) -> &[ByteRange] {
        &self.sentences
    }
    pub fn paragraphs(&self) -> &[ByteRange] {
        &self.paragraphs
    }
    pub fn lines(&self) -> &[ByteRange] {
        &self.lines
    }
    pub fn list_items(&self) -> &[ListItem] {
        &self.list_items
    }
    pub fn headings(&self) -> &[Heading] {
        &self.headings
    }
    pub fn code_fences(&self) -> &[CodeFence] {
        &self.code_fences
    }

    /// The line-oriented pass: code fences first (their bodies hide headings and list items),
    /// then headings and list items.
    fn scan_blocks(&mut self, text: &str) {
        let mut open: Option<OpenFence> = None;
        for &line in &self.lines {
            let s = line.get(text);
            if let Some(fence) = open.as_mut() {
                if is_closing_fence(s, fence) {
                    let body = fence.body.unwrap_or(ByteRange::new(line.start, line.start));
                    self.code_fences.push(CodeFence {
                        range: ByteRange::new(fence.start, line.end),
                        lang: fence.lang,
                        body,
                        closed: true,
                    });
                    open = None;
                } else {
                    match fence.body.as_mut() {
                        Some(b) => b.end = line.end,
                        None => fence.body = Some(line),
                    }
                }
                continue;
            }
            if let Some(fence) = opening_fence(s, line) {
                open = Some(fence);
                continue;
            }
            if let Some(h) = heading(s, line) {
                self.headings.push(h);
                continue;
            }
            if let Some(item) = list_item(s, line) {
                self.list_items.push(item);
            }
        }
        if let Some(fence) = open {
            // An unclosed fence runs to the end of the text.
            self.code_fences.push(CodeFence {
                range: ByteRange::new(fence.start, text.len()),
                lang: fence.lang,
                body: fence.body.unwrap_or(ByteRange::new(text.len(), text.len())),
                closed: false,
            });
        }
    }
}

/// The words, lines and sentences of any text, from the logos lexer's tokens.
fn token_views(text: &str, budget: &mut Budget) -> Result<TextIndex, Trap> {
    // Room for the tokens of a short text at once (a token is a byte or more; a third of the
    // bytes covers prose), so that it does not grow from nothing; a longer text grows from
    // there, as below.
    let guess = (text.len() / 3 + 16).min(TOKENS_AT_ONCE);
    budget.reserve(guess * std::mem::size_of::<(Tok, ByteRange)>())?;
    let mut toks: Vec<(Tok, ByteRange)> = Vec::with_capacity(guess);
    let mut lexer = Tok::lexer(text);
    while let Some(tok) = lexer.next() {
        let span = lexer.span();
        // Every character matches some rule; an error can only be a stray byte sequence the
        // lexer refused, which we keep as `Other` so no text is lost.
        push_charged(&mut toks, (tok.unwrap_or(Tok::Other), ByteRange::new(span.start, span.end)), 32, budget)?;
    }
    // Each derived list has at most one range per token.
    let ranges = toks.len() * std::mem::size_of::<ByteRange>();
    budget.reserve(ranges)?;
    // At most every other token is a word (a space, a terminator or another character stands
    // between two words).
    let mut words = Vec::with_capacity(toks.len() / 2 + 1);
    words.extend(toks.iter().filter(|(t, _)| *t == Tok::Word).map(|(_, r)| *r));
    budget.reserve(ranges)?;
    let lines = lines_from_tokens(text, &toks);
    budget.reserve(ranges)?;
    let sentences = sentences_from_tokens(text, &toks);
    Ok(TextIndex { words, sentences, lines, ..TextIndex::default() })
}

/// Append `item`, first charging the memory a growing list takes (growing allocates the new
/// buffer while the old one is still held; a list grows from at least `min` items).
#[inline]
fn push_charged<T>(list: &mut Vec<T>, item: T, min: usize, budget: &mut Budget) -> Result<(), Trap> {
    if list.len() == list.capacity() {
        budget.reserve(list.capacity().max(min) * 2 * std::mem::size_of::<T>())?;
    }
    list.push(item);
    Ok(())
}

/// Byte classes of the ASCII lexer.
const ALNUM: u8 = 1;
const TERMINAL: u8 = 2;
/// Whitespace other than `\n` (`\t`, `\x0B`, `\x0C`, `\r`, space: Unicode `White_Space` in
/// ASCII).
const SPACE: u8 = 3;
const NEWLINE: u8 = 4;
const JOINER: u8 = 5;

const fn ascii_classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphanumeric() {
            ALNUM
        } else if c == b'.' || c == b'!' || c == b'?' {
            TERMINAL
        } else if c == b'\n' {
            NEWLINE
        } else if c == b'\t' || c == 0x0B || c == 0x0C || c == b'\r' || c == b' ' {
            SPACE
        } else if c == b'\'' || c == b'-' {
            JOINER
        } else {
            0
        };
        b += 1;
    }
    t
}

/// By byte: its class in an ASCII text (bytes beyond ASCII never reach it; they are class 0).
static ASCII_CLASS: [u8; 256] = ascii_classes();

/// The lines and the sentences an ASCII text's index makes room for before its pass.
const FEW: usize = 8;

/// Append a range to a list of an ASCII text's index ([`push_charged`]).
#[inline]
fn push_range(list: &mut Vec<ByteRange>, start: usize, end: usize, budget: &mut Budget) -> Result<(), Trap> {
    push_charged(list, ByteRange::new(start, end), 8, budget)
}

/// The words, lines and sentences of an ASCII text in one pass over its bytes, without the
/// token list: exactly what `token_views` makes of the logos lexer's tokens (the test
/// `ascii_views_are_the_token_views` compares the two), reading the tokens' rules off the
/// bytes. In ASCII a word is a run of letters and digits joined by single `'` or `-`, a
/// terminator run is `[.!?]+`, a line ends at `\n` (less one `\r` before it), whitespace is
/// `\t`, `\n`, `\x0B`, `\x0C`, `\r` and space, and every other byte is a token of its own;
/// the sentence rules of `sentences_from_tokens` and `break_kind` read the bytes around each
/// terminator run.
fn ascii_views(text: &str, budget: &mut Budget) -> Result<TextIndex, Trap> {
    let b = text.as_bytes();
    let class = |i: usize| b.get(i).map_or(0, |&c| ASCII_CLASS[usize::from(c)]);
    // Where the run of bytes of class `k` from `i` ends.
    let run_end = |i: usize, k: u8| {
        let rest = b.get(i..).unwrap_or_default();
        i + rest.iter().position(|&c| ASCII_CLASS[usize::from(c)] != k).unwrap_or(rest.len())
    };
    let n = b.len();
    // Room for the words of short prose at once (about one a word's length and a space).
    let guess = (n / 6 + 8).min(TOKENS_AT_ONCE);
    budget.reserve(guess * std::mem::size_of::<ByteRange>())?;
    let mut words: Vec<ByteRange> = Vec::with_capacity(guess);
    // A few lines and sentences at once: most texts have no more.
    budget.reserve(2 * FEW * std::mem::size_of::<ByteRange>())?;
    let mut lines: Vec<ByteRange> = Vec::with_capacity(FEW);
    let mut sentences: Vec<ByteRange> = Vec::with_capacity(FEW);
    let mut line_start = 0;
    // The sentence being read: its first token's start, and its last token's end so far.
    let mut sentence: Option<usize> = None;
    let mut last_end = 0;
    let mut i = 0;
    while i < n {
        let start = i;
        match class(i) {
            ALNUM => {
                i = run_end(i + 1, ALNUM);
                while class(i) == JOINER && class(i + 1) == ALNUM {
                    i = run_end(i + 2, ALNUM);
                }
                push_range(&mut words, start, i, budget)?;
                sentence.get_or_insert(start);
                last_end = i;
            }
            NEWLINE => {
                i += 1;
                let line = trim_cr(text, ByteRange::new(line_start, start));
                push_range(&mut lines, line.start, line.end, budget)?;
                line_start = i;
            }
            SPACE => {
                // A `\r` before `\n` ends the line with it (the `\n` comes next).
                i = run_end(i + 1, SPACE);
            }
            TERMINAL => {
                i = run_end(i + 1, TERMINAL);
                sentence.get_or_insert(start);
                // Closing quotes and brackets right after the terminator belong to the
                // sentence.
                let mut j = i;
                while b.get(j).is_some_and(|c| ASCII_CLOSERS.contains(c)) {
                    j += 1;
                }
                last_end = j;
                let mut k = j;
                while matches!(class(k), SPACE | NEWLINE) {
                    k += 1;
                }
                let followed_by_space = k > j || j == n;
                let splits = match b.get(k) {
                    None => true,
                    Some(_) if !followed_by_space => false,
                    Some(c) => match ascii_break_kind(b, start, i, words.last()) {
                        Break::Always => true,
                        Break::UnlessLowercase => !c.is_ascii_lowercase(),
                        Break::Never => false,
                    },
                };
                if splits {
                    if let Some(s) = sentence.take() {
                        push_range(&mut sentences, s, last_end, budget)?;
                    }
                }
                i = j;
            }
            _ => {
                i += 1;
                sentence.get_or_insert(start);
                last_end = i;
            }
        }
    }
    if line_start < n {
        let line = trim_cr(text, ByteRange::new(line_start, n));
        push_range(&mut lines, line.start, line.end, budget)?;
    }
    if let Some(s) = sentence {
        push_range(&mut sentences, s, last_end, budget)?;
    }
    Ok(TextIndex { words, sentences, lines, ..TextIndex::default() })
}

/// `break_kind` of the terminator run `start..end` of an ASCII text `b`, whose last word so
/// far is `last_word`: a word right before the run ends where the run starts (its last byte is
/// a letter or a digit), and a dotted chain (`a.m.`) is a letter or digit, `.`, then that word.
fn ascii_break_kind(b: &[u8], start: usize, end: usize, last_word: Option<&ByteRange>) -> Break {
    let t = &b[start..end];
    if t.len() > 1 && t.iter().all(|&c| c == b'.') {
        return Break::UnlessLowercase;
    }
    if t != b"." || start == 0 {
        return Break::Always;
    }
    let Some(word) = last_word.filter(|w| w.end == start) else {
        return Break::Always;
    };
    let w = &b[word.start..word.end];
    if w.iter().all(u8::is_ascii_digit) {
        return Break::UnlessLowercase;
    }
    // An initial, or the last letter of `e.g.` / `U.S.`.
    if w.len() == 1 && w[0].is_ascii_alphabetic() {
        return Break::Never;
    }
    if w.len() <= 2
        && word.start >= 2
        && b[word.start - 1] == b'.'
        && ASCII_CLASS[usize::from(b[word.start - 2])] == ALNUM
    {
        return Break::Never;
    }
    if is_listed_abbreviation(w) {
        return Break::Never;
    }
    Break::Always
}

/// Whether the ASCII word `w` is one of [`ABBREVIATIONS`], ignoring case (ASCII lowercases to
/// ASCII only, letter for letter: no lowered copy is needed).
fn is_listed_abbreviation(w: &[u8]) -> bool {
    w.len() <= LONGEST_ABBREVIATION && ABBREVIATIONS.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(w))
}

fn lines_from_tokens(text: &str, toks: &[(Tok, ByteRange)]) -> Vec<ByteRange> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (t, r) in toks {
        if *t == Tok::Newline {
            lines.push(trim_cr(text, ByteRange::new(start, r.start)));
            start = r.end;
        }
    }
    if start < text.len() {
        lines.push(trim_cr(text, ByteRange::new(start, text.len())));
    }
    lines
}

fn trim_cr(text: &str, r: ByteRange) -> ByteRange {
    if r.end > r.start && text.as_bytes()[r.end - 1] == b'\r' {
        ByteRange::new(r.start, r.end - 1)
    } else {
        r
    }
}

fn paragraphs_from_lines(text: &str, lines: &[ByteRange]) -> Vec<ByteRange> {
    let mut out = Vec::new();
    let mut current: Option<ByteRange> = None;
    for line in lines {
        if line.get(text).trim().is_empty() {
            if let Some(p) = current.take() {
                out.push(p);
            }
        } else {
            match current.as_mut() {
                Some(p) => p.end = line.end,
                None => current = Some(*line),
            }
        }
    }
    out.extend(current);
    out
}

/// The closing quotes and brackets (and emphasis marks) that stay with the sentence they follow.
fn is_closer(s: &str) -> bool {
    matches!(s.as_bytes(), [b] if ASCII_CLOSERS.contains(b)) || matches!(s, "”" | "’" | "»")
}

/// The ASCII ones of [`is_closer`].
const ASCII_CLOSERS: &[u8] = b"\"')]}*_";

fn sentences_from_tokens(text: &str, toks: &[(Tok, ByteRange)]) -> Vec<ByteRange> {
    let is_space = |t: Tok| matches!(t, Tok::Space | Tok::Newline);
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut last_end = 0;
    let mut i = 0;
    while i < toks.len() {
        let (t, r) = toks[i];
        if is_space(t) {
            i += 1;
            continue;
        }
        start.get_or_insert(r.start);
        last_end = r.end;
        if t != Tok::Terminal {
            i += 1;
            continue;
        }
        // Closing quotes and brackets right after the terminator belong to the sentence.
        let mut j = i + 1;
        while j < toks.len() && toks[j].0 == Tok::Other && is_closer(toks[j].1.get(text)) {
            last_end = toks[j].1.end;
            j += 1;
        }
        let mut k = j;
        while k < toks.len() && is_space(toks[k].0) {
            k += 1;
        }
        let followed_by_space = k > j || j == toks.len();
        let next_char = toks.get(k).and_then(|(_, r)| r.get(text).chars().next());
        let splits = match next_char {
            None => true,
            Some(_) if !followed_by_space => false,
            Some(c) => match break_kind(text, toks, i) {
                Break::Always => true,
                Break::UnlessLowercase => !c.is_lowercase(),
                Break::Never => false,
            },
        };
        if splits {
            if let Some(s) = start.take() {
                out.push(ByteRange::new(s, last_end));
            }
        }
        i = j;
    }
    if let Some(s) = start {
        out.push(ByteRange::new(s, last_end));
    }
    out
}

/// How a terminator followed by whitespace behaves, after Punkt's two passes: `!`, `?` and a
/// period after an ordinary word always end a sentence; an ellipsis or a period after a number
/// (`1.`) ends one unless a lowercase word follows (Punkt's orthographic heuristic); a period
/// closing an abbreviation or an initial never does.
enum Break {
    Always,
    UnlessLowercase,
    Never,
}

fn break_kind(text: &str, toks: &[(Tok, ByteRange)], i: usize) -> Break {
    let (_, term) = toks[i];
    let t = term.get(text);
    if t.len() > 1 && t.bytes().all(|b| b == b'.') {
        return Break::UnlessLowercase;
    }
    if t != "." || i == 0 {
        return Break::Always;
    }
    let (prev, word) = toks[i - 1];
    if prev != Tok::Word || word.end != term.start {
        return Break::Always;
    }
    let w = word.get(text);
    if w.bytes().all(|b| b.is_ascii_digit()) {
        return Break::UnlessLowercase;
    }
    if is_abbreviation(text, toks, i) {
        return Break::Never;
    }
    Break::Always
}

/// Whether the terminator token `i`, a single `.` right after a word, closes an abbreviation
/// or an initial.
fn is_abbreviation(text: &str, toks: &[(Tok, ByteRange)], i: usize) -> bool {
    let (_, word) = toks[i - 1];
    let w = word.get(text);
    if w.chars().count() == 1 && w.chars().all(char::is_alphabetic) {
        return true; // an initial, or the last letter of `e.g.` / `U.S.`
    }
    // A dotted chain like `a.m` or `Ph.D`: word `.` word `.` with no space.
    if i >= 3 {
        let (t2, dot) = toks[i - 2];
        let (t3, w3) = toks[i - 3];
        if t2 == Tok::Terminal
            && dot.get(text) == "."
            && dot.end == word.start
            && t3 == Tok::Word
            && w3.end == dot.start
            && w.chars().count() <= 2
        {
            return true;
        }
    }
    if w.is_ascii() {
        return is_listed_abbreviation(w.as_bytes());
    }
    // Beyond ASCII, lowercasing can make ASCII of what was not (the Kelvin sign `K` lowers to
    // `k`): the lowered word is compared.
    let lower = w.to_lowercase();
    ABBREVIATIONS.contains(&lower.as_str())
}

struct OpenFence {
    start: usize,
    marker: u8,
    len: usize,
    lang: Option<ByteRange>,
    /// From the first body line's start to the last body line's end, once there is one.
    body: Option<ByteRange>,
}

/// Leading spaces of `s` (at most `max`), or `None` if there are more.
fn small_indent(s: &str, max: usize) -> Option<usize> {
    let n = s.bytes().take_while(|b| *b == b' ').count();
    (n <= max).then_some(n)
}

fn opening_fence(s: &str, line: ByteRange) -> Option<OpenFence> {
    let indent = small_indent(s, 3)?;
    let rest = &s[indent..];
    let marker = *rest.as_bytes().first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|b| *b == marker).count();
    if len < 3 {
        return None;
    }
    let info = &rest[len..];
    if marker == b'`' && info.contains('`') {
        return None;
    }
    let info_trimmed = info.trim_start();
    let lang_len = info_trimmed.find(char::is_whitespace).unwrap_or(info_trimmed.len());
    let lang = (lang_len > 0).then(|| {
        let start = line.start + indent + len + (info.len() - info_trimmed.len());
        ByteRange::new(start, start + lang_len)
    });
    Some(OpenFence { start: line.start, marker, len, lang, body: None })
}

fn is_closing_fence(s: &str, fence: &OpenFence) -> bool {
    let Some(indent) = small_indent(s, 3) else {
        return false;
    };
    let rest = &s[indent..];
    let len = rest.bytes().take_while(|b| *b == fence.marker).count();
    len >= fence.len && rest[len..].trim().is_empty()
}

fn heading(s: &str, line: ByteRange) -> Option<Heading> {
    let indent = small_indent(s, 3)?;
    let rest = &s[indent..];
    let level = rest.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !(after.is_empty() || after.starts_with(' ') || after.starts_with('\t')) {
        return None;
    }
    let mut body = after.trim();
    // A closing sequence of `#` counts only when preceded by a space (or is the whole body).
    let without = body.trim_end_matches('#');
    if without.is_empty() || without.ends_with(' ') || without.ends_with('\t') {
        body = without.trim_end();
    }
    let offset = if body.is_empty() {
        line.start + indent + level
    } else {
        line.start + (body.as_ptr() as usize - s.as_ptr() as usize)
    };
    Some(Heading { level: level as u8, line, text: ByteRange::new(offset, offset + body.len()) })
}

fn is_thematic_break(s: &str) -> bool {
    let t = s.trim();
    let Some(c) = t.chars().next() else {
        return false;
    };
    matches!(c, '-' | '*' | '_')
        && t.chars().all(|x| x == c || x == ' ' || x == '\t')
        && t.chars().filter(|x| *x == c).count() >= 3
}

fn list_item(s: &str, line: ByteRange) -> Option<ListItem> {
    if is_thematic_break(s) {
        return None;
    }
    let indent = s.len() - s.trim_start_matches([' ', '\t']).len();
    let rest = &s[indent..];
    let bytes = rest.as_bytes();
    let (kind, marker_len) = match bytes.first()? {
        b'*' | b'-' | b'+' => (ListKind::Bullet, 1),
        b'0'..=b'9' => {
            let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits > 9 || !matches!(bytes.get(digits), Some(b'.') | Some(b')')) {
                return None;
            }
            (ListKind::Numbered, digits + 1)
        }
        _ => return None,
    };
    if !matches!(bytes.get(marker_len), Some(b' ') | Some(b'\t')) {
        return None;
    }
    let content = rest[marker_len..].trim();
    let start =
        if content.is_empty() { line.end } else { line.start + (content.as_ptr() as usize - s.as_ptr() as usize) };
    Some(ListItem { kind, line, content: ByteRange::new(start, start + content.len()), indent })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(t: &str) -> Vec<&str> {
        TextIndex::new(t).words().iter().map(|r| r.get(t)).collect()
    }
    fn sentences(t: &str) -> Vec<&str> {
        TextIndex::new(t).sentences().iter().map(|r| r.get(t)).collect()
    }
    fn paragraphs(t: &str) -> Vec<&str> {
        TextIndex::new(t).paragraphs().iter().map(|r| r.get(t)).collect()
    }
    fn lines(t: &str) -> Vec<&str> {
        TextIndex::new(t).lines().iter().map(|r| r.get(t)).collect()
    }

    #[test]
    fn words_keep_internal_apostrophes_and_hyphens() {
        assert_eq!(
            words("Don't stop: well-known naïve 3rd COVID-19, 3.14 'quoted' rock--roll snake_case"),
            [
                "Don't",
                "stop",
                "well-known",
                "naïve",
                "3rd",
                "COVID-19",
                "3",
                "14",
                "quoted",
                "rock",
                "roll",
                "snake",
                "case"
            ]
        );
        assert_eq!(words("it’s été  東京 Привет"), ["it’s", "été", "東京", "Привет"]);
        assert!(words("").is_empty());
        assert!(words(" -- ... ").is_empty());
        assert_eq!(words("end-"), ["end"]);
    }

    #[test]
    fn sentences_split_on_terminators_followed_by_capitals() {
        assert_eq!(
            sentences("Hello there. How are you? I'm fine!  Great."),
            ["Hello there.", "How are you?", "I'm fine!", "Great."]
        );
        assert_eq!(sentences("Wait... What?! Yes"), ["Wait...", "What?!", "Yes"]);
        assert_eq!(sentences("the earth isn't flat. i know, right?"), ["the earth isn't flat.", "i know, right?"]);
        assert_eq!(sentences("Hi! how are you"), ["Hi!", "how are you"]);
        assert_eq!(sentences("It costs 3.50 today. 42 is the answer."), ["It costs 3.50 today.", "42 is the answer."]);
        assert_eq!(sentences("He said \"Stop.\" Then he left."), ["He said \"Stop.\"", "Then he left."]);
        assert_eq!(sentences("Trailing text without a period"), ["Trailing text without a period"]);
        assert!(sentences("   \n ").is_empty());
    }

    #[test]
    fn sentences_skip_abbreviations_and_initials() {
        assert_eq!(sentences("Mr. Smith met Dr. Jones. They talked."), ["Mr. Smith met Dr. Jones.", "They talked."]);
        assert_eq!(
            sentences("Use tools, e.g. Hammers. Also i.e. This."),
            ["Use tools, e.g. Hammers.", "Also i.e. This."]
        );
        assert_eq!(
            sentences("The U.S. Army arrived. J. R. R. Tolkien wrote."),
            ["The U.S. Army arrived.", "J. R. R. Tolkien wrote."]
        );
        assert_eq!(sentences("Apples, pears, etc. Many fruits. Done."), ["Apples, pears, etc. Many fruits.", "Done."]);
        assert_eq!(sentences("It ended at 5 p.m. Then we left."), ["It ended at 5 p.m. Then we left."]);
        assert_eq!(sentences("Really? Yes."), ["Really?", "Yes."]);
        // Abbreviations in any case; a word beyond ASCII is lowered before it is compared.
        assert_eq!(
            sentences("Ask DR. Jones, PROF. Lee, Approx. Ten. Done."),
            ["Ask DR. Jones, PROF. Lee, Approx. Ten.", "Done."]
        );
        assert_eq!(sentences("Café. Next one. Ünc. Last."), ["Café.", "Next one.", "Ünc.", "Last."]);
    }

    #[test]
    fn a_text_longer_than_the_room_made_at_once_is_indexed_whole() {
        // More tokens than `TOKENS_AT_ONCE`: the token list grows past the room made first.
        let text = "Go. ".repeat(TOKENS_AT_ONCE);
        let index = TextIndex::new(&text);
        assert_eq!(index.words().len(), TOKENS_AT_ONCE);
        assert_eq!(index.sentences().len(), TOKENS_AT_ONCE);
        assert_eq!(index.words().last().map(|r| r.get(&text)), Some("Go"));
    }

    #[test]
    fn sentences_do_not_split_on_line_breaks_alone() {
        assert_eq!(sentences("Title\nFirst line. Second line."), ["Title\nFirst line.", "Second line."]);
        assert_eq!(sentences("One.\n\nTwo."), ["One.", "Two."]);
        assert_eq!(sentences("- item one.\n- item two."), ["- item one.", "- item two."]);
    }

    #[test]
    fn sentences_after_numbers_and_ellipses_depend_on_the_next_word() {
        assert_eq!(sentences("1. apples\n2. pears"), ["1. apples\n2. pears"]);
        assert_eq!(sentences("Step 1. Mix well."), ["Step 1.", "Mix well."]);
        assert_eq!(sentences("Well... maybe. Or... No."), ["Well... maybe.", "Or...", "No."]);
    }

    #[test]
    fn lines_drop_terminators() {
        assert_eq!(lines("a\r\nb\n\nc"), ["a", "b", "", "c"]);
        assert_eq!(lines("a\n"), ["a"]);
        assert!(lines("").is_empty());
        assert_eq!(lines("\n"), [""]);
    }

    #[test]
    fn paragraphs_are_separated_by_blank_lines() {
        assert_eq!(paragraphs("one\ntwo\n\n  \nthree\n\n"), ["one\ntwo", "three"]);
        assert_eq!(paragraphs("\n\nonly"), ["only"]);
        assert!(paragraphs(" \n\t\n").is_empty());
    }

    #[test]
    fn headings_with_levels_and_closing_hashes() {
        let t = "# Title\n## Sub ##\n####### seven\n#nospace\n   ### Indented\n    # code\n#\n## C# ##";
        let idx = TextIndex::new(t);
        let got: Vec<(u8, &str)> = idx.headings().iter().map(|h| (h.level, h.text.get(t))).collect();
        assert_eq!(got, [(1, "Title"), (2, "Sub"), (3, "Indented"), (1, ""), (2, "C#")]);
    }

    #[test]
    fn list_items_bullets_and_numbers() {
        let t = "* one\n- two\n+ three\n  - nested\n1. first\n2) second\n---\n* * *\n-not\n**bold**\n1.5 no\n-\n";
        let idx = TextIndex::new(t);
        let got: Vec<(ListKind, &str)> = idx.list_items().iter().map(|i| (i.kind, i.content.get(t))).collect();
        assert_eq!(
            got,
            [
                (ListKind::Bullet, "one"),
                (ListKind::Bullet, "two"),
                (ListKind::Bullet, "three"),
                (ListKind::Bullet, "nested"),
                (ListKind::Numbered, "first"),
                (ListKind::Numbered, "second"),
            ]
        );
        assert_eq!(idx.list_items()[3].indent, 2);
    }

    #[test]
    fn code_fences_with_language_and_hidden_structure() {
        let t = concat!(
            "Intro\n```python title\n# not a heading\n- not an item\n```\n",
            "~~~\nplain\n~~~~\n````js\nlet a;\n```\nstill code\n````\n```rust\nunclosed\n"
        );
        let idx = TextIndex::new(t);
        let got: Vec<(Option<&str>, &str, bool)> =
            idx.code_fences().iter().map(|f| (f.lang.map(|l| l.get(t)), f.body.get(t), f.closed)).collect();
        assert_eq!(
            got,
            [
                (Some("python"), "# not a heading\n- not an item", true),
                (None, "plain", true),
                (Some("js"), "let a;\n```\nstill code", true),
                (Some("rust"), "unclosed", false),
            ]
        );
        assert!(idx.headings().is_empty());
        assert!(idx.list_items().is_empty());
    }

    #[test]
    fn code_fence_edge_cases() {
        let t = "```\n```";
        let idx = TextIndex::new(t);
        assert_eq!(idx.code_fences().len(), 1);
        assert_eq!(idx.code_fences()[0].body.get(t), "");
        let t = "```py\r\nx = 1\r\n\r\ny = 2\r\n```\r\n";
        let idx = TextIndex::new(t);
        assert_eq!(idx.code_fences()[0].body.get(t), "x = 1\r\n\r\ny = 2");
        // Backtick fences may not carry backticks in their info string: inline code.
        assert!(TextIndex::new("```inline``` text").code_fences().is_empty());
    }

    /// The words, lines and sentences `t` gives in one pass (`ascii_views`) and from the logos
    /// lexer's tokens (`token_views`, the path of every non-ASCII text).
    fn both_views(t: &str) -> (TextIndex, TextIndex) {
        let one_pass = ascii_views(t, &mut Budget::unlimited()).unwrap();
        let tokens = token_views(t, &mut Budget::unlimited()).unwrap();
        (one_pass, tokens)
    }

    #[test]
    fn no_abbreviation_is_longer_than_the_longest() {
        assert_eq!(ABBREVIATIONS.iter().map(|a| a.len()).max(), Some(LONGEST_ABBREVIATION));
    }

    #[test]
    fn ascii_views_are_the_token_views_on_their_edges() {
        for t in [
            "",
            "don't stop-now a'-b a-'b a--b a''b 'x' -x- x' x- 3.14 COVID-19 rock--roll snake_case",
            "a\r\nb\r\r\nc \r\n \r d\r",
            "\t\x0b\x0c \x1c\x1f\x7f end...?! ?.",
            "# Title\n* item\n```py\nx = 1\n```\n1) one",
            "'",
            "-",
            "a'",
            "a-",
            "\r",
            "Mr. Smith met Dr. J. Doe at 5 p.m. on Jan. 3. Then U.S. forces left. e.g. this. Etc. Done",
            "He said \"stop.\" Then (quietly.) they went... on. Wait... Then! 1. item 2. next",
            "x.\"\n\nY. a.m. b.c.d. ab.cd. Ph.D. thinks. 12. ok. 12. Ok. end.'s x.* y._ z.]",
            ".lead ...lead. ! ? a.b. c",
            "ab.cde. Next one. ab.cd. Next",
            "ab._ Cd. ef.) Gh. ij.} Kl. mn.* Op. qr.' St. uv.] Wx.",
        ] {
            let (one_pass, tokens) = both_views(t);
            assert_eq!(one_pass, tokens, "{t:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn ascii_views_are_the_token_views(t in "[a-eA-E0-9'\\-.!?\r\n\t\x0b\x0c\x1c \\#*`_,\")\\]}]{0,60}") {
            let (one_pass, tokens) = both_views(&t);
            proptest::prop_assert_eq!(one_pass, tokens);
        }

        #[test]
        fn ascii_views_are_the_token_views_on_abbreviations(t in "((Mr|dr|ETC|vs|no|Jan|e|g|U|S|a|m|12|x|Ok|ok|y|abc|Abc|cde|it's)[.!?]{0,3}[\")_*'\\]}-]{0,2}[ \n]{0,2}){0,12}") {
            let (one_pass, tokens) = both_views(&t);
            proptest::prop_assert_eq!(one_pass, tokens);
        }
    }
}
