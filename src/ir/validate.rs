//! Validation of a program that did not come from this process's checker — a bundle's
//! `ir.json`, which anyone can edit and re-hash — before anything reads it: what a Wasm engine
//! checks of a module before it runs one, for the IR. A program that passes is one the checker
//! could have produced, as far as every later stage relies on it:
//!
//! - every index is in range and names the right kind of thing (inputs, lets, functions,
//!   criteria, sets, steps — `Member::Each(i)` names an `Each` step —, judges and their
//!   `sees`/`evidence_from`, sites — an id below `site_count` —, example bindings and verdict
//!   keys);
//! - locals are bound where they are read, with the binder's type, and stay within their
//!   frame's local count (a function's, an `each` block's, or what a root's binders need);
//! - every static criterion is evaluated by exactly one step, set 0 is `all`, groups form a
//!   tree, and an expression reads only criteria decided before it (the checker's order rule);
//! - lets read only earlier lets and function calls form no cycle (no expression can recurse);
//! - every intrinsic exists in the catalogue with its arity, and every expression's type is
//!   what its kind and operands give (the compiled engines choose value representations from
//!   these types);
//! - expressions and types nest no deeper than the parser allows, numbers are finite where
//!   the engines assume it, and strings, vectors and counts have sane sizes.
//!
//! The first problem found is returned with its path (`criteria[3].verifier.judge: judge 7
//! does not exist (the program has 2 judges)`). The rules are listed in
//! `docs/bundle-format.md`.
//!
//! The intrinsic catalogue comes from outside (`Intrinsics`), so that `ir` depends on nothing:
//! `types` implements it over `stdlib`.

use super::{
    assignable, consistent, join, subst, template_slots, unify, AggOp, BinOp, Bindings, CmpOp, Const, CriterionDecl,
    CriterionKind, Expr, ExprKind, HigherOrder, Member, Program, SetKind, SiteId, Step, Type, UnOp, Verifier,
    IR_VERSION,
};
use std::collections::BTreeSet;
use std::fmt;

/// The deepest expression a program may hold: the parser's limit (1,500 levels of nesting and
/// operator chains) with room for what elaboration adds (conversions, defaults filled in).
pub const MAX_EXPR_DEPTH: usize = 3000;
/// The deepest type a program may hold: far deeper than the parser lets nested list and
/// record literals or `map` calls go (under a hundred levels), and shallow enough that the
/// recursive operations on types (comparing, cloning, printing) never exhaust a stack.
pub const MAX_TYPE_DEPTH: usize = 256;
/// The deepest JSON `ir.json` may nest before it is parsed at all: every expression level is
/// at most five JSON levels (a comparison's operand), a type level at most three (a record
/// field), and the declarations around them a few.
pub const MAX_JSON_DEPTH: usize = 5 * MAX_EXPR_DEPTH + 3 * MAX_TYPE_DEPTH + 64;
/// The most elements of any vector of the program.
pub const MAX_ITEMS: usize = 1 << 20;
/// The longest string (a text constant, a template), in bytes.
pub const MAX_STRING: usize = 1 << 20;
/// The longest name (an input, criterion, set, judge, function, let, module), in bytes.
pub const MAX_NAME: usize = 4096;
/// The most locals one frame (a function, an `each` block, a root) may use.
pub const MAX_LOCALS: u32 = 1 << 16;
/// The most samples a judge may take per criterion (each is a request).
pub const MAX_SAMPLES: u32 = 1000;
/// The deepest nesting of groups.
pub const MAX_GROUP_DEPTH: usize = 256;

/// The judge template slots that are not inputs.
pub const TEMPLATE_KEYWORDS: &[&str] = &["criterion", "levels", "labels", "criteria"];
/// What a judge may return.
pub const JUDGE_RETURNS: &[&str] = &["verdict", "level", "label", "value", "extract", "preference", "ranking"];
/// The slots a comparing judge's template has besides [`TEMPLATE_KEYWORDS`]: its candidates in
/// the order shown.
pub const COMPARE_SLOTS: &[&str] = &["first", "second"];

/// The template slot of a group judge: every rollout, each in its fence.
pub const ROLLOUT_SLOTS: &[&str] = &["rollouts"];

/// The template slots a judge has besides the keywords and the inputs it sees: a comparing
/// judge's candidates, a group judge's rollouts.
pub fn extra_slots(j: &super::JudgeDecl) -> &'static [&'static str] {
    if j.compares.is_some() {
        COMPARE_SLOTS
    } else if j.rollouts.is_some() {
        ROLLOUT_SLOTS
    } else {
        &[]
    }
}

/// The names `each` blocks decided by judge `judge` show it (`shows`): slots its template may
/// have besides the inputs it sees.
pub fn shown_to(p: &super::Program, judge: u32) -> impl Iterator<Item = &str> {
    p.steps
        .iter()
        .filter_map(move |s| match s {
            super::Step::Each(e) if matches!(e.template.verifier, super::Verifier::Judge { judge: j } if j == judge) => {
                Some(e.shows.iter().map(|x| x.name.as_str()))
            }
            _ => None,
        })
        .flatten()
}

/// The intrinsics a program may call: the parameter types and the result type (with type
/// variables `T`, `U`) of intrinsic `name`#`overload` of the catalogue, or `None`.
pub trait Intrinsics: Sync + fmt::Debug {
    fn signature(&self, name: &str, overload: u32) -> Option<(&[Type], &Type)>;
}

/// Why a program is invalid: the first problem found and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Where, as fields and indices from the program (`criteria[3].verifier.judge`).
    pub path: String,
    pub message: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for Invalid {}

/// Check `p` against every rule above; `Ok` means every later stage may trust it.
pub fn validate(p: &Program, intrinsics: &dyn Intrinsics) -> Result<(), Invalid> {
    Validator::new(p, intrinsics).program()
}

type R<T = ()> = Result<T, Invalid>;

#[derive(Debug, Clone)]
enum Seg {
    Key(&'static str),
    Index(usize),
}

/// What an expression may read, by where it stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    /// A function body: its parameters, other functions and intrinsics only.
    Function(u32),
    /// A gate, criterion or `each` block at this step: criteria of earlier steps, lets that
    /// need no later criterion.
    Step(u32),
    /// The score and the reward's penalty: everything.
    Score,
    /// `lets[i]`: earlier lets, and any criterion (the reads decide where it may be used).
    Let(u32),
    /// An input's default: constants only.
    Default,
    /// An example's binding: constants and lets.
    Example,
}

/// One frame of locals: the expressions evaluated with one `locals` vector.
struct Frame {
    place: Place,
    /// Locals in scope, innermost last, with their types.
    env: Vec<(u32, Type)>,
    /// Locals the frame can bind: parameters, binders (`map`, `filter`...), the element of an
    /// `each` block, an extracted value.
    slots: u64,
    /// The highest local index used.
    max_local: Option<u32>,
    /// For a `let`: the first step at which everything it reads is decided.
    ready: u32,
}

impl Frame {
    fn new(place: Place) -> Frame {
        Frame { place, env: Vec::new(), slots: 0, max_local: None, ready: 0 }
    }

    fn bind(&mut self, local: u32, ty: Type) {
        self.slots += 1;
        self.max_local = Some(self.max_local.map_or(local, |m| m.max(local)));
        self.env.push((local, ty));
    }

    fn lookup(&self, local: u32) -> Option<&Type> {
        self.env.iter().rev().find(|(l, _)| *l == local).map(|(_, t)| t)
    }
}

struct Validator<'p> {
    p: &'p Program,
    intrinsics: &'p dyn Intrinsics,
    path: Vec<Seg>,
    /// The step that evaluates each static criterion.
    crit_step: Vec<u32>,
    /// Per let: the first step at which it may be read.
    let_ready: Vec<u32>,
    /// Functions each function calls.
    calls: Vec<Vec<u32>>,
}

fn count(what: &str, n: usize) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn kind_name(e: &ExprKind) -> &'static str {
    match e {
        ExprKind::Const(_) => "constant",
        ExprKind::Input(_) => "input",
        ExprKind::Local(_) => "local",
        ExprKind::Let(_) => "let",
        ExprKind::Criterion(_) => "criterion",
        ExprKind::List(_) => "list",
        ExprKind::Record(_) => "record",
        ExprKind::Field { .. } => "field",
        ExprKind::Index { .. } => "index",
        ExprKind::Unary { .. } => "unary operation",
        ExprKind::Binary { .. } => "binary operation",
        ExprKind::Compare { .. } => "comparison",
        ExprKind::If { .. } => "`if`",
        ExprKind::Intrinsic { .. } => "intrinsic call",
        ExprKind::Call { .. } => "function call",
        ExprKind::Aggregate { .. } => "aggregation",
        ExprKind::HigherOrder { .. } => "higher-order call",
        ExprKind::Narrowed(_) => "narrowed value",
    }
}

impl<'p> Validator<'p> {
    fn new(p: &'p Program, intrinsics: &'p dyn Intrinsics) -> Validator<'p> {
        Validator {
            p,
            intrinsics,
            path: Vec::new(),
            crit_step: Vec::new(),
            let_ready: Vec::new(),
            calls: vec![Vec::new(); p.functions.len()],
        }
    }

    // ------------------------------------------------------------------ errors and paths

    fn err(&self, message: impl Into<String>) -> Invalid {
        // A path into a deep expression is shortened in the middle.
        const KEEP: usize = 16;
        let mut path = String::new();
        let n = self.path.len();
        for (i, seg) in self.path.iter().enumerate() {
            if n > 3 * KEEP && (KEEP..n - KEEP).contains(&i) {
                if i == KEEP {
                    path.push_str(&format!(".…{} more…", n - 2 * KEEP));
                }
                continue;
            }
            match seg {
                Seg::Key(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Seg::Index(i) => path.push_str(&format!("[{i}]")),
            }
        }
        Invalid { path, message: message.into() }
    }

    fn want(&self, ok: bool, message: impl FnOnce() -> String) -> R {
        if ok {
            Ok(())
        } else {
            Err(self.err(message()))
        }
    }

    fn at<T>(&mut self, key: &'static str, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.path.push(Seg::Key(key));
        let r = f(self)?;
        self.path.pop();
        Ok(r)
    }

    fn at_index<T>(&mut self, key: &'static str, i: usize, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.path.push(Seg::Key(key));
        self.path.push(Seg::Index(i));
        let r = f(self)?;
        self.path.pop();
        self.path.pop();
        Ok(r)
    }

    fn items(&self, what: &str, n: usize) -> R {
        self.want(n <= MAX_ITEMS, || format!("{} are over the limit of {MAX_ITEMS}", count(what, n)))
    }

    fn string(&self, s: &str) -> R {
        self.want(s.len() <= MAX_STRING, || format!("a string of {} bytes is over the limit of {MAX_STRING}", s.len()))
    }

    fn name(&self, s: &str) -> R {
        self.want(!s.is_empty(), || "a name must not be empty".into())?;
        self.want(s.len() <= MAX_NAME, || format!("a name of {} bytes is over the limit of {MAX_NAME}", s.len()))
    }

    fn finite(&self, x: f64) -> R {
        self.want(x.is_finite(), || format!("{x} is not a finite number"))
    }

    fn index(&self, what: &str, i: u32, len: usize) -> R {
        self.want((i as usize) < len, || format!("{what} {i} does not exist (the program has {})", count(what, len)))
    }

    /// The one place site ids are checked: below `site_count`. Where each site lies is the
    /// `SiteTable` beside the program, which the bundle reader checks against the count.
    fn site(&self, s: SiteId) -> R {
        self.index("site", s, self.p.site_count as usize)
    }

    // ------------------------------------------------------------------ types

    /// A type as expressions carry it: no type variables, sets or policies; records sorted.
    fn expr_type(&self, t: &Type) -> R {
        self.type_shape(t, 0, false)
    }

    /// A type as written in a declaration: also no `Null`, `Any` or `Verdict`.
    fn written_type(&self, t: &Type) -> R {
        self.type_shape(t, 0, true)
    }

    fn type_shape(&self, t: &Type, depth: usize, written: bool) -> R {
        self.want(depth < MAX_TYPE_DEPTH, || format!("a type nests deeper than {MAX_TYPE_DEPTH} levels"))?;
        match t {
            Type::Bool | Type::Number | Type::Text | Type::Json => Ok(()),
            Type::Null | Type::Any | Type::Verdict if !written => Ok(()),
            Type::List(inner) => self.type_shape(inner, depth + 1, written),
            Type::Optional(inner) => {
                self.want(!matches!(**inner, Type::Optional(_) | Type::Null | Type::Any), || {
                    format!("`{t}` is not a type (an optional of an optional, null or `_`)")
                })?;
                self.type_shape(inner, depth + 1, written)
            }
            Type::Record(fields) => {
                self.items("record field", fields.len())?;
                for (k, (n, ft)) in fields.iter().enumerate() {
                    self.name(n)?;
                    if k > 0 {
                        let prev = &fields[k - 1].0;
                        self.want(prev < n, || {
                            format!("the fields of a record type are not sorted by name: `{prev}` before `{n}`")
                        })?;
                    }
                    self.type_shape(ft, depth + 1, written)?;
                }
                Ok(())
            }
            other => Err(self.err(format!(
                "`{}` is not a type {}",
                type_word(other),
                if written { "a declaration can have" } else { "an expression can have" }
            ))),
        }
    }

    /// `e.ty == want`.
    fn ty_is(&self, e: &Expr, want: &Type) -> R {
        self.want(e.ty == *want, || format!("this {} has type `{}`, but it is `{want}`", kind_name(&e.kind), e.ty))
    }

    /// `e`'s type can be used where `want` is expected.
    fn assignable_to(&self, e: &Expr, want: &Type, what: &str) -> R {
        self.want(assignable(&e.ty, want), || format!("{what} must be `{want}`, found `{}`", e.ty))
    }

    // ------------------------------------------------------------------ the program

    fn program(&mut self) -> R {
        let p = self.p;
        self.at("ir_version", |v| {
            v.want(p.ir_version == IR_VERSION, || format!("IR version {} is not {IR_VERSION}", p.ir_version))
        })?;
        self.at("rubric", |v| {
            v.at("name", |v| v.string(&p.rubric.name))?;
            v.at("version", |v| v.string(&p.rubric.version))?;
            p.rubric.title.as_deref().map_or(Ok(()), |t| v.at("title", |v| v.string(t)))
        })?;
        for (what, n) in [
            ("inputs", p.inputs.len()),
            ("judges", p.judges.len()),
            ("functions", p.functions.len()),
            ("lets", p.lets.len()),
            ("steps", p.steps.len()),
            ("criteria", p.criteria.len()),
            ("sets", p.sets.len()),
            ("examples", p.examples.len()),
        ] {
            self.at(what, |v| v.items("item", n))?;
        }
        self.at("site_count", |v| v.items("site", p.site_count as usize))?;
        self.names()?;
        for (i, input) in p.inputs.iter().enumerate() {
            self.at_index("inputs", i, |v| {
                v.at("ty", |v| v.written_type(&input.ty))?;
                v.at("field", |v| {
                    v.want(input.field.as_ref().is_none_or(|f| !f.is_empty() && f.len() <= MAX_STRING), || {
                        "an input's field is a non-empty name of at most MAX_STRING bytes".to_string()
                    })
                })
            })?;
        }
        for i in 0..p.judges.len() {
            self.at_index("judges", i, |v| v.judge(i))?;
        }
        for i in 0..p.generators.len() {
            self.at_index("generators", i, |v| v.generator(i))?;
        }
        for (i, f) in p.functions.iter().enumerate() {
            self.at_index("functions", i, |v| {
                for (k, (n, t)) in f.params.iter().enumerate() {
                    v.at_index("params", k, |v| {
                        v.name(n)?;
                        v.written_type(t)
                    })?;
                }
                v.at("ret", |v| v.written_type(&f.ret))?;
                v.at("locals", |v| {
                    v.want(f.locals as usize >= f.params.len() && f.locals <= MAX_LOCALS, || {
                        format!(
                            "{} locals for {}: a function has at least one per parameter and at most {MAX_LOCALS}",
                            f.locals,
                            count("parameter", f.params.len())
                        )
                    })
                })
            })?;
        }
        self.steps_structure()?;
        self.sets()?;
        // Expressions, in an order where everything an expression refers to is known.
        for i in 0..p.lets.len() {
            self.at_index("lets", i, |v| v.let_decl(i))?;
        }
        for (i, input) in p.inputs.iter().enumerate() {
            if let Some(d) = &input.default {
                self.at_index("inputs", i, |v| {
                    v.at("default", |v| {
                        let mut f = Frame::new(Place::Default);
                        v.expr(d, &mut f, 0)?;
                        v.close(&f, None)?;
                        v.assignable_to(d, &input.ty, "the default")
                    })
                })?;
            }
        }
        for i in 0..p.functions.len() {
            self.at_index("functions", i, |v| v.function_body(i))?;
        }
        self.call_cycles()?;
        for i in 0..p.steps.len() {
            self.at_index("steps", i, |v| v.step_exprs(i))?;
        }
        for i in 0..p.criteria.len() {
            let step = self.crit_step[i];
            self.at_index("criteria", i, |v| {
                let mut f = Frame::new(Place::Step(step));
                v.criterion(&p.criteria[i], &mut f, false)?;
                v.close(&f, None)
            })?;
        }
        self.at("score", |v| {
            let mut f = Frame::new(Place::Score);
            v.expr(&p.score, &mut f, 0)?;
            v.close(&f, None)?;
            v.assignable_to(&p.score, &Type::Number, "the score")
        })?;
        for (i, s) in p.scores.iter().enumerate() {
            self.at_index("scores", i, |v| {
                v.site(s.site)?;
                let mut f = Frame::new(Place::Score);
                v.expr(&s.expr, &mut f, 0)?;
                v.close(&f, None)?;
                v.assignable_to(&s.expr, &Type::Number, "a score")
            })?;
        }
        if let Some(r) = &p.reward {
            self.at("reward", |v| {
                v.site(r.site)?;
                v.at("epsilon", |v| {
                    v.finite(r.epsilon)?;
                    v.want(r.epsilon > 0.0, || format!("epsilon {} is not above 0", r.epsilon))
                })?;
                if let Some((lo, hi)) = r.clip {
                    v.at("clip", |v| {
                        v.finite(lo)?;
                        v.finite(hi)?;
                        v.want(lo < hi, || format!("the clip bounds {lo} and {hi} are not in increasing order"))
                    })?;
                }
                if let Some(e) = &r.penalty {
                    v.at("penalty", |v| {
                        let mut f = Frame::new(Place::Score);
                        v.expr(e, &mut f, 0)?;
                        v.close(&f, None)?;
                        v.assignable_to(e, &Type::Number, "the penalty")
                    })?;
                }
                Ok(())
            })?;
        }
        for i in 0..p.examples.len() {
            self.at_index("examples", i, |v| v.example(i))?;
        }
        Ok(())
    }

    /// Every top-level name is non-empty and used once (the checker's one namespace: inputs,
    /// lets, criteria, sets, judges and the root module's functions), so that ids and names
    /// find one thing.
    fn names(&mut self) -> R {
        let p = self.p;
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let lists: [(&'static str, Vec<&str>); 6] = [
            ("inputs", p.inputs.iter().map(|x| x.name.as_str()).collect()),
            ("judges", p.judges.iter().map(|x| x.name.as_str()).collect()),
            ("lets", p.lets.iter().map(|x| x.name.as_str()).collect()),
            ("criteria", p.criteria.iter().map(|x| x.id.as_str()).collect()),
            ("sets", p.sets.iter().map(|x| x.name.as_str()).collect()),
            ("functions", p.functions.iter().map(|x| x.name.as_str()).collect()),
        ];
        for (what, names) in lists {
            for (i, n) in names.into_iter().enumerate() {
                self.at_index(what, i, |v| {
                    v.at(if what == "criteria" { "id" } else { "name" }, |v| {
                        v.name(n)?;
                        // Functions of imported modules are qualified (`std.text.f`), so they
                        // cannot clash with a root-level name.
                        v.want(seen.insert(n), || format!("`{n}` is defined twice"))
                    })
                })?;
            }
        }
        Ok(())
    }

    /// A generator: a name of its own, its inputs in range, a list input to fill that it does not
    /// also see (and no other generator fills), sampling settings in range.
    fn generator(&mut self, i: usize) -> R {
        let p = self.p;
        let g = &p.generators[i];
        self.at("name", |v| {
            v.name(&g.name)?;
            v.want(p.generators[..i].iter().all(|o| o.name != g.name), || format!("`{}` is defined twice", g.name))
        })?;
        self.sampling(g.model.as_deref(), g.temperature, g.top_p)?;
        self.at("template", |v| v.string(&g.template))?;
        if let Some(s) = &g.system {
            self.at("system", |v| v.string(s))?;
        }
        let sees = self.sees(&g.sees)?;
        self.at("fills", |v| {
            v.index("input", g.fills, p.inputs.len())?;
            let ty = &p.inputs[g.fills as usize].ty;
            v.want(matches!(ty.strip_optional(), Type::List(_)), || {
                format!("it fills an input of type {ty}, not a list")
            })?;
            v.want(!sees.contains(&g.fills), || "it also sees the input it fills".into())?;
            v.want(p.generators[..i].iter().all(|o| o.fills != g.fills), || "another generator fills that input".into())
        })
    }

    /// A judge's or generator's model pin and sampling settings, each within its range.
    fn sampling(&mut self, model: Option<&str>, temperature: Option<f64>, top_p: Option<f64>) -> R {
        if let Some(m) = model {
            self.at("model", |v| v.string(m))?;
        }
        if let Some(t) = temperature {
            self.at("temperature", |v| {
                v.finite(t)?;
                v.want((0.0..=2.0).contains(&t), || format!("temperature {t} is outside [0, 2]"))
            })?;
        }
        if let Some(t) = top_p {
            self.at("top_p", |v| {
                v.finite(t)?;
                v.want((0.0..=1.0).contains(&t), || format!("top_p {t} is outside [0, 1]"))
            })?;
        }
        Ok(())
    }

    /// The inputs a judge or generator sees: each an input, none twice. Returns them as a set.
    fn sees(&mut self, sees: &[u32]) -> R<BTreeSet<u32>> {
        let n = self.p.inputs.len();
        let mut seen = BTreeSet::new();
        for (k, s) in sees.iter().enumerate() {
            self.at_index("sees", k, |v| {
                v.index("input", *s, n)?;
                v.want(seen.insert(*s), || format!("input {s} is listed twice"))
            })?;
        }
        Ok(seen)
    }

    fn judge(&mut self, i: usize) -> R {
        let p = self.p;
        let j = &p.judges[i];
        self.sampling(j.model.as_deref(), j.temperature, j.top_p)?;
        self.at("min_samples", |v| {
            v.want(j.min_samples.is_none_or(|m| (1..=j.samples).contains(&m)), || {
                format!("min_samples {:?}: from 1 to the judge's {} samples", j.min_samples, j.samples)
            })
        })?;
        self.at("samples", |v| {
            v.want((1..=MAX_SAMPLES).contains(&j.samples), || {
                format!("{} samples: a judge takes from 1 to {MAX_SAMPLES}", j.samples)
            })
        })?;
        self.at("per_call", |v| v.want(j.per_call >= 1, || "a judge decides at least 1 criterion per call".into()))?;
        let sees = self.sees(&j.sees)?;
        self.at("returns", |v| {
            v.want(JUDGE_RETURNS.contains(&j.returns.as_str()), || format!("unknown reply kind `{}`", j.returns))
        })?;
        self.items("reply field", j.reply_fields.len())?;
        for (k, (n, t)) in j.reply_fields.iter().enumerate() {
            self.at_index("reply_fields", k, |v| {
                v.name(n)?;
                v.written_type(t)
            })?;
        }
        if let Some(e) = j.evidence_from {
            self.at("evidence_from", |v| {
                v.index("input", e, p.inputs.len())?;
                v.want(sees.contains(&e), || {
                    format!("evidence must quote input `{}`, which the judge does not see", p.inputs[e as usize].name)
                })
            })?;
        }
        if let Some(t) = &j.template {
            self.at("template", |v| {
                v.string(t)?;
                for slot in template_slots(t) {
                    if TEMPLATE_KEYWORDS.contains(&slot.as_str()) || extra_slots(j).contains(&slot.as_str()) {
                        continue;
                    }
                    let seen = p.input_index(&slot).is_some_and(|k| sees.contains(&(k as u32)));
                    let shown = shown_to(p, i as u32).any(|n| n == slot);
                    v.want(seen || shown, || {
                        format!("the template renders `{slot}`, which is not an input the judge sees nor shown to it")
                    })?;
                }
                Ok(())
            })?;
        }
        if let Some(s) = &j.system {
            self.at("system", |v| v.string(s))?;
        }
        if let Some(dir) = &j.local {
            self.at("local", |v| {
                v.string(dir)?;
                v.want(!dir.trim().is_empty(), || "a local judge needs a model directory".into())?;
                v.want(j.samples == 1 && j.per_call == 1 && j.evidence_from.is_none(), || {
                    "a local judge takes one sample, one criterion per call and no evidence rule".into()
                })?;
                v.want(j.scoring == super::Scoring::Logprob, || "a local judge scores by log-probability".into())
            })?;
        }
        self.at("compares", |v| match &j.compares {
            Some(c) => {
                v.index("input", c.first, p.inputs.len())?;
                v.index("input", c.second, p.inputs.len())?;
                v.want(c.first != c.second, || "a judge compares two different inputs".into())?;
                v.want(!sees.contains(&c.first) && !sees.contains(&c.second), || {
                    "a compared input is shown as a candidate, never by name in `sees`".into()
                })?;
                v.want(j.returns == "preference", || "a comparing judge returns a preference".into())?;
                v.want(
                    j.local.is_none() && j.jury.is_none() && j.cascade.is_none() && j.evidence_from.is_none(),
                    || "a comparing judge is not local, a jury or a cascade, and has no evidence rule".into(),
                )
            }
            None => {
                v.want(j.returns != "preference", || "only a comparing judge returns a preference".into())?;
                v.want(j.order != super::Order::Both, || "`order both` is for a comparing judge".into())
            }
        })?;
        self.at("rollouts", |v| match j.rollouts {
            Some(r) => {
                v.index("input", r, p.inputs.len())?;
                v.want(!sees.contains(&r), || "a rollout is shown in its own fence, never by name in `sees`".into())?;
                v.want(j.returns == "value" || j.returns == "ranking", || {
                    "a group judge returns a value per rollout or a ranking".into()
                })?;
                v.want(j.reply_fields.is_empty(), || "a group judge's reply declares no fields".into())?;
                v.want(
                    j.local.is_none()
                        && j.jury.is_none()
                        && j.cascade.is_none()
                        && j.compares.is_none()
                        && j.evidence_from.is_none()
                        && j.order == super::Order::Fixed,
                    || {
                        "a group judge is not local, a jury, a cascade or a comparing judge, has no evidence rule \
                         and shows its rollouts in order"
                            .into()
                    },
                )
            }
            None => v.want(j.returns != "ranking", || "only a group judge returns a ranking".into()),
        })?;
        if let Some(jury) = &j.jury {
            self.at("jury", |v| {
                v.want(jury.members.len() >= 2, || "a jury has at least two members".into())?;
                v.want(j.samples as usize == jury.members.len(), || "a jury takes one sample per member".into())?;
                for (k, m) in jury.members.iter().enumerate() {
                    v.index("judge", *m, p.judges.len())?;
                    let member = &p.judges[*m as usize];
                    v.want(*m as usize != i && member.jury.is_none(), || {
                        "a jury's members are judges, not juries".into()
                    })?;
                    v.want(member.samples == 1, || format!("member {k} takes more than one sample"))?;
                }
                if let Some(w) = &jury.weights {
                    v.want(w.len() == jury.members.len(), || "one weight per member".into())?;
                    v.want(w.iter().all(|x| x.is_finite() && *x > 0.0), || "weights are positive".into())?;
                }
                Ok(())
            })?;
        }
        if let Some(c) = &j.cascade {
            self.at("cascade", |v| {
                v.want(c.members.len() >= 2, || "a cascade has at least two members".into())?;
                v.want(!c.escalate.is_empty(), || "a cascade escalates on at least one condition".into())?;
                for m in &c.members {
                    v.index("judge", *m, p.judges.len())?;
                    let member = &p.judges[*m as usize];
                    v.want((*m as usize) < i && member.jury.is_none() && member.cascade.is_none(), || {
                        "a cascade's members are plain judges declared before it".into()
                    })?;
                    v.want(member.samples == j.samples && member.vote == j.vote, || {
                        format!("member `{}` does not answer as the cascade reads it", member.name)
                    })?;
                }
                for e in &c.escalate {
                    if let super::Escalate::Between { lo, hi } = e {
                        v.want((0.0..=1.0).contains(lo) && (0.0..=1.0).contains(hi) && lo <= hi, || {
                            "an escalation band lies in [0, 1]".into()
                        })?;
                    }
                }
                Ok(())
            })?;
        }
        let weighted = j.jury.as_ref().is_some_and(|jy| jy.weights.is_some());
        self.want(j.vote != super::Vote::Weighted || weighted, || "`vote weighted` needs a jury with weights".into())?;
        if let Some(cal) = &j.calibration {
            self.at("calibration", |v| {
                v.string(&cal.file)?;
                super::calibration::check(&cal.maps).map_err(|e| v.err(e))?;
                for m in &cal.maps {
                    v.string(&m.criteria)?;
                }
                v.want(j.scoring == super::Scoring::Logprob || cal.maps.iter().all(|m| !m.map.reads_p_yes()), || {
                    "a map of P(yes) needs a judge that scores by log-probability".into()
                })
            })?;
        }
        Ok(())
    }

    /// Steps name their criteria and sets; every static criterion has exactly one step.
    fn steps_structure(&mut self) -> R {
        let p = self.p;
        let mut crit_step: Vec<Option<u32>> = vec![None; p.criteria.len()];
        let mut each_of_set: Vec<Option<u32>> = vec![None; p.sets.len()];
        for (si, step) in p.steps.iter().enumerate() {
            self.at_index("steps", si, |v| match step {
                Step::Gate(g) => v.at("gate", |v| {
                    v.at("name", |v| v.name(&g.name))?;
                    if let Some(r) = &g.reason {
                        v.at("reason", |v| v.string(r))?;
                    }
                    v.site(g.site)
                }),
                Step::Criterion(c) => v.at("criterion", |v| {
                    v.index("criterion", *c, p.criteria.len())?;
                    let slot = &mut crit_step[*c as usize];
                    v.want(slot.is_none(), || {
                        format!("criterion {c} is already evaluated by step {}", slot.unwrap_or_default())
                    })?;
                    *slot = Some(si as u32);
                    Ok(())
                }),
                Step::Each(e) => v.at("each", |v| {
                    v.at("set", |v| {
                        v.index("set", e.set, p.sets.len())?;
                        let s = &p.sets[e.set as usize];
                        v.want(s.kind == SetKind::Each, || {
                            format!("set {} (`{}`) is not an `each` set", e.set, s.name)
                        })?;
                        v.want(s.name == e.template.id, || {
                            format!("the block's set is `{}`, but its template is `{}`", s.name, e.template.id)
                        })?;
                        let slot = &mut each_of_set[e.set as usize];
                        v.want(slot.is_none(), || {
                            format!("set {} already belongs to step {}", e.set, slot.unwrap_or_default())
                        })?;
                        *slot = Some(si as u32);
                        Ok(())
                    })?;
                    v.at("locals", |v| {
                        v.want(e.local < e.locals && e.locals <= MAX_LOCALS, || {
                            format!(
                                "the element is local {}, but the block has {} (at most {MAX_LOCALS})",
                                e.local,
                                count("local", e.locals as usize)
                            )
                        })
                    })?;
                    v.at("template", |v| {
                        v.want(e.template.sets == [e.set], || "the template belongs to its block's set only".into())
                    })
                }),
            })?;
        }
        let mut steps = Vec::with_capacity(crit_step.len());
        for (c, s) in crit_step.into_iter().enumerate() {
            match s {
                Some(s) => steps.push(s),
                None => return self.at_index("criteria", c, |v| Err(v.err("no step evaluates this criterion"))),
            }
        }
        self.crit_step = steps;
        for (si, s) in p.sets.iter().enumerate() {
            if s.kind == SetKind::Each && each_of_set[si].is_none() {
                return self.at_index("sets", si, |v| Err(v.err("no `each` step fills this set")));
            }
        }
        Ok(())
    }

    fn sets(&mut self) -> R {
        let p = self.p;
        self.want(!p.sets.is_empty(), || "the program has no sets: set 0 is `all`".into())?;
        // Set 0 is every static criterion and `each` block, in step order, but sub-checks (the
        // members of `checks` sets), which count through their criterion.
        let sub_check: BTreeSet<u32> = p
            .sets
            .iter()
            .filter(|s| s.kind == SetKind::Checks)
            .flat_map(|s| s.members.iter().filter_map(|m| if let Member::Criterion(c) = m { Some(*c) } else { None }))
            .collect();
        let all: Vec<Member> = p
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Step::Criterion(c) if sub_check.contains(c) => None,
                Step::Criterion(c) => Some(Member::Criterion(*c)),
                Step::Each(_) => Some(Member::Each(i as u32)),
                Step::Gate(_) => None,
            })
            .collect();
        let s0 = &p.sets[0];
        self.at_index("sets", 0, |v| {
            v.want(s0.kind == SetKind::All && s0.name == "all" && s0.weight.is_none(), || {
                "set 0 must be `all`, of kind `all`".into()
            })?;
            v.want(s0.members == all, || {
                "set 0 must hold every criterion but sub-checks, and every `each` block, in step order".into()
            })
        })?;
        let mut depth = vec![1usize; p.sets.len()];
        for si in (1..p.sets.len()).rev() {
            let s = &p.sets[si];
            self.at_index("sets", si, |v| {
                v.want(s.kind != SetKind::All, || "only set 0 is `all`".into())?;
                v.items("member", s.members.len())?;
                match (s.kind, s.weight) {
                    (SetKind::Group, Some(w)) => v.at("weight", |v| {
                        v.finite(w)?;
                        v.want(w > 0.0, || format!("group weight {w} is not positive"))
                    })?,
                    (_, Some(_)) => return Err(v.err("only a group has a weight")),
                    _ => {}
                }
                if s.kind == SetKind::Group {
                    v.want(!s.members.is_empty(), || "a group has at least one member".into())?;
                }
                for (k, m) in s.members.iter().enumerate() {
                    v.at_index("members", k, |v| match m {
                        Member::Criterion(c) => {
                            v.index("criterion", *c, p.criteria.len())?;
                            v.want(
                                matches!(s.kind, SetKind::Tier | SetKind::Block | SetKind::Group | SetKind::Checks),
                                || "a criterion belongs to a tier, block, group or criterion's sub-checks".into(),
                            )
                        }
                        Member::Each(step) => {
                            v.index("step", *step, p.steps.len())?;
                            let ok = matches!(&p.steps[*step as usize], Step::Each(e) if e.set as usize == si);
                            v.want(ok && s.kind == SetKind::Each && s.members.len() == 1, || {
                                format!("step {step} is not the `each` block of this set")
                            })
                        }
                        Member::Set(c) => {
                            v.index("set", *c, p.sets.len())?;
                            v.want(s.kind == SetKind::Group && p.sets[*c as usize].kind == SetKind::Group, || {
                                "only a group holds sets, and only groups".into()
                            })?;
                            // Children come after their parent: the groups form a tree.
                            v.want(*c as usize > si, || format!("set {c} comes before its parent {si}"))?;
                            depth[si] = depth[si].max(depth[*c as usize] + 1);
                            v.want(depth[si] <= MAX_GROUP_DEPTH, || {
                                format!("groups nest deeper than {MAX_GROUP_DEPTH} levels")
                            })
                        }
                    })?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ declarations

    fn let_decl(&mut self, i: usize) -> R {
        let l = &self.p.lets[i];
        self.at("ty", |v| v.expr_type(&l.ty))?;
        let mut f = Frame::new(Place::Let(i as u32));
        self.at("value", |v| {
            v.expr(&l.value, &mut f, 0)?;
            v.close(&f, None)?;
            v.assignable_to(&l.value, &l.ty, "the value")
        })?;
        self.let_ready.push(f.ready);
        Ok(())
    }

    fn function_body(&mut self, i: usize) -> R {
        let func = &self.p.functions[i];
        let mut f = Frame::new(Place::Function(i as u32));
        for (k, (_, t)) in func.params.iter().enumerate() {
            f.bind(k as u32, t.clone());
        }
        self.at("body", |v| {
            v.expr(&func.body, &mut f, 0)?;
            v.assignable_to(&func.body, &func.ret, "the body")
        })?;
        self.at("locals", |v| v.close(&f, Some((func.locals, func.params.len() as u32))))
    }

    fn call_cycles(&mut self) -> R {
        // Depth-first search, iterative: 0 unvisited, 1 on the path, 2 done.
        let n = self.calls.len();
        let mut state = vec![0u8; n];
        for root in 0..n {
            if state[root] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            state[root] = 1;
            while let Some((f, next)) = stack.last_mut() {
                let f = *f;
                match self.calls[f].get(*next).copied() {
                    Some(g) => {
                        *next += 1;
                        let g = g as usize;
                        if state[g] == 1 {
                            let name = &self.p.functions[g].name;
                            return self.at_index("functions", g, |v| {
                                Err(v.err(format!("function `{name}` calls itself (through a cycle of calls)")))
                            });
                        }
                        if state[g] == 0 {
                            state[g] = 1;
                            stack.push((g, 0));
                        }
                    }
                    None => {
                        state[f] = 2;
                        stack.pop();
                    }
                }
            }
        }
        Ok(())
    }

    fn step_exprs(&mut self, si: usize) -> R {
        let p = self.p;
        let at = Place::Step(si as u32);
        match &p.steps[si] {
            Step::Gate(g) => self.at("gate", |v| {
                let mut f = Frame::new(at);
                v.at("cond", |v| {
                    v.expr(&g.cond, &mut f, 0)?;
                    v.assignable_to(&g.cond, &Type::Bool, "a gate condition")
                })?;
                v.at("value", |v| {
                    v.expr(&g.value, &mut f, 0)?;
                    v.assignable_to(&g.value, &Type::Number, "a gate's value")
                })?;
                v.close(&f, None)
            }),
            Step::Criterion(_) => Ok(()),
            Step::Each(e) => self.at("each", |v| {
                let mut f = Frame::new(at);
                v.at("list", |v| v.expr(&e.list, &mut f, 0))?;
                let elem = match &e.list.ty {
                    Type::List(t) => (**t).clone(),
                    Type::Any => Type::Any,
                    other => {
                        return v.at("list", |v| Err(v.err(format!("a block iterates over a list, not `{other}`"))))
                    }
                };
                f.bind(e.local, elem);
                v.at("template", |v| v.criterion(&e.template, &mut f, true))?;
                if !e.shows.is_empty() {
                    let judge = match e.template.verifier {
                        Verifier::Judge { judge } => p.judges.get(judge as usize),
                        _ => None,
                    };
                    let j = v.at("shows", |v| {
                        judge.ok_or_else(|| v.err("a block that shows its judge something is decided by a judge"))
                    })?;
                    v.at("shows", |v| {
                        v.want(j.rollouts.is_none() && j.compares.is_none(), || {
                            format!(
                                "judge `{}` compares answers or judges a group: it cannot be shown one instance",
                                j.name
                            )
                        })
                    })?;
                    for (k, item) in e.shows.iter().enumerate() {
                        v.at_index("shows", k, |v| {
                            v.name(&item.name)?;
                            v.want(
                                e.shows[..k].iter().all(|o| o.name != item.name)
                                    && !TEMPLATE_KEYWORDS.contains(&item.name.as_str())
                                    && !p.input_index(&item.name).is_some_and(|x| j.sees.contains(&(x as u32))),
                                || {
                                    format!(
                                        "`{}` is shown twice, a template keyword or an input the judge sees",
                                        item.name
                                    )
                                },
                            )?;
                            v.expr(&item.expr, &mut f, 0)
                        })?;
                    }
                }
                v.at("locals", |v| v.close(&f, Some((e.locals, e.local + 1))))
            }),
        }
    }

    /// Check a frame's locals once its expressions are walked: every local used is one the
    /// frame can bind, and a recorded count (a function's, a block's) is between `least` and
    /// what the frame binds.
    fn close(&self, f: &Frame, recorded: Option<(u32, u32)>) -> R {
        self.want(f.slots <= u64::from(MAX_LOCALS), || {
            format!("the expressions bind {} locals, over the limit of {MAX_LOCALS}", f.slots)
        })?;
        if let Some(m) = f.max_local {
            self.want(u64::from(m) < f.slots, || {
                format!("local {m} is out of range: these expressions bind {}", count("local", f.slots as usize))
            })?;
        }
        if let Some((n, least)) = recorded {
            self.want(n >= least && u64::from(n) <= f.slots, || {
                format!(
                    "{} recorded, but the expressions bind {} (at least {least})",
                    count("local", n as usize),
                    f.slots
                )
            })?;
        }
        Ok(())
    }

    fn criterion(&mut self, d: &CriterionDecl, f: &mut Frame, template: bool) -> R {
        let p = self.p;
        self.site(d.site)?;
        if template {
            self.at("id", |v| v.name(&d.id))?;
        }
        self.at("text", |v| {
            v.expr(&d.text, f, 0)?;
            v.want(assignable(&d.text.ty, &Type::Text) || d.text.ty == Type::Null, || {
                format!("criterion text must be `Text`, found `{}`", d.text.ty)
            })
        })?;
        self.at("kind", |v| match &d.kind {
            CriterionKind::Ordinal { levels } => {
                v.items("level", levels.len())?;
                v.want(levels.len() >= 2, || "an ordinal criterion has at least two levels".into())?;
                for (k, (x, desc)) in levels.iter().enumerate() {
                    v.finite(*x)?;
                    v.string(desc)?;
                    v.want(k == 0 || levels[k - 1].0 < *x, || "ordinal levels must be in increasing order".into())?;
                }
                Ok(())
            }
            CriterionKind::Nominal { labels } => {
                v.items("label", labels.len())?;
                let mut seen = BTreeSet::new();
                for (n, x) in labels {
                    v.string(n)?;
                    v.want(seen.insert(n.as_str()), || format!("label `{n}` is listed twice"))?;
                    v.finite(*x)?;
                    v.want((0.0..=1.0).contains(x), || format!("label value {x} is outside [0, 1]"))?;
                }
                Ok(())
            }
            CriterionKind::Binary | CriterionKind::Continuous => Ok(()),
            CriterionKind::Preference => Ok(()),
        })?;
        // A preference is what a comparing judge decides, and all it decides.
        let comparing = match &d.verifier {
            Verifier::Judge { judge } | Verifier::Extract { judge, .. } => {
                p.judges.get(*judge as usize).is_some_and(|j| j.compares.is_some())
            }
            _ => false,
        };
        self.at("kind", |v| {
            v.want((d.kind == CriterionKind::Preference) == comparing, || {
                "a preference criterion is decided by a comparing judge, and a comparing judge decides only preferences"
                    .into()
            })
        })?;
        // A group judge decides static continuous criteria, each member's value its own.
        if let Verifier::Judge { judge } | Verifier::Extract { judge, .. } = &d.verifier {
            if p.judges.get(*judge as usize).is_some_and(|j| j.rollouts.is_some()) {
                self.at("kind", |v| {
                    v.want(
                        d.kind == CriterionKind::Continuous
                            && !template
                            && matches!(d.verifier, Verifier::Judge { .. }),
                        || {
                            "a group judge decides continuous criteria outside `each` blocks and extracts nothing"
                                .into()
                        },
                    )
                })?;
            }
        }
        for (key, e, want) in [
            ("points", &d.points, Type::Number),
            ("weight", &d.weight, Type::Number),
            ("pass", &d.pass, Type::Number),
            ("tags", &d.tags, Type::List(Box::new(Type::Text))),
        ] {
            if let Some(e) = e {
                self.at(key, |v| {
                    v.expr(e, f, 0)?;
                    v.assignable_to(e, &want, key)
                })?;
            }
        }
        if let Some(a) = &d.axis {
            self.at("axis", |v| v.string(a))?;
        }
        self.at("verifier", |v| match &d.verifier {
            Verifier::Judge { judge } => v.at("judge", |v| v.index("judge", *judge, p.judges.len())),
            Verifier::Check { expr } => {
                v.want(d.kind == CriterionKind::Binary, || "a `check` decides a binary criterion".into())?;
                v.at("expr", |v| {
                    v.expr(expr, f, 0)?;
                    v.assignable_to(expr, &Type::Bool, "a check")
                })
            }
            Verifier::Value { expr } => {
                v.want(d.kind == CriterionKind::Continuous, || "a `value` decides a continuous criterion".into())?;
                v.at("expr", |v| {
                    v.expr(expr, f, 0)?;
                    v.assignable_to(expr, &Type::Number, "a value")
                })
            }
            Verifier::Extract { judge, from, ty, local, check } => {
                v.at("judge", |v| v.index("judge", *judge, p.judges.len()))?;
                v.at("from", |v| {
                    v.index("input", *from, p.inputs.len())?;
                    v.want(p.judges[*judge as usize].sees.contains(from), || {
                        format!("the judge extracts from input {from}, which it does not see")
                    })
                })?;
                v.at("ty", |v| {
                    v.want(matches!(ty, Type::Number | Type::Text | Type::Bool), || {
                        format!("an extracted value is `Number`, `Text` or `Bool`, not `{ty}`")
                    })
                })?;
                let depth = f.env.len();
                f.bind(*local, ty.clone());
                v.at("check", |v| {
                    v.expr(check, f, 0)?;
                    v.assignable_to(check, &Type::Bool, "a check")
                })?;
                f.env.truncate(depth);
                Ok(())
            }
        })?;
        if let Verifier::Judge { judge } | Verifier::Extract { judge, .. } = &d.verifier {
            if p.judges[*judge as usize].local.is_some() {
                let ok = matches!(d.verifier, Verifier::Judge { .. })
                    && matches!(d.kind, CriterionKind::Binary | CriterionKind::Continuous);
                self.at("verifier", |v| {
                    v.want(ok, || {
                        "a local judge decides binary and continuous criteria only, and extracts nothing".into()
                    })
                })?;
            }
        }
        self.items("set", d.sets.len())?;
        for (k, s) in d.sets.iter().enumerate() {
            self.at_index("sets", k, |v| v.index("set", *s, p.sets.len()))?;
        }
        Ok(())
    }

    fn example(&mut self, i: usize) -> R {
        let p = self.p;
        let ex = &p.examples[i];
        self.site(ex.site)?;
        self.at("name", |v| v.string(&ex.name))?;
        let mut bound = BTreeSet::new();
        for (k, (input, e)) in ex.bindings.iter().enumerate() {
            self.at_index("bindings", k, |v| {
                v.index("input", *input, p.inputs.len())?;
                v.want(bound.insert(*input), || format!("input {input} is bound twice"))?;
                let mut f = Frame::new(Place::Example);
                v.expr(e, &mut f, 0)?;
                v.close(&f, None)?;
                v.assignable_to(e, &p.inputs[*input as usize].ty, "the value")
            })?;
        }
        for (k, (id, _)) in ex.verdicts.iter().enumerate() {
            self.at_index("verdicts", k, |v| {
                let d = v.criterion_by_key(id)?;
                v.want(matches!(d.verifier, Verifier::Judge { .. } | Verifier::Extract { .. }), || {
                    format!("criterion `{id}` is not decided by a judge")
                })
            })?;
        }
        for (k, e) in ex.expects.iter().enumerate() {
            self.at_index("expects", k, |v| match e {
                super::Expect::Score { value, within, site } => {
                    v.site(*site)?;
                    if let Some(x) = value {
                        v.finite(*x)?;
                    }
                    v.finite(*within)?;
                    v.want(*within >= 0.0, || "a tolerance is not negative".into())
                }
                super::Expect::Failure { class, site } => {
                    v.site(*site)?;
                    class.as_deref().map_or(Ok(()), |c| v.string(c))
                }
                super::Expect::Group { name, value, within, site } => {
                    v.site(*site)?;
                    v.finite(*value)?;
                    v.finite(*within)?;
                    v.want(*within >= 0.0, || "a tolerance is not negative".into())?;
                    let group = p.sets.iter().any(|s| s.kind == SetKind::Group && s.name == *name);
                    v.want(group, || format!("no group is named `{name}`"))
                }
                super::Expect::Criterion { id, site, .. } => {
                    v.site(*site)?;
                    v.criterion_by_key(id).map(|_| ())
                }
            })?;
        }
        Ok(())
    }

    /// The criterion a verdict key names: a static criterion's id, or `BLOCK[i]`.
    fn criterion_by_key(&self, key: &str) -> R<&'p CriterionDecl> {
        let p = self.p;
        if let Some(c) = p.criteria.iter().find(|c| c.id == key) {
            return Ok(c);
        }
        let each = key.strip_suffix(']').and_then(|k| k.split_once('[')).and_then(|(name, i)| {
            let index_ok = !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) && i.parse::<u32>().is_ok();
            let template = p.steps.iter().find_map(|s| match s {
                Step::Each(e) if e.template.id == name => Some(&e.template),
                _ => None,
            });
            template.filter(|_| index_ok)
        });
        each.ok_or_else(|| self.err(format!("no criterion is named `{key}`")))
    }

    // ------------------------------------------------------------------ expressions

    fn expr(&mut self, e: &Expr, f: &mut Frame, depth: usize) -> R {
        self.want(depth < MAX_EXPR_DEPTH, || format!("the expression nests deeper than {MAX_EXPR_DEPTH} levels"))?;
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.expr_inner(e, f, depth))
    }

    fn child(&mut self, key: &'static str, e: &Expr, f: &mut Frame, depth: usize) -> R {
        self.at(key, |v| v.expr(e, f, depth + 1))
    }

    fn child_at(&mut self, key: &'static str, i: usize, e: &Expr, f: &mut Frame, depth: usize) -> R {
        self.at_index(key, i, |v| v.expr(e, f, depth + 1))
    }

    /// Whether this place may read `what` (`an input`, `a let`, `a criterion`, `a set`): a
    /// function body none of them, an input's default only sets, an example's binding lets
    /// and sets (constants are evaluated before any criterion is decided).
    fn reads(&self, f: &Frame, what: &str) -> R {
        let ok = match f.place {
            Place::Function(_) => false,
            Place::Default => what == "a set",
            Place::Example => what == "a let" || what == "a set",
            _ => true,
        };
        self.want(ok, || {
            let place = match f.place {
                Place::Function(_) => "a function body",
                Place::Default => "an input's default",
                _ => "an example's binding",
            };
            format!("{place} cannot read {what}")
        })
    }

    fn expr_inner(&mut self, e: &Expr, f: &mut Frame, depth: usize) -> R {
        let p = self.p;
        self.at("ty", |v| v.expr_type(&e.ty))?;
        match &e.kind {
            ExprKind::Const(c) => match c {
                Const::Null => self.want(matches!(e.ty, Type::Null | Type::Optional(_) | Type::Any), || {
                    format!("`null` has type `{}`", e.ty)
                }),
                Const::Bool(_) => self.ty_is(e, &Type::Bool),
                Const::Number(n) => {
                    self.finite(*n)?;
                    self.ty_is(e, &Type::Number)
                }
                Const::Text(t) => {
                    self.string(t)?;
                    self.ty_is(e, &Type::Text)
                }
            },
            ExprKind::Input(i) => {
                self.reads(f, "an input")?;
                self.index("input", *i, p.inputs.len())?;
                self.ty_is(e, &p.inputs[*i as usize].ty)
            }
            ExprKind::Local(l) => {
                let Some(t) = f.lookup(*l).cloned() else {
                    return Err(self.err(format!("local {l} is read where nothing binds it")));
                };
                f.max_local = Some(f.max_local.map_or(*l, |m| m.max(*l)));
                self.ty_is(e, &t)
            }
            ExprKind::Let(l) => {
                self.reads(f, "a let")?;
                self.index("let", *l, p.lets.len())?;
                match f.place {
                    Place::Let(i) => {
                        self.want(*l < i, || format!("let {i} reads let {l}: a let reads only earlier lets"))?;
                        f.ready = f.ready.max(self.let_ready[*l as usize]);
                    }
                    Place::Step(s) => {
                        let ready = self.let_ready[*l as usize];
                        self.want(ready <= s, || {
                            format!(
                                "let `{}` reads a criterion of step {} or later, which is not decided here",
                                p.lets[*l as usize].name,
                                ready.saturating_sub(1)
                            )
                        })?;
                    }
                    _ => {}
                }
                self.ty_is(e, &p.lets[*l as usize].ty)
            }
            ExprKind::Criterion(c) => {
                self.reads(f, "a criterion")?;
                self.index("criterion", *c, p.criteria.len())?;
                let step = self.crit_step[*c as usize];
                match f.place {
                    Place::Step(s) => self.want(step < s, || {
                        format!(
                            "criterion `{}` is evaluated at step {step}, after this expression",
                            p.criteria[*c as usize].id
                        )
                    })?,
                    Place::Let(_) => f.ready = f.ready.max(step + 1),
                    _ => {}
                }
                self.ty_is(e, &Type::Verdict)
            }
            ExprKind::List(xs) => {
                self.items("element", xs.len())?;
                let Type::List(elem) = &e.ty else { return Err(self.err(format!("a list has type `{}`", e.ty))) };
                for (k, x) in xs.iter().enumerate() {
                    self.child_at("list", k, x, f, depth)?;
                    self.at_index("list", k, |v| {
                        v.want(assignable(&x.ty, elem), || format!("an element of `{}` has type `{}`", e.ty, x.ty))
                    })?;
                }
                Ok(())
            }
            ExprKind::Record(fs) => {
                self.items("field", fs.len())?;
                for (k, (n, x)) in fs.iter().enumerate() {
                    self.at_index("record", k, |v| {
                        v.name(n)?;
                        v.want(k == 0 || fs[k - 1].0 < *n, || "record fields are not sorted by name".into())
                    })?;
                    self.child_at("record", k, x, f, depth)?;
                }
                let want = Type::Record(fs.iter().map(|(n, x)| (n.clone(), x.ty.clone())).collect());
                self.ty_is(e, &want)
            }
            ExprKind::Field { base, name, site } => {
                self.site(*site)?;
                self.child("base", base, f, depth)?;
                let want = match &base.ty {
                    Type::Any => Type::Any,
                    Type::Record(fields) => match fields.iter().find(|(n, _)| n == name) {
                        Some((_, t)) => t.clone(),
                        None => return Err(self.err(format!("`{}` has no field `{name}`", base.ty))),
                    },
                    Type::Verdict => match name.as_str() {
                        "met" | "unscored" => Type::Bool,
                        "value" | "points" | "weight" | "agreement" => Type::Number,
                        _ => return Err(self.err(format!("a verdict has no field `{name}`"))),
                    },
                    other => return Err(self.err(format!("`{other}` has no fields"))),
                };
                self.ty_is(e, &want)
            }
            ExprKind::Index { base, index, site } => {
                self.site(*site)?;
                self.child("base", base, f, depth)?;
                self.child("index", index, f, depth)?;
                self.assignable_to(index, &Type::Number, "an index")?;
                let want = match &base.ty {
                    Type::List(t) => (**t).clone(),
                    Type::Any => Type::Any,
                    other => return Err(self.err(format!("`{other}` cannot be indexed"))),
                };
                self.ty_is(e, &want)
            }
            ExprKind::Narrowed(arg) => {
                self.child("arg", arg, f, depth)?;
                let ok = match &arg.ty {
                    Type::Optional(inner) => **inner == e.ty,
                    Type::Any => true,
                    _ => false,
                };
                self.want(ok, || format!("a narrowed value of type `{}` has type `{}`", arg.ty, e.ty))
            }
            ExprKind::Unary { op, arg } => {
                self.child("arg", arg, f, depth)?;
                let want = match op {
                    UnOp::Neg => Type::Number,
                    UnOp::Not => Type::Bool,
                };
                self.assignable_to(arg, &want, "the operand")?;
                self.ty_is(e, &want)
            }
            ExprKind::Binary { op, lhs, rhs, site } => {
                self.site(*site)?;
                self.child("lhs", lhs, f, depth)?;
                self.child("rhs", rhs, f, depth)?;
                let (a, b) = (&lhs.ty, &rhs.ty);
                let want = match op {
                    BinOp::And | BinOp::Or => {
                        self.assignable_to(lhs, &Type::Bool, "an operand")?;
                        self.assignable_to(rhs, &Type::Bool, "an operand")?;
                        Some(Type::Bool)
                    }
                    BinOp::Coalesce => {
                        let inner = a.strip_optional().clone();
                        match join(&inner, b) {
                            Some(t) if inner == Type::Null => Some(t),
                            Some(_) if assignable(b, &inner) => Some(inner),
                            other => other,
                        }
                    }
                    BinOp::Concat => (*a == Type::Text && *b == Type::Text).then_some(Type::Text),
                    _ if *a == Type::Any || *b == Type::Any => {
                        Some(if *op == BinOp::Add && (*a == Type::Text || *b == Type::Text) {
                            Type::Text
                        } else {
                            Type::Number
                        })
                    }
                    _ => (*a == Type::Number && *b == Type::Number).then_some(Type::Number),
                };
                match want {
                    Some(t) => self.ty_is(e, &t),
                    None => Err(self.err(format!("`{}` is not defined on `{a}` and `{b}`", binop_name(*op)))),
                }
            }
            ExprKind::Compare { first, rest } => {
                self.want(!rest.is_empty(), || "a comparison compares at least two operands".into())?;
                self.items("operand", rest.len())?;
                self.child("first", first, f, depth)?;
                let mut prev = &first.ty;
                for (k, (op, x)) in rest.iter().enumerate() {
                    self.child_at("rest", k, x, f, depth)?;
                    let t = &x.ty;
                    let ok = match op {
                        CmpOp::Eq | CmpOp::Ne => {
                            join(prev, t).is_some() && *prev != Type::Verdict && *t != Type::Verdict
                        }
                        _ => {
                            let num = |t: &Type| matches!(t, Type::Number | Type::Any);
                            let txt = |t: &Type| matches!(t, Type::Text | Type::Any);
                            (num(prev) && num(t)) || (txt(prev) && txt(t))
                        }
                    };
                    self.at_index("rest", k, |v| v.want(ok, || format!("`{prev}` and `{t}` cannot be compared so")))?;
                    prev = t;
                }
                self.ty_is(e, &Type::Bool)
            }
            ExprKind::If { cond, then, els } => {
                self.child("cond", cond, f, depth)?;
                self.assignable_to(cond, &Type::Bool, "a condition")?;
                self.child("then", then, f, depth)?;
                self.child("els", els, f, depth)?;
                match join(&then.ty, &els.ty) {
                    Some(t) => self.ty_is(e, &t),
                    None => Err(self.err(format!("the branches have types `{}` and `{}`", then.ty, els.ty))),
                }
            }
            ExprKind::Intrinsic { name, overload, args, site } => {
                self.site(*site)?;
                let Some((params, ret)) = self.intrinsics.signature(name, *overload) else {
                    return Err(self.err(format!("there is no intrinsic `{name}`#{overload}")));
                };
                self.want(args.len() == params.len(), || {
                    format!("`{name}` takes {}, given {}", count("argument", params.len()), args.len())
                })?;
                let mut bindings = Bindings::new();
                for (k, (a, param)) in args.iter().zip(params).enumerate() {
                    self.child_at("args", k, a, f, depth)?;
                    self.at_index("args", k, |v| {
                        v.want(unify(param, &a.ty, &mut bindings), || {
                            format!("argument {k} of `{name}` must be `{}`, found `{}`", subst(param, &bindings), a.ty)
                        })
                    })?;
                }
                let want = subst(ret, &bindings);
                self.want(consistent(&e.ty, &want), || format!("`{name}` returns `{want}`, not `{}`", e.ty))
            }
            ExprKind::Call { func, args, site } => {
                self.site(*site)?;
                self.index("function", *func, p.functions.len())?;
                let target = &p.functions[*func as usize];
                self.want(args.len() == target.params.len(), || {
                    format!("`{}` takes {}, given {}", target.name, count("argument", target.params.len()), args.len())
                })?;
                for (k, (a, (_, t))) in args.iter().zip(&target.params).enumerate() {
                    self.child_at("args", k, a, f, depth)?;
                    self.at_index("args", k, |v| v.assignable_to(a, t, "the argument"))?;
                }
                if let Place::Function(caller) = f.place {
                    self.calls[caller as usize].push(*func);
                }
                self.ty_is(e, &target.ret)
            }
            ExprKind::Aggregate { op, set, args, site, .. } => {
                self.site(*site)?;
                self.reads(f, "a set")?;
                self.index("set", *set, p.sets.len())?;
                if *op == AggOp::Tree {
                    self.want(p.sets[*set as usize].kind == SetKind::Group, || "`tree` takes a group".into())?;
                }
                let want = usize::from(*op == AggOp::AtLeast);
                self.want(args.len() == want, || format!("`{}` takes {}", op.name(), count("extra argument", want)))?;
                for (k, a) in args.iter().enumerate() {
                    self.child_at("args", k, a, f, depth)?;
                    self.at_index("args", k, |v| v.assignable_to(a, &Type::Number, "the count"))?;
                }
                self.ty_is(e, &op.result_type())
            }
            ExprKind::HigherOrder { op, list, local, body } => {
                self.child("list", list, f, depth)?;
                let elem = match &list.ty {
                    Type::List(t) => (**t).clone(),
                    Type::Any => Type::Any,
                    other => return Err(self.err(format!("`{}` iterates over a list, not `{other}`", ho_name(*op)))),
                };
                let scope = f.env.len();
                f.bind(*local, elem);
                self.child("body", body, f, depth)?;
                f.env.truncate(scope);
                if *op != HigherOrder::Map {
                    self.assignable_to(body, &Type::Bool, "a predicate")?;
                }
                let want = match op {
                    HigherOrder::Map => Type::List(Box::new(body.ty.clone())),
                    HigherOrder::Filter => list.ty.clone(),
                    HigherOrder::All | HigherOrder::Any => Type::Bool,
                    HigherOrder::Count => Type::Number,
                };
                self.ty_is(e, &want)
            }
        }
    }
}

fn type_word(t: &Type) -> &'static str {
    match t {
        Type::Null => "Null",
        Type::Any => "_",
        Type::Verdict => "Verdict",
        Type::Set => "Set",
        Type::Policy => "Policy",
        Type::Var(_) => "a type variable",
        _ => "this",
    }
}

fn binop_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Concat => "concatenation",
        BinOp::And => "and",
        BinOp::Or => "or",
        BinOp::Coalesce => "??",
    }
}

fn ho_name(op: HigherOrder) -> &'static str {
    match op {
        HigherOrder::Map => "map",
        HigherOrder::Filter => "filter",
        HigherOrder::All => "all",
        HigherOrder::Any => "any",
        HigherOrder::Count => "count",
    }
}
