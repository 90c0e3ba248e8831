//! `rubric lint` (and `rubric check --lint`): deterministic rules for the ways a rubric rewards
//! the wrong thing, after the rubric-quality literature (RIFT's failure modes): compound
//! criteria, vague wording, duplicates and near-duplicates, a criterion whose sign and wording
//! disagree, one criterion carrying most of the points, a `check` whose numbers are not its
//! text's, and (over rows) a criterion that quotes the reference answer.
//!
//! Two entry points over one set of rules: [`lint_file`] over the static criteria of a parsed
//! root file (diagnostics with spans, warnings with codes `rubric::lint::*`), and [`lint_rows`]
//! over the criteria each row's data produced (per-instance rubrics), which the CLI collects
//! by scoring the rows. Every rule is a heuristic: it warns, never errs, and each warning says
//! what it saw.
//!
//! Pipeline position: beside `types`, over the AST (for spans) or plain criterion data; it never
//! changes what a rubric computes.

use crate::diag::Diagnostic;
use crate::source::Span;
use crate::syntax::ast;
use serde::Serialize;

/// One criterion as the rules see it.
#[derive(Debug, Clone, Default)]
pub struct Item {
    pub id: String,
    pub text: String,
    pub points: Option<f64>,
    pub weight: Option<f64>,
    /// Decided by a judge (the wording is all the judge has).
    pub judged: bool,
    /// The numbers a `check` compares with (`check` criteria only).
    pub check_numbers: Option<Vec<f64>>,
    pub span: Option<Span>,
}

/// What a rule found about one criterion (`other`: the criterion it duplicates).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub item: usize,
    pub other: Option<usize>,
    pub message: String,
    pub help: String,
}

pub const COMPOUND: &str = "rubric::lint::compound";
pub const VAGUE: &str = "rubric::lint::vague";
pub const DUPLICATE: &str = "rubric::lint::duplicate";
pub const SIGN: &str = "rubric::lint::sign";
pub const IMBALANCE: &str = "rubric::lint::imbalance";
pub const CHECK_MISMATCH: &str = "rubric::lint::check_mismatch";
pub const LEAK: &str = "rubric::lint::leak";

/// Verbs that start a requirement in rubric wording: "Explains X and recommends Y" is two.
const VERBS: &[&str] = &[
    "acknowledges",
    "addresses",
    "advises",
    "asks",
    "avoids",
    "cites",
    "clarifies",
    "confirms",
    "describes",
    "discusses",
    "encourages",
    "explains",
    "gives",
    "identifies",
    "includes",
    "lists",
    "mentions",
    "notes",
    "offers",
    "provides",
    "recommends",
    "refers",
    "states",
    "suggests",
    "uses",
    "warns",
];

/// Words that say how well without saying what: a judge reads them its own way.
const VAGUE_WORDS: &[&str] = &[
    "appropriate",
    "appropriately",
    "adequate",
    "adequately",
    "proper",
    "properly",
    "reasonable",
    "reasonably",
    "sufficient",
    "sufficiently",
    "good",
    "nice",
    "helpful",
    "satisfactory",
    "high-quality",
    "well-written",
    "decent",
    "acceptable",
    "etc",
];
const VAGUE_PHRASES: &[&str] = &["as needed", "if appropriate", "and so on", "where relevant", "when necessary"];

/// Wording of something done well (a criterion with negative points should describe a mistake).
const GOOD_CUES: &[&str] = &[
    "correctly",
    "accurately",
    "appropriately",
    "clearly",
    "helpfully",
    "properly",
    "safely",
    "politely",
    "concisely",
    "thoroughly",
    "well",
];
/// Wording of a mistake.
const BAD_CUES: &[&str] = &[
    "not",
    "no",
    "never",
    "fails",
    "fail",
    "without",
    "incorrect",
    "incorrectly",
    "wrong",
    "wrongly",
    "misleading",
    "harmful",
    "unsafe",
    "dangerous",
    "inaccurate",
    "inaccurately",
    "error",
    "errors",
    "mistake",
    "omits",
    "ignores",
    "misses",
    "excessive",
    "excessively",
    "unnecessary",
    "unnecessarily",
    "refuses",
    "overly",
    "contradicts",
    "unsupported",
    "false",
    "falsely",
    "irrelevant",
    "rude",
    "doesn't",
    "don't",
    "isn't",
    "hallucinates",
    "fabricates",
    "invents",
    "overstates",
    "delays",
    "discourages",
    "dismisses",
];
/// Openings of a criterion that describes a failure.
const FAILURE_OPENINGS: &[&str] =
    &["fails to", "does not", "doesn't", "incorrectly", "omits", "misses", "ignores", "refuses to"];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The requirement clauses of a text: split at `;`, at sentence ends (a full stop, then a capital,
/// not after an abbreviation), at "as well as", "and also", "in addition", and before a verb of
/// requirement joined by "and" ("Explains X and recommends Y"); a list inside one requirement
/// ("such as A, B, and C") and a parenthesis (a justification) are not split. A clause counts
/// when it has three words or more.
fn clauses(text: &str) -> Vec<String> {
    // Drop parentheticals.
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    // Sentences: ". " + a capital, the word before it not an abbreviation.
    let mut sentences = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = plain.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        if (c == '.' || c == ';') && chars.get(i + 1) == Some(&' ') {
            let next_cap = chars.get(i + 2).is_some_and(|n| n.is_uppercase());
            let last = cur.trim_end_matches(['.', ';']).rsplit(' ').next().unwrap_or("").to_lowercase();
            let abbrev =
                ["st", "dr", "mr", "mrs", "ms", "e.g", "i.e", "vs", "etc", "approx", "no"].contains(&last.as_str());
            if c == ';' || (next_cap && !abbrev) {
                sentences.push(std::mem::take(&mut cur));
            }
        }
    }
    sentences.push(cur);
    let mut parts: Vec<String> = sentences.iter().map(|x| x.to_lowercase()).collect();
    for sep in [" as well as ", " and also ", " in addition, ", " additionally, "] {
        parts = parts.iter().flat_map(|p| p.split(sep).map(String::from).collect::<Vec<_>>()).collect();
    }
    // "... and recommends ...": a verb of requirement after "and" starts a new clause.
    let mut out = Vec::new();
    for p in parts {
        let ws: Vec<&str> = p.split_whitespace().collect();
        let mut start = 0;
        for i in 1..ws.len() {
            if ws[i - 1].trim_start_matches(',') == "and"
                && VERBS.contains(&ws[i].trim_matches(|c: char| !c.is_alphanumeric()))
            {
                out.push(ws[start..i - 1].join(" ").trim_end_matches(',').to_string());
                start = i;
            }
        }
        out.push(ws[start..].join(" "));
    }
    out.into_iter().filter(|c| c.split_whitespace().count() >= 3).collect()
}

fn compound(items: &[Item], out: &mut Vec<Finding>) {
    for (i, it) in items.iter().enumerate() {
        let cs = clauses(&it.text);
        if cs.len() >= 2 {
            out.push(Finding {
                code: COMPOUND,
                item: i,
                other: None,
                message: format!("criterion `{}` asks for {} things at once", it.id, cs.len()),
                help: format!(
                    "a judge marks it met or unmet as a whole, so half a good answer counts as none: split it into one criterion per requirement ({})",
                    cs.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
}

fn vague(items: &[Item], out: &mut Vec<Finding>) {
    for (i, it) in items.iter().enumerate().filter(|(_, it)| it.judged) {
        let ws = words(&it.text);
        let lower = it.text.to_lowercase();
        let mut found: Vec<&str> = VAGUE_WORDS.iter().copied().filter(|v| ws.iter().any(|w| w == v)).collect();
        found.extend(VAGUE_PHRASES.iter().copied().filter(|p| lower.contains(p)));
        // A number or a quotation anchors the wording.
        let anchored = it.text.chars().any(|c| c.is_ascii_digit()) || it.text.contains('"') || it.text.contains('“');
        if !found.is_empty() && !anchored {
            out.push(Finding {
                code: VAGUE,
                item: i,
                other: None,
                message: format!(
                    "criterion `{}` is vague: {} says how well, not what",
                    it.id,
                    found.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")
                ),
                help: "say what a met answer contains or does (a fact, a number, a step, a quoted phrase), so that two judges decide alike".into(),
            });
        }
    }
}

fn normalized(text: &str) -> String {
    words(text).join(" ")
}

/// Jaccard similarity of the two texts' word sets.
fn jaccard(a: &str, b: &str) -> f64 {
    let a: std::collections::BTreeSet<String> = words(a).into_iter().collect();
    let b: std::collections::BTreeSet<String> = words(b).into_iter().collect();
    let union = a.union(&b).count();
    if union == 0 {
        0.0
    } else {
        a.intersection(&b).count() as f64 / union as f64
    }
}

fn duplicate(items: &[Item], out: &mut Vec<Finding>) {
    let norm: Vec<String> = items.iter().map(|it| normalized(&it.text)).collect();
    for j in 1..items.len() {
        for i in 0..j {
            if norm[j].is_empty() {
                continue;
            }
            let same = norm[i] == norm[j];
            let lev = strsim::normalized_levenshtein(&norm[i], &norm[j]);
            let jac = jaccard(&items[i].text, &items[j].text);
            let near = words(&items[j].text).len() >= 4 && (lev >= 0.85 || jac >= 0.8);
            if same || near {
                let how = if same {
                    "the same text as".to_string()
                } else {
                    format!("nearly the text of (similarity {:.2})", lev.max(jac))
                };
                out.push(Finding {
                    code: DUPLICATE,
                    item: j,
                    other: Some(i),
                    message: format!("criterion `{}` has {how} `{}`", items[j].id, items[i].id),
                    help: "a requirement counted twice weighs double: keep one, or say what tells them apart".into(),
                });
                break;
            }
        }
    }
}

fn sign(items: &[Item], out: &mut Vec<Finding>) {
    for (i, it) in items.iter().enumerate() {
        let Some(p) = it.points else { continue };
        let ws = words(&it.text);
        let lower = normalized(&it.text);
        let bad = ws.iter().any(|w| BAD_CUES.contains(&w.as_str()));
        let good = ws.iter().any(|w| GOOD_CUES.contains(&w.as_str()));
        if p < 0.0 && good && !bad {
            out.push(Finding {
                code: SIGN,
                item: i,
                other: None,
                message: format!("criterion `{}` has negative points ({p}) but describes something done well", it.id),
                help: "a met criterion with negative points is a penalty: word it as the mistake it penalises (\"Gives a dose without asking about allergies\"), or make its points positive".into(),
            });
        } else if p > 0.0 && FAILURE_OPENINGS.iter().any(|o| lower.starts_with(o)) {
            out.push(Finding {
                code: SIGN,
                item: i,
                other: None,
                message: format!("criterion `{}` has positive points ({p}) but describes a failure", it.id),
                help: "met means the answer failed, and that earns points: word it as what a good answer does, or make its points negative".into(),
            });
        }
    }
}

fn imbalance(items: &[Item], out: &mut Vec<Finding>) {
    for (what, get) in
        [("points", (|it: &Item| it.points) as fn(&Item) -> Option<f64>), ("weight", |it: &Item| it.weight)]
    {
        let positive: Vec<(usize, f64)> =
            items.iter().enumerate().filter_map(|(i, it)| get(it).filter(|p| *p > 0.0).map(|p| (i, p))).collect();
        if positive.len() < 4 {
            continue;
        }
        let total: f64 = positive.iter().map(|x| x.1).sum();
        let Some(&(i, max)) = positive.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else { continue };
        if max > 0.5 * total {
            out.push(Finding {
                code: IMBALANCE,
                item: i,
                other: None,
                message: format!(
                    "criterion `{}` carries {:.0}% of the positive {what} of {} criteria",
                    items[i].id,
                    100.0 * max / total,
                    positive.len()
                ),
                help: "the score is then mostly this one criterion: if that is meant, make it a gate; else even out the points".into(),
            });
        }
    }
}

/// Numbers written in a text, digits only ("100", "2.5", "1,000").
fn text_numbers(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !cur.is_empty()) || (c == ',' && !cur.is_empty()) {
            cur.push(c);
        } else if !cur.is_empty() {
            let n = cur.trim_end_matches(['.', ',']).replace(',', "");
            out.extend(n.parse::<f64>().ok());
            cur.clear();
        }
    }
    out
}

fn check_mismatch(items: &[Item], out: &mut Vec<Finding>) {
    for (i, it) in items.iter().enumerate() {
        let Some(check) = &it.check_numbers else { continue };
        let said = text_numbers(&it.text);
        if said.is_empty() || check.is_empty() || said.iter().any(|n| check.contains(n)) {
            continue;
        }
        let list = |xs: &[f64]| xs.iter().map(|x| format!("{x}")).collect::<Vec<_>>().join(", ");
        out.push(Finding {
            code: CHECK_MISMATCH,
            item: i,
            other: None,
            message: format!("criterion `{}` says {} but its check compares with {}", it.id, list(&said), list(check)),
            help: "the text is what readers and reports show: make the text and the check name the same number".into(),
        });
    }
}

/// A run of at least `min` words the two texts share, as text.
fn shared_run(a: &str, b: &str, min: usize) -> Option<String> {
    let (a, b) = (words(a), words(b));
    if a.len() < min || b.len() < min {
        return None;
    }
    let grams: std::collections::HashSet<&[String]> = b.windows(min).collect();
    a.windows(min).find(|w| grams.contains(w)).map(|w| w.join(" "))
}

/// The rules over one list of criteria (a rubric's static criteria, or one row's).
pub fn rules(items: &[Item]) -> Vec<Finding> {
    let mut out = Vec::new();
    compound(items, &mut out);
    vague(items, &mut out);
    duplicate(items, &mut out);
    sign(items, &mut out);
    imbalance(items, &mut out);
    check_mismatch(items, &mut out);
    out.sort_by_key(|f| (f.item, f.code));
    out
}

/// Criteria that quote `min_words` or more consecutive words of a reference text the policy
/// should not see (the reference answer a per-instance rubric was written from).
pub fn leaks(items: &[Item], reference_field: &str, reference: &str, min_words: usize) -> Vec<Finding> {
    items
        .iter()
        .enumerate()
        .filter_map(|(i, it)| {
            let run = shared_run(&it.text, reference, min_words)?;
            Some(Finding {
                code: LEAK,
                item: i,
                other: None,
                message: format!("criterion `{}` quotes the row's `{reference_field}`: \"{run}\"", it.id),
                help: "a criterion that spells out the reference answer lets a judge match words instead of judging; describe what the answer must establish".into(),
            })
        })
        .collect()
}

// ------------------------------------------------------------------ the static criteria of a file

fn literal_number(e: &ast::Expr) -> Option<f64> {
    match &e.kind {
        ast::ExprKind::Number(n) => Some(*n),
        ast::ExprKind::Unary(ast::UnOp::Neg, x) => literal_number(x).map(|n| -n),
        _ => None,
    }
}

/// Every number literal of an expression.
fn numbers_in(e: &ast::Expr, out: &mut Vec<f64>) {
    use ast::ExprKind as K;
    match &e.kind {
        K::Number(n) => out.push(*n),
        K::Str(_) | K::Bool(_) | K::Null | K::Var(_) => {}
        K::List(xs) => xs.iter().for_each(|x| numbers_in(x, out)),
        K::Record(fs) => fs.iter().for_each(|(_, x)| numbers_in(x, out)),
        K::Field(b, _) => numbers_in(b, out),
        K::Index(b, i) => {
            numbers_in(b, out);
            numbers_in(i, out);
        }
        K::Call { callee, args } => {
            numbers_in(callee, out);
            args.iter().for_each(|a| numbers_in(&a.value, out));
        }
        K::Method { receiver, args, .. } => {
            numbers_in(receiver, out);
            args.iter().for_each(|a| numbers_in(&a.value, out));
        }
        K::Unary(ast::UnOp::Neg, x) => {
            if let Some(n) = literal_number(x) {
                out.push(-n);
            } else {
                numbers_in(x, out);
            }
        }
        K::Unary(_, x) | K::Lambda(_, x) => numbers_in(x, out),
        K::Binary(_, a, b) => {
            numbers_in(a, out);
            numbers_in(b, out);
        }
        K::Compare(a, rest) => {
            numbers_in(a, out);
            rest.iter().for_each(|(_, x)| numbers_in(x, out));
        }
        K::If(c, a, b) => {
            numbers_in(c, out);
            numbers_in(a, out);
            numbers_in(b, out);
        }
    }
}

fn item_of(c: &ast::Criterion, judged_by_default: bool) -> Option<Item> {
    let (Some(id), Some(text)) = (&c.id, &c.text) else { return None };
    let ast::ExprKind::Str(text) = &text.kind else { return None };
    let mut it = Item { id: id.text.clone(), text: text.clone(), span: Some(c.span), ..Item::default() };
    for a in &c.attrs {
        match &a.kind {
            ast::AttrKind::Points(e) => it.points = literal_number(e),
            ast::AttrKind::Weight(e) => it.weight = literal_number(e),
            _ => {}
        }
    }
    match c.verifier.as_ref().map(|v| &v.kind) {
        None => it.judged = judged_by_default,
        Some(ast::VerifierKind::Judge(_)) => it.judged = true,
        Some(ast::VerifierKind::Check(e)) => {
            let mut ns = Vec::new();
            numbers_in(e, &mut ns);
            it.check_numbers = Some(ns);
        }
        Some(ast::VerifierKind::Value(_) | ast::VerifierKind::Extract { .. } | ast::VerifierKind::Checks { .. }) => {}
    }
    Some(it)
}

fn group_items(g: &ast::Group, out: &mut Vec<Item>) {
    for m in &g.members {
        match m {
            ast::GroupMember::Criterion(c) => out.extend(item_of(c, true)),
            ast::GroupMember::Group(inner) => group_items(inner, out),
        }
    }
}

/// The static criteria of a root file, in declaration order (criteria whose text is not a
/// string literal are left to [`lint_rows`]).
pub fn static_items(file: &ast::File) -> Vec<Item> {
    let mut out = Vec::new();
    for item in &file.items {
        match item {
            ast::Item::Criterion(c) => out.extend(item_of(c, true)),
            ast::Item::Criteria(b) => {
                if let ast::CriteriaBody::Static(cs) = &b.body {
                    out.extend(cs.iter().filter_map(|c| item_of(c, true)));
                }
            }
            ast::Item::Tier(t) => out.extend(t.criteria.iter().filter_map(|c| item_of(c, true))),
            ast::Item::Group(g) => group_items(g, &mut out),
            _ => {}
        }
    }
    out
}

/// The rules over a root file's static criteria, as warnings at the criteria.
pub fn lint_file(file: &ast::File) -> Vec<Diagnostic> {
    let items = static_items(file);
    rules(&items)
        .into_iter()
        .filter_map(|f| {
            let span = items[f.item].span?;
            let mut d = Diagnostic::warning(f.code, f.message).with_label(span, "here").with_help(f.help);
            if let Some(o) = f.other.and_then(|o| items[o].span) {
                d = d.with_label(o, "first here");
            }
            Some(d)
        })
        .collect()
}

/// Compile `path` as `rubric check` does, and add the rules' warnings over its static
/// criteria when it has no error (`rubric check --lint`, `rubric lint`).
pub fn check_path(path: &std::path::Path) -> crate::types::Compiled {
    let loaded = crate::resolve::load_path(path);
    let root = loaded.modules.last().map(|m| m.ast.clone());
    let mut compiled = crate::types::check_loaded(loaded);
    if let (false, Some(root)) = (compiled.has_errors(), root) {
        compiled.diagnostics.extend(lint_file(&root));
    }
    compiled
}

/// One row's finding (`rubric lint --input`).
#[derive(Debug, Clone, Serialize)]
pub struct RowFinding {
    /// The row's index in the rows file, and its id.
    pub row: usize,
    pub id: Option<String>,
    pub criterion: String,
    pub code: &'static str,
    pub message: String,
    pub help: String,
}

/// One row's criteria, as its record lists them, and its reference text (field, text).
#[derive(Debug, Clone)]
pub struct RowItems {
    pub row: usize,
    pub id: Option<String>,
    pub items: Vec<Item>,
    pub reference: Option<(String, String)>,
}

/// The rules over each row's criteria, and the leak rule against the row's reference text when
/// there is one.
pub fn lint_rows(rows: &[RowItems]) -> Vec<RowFinding> {
    let mut out = Vec::new();
    for r in rows {
        let mut found = rules(&r.items);
        if let Some((field, text)) = &r.reference {
            found.extend(leaks(&r.items, field, text, 8));
        }
        out.extend(found.into_iter().map(|f| RowFinding {
            row: r.row,
            id: r.id.clone(),
            criterion: r.items[f.item].id.clone(),
            code: f.code,
            message: f.message,
            help: f.help,
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, text: &str) -> Item {
        Item { id: id.into(), text: text.into(), judged: true, ..Item::default() }
    }

    fn codes(items: &[Item]) -> Vec<(&'static str, String)> {
        rules(items).into_iter().map(|f| (f.code, items[f.item].id.clone())).collect()
    }

    #[test]
    fn compound_criteria_are_found_and_single_ones_are_not() {
        let yes = [
            item("a", "Explains the likely cause and recommends rest for two days"),
            item("b", "Mentions the dose; warns about liver damage at high doses"),
            item("c", "Lists three side effects as well as the usual dose for adults"),
        ];
        assert_eq!(codes(&yes).iter().filter(|(c, _)| *c == COMPOUND).count(), 3, "{:?}", codes(&yes));
        let no = [
            item("d", "Recommends rest and fluids"),
            item("e", "States the boiling point of water at sea level"),
            // A list inside one requirement, an abbreviation, a justification in parentheses.
            item("f", "Includes ways to track mood, such as sleep patterns, mood diaries, and reviews by a therapist"),
            item("g", "Warns against St. John's wort with antidepressants"),
            item(
                "h",
                "Mentions capnography for tube placement (Justification: it is a class 1 recommendation. It still is.)",
            ),
        ];
        assert!(codes(&no).iter().all(|(c, _)| *c != COMPOUND), "{:?}", codes(&no));
    }

    #[test]
    fn vague_wording_is_found_when_nothing_anchors_it() {
        let yes = [item("a", "Gives appropriate advice"), item("b", "The answer is helpful and so on")];
        assert_eq!(codes(&yes), [(VAGUE, "a".into()), (VAGUE, "b".into())]);
        let no = [
            item("c", "Gives an appropriate dose (under 4 g a day)"),
            item("d", "Says \"see a doctor\""),
            Item { judged: false, ..item("e", "Good formatting") },
        ];
        assert!(codes(&no).is_empty(), "{:?}", codes(&no));
    }

    #[test]
    fn duplicates_and_near_duplicates_are_found() {
        let items = [
            item("a", "Recommends seeing a doctor within 24 hours"),
            item("b", "recommends seeing a doctor within 24 hours."),
            item("c", "Recommends seeing a doctor within 48 hours"),
            item("d", "States the capital of France"),
        ];
        let found: Vec<_> =
            rules(&items).into_iter().filter(|f| f.code == DUPLICATE).map(|f| (f.item, f.other)).collect();
        assert_eq!(found, [(1, Some(0)), (2, Some(0))]);
    }

    #[test]
    fn a_sign_that_disagrees_with_the_wording_is_found() {
        let neg_good = Item { points: Some(-5.0), ..item("a", "Correctly states the dose") };
        let neg_bad = Item { points: Some(-5.0), ..item("b", "Gives a dose without asking about allergies") };
        let pos_fail = Item { points: Some(3.0), ..item("c", "Fails to mention emergency services") };
        let pos_good = Item { points: Some(3.0), ..item("d", "Mentions emergency services") };
        assert_eq!(codes(&[neg_good, neg_bad, pos_fail, pos_good]), [(SIGN, "a".into()), (SIGN, "c".into())]);
    }

    #[test]
    fn one_criterion_with_most_points_is_found() {
        let texts = [
            ("a", "Names the capital"),
            ("b", "Gives its population"),
            ("c", "Cites a census"),
            ("d", "Spells the river's name"),
        ];
        let mk = |id: &str, p: f64| {
            let text = texts.iter().find(|t| t.0 == id).map_or("", |t| t.1);
            Item { points: Some(p), ..item(id, text) }
        };
        let skewed = [mk("a", 20.0), mk("b", 3.0), mk("c", 2.0), mk("d", 1.0)];
        assert_eq!(codes(&skewed), [(IMBALANCE, "a".into())]);
        let even = [mk("a", 5.0), mk("b", 3.0), mk("c", 2.0), mk("d", 4.0)];
        assert!(codes(&even).is_empty());
        // Fewer than four criteria: no rule (two criteria of 3 and 1 are a choice, not a slip).
        assert!(codes(&[mk("a", 9.0), mk("b", 1.0)]).is_empty());
    }

    #[test]
    fn a_check_with_other_numbers_than_its_text_is_found() {
        let off = Item { check_numbers: Some(vec![120.0]), judged: false, ..item("a", "Under 100 words") };
        let on = Item {
            check_numbers: Some(vec![1.0, 100.0]),
            judged: false,
            ..item("b", "At most 1,000 words or 100 lines")
        };
        let no_numbers = Item { check_numbers: Some(vec![3.0]), judged: false, ..item("c", "Short enough") };
        assert_eq!(codes(&[off, on, no_numbers]), [(CHECK_MISMATCH, "a".into())]);
        assert_eq!(text_numbers("1,000 words, 2.5 pages."), [1000.0, 2.5]);
    }

    #[test]
    fn a_criterion_quoting_the_reference_is_a_leak() {
        let reference = "Paracetamol at 500 mg to 1 g every four to six hours, at most 4 g in a day.";
        let items = [
            item("a", "Says paracetamol at 500 mg to 1 g every four to six hours is the dose"),
            item("b", "Gives the maximum daily dose of paracetamol"),
        ];
        let found = leaks(&items, "ideal", reference, 8);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].item, 0);
        assert!(found[0].message.contains("\"paracetamol at 500 mg to 1 g every\""), "{}", found[0].message);
    }
}
