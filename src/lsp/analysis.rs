//! What the language server knows about one open document: the document parsed with every
//! module it imports (`resolve`, through `types::load_source_at`), an index of the names it
//! declares, and from them hover text, definitions and completions. Syntactic: a name is found
//! by the word under the cursor and the words before it (`by`, `alias.`), not by the checker's
//! scopes, so it works on a document that does not compile.

use crate::ir::AggOp;
use crate::resolve::Loaded;
use crate::source::{FileId, Span};
use crate::syntax::ast::{AttrKind, CriteriaBody, Criterion, ExprKind, GroupMember, Item, JudgeSetting, VerifierKind};

/// What a declared name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Criterion,
    /// A tier, group or `criteria` block: a set of criteria that `score` aggregates.
    Set,
    Judge,
    Gate,
    Let,
    Input,
    Function,
    /// An import's alias.
    Module,
}

/// A declared name.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub name: String,
    pub kind: Kind,
    /// For a function of an imported module: the alias it is called through.
    pub qualifier: Option<String>,
    /// Where the name is written (the file may be an imported module's).
    pub span: Span,
    /// Markdown shown on hover.
    pub hover: String,
    /// For a module: the index of the module in `Loaded::modules`.
    pub module: Option<usize>,
}

/// Where a definition lies: a file of the source map and a span in it.
pub struct Target {
    pub file: FileId,
    pub span: Span,
}

/// The longest text of a declaration quoted in a hover.
const QUOTE_LIMIT: usize = 240;

pub struct Analysis {
    pub loaded: Loaded,
    pub symbols: Vec<Symbol>,
}

impl Analysis {
    /// The index of a loaded document (`Loaded::root`) and the modules it imports.
    pub fn new(loaded: Loaded) -> Analysis {
        let symbols = index(&loaded);
        Analysis { loaded, symbols }
    }

    pub fn root_file(&self) -> Option<FileId> {
        self.loaded.root().map(|m| m.file)
    }

    fn root_text(&self) -> &str {
        self.root_file().map_or("", |f| &self.loaded.sources.get(f).text)
    }

    /// The name under the cursor (byte `offset` of the root file) and what it resolves to.
    pub fn resolve_at(&self, offset: usize) -> Option<(Span, Resolved<'_>)> {
        let root = self.root_file()?;
        let text = self.root_text();
        // `import a.b`: the whole dotted path names the module.
        if let Some(m) = self.loaded.root() {
            for &(idx, pos) in &m.imports {
                if let Some(Item::Import(imp)) = m.ast.items.get(pos) {
                    let s = imp.path.span;
                    if (s.start as usize..=s.end as usize).contains(&offset) {
                        return Some((s, Resolved::Module(idx)));
                    }
                }
            }
        }
        let w = word_at(text, offset)?;
        let span = Span::new(root, w.start, w.end);
        let name = &text[w.start..w.end];
        let before = text[..w.start].trim_end_matches([' ', '\t']);
        if let Some(q) = before.strip_suffix('.').map(|b| &b[trailing_ident(b)..]) {
            if let Some(s) = self
                .symbols
                .iter()
                .find(|s| s.kind == Kind::Function && s.qualifier.as_deref() == Some(q) && s.name == name)
            {
                return Some((span, Resolved::Symbol(s)));
            }
            // a method call (`response.word_count()`) is an intrinsic
            return intrinsic(name).then_some((span, Resolved::Intrinsic(intrinsic_name(name))));
        }
        let after =
            |kw: &str| before.strip_suffix(kw).is_some_and(|b| b.is_empty() || !is_ident(b.as_bytes()[b.len() - 1]));
        if after("by") || after("judge") {
            return self.find(name, &[Kind::Judge]).map(|s| (span, Resolved::Symbol(s)));
        }
        let order =
            [Kind::Criterion, Kind::Set, Kind::Judge, Kind::Gate, Kind::Let, Kind::Input, Kind::Function, Kind::Module];
        if let Some(s) = self.find(name, &order) {
            return Some((span, Resolved::Symbol(s)));
        }
        // an imported module's function, called unqualified
        if let Some(s) =
            self.symbols.iter().find(|s| s.kind == Kind::Function && s.qualifier.is_some() && s.name == name)
        {
            return Some((span, Resolved::Symbol(s)));
        }
        intrinsic(name).then_some((span, Resolved::Intrinsic(intrinsic_name(name))))
    }

    /// A root-file symbol (no qualifier) named `name`, of the first kind in `kinds` that has one.
    fn find(&self, name: &str, kinds: &[Kind]) -> Option<&Symbol> {
        kinds.iter().find_map(|k| self.symbols.iter().find(|s| s.kind == *k && s.qualifier.is_none() && s.name == name))
    }

    pub fn hover(&self, offset: usize) -> Option<(Span, String)> {
        let (span, r) = self.resolve_at(offset)?;
        let text = match r {
            Resolved::Symbol(s) => s.hover.clone(),
            Resolved::Module(idx) => self.module_hover(idx),
            // `all` not called: the set of every criterion (`mean(all)`)
            Resolved::Intrinsic("all") if !self.root_text()[span.end as usize..].trim_start().starts_with('(') => {
                "**set** `all`: every criterion of the rubric".to_string()
            }
            Resolved::Intrinsic(name) => intrinsic_hover(name),
        };
        Some((span, text))
    }

    pub fn definition(&self, offset: usize) -> Option<Target> {
        match self.resolve_at(offset)?.1 {
            Resolved::Symbol(s) if s.kind == Kind::Module => {
                let m = &self.loaded.modules[s.module?];
                Some(Target { file: m.file, span: m.ast.header.as_ref().map_or(Span::new(m.file, 0, 0), |h| h.span) })
            }
            Resolved::Symbol(s) => Some(Target { file: s.span.file, span: s.span }),
            Resolved::Module(idx) => {
                let m = &self.loaded.modules[idx];
                Some(Target { file: m.file, span: m.ast.header.as_ref().map_or(Span::new(m.file, 0, 0), |h| h.span) })
            }
            Resolved::Intrinsic(_) => None,
        }
    }

    fn module_hover(&self, idx: usize) -> String {
        let m = &self.loaded.modules[idx];
        let title = m.ast.header.as_ref().and_then(|h| h.title.as_ref()).map(|t| format!("\n\n{}", t.value));
        let fns: Vec<String> = m
            .ast
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Fn(f) => Some(format!("`{}`", f.name.text)),
                _ => None,
            })
            .collect();
        let file = &self.loaded.sources.get(m.file).name;
        format!("**module** `{}` ({file}){}\n\nfunctions: {}", m.name, title.unwrap_or_default(), fns.join(", "))
    }

    /// Completions at byte `offset` of the root file: after `by`, the judges; after `ALIAS.`,
    /// that module's functions (or, after any other `.`, the intrinsics, callable as methods);
    /// in `score`, the criteria and sets first; elsewhere every name in scope and the stdlib.
    pub fn completions(&self, offset: usize) -> Vec<Completion> {
        let text = self.root_text();
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let before = &before[..trailing_ident(before)];
        let trimmed = before.trim_end_matches([' ', '\t']);
        let mut out = Vec::new();
        let mut push = |label: &str, kind: Kind, detail: String, rank: u8| {
            out.push(Completion { label: label.to_string(), kind, detail, rank });
        };
        if let Some(q) = before.strip_suffix('.').map(|b| &b[trailing_ident(b)..]) {
            let module_fns: Vec<&Symbol> = self.symbols.iter().filter(|s| s.qualifier.as_deref() == Some(q)).collect();
            if module_fns.is_empty() {
                for name in intrinsic_names() {
                    push(name, Kind::Function, "stdlib".into(), 1);
                }
            }
            for s in module_fns {
                push(&s.name, s.kind, format!("fn in `{q}`"), 0);
            }
            return out;
        }
        let ends_with_word = |kw: &str| {
            trimmed.len() < before.len()
                && trimmed.strip_suffix(kw).is_some_and(|b| b.is_empty() || !is_ident(b.as_bytes()[b.len() - 1]))
        };
        if ends_with_word("by") || ends_with_word("judge") {
            for s in self.symbols.iter().filter(|s| s.kind == Kind::Judge) {
                push(&s.name, s.kind, "judge".into(), 0);
            }
            return out;
        }
        // A `stat` reads criteria and sets as the score does.
        let in_score = matches!(enclosing_item_keyword(text, offset), Some("score" | "stat"));
        for s in self.symbols.iter().filter(|s| s.kind != Kind::Judge || !in_score) {
            let (rank, detail) = match s.kind {
                Kind::Criterion => (if in_score { 0 } else { 2 }, "criterion"),
                Kind::Set => (if in_score { 0 } else { 2 }, "set of criteria"),
                Kind::Function if s.qualifier.is_some() => (1, "module function"),
                Kind::Function => (1, "function"),
                Kind::Judge => (2, "judge"),
                Kind::Gate => (3, "gate"),
                Kind::Let => (1, "let"),
                Kind::Input => (1, "input"),
                Kind::Module => (2, "module"),
            };
            let label = match &s.qualifier {
                Some(q) => format!("{q}.{}", s.name),
                None => s.name.clone(),
            };
            push(&label, s.kind, detail.into(), rank);
        }
        for name in intrinsic_names() {
            push(name, Kind::Function, "stdlib".into(), 2);
        }
        out
    }
}

/// What a name under the cursor is.
pub enum Resolved<'a> {
    Symbol(&'a Symbol),
    /// A module named by an `import` path (index in `Loaded::modules`).
    Module(usize),
    /// A built-in function of the standard library (its name, as in the intrinsic table), or
    /// an aggregation over a set of criteria (`fraction`), or both (`mean`).
    Intrinsic(&'static str),
}

/// One completion: its label, what it is, a short detail, and its rank (0 first).
pub struct Completion {
    pub label: String,
    pub kind: Kind,
    pub detail: String,
    pub rank: u8,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where the identifier characters at the end of `s` start.
fn trailing_ident(s: &str) -> usize {
    s.len() - s.bytes().rev().take_while(|&b| is_ident(b)).count()
}

/// The identifier byte range around (or just before) `offset`.
fn word_at(text: &str, offset: usize) -> Option<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let offset = offset.min(bytes.len());
    let at = if offset < bytes.len() && is_ident(bytes[offset]) {
        offset
    } else if offset > 0 && is_ident(bytes[offset - 1]) {
        offset - 1
    } else {
        return None;
    };
    let start = trailing_ident(&text[..at]);
    let end = at + bytes[at..].iter().take_while(|&&b| is_ident(b)).count();
    // a number is no name
    (!bytes[start].is_ascii_digit()).then_some(start..end)
}

/// The declaration keyword of the item the cursor is in: the first word of the nearest line at
/// or above it whose first word is one (a heuristic that works on text that does not parse).
fn enclosing_item_keyword(text: &str, offset: usize) -> Option<&'static str> {
    const ITEMS: &[&str] = &[
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
        "reward",
        "stat",
        "generator",
    ];
    text[..offset].lines().rev().find_map(|line| {
        let first = &line.trim_start()[..trailing_ident_start(line.trim_start())];
        ITEMS.iter().copied().find(|k| *k == first)
    })
}

/// The length of the identifier that starts `s`.
fn trailing_ident_start(s: &str) -> usize {
    s.bytes().take_while(|&b| is_ident(b)).count()
}

/// Whether `name` is built in: an intrinsic or an aggregation.
fn intrinsic(name: &str) -> bool {
    crate::stdlib::lookup(name).next().is_some() || AggOp::from_name(name).is_some()
}

fn intrinsic_name(name: &str) -> &'static str {
    match (crate::stdlib::lookup(name).next(), AggOp::from_name(name)) {
        (Some((_, i)), _) => i.name,
        (None, Some(op)) => op.name(),
        (None, None) => "",
    }
}

/// Every built-in name once: the aggregations, then the intrinsics in table order.
fn intrinsic_names() -> Vec<&'static str> {
    let mut seen = std::collections::BTreeSet::new();
    AggOp::ALL
        .iter()
        .map(|op| op.name())
        .chain(crate::stdlib::intrinsics().iter().map(|i| i.name))
        .filter(|n| seen.insert(*n))
        .collect()
}

/// What an aggregation computes over a set (the rules are in `docs/language.md`).
fn aggregation_doc(op: AggOp) -> &'static str {
    match op {
        AggOp::WeightedMean => "Σ weight·value / Σ weight over the set's criteria",
        AggOp::Mean => "Σ value / n over the set's criteria",
        AggOp::Fraction => "met / n: the share of the set's criteria that are met",
        AggOp::PointsRatio => "Σ points of the met criteria / Σ positive points (HealthBench)",
        AggOp::SumPoints => "Σ points·value over the met criteria",
        AggOp::MaxPoints => "Σ positive points",
        AggOp::Tree => "a weighted tree over a group: each node is the weighted mean of its children",
        AggOp::All => "whether every criterion of the set is met",
        AggOp::Any => "whether some criterion of the set is met",
        AggOp::AtLeast => "whether at least k criteria of the set are met (k is the next argument)",
        AggOp::CountMet => "how many criteria of the set are met",
        AggOp::Count => "how many criteria the set has",
        AggOp::MinValue => "the smallest value among the set's criteria",
        AggOp::MaxValue => "the largest value among the set's criteria",
    }
}

/// An intrinsic's overloads and documentation, as `docs/stdlib.md` shows them, after what the
/// aggregation of that name does, if there is one.
fn intrinsic_hover(name: &str) -> String {
    let mut parts = Vec::new();
    if let Some(op) = AggOp::from_name(name) {
        parts.push(format!(
            "```rubric\n{name}(SET, unscored: POLICY)\n```\n\n{}\n\n*aggregation over a set of criteria (`all`, a tier, a group, a `criteria` block)*",
            aggregation_doc(op)
        ));
    }
    let mut sigs = String::new();
    let mut docs: Vec<&str> = Vec::new();
    for (_, i) in crate::stdlib::lookup(name) {
        sigs.push_str(&format!("{}{}\n", i.name, i.sig));
        if !docs.contains(&i.doc) {
            docs.push(i.doc);
        }
    }
    if !sigs.is_empty() {
        parts.push(format!("```rubric\n{sigs}```\n\n{}\n\n*standard library (built in)*", docs.join("\n\n")));
    }
    parts.join("\n\n---\n\n")
}

/// The source of a span, on one line and cut to `QUOTE_LIMIT` characters.
fn quote(loaded: &Loaded, span: Span) -> String {
    let one_line: String = loaded.sources.slice(span).split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > QUOTE_LIMIT {
        format!("{}…", one_line.chars().take(QUOTE_LIMIT).collect::<String>())
    } else {
        one_line
    }
}

/// The `///` lines just above byte `start` of `text`, without their markers (`example:` lines
/// included, as written).
fn doc_comment(text: &str, start: usize) -> String {
    let mut lines: Vec<&str> = text[..start.min(text.len())]
        .lines()
        .rev()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim_start().starts_with("///"))
        .map(|l| l.trim_start().trim_start_matches("///").trim())
        .collect();
    lines.reverse();
    lines.join("\n")
}

/// Every name the root file declares, and the functions of the modules it imports.
fn index(loaded: &Loaded) -> Vec<Symbol> {
    let mut out = Vec::new();
    let Some(root) = loaded.root() else {
        return out;
    };
    for (pos, item) in root.ast.items.iter().enumerate() {
        match item {
            Item::Import(imp) => {
                let alias = imp.alias.as_ref().map_or_else(
                    || imp.path.text.rsplit('.').next().unwrap_or_default().to_string(),
                    |a| a.text.clone(),
                );
                let Some(&(idx, _)) = root.imports.iter().find(|(_, p)| *p == pos) else {
                    continue;
                };
                let m = &loaded.modules[idx];
                let text = &loaded.sources.get(m.file).text;
                for f in m.ast.items.iter().filter_map(|i| if let Item::Fn(f) = i { Some(f) } else { None }) {
                    let sig = quote(loaded, Span { end: f.ret.span.end, ..f.span });
                    let doc = doc_comment(text, f.span.start as usize);
                    out.push(Symbol {
                        name: f.name.text.clone(),
                        kind: Kind::Function,
                        qualifier: Some(alias.clone()),
                        span: f.name.span,
                        hover: format!("```rubric\n{sig}\n```\n\n{doc}\n\n*from module `{}`*", m.name),
                        module: None,
                    });
                }
                let span = imp.alias.as_ref().map_or(imp.path.span, |a| a.span);
                out.push(Symbol {
                    name: alias,
                    kind: Kind::Module,
                    qualifier: None,
                    span,
                    hover: format!("**module** `{}`", m.name),
                    module: Some(idx),
                });
            }
            Item::Input(i) => out.push(plain(loaded, &i.name, Kind::Input, i.span, "input")),
            Item::Let(l) => out.push(plain(loaded, &l.name, Kind::Let, l.span, "let")),
            Item::Gate(g) => out.push(plain(loaded, &g.name, Kind::Gate, g.span, "gate")),
            Item::Fn(f) => {
                let sig = quote(loaded, Span { end: f.ret.span.end, ..f.span });
                let doc = doc_comment(&loaded.sources.get(f.span.file).text, f.span.start as usize);
                out.push(Symbol {
                    name: f.name.text.clone(),
                    kind: Kind::Function,
                    qualifier: None,
                    span: f.name.span,
                    hover: format!("```rubric\n{sig}\n```\n\n{doc}"),
                    module: None,
                });
            }
            Item::Judge(j) | Item::Generator(j) => out.push(Symbol {
                name: j.name.text.clone(),
                kind: Kind::Judge,
                qualifier: None,
                span: j.name.span,
                hover: judge_hover(loaded, &j.name.text, &j.settings),
                module: None,
            }),
            Item::Criterion(c) => criterion(loaded, c, None, None, &mut out),
            Item::Tier(t) => {
                out.push(set(&t.name, "tier", t.default_judge.as_ref().map(|j| j.text.as_str()), t.criteria.len()));
                for c in &t.criteria {
                    criterion(
                        loaded,
                        c,
                        Some(("tier", &t.name.text)),
                        t.default_judge.as_ref().map(|j| j.text.as_str()),
                        &mut out,
                    );
                }
            }
            Item::Criteria(b) => match &b.body {
                CriteriaBody::Static(cs) => {
                    out.push(set(
                        &b.name,
                        "criteria block",
                        b.default_judge.as_ref().map(|j| j.text.as_str()),
                        cs.len(),
                    ));
                    for c in cs {
                        let default = b.default_judge.as_ref().map(|j| j.text.as_str());
                        criterion(loaded, c, Some(("criteria block", &b.name.text)), default, &mut out);
                    }
                }
                CriteriaBody::Each { var, list, .. } => {
                    let mut s = set(&b.name, "criteria block", b.default_judge.as_ref().map(|j| j.text.as_str()), 0);
                    s.hover = format!(
                        "**criteria** `{}`: one criterion per `{}` in `{}` (ids `{}[0]`, `{}[1]`, …)",
                        b.name.text,
                        var.text,
                        quote(loaded, list.span),
                        b.name.text,
                        b.name.text
                    );
                    out.push(s);
                }
            },
            Item::Group(g) => group(loaded, g, None, &mut out),
            Item::Score(_) | Item::Example(_) | Item::Reward(_) | Item::Stat(_) => {}
        }
    }
    out
}

fn plain(loaded: &Loaded, name: &crate::syntax::ast::Name, kind: Kind, item: Span, _what: &str) -> Symbol {
    Symbol {
        name: name.text.clone(),
        kind,
        qualifier: None,
        span: name.span,
        hover: format!("```rubric\n{}\n```", quote(loaded, item)),
        module: None,
    }
}

fn set(name: &crate::syntax::ast::Name, what: &str, default_judge: Option<&str>, count: usize) -> Symbol {
    let judge = default_judge.map(|j| format!(", judged by `{j}` by default")).unwrap_or_default();
    let count = if count == 1 { "1 criterion".to_string() } else { format!("{count} criteria") };
    Symbol {
        name: name.text.clone(),
        kind: Kind::Set,
        qualifier: None,
        span: name.span,
        hover: format!("**{what}** `{}`: {count}{judge}", name.text),
        module: None,
    }
}

fn group(loaded: &Loaded, g: &crate::syntax::ast::Group, inherited: Option<&str>, out: &mut Vec<Symbol>) {
    let default = g.default_judge.as_ref().map(|j| j.text.as_str()).or(inherited);
    let mut s = set(&g.name, "group", default, g.members.len());
    if let Some(w) = &g.weight {
        s.hover.push_str(&format!("\n\nweight: `{}`", quote(loaded, w.span)));
    }
    out.push(s);
    for m in &g.members {
        match m {
            GroupMember::Group(inner) => group(loaded, inner, default, out),
            GroupMember::Criterion(c) => criterion(loaded, c, Some(("group", &g.name.text)), default, out),
        }
    }
}

fn criterion(
    loaded: &Loaded,
    c: &Criterion,
    block: Option<(&str, &str)>,
    default_judge: Option<&str>,
    out: &mut Vec<Symbol>,
) {
    let Some(id) = &c.id else {
        return;
    };
    let mut hover = format!("**criterion** `{}`", id.text);
    if let Some((what, name)) = block {
        hover.push_str(&format!(" in {what} `{name}`"));
    }
    if let Some(t) = &c.text {
        match &t.kind {
            ExprKind::Str(s) => hover.push_str(&format!("\n\n> {}", s.replace('\n', "\n> "))),
            _ => hover.push_str(&format!("\n\ntext: `{}`", quote(loaded, t.span))),
        }
    }
    let kind = match c.verifier.as_ref().map(|v| &v.kind) {
        Some(VerifierKind::Judge(j)) => format!("judged by `{}`", j.text),
        Some(VerifierKind::Check(e)) => format!("verifier: `check {}`", quote(loaded, e.span)),
        Some(VerifierKind::Value(e)) => format!("verifier: `value {}`", quote(loaded, e.span)),
        Some(VerifierKind::Checks { checks, .. }) => format!(
            "sub-checks: {}",
            checks.iter().map(|c| format!("`{}`", c.name.text)).collect::<Vec<_>>().join(", ")
        ),
        Some(VerifierKind::Extract { judge, .. }) => {
            format!(
                "extracted by `{}`: `{}`",
                judge.text,
                quote(loaded, c.verifier.as_ref().map_or(c.span, |v| v.span))
            )
        }
        None => match default_judge {
            Some(j) => format!("judged by `{j}` (the block's default judge)"),
            None => "no verifier and no default judge".to_string(),
        },
    };
    hover.push_str(&format!("\n\n{kind}"));
    let mut weighted = false;
    for a in &c.attrs {
        let line = match &a.kind {
            AttrKind::Weight(e) => {
                weighted = true;
                format!("weight: `{}`", quote(loaded, e.span))
            }
            AttrKind::Points(e) => format!("points: `{}`", quote(loaded, e.span)),
            AttrKind::Pass(e) => format!("pass: `{}`", quote(loaded, e.span)),
            AttrKind::Axis(s) => format!("axis: `{}`", s.value),
            AttrKind::Tags(e) => format!("tags: `{}`", quote(loaded, e.span)),
            AttrKind::Ordinal(_) | AttrKind::Nominal(_) | AttrKind::Continuous => {
                format!("`{}`", quote(loaded, a.span))
            }
        };
        hover.push_str(&format!("\n\n{line}"));
    }
    if !weighted {
        hover.push_str("\n\nweight: 1 (default)");
    }
    out.push(Symbol {
        name: id.text.clone(),
        kind: Kind::Criterion,
        qualifier: None,
        span: id.span,
        hover,
        module: None,
    });
}

fn judge_hover(loaded: &Loaded, name: &str, settings: &[JudgeSetting]) -> String {
    let lines: Vec<String> = settings.iter().map(|s| format!("  {}", quote(loaded, s.span))).collect();
    format!("**judge** `{name}`\n\n```rubric\njudge {name} {{\n{}\n}}\n```", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "rubric t @ 1.0.0\ninput response: Text\njudge grader {\n  model \"m\"\n  temperature 0\n}\ntier core by grader {\n  criterion a \"First\" weight 2\n  criterion b \"Second\" check word_count(response) > 3\n}\nscore = fraction(core)\n";

    fn at(src: &str, needle: &str) -> usize {
        src.find(needle).unwrap()
    }

    #[test]
    fn names_resolve_by_context() {
        let a = Analysis::new(crate::resolve::load_source("t.rubric", SRC, None));
        let (_, r) = a.resolve_at(at(SRC, "grader {\n  criterion")).unwrap();
        assert!(matches!(r, Resolved::Symbol(s) if s.kind == Kind::Judge));
        let (_, r) = a.resolve_at(at(SRC, "core)")).unwrap();
        assert!(matches!(r, Resolved::Symbol(s) if s.kind == Kind::Set));
        let (_, r) = a.resolve_at(at(SRC, "word_count") + 3).unwrap();
        assert!(matches!(r, Resolved::Intrinsic("word_count")));
        let (_, h) = a.hover(at(SRC, "a \"First\"")).unwrap();
        assert!(h.contains("weight: `2`") && h.contains("judged by `grader` (the block's default judge)"), "{h}");
        assert!(a.resolve_at(at(SRC, "3\n")).is_none());
    }

    #[test]
    fn completion_contexts() {
        let src = "rubric t @ 1.0.0\njudge g { model \"m\" }\ncriterion a \"A\" by \n";
        let a = Analysis::new(crate::resolve::load_source("t.rubric", src, None));
        let labels: Vec<String> = a.completions(at(src, "by \n") + 3).into_iter().map(|c| c.label).collect();
        assert_eq!(labels, vec!["g"]);
        assert_eq!(enclosing_item_keyword("score =\n  fraction(", 18), Some("score"));
    }
}
