//! Stage 3, the checker's diagnostics: one constructor per code the checker reports, named
//! after its code (`type_mismatch` builds `rubric::type::mismatch`) and taking the spans and
//! the names, so that every call site is one line and every message is written here, by the
//! house rules: lowercase, no trailing period, user input in backticks, further sentences in
//! `help`. A code that covers several situations takes an enum naming the situation.
//! The `rubric::type::*` constructors are in `diagnostics/types.rs`. `docs/diagnostics.md`
//! documents every code, in the order of these files.

mod types;

use crate::diag::{did_you_mean, Diagnostic};
use crate::ir;
use crate::source::Span;
use crate::syntax::ast;

pub(super) use types::*;

/// An error with its primary label.
fn error(code: &'static str, message: impl Into<String>, at: Span, label: impl Into<String>) -> Diagnostic {
    Diagnostic::error(code, message).with_label(at, label)
}

/// `d` with `help` as its help line, or none.
fn maybe_help(d: Diagnostic, help: Option<String>) -> Diagnostic {
    Diagnostic { help, ..d }
}

/// "use one of `a`, `b`" and similar lists of choices.
fn backticked(names: &[&str]) -> String {
    names.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
}

// ------------------------------------------------------------------ modules and names

pub(super) fn resolve_missing_header(at: Span) -> Diagnostic {
    error("rubric::resolve::missing_header", "a rubric must start with `rubric NAME @ VERSION`", at, "expected here")
        .with_help("for example: `rubric my.rubric @ 1.0.0 \"What it grades\"`")
}

pub(super) fn resolve_not_a_rubric(name: &ast::Name) -> Diagnostic {
    let message = format!("`{}` is a module, not a rubric", name.text);
    error("rubric::resolve::not_a_rubric", message, name.span, "declared as a module here")
        .with_help("run a file that starts with `rubric NAME @ VERSION`; modules are imported by rubrics")
}

pub(super) fn resolve_module_item(module: &str, item: Span) -> Diagnostic {
    let message = format!("module `{module}` may only contain `import` and `fn` declarations");
    error("rubric::resolve::module_item", message, item, "not allowed in a module")
}

/// What was defined twice.
pub(super) enum Duplicate<'a> {
    /// A root-level name that is already `was` (`Global::describe`), defined at `first`
    /// (`None` for a built-in name such as `all`).
    Name {
        name: &'a str,
        was: &'static str,
        first: Option<Span>,
    },
    Parameter(&'a str),
    /// A sub-check named like another of the same criterion.
    SubCheck(&'a str),
    Function(&'a str),
    Score {
        first: Span,
    },
    Reward {
        first: Span,
    },
    /// A report-only score named like the one at `first`.
    NamedScore {
        name: &'a str,
        first: Span,
    },
    /// A statistic named like the one at `first`.
    Stat {
        name: &'a str,
        first: Span,
    },
    /// A gate named like the declaration at `first`.
    Gate {
        name: &'a str,
        first: Span,
    },
}

pub(super) fn resolve_duplicate(again: Span, what: Duplicate<'_>) -> Diagnostic {
    const CODE: &str = "rubric::resolve::duplicate";
    match what {
        Duplicate::Name { name, was, first } => {
            let d = error(CODE, format!("`{name}` is defined twice"), again, "defined again here")
                .with_help(format!("`{name}` is already {was}; every top-level name must be unique"));
            match first {
                Some(first) => d.with_label(first, "first defined here"),
                None => d,
            }
        }
        Duplicate::Parameter(name) => error(CODE, format!("parameter `{name}` is declared twice"), again, "again here"),
        Duplicate::SubCheck(name) => error(CODE, format!("sub-check `{name}` is declared twice"), again, "again here"),
        Duplicate::Function(name) => error(CODE, format!("function `{name}` is defined twice"), again, "again here"),
        Duplicate::Score { first } => error(CODE, "the score is defined twice", again, "defined again here")
            .with_label(first, "first defined here"),
        Duplicate::Reward { first } => error(CODE, "the reward is declared twice", again, "declared again here")
            .with_label(first, "first declared here"),
        Duplicate::NamedScore { name, first } => {
            error(CODE, format!("score `{name}` is defined twice"), again, "defined again here")
                .with_label(first, "first defined here")
        }
        Duplicate::Stat { name, first } => {
            error(CODE, format!("statistic `{name}` is declared twice"), again, "declared again here")
                .with_label(first, "first declared here")
        }
        Duplicate::Gate { name, first } => error(CODE, format!("`{name}` is defined twice"), again, "gate named here")
            .with_label(first, "first defined here"),
    }
}

pub(super) fn reward_duplicate_setting(word: &str, again: Span, first: Span) -> Diagnostic {
    error("rubric::reward::duplicate_setting", format!("`{word}` is set twice"), again, "set again here")
        .with_label(first, "first set here")
}

/// `what` names the setting's list (`advantage form`...); `known` is the list.
pub(super) fn reward_unknown_value(what: &str, written: &ast::Name, known: &[&str]) -> Diagnostic {
    let message = format!("unknown {what} `{}`", written.text);
    error("rubric::reward::unknown_value", message, written.span, "not one of the known values")
        .with_help(format!("use one of {}", backticked(known)))
}

/// A `stat` names an aggregate, function, criterion, set or input that does not exist.
pub(super) fn stat_unknown(what: &str, written: &ast::Name, known: &[&str]) -> Diagnostic {
    let message = format!("unknown {what} `{}`", written.text);
    let help = match did_you_mean(&written.text, known.iter().copied()) {
        Some(s) => s,
        None if known.is_empty() => format!("this rubric has no {what} to name"),
        None if known.len() <= 12 => format!("use one of {}", backticked(known)),
        None => format!("use one of {}, ...", backticked(&known[..12])),
    };
    error("rubric::stat::unknown", message, written.span, "not declared").with_help(help)
}

/// A `stat` that cannot be computed as written.
pub(super) enum BadStat<'a> {
    /// `rate(X)` where X is not a binary criterion.
    RateNeedsTest,
    /// `mean(X OP N)`.
    MeanWithTest,
    /// `per tag` or `per axis` over a measure that reads no set.
    PerNeedsSet(&'a str),
    /// `per input X` where X is not text, a number, a boolean or a list of text.
    PerInputType(&'a str, String),
    /// A criterion measure whose kind has no number (nominal).
    NominalCriterion(&'a str),
    Clip(f64, f64),
    /// `bradley_terry(X OP N)`.
    RankingWithTest,
    /// `bradley_terry(...) clip LO, HI`.
    RankingWithClip,
    /// `bradley_terry` without `per input FIRST, SECOND`.
    RankingNeedsPair,
    /// `per input FIRST, SECOND` with an aggregate other than `bradley_terry` (named).
    PairNeedsRanking(&'a str),
    /// `per input X, X`.
    PairTwice(&'a str),
    /// A system named by an input that is not `Text`.
    SystemInputType(&'a str, String),
    /// `bradley_terry` over an ordinal criterion with a level outside [0, 1].
    NotAWinShare(&'a str, f64),
}

pub(super) fn stat_bad(at: Span, what: BadStat<'_>) -> Diagnostic {
    const CODE: &str = "rubric::stat::bad";
    match what {
        BadStat::RateNeedsTest => error(CODE, "`rate` needs a test", at, "not a binary criterion")
            .with_help("write the test inside: `rate(score >= 0.5)`, or name a binary criterion"),
        BadStat::MeanWithTest => error(CODE, "`mean` takes a measure, not a test", at, "a test here")
            .with_help("the fraction of rows where a test holds is `rate(...)`"),
        BadStat::PerNeedsSet(what) => error(CODE, format!("`per {what}` splits the criteria of a set"), at, "here")
            .with_help(
                "use a measure over a set, such as `points_ratio(SET)` or `met_ratio(SET)`, or split the rows with `per input FIELD`",
            ),
        BadStat::PerInputType(name, ty) => {
            error(CODE, format!("input `{name}` cannot split rows"), at, format!("`{name}` is {ty}"))
                .with_help("split by an input of type `Text`, `Number`, `Bool` or `List[Text]` (optional or not)")
        }
        BadStat::NominalCriterion(id) => {
            error(CODE, format!("criterion `{id}` is nominal: it has no number to aggregate"), at, "nominal")
                .with_help("aggregate a binary, ordinal or continuous criterion, or the score")
        }
        BadStat::Clip(lo, hi) => {
            error(CODE, "`clip` needs its low bound below its high bound", at, format!("{lo} is not below {hi}"))
        }
        BadStat::RankingWithTest => error(CODE, "`bradley_terry` takes a measure, not a test", at, "a test here")
            .with_help(WIN_SHARE),
        BadStat::RankingWithClip => error(CODE, "`bradley_terry` cannot be clipped", at, "a clip here")
            .with_help("its values are ratings on the Elo scale (1000 for a system of average strength), not shares"),
        BadStat::RankingNeedsPair => {
            error(CODE, "`bradley_terry` ranks the systems a pair of inputs names", at, "no pair of inputs")
                .with_help(
                    "name the two `Text` inputs that hold the systems each row compares: `bradley_terry(score) per input model_a, model_b`",
                )
        }
        BadStat::PairNeedsRanking(agg) => {
            error(CODE, format!("`{agg}` cannot split rows by a pair of inputs"), at, "a pair of inputs").with_help(
                "rank the systems the two inputs name with `bradley_terry(...)`, or split the rows by one input: `per input FIELD`",
            )
        }
        BadStat::PairTwice(name) => error(CODE, format!("input `{name}` is named twice"), at, "the same input")
            .with_help("name the two inputs that hold the first and the second system of each row"),
        BadStat::SystemInputType(name, ty) => {
            error(CODE, format!("input `{name}` cannot name a system"), at, format!("`{name}` is {ty}"))
                .with_help("each system of the pair is named by a `Text` input")
        }
        BadStat::NotAWinShare(id, v) => {
            error(CODE, format!("criterion `{id}` is not a share of a win"), at, format!("a level of {v}"))
                .with_help(WIN_SHARE)
        }
    }
}

/// What `bradley_terry` reads from each row.
const WIN_SHARE: &str =
    "the measure is the first system's share of the win, a number in [0, 1]: 1 it wins, 0 it loses, 0.5 a tie";

/// A number of the `reward` block out of its range.
pub(super) enum BadNumber {
    Epsilon(f64),
    Clip(f64, f64),
}

pub(super) fn reward_bad_number(at: Span, what: BadNumber) -> Diagnostic {
    const CODE: &str = "rubric::reward::bad_number";
    match what {
        BadNumber::Epsilon(e) => error(CODE, "`epsilon` must be above 0", at, format!("{e} is not above 0")),
        BadNumber::Clip(lo, hi) => {
            error(CODE, "`clip` needs its low bound below its high bound", at, format!("{lo} is not below {hi}"))
        }
    }
}

/// `in_function`: the name was used in a function body; `is_global`: it names a root-level
/// declaration there, which a function cannot see.
pub(super) fn resolve_unknown_name<'a>(
    name: &ast::Name,
    in_function: bool,
    is_global: bool,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Diagnostic {
    let message = if in_function && is_global {
        format!("`{}` is not visible inside a function", name.text)
    } else {
        format!("unknown name `{}`", name.text)
    };
    let fallback = if in_function {
        "a function sees only its parameters; pass inputs in as arguments"
    } else {
        "declare it with `input`, `let` or `criterion`"
    };
    let help = did_you_mean(&name.text, candidates).unwrap_or_else(|| fallback.into());
    error("rubric::resolve::unknown_name", message, name.span, "not found").with_help(help)
}

/// Why a called name is not a function.
pub(super) enum UnknownFunction<'a> {
    /// Qualified with an imported module that has no such function; `candidates` are its functions.
    InModule { module: &'a str, candidates: &'a [&'a str] },
    /// An aggregation whose first argument is not a set of criteria.
    NotASet,
    /// Neither a function nor an intrinsic; `candidates` are every callable name.
    Unknown { candidates: &'a [&'a str] },
}

pub(super) fn resolve_unknown_function(name: &ast::Name, why: UnknownFunction<'_>) -> Diagnostic {
    const CODE: &str = "rubric::resolve::unknown_function";
    let n = &name.text;
    match why {
        UnknownFunction::InModule { module, candidates } => maybe_help(
            error(CODE, format!("module `{module}` has no function `{n}`"), name.span, "not found"),
            did_you_mean(n, candidates.iter().copied()),
        ),
        UnknownFunction::NotASet => {
            let message = format!("`{n}` is an aggregation, and its first argument is not a set of criteria");
            error(CODE, message, name.span, "not a set").with_help(format!(
                "the first argument of `{n}` must be `all` or the name of a `criteria`, `each`, `tier` or `group` \
                 block; to use one criterion, put it in a block"
            ))
        }
        UnknownFunction::Unknown { candidates } => {
            let help = did_you_mean(n, candidates.iter().copied())
                .unwrap_or_else(|| "see docs/stdlib.md for the standard library".into());
            error(CODE, format!("unknown function `{n}`"), name.span, "not found").with_help(help)
        }
    }
}

/// `modules`: the names of the imported modules that define `name`.
pub(super) fn resolve_ambiguous(name: &ast::Name, modules: &[&str]) -> Diagnostic {
    let message = format!("`{}` is defined in several imported modules: {}", name.text, backticked(modules));
    error("rubric::resolve::ambiguous", message, name.span, "ambiguous")
        .with_help("qualify the call with the module's alias, e.g. `text.f(x)`")
}

pub(super) fn resolve_unknown_input<'a>(name: &ast::Name, inputs: impl IntoIterator<Item = &'a str>) -> Diagnostic {
    let help = did_you_mean(&name.text, inputs).unwrap_or_else(|| "declare it with `input NAME: Type`".into());
    error("rubric::resolve::unknown_input", format!("no input named `{}`", name.text), name.span, "not an input")
        .with_help(help)
}

/// `found`: what the name denotes instead (`Global::describe`), if anything.
pub(super) fn resolve_unknown_judge<'a>(
    name: &ast::Name,
    found: Option<&str>,
    judges: impl IntoIterator<Item = &'a str>,
) -> Diagnostic {
    let message = match found {
        Some(g) => format!("`{}` is {g}, not a judge", name.text),
        None => format!("no judge named `{}`", name.text),
    };
    let help =
        did_you_mean(&name.text, judges).unwrap_or_else(|| "declare it with `judge NAME { model \"...\" }`".into());
    error("rubric::resolve::unknown_judge", message, name.span, "expected a judge").with_help(help)
}

pub(super) fn resolve_no_verifier(criterion: &str, at: Span) -> Diagnostic {
    let message = format!("criterion `{criterion}` has no verifier");
    error("rubric::resolve::no_verifier", message, at, "how is this decided?")
        .with_help("add `by JUDGE`, `check EXPR` or `value EXPR`, or put it in a block with `by JUDGE`")
}

/// `expect group NAME` where `NAME` is no group.
pub(super) fn resolve_unknown_set<'a>(group: &ast::Name, groups: impl IntoIterator<Item = &'a str>) -> Diagnostic {
    let help = did_you_mean(&group.text, groups)
        .unwrap_or_else(|| "`expect group` names a `group NAME weight W { ... }`".into());
    error("rubric::resolve::unknown_set", format!("no group named `{}`", group.text), group.span, "not a group")
        .with_help(help)
}

/// `key`: the criterion as written (`items[2]`); `name`: its name, for the suggestion.
pub(super) fn resolve_unknown_criterion<'a>(
    at: Span,
    key: &str,
    name: &str,
    criteria: impl IntoIterator<Item = &'a str>,
) -> Diagnostic {
    let message = format!("no criterion named `{key}`");
    maybe_help(error("rubric::resolve::unknown_criterion", message, at, "here"), did_you_mean(name, criteria))
}

/// `declared`: the criterion is declared before (in a later step); otherwise it is declared
/// further down the file.
pub(super) fn resolve_forward_criterion(name: &ast::Name, declared: bool) -> Diagnostic {
    let message = format!("criterion `{}` is evaluated after this point", name.text);
    let help = if declared {
        "a gate or check can read only criteria declared before it; move it below"
    } else {
        "a gate, check or `let` can read only criteria declared before it; move it below the criterion"
    };
    error("rubric::resolve::forward_criterion", message, name.span, "not yet evaluated here").with_help(help)
}

// ------------------------------------------------------------------ judges

pub(super) fn judge_duplicate_setting(again: Span, first: Span) -> Diagnostic {
    error("rubric::judge::duplicate_setting", "this judge setting is given twice", again, "again here")
        .with_label(first, "first given here")
}

/// A judge setting with a value it cannot take.
pub(super) enum InvalidSetting<'a> {
    Temperature(f64),
    TopP(f64),
    /// `setting` (`samples`, `seed`...) is not a whole number.
    NotWhole {
        setting: &'a str,
        n: f64,
    },
    /// More samples than `ir::validate::MAX_SAMPLES`.
    Samples(u32),
    /// `min_samples` above the judge's `samples`.
    MinSamples {
        min: u32,
        samples: u32,
    },
    EmptyLocal,
    Vote(&'a str),
    Scoring(&'a str),
    ReplyKind(&'a str),
    Order(&'a str),
    Inconsistent(&'a str),
    ReasoningEffort(&'a str),
}

/// The reasoning efforts a judge may ask for (the values reasoning models' APIs take).
pub(super) const REASONING_EFFORTS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

/// The reply kinds a judge may return.
/// The reply kinds a judge may declare: the IR validator's list.
pub(super) use crate::ir::validate::JUDGE_RETURNS as REPLY_KINDS;

pub(super) fn judge_invalid_setting(at: Span, what: InvalidSetting<'_>) -> Diagnostic {
    const CODE: &str = "rubric::judge::invalid_setting";
    match what {
        InvalidSetting::Temperature(t) => error(CODE, format!("temperature {t} is outside [0, 2]"), at, "here"),
        InvalidSetting::TopP(t) => error(CODE, format!("top_p {t} is outside [0, 1]"), at, "here"),
        InvalidSetting::NotWhole { setting, n } => {
            error(CODE, format!("`{setting}` must be a whole number, found {n}"), at, "here")
        }
        InvalidSetting::Samples(n) => {
            let max = crate::ir::validate::MAX_SAMPLES;
            error(CODE, format!("`samples` is at most {max}, found {n}"), at, "here")
        }
        InvalidSetting::MinSamples { min, samples } => {
            error(CODE, format!("`min_samples` is {min}, more than the judge's {samples} samples"), at, "here")
                .with_help(
                "`min_samples N` asks that at least N of the judge's `samples` vote; take more samples or ask fewer",
            )
        }
        InvalidSetting::EmptyLocal => error(CODE, "`local` needs a model directory", at, "empty"),
        InvalidSetting::Vote(other) => {
            let help = did_you_mean(other, ["majority", "mean", "unanimous", "weighted"])
                .unwrap_or_else(|| "votes are `majority`, `mean`, `unanimous` and (a jury's) `weighted`".into());
            error(CODE, format!("unknown vote `{other}`"), at, "here").with_help(help)
        }
        InvalidSetting::Scoring(other) => {
            error(CODE, format!("unknown scoring `{other}`"), at, "here").with_help("scoring is `label` or `logprob`")
        }
        InvalidSetting::Order(other) => error(CODE, format!("unknown order `{other}`"), at, "here").with_help(
            "the order of a judge's options is `fixed` (as declared) or `shuffled` (per request); a comparing \
             judge may also be asked in `both` orders",
        ),
        InvalidSetting::Inconsistent(other) => error(CODE, format!("unknown rule `inconsistent {other}`"), at, "here")
            .with_help("a comparison whose two orders disagree becomes a `tie` or `unscored`"),
        InvalidSetting::ReasoningEffort(other) => {
            let help = did_you_mean(other, REASONING_EFFORTS).unwrap_or_else(|| {
                "the reasoning effort is `none`, `minimal`, `low`, `medium`, `high` or `xhigh`".into()
            });
            error(CODE, format!("unknown reasoning effort `{other}`"), at, "here").with_help(help)
        }
        InvalidSetting::ReplyKind(other) => {
            let help = did_you_mean(other, REPLY_KINDS.iter().copied()).unwrap_or_else(|| {
                "a judge returns `verdict`, `level`, `label`, `value` or `extract` (a comparing judge `preference`, \
                 a group judge `ranking`)"
                    .into()
            });
            error(CODE, format!("unknown reply kind `{other}`"), at, "here").with_help(help)
        }
    }
}

/// Where a judge would need an input it does not see.
pub(super) enum HiddenInput<'a> {
    /// `evidence must quote INPUT`.
    Evidence { input: &'a str },
    /// A template slot `{{INPUT}}`.
    Template { input: &'a str },
    /// `extract ... from INPUT by JUDGE`.
    Extract { input: &'a str },
}

pub(super) fn judge_hidden_input(judge: &str, at: Span, what: HiddenInput<'_>) -> Diagnostic {
    const CODE: &str = "rubric::judge::hidden_input";
    match what {
        HiddenInput::Evidence { input } => {
            let message = format!("evidence must quote `{input}`, but judge `{judge}` does not see `{input}`");
            error(CODE, message, at, "quoted input not shown to the judge")
                .with_help(format!("add `{input}` to the judge's `sees` list"))
        }
        HiddenInput::Template { input } => {
            let message = format!("the template of judge `{judge}` renders `{input}`, which the judge does not see");
            error(CODE, message, at, "template").with_help(format!(
                "add `{input}` to `sees` if the judge may see it; inputs a judge does not see never reach its prompt"
            ))
        }
        HiddenInput::Extract { input } => {
            let message = format!("judge `{judge}` extracts from `{input}` but does not see it");
            error(CODE, message, at, "not shown to the judge")
                .with_help(format!("add `{input}` to the judge's `sees` list"))
        }
    }
}

pub(super) fn judge_unknown_slot(judge: &str, slot: &str, template: Span) -> Diagnostic {
    let message = format!("the template of judge `{judge}` has a slot `{{{{{slot}}}}}` that is not an input");
    error("rubric::judge::unknown_slot", message, template, "template").with_help(
        "slots are `{{INPUT}}` for inputs the judge sees, `{{NAME}}` for what a block's `shows` shows it, \
         and `{{criterion}}`, `{{criteria}}`, `{{levels}}`, `{{labels}}`",
    )
}

/// What is wrong with a block's `shows`.
pub(super) enum BadShows<'a> {
    /// The block's criteria are not decided by a judge.
    NoJudge,
    /// The judge compares two answers or judges a group: its requests are not one instance's.
    Judge(&'a str),
    Twice(&'a str),
    Keyword(&'a str),
    /// The judge already sees an input of that name.
    Seen {
        name: &'a str,
        judge: &'a str,
    },
}

pub(super) fn judge_bad_shows(at: Span, why: BadShows<'_>) -> Diagnostic {
    let (message, label, help) = match why {
        BadShows::NoJudge => (
            "`shows` is for a block whose criteria a judge decides".to_string(),
            "shown to no judge",
            "give the block a judge (`criteria NAME each X in LIST by JUDGE shows X { ... }`), or drop `shows`"
                .to_string(),
        ),
        BadShows::Judge(judge) => (
            format!("judge `{judge}` compares answers or judges a group, so it cannot be shown one instance"),
            "shown to that judge",
            "show the instance to a judge that judges one row at a time".to_string(),
        ),
        BadShows::Twice(name) => {
            (format!("`{name}` is shown twice"), "shown again", "each item of `shows` names its own fence".to_string())
        }
        BadShows::Keyword(name) => (
            format!("`{name}` is a template keyword, not a name to show under"),
            "reserved in templates",
            format!("show it under another name: `shows {name}_text = ...`"),
        ),
        BadShows::Seen { name, judge } => (
            format!("judge `{judge}` already sees the input `{name}`"),
            "already in the request",
            format!("show it under another name (`shows {name}2 = ...`), or take `{name}` out of the judge's `sees`"),
        ),
    };
    error("rubric::judge::bad_shows", message, at, label).with_help(help)
}

/// `kind`: what the criterion asks of the local judge (`score an ordinal criterion`...).
pub(super) fn judge_local_kind(judge: &str, kind: &str, at: Span) -> Diagnostic {
    let message = format!("judge `{judge}` is a local model, which cannot {kind}");
    error("rubric::judge::local_kind", message, at, "decided by a local judge").with_help(
        "a local judge scores binary and continuous criteria by P(yes); make the criterion binary or continuous, \
         or give it a judge with a `model`",
    )
}

/// A judge without `sees`: its prompt holds the criterion text and nothing to judge.
pub(super) fn judge_sees_nothing(judge: &ast::Name) -> Diagnostic {
    Diagnostic::warning("rubric::judge::sees_nothing", format!("judge `{}` sees no input", judge.text))
        .with_label(judge.span, "this judge")
        .with_help(
            "its prompt holds only the criterion text; name what it judges with `sees response` (or other inputs)",
        )
}

/// A jury that cannot sit: `why` says what is wrong, `help` how to fix it.
pub(super) fn judge_bad_jury(judge: &str, is_jury: bool, at: Span, why: &str, help: &str) -> Diagnostic {
    let who = if is_jury { "jury" } else { "judge" };
    error("rubric::judge::bad_jury", format!("{who} `{judge}`: {why}"), at, "here").with_help(help.to_string())
}

/// A comparing judge (`compares A, B`), or a setting or criterion that needs one, that cannot
/// work: `why` says what is wrong, `help` how to fix it.
pub(super) fn judge_bad_compare(judge: &str, at: Span, why: &str, help: &str) -> Diagnostic {
    error("rubric::judge::bad_compare", format!("judge `{judge}`: {why}"), at, "here").with_help(help.to_string())
}

/// A group judge (`rollouts X`), or a setting or criterion that needs one, that cannot work:
/// `why` says what is wrong, `help` how to fix it.
pub(super) fn judge_bad_rollouts(judge: &str, at: Span, why: &str, help: &str) -> Diagnostic {
    error("rubric::judge::bad_rollouts", format!("judge `{judge}`: {why}"), at, "here").with_help(help.to_string())
}

/// A generator (or a `fills` setting) that cannot work: `why` says what is wrong, `help` how
/// to fix it.
/// `who` is `generator `NAME`` or `judge `NAME``.
pub(super) fn judge_bad_generator(who: &str, at: Span, why: &str, help: &str) -> Diagnostic {
    error("rubric::judge::bad_generator", format!("{who}: {why}"), at, "here").with_help(help.to_string())
}

/// A cascade that cannot work: `why` says what is wrong, `help` how to fix it.
pub(super) fn judge_bad_cascade(judge: &str, at: Span, why: &str, help: &str) -> Diagnostic {
    error("rubric::judge::bad_cascade", format!("cascade `{judge}`: {why}"), at, "here").with_help(help.to_string())
}

/// `calibration "FILE"` that cannot be used: `why` says what is wrong, `help` how to fix it.
pub(super) fn judge_bad_calibration(at: Span, file: &str, why: &str, help: &str) -> Diagnostic {
    error("rubric::judge::bad_calibration", format!("calibration `{file}`: {why}"), at, "this calibration")
        .with_help(help.to_string())
}

/// `input NAME: T from ""`.
pub(super) fn input_empty_field(at: Span) -> Diagnostic {
    error("rubric::input::empty_field", "an input cannot read a field with an empty name", at, "empty").with_help(
        "name the row field it reads, `from \"score\"`, or drop `from` to read the field named like the input",
    )
}

/// A rubric that declares no input: every row gets the same result.
pub(super) fn input_none(rubric: &ast::Name) -> Diagnostic {
    Diagnostic::warning("rubric::input::none", format!("rubric `{}` declares no input", rubric.text))
        .with_label(rubric.span, "this rubric")
        .with_help("every row gets the same result; declare what a row holds, e.g. `input response: Text`")
}

/// `setting`: what the judge was given (`an evidence rule (...)`), at `at`; `local`: its `local`.
pub(super) fn judge_local_setting(judge: &str, setting: &str, at: Span, local: Span) -> Diagnostic {
    let message = format!("judge `{judge}` is a local model, which cannot take {setting}");
    error("rubric::judge::local_setting", message, at, "not for a local judge")
        .with_label(local, "a local model")
        .with_help("remove the setting, or drop `local` to call the judge over HTTP")
}

/// Judge `judge`, a local model (`local`), sees `input`, which holds images, at `at`.
pub(super) fn judge_local_image(judge: &str, input: &str, ty: &ir::Type, at: Span, local: Span) -> Diagnostic {
    let message = format!("judge `{judge}` is a local model, which cannot see the images of `{input}: {ty}`");
    error("rubric::judge::local_image", message, at, "holds images")
        .with_label(local, "a local model reads text only")
        .with_help("remove the input from `sees`, or drop `local` to ask a vision model over HTTP")
}

/// Judge `judge` sees `input`, whose type holds images elsewhere than as `Image`, `Image?` or
/// `List[Image]`, at `at`.
pub(super) fn judge_image_input(judge: &str, input: &str, ty: &ir::Type, at: Span) -> Diagnostic {
    let message = format!("judge `{judge}` cannot be shown the images inside `{input}: {ty}`");
    error("rubric::judge::image_input", message, at, "images nested here")
        .with_help("a judge is shown an input of type `Image`, `Image?` or `List[Image]`; declare the images as an input of their own and let the judge see it")
}

// ------------------------------------------------------------------ examples

pub(super) fn example_missing_input(example: &ast::StrLit, input: &str) -> Diagnostic {
    let message = format!("example `{}` does not bind input `{input}`", example.value);
    error("rubric::example::missing_input", message, example.span, "this example")
        .with_help(format!("add a line `{input} VALUE` to the example"))
}

pub(super) fn example_duplicate(input: &ast::Name) -> Diagnostic {
    error("rubric::example::duplicate", format!("`{}` is bound twice", input.text), input.span, "again here")
}

/// `per_instance`: `name` is an `each` block rather than one criterion.
pub(super) fn example_not_judged(at: Span, name: &str, judge: &str, per_instance: bool) -> Diagnostic {
    let message = if per_instance {
        format!("criteria `{name}` are not decided by judge `{judge}`")
    } else {
        format!("criterion `{name}` is not decided by judge `{judge}`")
    };
    error("rubric::example::not_judged", message, at, "here")
}

pub(super) fn example_index_needed(at: Span, block: &str) -> Diagnostic {
    let message = format!("`{block}` holds per-instance criteria; name one as `{block}[i]`");
    error("rubric::example::index_needed", message, at, "here")
}

/// A warning.
pub(super) fn example_no_expectation(example: &ast::StrLit) -> Diagnostic {
    Diagnostic::warning("rubric::example::no_expectation", format!("example `{}` expects nothing", example.value))
        .with_label(example.span, "this example")
        .with_help("add `expect score N` or `expect CRITERION = met`: an example without expectations tests nothing")
}

// ------------------------------------------------------------------ facts the checker proves

pub(super) fn facts_weight(group: &str, weight: f64, at: Span) -> Diagnostic {
    let message = format!("group `{group}` has weight {weight}; weights must be positive");
    error("rubric::facts::weight", message, at, "this weight")
        .with_help("a node's score is the weighted mean of its children; weights scale, they cannot be 0 or negative")
}

pub(super) fn facts_value_range(value: f64, at: Span) -> Diagnostic {
    error("rubric::facts::value_range", format!("label value {value} is outside [0, 1]"), at, "here")
        .with_help("nominal labels map to values in [0, 1]; use `points` to scale")
}

pub(super) fn facts_empty_group(group: &ast::Name) -> Diagnostic {
    error("rubric::facts::empty_group", format!("group `{}` is empty", group.text), group.span, "no members")
        .with_help("a group's score is the weighted mean of its children; give it at least one")
}
