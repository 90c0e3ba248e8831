//! The abstract syntax tree produced by `syntax::parser`: every node carries a `Span`, names
//! are owned strings, and no node holds source text beyond the literal values it denotes.

use crate::source::Span;

/// One condition of `escalate`.
#[derive(Debug, Clone, PartialEq)]
pub enum EscalateWhen {
    /// `between LO and HI`: the answer's P(yes) (or value, or met share of its samples) lies in
    /// [LO, HI].
    Between(f64, f64, Span),
    /// `split`, `unscored`, or a name that is neither (reported by the checker).
    Named(Name),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StrLit {
    pub value: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub header: Option<Header>,
    pub items: Vec<Item>,
    pub span: Span,
    /// Names declared by items that failed to parse (`judge grader {` with a syntax error):
    /// later stages do not report them as unknown, which would only repeat the syntax error.
    pub broken: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HeaderKind {
    Rubric,
    Module,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub kind: HeaderKind,
    pub name: Name,
    /// Semver text, rubrics only.
    pub version: Option<StrLit>,
    pub title: Option<StrLit>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Import(Import),
    Input(Input),
    Judge(Judge),
    Gate(Gate),
    Criterion(Criterion),
    Criteria(CriteriaBlock),
    Tier(Tier),
    Group(Group),
    Let(Let),
    Fn(FnDef),
    Score(ScoreDef),
    Example(Example),
    Reward(RewardDef),
    Stat(StatDef),
    /// `generator NAME { ... fills INPUT }`: a judge's settings, for `rubric generate`.
    Generator(Judge),
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Import(i) => i.span,
            Item::Input(i) => i.span,
            Item::Judge(i) => i.span,
            Item::Gate(i) => i.span,
            Item::Criterion(i) => i.span,
            Item::Criteria(i) => i.span,
            Item::Tier(i) => i.span,
            Item::Group(i) => i.span,
            Item::Let(i) => i.span,
            Item::Fn(i) => i.span,
            Item::Score(i) => i.span,
            Item::Example(i) => i.span,
            Item::Reward(i) => i.span,
            Item::Stat(i) => i.span,
            Item::Generator(i) => i.span,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub path: Name,
    pub alias: Option<Name>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: Name,
    pub ty: TypeExpr,
    /// `from "FIELD"`: the row field it reads, when that is not its name.
    pub field: Option<StrLit>,
    pub default: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judge {
    pub name: Name,
    pub settings: Vec<JudgeSetting>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JudgeSetting {
    pub kind: JudgeSettingKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JudgeSettingKind {
    Model(StrLit),
    Temperature(f64),
    TopP(f64),
    MaxTokens(f64),
    Seed(f64),
    Samples(f64),
    MinSamples(f64),
    Vote(Name),
    Sees(Vec<Name>),
    Returns {
        kind: Name,
        fields: Vec<FieldType>,
    },
    EvidenceQuote(Name),
    Template(StrLit),
    System(StrLit),
    Scoring(Name),
    PerCall(f64),
    /// `local "DIR"`: a local model answers, scoring P(yes).
    Local(StrLit),
    /// `calibration "FILE"`: maps from the judge's answers to calibrated probabilities.
    Calibration(StrLit),
    /// `order fixed | shuffled`: the order of ordinal and nominal options.
    Order(Name),
    /// `reasoning_effort low`: passed to a reasoning model as is.
    ReasoningEffort(Name),
    /// `cascade A, B`: ask `A`; ask `B` where `A`'s answer calls for it (`escalate`).
    Cascade(Vec<Name>),
    /// `escalate between 0.2 and 0.8, split, unscored`: when a cascade asks its next judge.
    Escalate(Vec<EscalateWhen>),
    /// `jury A, B, C`: a panel of other judges.
    Jury(Vec<Name>),
    /// `weights 2, 1, 1`: a jury's members' weights for `vote weighted`.
    Weights(Vec<f64>),
    /// `compares A, B`: the judge compares two candidate inputs.
    Compares(Name, Name),
    /// `inconsistent tie | unscored`: what a comparison whose two orders disagree becomes.
    Inconsistent(Name),
    /// `rollouts response`: a group judge, shown this input of every member of the row's group.
    Rollouts(Name),
    /// `fills rubrics`: the list input a generator writes.
    Fills(Name),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub name: Name,
    pub cond: Expr,
    pub action: GateAction,
    pub reason: Option<StrLit>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GateAction {
    /// The score becomes this value and evaluation stops.
    Score(Expr),
    /// The final score is at most this value; evaluation goes on.
    Cap(Expr),
}

/// A criterion. At top level, in tiers, groups and static `criteria` blocks it has an `id` and
/// an optional literal text (`Expr::Str`); in a `criteria ... each` template it has no id and
/// its text is any `Text` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Criterion {
    pub id: Option<Name>,
    pub text: Option<Expr>,
    pub attrs: Vec<CriterionAttr>,
    pub verifier: Option<Verifier>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CriterionAttr {
    pub kind: AttrKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttrKind {
    Points(Expr),
    Weight(Expr),
    Axis(StrLit),
    Tags(Expr),
    Ordinal(Vec<Level>),
    Nominal(Vec<Label>),
    Continuous,
    Pass(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub value: f64,
    pub descriptor: StrLit,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub name: StrLit,
    pub value: f64,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verifier {
    pub kind: VerifierKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum VerifierKind {
    /// `by judge`
    Judge(Name),
    /// `check <Bool expr>`
    Check(Expr),
    /// `value <Number expr in [0,1]>`
    Value(Expr),
    /// `extract var: Type from input by judge check <Bool expr>`
    Extract { var: Name, ty: TypeExpr, from: Name, judge: Name, check: Expr },
    /// `{ check NAME "TEXT": <Bool expr> ... value <Number expr> }`: sub-checks, each reported,
    /// and the criterion's value computed from them (met when all pass, without `value`).
    Checks { checks: Vec<SubCheck>, value: Option<Expr> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubCheck {
    pub name: Name,
    pub text: Option<StrLit>,
    pub check: Expr,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CriteriaBlock {
    pub name: Name,
    pub default_judge: Option<Name>,
    pub body: CriteriaBody,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CriteriaBody {
    Static(Vec<Criterion>),
    Each { var: Name, list: Expr, template: Box<Criterion>, shows: Vec<ShownItem> },
}

/// One item of a block's `shows`: what its judge is shown of each instance, in a fence named
/// `name`; `expr` is `None` for a name alone (`shows step`).
#[derive(Debug, Clone, PartialEq)]
pub struct ShownItem {
    pub name: Name,
    pub expr: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    pub name: Name,
    pub default_judge: Option<Name>,
    pub criteria: Vec<Criterion>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: Name,
    pub weight: Option<Expr>,
    pub default_judge: Option<Name>,
    pub members: Vec<GroupMember>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum GroupMember {
    Group(Group),
    Criterion(Criterion),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Let {
    pub name: Name,
    pub ty: Option<TypeExpr>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FnDef {
    pub name: Name,
    pub params: Vec<Param>,
    pub ret: TypeExpr,
    pub body: Expr,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: Name,
    pub ty: TypeExpr,
    pub default: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScoreDef {
    /// `score NAME = ...`: a report-only score beside the main one.
    pub name: Option<Name>,
    pub expr: Expr,
    pub span: Span,
}

/// `reward { advantage zscore  epsilon 1e-6  clip -5, 5  penalty EXPR  unscored exclude  uncovered row }`
#[derive(Debug, Clone, PartialEq)]
pub struct RewardDef {
    pub settings: Vec<RewardSetting>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RewardSetting {
    pub kind: RewardSettingKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RewardSettingKind {
    Advantage(Name),
    Epsilon(f64),
    Clip(f64, f64),
    Penalty(Expr),
    Unscored(Name),
    Uncovered(Name),
    /// `std sample | population`: the standard deviation of `zscore`.
    Std(Name),
}

/// `stat NAME = AGG(MEASURE [CMP NUMBER]) [per tag "PREFIX" | per axis | per input FIELD |
/// per input FIRST, SECOND] [clip LO, HI]`: a dataset-level statistic over the run's records.
#[derive(Debug, Clone, PartialEq)]
pub struct StatDef {
    pub name: Name,
    /// `mean`, `rate`, `bradley_terry`.
    pub agg: Name,
    pub measure: StatMeasure,
    /// `rate(score >= 0.5)`: the comparison and its number.
    pub test: Option<(CmpOp, f64, Span)>,
    pub per: Option<StatPer>,
    pub clip: Option<(f64, f64, Span)>,
    pub span: Span,
}

/// What a statistic measures on each row.
#[derive(Debug, Clone, PartialEq)]
pub enum StatMeasure {
    /// The row's score.
    Score(Span),
    /// A criterion's value.
    Criterion(Name),
    /// `points_ratio(SET)`, `met_ratio(SET)`: over the criteria of a set.
    Call { func: Name, set: Name },
}

/// How a statistic splits into one value per key.
#[derive(Debug, Clone, PartialEq)]
pub enum StatPer {
    /// Per tag of the set's criteria (those starting with the prefix, when one is given).
    Tag(Option<StrLit>, Span),
    /// Per axis of the set's criteria.
    Axis(Span),
    /// Per value of a row input (a `Text`, or each item of a `List[Text]`).
    Input(Name),
    /// `per input FIRST, SECOND`: per system of a pairwise comparison, the two inputs naming
    /// the systems each row compares (`bradley_terry`).
    Pair(Name, Name),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub name: StrLit,
    pub stmts: Vec<ExampleStmt>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExampleStmt {
    pub kind: ExampleStmtKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExampleStmtKind {
    /// `response "..."`: bind an input.
    Bind { input: Name, value: Expr },
    /// `judge grader says er = met, dose = unmet`
    Judge { judge: Name, verdicts: Vec<(CriterionKey, VerdictLit)> },
    /// `expect score 0.5 within 0.01` / `expect score unscored`
    ExpectScore { value: Option<f64>, within: Option<f64> },
    /// `expect failure "format"` / `expect failure null`
    ExpectFailure(Option<StrLit>),
    /// `expect group code = 0.5`
    ExpectGroup { group: Name, value: f64, within: Option<f64> },
    /// `expect er = met`
    ExpectCriterion { key: CriterionKey, verdict: VerdictLit },
}

/// A criterion named in an example: `er`, or `items[3]` for a per-instance criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct CriterionKey {
    pub name: Name,
    pub index: Option<u32>,
    pub span: Span,
}

impl CriterionKey {
    pub fn id(&self) -> String {
        match self.index {
            Some(i) => format!("{}[{}]", self.name.text, i),
            None => self.name.text.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct VerdictLit {
    pub kind: VerdictLitKind,
    /// `quoting "..."`: the evidence the judge quoted.
    pub evidence: Option<StrLit>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum VerdictLitKind {
    Met,
    Unmet,
    Unscored(Option<String>),
    Number(f64),
    Label(String),
    Bool(bool),
    /// `[met, unmet, met]`: one verdict per judge sample.
    Samples(Vec<VerdictLit>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct FieldType {
    pub name: Name,
    pub ty: TypeExpr,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TypeExpr {
    pub kind: TypeExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TypeExprKind {
    Named(Name),
    List(Box<TypeExpr>),
    Record(Vec<FieldType>),
    Optional(Box<TypeExpr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Coalesce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Coalesce => "??",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: Option<Name>,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Number(f64),
    Str(String),
    Bool(bool),
    Null,
    List(Vec<Expr>),
    Record(Vec<(Name, Expr)>),
    Var(Name),
    Field(Box<Expr>, Name),
    Index(Box<Expr>, Box<Expr>),
    Call {
        callee: Box<Expr>,
        args: Vec<Arg>,
    },
    Method {
        receiver: Box<Expr>,
        method: Name,
        args: Vec<Arg>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `a < b <= c`: a chain of comparisons, each operand evaluated once.
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Lambda(Name, Box<Expr>),
}
