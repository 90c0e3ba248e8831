//! pest pairs → AST, one top-level item at a time so that an error in one item is reported
//! and the parser resumes at the next line that starts a declaration.

use super::ast::*;
use super::{RubricParser, Rule};
use crate::diag::Diagnostic;
use crate::source::{FileId, Span};
use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser;

pub struct ParseOutput {
    pub file: File,
    pub diagnostics: Vec<Diagnostic>,
}

/// Parse a whole file, reporting every syntax error (one per broken item) and returning the
/// items that parsed.
#[expect(clippy::expect_used, reason = "an entry rule that matched holds its header or item: the grammar says so")]
pub fn parse_file(file: FileId, full_src: &str) -> ParseOutput {
    let mut diagnostics = Vec::new();
    // A block comment that is never closed swallows the rest of the file: report it once and
    // parse only what comes before it.
    let src = match scan_comments(full_src).1 {
        Some(at) => {
            diagnostics.push(
                Diagnostic::error("rubric::parse::unterminated_comment", "this block comment is never closed")
                    .with_label(Span::new(file, at, at + 2), "opened here")
                    .with_help("close it with `*/`; everything after `/*` was ignored"),
            );
            &full_src[..at]
        }
        None => full_src,
    };
    let mut items = Vec::new();
    let mut header = None;
    let mut broken: Vec<String> = Vec::new();
    let mut pos = skip_trivia(src, 0);
    let starts_header = src[pos..].starts_with("rubric") || src[pos..].starts_with("module");
    if starts_header && at_word_boundary(src, pos + 6) {
        match RubricParser::parse(Rule::header_entry, &src[pos..]) {
            Ok(mut pairs) => {
                let entry = pairs.next().expect("header_entry");
                let h = entry.into_inner().find(|p| p.as_rule() == Rule::header).expect("header");
                let end = pos + h.as_span().end();
                let lower = Lower::new(file, pos);
                header = Some(lower.header(h));
                diagnostics.extend(lower.diags.into_inner());
                pos = end;
            }
            Err(e) => {
                diagnostics.push(header_error(file, src, pos, e));
                broken.push(BROKEN_HEADER.to_string());
                pos = recover(src, pos);
            }
        }
    }
    // Brackets nested past the limit: each run is reported once, and the item holding it is
    // left out (so no later pass recurses that deep) and skipped in one step (so a file of
    // deep nesting costs linear time, not a parse per line).
    let deep = too_deep_runs(src);
    let mut next_deep = 0;
    let too_deep = |diagnostics: &mut Vec<Diagnostic>, broken: &mut Vec<String>, item: usize, start: usize| {
        diagnostics.push(
            Diagnostic::error("rubric::parse::too_deep", format!("brackets nest more than {MAX_NESTING} levels deep"))
                .with_label(Span::new(file, start, start + 1), format!("bracket {} of those open here", MAX_NESTING + 1))
                .with_help(format!(
                    "blocks, groups, types, literals and calls may nest at most {MAX_NESTING} levels; flatten the structure or name inner parts with `let`"
                )),
        );
        broken.extend(declared_name(&src[item..]));
    };
    loop {
        pos = skip_trivia(src, pos);
        if pos >= src.len() {
            break;
        }
        while deep.get(next_deep).is_some_and(|&(_, end)| end <= pos) {
            next_deep += 1;
        }
        let run = deep.get(next_deep).copied();
        if let Some((start, end)) = run.filter(|&(start, _)| start <= pos) {
            // Inside a run whose item failed before it: the run is still reported, once.
            too_deep(&mut diagnostics, &mut broken, pos, start);
            next_deep += 1;
            pos = recover(src, end.saturating_sub(1));
            continue;
        }
        let parsed =
            stacker::maybe_grow(RED_ZONE, 64 * 1024 * 1024, || RubricParser::parse(Rule::item_entry, &src[pos..]));
        match parsed {
            Ok(mut pairs) => {
                let entry = pairs.next().expect("item_entry");
                let item = entry.into_inner().find(|p| p.as_rule() == Rule::item).expect("item");
                let end = pos + item.as_span().end();
                if let Some((start, run_end)) = run.filter(|&(start, _)| start < end) {
                    too_deep(&mut diagnostics, &mut broken, pos, start);
                    next_deep += 1;
                    pos = end.max(run_end);
                    continue;
                }
                let lower = Lower::new(file, pos);
                let lowered = stacker::maybe_grow(RED_ZONE, NEW_SEGMENT, || lower.item(item));
                // An item cut short by the depth limit is reported and left out (no cascades).
                if lower.too_deep.get() {
                    broken.extend(declared_name(&src[pos..]));
                } else {
                    items.push(lowered);
                }
                diagnostics.extend(lower.diags.into_inner());
                if end <= pos {
                    break;
                }
                pos = end;
            }
            Err(e) => {
                let at = match e.location {
                    InputLocation::Pos(p) => pos + p,
                    InputLocation::Span((s, _)) => pos + s,
                };
                // A parse that failed inside a run over the limit failed because of it (pest
                // stops when its stack runs low): report the depth, not the byte.
                if let Some((start, run_end)) = run.filter(|&(start, _)| start <= at) {
                    too_deep(&mut diagnostics, &mut broken, pos, start);
                    next_deep += 1;
                    pos = recover(src, run_end.saturating_sub(1));
                    continue;
                }
                diagnostics.push(pest_error(file, src, pos, e));
                broken.extend(declared_name(&src[pos..]));
                pos = recover(src, pos);
            }
        }
    }
    let span = Span::new(file, 0, full_src.len());
    ParseOutput { file: File { header, items, span, broken }, diagnostics }
}

/// Parse a type written in rubric syntax, used for intrinsic signatures: `"(a: Text, b: Number = 1) -> Bool"`.
pub fn parse_type_sig(src: &str) -> Result<(Vec<Param>, TypeExpr), String> {
    let wrapped = format!("fn f{src} = null");
    let mut pairs = RubricParser::parse(Rule::item_entry, &wrapped).map_err(|e| e.to_string())?;
    let item = pairs.next().and_then(|p| p.into_inner().find(|p| p.as_rule() == Rule::item)).ok_or("no item")?;
    if item.as_span().end() != wrapped.len() {
        return Err(format!("trailing text in signature `{src}`"));
    }
    match Lower::new(FileId(u32::MAX), 0).item(item) {
        Item::Fn(f) => Ok((f.params, f.ret)),
        _ => Err("not a signature".into()),
    }
}

/// Marker in `File::broken` for a header that failed to parse.
pub const BROKEN_HEADER: &str = "<header>";

const ITEM_KEYWORDS: &[&str] = &[
    "rubric",
    "module",
    "import",
    "input",
    "judge",
    "gate",
    "criterion",
    "criteria",
    "tier",
    "group",
    "let",
    "fn",
    "score",
    "example",
];

/// What [`scan_code`] meets outside string literals.
enum Lexeme {
    /// A byte of code (not in a string or a comment), at its offset.
    Code(usize, u8),
    /// A comment: its byte range (a line comment's without its newline).
    Comment(usize, usize),
    /// A `/*` that is never closed, at its offset: the scan ends there.
    Unclosed(usize),
}

/// Walk `src` once, skipping string literals and comments, and tell `on` about each byte of
/// code and each comment. Works on bytes (every delimiter is ASCII), so any input is safe.
fn scan_code(src: &str, mut on: impl FnMut(Lexeme)) {
    let b = src.as_bytes();
    let find =
        |from: usize, pat: &[u8]| b[from.min(b.len())..].windows(pat.len()).position(|w| w == pat).map(|k| from + k);
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"\"\"\"") {
            i = find(i + 3, b"\"\"\"").map_or(b.len(), |j| j + 3);
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if b[i..].starts_with(b"//") {
            let end = find(i, b"\n").unwrap_or(b.len());
            on(Lexeme::Comment(i, end));
            i = end;
        } else if b[i..].starts_with(b"/*") {
            match find(i + 2, b"*/") {
                Some(j) => {
                    on(Lexeme::Comment(i, j + 2));
                    i = j + 2;
                }
                None => return on(Lexeme::Unclosed(i)),
            }
        } else {
            on(Lexeme::Code(i, b[i]));
            i += 1;
        }
    }
}

/// Comments outside string literals: whether there is any, and the byte offset of the first
/// `/*` that is never closed.
pub fn scan_comments(src: &str) -> (bool, Option<usize>) {
    let (mut any, mut unclosed) = (false, None);
    scan_code(src, |l| match l {
        Lexeme::Comment(..) => any = true,
        Lexeme::Unclosed(at) => unclosed = Some(at),
        Lexeme::Code(..) => {}
    });
    (any, unclosed)
}

/// The byte range of every comment outside string literals, in order (`rubric fmt` keeps them).
pub fn comment_spans(src: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    scan_code(src, |l| {
        if let Lexeme::Comment(s, e) = l {
            out.push((s, e));
        }
    });
    out
}

/// The most brackets (`(`, `[`, `{`: blocks, groups, types, literals, calls) open at once.
/// Real rubrics nest a handful; the limit keeps every recursive pass after the parser (lowering,
/// checking, typing, code generation, dropping) far from the end of its stack, and keeps
/// types under the IR's `MAX_TYPE_DEPTH` even when every level is also optional.
pub const MAX_NESTING: usize = 100;

/// Where brackets nest past [`MAX_NESTING`], in one linear pass: for each run over the limit,
/// the offset of its first bracket past the limit and the offset just after the bracket that
/// brings the depth back to 0 (the end of the source when none does).
fn too_deep_runs(src: &str) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let (mut depth, mut open) = (0usize, None);
    scan_code(src, |l| {
        let Lexeme::Code(i, b) = l else { return };
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING && open.is_none() {
                    open = Some(i);
                }
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if let (0, Some(start)) = (depth, open) {
                    runs.push((start, i + 1));
                    open = None;
                }
            }
            _ => {}
        }
    });
    runs.extend(open.map(|start| (start, src.len())));
    runs
}

/// The name a declaration introduces (`judge grader {...` → `grader`), read from its text.
fn declared_name(item: &str) -> Option<String> {
    let mut words = item.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty());
    let kw = words.next()?;
    if !["judge", "criterion", "criteria", "tier", "group", "input", "let", "fn"].contains(&kw) {
        return None;
    }
    words.next().map(str::to_string)
}

fn at_word_boundary(src: &str, i: usize) -> bool {
    src[i.min(src.len())..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
}

/// Skip whitespace and comments.
fn skip_trivia(src: &str, mut pos: usize) -> usize {
    let b = src.as_bytes();
    loop {
        while pos < b.len() && (b[pos] as char).is_ascii_whitespace() {
            pos += 1;
        }
        if src[pos..].starts_with("//") {
            pos = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
        } else if src[pos..].starts_with("/*") {
            // `parse_file` cut the source at an unclosed comment, so every `/*` here closes.
            pos = src[pos + 2..].find("*/").map_or(src.len(), |i| pos + 2 + i + 2);
        } else {
            return pos;
        }
    }
}

/// After an error in the item at `pos`, resume at the next line that starts (after
/// indentation at most 0 columns) with a declaration keyword.
fn recover(src: &str, pos: usize) -> usize {
    let mut i = pos;
    loop {
        let Some(nl) = src[i..].find('\n') else { return src.len() };
        i += nl + 1;
        let line = &src[i..];
        if ITEM_KEYWORDS.iter().any(|k| line.starts_with(k) && at_word_boundary(src, i + k.len())) {
            return i;
        }
    }
}

fn describe(rule: &Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::EOI => "end of file",
        Rule::item | Rule::item_entry => {
            "a declaration (`input`, `judge`, `gate`, `criterion`, `criteria`, `tier`, `group`, `let`, `fn`, `score`, `reward`, `stat`, `example`, `import`)"
        }
        Rule::header => "`rubric NAME @ VERSION` or `module NAME`",
        Rule::ident => "a name",
        Rule::field_name => "a field name",
        Rule::qualified_name => "a dotted name",
        Rule::semver => "a version like `1.0.0`",
        Rule::number | Rule::signed_number => "a number",
        Rule::string | Rule::plain_string | Rule::triple_string => "a string",
        Rule::expr | Rule::if_expr | Rule::lambda | Rule::primary => "an expression",
        Rule::type_expr | Rule::type_atom => "a type",
        Rule::reward_setting => {
            "a reward setting (`advantage`, `std`, `epsilon`, `clip`, `penalty`, `unscored`, `uncovered`)"
        }
        Rule::judge_setting => {
            "a judge setting (`model`, `temperature`, `top_p`, `max_tokens`, `seed`, `samples`, `min_samples`, `vote`, `sees`, `returns`, `evidence`, `template`, `system`, `scoring`, `per_call`, `reasoning_effort`, `cascade`, `escalate`)"
        }
        Rule::criterion_attr => "a criterion attribute (`points`, `weight`, `axis`, `tags`, `ordinal`, `nominal`, `continuous`, `pass`)",
        Rule::verifier => "a verifier (`by JUDGE`, `check EXPR`, `value EXPR`, `extract ...`)",
        Rule::gate_action => "`score EXPR` or `cap EXPR`",
        Rule::criteria_each | Rule::criteria_static => "`each NAME in LIST { ... }` or `{ criterion ... }`",
        Rule::criterion_item | Rule::criterion_template => "`criterion`",
        Rule::group_member => "`group` or `criterion`",
        Rule::example_stmt => "an example statement (`INPUT VALUE`, `judge J says ...`, `expect ...`)",
        Rule::verdict_lit => "a verdict (`met`, `unmet`, `unscored(\"reason\")`, a number or a label)",
        Rule::expect_score | Rule::expect_failure | Rule::expect_group | Rule::expect_criterion => {
            "`score`, `failure`, `group` or a criterion"
        }
        Rule::cmp_op => "a comparison",
        Rule::add_op | Rule::mul_op => "an operator",
        Rule::call_args => "`(`",
        Rule::postfix | Rule::field_or_method | Rule::index => return None,
        Rule::level => "an ordinal level (`1 \"label\"`)",
        Rule::label => "a nominal label (`name: value`)",
        Rule::block_default => "`by JUDGE`",
        Rule::optional_mark => "`?`",
        Rule::named_arg | Rule::arg => "an argument",
        Rule::record_field => "a record field",
        Rule::field_type => "a field declaration (`name: Type`)",
        Rule::param => "a parameter (`name: Type`)",
        Rule::k_else => "`else`",
        Rule::k_then => "`then`",
        Rule::k_in => "`in`",
        Rule::k_by => "`by`",
        Rule::k_check => "`check`",
        Rule::k_from => "`from`",
        Rule::k_each => "`each`",
        Rule::kw_says => "`says`",
        Rule::k_rubric | Rule::k_module | Rule::k_import | Rule::k_input | Rule::k_judge | Rule::k_gate
        | Rule::k_criterion | Rule::k_criteria | Rule::k_tier | Rule::k_group | Rule::k_let | Rule::k_fn
        | Rule::k_score | Rule::k_example => {
            "a declaration (`input`, `judge`, `gate`, `criterion`, `criteria`, `tier`, `group`, `let`, `fn`, `score`, `reward`, `stat`, `example`, `import`)"
        }
        Rule::kw_reason => "`reason`",
        _ => return None,
    })
}

fn pest_error(file: FileId, src: &str, base: usize, e: pest::error::Error<Rule>) -> Diagnostic {
    let at = match e.location {
        InputLocation::Pos(p) => base + p,
        InputLocation::Span((s, _)) => base + s,
    };
    let mut expected: Vec<&str> = Vec::new();
    if let ErrorVariant::ParsingError { positives, .. } = &e.variant {
        for r in positives {
            if let Some(d) = describe(r) {
                if !expected.contains(&d) {
                    expected.push(d);
                }
            }
        }
    }
    let found = found_at(src, at);
    // Operators of other languages: named, with the word this one writes.
    for (op, word) in [("&&", "and"), ("||", "or")] {
        if src[at.min(src.len())..].starts_with(op) {
            return Diagnostic::error(
                "rubric::parse::syntax",
                format!("`{op}` is not an operator in rubric: write `{word}`"),
            )
            .with_label(Span::new(file, at, at + op.len()), format!("use `{word}`"))
            .with_help("the logical operators are words: `and`, `or`, `not`");
        }
    }
    if let Some(d) = declaration_in_block(file, src, base, at) {
        return d;
    }
    // A reserved word where a name goes: say so, and for an input, how to read such a field.
    let word = &src[at.min(src.len())..(at + token_len(src, at)).min(src.len())];
    // (Only where a name is expected: a declaration keyword where an expression was expected is
    // the next declaration after one cut short, and said so below.)
    if expected.contains(&"a name") && super::printer::KEYWORDS.contains(&word) {
        let item = src[base.min(src.len())..].trim_start();
        let help = if item.starts_with("input") {
            format!("a row field named `{word}` is read under another name: `input {word}_value: TYPE from \"{word}\"`")
        } else {
            "choose another name; the reserved words are listed in docs/language.md".to_string()
        };
        return Diagnostic::error("rubric::parse::syntax", format!("`{word}` is a reserved word, not a name"))
            .with_label(Span::new(file, at, at + word.len()), "reserved")
            .with_help(help);
    }
    let message = if expected.is_empty() {
        format!("unexpected {found}")
    } else {
        format!("expected {}, found {found}", join_or(&expected))
    };
    let end = (at + token_len(src, at)).min(src.len());
    Diagnostic::error("rubric::parse::syntax", message)
        .with_label(Span::new(file, at, end), "here")
        .with_help(help_for(src, base))
}

/// A declaration keyword at `at` inside a `criteria`, `tier` or `group` block that cannot hold
/// it (a `criteria` block inside another, say): said as such, rather than as a list of expected
/// tokens that names the very word found.
fn declaration_in_block(file: FileId, src: &str, base: usize, at: usize) -> Option<Diagnostic> {
    let len = token_len(src, at);
    let word = src.get(at..at + len)?;
    if !ITEM_KEYWORDS.contains(&word) {
        return None;
    }
    // The innermost brace open at `at` within the item, and the word its line starts with.
    let mut open: Vec<usize> = Vec::new();
    scan_code(src.get(base..at)?, |l| match l {
        Lexeme::Code(i, b'{') => open.push(base + i),
        Lexeme::Code(_, b'}') => drop(open.pop()),
        _ => {}
    });
    let brace = *open.last()?;
    let line_start = src[..brace].rfind('\n').map_or(0, |i| i + 1);
    let indent = src[line_start..brace].len() - src[line_start..brace].trim_start().len();
    let block_at = line_start + indent;
    let block = src[block_at..brace].split(|c: char| !c.is_alphanumeric() && c != '_').next()?;
    // What the block may hold failed for another reason (a second template of an `each`).
    if !["criteria", "tier", "group"].contains(&block) || word == "criterion" || (word, block) == ("group", "group") {
        return None;
    }
    let holds = if block == "group" { "`group` and `criterion` declarations" } else { "`criterion` declarations" };
    Some(
        Diagnostic::error(
            "rubric::parse::syntax",
            format!("a `{word}` declaration cannot be inside a `{block}` block"),
        )
        .with_label(Span::new(file, at, at + len), "here")
        .with_label(Span::new(file, block_at, block_at + block.len()), format!("inside this `{block}` block"))
        .with_help(format!(
            "a `{block}` block holds {holds}; only `group` blocks nest. Declare the `{word}` at the top level"
        )),
    )
}

/// A header that does not parse; one without `@` says that the version is missing.
fn header_error(file: FileId, src: &str, pos: usize, e: pest::error::Error<Rule>) -> Diagnostic {
    let line_end = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
    let line = &src[pos..line_end];
    // A module's header has no version; a rubric's must.
    if line.contains('@') || !line.starts_with("rubric") {
        return pest_error(file, src, pos, e);
    }
    Diagnostic::error("rubric::parse::syntax", "the header has no version")
        .with_label(Span::new(file, pos, pos + line.trim_end().len()), "no `@ VERSION`")
        .with_help("a rubric's header names it and its version: `rubric NAME @ MAJOR.MINOR.PATCH`, e.g. `rubric my.rubric @ 1.0.0`")
}

fn join_or(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

fn token_len(src: &str, at: usize) -> usize {
    let rest = &src[at.min(src.len())..];
    let mut chars = rest.char_indices();
    match chars.next() {
        None => 0,
        Some((_, c)) if c.is_alphanumeric() || c == '_' => {
            rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len())
        }
        Some((_, c)) => c.len_utf8(),
    }
}

fn found_at(src: &str, at: usize) -> String {
    let len = token_len(src, at);
    if len == 0 {
        return "end of file".into();
    }
    let tok = &src[at..at + len];
    match tok {
        "\n" => "end of line".into(),
        t => format!("`{}`", t.escape_debug()),
    }
}

/// Help naming the shape of the declaration that starts at `item_start`.
fn help_for(src: &str, item_start: usize) -> String {
    let line = src[item_start.min(src.len())..].trim_start();
    let first = line.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("");
    match first {
        "criterion" => "a criterion reads `criterion ID \"text\" [points N] [weight W] [axis A] (by JUDGE | check EXPR | value EXPR)`".into(),
        "gate" => "a gate reads `gate NAME: CONDITION else score|cap VALUE reason \"class\"`".into(),
        "judge" => "a judge reads `judge NAME { model \"...\" sees INPUT, ... }`".into(),
        "input" => "an input reads `input NAME: Type`".into(),
        "example" => "an example holds `INPUT VALUE`, `judge J says ID = met, ...` and `expect ...` lines".into(),
        "group" => "a group reads `group NAME weight W { criterion ... group ... }`".into(),
        "tier" => "a tier reads `tier NAME [by JUDGE] { criterion ... }`".into(),
        "criteria" => "a block reads `criteria NAME [by JUDGE] { criterion ... }` or `criteria NAME each X in LIST { criterion ... }`".into(),
        "score" => "the score reads `score = EXPR`".into(),
        "fn" => "a function reads `fn NAME(PARAM: Type, ...) -> Type = EXPR`".into(),
        "let" => "a value reads `let NAME = EXPR`".into(),
        _ => "see docs/language.md for the syntax of each declaration".into(),
    }
}

/// Converts pairs of one item into AST nodes. `base` is the byte offset of the parsed slice.
struct Lower {
    file: FileId,
    base: usize,
    /// Problems found while converting (numbers out of range, bad escapes).
    diags: std::cell::RefCell<Vec<Diagnostic>>,
    /// Bound on the depth of the tree being built (nesting plus operator chains), so that
    /// no later recursive pass (checking, printing, dropping) can exhaust the stack.
    depth: std::cell::Cell<usize>,
    too_deep: std::cell::Cell<bool>,
}

/// The deepest expression tree the parser builds.
pub const MAX_EXPR_DEPTH: usize = 1500;

/// A part of the depth budget, given back on drop.
struct Charge<'a> {
    lower: &'a Lower,
    n: usize,
    exceeded: bool,
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.lower.depth.set(self.lower.depth.get() - self.n);
    }
}

/// Room the recursive conversion may use before it moves to a fresh stack segment.
const RED_ZONE: usize = 128 * 1024;
const NEW_SEGMENT: usize = 4 * 1024 * 1024;

/// The operator a `cmp_op` token spells.
fn cmp_op(token: &str) -> CmpOp {
    match token {
        "==" => CmpOp::Eq,
        "!=" => CmpOp::Ne,
        "<=" => CmpOp::Le,
        ">=" => CmpOp::Ge,
        "<" => CmpOp::Lt,
        _ => CmpOp::Gt,
    }
}

/// How a level of an operator chain combines its operands.
#[derive(Clone, Copy)]
enum ChainLevel {
    /// Left to right, one `Binary` per operator.
    Binary,
    /// `not`s before the operand (no operators at this level).
    Not,
    /// One `Compare` of every operand (`a < b <= c`).
    Compare,
}

/// The levels of an operator chain, loosest first, with the tokens that split each.
const CHAIN_LEVELS: [(&[Rule], ChainLevel); 7] = [
    (&[Rule::coalesce_op], ChainLevel::Binary),
    (&[Rule::k_or], ChainLevel::Binary),
    (&[Rule::k_and], ChainLevel::Binary),
    (&[], ChainLevel::Not),
    (&[Rule::cmp_op], ChainLevel::Compare),
    (&[Rule::add_op], ChainLevel::Binary),
    (&[Rule::mul_op], ChainLevel::Binary),
];

/// The operator an operator token of a chain spells.
fn bin_op(token: &Pair<'_, Rule>) -> BinOp {
    match (token.as_rule(), token.as_str()) {
        (Rule::coalesce_op, _) => BinOp::Coalesce,
        (Rule::k_or, _) => BinOp::Or,
        (Rule::k_and, _) => BinOp::And,
        (_, "+") => BinOp::Add,
        (_, "-") => BinOp::Sub,
        (_, "*") => BinOp::Mul,
        (_, "/") => BinOp::Div,
        _ => BinOp::Rem,
    }
}

/// Children that carry meaning: hard keyword tokens are dropped.
fn kids(p: Pair<'_, Rule>) -> impl Iterator<Item = Pair<'_, Rule>> {
    p.into_inner().filter(|c| !is_hard_keyword(c.as_rule()))
}

fn is_hard_keyword(r: Rule) -> bool {
    matches!(
        r,
        Rule::k_rubric
            | Rule::k_module
            | Rule::k_import
            | Rule::k_input
            | Rule::k_judge
            | Rule::k_gate
            | Rule::k_criterion
            | Rule::k_criteria
            | Rule::k_tier
            | Rule::k_group
            | Rule::k_let
            | Rule::k_fn
            | Rule::k_score
            | Rule::k_example
            | Rule::k_reward
            | Rule::k_if
            | Rule::k_then
            | Rule::k_else
            | Rule::k_and
            | Rule::k_or
            | Rule::k_not
            | Rule::k_in
            | Rule::k_by
            | Rule::k_check
            | Rule::k_extract
            | Rule::k_from
            | Rule::k_each
            | Rule::kw_generator
            | Rule::kw_points
            | Rule::kw_weight
            | Rule::kw_axis
            | Rule::kw_tags
            | Rule::kw_ordinal
            | Rule::kw_nominal
            | Rule::kw_pass
            | Rule::kw_value
            | Rule::kw_reason
            | Rule::kw_cap
            | Rule::kw_as
            | Rule::kw_says
            | Rule::kw_expect
            | Rule::kw_failure
            | Rule::kw_within
    )
}

#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "lowering reads pest pairs of rules that matched: the grammar fixes which children each has"
)]
impl Lower {
    fn new(file: FileId, base: usize) -> Lower {
        Lower {
            file,
            base,
            diags: std::cell::RefCell::new(Vec::new()),
            depth: std::cell::Cell::new(0),
            too_deep: std::cell::Cell::new(false),
        }
    }

    fn error(&self, d: Diagnostic) {
        self.diags.borrow_mut().push(d);
    }

    /// The pair's span without the trailing whitespace pest's implicit skipping may include.
    fn span(&self, p: &Pair<'_, Rule>) -> Span {
        let s = p.as_span();
        let len = p.as_str().trim_end().len();
        Span::new(self.file, self.base + s.start(), self.base + s.start() + len)
    }

    fn name(&self, p: Pair<'_, Rule>) -> Name {
        Name { text: p.as_str().to_string(), span: self.span(&p) }
    }

    fn number(&self, p: Pair<'_, Rule>) -> f64 {
        let x = p.as_str().parse::<f64>().unwrap_or(f64::NAN);
        if !x.is_finite() {
            self.error(
                Diagnostic::error(
                    "rubric::parse::number_out_of_range",
                    format!("`{}` is too large for a number", p.as_str()),
                )
                .with_label(self.span(&p), "out of range")
                .with_help("numbers are 64-bit floating point, at most about 1.8e308"),
            );
        }
        x
    }

    fn string(&self, p: Pair<'_, Rule>) -> StrLit {
        let span = self.span(&p);
        let inner = p.into_inner().next().expect("string kind");
        let value = match inner.as_rule() {
            Rule::triple_string => dedent(inner.into_inner().next().map_or("", |p| p.as_str())),
            _ => {
                let raw = inner.into_inner().next().map_or("", |p| p.as_str());
                let (value, bad) = unescape_checked(raw);
                if let Some(bad) = bad {
                    self.error(
                        Diagnostic::error(
                            "rubric::parse::bad_escape",
                            format!("`\\u{{{bad}}}` is not a Unicode scalar value"),
                        )
                        .with_label(span, "in this string")
                        .with_help("use a code point up to 10FFFF that is not a surrogate (D800-DFFF)"),
                    );
                }
                value
            }
        };
        StrLit { value, span }
    }

    fn header(&self, p: Pair<'_, Rule>) -> Header {
        let span = self.span(&p);
        let inner = p.into_inner().next().expect("header kind");
        let kind = if inner.as_rule() == Rule::rubric_header { HeaderKind::Rubric } else { HeaderKind::Module };
        let mut name = None;
        let mut version = None;
        let mut title = None;
        for c in kids(inner) {
            match c.as_rule() {
                Rule::qualified_name => name = Some(self.name(c)),
                Rule::semver => version = Some(StrLit { value: c.as_str().to_string(), span: self.span(&c) }),
                Rule::string => title = Some(self.string(c)),
                _ => {}
            }
        }
        Header { kind, name: name.expect("header name"), version, title, span }
    }

    fn item(&self, p: Pair<'_, Rule>) -> Item {
        let inner = p.into_inner().next().expect("item kind");
        let span = self.span(&inner);
        match inner.as_rule() {
            Rule::import_item => {
                let mut k = kids(inner);
                let path = self.name(k.next().unwrap());
                let alias = k.next().map(|a| self.name(a));
                Item::Import(Import { path, alias, span })
            }
            Rule::input_item => {
                let mut k = kids(inner).peekable();
                let name = self.name(k.next().unwrap());
                let ty = self.type_expr(k.next().unwrap());
                let field = match k.peek().map(Pair::as_rule) {
                    Some(Rule::input_field) => k.next().and_then(|f| kids(f).next()).map(|s| self.string(s)),
                    _ => None,
                };
                let default = k.next().map(|e| self.expr(e));
                Item::Input(Input { name, ty, field, default, span })
            }
            Rule::let_item => {
                let mut name = None;
                let mut ty = None;
                let mut value = None;
                for c in kids(inner) {
                    match c.as_rule() {
                        Rule::ident => name = Some(self.name(c)),
                        Rule::type_expr => ty = Some(self.type_expr(c)),
                        _ => value = Some(self.expr(c)),
                    }
                }
                Item::Let(Let { name: name.unwrap(), ty, value: value.unwrap(), span })
            }
            Rule::fn_item => {
                let mut name = None;
                let mut params = Vec::new();
                let mut ret = None;
                let mut body = None;
                for c in kids(inner) {
                    match c.as_rule() {
                        Rule::ident => name = Some(self.name(c)),
                        Rule::param => params.push(self.param(c)),
                        Rule::type_expr => ret = Some(self.type_expr(c)),
                        _ => body = Some(self.expr(c)),
                    }
                }
                Item::Fn(FnDef { name: name.unwrap(), params, ret: ret.unwrap(), body: body.unwrap(), span })
            }
            Rule::score_item => {
                let mut k = kids(inner).peekable();
                let name = k.next_if(|c| c.as_rule() == Rule::ident).map(|n| self.name(n));
                Item::Score(ScoreDef { name, expr: self.expr(k.next().unwrap()), span })
            }
            Rule::reward_item => {
                let settings = kids(inner).map(|s| self.reward_setting(s)).collect();
                Item::Reward(RewardDef { settings, span })
            }
            Rule::stat_item => Item::Stat(self.stat_item(inner, span)),
            Rule::judge_item | Rule::generator_item => {
                let generator = inner.as_rule() == Rule::generator_item;
                let mut k = kids(inner);
                let name = self.name(k.next().unwrap());
                let settings = k.map(|s| self.judge_setting(s)).collect();
                let j = Judge { name, settings, span };
                if generator {
                    Item::Generator(j)
                } else {
                    Item::Judge(j)
                }
            }
            Rule::gate_item => {
                let mut name = None;
                let mut cond = None;
                let mut action = None;
                let mut reason = None;
                for c in kids(inner) {
                    match c.as_rule() {
                        Rule::ident => name = Some(self.name(c)),
                        Rule::expr => cond = Some(self.expr(c)),
                        Rule::gate_action => {
                            let a = c.into_inner().next().unwrap();
                            let is_cap = a.as_rule() == Rule::gate_cap;
                            let e = self.expr(kids(a).find(|x| x.as_rule() == Rule::expr).unwrap());
                            action = Some(if is_cap { GateAction::Cap(e) } else { GateAction::Score(e) });
                        }
                        Rule::string => reason = Some(self.string(c)),
                        _ => {}
                    }
                }
                Item::Gate(Gate { name: name.unwrap(), cond: cond.unwrap(), action: action.unwrap(), reason, span })
            }
            Rule::criterion_item => Item::Criterion(self.criterion(inner)),
            Rule::criteria_block => {
                let mut k = kids(inner);
                let name = self.name(k.next().unwrap());
                let body_pair = k.next().unwrap();
                let mut default_judge = None;
                let body = if body_pair.as_rule() == Rule::criteria_each {
                    let mut var = None;
                    let mut list = None;
                    let mut template = None;
                    let mut shows = Vec::new();
                    for c in kids(body_pair) {
                        match c.as_rule() {
                            Rule::ident => var = Some(self.name(c)),
                            Rule::expr => list = Some(self.expr(c)),
                            Rule::block_default => default_judge = Some(self.name(kids(c).next().unwrap())),
                            Rule::block_shows => {
                                for item in kids(c).filter(|k| k.as_rule() == Rule::shown_item) {
                                    let span = self.span(&item);
                                    let mut k = kids(item);
                                    let name = self.name(k.next().unwrap());
                                    let expr = k.next().map(|e| self.expr(e));
                                    shows.push(ShownItem { name, expr, span });
                                }
                            }
                            Rule::criterion_template => template = Some(self.criterion(c)),
                            _ => {}
                        }
                    }
                    CriteriaBody::Each {
                        var: var.unwrap(),
                        list: list.unwrap(),
                        template: Box::new(template.unwrap()),
                        shows,
                    }
                } else {
                    let mut crits = Vec::new();
                    for c in kids(body_pair) {
                        match c.as_rule() {
                            Rule::block_default => default_judge = Some(self.name(kids(c).next().unwrap())),
                            Rule::criterion_item => crits.push(self.criterion(c)),
                            _ => {}
                        }
                    }
                    CriteriaBody::Static(crits)
                };
                Item::Criteria(CriteriaBlock { name, default_judge, body, span })
            }
            Rule::tier_item => {
                let mut name = None;
                let mut default_judge = None;
                let mut criteria = Vec::new();
                for c in kids(inner) {
                    match c.as_rule() {
                        Rule::ident => name = Some(self.name(c)),
                        Rule::block_default => default_judge = Some(self.name(kids(c).next().unwrap())),
                        Rule::criterion_item => criteria.push(self.criterion(c)),
                        _ => {}
                    }
                }
                Item::Tier(Tier { name: name.unwrap(), default_judge, criteria, span })
            }
            Rule::group_item => Item::Group(self.group(inner)),
            Rule::example_item => {
                let mut k = kids(inner);
                let name = self.string(k.next().unwrap());
                let stmts = k.map(|s| self.example_stmt(s)).collect();
                Item::Example(Example { name, stmts, span })
            }
            r => unreachable!("item rule {r:?}"),
        }
    }

    fn group(&self, p: Pair<'_, Rule>) -> Group {
        let span = self.span(&p);
        let mut name = None;
        let mut weight = None;
        let mut default_judge = None;
        let mut members = Vec::new();
        for c in kids(p) {
            match c.as_rule() {
                Rule::ident => name = Some(self.name(c)),
                Rule::expr => weight = Some(self.expr(c)),
                Rule::block_default => default_judge = Some(self.name(kids(c).next().unwrap())),
                Rule::group_member => {
                    let m = c.into_inner().next().unwrap();
                    members.push(match m.as_rule() {
                        Rule::group_item => GroupMember::Group(self.group(m)),
                        _ => GroupMember::Criterion(self.criterion(m)),
                    });
                }
                _ => {}
            }
        }
        Group { name: name.unwrap(), weight, default_judge, members, span }
    }

    fn param(&self, p: Pair<'_, Rule>) -> Param {
        let span = self.span(&p);
        let mut k = kids(p);
        let name = self.name(k.next().unwrap());
        let ty = self.type_expr(k.next().unwrap());
        let default = k.next().map(|e| self.expr(e));
        Param { name, ty, default, span }
    }

    fn judge_setting(&self, p: Pair<'_, Rule>) -> JudgeSetting {
        let span = self.span(&p);
        let s = p.into_inner().next().unwrap();
        let rule = s.as_rule();
        let mut k = kids(s);
        let kind = match rule {
            Rule::js_model => JudgeSettingKind::Model(self.string(k.next().unwrap())),
            Rule::js_temperature => JudgeSettingKind::Temperature(self.number(k.next().unwrap())),
            Rule::js_top_p => JudgeSettingKind::TopP(self.number(k.next().unwrap())),
            Rule::js_max_tokens => JudgeSettingKind::MaxTokens(self.number(k.next().unwrap())),
            Rule::js_seed => JudgeSettingKind::Seed(self.number(k.next().unwrap())),
            Rule::js_samples => JudgeSettingKind::Samples(self.number(k.next().unwrap())),
            Rule::js_min_samples => JudgeSettingKind::MinSamples(self.number(k.next().unwrap())),
            Rule::js_per_call => JudgeSettingKind::PerCall(self.number(k.next().unwrap())),
            Rule::js_vote => JudgeSettingKind::Vote(self.name(k.next().unwrap())),
            Rule::js_scoring => JudgeSettingKind::Scoring(self.name(k.next().unwrap())),
            Rule::js_sees => JudgeSettingKind::Sees(k.map(|n| self.name(n)).collect()),
            Rule::js_returns => {
                let kind = self.name(k.next().unwrap());
                let fields = k.map(|f| self.field_type(f)).collect();
                JudgeSettingKind::Returns { kind, fields }
            }
            Rule::js_evidence => JudgeSettingKind::EvidenceQuote(self.name(k.next().unwrap())),
            Rule::js_template => JudgeSettingKind::Template(self.string(k.next().unwrap())),
            Rule::js_system => JudgeSettingKind::System(self.string(k.next().unwrap())),
            Rule::js_local => JudgeSettingKind::Local(self.string(k.next().unwrap())),
            Rule::js_calibration => JudgeSettingKind::Calibration(self.string(k.next().unwrap())),
            Rule::js_order => JudgeSettingKind::Order(self.name(k.next().unwrap())),
            Rule::js_compares => {
                let a = self.name(k.next().unwrap());
                JudgeSettingKind::Compares(a, self.name(k.next().unwrap()))
            }
            Rule::js_inconsistent => JudgeSettingKind::Inconsistent(self.name(k.next().unwrap())),
            Rule::js_rollouts => JudgeSettingKind::Rollouts(self.name(k.next().unwrap())),
            Rule::js_fills => JudgeSettingKind::Fills(self.name(k.next().unwrap())),
            Rule::js_reasoning => JudgeSettingKind::ReasoningEffort(self.name(k.next().unwrap())),
            Rule::js_cascade => JudgeSettingKind::Cascade(k.map(|n| self.name(n)).collect()),
            Rule::js_escalate => JudgeSettingKind::Escalate(
                k.map(|w| {
                    let inner = w.into_inner().next().unwrap();
                    match inner.as_rule() {
                        Rule::esc_between => {
                            let span = self.span(&inner);
                            let mut n = inner.into_inner();
                            let lo = self.number(n.next().unwrap());
                            let hi = self.number(n.next().unwrap());
                            EscalateWhen::Between(lo, hi, span)
                        }
                        _ => EscalateWhen::Named(self.name(inner)),
                    }
                })
                .collect(),
            ),
            Rule::js_jury => JudgeSettingKind::Jury(k.map(|n| self.name(n)).collect()),
            Rule::js_weights => JudgeSettingKind::Weights(k.map(|n| self.number(n)).collect()),
            r => unreachable!("judge setting {r:?}"),
        };
        JudgeSetting { kind, span }
    }

    fn stat_item(&self, p: Pair<'_, Rule>, span: Span) -> StatDef {
        let mut names = Vec::new();
        let (mut measure, mut test, mut per, mut clip) = (None, None, None, None);
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::ident => names.push(self.name(c)),
                Rule::stat_measure => {
                    let m = c.into_inner().next().unwrap();
                    measure = Some(match m.as_rule() {
                        Rule::k_score => StatMeasure::Score(self.span(&m)),
                        Rule::stat_call => {
                            let mut k = m.into_inner();
                            let func = self.name(k.next().unwrap());
                            StatMeasure::Call { func, set: self.name(k.next().unwrap()) }
                        }
                        _ => StatMeasure::Criterion(self.name(m)),
                    });
                }
                Rule::stat_test => {
                    let at = self.span(&c);
                    let mut k = c.into_inner();
                    let op = cmp_op(k.next().unwrap().as_str());
                    test = Some((op, self.number(k.next().unwrap()), at));
                }
                Rule::stat_per => {
                    let at = self.span(&c);
                    let k = c.into_inner().find(|x| x.as_rule() != Rule::kw_per).unwrap();
                    per = Some(match k.as_rule() {
                        Rule::stat_per_tag => StatPer::Tag(
                            k.into_inner().find(|x| x.as_rule() == Rule::string).map(|s| self.string(s)),
                            at,
                        ),
                        Rule::stat_per_input => {
                            let mut names = k.into_inner().filter(|x| x.as_rule() == Rule::ident).map(|x| self.name(x));
                            let first = names.next().unwrap();
                            match names.next() {
                                Some(second) => StatPer::Pair(first, second),
                                None => StatPer::Input(first),
                            }
                        }
                        _ => StatPer::Axis(at),
                    });
                }
                Rule::stat_clip => {
                    let at = self.span(&c);
                    let mut nums =
                        c.into_inner().filter(|x| x.as_rule() == Rule::signed_number).map(|x| self.number(x));
                    clip = Some((nums.next().unwrap(), nums.next().unwrap(), at));
                }
                _ => {}
            }
        }
        let mut names = names.into_iter();
        StatDef {
            name: names.next().unwrap(),
            agg: names.next().unwrap(),
            measure: measure.unwrap(),
            test,
            per,
            clip,
            span,
        }
    }

    fn reward_setting(&self, p: Pair<'_, Rule>) -> RewardSetting {
        let span = self.span(&p);
        let s = p.into_inner().next().unwrap();
        let rule = s.as_rule();
        let mut k = kids(s);
        let kind = match rule {
            Rule::rs_advantage => RewardSettingKind::Advantage(self.name(k.next().unwrap())),
            Rule::rs_epsilon => RewardSettingKind::Epsilon(self.number(k.next().unwrap())),
            Rule::rs_clip => {
                let mut nums = k.filter(|x| x.as_rule() == Rule::signed_number).map(|x| self.number(x));
                RewardSettingKind::Clip(nums.next().unwrap(), nums.next().unwrap())
            }
            Rule::rs_penalty => RewardSettingKind::Penalty(self.expr(k.next().unwrap())),
            Rule::rs_unscored => {
                RewardSettingKind::Unscored(self.name(k.find(|x| x.as_rule() == Rule::ident).unwrap()))
            }
            Rule::rs_uncovered => RewardSettingKind::Uncovered(self.name(k.next().unwrap())),
            Rule::rs_std => RewardSettingKind::Std(self.name(k.next().unwrap())),
            r => unreachable!("reward setting {r:?}"),
        };
        RewardSetting { kind, span }
    }

    fn field_type(&self, p: Pair<'_, Rule>) -> FieldType {
        let span = self.span(&p);
        let mut k = kids(p);
        let name = self.name(k.next().unwrap());
        let ty = self.type_expr(k.next().unwrap());
        FieldType { name, ty, span }
    }

    fn criterion(&self, p: Pair<'_, Rule>) -> Criterion {
        let span = self.span(&p);
        let is_template = p.as_rule() == Rule::criterion_template;
        let mut id = None;
        let mut text = None;
        let mut attrs = Vec::new();
        let mut verifier = None;
        for c in kids(p) {
            match c.as_rule() {
                Rule::ident if !is_template => id = Some(self.name(c)),
                Rule::string => {
                    let s = self.string(c);
                    text = Some(Expr { kind: ExprKind::Str(s.value), span: s.span });
                }
                Rule::expr => text = Some(self.expr(c)),
                Rule::criterion_attr => attrs.push(self.attr(c)),
                Rule::verifier => verifier = Some(self.verifier(c)),
                _ => {}
            }
        }
        Criterion { id, text, attrs, verifier, span }
    }

    fn attr(&self, p: Pair<'_, Rule>) -> CriterionAttr {
        let span = self.span(&p);
        let a = p.into_inner().next().unwrap();
        let rule = a.as_rule();
        let mut k = kids(a).filter(|c| c.as_rule() != Rule::kw_continuous);
        let kind = match rule {
            Rule::attr_points => AttrKind::Points(self.expr(k.next().unwrap())),
            Rule::attr_weight => AttrKind::Weight(self.expr(k.next().unwrap())),
            Rule::attr_pass => AttrKind::Pass(self.expr(k.next().unwrap())),
            Rule::attr_tags => AttrKind::Tags(self.expr(k.next().unwrap())),
            Rule::attr_axis => {
                let c = k.next().unwrap();
                AttrKind::Axis(if c.as_rule() == Rule::string {
                    self.string(c)
                } else {
                    StrLit { value: c.as_str().to_string(), span: self.span(&c) }
                })
            }
            Rule::attr_continuous => AttrKind::Continuous,
            Rule::attr_ordinal => AttrKind::Ordinal(
                k.map(|l| {
                    let span = self.span(&l);
                    let mut lk = kids(l);
                    let value = self.number(lk.next().unwrap());
                    let descriptor = self.string(lk.next().unwrap());
                    Level { value, descriptor, span }
                })
                .collect(),
            ),
            Rule::attr_nominal => AttrKind::Nominal(
                k.map(|l| {
                    let span = self.span(&l);
                    let mut lk = kids(l);
                    let n = lk.next().unwrap();
                    let name = if n.as_rule() == Rule::string {
                        self.string(n)
                    } else {
                        StrLit { value: n.as_str().to_string(), span: self.span(&n) }
                    };
                    let value = self.number(lk.next().unwrap());
                    Label { name, value, span }
                })
                .collect(),
            ),
            r => unreachable!("attr {r:?}"),
        };
        CriterionAttr { kind, span }
    }

    fn verifier(&self, p: Pair<'_, Rule>) -> Verifier {
        let span = self.span(&p);
        let v = p.into_inner().next().unwrap();
        let rule = v.as_rule();
        let mut k = kids(v);
        let kind = match rule {
            Rule::verify_by => VerifierKind::Judge(self.name(k.next().unwrap())),
            Rule::verify_check => VerifierKind::Check(self.expr(k.next().unwrap())),
            Rule::verify_value => VerifierKind::Value(self.expr(k.next().unwrap())),
            Rule::verify_checks => {
                let mut checks = Vec::new();
                let mut value = None;
                for c in k {
                    let at = self.span(&c);
                    match c.as_rule() {
                        Rule::sub_check => {
                            let mut parts = kids(c);
                            let name = self.name(parts.next().unwrap());
                            let mut text = None;
                            let mut check = None;
                            for p in parts {
                                match p.as_rule() {
                                    Rule::string => text = Some(self.string(p)),
                                    _ => check = Some(self.expr(p)),
                                }
                            }
                            checks.push(SubCheck { name, text, check: check.unwrap(), span: at });
                        }
                        _ => value = Some(self.expr(kids(c).next().unwrap())),
                    }
                }
                VerifierKind::Checks { checks, value }
            }
            Rule::verify_extract => {
                let var = self.name(k.next().unwrap());
                let ty = self.type_expr(k.next().unwrap());
                let from = self.name(k.next().unwrap());
                let judge = self.name(k.next().unwrap());
                let check = self.expr(k.next().unwrap());
                VerifierKind::Extract { var, ty, from, judge, check }
            }
            r => unreachable!("verifier {r:?}"),
        };
        Verifier { kind, span }
    }

    fn example_stmt(&self, p: Pair<'_, Rule>) -> ExampleStmt {
        let span = self.span(&p);
        let s = p.into_inner().next().unwrap();
        let kind = match s.as_rule() {
            Rule::ex_bind => {
                let mut k = kids(s);
                let input = self.name(k.next().unwrap());
                let value = self.expr(k.next().unwrap());
                ExampleStmtKind::Bind { input, value }
            }
            Rule::ex_judge => {
                let mut k = kids(s).filter(|c| c.as_rule() != Rule::kw_says);
                let judge = self.name(k.next().unwrap());
                let verdicts = k
                    .map(|v| {
                        let span = self.span(&v);
                        let mut vk = kids(v).filter(|c| c.as_rule() != Rule::kw_quoting);
                        let key = self.criterion_key(vk.next().unwrap());
                        let value = vk.next().unwrap();
                        let mut lit = if value.as_rule() == Rule::verdict_samples {
                            let samples = value.into_inner().map(|x| self.verdict_lit(x)).collect();
                            VerdictLit { kind: VerdictLitKind::Samples(samples), evidence: None, span }
                        } else {
                            self.verdict_lit(value)
                        };
                        lit.evidence = vk.next().map(|q| self.string(q));
                        lit.span = span;
                        (key, lit)
                    })
                    .collect();
                ExampleStmtKind::Judge { judge, verdicts }
            }
            Rule::ex_expect => {
                let e = kids(s).next().unwrap();
                let rule = e.as_rule();
                let parts: Vec<_> = kids(e).collect();
                match rule {
                    Rule::expect_score => {
                        if parts.first().is_some_and(|p| p.as_rule() == Rule::kw_unscored) {
                            ExampleStmtKind::ExpectScore { value: None, within: None }
                        } else {
                            ExampleStmtKind::ExpectScore {
                                value: Some(self.number(parts[0].clone())),
                                within: parts.get(1).map(|w| self.number(w.clone())),
                            }
                        }
                    }
                    Rule::expect_failure => {
                        let p = parts[0].clone();
                        ExampleStmtKind::ExpectFailure(if p.as_rule() == Rule::string {
                            Some(self.string(p))
                        } else {
                            None
                        })
                    }
                    Rule::expect_group => ExampleStmtKind::ExpectGroup {
                        group: self.name(parts[0].clone()),
                        value: self.number(parts[1].clone()),
                        within: parts.get(2).map(|w| self.number(w.clone())),
                    },
                    Rule::expect_criterion => ExampleStmtKind::ExpectCriterion {
                        key: self.criterion_key(parts[0].clone()),
                        verdict: self.verdict_lit(parts[1].clone()),
                    },
                    r => unreachable!("expect {r:?}"),
                }
            }
            r => unreachable!("example stmt {r:?}"),
        };
        ExampleStmt { kind, span }
    }

    fn criterion_key(&self, p: Pair<'_, Rule>) -> CriterionKey {
        let span = self.span(&p);
        let mut k = kids(p);
        let name = self.name(k.next().unwrap());
        let index = k.next().map(|n| {
            let x = self.number(n.clone());
            if x.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&x) {
                self.error(
                    Diagnostic::error("rubric::parse::bad_index", format!("`{}` is not a criterion index", n.as_str()))
                        .with_label(self.span(&n), "here")
                        .with_help("per-instance criteria are numbered 0, 1, 2, ..."),
                );
            }
            x as u32
        });
        CriterionKey { name, index, span }
    }

    fn verdict_lit(&self, p: Pair<'_, Rule>) -> VerdictLit {
        let span = self.span(&p);
        let v = p.into_inner().next().unwrap();
        let kind = match v.as_rule() {
            Rule::verdict_unscored => {
                let reason = kids(v).find(|c| c.as_rule() == Rule::string).map(|s| self.string(s).value);
                VerdictLitKind::Unscored(reason)
            }
            Rule::kw_met => VerdictLitKind::Met,
            Rule::kw_unmet => VerdictLitKind::Unmet,
            Rule::signed_number => VerdictLitKind::Number(self.number(v)),
            Rule::string => VerdictLitKind::Label(self.string(v).value),
            Rule::bool_lit => VerdictLitKind::Bool(v.as_str() == "true"),
            r => unreachable!("verdict {r:?}"),
        };
        VerdictLit { kind, evidence: None, span }
    }

    fn type_expr(&self, p: Pair<'_, Rule>) -> TypeExpr {
        let span = self.span(&p);
        let mut k = p.into_inner();
        let atom = k.next().unwrap();
        let optional = k.next().is_some();
        let inner = atom.into_inner().next().unwrap();
        let inner_span = self.span(&inner);
        let kind = match inner.as_rule() {
            Rule::ident => TypeExprKind::Named(self.name(inner)),
            Rule::list_type => TypeExprKind::List(Box::new(self.type_expr(inner.into_inner().next().unwrap()))),
            Rule::record_type => TypeExprKind::Record(inner.into_inner().map(|f| self.field_type(f)).collect()),
            r => unreachable!("type {r:?}"),
        };
        if optional {
            TypeExpr { kind: TypeExprKind::Optional(Box::new(TypeExpr { kind, span: inner_span })), span }
        } else {
            TypeExpr { kind, span }
        }
    }

    fn expr(&self, p: Pair<'_, Rule>) -> Expr {
        let charge = self.charge_n(1, &p);
        if charge.exceeded {
            return Expr { kind: ExprKind::Null, span: self.span(&p) };
        }
        stacker::maybe_grow(RED_ZONE, NEW_SEGMENT, || self.expr_inner(p))
    }

    /// Take `n` levels of the depth budget until the returned guard drops; past the limit,
    /// report once and mark the guard `exceeded` (the caller then builds `null`).
    fn charge_n(&self, n: usize, p: &Pair<'_, Rule>) -> Charge<'_> {
        self.charge_at(n, self.span(p))
    }

    /// [`Self::charge_n`] for the expression at `span`.
    fn charge_at(&self, n: usize, span: Span) -> Charge<'_> {
        let d = self.depth.get();
        if d + n > MAX_EXPR_DEPTH {
            if !self.too_deep.replace(true) {
                self.error(
                    Diagnostic::error("rubric::parse::too_deep", "this expression is nested too deeply")
                        .with_label(span, "too deep")
                        .with_help(format!(
                            "expressions may nest at most {MAX_EXPR_DEPTH} levels (each operand of an operator chain counts); split it with `let`"
                        )),
                );
            }
            return Charge { lower: self, n: 0, exceeded: true };
        }
        self.depth.set(d + n);
        Charge { lower: self, n, exceeded: false }
    }

    fn expr_inner(&self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        match p.as_rule() {
            Rule::expr => {
                let tokens: Vec<_> = p.into_inner().collect();
                match tokens[0].as_rule() {
                    Rule::if_expr | Rule::lambda => self.expr(tokens[0].clone()),
                    _ => self.chain(&tokens, 0),
                }
            }
            Rule::primary | Rule::paren => self.expr(kids(p).next().unwrap()),
            Rule::if_expr => {
                let mut k = kids(p);
                let c = self.expr(k.next().unwrap());
                let t = self.expr(k.next().unwrap());
                let e = self.expr(k.next().unwrap());
                Expr { kind: ExprKind::If(Box::new(c), Box::new(t), Box::new(e)), span }
            }
            Rule::lambda => {
                let mut k = kids(p);
                let n = self.name(k.next().unwrap());
                let body = self.expr(k.next().unwrap());
                Expr { kind: ExprKind::Lambda(n, Box::new(body)), span }
            }
            Rule::number => Expr { kind: ExprKind::Number(self.number(p)), span },
            Rule::string => Expr { kind: ExprKind::Str(self.string(p).value), span },
            Rule::bool_lit => Expr { kind: ExprKind::Bool(p.as_str() == "true"), span },
            Rule::null_lit => Expr { kind: ExprKind::Null, span },
            Rule::ident => Expr { kind: ExprKind::Var(self.name(p)), span },
            Rule::list_lit => Expr { kind: ExprKind::List(kids(p).map(|e| self.expr(e)).collect()), span },
            Rule::record_lit => {
                let fields = kids(p)
                    .map(|f| {
                        let mut fk = f.into_inner();
                        let n = fk.next().unwrap();
                        let name = if n.as_rule() == Rule::string {
                            let s = self.string(n);
                            Name { text: s.value, span: s.span }
                        } else {
                            self.name(n)
                        };
                        (name, self.expr(fk.next().unwrap()))
                    })
                    .collect();
                Expr { kind: ExprKind::Record(fields), span }
            }
            r => unreachable!("expr rule {r:?}"),
        }
    }

    /// An operator chain (the tokens of an `expr` that is neither an `if` nor a lambda: operands,
    /// the operators between them, `not` and `-` before them, postfixes after them), split at
    /// its loosest operators first. `level` indexes [`CHAIN_LEVELS`]; past them, the tokens are
    /// one operand. Each operand of a split counts towards the depth budget.
    fn chain(&self, tokens: &[Pair<'_, Rule>], level: usize) -> Expr {
        let Some(&(ops, kind)) = CHAIN_LEVELS.get(level) else {
            return self.operand(tokens);
        };
        let at: Vec<usize> = (0..tokens.len()).filter(|&i| ops.contains(&tokens[i].as_rule())).collect();
        if at.is_empty() {
            return match kind {
                ChainLevel::Not => self.negated(tokens, level),
                _ => self.chain(tokens, level + 1),
            };
        }
        let span = self.tokens_span(tokens);
        let _charge = self.charge_at(2 * at.len() + 1, span);
        if _charge.exceeded {
            return Expr { kind: ExprKind::Null, span };
        }
        let mut parts = Vec::with_capacity(at.len() + 1);
        let mut from = 0;
        for &i in &at {
            parts.push((&tokens[from..i], Some(&tokens[i])));
            from = i + 1;
        }
        parts.push((&tokens[from..], None));
        match kind {
            ChainLevel::Compare => {
                let first = self.chain(parts[0].0, level + 1);
                let mut rest = Vec::with_capacity(at.len());
                for w in parts.windows(2) {
                    let op = w[0].1.map_or(CmpOp::Gt, |o| cmp_op(o.as_str()));
                    rest.push((op, self.chain(w[1].0, level + 1)));
                }
                Expr { kind: ExprKind::Compare(Box::new(first), rest), span }
            }
            _ => {
                let mut acc = self.chain(parts[0].0, level + 1);
                for w in parts.windows(2) {
                    let op = w[0].1.map_or(BinOp::Add, |o| bin_op(o));
                    let r = self.chain(w[1].0, level + 1);
                    let s = acc.span.to(r.span);
                    acc = Expr { kind: ExprKind::Binary(op, Box::new(acc), Box::new(r)), span: s };
                }
                acc
            }
        }
    }

    /// `not`s before the rest of the tokens, which are lowered at `level + 1`.
    fn negated(&self, tokens: &[Pair<'_, Rule>], level: usize) -> Expr {
        let n = tokens.iter().take_while(|t| t.as_rule() == Rule::not_op).count();
        if n == 0 {
            return self.chain(tokens, level + 1);
        }
        let span = self.tokens_span(tokens);
        let _charge = self.charge_at(n + 1, span);
        if _charge.exceeded {
            return Expr { kind: ExprKind::Null, span };
        }
        let mut e = self.chain(&tokens[n..], level + 1);
        for t in tokens[..n].iter().rev() {
            let s = self.span(t).to(e.span);
            e = Expr { kind: ExprKind::Unary(UnOp::Not, Box::new(e)), span: s };
        }
        e
    }

    /// One operand: `-`s, a primary, postfixes (calls, indexes, fields and methods).
    fn operand(&self, tokens: &[Pair<'_, Rule>]) -> Expr {
        let negs = tokens.iter().take_while(|t| t.as_rule() == Rule::neg_op).count();
        if negs > 0 {
            let rest = &tokens[negs..];
            let span = self.tokens_span(tokens);
            let _charge = self.charge_at(negs + 1, span);
            if _charge.exceeded {
                return Expr { kind: ExprKind::Null, span };
            }
            let mut e = self.operand(rest);
            for t in tokens[..negs].iter().rev() {
                let s = self.span(t).to(e.span);
                e = Expr { kind: ExprKind::Unary(UnOp::Neg, Box::new(e)), span: s };
            }
            return e;
        }
        let (primary, posts) = tokens.split_first().expect("an operand holds a primary");
        if posts.is_empty() {
            return self.expr(primary.clone());
        }
        let span = self.tokens_span(tokens);
        let _charge = self.charge_at(tokens.len(), span);
        if _charge.exceeded {
            return Expr { kind: ExprKind::Null, span };
        }
        let mut acc = self.expr(primary.clone());
        for post in posts {
            let ps = self.span(post);
            let s = acc.span.to(ps);
            let post = post.clone().into_inner().next().unwrap();
            acc = match post.as_rule() {
                Rule::call_args => {
                    Expr { kind: ExprKind::Call { callee: Box::new(acc), args: self.args(post) }, span: s }
                }
                Rule::index => {
                    let i = self.expr(post.into_inner().next().unwrap());
                    Expr { kind: ExprKind::Index(Box::new(acc), Box::new(i)), span: s }
                }
                _ => {
                    let mut pk = post.into_inner();
                    let name = self.name(pk.next().unwrap());
                    match pk.next() {
                        Some(args) => Expr {
                            kind: ExprKind::Method { receiver: Box::new(acc), method: name, args: self.args(args) },
                            span: s,
                        },
                        None => Expr { kind: ExprKind::Field(Box::new(acc), name), span: s },
                    }
                }
            };
        }
        acc
    }

    /// From the first token's start to the last one's end.
    fn tokens_span(&self, tokens: &[Pair<'_, Rule>]) -> Span {
        match (tokens.first(), tokens.last()) {
            (Some(a), Some(b)) => self.span(a).to(self.span(b)),
            _ => Span::new(self.file, self.base, self.base),
        }
    }

    fn args(&self, p: Pair<'_, Rule>) -> Vec<Arg> {
        p.into_inner()
            .map(|a| {
                let inner = a.into_inner().next().unwrap();
                if inner.as_rule() == Rule::named_arg {
                    let mut k = inner.into_inner();
                    let name = self.name(k.next().unwrap());
                    Arg { name: Some(name), value: self.expr(k.next().unwrap()) }
                } else {
                    Arg { name: None, value: self.expr(inner) }
                }
            })
            .collect()
    }
}

/// Decode the escapes the grammar admits (`\" \\ \n \t \r \0 \u{...}`); also returns the first `\u{...}` that is not a scalar value.
pub fn unescape_checked(s: &str) -> (String, Option<String>) {
    let mut bad = None;
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('u') => {
                let hex: String = chars.by_ref().skip(1).take_while(|c| *c != '}').collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => {
                        bad.get_or_insert(hex);
                        out.push('\u{FFFD}')
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    (out, bad)
}

/// Triple-quoted blocks: drop one leading newline and the common indentation of the lines.
pub fn dedent(s: &str) -> String {
    let s = s.strip_prefix("\r\n").or_else(|| s.strip_prefix('\n')).unwrap_or(s);
    let indent = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    let mut out: Vec<&str> = s
        .lines()
        .map(|l| match l.get(..indent) {
            Some(head) if head.bytes().all(|b| b == b' ' || b == b'\t') => &l[indent..],
            _ => l.trim_start(),
        })
        .collect();
    if s.ends_with('\n') || out.last().is_some_and(|l| l.trim().is_empty()) {
        // a closing `"""` on its own line contributes no trailing text
        if out.last().is_some_and(|l| l.trim().is_empty()) {
            out.pop();
        }
    }
    out.join("\n")
}
