//! Engine agreement on generated rubrics (proptest): a random rubric, well-typed by
//! construction — lets, functions, lambdas, judged criteria whose verdicts make values
//! unscored, optional inputs narrowed by `!= null` tests, a gate, an `each` block, aggregations with every unscored policy, arithmetic that
//! divides by zero and indexes out of range — is scored on random rows by every engine of this
//! build (the interpreter, Wasm, the JIT), and every engine's `RowResult` must equal the
//! interpreter's exactly (`Debug`, so every float and NaN). Every generated program also passes
//! the IR validator (`ir::validate`) that bundles are loaded with.

use proptest::prelude::*;
use proptest::sample::select;
use rubric::engine::{Engine, RowResult};
use rubric::interp::Interpreter;
use rubric::runtime::bind_row;
use rubric::types::compile_source;
use serde_json::{json, Map, Value as Json};

/// Every engine compared with the interpreter.
const ENGINES: &[&dyn Engine] = &[
    #[cfg(feature = "wasm")]
    &rubric::backend::wasm::WasmEngine::new(),
    #[cfg(feature = "jit")]
    &rubric::backend::jit::JitEngine::new(),
];

/// Everything a result says, exactly (`Debug` prints every float and NaN the same way).
fn exact(r: &RowResult) -> String {
    format!("{r:?}")
}

/// A generated rubric: well-typed by construction over a fixed set of inputs, with two judged
/// criteria (so unscored values flow through checks), functions, lets, a gate and a score.
#[derive(Debug, Clone)]
struct Case {
    src: String,
    rows: Vec<(Json, Map<String, Json>)>,
}

/// Number variables in scope (lambda parameters, function parameters).
#[derive(Clone, Default)]
struct Scope {
    nums: Vec<String>,
    texts: Vec<String>,
    /// Inside a function body: no inputs, lets, criteria or aggregations.
    in_fn: bool,
    /// Inside the `let` itself.
    no_let: bool,
    depth: u32,
}

impl Scope {
    fn deeper(&self) -> Scope {
        Scope { depth: self.depth + 1, ..self.clone() }
    }
    fn with_num(&self, v: &str) -> Scope {
        let mut s = self.deeper();
        s.nums.push(v.into());
        s
    }
    fn with_text(&self, v: &str) -> Scope {
        let mut s = self.deeper();
        s.texts.push(v.into());
        s
    }
}

const MAX_DEPTH: u32 = 3;

fn num_lit() -> impl Strategy<Value = String> {
    select(vec!["0", "1", "2", "3", "0.5", "0.25", "10", "1e300", "7"]).prop_map(String::from)
}

fn text_lit() -> impl Strategy<Value = String> {
    select(vec!["\"\"", "\"a\"", "\"yes\"", "\"Hello world\"", "\"b c\"", "\"WORLD\"", "\"oo\"", "\"ΣΑΣ\""])
        .prop_map(String::from)
}

fn pattern_lit() -> impl Strategy<Value = String> {
    select(vec![r#""(?i)hello""#, r#""\\bw\\w*""#, r#""^$""#, r#""(?i)σ""#, r#""o+""#, r#""(?m)^b""#])
        .prop_map(String::from)
}

fn num_expr(s: Scope) -> BoxedStrategy<String> {
    let mut leaves: Vec<BoxedStrategy<String>> = vec![num_lit().boxed()];
    for v in &s.nums {
        leaves.push(Just(v.clone()).boxed());
    }
    if !s.in_fn {
        leaves.push(
            select(vec![
                "x",
                "y",
                "len(xs)",
                "word_count(t)",
                "(o ?? 2)",
                "j1.value",
                "r.n",
                "j2.points",
                "(if o != null then o else 2)",
                "(if o == null then -1 else o * 2)",
            ])
            .prop_map(String::from)
            .boxed(),
        );
        if !s.no_let {
            leaves.push(Just("l1".to_string()).boxed());
        }
    }
    let leaf = proptest::strategy::Union::new(leaves).boxed();
    if s.depth >= MAX_DEPTH {
        return leaf;
    }
    let d = s.deeper();
    let mut options: Vec<BoxedStrategy<String>> = vec![
        leaf.clone(),
        leaf,
        (num_expr(d.clone()), select(vec!["+", "-", "*", "/", "%"]), num_expr(d.clone()))
            .prop_map(|(a, op, b)| format!("({a} {op} {b})"))
            .boxed(),
        num_expr(d.clone()).prop_map(|a| format!("(-{a})")).boxed(),
        (bool_expr(d.clone()), num_expr(d.clone()), num_expr(d.clone()))
            .prop_map(|(c, a, b)| format!("(if {c} then {a} else {b})"))
            .boxed(),
        (text_expr(d.clone())).prop_map(|t| format!("len({t})")).boxed(),
        (num_expr(d.clone()), num_expr(d.clone()), num_expr(d.clone()))
            .prop_map(|(a, lo, hi)| format!("clip({a}, {lo}, {hi})"))
            .boxed(),
        (num_expr(d.clone()), num_expr(d.clone()), num_expr(d.clone()))
            .prop_map(|(a, b, i)| format!("[{a}, {b}][{i}]"))
            .boxed(),
        (num_expr(d.clone()), text_expr(d.clone())).prop_map(|(a, t)| format!("{{n: {a}, s: {t}}}.n")).boxed(),
    ];
    if !s.in_fn {
        let v = format!("v{}", s.depth);
        options.push((num_expr(d.clone()), num_expr(d.clone())).prop_map(|(a, b)| format!("f(({a}), ({b}))")).boxed());
        let body = bool_expr(s.with_num(&v));
        let var = v.clone();
        options.push(body.prop_map(move |b| format!("count(xs, {var} => {b})")).boxed());
        options.push(num_expr(d.clone()).prop_map(|i| format!("xs[{i}]")).boxed());
        let var = v.clone();
        options.push(num_expr(s.with_num(&v)).prop_map(move |e| format!("(sum(map(xs, {var} => {e})) ?? 0)")).boxed());
        options.push(Just("(mean(xs) ?? -1)".to_string()).boxed());
    }
    proptest::strategy::Union::new(options).boxed()
}

fn bool_expr(s: Scope) -> BoxedStrategy<String> {
    let mut leaves: Vec<BoxedStrategy<String>> = vec![select(vec!["true", "false"]).prop_map(String::from).boxed()];
    if !s.in_fn {
        leaves.push(
            select(vec![
                "b",
                "j1.met",
                "j2.met",
                "j1.unscored",
                "(ob ?? false)",
                "r.ok",
                "(o != null and o > 1)",
                "(ob != null and ob)",
                "(on == null or len(on) > 2)",
                "(not (ob == null) and not ob)",
            ])
            .prop_map(String::from)
            .boxed(),
        );
    }
    let leaf = proptest::strategy::Union::new(leaves).boxed();
    if s.depth >= MAX_DEPTH {
        return leaf;
    }
    let d = s.deeper();
    let mut options: Vec<BoxedStrategy<String>> = vec![
        leaf.clone(),
        (num_expr(d.clone()), select(vec!["<", "<=", ">", ">=", "==", "!="]), num_expr(d.clone()))
            .prop_map(|(a, op, b)| format!("({a} {op} {b})"))
            .boxed(),
        (num_expr(d.clone()), num_expr(d.clone()), num_expr(d.clone()))
            .prop_map(|(a, b, c)| format!("({a} < {b} <= {c})"))
            .boxed(),
        (bool_expr(d.clone()), select(vec!["and", "or"]), bool_expr(d.clone()))
            .prop_map(|(a, op, b)| format!("({a} {op} {b})"))
            .boxed(),
        bool_expr(d.clone()).prop_map(|a| format!("(not {a})")).boxed(),
        (bool_expr(d.clone()), bool_expr(d.clone())).prop_map(|(a, b)| format!("({a} == {b})")).boxed(),
        (text_expr(d.clone()), text_expr(d.clone()), select(vec!["==", "<", "!="]))
            .prop_map(|(a, b, op)| format!("({a} {op} {b})"))
            .boxed(),
        (text_expr(d.clone()), text_lit()).prop_map(|(a, b)| format!("contains({a}, {b})")).boxed(),
        // The one-pass scans (`stdlib::scan`): constant needles and patterns, which the
        // interpreter and the JIT answer from one pass per text and Wasm (under limits) one by one.
        (text_expr(d.clone()), select(vec!["contains_ci", "contains"]), text_lit(), text_lit())
            .prop_map(|(a, f, b, c)| format!("({f}({a}, {b}) or {f}({a}, {c}))"))
            .boxed(),
        (text_expr(d.clone()), pattern_lit(), pattern_lit())
            .prop_map(|(a, p, q)| format!("(matches({a}, {p}) != matches({a}, {q}))"))
            .boxed(),
        (text_expr(d.clone()), text_lit(), text_lit())
            .prop_map(|(a, b, c)| {
                format!("(count_occurrences({a}, {b}) < count_occurrences({a}, {c}) + letter_count({a}, \"o\"))")
            })
            .boxed(),
        (num_expr(d.clone()), num_expr(d.clone()), num_expr(d.clone()), select(vec!["==", "!="]))
            .prop_map(|(a, b, c, op)| format!("([{a}, {b}] {op} [{c}, {b}])"))
            .boxed(),
        (text_expr(d.clone()), bool_expr(d.clone())).prop_map(|(t, b)| format!("{{ok: {b}, s: {t}}}.ok")).boxed(),
        (bool_expr(d.clone()), bool_expr(d.clone()), bool_expr(d.clone()))
            .prop_map(|(c, a, b)| format!("(if {c} then {a} else {b})"))
            .boxed(),
    ];
    if !s.in_fn {
        let (v, w) = (format!("v{}", s.depth), format!("w{}", s.depth));
        let var = v.clone();
        options.push(bool_expr(s.with_num(&v)).prop_map(move |b| format!("all(xs, {var} => {b})")).boxed());
        let var = w.clone();
        options.push(bool_expr(s.with_text(&w)).prop_map(move |b| format!("any(ws, {var} => {b})")).boxed());
        options.push(text_expr(d.clone()).prop_map(|t| format!("g({t})")).boxed());
        options.push(Just("(on == null)".to_string()).boxed());
    }
    proptest::strategy::Union::new(options).boxed()
}

fn text_expr(s: Scope) -> BoxedStrategy<String> {
    let mut leaves: Vec<BoxedStrategy<String>> = vec![text_lit().boxed()];
    for v in &s.texts {
        leaves.push(Just(v.clone()).boxed());
    }
    if !s.in_fn {
        leaves.push(
            select(vec!["t", "r.s", "(on ?? \"none\")", "(if on != null then on else \"none\")"])
                .prop_map(String::from)
                .boxed(),
        );
    }
    let leaf = proptest::strategy::Union::new(leaves).boxed();
    if s.depth >= MAX_DEPTH {
        return leaf;
    }
    let d = s.deeper();
    let mut options: Vec<BoxedStrategy<String>> = vec![
        leaf.clone(),
        leaf,
        (text_expr(d.clone()), text_expr(d.clone())).prop_map(|(a, b)| format!("({a} + {b})")).boxed(),
        text_expr(d.clone()).prop_map(|a| format!("lower({a})")).boxed(),
        (bool_expr(d.clone()), text_expr(d.clone()), text_expr(d.clone()))
            .prop_map(|(c, a, b)| format!("(if {c} then {a} else {b})"))
            .boxed(),
    ];
    if !s.in_fn {
        options.push(num_expr(d.clone()).prop_map(|i| format!("ws[{i}]")).boxed());
        let w = format!("w{}", s.depth);
        let var = w.clone();
        options.push(
            bool_expr(s.with_text(&w)).prop_map(move |b| format!("join(filter(ws, {var} => {b}), \",\")")).boxed(),
        );
    }
    proptest::strategy::Union::new(options).boxed()
}

fn verdict() -> impl Strategy<Value = Json> {
    select(vec![json!("met"), json!("unmet"), json!({"unscored": "judge_timeout"})])
}

fn row() -> impl Strategy<Value = (Json, Map<String, Json>)> {
    let num = || select(vec![0.0, 1.0, 2.0, 0.5, -3.0, 1e300, 7.25, 100.0]);
    (
        (
            num(),
            num(),
            select(vec![
                "",
                "Hello world",
                "a b c",
                "yes yes no",
                "Ünïcode ✓ text",
                "oooo WORLD words",
                "ΣΑΣ σας İstanbul",
            ]),
            any::<bool>(),
        ),
        (
            proptest::collection::vec(num(), 0..4),
            proptest::collection::vec(select(vec!["a", "b", "Hello", "yes", ""]), 0..4),
            proptest::option::of(num()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(select(vec!["n1", "Hello"])),
        ),
        (num(), any::<bool>(), select(vec!["s", "Hello world"])),
        (verdict(), verdict()),
    )
        .prop_map(|((x, y, t, b), (xs, ws, o, ob, on), (rn, rok, rs), (v1, v2))| {
            let row = json!({
                "x": x, "y": y, "t": t, "b": b, "xs": xs, "ws": ws, "o": o, "ob": ob, "on": on,
                "r": {"n": rn, "ok": rok, "s": rs},
            });
            let mut verdicts = Map::new();
            verdicts.insert("j1".into(), v1);
            verdicts.insert("j2".into(), v2);
            (row, verdicts)
        })
}

fn case() -> impl Strategy<Value = Case> {
    let top = Scope::default();
    let in_fn = Scope { in_fn: true, nums: vec!["p".into(), "q".into()], ..Scope::default() };
    let in_g = Scope { in_fn: true, texts: vec!["s".into()], ..Scope::default() };
    (
        (num_expr(in_fn), bool_expr(in_g)),
        num_expr(Scope { no_let: true, ..Scope::default() }),
        (bool_expr(top.clone()), bool_expr(top.clone()), num_expr(top.clone())),
        (bool_expr(top.clone()), num_expr(top.clone()), text_expr(top.clone())),
        (num_expr(top.clone()), any::<bool>(), select(vec!["skip", "unmet", "propagate"])),
        proptest::collection::vec(row(), 1..5),
    )
        .prop_map(|((f_body, g_body), l1, (c1, c3, c2), (gate, gate_value, text), (score, cap, policy), rows)| {
            let action = if cap { "cap" } else { "score" };
            let src = format!(
                r#"rubric prop.engines @ 1.0.0
input x: Number
input y: Number
input t: Text
input b: Bool
input xs: List[Number]
input ws: List[Text]
input o: Number?
input ob: Bool?
input on: Text?
input r: {{n: Number, ok: Bool, s: Text}}
judge j {{ model "m" sees t }}
fn f(p: Number, q: Number) -> Number = {f_body}
fn g(s: Text) -> Bool = {g_body}
criterion j1 "J1" by j
criterion j2 "J2" points 2 by j
let l1 = {l1}
criterion c1 "C1" check {c1}
gate g1: {gate} else {action} ({gate_value})
criterion c2 "C2" value {c2}
criterion c3 "C3" weight 2 check {c3}
criteria each_x each v in xs {{
  criterion {text} check v > 0 or c1.met
}}
score = ({score}) + mean(all, unscored: {policy})
"#
            );
            Case { src, rows }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_rubrics_give_identical_results_on_every_engine(c in case()) {
        let compiled = compile_source("<prop>", &c.src);
        let errors: Vec<String> =
            compiled.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
        // Generated rubrics are well-typed by construction; a static fact (a divisor that is
        // always 0) may still reject one.
        prop_assert!(errors.iter().all(|e| e.starts_with("rubric::facts::")), "{:?}\n{}", errors, c.src);
        let Some(p) = compiled.program else { return Err(TestCaseError::reject("rejected by a static fact")) };
        // Whatever the checker produces, the bundle reader's validator accepts.
        let valid = rubric::ir::validate::validate(&p, &rubric::types::CATALOGUE);
        prop_assert!(valid.is_ok(), "{}\n{}", valid.unwrap_err(), c.src);
        for (row, verdicts) in &c.rows {
            let inputs = bind_row(&p, row).map_err(|e| TestCaseError::fail(format!("{e}: {row}")))?;
            let a = exact(&Interpreter.evaluate(&p, &inputs, verdicts));
            for engine in ENGINES {
                let b = exact(&engine.evaluate(&p, &inputs, verdicts));
                prop_assert_eq!(&a, &b, "engine {}, row {}\n{}", engine.name(), row, c.src);
            }
        }
    }
}
