//! Stage 1, AST → text: the canonical pretty-printer. Its output parses back (through
//! `syntax::parser`) to the same tree up to spans, which the print/parse property tests in
//! `tests/props.rs` check; `erase_spans` is the helper they compare trees with.

use super::ast::*;
use super::parser::dedent;
use crate::source::Span;

const INDENT: &str = "  ";

/// Words that can never be identifiers (rule `keyword` in `grammar/rubric.pest`).
#[rustfmt::skip]
pub const KEYWORDS: &[&str] = &[
    "rubric", "module", "import", "input", "judge", "gate", "criterion", "criteria", "tier", "group", "let", "fn",
    "score", "example", "if", "then", "else", "true", "false", "and", "or", "not", "in", "by", "check", "extract",
    "from", "each", "null", "reward",
];

/// Print a whole file in canonical form.
pub fn print_file(f: &File) -> String {
    let mut p = Printer::default();
    p.file(f);
    p.out
}

/// Print a whole file in canonical form, keeping the comments of `src` (the text `f` was parsed
/// from). Each comment is attached to a node of the tree: a comment after code on its line
/// trails the last item, setting, criterion or example line that ends on that line; any other
/// comment leads the next one in the same block (or, after a block's last element, stays at the
/// end of that block; after the last item, at the end of the file). A blank line after a
/// comment in the source is kept. Attached comments print where their node prints, so
/// formatting twice gives the same text, and no comment is lost: one inside an expression that
/// spans lines moves before the next node.
pub fn print_file_with_comments(f: &File, src: &str) -> String {
    let mut p = Printer { notes: attach(f, src), ..Printer::default() };
    p.file(f);
    p.out
}

/// Why [`format_source`] gave no text.
#[derive(Debug, Clone, PartialEq)]
pub enum FormatError {
    /// The source does not parse: its syntax diagnostics.
    Parse(Vec<crate::diag::Diagnostic>),
    /// The printed text would have fewer comments than the source (a printer bug).
    LosesComment,
    /// The printed text would parse to another tree, or not at all (a printer bug).
    ChangesTree,
}

/// `rubric fmt` of one text (file `file` of its source map): the canonical layout with the
/// comments kept, or why not. Never returns text that would lose a comment or change the tree:
/// the output is parsed again and compared with the source's tree, spans erased. Shared by
/// `rubric fmt` and the language server's formatting request.
pub fn format_source(file: crate::source::FileId, text: &str) -> Result<String, FormatError> {
    let parsed = super::parse_file(file, text);
    if !parsed.diagnostics.is_empty() {
        return Err(FormatError::Parse(parsed.diagnostics));
    }
    let out = print_file_with_comments(&parsed.file, text);
    if super::comment_spans(&out).len() != super::comment_spans(text).len() {
        return Err(FormatError::LosesComment);
    }
    let again = super::parse_file(file, &out);
    let (mut a, mut b) = (parsed.file, again.file);
    erase_spans(&mut a);
    erase_spans(&mut b);
    if !again.diagnostics.is_empty() || a != b {
        return Err(FormatError::ChangesTree);
    }
    Ok(out)
}

/// A comment as printed: its text, and whether a blank line followed it in the source.
#[derive(Debug, Clone, Default)]
struct Note {
    text: String,
    blank_after: bool,
}

/// Where each comment of a file goes, by the span (start, end) of the node it is attached to.
#[derive(Debug, Default)]
struct Notes {
    before_header: Vec<Note>,
    leading: std::collections::HashMap<(u32, u32), Vec<Note>>,
    trailing: std::collections::HashMap<(u32, u32), Vec<String>>,
    /// After a block's last element, before its `}`.
    dangling: std::collections::HashMap<(u32, u32), Vec<Note>>,
    end: Vec<Note>,
}

/// A node comments attach to: an item, or an element of a block (a judge or reward setting, a
/// criterion, a group, an example line); blocks have their elements as children.
struct Anchor {
    key: (u32, u32),
    /// Where its code ends: the parser's span may run on over the blanks and comments after it.
    end: u32,
    block: bool,
    children: Vec<Anchor>,
}

/// `end` moved back over the whitespace and the comments (`comments`, in order) before it, to
/// the end of the code of a node that starts at `start`.
fn code_end(src: &str, comments: &[(usize, usize)], start: u32, end: u32) -> u32 {
    let (start, mut end) = (start as usize, (end as usize).min(src.len()));
    loop {
        let trimmed = start + src[start..end].trim_end().len();
        match comments.iter().rev().find(|c| c.1 == trimmed && c.0 >= start) {
            Some(c) => end = c.0,
            None => return trimmed as u32,
        }
    }
}

/// Set every anchor's `end` to the end of its code.
fn settle(a: &mut Anchor, src: &str, comments: &[(usize, usize)]) {
    a.end = code_end(src, comments, a.key.0, a.key.1);
    for c in &mut a.children {
        settle(c, src, comments);
    }
}

fn key(s: Span) -> (u32, u32) {
    (s.start, s.end)
}

fn leaf(s: Span) -> Anchor {
    Anchor { key: key(s), end: s.end, block: false, children: vec![] }
}

fn group_anchor(g: &Group) -> Anchor {
    let children = g
        .members
        .iter()
        .map(|m| match m {
            GroupMember::Criterion(c) => leaf(c.span),
            GroupMember::Group(g) => group_anchor(g),
        })
        .collect();
    Anchor { key: key(g.span), end: g.span.end, block: true, children }
}

fn item_anchor(item: &Item) -> Anchor {
    let block = |span: Span, children: Vec<Anchor>| Anchor { key: key(span), end: span.end, block: true, children };
    match item {
        Item::Judge(j) | Item::Generator(j) => block(j.span, j.settings.iter().map(|s| leaf(s.span)).collect()),
        Item::Criteria(b) => block(
            b.span,
            match &b.body {
                CriteriaBody::Static(cs) => cs.iter().map(|c| leaf(c.span)).collect(),
                CriteriaBody::Each { template, .. } => vec![leaf(template.span)],
            },
        ),
        Item::Tier(t) => block(t.span, t.criteria.iter().map(|c| leaf(c.span)).collect()),
        Item::Group(g) => group_anchor(g),
        Item::Example(e) => block(e.span, e.stmts.iter().map(|s| leaf(s.span)).collect()),
        Item::Reward(r) => block(r.span, r.settings.iter().map(|s| leaf(s.span)).collect()),
        other => leaf(other.span()),
    }
}

/// The innermost block holding offset `at`, and its children (the roots when none).
fn innermost(roots: &[Anchor], at: u32) -> (Option<&Anchor>, &[Anchor]) {
    let mut found: Option<&Anchor> = None;
    let mut level = roots;
    while let Some(a) = level.iter().find(|a| a.block && a.key.0 < at && at < a.end) {
        found = Some(a);
        level = &a.children;
    }
    (found, level)
}

/// The node ending last at or before `at` but not before `from` (the comment's line), deepest
/// on a tie.
fn ending_on_line(roots: &[Anchor], from: u32, at: u32) -> Option<(u32, u32)> {
    let mut best: Option<((u32, u32), u32)> = None;
    let mut stack: Vec<&Anchor> = roots.iter().collect();
    while let Some(a) = stack.pop() {
        if a.end >= from && a.end <= at && best.is_none_or(|(_, e)| a.end >= e) {
            best = Some((a.key, a.end));
        }
        stack.extend(a.children.iter());
    }
    best.map(|(k, _)| k)
}

fn attach(f: &File, src: &str) -> Notes {
    let comments = super::comment_spans(src);
    let mut roots: Vec<Anchor> = f.items.iter().map(item_anchor).collect();
    for r in &mut roots {
        settle(r, src, &comments);
    }
    let mut notes = Notes::default();
    for &(s, e) in &comments {
        let text = src[s..e].trim_end().to_string();
        let rest = &src[e..];
        let gap = &rest[..rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len())];
        let blank_after = gap.matches('\n').count() >= 2;
        let line_start = src[..s].rfind('\n').map_or(0, |i| i + 1);
        let (s32, e32) = (s as u32, e as u32);
        if !src[line_start..s].trim().is_empty() {
            if let Some(k) = ending_on_line(&roots, line_start as u32, s32) {
                notes.trailing.entry(k).or_default().push(text);
                continue;
            }
        }
        let note = Note { text, blank_after };
        if f.header.as_ref().is_some_and(|h| e32 <= h.span.start) {
            notes.before_header.push(note);
            continue;
        }
        let (block, level) = innermost(&roots, s32);
        match (level.iter().find(|a| a.key.0 >= e32), block) {
            (Some(next), _) => notes.leading.entry(next.key).or_default().push(note),
            (None, Some(b)) => notes.dangling.entry(b.key).or_default().push(note),
            (None, None) => notes.end.push(note),
        }
    }
    notes
}

/// Print one expression on one line (block strings aside), parenthesised only where the
/// grammar needs it.
pub fn print_expr(e: &Expr) -> String {
    let mut p = Printer::default();
    p.expr(e, Prec::Lowest);
    p.out
}

/// Print a type expression: `Text`, `List[Number]?`, `{a: Text, b: Bool}`.
pub fn print_type(t: &TypeExpr) -> String {
    let mut p = Printer::default();
    p.ty(t);
    p.out
}

/// A string literal with the escapes the grammar admits: `\" \\ \n \t \r \0` and `\u{X}` for
/// the other control characters; every other character is printed as is.
pub fn print_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number in the grammar's `number` form (with a leading `-` when negative, for the places
/// that take a `signed_number`) that parses back to the identical `f64`. Shortest round-trip
/// digits; an exponent only for very large or very small magnitudes. Infinity (which a literal
/// like `1e999` produces) prints as `1e999`; NaN cannot come from the parser and prints `nan`.
pub fn print_number(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "1e999".into() } else { "-1e999".into() };
    }
    let a = n.abs();
    if a == 0.0 || (1e-5..1e16).contains(&a) {
        format!("{n}")
    } else {
        format!("{n:e}")
    }
}

/// Is `s` an identifier (`ident` in the grammar: not a keyword)?
pub fn is_ident(s: &str) -> bool {
    is_field_name(s) && !KEYWORDS.contains(&s)
}

/// Is `s` a field name (`field_name`: keywords allowed)?
pub fn is_field_name(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A triple-quoted block for a multi-line string, when one reads back (through the parser's
/// `dedent`) to exactly `s`; the content is indented one step deeper than `indent`.
fn block_string(s: &str, indent: &str) -> Option<String> {
    if !s.contains('\n') || s.contains("\"\"\"") || s.ends_with('"') {
        return None;
    }
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return None;
    }
    let inner_indent = format!("{indent}{INDENT}");
    let mut inner = String::from("\n");
    for line in s.split('\n') {
        if !line.is_empty() {
            inner.push_str(&inner_indent);
        }
        inner.push_str(line);
        inner.push('\n');
    }
    inner.push_str(&inner_indent);
    (dedent(&inner) == s).then(|| format!("\"\"\"{inner}\"\"\""))
}

/// Binding strength of an expression form, weakest first (`grammar/rubric.pest`, `expr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    /// `if`/`then`/`else`, lambdas: only where a whole `expr` is expected.
    Lowest,
    Coalesce,
    Or,
    And,
    Not,
    Compare,
    Add,
    Mul,
    Neg,
    Postfix,
    Atom,
}

impl Prec {
    fn next(self) -> Prec {
        match self {
            Prec::Lowest => Prec::Coalesce,
            Prec::Coalesce => Prec::Or,
            Prec::Or => Prec::And,
            Prec::And => Prec::Not,
            Prec::Not => Prec::Compare,
            Prec::Compare => Prec::Add,
            Prec::Add => Prec::Mul,
            Prec::Mul => Prec::Neg,
            Prec::Neg => Prec::Postfix,
            Prec::Postfix | Prec::Atom => Prec::Atom,
        }
    }
}

fn bin_prec(op: BinOp) -> Prec {
    match op {
        BinOp::Coalesce => Prec::Coalesce,
        BinOp::Or => Prec::Or,
        BinOp::And => Prec::And,
        BinOp::Add | BinOp::Sub => Prec::Add,
        BinOp::Mul | BinOp::Div | BinOp::Rem => Prec::Mul,
    }
}

fn prec(e: &Expr) -> Prec {
    match &e.kind {
        ExprKind::If(..) | ExprKind::Lambda(..) => Prec::Lowest,
        ExprKind::Binary(op, ..) => bin_prec(*op),
        ExprKind::Unary(UnOp::Not, _) => Prec::Not,
        ExprKind::Compare(..) => Prec::Compare,
        ExprKind::Unary(UnOp::Neg, _) => Prec::Neg,
        // not produced by the parser (literals have no sign), printed as `-n`
        ExprKind::Number(n) if n.is_sign_negative() => Prec::Neg,
        ExprKind::Field(..) | ExprKind::Index(..) | ExprKind::Call { .. } | ExprKind::Method { .. } => Prec::Postfix,
        _ => Prec::Atom,
    }
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: String,
    /// The comments to keep (`print_file_with_comments`); empty otherwise.
    notes: Notes,
}

#[derive(PartialEq)]
enum Layout {
    /// One line, no braces: consecutive items of the same kind need no blank line between them.
    Line(&'static str),
    Block,
}

fn layout(item: &Item) -> Layout {
    match item {
        Item::Import(_) => Layout::Line("import"),
        Item::Input(_) => Layout::Line("input"),
        Item::Gate(_) => Layout::Line("gate"),
        Item::Criterion(_) => Layout::Line("criterion"),
        Item::Let(_) => Layout::Line("let"),
        Item::Fn(_) => Layout::Line("fn"),
        Item::Score(_) => Layout::Line("score"),
        Item::Stat(_) => Layout::Line("stat"),
        Item::Judge(_)
        | Item::Generator(_)
        | Item::Criteria(_)
        | Item::Tier(_)
        | Item::Group(_)
        | Item::Example(_)
        | Item::Reward(_) => Layout::Block,
    }
}

impl Printer {
    fn w(&mut self, s: &str) {
        self.out.push_str(s);
    }

    /// Print notes on their own lines at the current indent.
    fn notes(&mut self, notes: Vec<Note>) {
        for n in notes {
            self.line_start();
            self.w(&n.text);
            self.nl();
            if n.blank_after {
                self.nl();
            }
        }
    }

    /// The comments leading the node at `span`.
    fn lead(&mut self, span: Span) {
        let notes = self.notes.leading.remove(&key(span)).unwrap_or_default();
        self.notes(notes);
    }

    /// The comments trailing the node at `span`, on the line just written (before its newline
    /// when `before_newline`).
    fn trail(&mut self, span: Span, before_newline: bool) {
        let Some(texts) = self.notes.trailing.remove(&key(span)) else { return };
        let newline = before_newline && self.out.ends_with('\n');
        if newline {
            self.out.pop();
        }
        for t in texts {
            self.w("  ");
            self.w(&t);
        }
        if newline {
            self.nl();
        }
    }

    fn line_start(&mut self) {
        let indent = self.indent.clone();
        self.w(&indent);
    }

    fn nl(&mut self) {
        self.out.push('\n');
    }

    fn push_indent(&mut self) {
        self.indent.push_str(INDENT);
    }

    fn pop_indent(&mut self) {
        self.indent.truncate(self.indent.len() - INDENT.len());
    }

    fn str_lit(&mut self, s: &str) {
        self.w(&print_string(s));
    }

    /// A string that may print as a triple-quoted block (a multi-line string: judge templates,
    /// example responses, JSON written out in a call).
    fn block_or_str(&mut self, s: &str) {
        match block_string(s, &self.indent) {
            Some(b) => self.w(&b),
            None => self.str_lit(s),
        }
    }

    /// An identifier-like word where the grammar takes `ident | string` (axes, labels).
    fn ident_or_str(&mut self, s: &str) {
        if is_ident(s) {
            self.w(s);
        } else {
            self.str_lit(s);
        }
    }

    fn num(&mut self, n: f64) {
        self.w(&print_number(n));
    }

    // ------------------------------------------------------------------ files and items

    fn file(&mut self, f: &File) {
        let before = std::mem::take(&mut self.notes.before_header);
        self.notes(before);
        if let Some(h) = &f.header {
            match h.kind {
                HeaderKind::Rubric => {
                    self.w("rubric ");
                    self.w(&h.name.text);
                    if let Some(v) = &h.version {
                        self.w(" @ ");
                        self.w(&v.value);
                    }
                }
                HeaderKind::Module => {
                    self.w("module ");
                    self.w(&h.name.text);
                }
            }
            if let Some(t) = &h.title {
                self.w(" ");
                self.str_lit(&t.value);
            }
            self.nl();
        }
        let mut prev: Option<Layout> = None;
        for (i, item) in f.items.iter().enumerate() {
            let this = layout(item);
            let tight = matches!((&prev, &this), (Some(Layout::Line(a)), Layout::Line(b)) if a == b);
            if (i > 0 || f.header.is_some()) && !tight {
                self.nl();
            }
            self.lead(item.span());
            self.item(item);
            self.trail(item.span(), true);
            prev = Some(this);
        }
        let end = std::mem::take(&mut self.notes.end);
        if !end.is_empty() {
            if !self.out.is_empty() {
                self.nl();
            }
            self.notes(end);
        }
    }

    fn item(&mut self, item: &Item) {
        self.line_start();
        match item {
            Item::Import(i) => {
                self.w("import ");
                self.w(&i.path.text);
                if let Some(a) = &i.alias {
                    self.w(" as ");
                    self.w(&a.text);
                }
                self.nl();
            }
            Item::Input(i) => {
                self.w("input ");
                self.w(&i.name.text);
                self.w(": ");
                self.ty(&i.ty);
                if let Some(f) = &i.field {
                    self.w(" from ");
                    self.str_lit(&f.value);
                }
                if let Some(d) = &i.default {
                    self.w(" = ");
                    self.expr(d, Prec::Lowest);
                }
                self.nl();
            }
            Item::Judge(j) => self.judge("judge ", j),
            Item::Generator(j) => self.judge("generator ", j),
            Item::Gate(g) => {
                self.w("gate ");
                self.w(&g.name.text);
                self.w(": ");
                // `if` reads better in parentheses before the gate's own `else`
                self.expr(&g.cond, Prec::Coalesce);
                self.w(" else ");
                match &g.action {
                    GateAction::Score(e) => {
                        self.w("score ");
                        self.expr(e, Prec::Lowest);
                    }
                    GateAction::Cap(e) => {
                        self.w("cap ");
                        self.expr(e, Prec::Lowest);
                    }
                }
                if let Some(r) = &g.reason {
                    self.w(" reason ");
                    self.str_lit(&r.value);
                }
                self.nl();
            }
            Item::Criterion(c) => {
                self.criterion(c);
                self.nl();
            }
            Item::Criteria(b) => self.criteria_block(b),
            Item::Tier(t) => {
                self.w("tier ");
                self.w(&t.name.text);
                self.default_judge(&t.default_judge);
                self.criteria_body(t.span, &t.criteria);
            }
            Item::Group(g) => self.group(g),
            Item::Let(l) => {
                self.w("let ");
                self.w(&l.name.text);
                if let Some(t) = &l.ty {
                    self.w(": ");
                    self.ty(t);
                }
                self.w(" = ");
                self.expr(&l.value, Prec::Lowest);
                self.nl();
            }
            Item::Fn(f) => {
                self.w("fn ");
                self.w(&f.name.text);
                self.w("(");
                for (i, p) in f.params.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.w(&p.name.text);
                    self.w(": ");
                    self.ty(&p.ty);
                    if let Some(d) = &p.default {
                        self.w(" = ");
                        self.expr(d, Prec::Lowest);
                    }
                }
                self.w(") -> ");
                self.ty(&f.ret);
                self.w(" = ");
                self.expr(&f.body, Prec::Lowest);
                self.nl();
            }
            Item::Score(s) => {
                self.w("score ");
                if let Some(n) = &s.name {
                    self.w(&n.text);
                    self.w(" ");
                }
                self.w("= ");
                self.expr(&s.expr, Prec::Lowest);
                self.nl();
            }
            Item::Example(e) => self.example(e),
            Item::Reward(r) => {
                self.w("reward");
                self.block(r.span, &r.settings, |s| s.span, |p, s| p.reward_setting(&s.kind));
            }
            Item::Stat(st) => {
                self.stat(st);
                self.nl();
            }
        }
    }

    fn stat(&mut self, st: &StatDef) {
        self.w("stat ");
        self.w(&st.name.text);
        self.w(" = ");
        self.w(&st.agg.text);
        self.w("(");
        match &st.measure {
            StatMeasure::Score(_) => self.w("score"),
            StatMeasure::Criterion(n) => self.w(&n.text),
            StatMeasure::Call { func, set } => {
                self.w(&func.text);
                self.w("(");
                self.w(&set.text);
                self.w(")");
            }
        }
        if let Some((op, n, _)) = &st.test {
            self.w(" ");
            self.w(op.symbol());
            self.w(" ");
            self.num(*n);
        }
        self.w(")");
        match &st.per {
            None => {}
            Some(StatPer::Tag(prefix, _)) => {
                self.w(" per tag");
                if let Some(p) = prefix {
                    self.w(" ");
                    self.str_lit(&p.value);
                }
            }
            Some(StatPer::Axis(_)) => self.w(" per axis"),
            Some(StatPer::Input(n)) => {
                self.w(" per input ");
                self.w(&n.text);
            }
            Some(StatPer::Pair(first, second)) => {
                self.w(" per input ");
                self.w(&first.text);
                self.w(", ");
                self.w(&second.text);
            }
        }
        if let Some((lo, hi, _)) = st.clip {
            self.setting_num(" clip", lo);
            self.w(", ");
            self.num(hi);
        }
    }

    fn reward_setting(&mut self, s: &RewardSettingKind) {
        match s {
            RewardSettingKind::Advantage(n) => {
                self.w("advantage ");
                self.w(&n.text);
            }
            RewardSettingKind::Epsilon(n) => self.setting_num("epsilon", *n),
            RewardSettingKind::Clip(lo, hi) => {
                self.setting_num("clip", *lo);
                self.w(", ");
                self.num(*hi);
            }
            RewardSettingKind::Penalty(e) => {
                self.w("penalty ");
                self.expr(e, Prec::Lowest);
            }
            RewardSettingKind::Unscored(n) => {
                self.w("unscored ");
                self.w(&n.text);
            }
            RewardSettingKind::Uncovered(n) => {
                self.w("uncovered ");
                self.w(&n.text);
            }
            RewardSettingKind::Std(n) => {
                self.w("std ");
                self.w(&n.text);
            }
        }
    }

    /// ` {` + lines + `}` (or ` {}` when empty); the caller has written the block's head.
    /// A braced block of `container` (its span), one element a line; each element's comments
    /// around it (`span` gives its span), and the block's last comments before its `}`.
    fn block<T>(&mut self, container: Span, xs: &[T], span: impl Fn(&T) -> Span, mut each: impl FnMut(&mut Self, &T)) {
        let dangling = self.notes.dangling.remove(&key(container)).unwrap_or_default();
        if xs.is_empty() && dangling.is_empty() {
            self.w(" {}");
            self.nl();
            return;
        }
        self.w(" {");
        self.nl();
        self.push_indent();
        for x in xs {
            self.lead(span(x));
            self.line_start();
            each(self, x);
            self.trail(span(x), false);
            self.nl();
        }
        self.notes(dangling);
        self.pop_indent();
        self.line_start();
        self.w("}");
        self.nl();
    }

    fn judge(&mut self, keyword: &str, j: &Judge) {
        self.w(keyword);
        self.w(&j.name.text);
        self.block(j.span, &j.settings, |s| s.span, |p, s| p.judge_setting(&s.kind));
    }

    fn judge_setting(&mut self, s: &JudgeSettingKind) {
        match s {
            JudgeSettingKind::Model(m) => {
                self.w("model ");
                self.str_lit(&m.value);
            }
            JudgeSettingKind::Temperature(n) => self.setting_num("temperature", *n),
            JudgeSettingKind::TopP(n) => self.setting_num("top_p", *n),
            JudgeSettingKind::MaxTokens(n) => self.setting_num("max_tokens", *n),
            JudgeSettingKind::Seed(n) => self.setting_num("seed", *n),
            JudgeSettingKind::Samples(n) => self.setting_num("samples", *n),
            JudgeSettingKind::MinSamples(n) => self.setting_num("min_samples", *n),
            JudgeSettingKind::PerCall(n) => self.setting_num("per_call", *n),
            JudgeSettingKind::Vote(v) => {
                self.w("vote ");
                self.w(&v.text);
            }
            JudgeSettingKind::Sees(names) => self.name_list("sees", names),
            JudgeSettingKind::Returns { kind, fields } => {
                self.w("returns ");
                self.w(&kind.text);
                if !fields.is_empty() {
                    self.w("(");
                    self.field_types(fields);
                    self.w(")");
                }
            }
            JudgeSettingKind::EvidenceQuote(n) => {
                self.w("evidence must quote ");
                self.w(&n.text);
            }
            JudgeSettingKind::Template(t) => {
                self.w("template ");
                self.block_or_str(&t.value);
            }
            JudgeSettingKind::System(t) => {
                self.w("system ");
                self.block_or_str(&t.value);
            }
            JudgeSettingKind::Scoring(n) => {
                self.w("scoring ");
                self.w(&n.text);
            }
            JudgeSettingKind::Local(dir) => {
                self.w("local ");
                self.str_lit(&dir.value);
            }
            JudgeSettingKind::Calibration(file) => {
                self.w("calibration ");
                self.str_lit(&file.value);
            }
            JudgeSettingKind::Order(n) => {
                self.w("order ");
                self.w(&n.text);
            }
            JudgeSettingKind::Compares(a, b) => {
                self.w("compares ");
                self.w(&a.text);
                self.w(", ");
                self.w(&b.text);
            }
            JudgeSettingKind::Inconsistent(n) => {
                self.w("inconsistent ");
                self.w(&n.text);
            }
            JudgeSettingKind::Rollouts(n) => {
                self.w("rollouts ");
                self.w(&n.text);
            }
            JudgeSettingKind::Fills(n) => {
                self.w("fills ");
                self.w(&n.text);
            }
            JudgeSettingKind::ReasoningEffort(n) => {
                self.w("reasoning_effort ");
                self.w(&n.text);
            }
            JudgeSettingKind::Cascade(names) => self.name_list("cascade", names),
            JudgeSettingKind::Escalate(whens) => {
                self.w("escalate ");
                for (i, w) in whens.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    match w {
                        EscalateWhen::Between(lo, hi, _) => {
                            self.w("between ");
                            self.num(*lo);
                            self.w(" and ");
                            self.num(*hi);
                        }
                        EscalateWhen::Named(n) => self.w(&n.text),
                    }
                }
            }
            JudgeSettingKind::Jury(names) => self.name_list("jury", names),
            JudgeSettingKind::Weights(ws) => {
                self.w("weights ");
                for (i, w) in ws.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.num(*w);
                }
            }
        }
    }

    /// `word a, b, c` (`sees`, `jury`, `cascade`).
    fn name_list(&mut self, word: &str, names: &[Name]) {
        self.w(word);
        self.w(" ");
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                self.w(", ");
            }
            self.w(&n.text);
        }
    }

    fn setting_num(&mut self, word: &str, n: f64) {
        self.w(word);
        self.w(" ");
        self.num(n);
    }

    fn default_judge(&mut self, j: &Option<Name>) {
        if let Some(j) = j {
            self.w(" by ");
            self.w(&j.text);
        }
    }

    fn criteria_body(&mut self, container: Span, cs: &[Criterion]) {
        self.block(container, cs, |c| c.span, |p, c| p.criterion(c));
    }

    fn criteria_block(&mut self, b: &CriteriaBlock) {
        self.w("criteria ");
        self.w(&b.name.text);
        match &b.body {
            CriteriaBody::Static(cs) => {
                self.default_judge(&b.default_judge);
                self.criteria_body(b.span, cs);
            }
            CriteriaBody::Each { var, list, template, shows } => {
                self.w(" each ");
                self.w(&var.text);
                self.w(" in ");
                self.expr(list, Prec::Lowest);
                self.default_judge(&b.default_judge);
                for (i, item) in shows.iter().enumerate() {
                    self.w(if i == 0 { " shows " } else { ", " });
                    self.w(&item.name.text);
                    if let Some(e) = &item.expr {
                        self.w(" = ");
                        self.expr(e, Prec::Lowest);
                    }
                }
                self.criteria_body(b.span, std::slice::from_ref(template));
            }
        }
    }

    fn group(&mut self, g: &Group) {
        self.w("group ");
        self.w(&g.name.text);
        if let Some(w) = &g.weight {
            self.w(" weight ");
            self.expr(w, Prec::Lowest);
        }
        self.default_judge(&g.default_judge);
        let span_of = |m: &GroupMember| match m {
            GroupMember::Criterion(c) => c.span,
            GroupMember::Group(g) => g.span,
        };
        self.block(g.span, &g.members, span_of, |p, m| match m {
            GroupMember::Criterion(c) => p.criterion(c),
            GroupMember::Group(g) => {
                p.group(g);
                // `group` ends its own last line; `block` adds the newline
                p.out.pop();
            }
        });
    }

    /// One criterion on one line (no newline): `criterion id "text" attrs... verifier`.
    fn criterion(&mut self, c: &Criterion) {
        self.w("criterion");
        if let Some(id) = &c.id {
            self.w(" ");
            self.w(&id.text);
        }
        match (&c.id, &c.text) {
            (Some(_), Some(Expr { kind: ExprKind::Str(s), .. })) => {
                self.w(" ");
                self.str_lit(s);
            }
            (_, Some(e)) => {
                self.w(" ");
                self.expr(e, Prec::Lowest);
            }
            (_, None) => {}
        }
        for a in &c.attrs {
            self.w(" ");
            self.attr(&a.kind);
        }
        if let Some(v) = &c.verifier {
            self.w(" ");
            self.verifier(&v.kind);
        }
    }

    fn attr(&mut self, a: &AttrKind) {
        match a {
            AttrKind::Points(e) => {
                self.w("points ");
                self.expr(e, Prec::Lowest);
            }
            AttrKind::Weight(e) => {
                self.w("weight ");
                self.expr(e, Prec::Lowest);
            }
            AttrKind::Axis(s) => {
                self.w("axis ");
                self.ident_or_str(&s.value);
            }
            AttrKind::Tags(e) => {
                self.w("tags ");
                self.expr(e, Prec::Lowest);
            }
            AttrKind::Ordinal(levels) => {
                self.w("ordinal [");
                for (i, l) in levels.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.num(l.value);
                    self.w(" ");
                    self.str_lit(&l.descriptor.value);
                }
                self.w("]");
            }
            AttrKind::Nominal(labels) => {
                self.w("nominal { ");
                for (i, l) in labels.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.ident_or_str(&l.name.value);
                    self.w(": ");
                    self.num(l.value);
                }
                self.w(" }");
            }
            AttrKind::Continuous => self.w("continuous"),
            AttrKind::Pass(e) => {
                self.w("pass ");
                self.expr(e, Prec::Lowest);
            }
        }
    }

    fn verifier(&mut self, v: &VerifierKind) {
        match v {
            VerifierKind::Judge(j) => {
                self.w("by ");
                self.w(&j.text);
            }
            VerifierKind::Check(e) => {
                self.w("check ");
                self.expr(e, Prec::Lowest);
            }
            VerifierKind::Value(e) => {
                self.w("value ");
                self.expr(e, Prec::Lowest);
            }
            VerifierKind::Extract { var, ty, from, judge, check } => {
                self.w("extract ");
                self.w(&var.text);
                self.w(": ");
                self.ty(ty);
                self.w(" from ");
                self.w(&from.text);
                self.w(" by ");
                self.w(&judge.text);
                self.w(" check ");
                self.expr(check, Prec::Lowest);
            }
            VerifierKind::Checks { checks, value } => {
                self.w("{");
                self.nl();
                self.push_indent();
                for c in checks {
                    self.line_start();
                    self.w("check ");
                    self.w(&c.name.text);
                    if let Some(t) = &c.text {
                        self.w(" ");
                        self.str_lit(&t.value);
                    }
                    self.w(": ");
                    self.expr(&c.check, Prec::Lowest);
                    self.nl();
                }
                if let Some(v) = value {
                    self.line_start();
                    self.w("value ");
                    self.expr(v, Prec::Lowest);
                    self.nl();
                }
                self.pop_indent();
                self.line_start();
                self.w("}");
            }
        }
    }

    fn example(&mut self, e: &Example) {
        self.w("example ");
        self.str_lit(&e.name.value);
        self.block(e.span, &e.stmts, |s| s.span, |p, s| p.example_stmt(&s.kind));
    }

    fn example_stmt(&mut self, s: &ExampleStmtKind) {
        match s {
            ExampleStmtKind::Bind { input, value } => {
                self.w(&input.text);
                self.w(" ");
                match &value.kind {
                    ExprKind::Str(s) => self.block_or_str(s),
                    _ => self.expr(value, Prec::Lowest),
                }
            }
            ExampleStmtKind::Judge { judge, verdicts } => {
                self.w("judge ");
                self.w(&judge.text);
                self.w(" says ");
                for (i, (key, v)) in verdicts.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.criterion_key(key);
                    self.w(" = ");
                    self.verdict(&v.kind);
                    if let Some(e) = &v.evidence {
                        self.w(" quoting ");
                        self.str_lit(&e.value);
                    }
                }
            }
            ExampleStmtKind::ExpectScore { value, within } => {
                self.w("expect score ");
                match value {
                    None => self.w("unscored"),
                    Some(v) => {
                        self.num(*v);
                        self.within(*within);
                    }
                }
            }
            ExampleStmtKind::ExpectFailure(class) => {
                self.w("expect failure ");
                match class {
                    Some(c) => self.str_lit(&c.value),
                    None => self.w("null"),
                }
            }
            ExampleStmtKind::ExpectGroup { group, value, within } => {
                self.w("expect group ");
                self.w(&group.text);
                self.w(" = ");
                self.num(*value);
                self.within(*within);
            }
            ExampleStmtKind::ExpectCriterion { key, verdict } => {
                self.w("expect ");
                self.criterion_key(key);
                self.w(" = ");
                self.verdict(&verdict.kind);
            }
        }
    }

    fn within(&mut self, within: Option<f64>) {
        if let Some(w) = within {
            self.w(" within ");
            self.num(w);
        }
    }

    fn criterion_key(&mut self, k: &CriterionKey) {
        self.w(&k.name.text);
        if let Some(i) = k.index {
            self.w(&format!("[{i}]"));
        }
    }

    fn verdict(&mut self, v: &VerdictLitKind) {
        match v {
            VerdictLitKind::Met => self.w("met"),
            VerdictLitKind::Unmet => self.w("unmet"),
            VerdictLitKind::Unscored(None) => self.w("unscored"),
            VerdictLitKind::Unscored(Some(r)) => {
                self.w("unscored(");
                self.str_lit(r);
                self.w(")");
            }
            VerdictLitKind::Number(n) => self.num(*n),
            VerdictLitKind::Label(l) => self.str_lit(l),
            VerdictLitKind::Bool(b) => self.w(if *b { "true" } else { "false" }),
            VerdictLitKind::Samples(xs) => {
                self.w("[");
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.verdict(&x.kind);
                }
                self.w("]");
            }
        }
    }

    // ------------------------------------------------------------------ types

    fn ty(&mut self, t: &TypeExpr) {
        match &t.kind {
            TypeExprKind::Named(n) => self.w(&n.text),
            TypeExprKind::List(t) => {
                self.w("List[");
                self.ty(t);
                self.w("]");
            }
            TypeExprKind::Record(fields) => {
                self.w("{");
                self.field_types(fields);
                self.w("}");
            }
            TypeExprKind::Optional(t) => {
                self.ty(t);
                self.w("?");
            }
        }
    }

    fn field_types(&mut self, fields: &[FieldType]) {
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                self.w(", ");
            }
            self.field_name(&f.name.text);
            self.w(": ");
            self.ty(&f.ty);
        }
    }

    /// A field name where the grammar takes `field_name` only (types, `returns`).
    fn field_name(&mut self, s: &str) {
        self.w(s);
    }

    // ------------------------------------------------------------------ expressions

    /// Print `e` where the grammar expects an expression of strength at least `min`.
    fn expr(&mut self, e: &Expr, min: Prec) {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.expr_prec(e, min))
    }

    fn expr_prec(&mut self, e: &Expr, min: Prec) {
        if prec(e) < min {
            self.w("(");
            self.expr_bare(e);
            self.w(")");
        } else {
            self.expr_bare(e);
        }
    }

    fn expr_bare(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Number(n) => self.num(*n),
            ExprKind::Str(s) => self.block_or_str(s),
            ExprKind::Bool(b) => self.w(if *b { "true" } else { "false" }),
            ExprKind::Null => self.w("null"),
            ExprKind::List(xs) => {
                self.w("[");
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    self.expr(x, Prec::Lowest);
                }
                self.w("]");
            }
            ExprKind::Record(fields) => {
                if fields.is_empty() {
                    self.w("{}");
                    return;
                }
                self.w("{ ");
                for (i, (n, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        self.w(", ");
                    }
                    if is_field_name(&n.text) {
                        self.w(&n.text);
                    } else {
                        self.str_lit(&n.text);
                    }
                    self.w(": ");
                    self.expr(v, Prec::Lowest);
                }
                self.w(" }");
            }
            ExprKind::Var(n) => self.w(&n.text),
            ExprKind::Field(base, name) => {
                self.expr(base, Prec::Postfix);
                self.w(".");
                self.w(&name.text);
            }
            ExprKind::Index(base, index) => {
                self.expr(base, Prec::Postfix);
                self.w("[");
                self.expr(index, Prec::Lowest);
                self.w("]");
            }
            ExprKind::Call { callee, args } => {
                // `a.f(x)` would read back as a method call: keep a field callee in parentheses
                if matches!(callee.kind, ExprKind::Field(..)) {
                    self.w("(");
                    self.expr_bare(callee);
                    self.w(")");
                } else {
                    self.expr(callee, Prec::Postfix);
                }
                self.args(args);
            }
            ExprKind::Method { receiver, method, args } => {
                self.expr(receiver, Prec::Postfix);
                self.w(".");
                self.w(&method.text);
                self.args(args);
            }
            ExprKind::Unary(UnOp::Neg, x) => {
                self.w("-");
                self.expr(x, Prec::Neg);
            }
            ExprKind::Unary(UnOp::Not, x) => {
                self.w("not ");
                self.expr(x, Prec::Not);
            }
            ExprKind::Binary(op, l, r) => {
                let p = bin_prec(*op);
                self.expr(l, p);
                self.w(" ");
                self.w(op.symbol());
                self.w(" ");
                self.expr(r, p.next());
            }
            ExprKind::Compare(first, rest) => {
                self.expr(first, Prec::Add);
                for (op, x) in rest {
                    self.w(" ");
                    self.w(op.symbol());
                    self.w(" ");
                    self.expr(x, Prec::Add);
                }
            }
            ExprKind::If(c, t, e) => {
                self.w("if ");
                self.expr(c, Prec::Lowest);
                self.w(" then ");
                self.expr(t, Prec::Lowest);
                self.w(" else ");
                self.expr(e, Prec::Lowest);
            }
            ExprKind::Lambda(param, body) => {
                self.w(&param.text);
                self.w(" => ");
                self.expr(body, Prec::Lowest);
            }
        }
    }

    fn args(&mut self, args: &[Arg]) {
        self.w("(");
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.w(", ");
            }
            if let Some(n) = &a.name {
                self.w(&n.text);
                self.w(": ");
            }
            self.expr(&a.value, Prec::Lowest);
        }
        self.w(")");
    }
}

// ---------------------------------------------------------------------- span erasure

/// Set every span in the tree to `Span::default()`, so that trees parsed from different texts
/// compare equal when they have the same structure.
pub fn erase_spans(f: &mut File) {
    f.span = Span::default();
    if let Some(h) = &mut f.header {
        h.span = Span::default();
        name(&mut h.name);
        if let Some(v) = &mut h.version {
            v.span = Span::default();
        }
        if let Some(t) = &mut h.title {
            t.span = Span::default();
        }
    }
    for item in &mut f.items {
        erase_item(item);
    }
}

fn name(n: &mut Name) {
    n.span = Span::default();
}

fn str_lit(s: &mut StrLit) {
    s.span = Span::default();
}

fn erase_item(item: &mut Item) {
    match item {
        Item::Import(i) => {
            i.span = Span::default();
            name(&mut i.path);
            if let Some(a) = &mut i.alias {
                name(a);
            }
        }
        Item::Input(i) => {
            i.span = Span::default();
            name(&mut i.name);
            erase_type(&mut i.ty);
            if let Some(f) = &mut i.field {
                str_lit(f);
            }
            if let Some(d) = &mut i.default {
                erase_expr(d);
            }
        }
        Item::Judge(j) | Item::Generator(j) => {
            j.span = Span::default();
            name(&mut j.name);
            for s in &mut j.settings {
                s.span = Span::default();
                match &mut s.kind {
                    JudgeSettingKind::Model(s)
                    | JudgeSettingKind::Template(s)
                    | JudgeSettingKind::System(s)
                    | JudgeSettingKind::Local(s)
                    | JudgeSettingKind::Calibration(s) => str_lit(s),
                    JudgeSettingKind::Temperature(_)
                    | JudgeSettingKind::TopP(_)
                    | JudgeSettingKind::MaxTokens(_)
                    | JudgeSettingKind::Seed(_)
                    | JudgeSettingKind::Samples(_)
                    | JudgeSettingKind::MinSamples(_)
                    | JudgeSettingKind::PerCall(_) => {}
                    JudgeSettingKind::Vote(n)
                    | JudgeSettingKind::EvidenceQuote(n)
                    | JudgeSettingKind::Scoring(n)
                    | JudgeSettingKind::Order(n)
                    | JudgeSettingKind::Inconsistent(n)
                    | JudgeSettingKind::Rollouts(n)
                    | JudgeSettingKind::Fills(n)
                    | JudgeSettingKind::ReasoningEffort(n) => name(n),
                    JudgeSettingKind::Compares(a, b) => {
                        name(a);
                        name(b);
                    }
                    JudgeSettingKind::Sees(ns) | JudgeSettingKind::Jury(ns) | JudgeSettingKind::Cascade(ns) => {
                        ns.iter_mut().for_each(name)
                    }
                    JudgeSettingKind::Escalate(ws) => ws.iter_mut().for_each(|w| match w {
                        EscalateWhen::Between(_, _, s) => *s = Span::default(),
                        EscalateWhen::Named(n) => name(n),
                    }),
                    JudgeSettingKind::Weights(_) => {}
                    JudgeSettingKind::Returns { kind, fields } => {
                        name(kind);
                        fields.iter_mut().for_each(erase_field_type);
                    }
                }
            }
        }
        Item::Gate(g) => {
            g.span = Span::default();
            name(&mut g.name);
            erase_expr(&mut g.cond);
            match &mut g.action {
                GateAction::Score(e) | GateAction::Cap(e) => erase_expr(e),
            }
            if let Some(r) = &mut g.reason {
                str_lit(r);
            }
        }
        Item::Criterion(c) => erase_criterion(c),
        Item::Criteria(b) => {
            b.span = Span::default();
            name(&mut b.name);
            if let Some(j) = &mut b.default_judge {
                name(j);
            }
            match &mut b.body {
                CriteriaBody::Static(cs) => cs.iter_mut().for_each(erase_criterion),
                CriteriaBody::Each { var, list, template, shows } => {
                    name(var);
                    erase_expr(list);
                    erase_criterion(template);
                    for item in shows {
                        item.span = Span::default();
                        name(&mut item.name);
                        if let Some(e) = &mut item.expr {
                            erase_expr(e);
                        }
                    }
                }
            }
        }
        Item::Tier(t) => {
            t.span = Span::default();
            name(&mut t.name);
            if let Some(j) = &mut t.default_judge {
                name(j);
            }
            t.criteria.iter_mut().for_each(erase_criterion);
        }
        Item::Group(g) => erase_group(g),
        Item::Let(l) => {
            l.span = Span::default();
            name(&mut l.name);
            if let Some(t) = &mut l.ty {
                erase_type(t);
            }
            erase_expr(&mut l.value);
        }
        Item::Fn(f) => {
            f.span = Span::default();
            name(&mut f.name);
            for p in &mut f.params {
                p.span = Span::default();
                name(&mut p.name);
                erase_type(&mut p.ty);
                if let Some(d) = &mut p.default {
                    erase_expr(d);
                }
            }
            erase_type(&mut f.ret);
            erase_expr(&mut f.body);
        }
        Item::Score(s) => {
            s.span = Span::default();
            if let Some(n) = &mut s.name {
                name(n);
            }
            erase_expr(&mut s.expr);
        }
        Item::Stat(st) => {
            st.span = Span::default();
            name(&mut st.name);
            name(&mut st.agg);
            match &mut st.measure {
                StatMeasure::Score(s) => *s = Span::default(),
                StatMeasure::Criterion(n) => name(n),
                StatMeasure::Call { func, set } => {
                    name(func);
                    name(set);
                }
            }
            if let Some(t) = &mut st.test {
                t.2 = Span::default();
            }
            match &mut st.per {
                None => {}
                Some(StatPer::Tag(p, s)) => {
                    *s = Span::default();
                    if let Some(p) = p {
                        str_lit(p);
                    }
                }
                Some(StatPer::Axis(s)) => *s = Span::default(),
                Some(StatPer::Input(n)) => name(n),
                Some(StatPer::Pair(first, second)) => {
                    name(first);
                    name(second);
                }
            }
            if let Some(c) = &mut st.clip {
                c.2 = Span::default();
            }
        }
        Item::Reward(r) => {
            r.span = Span::default();
            for s in &mut r.settings {
                s.span = Span::default();
                match &mut s.kind {
                    RewardSettingKind::Advantage(n)
                    | RewardSettingKind::Unscored(n)
                    | RewardSettingKind::Uncovered(n)
                    | RewardSettingKind::Std(n) => name(n),
                    RewardSettingKind::Penalty(e) => erase_expr(e),
                    RewardSettingKind::Epsilon(_) | RewardSettingKind::Clip(..) => {}
                }
            }
        }
        Item::Example(e) => {
            e.span = Span::default();
            str_lit(&mut e.name);
            for s in &mut e.stmts {
                s.span = Span::default();
                match &mut s.kind {
                    ExampleStmtKind::Bind { input, value } => {
                        name(input);
                        erase_expr(value);
                    }
                    ExampleStmtKind::Judge { judge, verdicts } => {
                        name(judge);
                        for (k, v) in verdicts {
                            erase_key(k);
                            v.span = Span::default();
                            if let Some(e) = &mut v.evidence {
                                str_lit(e);
                            }
                            if let VerdictLitKind::Samples(xs) = &mut v.kind {
                                for x in xs {
                                    x.span = Span::default();
                                }
                            }
                        }
                    }
                    ExampleStmtKind::ExpectScore { .. } => {}
                    ExampleStmtKind::ExpectFailure(c) => {
                        if let Some(c) = c {
                            str_lit(c);
                        }
                    }
                    ExampleStmtKind::ExpectGroup { group, .. } => name(group),
                    ExampleStmtKind::ExpectCriterion { key, verdict } => {
                        erase_key(key);
                        verdict.span = Span::default();
                    }
                }
            }
        }
    }
}

fn erase_key(k: &mut CriterionKey) {
    k.span = Span::default();
    name(&mut k.name);
}

fn erase_group(g: &mut Group) {
    g.span = Span::default();
    name(&mut g.name);
    if let Some(w) = &mut g.weight {
        erase_expr(w);
    }
    if let Some(j) = &mut g.default_judge {
        name(j);
    }
    for m in &mut g.members {
        match m {
            GroupMember::Group(g) => erase_group(g),
            GroupMember::Criterion(c) => erase_criterion(c),
        }
    }
}

fn erase_criterion(c: &mut Criterion) {
    c.span = Span::default();
    if let Some(id) = &mut c.id {
        name(id);
    }
    if let Some(t) = &mut c.text {
        erase_expr(t);
    }
    for a in &mut c.attrs {
        a.span = Span::default();
        match &mut a.kind {
            AttrKind::Points(e) | AttrKind::Weight(e) | AttrKind::Tags(e) | AttrKind::Pass(e) => erase_expr(e),
            AttrKind::Axis(s) => str_lit(s),
            AttrKind::Ordinal(levels) => {
                for l in levels {
                    l.span = Span::default();
                    str_lit(&mut l.descriptor);
                }
            }
            AttrKind::Nominal(labels) => {
                for l in labels {
                    l.span = Span::default();
                    str_lit(&mut l.name);
                }
            }
            AttrKind::Continuous => {}
        }
    }
    if let Some(v) = &mut c.verifier {
        v.span = Span::default();
        match &mut v.kind {
            VerifierKind::Judge(j) => name(j),
            VerifierKind::Check(e) | VerifierKind::Value(e) => erase_expr(e),
            VerifierKind::Checks { checks, value } => {
                for c in checks {
                    c.span = Span::default();
                    name(&mut c.name);
                    if let Some(t) = &mut c.text {
                        str_lit(t);
                    }
                    erase_expr(&mut c.check);
                }
                if let Some(v) = value {
                    erase_expr(v);
                }
            }
            VerifierKind::Extract { var, ty, from, judge, check } => {
                name(var);
                erase_type(ty);
                name(from);
                name(judge);
                erase_expr(check);
            }
        }
    }
}

fn erase_field_type(f: &mut FieldType) {
    f.span = Span::default();
    name(&mut f.name);
    erase_type(&mut f.ty);
}

/// Reset the spans of a type expression.
pub fn erase_type(t: &mut TypeExpr) {
    t.span = Span::default();
    match &mut t.kind {
        TypeExprKind::Named(n) => name(n),
        TypeExprKind::List(t) | TypeExprKind::Optional(t) => erase_type(t),
        TypeExprKind::Record(fields) => fields.iter_mut().for_each(erase_field_type),
    }
}

/// Reset the spans of an expression.
pub fn erase_expr(e: &mut Expr) {
    stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || erase_expr_inner(e))
}

fn erase_expr_inner(e: &mut Expr) {
    e.span = Span::default();
    match &mut e.kind {
        ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::Null => {}
        ExprKind::List(xs) => xs.iter_mut().for_each(erase_expr),
        ExprKind::Record(fields) => {
            for (n, v) in fields {
                name(n);
                erase_expr(v);
            }
        }
        ExprKind::Var(n) => name(n),
        ExprKind::Field(b, n) => {
            erase_expr(b);
            name(n);
        }
        ExprKind::Index(b, i) => {
            erase_expr(b);
            erase_expr(i);
        }
        ExprKind::Call { callee, args } => {
            erase_expr(callee);
            erase_args(args);
        }
        ExprKind::Method { receiver, method, args } => {
            erase_expr(receiver);
            name(method);
            erase_args(args);
        }
        ExprKind::Unary(_, x) => erase_expr(x),
        ExprKind::Binary(_, l, r) => {
            erase_expr(l);
            erase_expr(r);
        }
        ExprKind::Compare(first, rest) => {
            erase_expr(first);
            for (_, x) in rest {
                erase_expr(x);
            }
        }
        ExprKind::If(c, t, e) => {
            erase_expr(c);
            erase_expr(t);
            erase_expr(e);
        }
        ExprKind::Lambda(p, body) => {
            name(p);
            erase_expr(body);
        }
    }
}

fn erase_args(args: &mut [Arg]) {
    for a in args {
        if let Some(n) = &mut a.name {
            name(n);
        }
        erase_expr(&mut a.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_match_the_grammar() {
        assert_eq!(print_number(0.0), "0");
        assert_eq!(print_number(3.0), "3");
        assert_eq!(print_number(0.5), "0.5");
        assert_eq!(print_number(1e21), "1e21");
        assert_eq!(print_number(1.5e-7), "1.5e-7");
        assert_eq!(print_number(-2.5), "-2.5");
        assert_eq!(print_number(f64::INFINITY), "1e999");
    }

    #[test]
    fn strings_escape_what_the_grammar_needs() {
        assert_eq!(print_string("a\"b\\c\nd\te\r\0"), r#""a\"b\\c\nd\te\r\0""#);
        assert_eq!(print_string("\u{1b}é"), "\"\\u{1b}é\"");
    }

    #[test]
    fn block_strings_read_back() {
        assert_eq!(block_string("a\nb", "  ").as_deref(), Some("\"\"\"\n    a\n    b\n    \"\"\""));
        assert_eq!(block_string("  a\n  b", ""), None);
        assert_eq!(block_string("one line", ""), None);
    }
}
