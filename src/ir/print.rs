//! Stage 4, IR → text: a deterministic, line-oriented text form of a lowered `Program` for
//! snapshot tests and `--explain`-style dumps. Every field of the IR is shown (`-` for an
//! absent optional); expressions are s-expressions whose head carries the node's static type
//! (`(input:Text #1 response)`), constants of their natural type print bare (`3`, `"x"`), and
//! sites print as `@sN`, with their count at the end (`print_sites` prints a `SiteTable`, which
//! is not part of the IR). A long expression breaks one child per line at a fixed width, so the
//! output depends on nothing but the program.

use super::*;
use std::fmt::Write as _;

/// Lines longer than this break their s-expressions one child per line.
const WIDTH: usize = 100;

/// Print a program in its text form.
pub fn print_program(p: &Program) -> String {
    let mut w = Writer { p, out: String::new(), prev: None };
    w.program();
    w.out
}

/// Print where each site lies, one line per site: `site @sN "MODULE" START..END`.
pub fn print_sites(sites: &SiteTable) -> String {
    let mut out = String::new();
    for (i, s) in sites.iter().enumerate() {
        let _ = writeln!(out, "site @s{i} {} {}..{}", quote(&s.file), s.start, s.end);
    }
    out
}

/// An s-expression: the only shape the expression printer builds, so that layout is decided
/// in one place.
enum Sx {
    Atom(String),
    /// `key=value`
    Pair(String, Box<Sx>),
    /// `op value`: an operator before its operand in a comparison chain
    Op(String, Box<Sx>),
    /// `(head... args...)`: the head words stay on the first line when a node breaks; the
    /// arguments then go one per line.
    Node(Vec<String>, Vec<Sx>),
}

fn atom(s: impl Into<String>) -> Sx {
    Sx::Atom(s.into())
}

fn pair(k: &str, v: Sx) -> Sx {
    Sx::Pair(k.to_string(), Box::new(v))
}

impl Sx {
    fn flat(&self, out: &mut String) {
        match self {
            Sx::Atom(a) => out.push_str(a),
            Sx::Pair(k, v) => {
                out.push_str(k);
                out.push('=');
                v.flat(out);
            }
            Sx::Op(op, v) => {
                out.push_str(op);
                out.push(' ');
                v.flat(out);
            }
            Sx::Node(head, args) => {
                out.push('(');
                out.push_str(&head.join(" "));
                for x in args {
                    out.push(' ');
                    x.flat(out);
                }
                out.push(')');
            }
        }
    }

    /// Write at column `col`; continuation lines start at `indent` + 2.
    fn render(&self, out: &mut String, col: usize, indent: usize) {
        let mut flat = String::new();
        self.flat(&mut flat);
        if col + flat.chars().count() <= WIDTH {
            out.push_str(&flat);
            return;
        }
        match self {
            Sx::Atom(a) => out.push_str(a),
            Sx::Pair(k, v) => {
                out.push_str(k);
                out.push('=');
                v.render(out, col + k.chars().count() + 1, indent);
            }
            Sx::Op(op, v) => {
                out.push_str(op);
                out.push(' ');
                v.render(out, col + op.chars().count() + 1, indent);
            }
            Sx::Node(head, args) => {
                out.push('(');
                out.push_str(&head.join(" "));
                let child = indent + 2;
                for x in args {
                    out.push('\n');
                    out.push_str(&" ".repeat(child));
                    x.render(out, child, child);
                }
                out.push(')');
            }
        }
    }
}

/// A number that reads back to the same `f64`: shortest digits, an exponent only for very
/// large or very small magnitudes.
/// `stat NAME mean(points_ratio(items)) per tag "axis:" clip [0, 1]`.
fn stat_line(st: &StatDecl) -> String {
    format!("stat {} {}", st.name, stat_form(st))
}

/// A statistic's form without its name: `mean(points_ratio(items)) per tag "axis:" clip [0, 1]`.
pub fn stat_form(st: &StatDecl) -> String {
    let measure = match &st.measure {
        StatMeasure::Score => "score".to_string(),
        StatMeasure::NamedScore { name } => format!("score {name}"),
        StatMeasure::Criterion { id } => id.clone(),
        StatMeasure::PointsRatio { set } => format!("points_ratio({set})"),
        StatMeasure::MetRatio { set } => format!("met_ratio({set})"),
    };
    let test = st.test.map(|t| format!(" {} {}", t.op.symbol(), num(t.value))).unwrap_or_default();
    let per = match &st.per {
        None => String::new(),
        Some(StatPer::Tag { prefix }) => format!(" per tag {prefix:?}"),
        Some(StatPer::Axis) => " per axis".into(),
        Some(StatPer::Input { name }) => format!(" per input {name}"),
        Some(StatPer::Pair { first, second }) => format!(" per input {first}, {second}"),
    };
    let clip = st.clip.map(|(lo, hi)| format!(" clip [{}, {}]", num(lo), num(hi))).unwrap_or_default();
    format!("{}({measure}{test}){per}{clip}", word(&st.agg))
}

/// The serde name of a unit enum value (a reward setting), for the text form.
fn word<T: serde::Serialize>(x: &T) -> String {
    serde_json::to_value(x).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn num(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = n.abs();
    if a == 0.0 || (1e-5..1e16).contains(&a) {
        format!("{n}")
    } else {
        format!("{n:e}")
    }
}

/// A double-quoted string with `\" \\ \n \t \r \0` and `\u{X}` for other control characters.
fn quote(s: &str) -> String {
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
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn opt<T>(x: &Option<T>, f: impl FnOnce(&T) -> String) -> String {
    x.as_ref().map_or_else(|| "-".to_string(), f)
}

fn site(s: SiteId) -> String {
    format!("@s{s}")
}

fn vote(v: Vote) -> &'static str {
    match v {
        Vote::Majority => "majority",
        Vote::Mean => "mean",
        Vote::Unanimous => "unanimous",
        Vote::Weighted => "weighted",
    }
}

fn scoring(s: Scoring) -> &'static str {
    match s {
        Scoring::Label => "label",
        Scoring::Logprob => "logprob",
    }
}

fn set_kind(k: SetKind) -> &'static str {
    match k {
        SetKind::All => "all",
        SetKind::Tier => "tier",
        SetKind::Block => "block",
        SetKind::Each => "each",
        SetKind::Group => "group",
        SetKind::Checks => "checks",
    }
}

fn policy(p: Policy) -> &'static str {
    match p {
        Policy::Skip => "skip",
        Policy::Unmet => "unmet",
        Policy::Propagate => "propagate",
    }
}

fn bin_op(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "add",
        BinOp::Sub => "sub",
        BinOp::Mul => "mul",
        BinOp::Div => "div",
        BinOp::Rem => "rem",
        BinOp::Concat => "concat",
        BinOp::And => "and",
        BinOp::Or => "or",
        BinOp::Coalesce => "coalesce",
    }
}

fn fields(fs: &[(String, Type)]) -> String {
    let inner: Vec<String> = fs.iter().map(|(n, t)| format!("{n}: {t}")).collect();
    format!("({})", inner.join(", "))
}

struct Writer<'a> {
    p: &'a Program,
    out: String,
    /// The section of the last entry written and whether it spanned several lines.
    prev: Option<(&'static str, bool)>,
}

impl Writer<'_> {
    fn line(&mut self, indent: usize, text: &str) {
        self.out.push_str(&" ".repeat(indent));
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// `key <expr>` on a line of its own, breaking a long expression below the key.
    fn expr_line(&mut self, indent: usize, key: &str, e: &Expr) {
        let sx = self.expr(e);
        self.out.push_str(&" ".repeat(indent));
        self.out.push_str(key);
        self.out.push(' ');
        let col = indent + key.chars().count() + 1;
        sx.render(&mut self.out, col, indent);
        self.out.push('\n');
    }

    fn opt_expr_line(&mut self, indent: usize, key: &str, e: &Option<Expr>) {
        match e {
            Some(e) => self.expr_line(indent, key, e),
            None => self.line(indent, &format!("{key} -")),
        }
    }

    // ------------------------------------------------------------------ references

    fn input_ref(&self, i: u32) -> String {
        let name = self.p.inputs.get(i as usize).map_or("?", |x| x.name.as_str());
        format!("input#{i} {name}")
    }

    fn judge_ref(&self, i: u32) -> String {
        let name = self.p.judges.get(i as usize).map_or("?", |x| x.name.as_str());
        format!("judge#{i} {name}")
    }

    fn set_ref(&self, i: u32) -> String {
        let name = self.p.sets.get(i as usize).map_or("?", |x| x.name.as_str());
        format!("set#{i} {name}")
    }

    fn criterion_name(&self, i: u32) -> &str {
        self.p.criteria.get(i as usize).map_or("?", |c| c.id.as_str())
    }

    fn step_name(&self, i: u32) -> String {
        match self.p.steps.get(i as usize) {
            Some(Step::Each(e)) => e.template.id.clone(),
            Some(Step::Gate(g)) => g.name.clone(),
            Some(Step::Criterion(c)) => self.criterion_name(*c).to_string(),
            None => "?".into(),
        }
    }

    fn member(&self, m: &Member) -> String {
        match m {
            Member::Criterion(i) => format!("criterion#{i} {}", self.criterion_name(*i)),
            Member::Each(i) => format!("each step#{i} {}", self.step_name(*i)),
            Member::Set(i) => self.set_ref(*i),
        }
    }

    // ------------------------------------------------------------------ program

    /// Write one entry of a section. Entries are separated by a blank line when the section
    /// changes or when either neighbour spans several lines; one-line entries of a section
    /// stay together.
    fn entry(&mut self, section: &'static str, write: impl FnOnce(&mut Self)) {
        let start = self.out.len();
        write(self);
        let text = self.out.split_off(start);
        let multiline = text.trim_end_matches('\n').contains('\n');
        if let Some((prev_section, prev_multiline)) = self.prev {
            if prev_section != section || prev_multiline || multiline {
                self.out.push('\n');
            }
        }
        self.out.push_str(&text);
        self.prev = Some((section, multiline));
    }

    fn program(&mut self) {
        let p = self.p;
        self.entry("header", |w| {
            w.line(0, &format!("ir_version {}", p.ir_version));
            w.line(
                0,
                &format!(
                    "rubric {} @ {} title {}",
                    p.rubric.name,
                    quote(&p.rubric.version),
                    opt(&p.rubric.title, |t| quote(t))
                ),
            );
        });
        for (i, input) in p.inputs.iter().enumerate() {
            self.entry("input", |w| {
                // The field is printed only when set, so the text of IR without one is unchanged.
                let from = input.field.as_ref().map(|f| format!(" from {}", quote(f))).unwrap_or_default();
                w.opt_expr_line(0, &format!("input #{i} {}: {}{from} default", input.name, input.ty), &input.default)
            });
        }
        for (i, j) in p.judges.iter().enumerate() {
            self.entry("judge", |w| w.judge(i, j));
        }
        for (i, g) in p.generators.iter().enumerate() {
            self.entry("generator", |w| {
                w.line(0, &format!("generator #{i} {}", g.name));
                let sees: Vec<String> = g.sees.iter().map(|s| w.input_ref(*s)).collect();
                let lines = [
                    format!("model {}", opt(&g.model, |m| quote(m))),
                    format!("temperature {}", opt(&g.temperature, |t| num(*t))),
                    format!("top_p {}", opt(&g.top_p, |t| num(*t))),
                    format!("max_tokens {}", opt(&g.max_tokens, |t| t.to_string())),
                    format!("seed {}", opt(&g.seed, |t| t.to_string())),
                    format!("sees [{}]", sees.join(", ")),
                    format!("fills {}", w.input_ref(g.fills)),
                    format!("template {}", quote(&g.template)),
                    format!("system {}", opt(&g.system, |t| quote(t))),
                ];
                for l in lines {
                    w.line(2, &l);
                }
            });
        }
        for (i, f) in p.functions.iter().enumerate() {
            self.entry("fn", |w| {
                let params: Vec<String> = f.params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
                w.line(0, &format!("fn #{i} {}({}) -> {} locals {}", f.name, params.join(", "), f.ret, f.locals));
                w.expr_line(2, "body", &f.body);
            });
        }
        for (i, l) in p.lets.iter().enumerate() {
            self.entry("let", |w| w.expr_line(0, &format!("let #{i} {}: {} =", l.name, l.ty), &l.value));
        }
        for (i, s) in p.steps.iter().enumerate() {
            self.entry("step", |w| w.step(i, s));
        }
        for (i, c) in p.criteria.iter().enumerate() {
            self.entry("criterion", |w| {
                w.line(0, &format!("criterion #{i} {}", c.id));
                w.criterion_body(2, c);
            });
        }
        for (i, s) in p.sets.iter().enumerate() {
            self.entry("set", |w| {
                let members: Vec<String> = s.members.iter().map(|m| w.member(m)).collect();
                w.line(
                    0,
                    &format!("set #{i} {} kind {} weight {}", s.name, set_kind(s.kind), opt(&s.weight, |x| num(*x))),
                );
                w.line(2, &format!("members [{}]", members.join(", ")));
            });
        }
        self.entry("score", |w| w.expr_line(0, "score", &p.score));
        for s in &p.scores {
            self.entry("score", |w| w.expr_line(0, &format!("score {} @s{}", s.name, s.site), &s.expr));
        }
        if let Some(r) = &p.reward {
            self.entry("reward", |w| {
                let std = if r.std.is_sample() { String::new() } else { format!(" std {}", word(&r.std)) };
                w.line(
                    0,
                    &format!(
                        "reward advantage {}{std} epsilon {} clip {} unscored {} uncovered {} @s{}",
                        word(&r.advantage),
                        num(r.epsilon),
                        opt(&r.clip, |(lo, hi)| format!("[{}, {}]", num(*lo), num(*hi))),
                        word(&r.unscored),
                        word(&r.uncovered),
                        r.site
                    ),
                );
                if let Some(e) = &r.penalty {
                    w.expr_line(2, "penalty", e);
                }
            });
        }
        for st in &p.stats {
            self.entry("stat", |w| w.line(0, &stat_line(st)));
        }
        for (i, e) in p.examples.iter().enumerate() {
            self.entry("example", |w| w.example(i, e));
        }
        self.entry("sites", |w| w.line(0, &format!("sites {}", p.site_count)));
    }

    fn judge(&mut self, i: usize, j: &JudgeDecl) {
        self.line(0, &format!("judge #{i} {}", j.name));
        let sees: Vec<String> = j.sees.iter().map(|s| self.input_ref(*s)).collect();
        let lines = [
            format!("model {}", opt(&j.model, |m| quote(m))),
            format!("temperature {}", opt(&j.temperature, |t| num(*t))),
            format!("top_p {}", opt(&j.top_p, |t| num(*t))),
            format!("max_tokens {}", opt(&j.max_tokens, |t| t.to_string())),
            format!("seed {}", opt(&j.seed, |t| t.to_string())),
            format!("samples {}", j.samples),
            format!("vote {}", vote(j.vote)),
            format!("sees [{}]", sees.join(", ")),
            format!("returns {}", j.returns),
            format!("reply_fields {}", fields(&j.reply_fields)),
            format!("evidence_from {}", opt(&j.evidence_from, |e| self.input_ref(*e))),
            format!("template {}", opt(&j.template, |t| quote(t))),
            format!("system {}", opt(&j.system, |t| quote(t))),
            format!("scoring {}", scoring(j.scoring)),
            format!("per_call {}", j.per_call),
        ];
        for l in lines {
            self.line(2, &l);
        }
        // Printed only when set, so the text of IR without local judges is unchanged.
        if let Some(dir) = &j.local {
            self.line(2, &format!("local {}", quote(dir)));
        }
        if let Some(m) = j.min_samples {
            self.line(2, &format!("min_samples {m}"));
        }
        if let Some(e) = &j.reasoning_effort {
            self.line(2, &format!("reasoning_effort {e}"));
        }
        if let Some(c) = &j.cascade {
            self.line(2, &format!("cascade {}", super::cascade_text(c, &|m| format!("j{m}"))));
        }
        if let Some(c) = &j.compares {
            let order = if j.order == super::Order::Both { " order both" } else { "" };
            self.line(2, &format!("compares i{} i{}{order} inconsistent {}", c.first, c.second, c.inconsistent.name()));
        }
        if let Some(r) = j.rollouts {
            self.line(2, &format!("rollouts i{r}"));
        }
    }

    fn step(&mut self, i: usize, s: &Step) {
        match s {
            Step::Gate(g) => {
                let action = match g.action {
                    GateAction::Score => "score",
                    GateAction::Cap => "cap",
                };
                self.line(
                    0,
                    &format!(
                        "step #{i} gate {} action {action} reason {} {}",
                        g.name,
                        opt(&g.reason, |r| quote(r)),
                        site(g.site)
                    ),
                );
                self.expr_line(2, "cond", &g.cond);
                self.expr_line(2, "value", &g.value);
            }
            Step::Criterion(c) => {
                self.line(0, &format!("step #{i} criterion#{c} {}", self.criterion_name(*c)));
            }
            Step::Each(e) => {
                self.line(0, &format!("step #{i} each {} local {} locals {}", self.set_ref(e.set), e.local, e.locals));
                self.expr_line(2, "list", &e.list);
                self.line(2, &format!("template {}", e.template.id));
                self.criterion_body(4, &e.template);
                for s in &e.shows {
                    self.expr_line(2, &format!("shows {}", s.name), &s.expr);
                }
            }
        }
    }

    fn criterion_body(&mut self, ind: usize, c: &CriterionDecl) {
        self.expr_line(ind, "text", &c.text);
        let kind = match &c.kind {
            CriterionKind::Binary => "binary".to_string(),
            CriterionKind::Continuous => "continuous".to_string(),
            CriterionKind::Preference => "preference".to_string(),
            CriterionKind::Ordinal { levels } => {
                let ls: Vec<String> = levels.iter().map(|(v, d)| format!("{} {}", num(*v), quote(d))).collect();
                format!("ordinal [{}]", ls.join(", "))
            }
            CriterionKind::Nominal { labels } => {
                let ls: Vec<String> = labels.iter().map(|(l, v)| format!("{}: {}", quote(l), num(*v))).collect();
                format!("nominal [{}]", ls.join(", "))
            }
        };
        self.line(ind, &format!("kind {kind}"));
        self.opt_expr_line(ind, "points", &c.points);
        self.opt_expr_line(ind, "weight", &c.weight);
        self.line(ind, &format!("axis {}", opt(&c.axis, |a| quote(a))));
        self.opt_expr_line(ind, "tags", &c.tags);
        self.opt_expr_line(ind, "pass", &c.pass);
        match &c.verifier {
            Verifier::Judge { judge } => self.line(ind, &format!("verifier judge {}", self.judge_ref(*judge))),
            Verifier::Check { expr } => self.expr_line(ind, "verifier check", expr),
            Verifier::Value { expr } => self.expr_line(ind, "verifier value", expr),
            Verifier::Extract { judge, from, ty, local, check } => {
                self.line(
                    ind,
                    &format!(
                        "verifier extract {} from {} as {ty} into local#{local}",
                        self.judge_ref(*judge),
                        self.input_ref(*from)
                    ),
                );
                self.expr_line(ind + 2, "check", check);
            }
        }
        let sets: Vec<String> = c.sets.iter().map(|s| self.set_ref(*s)).collect();
        self.line(ind, &format!("sets [{}]", sets.join(", ")));
        self.line(ind, &format!("site {}", site(c.site)));
    }

    fn example(&mut self, i: usize, e: &Example) {
        self.line(0, &format!("example #{i} {} {}", quote(&e.name), site(e.site)));
        for (input, value) in &e.bindings {
            let key = format!("bind {}", self.input_ref(*input));
            self.expr_line(2, &key, value);
        }
        for (id, v) in &e.verdicts {
            self.line(2, &format!("verdict {} {v}", quote(id)));
        }
        for x in &e.expects {
            let text = match x {
                Expect::Score { value, within, site: s } => {
                    format!("expect score {} within {} {}", opt(value, |v| num(*v)), num(*within), site(*s))
                }
                Expect::Failure { class, site: s } => {
                    format!("expect failure {} {}", opt(class, |c| quote(c)), site(*s))
                }
                Expect::Group { name, value, within, site: s } => {
                    format!("expect group {name} {} within {} {}", num(*value), num(*within), site(*s))
                }
                Expect::Criterion { id, verdict, site: s } => {
                    format!("expect criterion {} {verdict} {}", quote(id), site(*s))
                }
            };
            self.line(2, &text);
        }
    }

    // ------------------------------------------------------------------ expressions

    fn expr(&self, e: &Expr) -> Sx {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.expr_sx(e))
    }

    fn expr_sx(&self, e: &Expr) -> Sx {
        let ty = &e.ty;
        let tagged = |h: &str| format!("{h}:{ty}");
        let (head, args): (Vec<String>, Vec<Sx>) = match &e.kind {
            ExprKind::Const(c) => {
                let (text, natural) = match c {
                    Const::Null => ("null".to_string(), Type::Null),
                    Const::Bool(b) => (b.to_string(), Type::Bool),
                    Const::Number(n) => (num(*n), Type::Number),
                    Const::Text(t) => (quote(t), Type::Text),
                };
                if *ty == natural {
                    return atom(text);
                }
                (vec![tagged("const")], vec![atom(text)])
            }
            ExprKind::Input(i) => {
                let name = self.p.inputs.get(*i as usize).map_or("?", |x| x.name.as_str());
                (vec![tagged("input"), format!("#{i}"), name.to_string()], vec![])
            }
            ExprKind::Local(i) => (vec![tagged("local"), format!("#{i}")], vec![]),
            ExprKind::Let(i) => {
                let name = self.p.lets.get(*i as usize).map_or("?", |x| x.name.as_str());
                (vec![tagged("let"), format!("#{i}"), name.to_string()], vec![])
            }
            ExprKind::Criterion(i) => {
                (vec![tagged("criterion"), format!("#{i}"), self.criterion_name(*i).to_string()], vec![])
            }
            ExprKind::List(xs) => (vec![tagged("list")], xs.iter().map(|x| self.expr(x)).collect()),
            ExprKind::Record(fs) => (vec![tagged("record")], fs.iter().map(|(n, x)| pair(n, self.expr(x))).collect()),
            ExprKind::Field { base, name, site: s } => {
                (vec![tagged("field"), name.clone(), site(*s)], vec![self.expr(base)])
            }
            ExprKind::Narrowed(arg) => (vec![tagged("narrowed")], vec![self.expr(arg)]),
            ExprKind::Index { base, index, site: s } => {
                (vec![tagged("index"), site(*s)], vec![self.expr(base), self.expr(index)])
            }
            ExprKind::Unary { op, arg } => {
                let op = match op {
                    UnOp::Neg => "neg",
                    UnOp::Not => "not",
                };
                (vec![tagged(op)], vec![self.expr(arg)])
            }
            ExprKind::Binary { op, lhs, rhs, site: s } => {
                (vec![tagged(bin_op(*op)), site(*s)], vec![self.expr(lhs), self.expr(rhs)])
            }
            ExprKind::Compare { first, rest } => {
                let mut args = vec![self.expr(first)];
                args.extend(rest.iter().map(|(op, x)| Sx::Op(op.symbol().to_string(), Box::new(self.expr(x)))));
                (vec![tagged("compare")], args)
            }
            ExprKind::If { cond, then, els } => {
                (vec![tagged("if")], vec![self.expr(cond), self.expr(then), self.expr(els)])
            }
            ExprKind::Intrinsic { name, overload, args, site: s } => (
                vec![tagged("intrinsic"), format!("{name}#{overload}"), site(*s)],
                args.iter().map(|x| self.expr(x)).collect(),
            ),
            ExprKind::Call { func, args, site: s } => {
                let name = self.p.functions.get(*func as usize).map_or("?", |f| f.name.as_str());
                (
                    vec![tagged("call"), format!("fn#{func}"), name.to_string(), site(*s)],
                    args.iter().map(|x| self.expr(x)).collect(),
                )
            }
            ExprKind::Aggregate { op, set, policy: pol, args, site: s } => {
                let name = self.p.sets.get(*set as usize).map_or("?", |x| x.name.as_str());
                (
                    vec![
                        tagged("agg"),
                        op.name().to_string(),
                        format!("set#{set}"),
                        name.to_string(),
                        policy(*pol).to_string(),
                        site(*s),
                    ],
                    args.iter().map(|x| self.expr(x)).collect(),
                )
            }
            ExprKind::HigherOrder { op, list, local, body } => {
                (vec![tagged(op.name()), format!("local#{local}")], vec![self.expr(list), self.expr(body)])
            }
        };
        Sx::Node(head, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: ExprKind, ty: Type) -> Expr {
        Expr { kind, ty }
    }

    fn sample() -> Program {
        let response = e(ExprKind::Input(0), Type::Text);
        let wc = e(
            ExprKind::Intrinsic { name: "word_count".into(), overload: 0, args: vec![response.clone()], site: 1 },
            Type::Number,
        );
        let crit = CriterionDecl {
            id: "short".into(),
            text: Expr::constant(Const::Text("Stays \"short\"".into())),
            kind: CriterionKind::Binary,
            points: Some(Expr::constant(Const::Number(2.0))),
            weight: None,
            axis: Some("style".into()),
            tags: None,
            pass: None,
            verifier: Verifier::Check {
                expr: e(
                    ExprKind::Compare {
                        first: Box::new(wc.clone()),
                        rest: vec![(CmpOp::Le, Expr::constant(Const::Number(400.0)))],
                    },
                    Type::Bool,
                ),
            },
            sets: vec![0],
            site: 2,
        };
        Program {
            ir_version: IR_VERSION,
            rubric: RubricInfo { name: "demo".into(), version: "1.0.0".into(), title: None },
            inputs: vec![InputDecl { name: "response".into(), ty: Type::Text, default: None, field: None }],
            judges: vec![],
            functions: vec![],
            lets: vec![],
            steps: vec![
                Step::Gate(Box::new(GateDecl {
                    name: "nonempty".into(),
                    cond: e(
                        ExprKind::Compare {
                            first: Box::new(wc),
                            rest: vec![(CmpOp::Ge, Expr::constant(Const::Number(1.0)))],
                        },
                        Type::Bool,
                    ),
                    action: GateAction::Score,
                    value: Expr::constant(Const::Number(0.0)),
                    reason: Some("format".into()),
                    site: 0,
                })),
                Step::Criterion(0),
            ],
            criteria: vec![crit],
            sets: vec![SetDecl {
                name: "all".into(),
                kind: SetKind::All,
                weight: None,
                members: vec![Member::Criterion(0)],
            }],
            score: e(
                ExprKind::Aggregate {
                    op: AggOp::PointsRatio,
                    set: 0,
                    policy: Policy::Propagate,
                    args: vec![],
                    site: 3,
                },
                Type::Number,
            ),
            reward: None,
            scores: vec![],
            stats: vec![],
            generators: vec![],
            examples: vec![],
            site_count: 4,
            prepared: Default::default(),
        }
    }

    #[test]
    fn prints_every_section() {
        let text = print_program(&sample());
        let expected = r#"ir_version 3
rubric demo @ "1.0.0" title -

input #0 response: Text default -

step #0 gate nonempty action score reason "format" @s0
  cond (compare:Bool (intrinsic:Number word_count#0 @s1 (input:Text #0 response)) >= 1)
  value 0

step #1 criterion#0 short

criterion #0 short
  text "Stays \"short\""
  kind binary
  points 2
  weight -
  axis "style"
  tags -
  pass -
  verifier check (compare:Bool (intrinsic:Number word_count#0 @s1 (input:Text #0 response)) <= 400)
  sets [set#0 all]
  site @s2

set #0 all kind all weight -
  members [criterion#0 short]

score (agg:Number points_ratio set#0 all propagate @s3)

sites 4
"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn prints_the_site_table_apart() {
        let sites = SiteTable::new(vec![
            Site { file: "main".into(), start: 0, end: 10 },
            Site { file: "std.text".into(), start: 4, end: 9 },
        ]);
        assert_eq!(print_sites(&sites), "site @s0 \"main\" 0..10\nsite @s1 \"std.text\" 4..9\n");
    }

    #[test]
    fn long_expressions_break_one_child_per_line() {
        let long = Expr::constant(Const::Text("x".repeat(60).into()));
        let cat = e(
            ExprKind::Binary { op: BinOp::Concat, lhs: Box::new(long.clone()), rhs: Box::new(long), site: 0 },
            Type::Text,
        );
        let sx = Writer { p: &sample(), out: String::new(), prev: None }.expr(&cat);
        let mut out = String::new();
        sx.render(&mut out, 0, 0);
        assert_eq!(out, format!("(concat:Text @s0\n  \"{x}\"\n  \"{x}\")", x = "x".repeat(60)));
    }
}
