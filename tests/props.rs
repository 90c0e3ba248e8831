//! Property tests for stage 1 (text → AST): random ASTs printed by `syntax::printer` parse
//! back through `syntax::parse_file` to the same tree (spans erased), the parser never panics
//! on arbitrary or mutated input and keeps its diagnostics inside the source, and a
//! hand-written sample file is already in canonical form. Then stage 3's identity: generated
//! well-typed rubrics keep their `ir_hash` under any layout change and change it under any
//! semantic edit.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use rubric::source::{FileId, Span};
use rubric::syntax::ast::*;
use rubric::syntax::printer::{erase_spans, print_expr, print_file, print_file_with_comments, KEYWORDS};
use rubric::syntax::{comment_spans, parse_file};
use std::fmt::Write as _;

// ---------------------------------------------------------------------- tree builders

fn sp() -> Span {
    Span::default()
}

fn nm(text: impl Into<String>) -> Name {
    Name { text: text.into(), span: sp() }
}

fn lit(value: impl Into<String>) -> StrLit {
    StrLit { value: value.into(), span: sp() }
}

fn ex(kind: ExprKind) -> Expr {
    Expr { kind, span: sp() }
}

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn ty_named(n: &str) -> TypeExpr {
    TypeExpr { kind: TypeExprKind::Named(nm(n)), span: sp() }
}

// ---------------------------------------------------------------------- leaf strategies

/// Identifiers, biased towards the soft keywords and near-keywords that stress the grammar.
fn ident() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "[a-zA-Z_][a-zA-Z0-9_]{0,6}".prop_filter("keyword", |s| !KEYWORDS.contains(&s.as_str())),
        1 => select(vec![
            "points", "weight", "axis", "tags", "ordinal", "nominal", "continuous", "pass", "value",
            "reason", "cap", "as", "says", "expect", "met", "unmet", "unscored", "failure", "within",
            "model", "sees", "returns", "List", "Text", "iff", "nota", "in_", "byx", "null_", "true1",
        ])
        .prop_map(String::from),
    ]
    .boxed()
}

/// Field names after `.`, in record types and record literals: keywords are allowed.
fn field_name() -> BoxedStrategy<String> {
    prop_oneof![3 => ident(), 1 => select(KEYWORDS.to_vec()).prop_map(String::from)].boxed()
}

/// Strings with quotes, backslashes, newlines, control characters and non-ASCII text.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[ -~]{0,12}",
        2 => "[a-z \"\\\\\n\t\r\0{}éß✓😀\u{7f}\u{1b}\u{2028}]{0,10}",
        1 => "(?s).{0,8}",
        1 => select(vec![
            "", "\"\"\"", "a\nb", "line one\nline two\n", "  indented\n  block", "\\u{41}", "\r\n",
            "//", "/*", "ends with quote\"", "multi\n\nblank\n",
        ])
        .prop_map(String::from),
    ]
    .boxed()
}

/// Non-negative finite numbers: small integers, decimal fractions, and any bit pattern.
fn number() -> BoxedStrategy<f64> {
    prop_oneof![
        (0u32..1000).prop_map(f64::from),
        (0u32..100_000, 1i32..7).prop_map(|(n, d)| f64::from(n) / 10f64.powi(d)),
        prop::num::f64::POSITIVE | prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
        select(vec![1e21, 1e-7, 1e300, 5e-324, f64::MAX, 0.1, 123456789.125, 1e16, 1e15]),
    ]
    .boxed()
}

/// Numbers where the grammar takes a `signed_number`.
fn signed_number() -> BoxedStrategy<f64> {
    (number(), any::<bool>()).prop_map(|(n, neg)| if neg { -n } else { n }).boxed()
}

fn qualified_name() -> BoxedStrategy<String> {
    vec(ident(), 1..4).prop_map(|parts| parts.join(".")).boxed()
}

// ---------------------------------------------------------------------- expressions

fn unop() -> impl Strategy<Value = UnOp> {
    select(vec![UnOp::Neg, UnOp::Not])
}

fn binop() -> impl Strategy<Value = BinOp> {
    select(vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::And, BinOp::Or, BinOp::Coalesce])
}

fn cmpop() -> impl Strategy<Value = CmpOp> {
    select(vec![CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge])
}

fn args(inner: BoxedStrategy<Expr>) -> BoxedStrategy<Vec<Arg>> {
    vec(
        (proptest::option::weighted(0.3, ident()), inner).prop_map(|(name, value)| Arg { name: name.map(nm), value }),
        0..3,
    )
    .boxed()
}

/// Every expression form, up to a bounded depth.
fn expr() -> BoxedStrategy<Expr> {
    let leaf = prop_oneof![
        number().prop_map(|n| ex(ExprKind::Number(n))),
        text().prop_map(|s| ex(ExprKind::Str(s))),
        any::<bool>().prop_map(|b| ex(ExprKind::Bool(b))),
        Just(ex(ExprKind::Null)),
        ident().prop_map(|n| ex(ExprKind::Var(nm(n)))),
        ident().prop_map(|n| ex(ExprKind::Var(nm(n)))),
    ];
    leaf.prop_recursive(4, 40, 3, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..3).prop_map(|xs| ex(ExprKind::List(xs))),
            vec((prop_oneof![field_name(), text()], inner.clone()), 0..3)
                .prop_map(|fs| ex(ExprKind::Record(fs.into_iter().map(|(n, v)| (nm(n), v)).collect()))),
            (inner.clone(), field_name()).prop_map(|(b, n)| ex(ExprKind::Field(bx(b), nm(n)))),
            (inner.clone(), inner.clone()).prop_map(|(b, i)| ex(ExprKind::Index(bx(b), bx(i)))),
            (inner.clone(), args(inner.clone())).prop_map(|(c, args)| ex(ExprKind::Call { callee: bx(c), args })),
            (inner.clone(), field_name(), args(inner.clone())).prop_map(|(r, m, args)| ex(ExprKind::Method {
                receiver: bx(r),
                method: nm(m),
                args
            })),
            (unop(), inner.clone()).prop_map(|(op, x)| ex(ExprKind::Unary(op, bx(x)))),
            (binop(), inner.clone(), inner.clone()).prop_map(|(op, l, r)| ex(ExprKind::Binary(op, bx(l), bx(r)))),
            (binop(), inner.clone(), inner.clone()).prop_map(|(op, l, r)| ex(ExprKind::Binary(op, bx(l), bx(r)))),
            (inner.clone(), vec((cmpop(), inner.clone()), 1..3))
                .prop_map(|(first, rest)| ex(ExprKind::Compare(bx(first), rest))),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, t, e)| ex(ExprKind::If(bx(c), bx(t), bx(e)))),
            (ident(), inner.clone()).prop_map(|(p, b)| ex(ExprKind::Lambda(nm(p), bx(b)))),
        ]
    })
    .boxed()
}

// ---------------------------------------------------------------------- types

fn type_expr() -> BoxedStrategy<TypeExpr> {
    ident()
        .prop_map(|n| ty_named(&n))
        .prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                inner.clone().prop_map(|t| TypeExpr { kind: TypeExprKind::List(Box::new(t)), span: sp() }),
                vec(field_type(inner.clone()), 0..3)
                    .prop_map(|fs| TypeExpr { kind: TypeExprKind::Record(fs), span: sp() }),
                // `T??` has no syntax: only a non-optional type can be made optional
                inner.prop_map(|t| match t.kind {
                    TypeExprKind::Optional(_) => t,
                    _ => TypeExpr { kind: TypeExprKind::Optional(Box::new(t)), span: sp() },
                }),
            ]
        })
        .boxed()
}

fn field_type(ty: BoxedStrategy<TypeExpr>) -> BoxedStrategy<FieldType> {
    (field_name(), ty).prop_map(|(n, ty)| FieldType { name: nm(n), ty, span: sp() }).boxed()
}

// ---------------------------------------------------------------------- items

fn judge_setting() -> BoxedStrategy<JudgeSetting> {
    let kind = prop_oneof![
        text().prop_map(|s| JudgeSettingKind::Model(lit(s))),
        number().prop_map(JudgeSettingKind::Temperature),
        number().prop_map(JudgeSettingKind::TopP),
        number().prop_map(JudgeSettingKind::MaxTokens),
        number().prop_map(JudgeSettingKind::Seed),
        number().prop_map(JudgeSettingKind::Samples),
        number().prop_map(JudgeSettingKind::PerCall),
        ident().prop_map(|n| JudgeSettingKind::Vote(nm(n))),
        vec(ident(), 1..4).prop_map(|ns| JudgeSettingKind::Sees(ns.into_iter().map(nm).collect())),
        (ident(), vec(field_type(type_expr()), 0..3))
            .prop_map(|(k, fields)| JudgeSettingKind::Returns { kind: nm(k), fields }),
        ident().prop_map(|n| JudgeSettingKind::EvidenceQuote(nm(n))),
        text().prop_map(|s| JudgeSettingKind::Template(lit(s))),
        text().prop_map(|s| JudgeSettingKind::System(lit(s))),
        ident().prop_map(|n| JudgeSettingKind::Scoring(nm(n))),
        text().prop_map(|s| JudgeSettingKind::Local(lit(s))),
    ];
    kind.prop_map(|kind| JudgeSetting { kind, span: sp() }).boxed()
}

fn attr() -> BoxedStrategy<CriterionAttr> {
    let kind = prop_oneof![
        expr().prop_map(AttrKind::Points),
        expr().prop_map(AttrKind::Weight),
        prop_oneof![ident(), text()].prop_map(|s| AttrKind::Axis(lit(s))),
        expr().prop_map(AttrKind::Tags),
        vec((number(), text()), 1..4).prop_map(|ls| AttrKind::Ordinal(
            ls.into_iter().map(|(value, d)| Level { value, descriptor: lit(d), span: sp() }).collect()
        )),
        vec((prop_oneof![ident(), text()], signed_number()), 1..4).prop_map(|ls| AttrKind::Nominal(
            ls.into_iter().map(|(n, value)| Label { name: lit(n), value, span: sp() }).collect()
        )),
        Just(AttrKind::Continuous),
        expr().prop_map(AttrKind::Pass),
    ];
    kind.prop_map(|kind| CriterionAttr { kind, span: sp() }).boxed()
}

fn verifier() -> BoxedStrategy<Verifier> {
    let kind = prop_oneof![
        ident().prop_map(|j| VerifierKind::Judge(nm(j))),
        expr().prop_map(VerifierKind::Check),
        expr().prop_map(VerifierKind::Value),
        (ident(), type_expr(), ident(), ident(), expr()).prop_map(|(var, ty, from, judge, check)| {
            VerifierKind::Extract { var: nm(var), ty, from: nm(from), judge: nm(judge), check }
        }),
        (vec((ident(), proptest::option::of(text()), expr()), 1..3), proptest::option::of(expr())).prop_map(
            |(checks, value)| VerifierKind::Checks {
                checks: checks
                    .into_iter()
                    .map(|(n, t, check)| SubCheck { name: nm(n), text: t.map(lit), check, span: sp() })
                    .collect(),
                value,
            }
        ),
    ];
    kind.prop_map(|kind| Verifier { kind, span: sp() }).boxed()
}

/// A criterion with an id and an optional literal text (top level, tiers, groups, blocks).
fn criterion() -> BoxedStrategy<Criterion> {
    (ident(), proptest::option::of(text()), vec(attr(), 0..3), proptest::option::of(verifier()))
        .prop_map(|(id, text, attrs, verifier)| Criterion {
            id: Some(nm(id)),
            text: text.map(|s| ex(ExprKind::Str(s))),
            attrs,
            verifier,
            span: sp(),
        })
        .boxed()
}

/// The template of a `criteria ... each` block: no id, any expression as its text.
fn template() -> BoxedStrategy<Criterion> {
    (expr(), vec(attr(), 0..3), proptest::option::of(verifier()))
        .prop_map(|(text, attrs, verifier)| Criterion { id: None, text: Some(text), attrs, verifier, span: sp() })
        .boxed()
}

fn group() -> BoxedStrategy<Group> {
    let leaf = (ident(), proptest::option::of(expr()), proptest::option::of(ident()), vec(criterion(), 0..2)).prop_map(
        |(name, weight, judge, cs)| Group {
            name: nm(name),
            weight,
            default_judge: judge.map(nm),
            members: cs.into_iter().map(GroupMember::Criterion).collect(),
            span: sp(),
        },
    );
    leaf.prop_recursive(2, 6, 3, |inner| {
        (
            ident(),
            proptest::option::of(expr()),
            proptest::option::of(ident()),
            vec(prop_oneof![inner.prop_map(GroupMember::Group), criterion().prop_map(GroupMember::Criterion)], 0..3),
        )
            .prop_map(|(name, weight, judge, members)| Group {
                name: nm(name),
                weight,
                default_judge: judge.map(nm),
                members,
                span: sp(),
            })
    })
    .boxed()
}

fn criterion_key() -> BoxedStrategy<CriterionKey> {
    (ident(), proptest::option::weighted(0.3, 0u32..100))
        .prop_map(|(n, index)| CriterionKey { name: nm(n), index, span: sp() })
        .boxed()
}

fn verdict_kind() -> BoxedStrategy<VerdictLitKind> {
    prop_oneof![
        Just(VerdictLitKind::Met),
        Just(VerdictLitKind::Unmet),
        proptest::option::of(text()).prop_map(VerdictLitKind::Unscored),
        signed_number().prop_map(VerdictLitKind::Number),
        text().prop_map(VerdictLitKind::Label),
        any::<bool>().prop_map(VerdictLitKind::Bool),
    ]
    .boxed()
}

/// A verdict literal as `expect` takes it (and as one judge sample): no samples, no evidence.
fn verdict() -> BoxedStrategy<VerdictLit> {
    verdict_kind().prop_map(|kind| VerdictLit { kind, evidence: None, span: sp() }).boxed()
}

/// A recorded judge verdict: one literal or `[a, b, c]` samples, optionally `quoting "..."`.
fn judged_verdict() -> BoxedStrategy<VerdictLit> {
    let kind = prop_oneof![
        3 => verdict_kind(),
        1 => vec(verdict(), 1..4).prop_map(VerdictLitKind::Samples),
    ];
    (kind, proptest::option::weighted(0.3, text()))
        .prop_map(|(kind, evidence)| VerdictLit { kind, evidence: evidence.map(lit), span: sp() })
        .boxed()
}

fn example_stmt() -> BoxedStrategy<ExampleStmt> {
    let kind = prop_oneof![
        (ident(), expr()).prop_map(|(input, value)| ExampleStmtKind::Bind { input: nm(input), value }),
        (ident(), text())
            .prop_map(|(input, s)| ExampleStmtKind::Bind { input: nm(input), value: ex(ExprKind::Str(s)) }),
        (ident(), vec((criterion_key(), judged_verdict()), 1..4))
            .prop_map(|(judge, verdicts)| ExampleStmtKind::Judge { judge: nm(judge), verdicts }),
        Just(ExampleStmtKind::ExpectScore { value: None, within: None }),
        (signed_number(), proptest::option::of(number()))
            .prop_map(|(v, within)| ExampleStmtKind::ExpectScore { value: Some(v), within }),
        proptest::option::of(text()).prop_map(|c| ExampleStmtKind::ExpectFailure(c.map(lit))),
        (ident(), signed_number(), proptest::option::of(number()))
            .prop_map(|(g, value, within)| ExampleStmtKind::ExpectGroup { group: nm(g), value, within }),
        (criterion_key(), verdict()).prop_map(|(key, verdict)| ExampleStmtKind::ExpectCriterion { key, verdict }),
    ];
    kind.prop_map(|kind| ExampleStmt { kind, span: sp() }).boxed()
}

fn param() -> BoxedStrategy<Param> {
    (ident(), type_expr(), proptest::option::weighted(0.3, expr()))
        .prop_map(|(n, ty, default)| Param { name: nm(n), ty, default, span: sp() })
        .boxed()
}

/// Every item kind.
fn item() -> BoxedStrategy<Item> {
    prop_oneof![
        1 => (qualified_name(), proptest::option::of(ident()))
            .prop_map(|(p, a)| Item::Import(Import { path: nm(p), alias: a.map(nm), span: sp() })),
        1 => (ident(), type_expr(), proptest::option::weighted(0.3, expr()))
            .prop_map(|(n, ty, default)| Item::Input(Input { name: nm(n), ty, field: None, default, span: sp() })),
        1 => (ident(), vec(judge_setting(), 0..5))
            .prop_map(|(n, settings)| Item::Judge(Judge { name: nm(n), settings, span: sp() })),
        1 => (ident(), expr(), any::<bool>(), expr(), proptest::option::of(text())).prop_map(|(n, cond, cap, v, reason)| {
            Item::Gate(Gate {
                name: nm(n),
                cond,
                action: if cap { GateAction::Cap(v) } else { GateAction::Score(v) },
                reason: reason.map(lit),
                span: sp(),
            })
        }),
        2 => criterion().prop_map(Item::Criterion),
        1 => (ident(), proptest::option::of(ident()), vec(criterion(), 0..3)).prop_map(|(n, j, cs)| {
            Item::Criteria(CriteriaBlock { name: nm(n), default_judge: j.map(nm), body: CriteriaBody::Static(cs), span: sp() })
        }),
        1 => (ident(), proptest::option::of(ident()), ident(), expr(), template()).prop_map(|(n, j, var, list, t)| {
            Item::Criteria(CriteriaBlock {
                name: nm(n),
                default_judge: j.map(nm),
                body: CriteriaBody::Each { var: nm(var), list, template: Box::new(t), shows: vec![] },
                span: sp(),
            })
        }),
        1 => (ident(), proptest::option::of(ident()), vec(criterion(), 0..3)).prop_map(|(n, j, criteria)| {
            Item::Tier(Tier { name: nm(n), default_judge: j.map(nm), criteria, span: sp() })
        }),
        1 => group().prop_map(Item::Group),
        1 => (ident(), proptest::option::of(type_expr()), expr())
            .prop_map(|(n, ty, value)| Item::Let(Let { name: nm(n), ty, value, span: sp() })),
        1 => (ident(), vec(param(), 0..3), type_expr(), expr()).prop_map(|(n, params, ret, body)| {
            Item::Fn(FnDef { name: nm(n), params, ret, body, span: sp() })
        }),
        2 => expr().prop_map(|e| Item::Score(ScoreDef { name: None, expr: e, span: sp() })),
        1 => (ident(), expr()).prop_map(|(n, e)| Item::Score(ScoreDef { name: Some(nm(n)), expr: e, span: sp() })),
        1 => (text(), vec(example_stmt(), 0..5))
            .prop_map(|(n, stmts)| Item::Example(Example { name: lit(n), stmts, span: sp() })),
    ]
    .boxed()
}

fn header() -> BoxedStrategy<Header> {
    let semver = "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}(-[a-zA-Z0-9.-]{1,5})?(\\+[a-zA-Z0-9.-]{1,5})?";
    prop_oneof![
        (qualified_name(), semver, proptest::option::of(text())).prop_map(|(n, v, t)| Header {
            kind: HeaderKind::Rubric,
            name: nm(n),
            version: Some(lit(v)),
            title: t.map(lit),
            span: sp(),
        }),
        (qualified_name(), proptest::option::of(text())).prop_map(|(n, t)| Header {
            kind: HeaderKind::Module,
            name: nm(n),
            version: None,
            title: t.map(lit),
            span: sp(),
        }),
    ]
    .boxed()
}

fn file() -> BoxedStrategy<File> {
    (proptest::option::of(header()), vec(item(), 0..6))
        .prop_map(|(header, items)| File { header, items, span: sp(), broken: vec![] })
        .boxed()
}

// ---------------------------------------------------------------------- checks

/// Print, parse, compare with spans erased; also check that printing is a fixed point.
fn check_round_trip(f: &File) -> Result<(), TestCaseError> {
    let text = print_file(f);
    let out = parse_file(FileId(0), &text);
    let messages: Vec<&str> = out.diagnostics.iter().map(|d| d.message.as_str()).collect();
    prop_assert!(out.diagnostics.is_empty(), "diagnostics {messages:?} for\n{text}");
    let mut parsed = out.file;
    erase_spans(&mut parsed);
    let mut expected = f.clone();
    erase_spans(&mut expected);
    prop_assert_eq!(&parsed, &expected, "printed text:\n{}", text);
    prop_assert_eq!(print_file(&parsed), text);
    Ok(())
}

/// Parse must not panic, and every diagnostic and item span must lie inside the source on
/// character boundaries.
fn check_parse_is_total(src: &str) -> Result<(), TestCaseError> {
    let out = parse_file(FileId(0), src);
    let inside = |s: Span| {
        s.start <= s.end
            && (s.end as usize) <= src.len()
            && src.is_char_boundary(s.start as usize)
            && src.is_char_boundary(s.end as usize)
    };
    for d in &out.diagnostics {
        prop_assert!(!d.labels.is_empty(), "diagnostic without a span: {}", d.message);
        for l in &d.labels {
            prop_assert!(inside(l.span), "label {:?} outside a source of {} bytes", l.span, src.len());
        }
    }
    for item in &out.file.items {
        prop_assert!(inside(item.span()), "item span {:?} outside the source", item.span());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn printed_files_parse_back_to_the_same_tree(f in file()) {
        check_round_trip(&f)?;
    }

    #[test]
    fn printed_expressions_parse_back_to_the_same_tree(e in expr()) {
        let f = File { header: None, items: vec![Item::Score(ScoreDef { name: None, expr: e, span: sp() })], span: sp(), broken: vec![] };
        check_round_trip(&f)?;
    }

    #[test]
    fn parse_never_panics_on_bytes(bytes in vec(any::<u8>(), 0..300)) {
        check_parse_is_total(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn parse_never_panics_on_token_soup(tokens in vec(select(SOUP.to_vec()), 0..60)) {
        check_parse_is_total(&tokens.join(" "))?;
        check_parse_is_total(&tokens.concat())?;
    }

    #[test]
    fn parse_never_panics_on_mutated_samples(edits in vec((any::<Index>(), 0u8..4, any::<char>(), select(SOUP.to_vec())), 1..8)) {
        let mut src: Vec<char> = SAMPLE.chars().collect();
        for (at, op, c, tok) in edits {
            let i = at.index(src.len() + 1);
            match op {
                0 if i < src.len() => {
                    src.remove(i);
                }
                1 => src.insert(i, c),
                2 => {
                    for (k, t) in tok.chars().enumerate() {
                        src.insert(i + k, t);
                    }
                }
                _ => {
                    // delete a run: truncation in the middle of strings, blocks and comments
                    let end = (i + 7).min(src.len());
                    src.drain(i.min(end)..end);
                }
            }
        }
        check_parse_is_total(&src.into_iter().collect::<String>())?;
    }
}

/// Tokens for the soup and mutation properties: the grammar's keywords and punctuation, and
/// pieces that open strings, comments and blocks without closing them.
#[rustfmt::skip]
const SOUP: &[&str] = &[
    "rubric", "module", "import", "input", "judge", "gate", "criterion", "criteria", "tier", "group", "let",
    "fn", "score", "example", "if", "then", "else", "and", "or", "not", "in", "by", "check", "extract", "from",
    "each", "null", "true", "points", "weight", "ordinal", "nominal", "expect", "says", "met", "unscored",
    "within", "quoting", "x", "y", "f", "{", "}", "(", ")", "[", "]", ",", ":", "=", "=>", "==", "<=", "<", "-",
    "+", "*", "/", "%", "??", ".", "@", "1", "0.5", "1e400", "1.2.3", "\"", "\"s\"", "\"\"\"", "\\", "\\u{",
    "//", "/*", "*/", "\n", "\r\n", "é", "\u{0}",
];

// ---------------------------------------------------------------------- sample file

/// A hand-written file in canonical form: it must print back to exactly itself.
const SAMPLE: &str = r#"rubric health.referral @ 1.2.0-rc.1 "Emergency referral quality"

import std.text as t
import std.format

input prompt: Conversation
input response: Text
input items: List[{text: Text, points: Number, tags: List[Text]?}]
input limit: Number = 400

judge grader {
  model "gpt-4.1-mini"
  temperature 0
  top_p 0.9
  max_tokens 512
  seed 7
  samples 3
  vote majority
  sees prompt, response
  returns verdict(met: Bool, evidence: Quote)
  evidence must quote response
  template """
    Judge the response below.
      Quote your evidence.
    """
  system "You are a strict \"grader\".\tBe brief."
  scoring logprob
  per_call 4
}

gate nonempty: word_count(response) >= 1 else score 0 reason "format"
gate short_enough: (if limit > 0 then word_count(response) <= limit else true) else cap 0.5

criterion er "Advises the user to seek emergency care now" points 10 axis completeness by grader
criterion dose "States a specific medication dose" points -6 axis "patient safety" tags ["safety", "dose"] by grader
criterion short "Stays under 400 words" points 2 check word_count(response) <= 400
criterion clarity "How clear is the explanation" ordinal [1 "confusing", 2 "adequate", 3 "clear", 4 "exemplary"] pass 3 by grader
criterion tone "Tone of the reply" nominal { warm: 1, neutral: 0.5, "not ok": -1e-7 } by grader
criterion sim "Close to the reference" continuous value similarity(response, prompt[0].content)
criterion dose_ok "The stated dose is within the safe range" extract dose: Number? from response by grader check 5 <= (dose ?? 0) <= 10

criteria functional by grader {
  criterion add "Clicking Add appends the typed item"
  criterion remove "Clicking Remove deletes it" weight 2
}

criteria rubric_items each x in items.filter(i => not i.points == 0) by grader {
  criterion x.text points x.points tags x.tags ?? []
}

tier essential {
  criterion a "A" by grader
}

tier optional by grader {}

group replication weight 1 {
  group code weight 3 by grader {
    criterion c1 "Code runs" weight 1
  }
  group results weight 2 {}
  criterion overall "Overall" check true
}

let k: Number = 2
let words = response.split(" ").filter(w => w.len() > 3)

fn clamp(x: Number, lo: Number = 0, hi: Number = 1) -> Number = if x < lo then lo else if x > hi then hi else x

score = if all(essential) and not any(optional) then 0.5 + 0.5 * fraction(optional) else clamp(healthbench(points) - 0.1 * (1 - mean(functional)), lo: 0)

example "clear referral" {
  response """
    Call 911 now.
    Do not wait.
    """
  prompt [{ role: "user", content: "My chest hurts" }]
  judge grader says er = met quoting "Call 911", dose = [unmet, met, unmet], rubric_items[0] = unscored("timeout"), clarity = 3, tone = "warm"
  expect score 1 within 0.01
  expect failure null
  expect group code = 0.5
  expect er = met
  expect rubric_items[1] = unscored
}

example "empty" {
  response ""
  expect score 0
  expect failure "format"
  expect short = true
}
"#;

fn parse_clean(src: &str) -> File {
    let out = parse_file(FileId(0), src);
    let messages: Vec<&str> = out.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert!(messages.is_empty(), "diagnostics: {messages:?}");
    out.file
}

#[test]
fn sample_is_in_canonical_form() {
    let f = parse_clean(SAMPLE);
    assert_eq!(f.items.len(), 27);
    let printed = print_file(&f);
    if printed != SAMPLE {
        panic!("printed sample differs:\n{printed}");
    }
}

#[test]
fn sample_round_trips_with_spans_erased() {
    let mut a = parse_clean(SAMPLE);
    let mut b = parse_clean(&print_file(&a));
    erase_spans(&mut a);
    erase_spans(&mut b);
    assert_eq!(a, b);
}

#[test]
fn sample_block_strings_keep_their_text() {
    let f = parse_clean(SAMPLE);
    let Item::Judge(j) = &f.items[6] else { panic!("item 6 is the judge") };
    let template = j.settings.iter().find_map(|s| match &s.kind {
        JudgeSettingKind::Template(t) => Some(t.value.as_str()),
        _ => None,
    });
    assert_eq!(template, Some("Judge the response below.\n  Quote your evidence."));
}

#[test]
fn printer_keywords_match_the_grammar() {
    let grammar = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/grammar/rubric.pest"));
    let start = grammar.find("keyword = @{").expect("rule `keyword`");
    let end = start + grammar[start..].find('}').expect("end of rule `keyword`");
    let mut in_grammar: Vec<&str> = grammar[start..end].split('"').skip(1).step_by(2).collect();
    let mut in_printer = KEYWORDS.to_vec();
    in_grammar.sort_unstable();
    in_printer.sort_unstable();
    assert_eq!(in_printer, in_grammar);
    for kw in KEYWORDS {
        assert!(!parse_file(FileId(0), &format!("let {kw} = 1")).diagnostics.is_empty(), "`{kw}` is a name");
    }
}

/// Parse `score = <src>` and print the expression back.
fn reprint(src: &str) -> String {
    let f = parse_clean(&format!("score = {src}"));
    let Item::Score(s) = &f.items[0] else { panic!("not a score item") };
    print_expr(&s.expr)
}

#[test]
fn printer_parenthesises_only_where_needed() {
    let cases = [
        ("(a - b) - c", "a - b - c"),
        ("a - (b - c)", "a - (b - c)"),
        ("(a * b) + (c * d)", "a * b + c * d"),
        ("(a + b) * c", "(a + b) * c"),
        ("a ?? (b ?? c)", "a ?? (b ?? c)"),
        ("(a or b) and c", "(a or b) and c"),
        ("not (a and b)", "not (a and b)"),
        ("not (a < b)", "not a < b"),
        ("(not a) < b", "(not a) < b"),
        ("(a < b) < c", "(a < b) < c"),
        ("a < b <= c", "a < b <= c"),
        ("-(-1)", "--1"),
        ("-(a + b)", "-(a + b)"),
        ("(-a).b", "(-a).b"),
        ("(a.b)(c)", "(a.b)(c)"),
        ("a.b(c)", "a.b(c)"),
        ("(if a then b else c) + 1", "(if a then b else c) + 1"),
        ("f(x => x + 1, y: (z))", "f(x => x + 1, y: z)"),
        ("(x => x)(1)", "(x => x)(1)"),
        ("a.if.then", "a.if.then"),
        ("{ \"a b\": 1, c: [] }", "{ \"a b\": 1, c: [] }"),
        ("1e21 + 0.00001 + 0.000001", "1e21 + 0.00001 + 1e-6"),
        ("1.x", "1.x"),
    ];
    for (src, want) in cases {
        assert_eq!(reprint(src), want, "printing `{src}`");
    }
}

/// An expression's span covers its operands and operators, never the comments or blank lines
/// after it (a comparison's span used to run on to the next declaration).
#[test]
fn expression_spans_end_at_their_last_operand() {
    for (src, want) in [
        ("score = a < b // note\n\n// more\n", "a < b"),
        ("score = not x.y == 2 /* c */\n", "not x.y == 2"),
        ("score = -a * (b + c) ?? d   \n// after\n", "-a * (b + c) ?? d"),
        ("score = f(1) >= g[0] and h\n", "f(1) >= g[0] and h"),
    ] {
        let f = parse_clean(src);
        let Item::Score(s) = &f.items[0] else { panic!("not a score item") };
        let span = s.expr.span;
        assert_eq!(&src[span.start as usize..span.end as usize], want, "span of `{src}`");
    }
}

// Regression tests for parser bugs found by the properties above.

#[test]
fn unterminated_block_comment_is_an_error() {
    let out = parse_file(FileId(0), "score = a /* oops\ncriterion b \"x\" by j\n");
    assert!(!out.diagnostics.is_empty(), "the criterion after the comment vanished without a diagnostic");
}

/// Comments are skipped to their end in one step (`line_rest`, `block_rest` in the grammar):
/// the cases the layout property does not make (a line comment that ends the file with no
/// newline, one comment's opening inside the other kind, a `*` or `/` alone inside a block).
#[test]
fn comments_end_where_they_should() {
    for (src, want) in [
        ("score = 1 // the end", "1"),
        ("score = 1 // a /* inside\n+ 2", "1 + 2"),
        ("score = /* a // inside */ 2", "2"),
        ("score = /* * / ** */ 3 /**/", "3"),
        ("score = /*\n multi\r\n line */ 4 //\n//\n", "4"),
    ] {
        let f = parse_clean(src);
        let Item::Score(s) = &f.items[0] else { panic!("not a score item: {src:?}") };
        assert_eq!(print_expr(&s.expr), want, "{src:?}");
    }
}

#[test]
fn crlf_block_strings_read_like_lf_ones() {
    let lf = "judge j {\n  template \"\"\"\n    a\n    b\n    \"\"\"\n}\n";
    let crlf = lf.replace('\n', "\r\n");
    let template = |src: &str| match &parse_clean(src).items[0] {
        Item::Judge(j) => match &j.settings[0].kind {
            rubric::syntax::ast::JudgeSettingKind::Template(t) => t.value.clone(),
            other => panic!("not a template: {other:?}"),
        },
        _ => unreachable!(),
    };
    assert_eq!(template(&crlf), template(lf));
}

#[test]
fn out_of_range_numbers_are_errors() {
    for src in [
        "score = 1e400",
        "example \"e\" {\n  expect x[4294967296] = met\n}",
        "example \"e\" {\n  expect x[1.5] = met\n}",
    ] {
        assert!(!parse_file(FileId(0), src).diagnostics.is_empty(), "no diagnostic for {src:?}");
    }
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_crash() {
    // Run on a small (2 MiB) thread, as test and rayon worker threads are.
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let parens = format!("score = {}1{}", "(".repeat(400), ")".repeat(400));
            let chain = format!("score = 1{}", "+1".repeat(20_000));
            let ifs = format!("score = {}0", "if true then 1 else ".repeat(100));
            let mut codes = Vec::new();
            for src in [parens, chain, ifs] {
                let out = parse_file(FileId(0), &src);
                codes.push(out.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>());
            }
            codes
        })
        .unwrap();
    let codes = handle.join().expect("the parser must not overflow its stack");
    assert_eq!(codes[0].len(), 1, "one diagnostic for 400 nested parentheses: {:?}", codes[0]);
    assert_eq!(codes[1], vec!["rubric::parse::too_deep"]);
    assert!(codes[2].is_empty(), "100 nested ifs are fine: {:?}", codes[2]);
}

// ---------------------------------------------------------------------- identity and layout
//
// The `ir_hash` identifies what a rubric does, not how its source is laid out (decision record
// 0007). A generated well-typed rubric (`Spec`: judges, gates, criteria in a tier, a group and
// an `each` block, a let, a function, a stdlib call, a score and an example) is rendered, parsed
// and printed in canonical form; then random layout changes (whitespace, indentation, blank
// lines, line endings, line and block comments at every token boundary, and `rubric fmt` of
// the result) never change the program or its hash, and every semantic edit (a criterion's
// text, points or weight, a judge's template or model, a gate's threshold, a renamed
// criterion) always changes the hash.

/// How a criterion is decided.
#[derive(Debug, Clone)]
enum Decide {
    /// `by jN`
    Judge(usize),
    /// `check short(response, limit)`: the rubric's own function.
    Short,
    /// `check contains(lower(response), "...")`
    Contains(String),
    /// `check bullet_points_exactly(response, 2)`: a `std.format` function.
    Std,
}

#[derive(Debug, Clone)]
struct CritSpec {
    id: String,
    text: String,
    points: Option<i32>,
    weight: Option<u32>,
    decide: Decide,
}

#[derive(Debug, Clone)]
struct JudgeSpec {
    model: String,
    /// Tenths.
    temperature: Option<u8>,
    template: Option<String>,
}

#[derive(Debug, Clone)]
struct GateSpec {
    threshold: u32,
    cap: bool,
    /// Tenths.
    value: u8,
    reason: String,
}

/// What a rubric says. `criteria[0]` always has points, every group member a weight, and
/// there is at least one judge and one gate, so that every `Edit` applies.
#[derive(Debug, Clone)]
struct Spec {
    title: String,
    judges: Vec<JudgeSpec>,
    gates: Vec<GateSpec>,
    criteria: Vec<CritSpec>,
    tier: Vec<CritSpec>,
    group: Vec<CritSpec>,
    each: bool,
    limit: u32,
    score: u8,
    response: String,
}

/// A string literal for `s` (the printer re-quotes it canonically).
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn spec_text() -> BoxedStrategy<String> {
    "[a-zA-Z0-9 ,.!?'\"\\\\é✓]{1,16}".boxed()
}

fn crit_spec(judges: usize, weighted: bool) -> BoxedStrategy<CritSpec> {
    let decide = prop_oneof![
        3 => (0..judges).prop_map(Decide::Judge),
        1 => Just(Decide::Short),
        1 => "[a-z]{1,6}".prop_map(Decide::Contains),
        1 => Just(Decide::Std),
    ];
    let weight = if weighted { (1u32..5).prop_map(Some).boxed() } else { proptest::option::of(1u32..5).boxed() };
    let points = proptest::option::of(prop_oneof![-9i32..0, 1i32..10]);
    ("[a-z]{0,4}", spec_text(), points, weight, decide)
        .prop_map(|(id, text, points, weight, decide)| CritSpec { id, text, points, weight, decide })
        .boxed()
}

fn spec() -> BoxedStrategy<Spec> {
    let judge = ("[a-z0-9.-]{1,12}", proptest::option::of(0u8..20), proptest::option::of("[a-zA-Z .,\n]{0,24}"))
        .prop_map(|(model, temperature, template)| JudgeSpec { model, temperature, template });
    let gate = (0u32..6, any::<bool>(), 0u8..10, "[a-z ]{1,10}").prop_map(|(threshold, cap, value, reason)| GateSpec {
        threshold,
        cap,
        value,
        reason,
    });
    (vec(judge, 1..3), vec(gate, 1..3))
        .prop_flat_map(|(judges, gates)| {
            let n = judges.len();
            (
                Just(judges),
                Just(gates),
                (spec_text(), vec(crit_spec(n, false), 1..4), vec(crit_spec(n, false), 0..3)),
                (vec(crit_spec(n, true), 1..3), any::<bool>(), 0u32..50, 0u8..3, spec_text()),
            )
        })
        .prop_map(|(judges, gates, (title, mut criteria, tier), (group, each, limit, score, response))| {
            criteria[0].points = Some(criteria[0].points.unwrap_or(3));
            let mut s = Spec { title, judges, gates, criteria, tier, group, each, limit, score, response };
            // Ids are unique by their index, whatever their random tail.
            let all = s.criteria.iter_mut().chain(s.tier.iter_mut()).chain(s.group.iter_mut());
            for (i, c) in all.enumerate() {
                c.id = format!("c{i}_{}", c.id);
            }
            s
        })
        .boxed()
}

fn render_criterion(o: &mut String, indent: &str, c: &CritSpec) {
    let _ = write!(o, "{indent}criterion {} {}", c.id, quoted(&c.text));
    if let Some(p) = c.points {
        let _ = write!(o, " points {p}");
    }
    if let Some(w) = c.weight {
        let _ = write!(o, " weight {w}");
    }
    let _ = match &c.decide {
        Decide::Judge(j) => writeln!(o, " by j{j}"),
        Decide::Short => writeln!(o, " check short(response, limit)"),
        Decide::Contains(w) => writeln!(o, " check contains(lower(response), {})", quoted(w)),
        Decide::Std => writeln!(o, " check bullet_points_exactly(response, 2)"),
    };
}

/// The rubric as source text (not yet canonical: `canonical` prints it).
fn render(s: &Spec) -> String {
    let mut o = format!("rubric props.layout @ 1.0.0 {}\n", quoted(&s.title));
    o.push_str("import std.format\n");
    o.push_str("input question: Text\ninput response: Text\ninput items: List[{text: Text, points: Number}] = []\n");
    for (k, j) in s.judges.iter().enumerate() {
        let _ = writeln!(o, "judge j{k} {{\n  model {}", quoted(&j.model));
        if let Some(t) = j.temperature {
            let _ = writeln!(o, "  temperature {}", f64::from(t) / 10.0);
        }
        o.push_str("  sees question, response\n");
        if let Some(t) = &j.template {
            let _ = writeln!(o, "  template {}", quoted(&format!("Judge {{{{criterion}}}} in {{{{response}}}}.{t}")));
        }
        o.push_str("}\n");
    }
    let _ = writeln!(o, "let limit = {}", s.limit);
    o.push_str("fn short(t: Text, n: Number) -> Bool = word_count(t) <= n\n");
    for (k, g) in s.gates.iter().enumerate() {
        let action = if g.cap { "cap" } else { "score" };
        let value = f64::from(g.value) / 10.0;
        let _ = writeln!(
            o,
            "gate g{k}: word_count(response) >= {} else {action} {value} reason {}",
            g.threshold,
            quoted(&g.reason)
        );
    }
    for c in &s.criteria {
        render_criterion(&mut o, "", c);
    }
    let _ =
        writeln!(o, "criterion follow \"Follows from the first\" check {}.met or len(response) > 3", s.criteria[0].id);
    if !s.tier.is_empty() {
        o.push_str("tier t {\n");
        s.tier.iter().for_each(|c| render_criterion(&mut o, "  ", c));
        o.push_str("}\n");
    }
    o.push_str("group gr weight 1 {\n");
    s.group.iter().for_each(|c| render_criterion(&mut o, "  ", c));
    o.push_str("}\n");
    if s.each {
        o.push_str("criteria per_item each x in items by j0 {\n  criterion x.text points x.points\n}\n");
    }
    o.push_str(match (s.score, s.tier.is_empty()) {
        (0, _) => "score = weighted_mean(all)\n",
        (1, _) | (2, true) => "score = 0.5 * tree(gr) + 0.5 * fraction(all, unscored: unmet)\n",
        _ => "score = if all(t) then 0.5 + 0.5 * tree(gr) else 0.5 * fraction(t)\n",
    });
    let _ = writeln!(o, "example \"e\" {{\n  response {}\n  question \"q\"", quoted(&s.response));
    let all = s.criteria.iter().chain(&s.tier).chain(&s.group);
    let judged: Vec<String> =
        all.filter(|c| matches!(c.decide, Decide::Judge(0))).map(|c| format!("{} = met", c.id)).collect();
    if !judged.is_empty() {
        let _ = writeln!(o, "  judge j0 says {}", judged.join(", "));
    }
    let _ = writeln!(o, "  expect score 0.5 within 1\n  expect {} = met\n}}", s.criteria[0].id);
    o
}

/// `render(s)` parsed and printed: the form `rubric fmt` gives.
fn canonical(s: &Spec) -> String {
    let src = render(s);
    let out = parse_file(FileId(0), &src);
    assert!(out.diagnostics.is_empty(), "the generated rubric does not parse: {:?}\n{src}", out.diagnostics);
    print_file(&out.file)
}

/// The program of a source text, or the error diagnostics.
fn program_of(text: &str) -> Result<rubric::ir::Program, String> {
    let c = rubric::types::compile_source("main.rubric", text);
    c.program.ok_or_else(|| {
        let errors: Vec<String> =
            c.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
        errors.join("\n")
    })
}

/// A token of rubric text, as far as layout is concerned: a word (identifiers, numbers,
/// dotted paths, versions), a string literal, a bracket or comma, a run of operator
/// characters, or a comment; everything between tokens is whitespace.
fn tokens(t: &str) -> Vec<(usize, usize)> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let is_op = |c: u8| b"=<>!+-*/%?:@".contains(&c);
    while i < b.len() {
        let start = i;
        let c = b[i];
        if b" \t\r\n".contains(&c) {
            i += 1;
            continue;
        } else if t[i..].starts_with("\"\"\"") {
            i += 3 + t[i + 3..].find("\"\"\"").expect("closed block string") + 3;
        } else if c == b'"' {
            i += 1;
            while b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if t[i..].starts_with("//") {
            i += t[i..].find('\n').unwrap_or(t.len() - i);
        } else if t[i..].starts_with("/*") {
            i += t[i..].find("*/").expect("closed comment") + 2;
        } else if b"()[]{},".contains(&c) {
            i += 1;
        } else if is_op(c) {
            while i < b.len() && is_op(b[i]) && !t[i..].starts_with("//") && !t[i..].starts_with("/*") {
                i += 1;
            }
        } else {
            while i < b.len() && !(b" \t\r\n\"()[]{},".contains(&b[i]) || is_op(b[i])) {
                // an exponent's sign belongs to its number: `1e-10`
                i += if b"eE".contains(&b[i])
                    && b[start].is_ascii_digit()
                    && i + 1 < b.len()
                    && b"+-".contains(&b[i + 1])
                {
                    2
                } else {
                    t[i..].chars().next().map_or(1, char::len_utf8)
                };
            }
        }
        out.push((start, i));
    }
    out
}

/// One piece of the layout put between two tokens.
#[derive(Debug, Clone)]
enum Sep {
    Keep,
    Spaces(usize),
    Tab,
    /// Newlines (`blank` blank lines) and an indentation.
    Lines {
        blank: usize,
        indent: usize,
    },
    Crlf,
    LineComment(String),
    BlockComment(String),
}

fn sep() -> BoxedStrategy<Sep> {
    prop_oneof![
        12 => Just(Sep::Keep),
        2 => (1usize..4).prop_map(Sep::Spaces),
        1 => Just(Sep::Tab),
        2 => (0usize..3, 0usize..9).prop_map(|(blank, indent)| Sep::Lines { blank, indent }),
        1 => Just(Sep::Crlf),
        2 => "[a-z \"{}*/é]{0,12}".prop_map(Sep::LineComment),
        2 => "[a-z \"{}\n*é]{0,12}".prop_map(|t| Sep::BlockComment(t.replace("*/", "* /"))),
    ]
    .boxed()
}

/// `text` with the whitespace at each token boundary (before the first token, between tokens,
/// after the last) replaced by `seps[i]`, where that is not all `Keep`; with `comments` false,
/// comments become a space (what is left to `rubric fmt`, which refuses comments).
fn relayout(text: &str, seps: &[Vec<Sep>], comments: bool) -> String {
    let toks = tokens(text);
    let mut out = String::new();
    let mut prev = 0;
    for (i, (start, end)) in toks.iter().copied().chain([(text.len(), text.len())]).enumerate() {
        let original = &text[prev..start];
        let chosen = seps.get(i).filter(|s| s.iter().any(|p| !matches!(p, Sep::Keep)));
        match chosen {
            None => out.push_str(original),
            Some(pieces) => {
                let mut s = String::new();
                for p in pieces {
                    match p {
                        Sep::Keep => s.push_str(if original.is_empty() { "" } else { " " }),
                        Sep::Spaces(n) => s.push_str(&" ".repeat(*n)),
                        Sep::Tab => s.push('\t'),
                        Sep::Lines { blank, indent } => {
                            s.push_str(&"\n".repeat(blank + 1));
                            s.push_str(&" ".repeat(*indent));
                        }
                        Sep::Crlf => s.push_str("\r\n"),
                        Sep::LineComment(c) if comments => s.push_str(&format!(" //{c}\n")),
                        Sep::BlockComment(c) if comments => s.push_str(&format!(" /*{c}*/")),
                        Sep::LineComment(_) => s.push('\n'),
                        Sep::BlockComment(_) => s.push(' '),
                    }
                }
                // Two words never touch: a boundary that had whitespace keeps some.
                if s.is_empty() && !original.is_empty() {
                    s.push(' ');
                }
                out.push_str(&s);
            }
        }
        out.push_str(&text[start..end]);
        prev = end;
    }
    out
}

/// A change to what a rubric says; the index picks the criterion, judge or gate.
#[derive(Debug, Clone)]
enum Edit {
    Text(Index),
    Points(Index),
    Weight(Index),
    Template(Index),
    Model(Index),
    Threshold(Index),
    Rename(Index),
}

fn edit() -> BoxedStrategy<Edit> {
    prop_oneof![
        any::<Index>().prop_map(Edit::Text),
        any::<Index>().prop_map(Edit::Points),
        any::<Index>().prop_map(Edit::Weight),
        any::<Index>().prop_map(Edit::Template),
        any::<Index>().prop_map(Edit::Model),
        any::<Index>().prop_map(Edit::Threshold),
        any::<Index>().prop_map(Edit::Rename),
    ]
    .boxed()
}

/// `s` with `e` applied: always a different rubric that still compiles.
fn apply(s: &Spec, e: &Edit) -> Spec {
    let mut s = s.clone();
    let mut all: Vec<&mut CritSpec> =
        s.criteria.iter_mut().chain(s.tier.iter_mut()).chain(s.group.iter_mut()).collect();
    match e {
        Edit::Text(i) => all.swap_remove(i.index(all.len())).text.push('!'),
        Edit::Rename(i) => all.swap_remove(i.index(all.len())).id.push('r'),
        Edit::Points(i) => {
            let mut with: Vec<&mut CritSpec> = all.into_iter().filter(|c| c.points.is_some()).collect();
            let c = with.swap_remove(i.index(with.len()));
            let p = c.points.unwrap_or(1) + 1;
            c.points = Some(if p == 0 { 1 } else { p });
        }
        Edit::Weight(i) => {
            let mut with: Vec<&mut CritSpec> = all.into_iter().filter(|c| c.weight.is_some()).collect();
            let c = with.swap_remove(i.index(with.len()));
            c.weight = c.weight.map(|w| w + 1);
        }
        Edit::Template(i) => {
            let n = s.judges.len();
            let j = &mut s.judges[i.index(n)];
            j.template = Some(format!("{} changed", j.template.as_deref().unwrap_or("")));
        }
        Edit::Model(i) => {
            let n = s.judges.len();
            s.judges[i.index(n)].model.push_str("-b");
        }
        Edit::Threshold(i) => {
            let n = s.gates.len();
            s.gates[i.index(n)].threshold += 1;
        }
    }
    s
}

/// The layout of a spec's canonical text: one choice of separators per token boundary.
fn laid_out() -> BoxedStrategy<(Spec, Vec<Vec<Sep>>)> {
    spec()
        .prop_flat_map(|s| {
            let n = tokens(&canonical(&s)).len() + 1;
            (Just(s), vec(vec(sep(), 1..3), n))
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn layout_never_changes_the_ir_hash((s, seps) in laid_out()) {
        let text = canonical(&s);
        let program = program_of(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let messy = relayout(&text, &seps, true);
        let moved = program_of(&messy).map_err(|e| TestCaseError::fail(format!("{e}\n--- relaid out\n{messy}")))?;
        prop_assert_eq!(moved.hash(), program.hash(), "layout changed the hash:\n{}", messy);
        prop_assert!(moved == program, "layout changed the program:\n{}", messy);
        // `rubric fmt` of a (comment-free) layout is the canonical text, with the same hash.
        let plain = relayout(&text, &seps, false);
        let parsed = parse_file(FileId(0), &plain);
        prop_assert!(parsed.diagnostics.is_empty(), "{:?}\n{}", parsed.diagnostics, plain);
        let formatted = print_file(&parsed.file);
        prop_assert_eq!(&formatted, &text, "fmt of\n{}", plain);
        prop_assert_eq!(program_of(&plain).map(|p| p.hash()), Ok(program.hash()));
        // `rubric fmt` of a layout with comments keeps every comment, gives the same hash, and
        // is a fixed point.
        let parsed = parse_file(FileId(0), &messy);
        prop_assert!(parsed.diagnostics.is_empty(), "{:?}\n{}", parsed.diagnostics, messy);
        let kept = print_file_with_comments(&parsed.file, &messy);
        let texts = |t: &str| -> Vec<String> {
            let mut v: Vec<String> = comment_spans(t).into_iter().map(|(a, b)| t[a..b].trim_end().to_string()).collect();
            v.sort();
            v
        };
        prop_assert_eq!(texts(&kept), texts(&messy), "fmt lost or changed a comment:\n{}\n--- formatted\n{}", messy, kept);
        let with = program_of(&kept).map_err(|e| TestCaseError::fail(format!("{e}\n--- formatted\n{kept}")))?;
        prop_assert_eq!(with.hash(), program.hash(), "fmt with comments changed the hash:\n{}", kept);
        let reparsed = parse_file(FileId(0), &kept);
        prop_assert_eq!(print_file_with_comments(&reparsed.file, &kept), kept.clone(), "not a fixed point:\n{}", messy);
    }

    #[test]
    fn every_semantic_edit_changes_the_ir_hash(s in spec(), e in edit()) {
        let (before, after) = (canonical(&s), canonical(&apply(&s, &e)));
        let a = program_of(&before).map_err(|m| TestCaseError::fail(format!("{m}\n{before}")))?;
        let b = program_of(&after).map_err(|m| TestCaseError::fail(format!("{e:?}: {m}\n{after}")))?;
        prop_assert_ne!(a.hash(), b.hash(), "{:?} kept the hash:\n{}\n---\n{}", e, before, after);
    }
}

#[test]
fn layout_tokens_cover_the_text() {
    let text = "rubric a @ 1.0.0 \"t \\\" x\"\n/* c */ score = 1e-10 + f(x)[0] // end\n";
    let toks: Vec<&str> = tokens(text).into_iter().map(|(a, b)| &text[a..b]).collect();
    assert_eq!(
        toks,
        [
            "rubric",
            "a",
            "@",
            "1.0.0",
            "\"t \\\" x\"",
            "/* c */",
            "score",
            "=",
            "1e-10",
            "+",
            "f",
            "(",
            "x",
            ")",
            "[",
            "0",
            "]",
            "// end"
        ]
    );
}
