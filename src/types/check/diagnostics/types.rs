//! Stage 3, the checker's diagnostics of the `rubric::type::*` codes (types, arguments,
//! criterion kinds, names used as the wrong thing), one constructor per code, by the rules of
//! the parent module `diagnostics`, which re-exports them.

use super::{error, maybe_help};
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::Type;
use crate::source::Span;
use crate::syntax::ast;
use crate::types::check::unify::assignable;

/// `message` comes from `sig::lower_type`; `written` is the type as written, for the suggestion.
pub(in crate::types::check) fn type_unknown_type(at: Span, message: String, written: &str) -> Diagnostic {
    let help = did_you_mean(written, crate::types::sig::TYPE_NAMES.iter().copied()).unwrap_or_else(|| {
        "types are Text, Number, Bool, Json, Conversation, Message, Trajectory, Step, ToolCall, List[T], {field: T} and T?".into()
    });
    error("rubric::type::unknown_type", message, at, "unknown type").with_help(help)
}

/// A value of the wrong type, by where it was found.
pub(in crate::types::check) enum Mismatch<'a> {
    /// `what` (`the score`, `a check`...) must be `want`.
    Expected { what: &'a str, want: &'a Type, found: &'a Type, at: Span },
    /// The list of a `criteria ... each` block.
    EachList { found: &'a Type, at: Span },
    /// The type of an `extract`ed value.
    Extracted { found: &'a Type, at: Span },
    /// An element of a list literal whose earlier elements are `elem`.
    ListElement { elem: &'a Type, found: &'a Type, at: Span },
    /// The base of an index.
    Indexed { found: &'a Type, at: Span },
    /// The operands of a comparison `op`: the left one `(lhs, at)`, the right one `(rhs, at)`.
    Compare { op: &'a str, lhs: (&'a Type, Span), rhs: (&'a Type, Span) },
    /// The two branches of an `if`.
    Branches { then: (&'a Type, Span), els: (&'a Type, Span) },
    /// The fallback of `??` for a value of type `want`.
    Fallback { want: &'a Type, found: &'a Type, at: Span },
    /// The operands of an arithmetic operator `op`.
    Arithmetic { op: ast::BinOp, lhs: (&'a Type, Span), rhs: (&'a Type, Span) },
    /// `tree(X)` where `X` is not a set.
    TreeOfNonSet { at: Span },
    /// `tree(set)` where `set` is not a group.
    TreeOfNonGroup { set: &'a ast::Name },
    /// The list argument of `map`, `filter`, `all`, `any` or `count`.
    HigherOrderList { found: &'a Type, at: Span },
}

pub(in crate::types::check) fn type_mismatch(what: Mismatch<'_>) -> Diagnostic {
    const CODE: &str = "rubric::type::mismatch";
    const MAYBE_NULL: &str =
        "a value that may be null must be tested first (`x != null and ...`, `if x != null then ...`) or get a fallback: `x ?? 0`";
    match what {
        Mismatch::Expected { what, want, found, at } => {
            let d = error(CODE, format!("{what} must be `{want}`, found `{found}`"), at, format!("this is `{found}`"));
            match found {
                Type::Optional(inner) if assignable(inner, want) => d.with_help(
                    "this value may be null: test it first (`x != null and ...`) or give a fallback: `x ?? 0`",
                ),
                Type::Optional(_) => d,
                Type::Verdict if *want == Type::Bool || *want == Type::Number => {
                    d.with_help("a criterion is a verdict: use `.met` (Bool) or `.value` (Number)")
                }
                Type::Bool if *want == Type::Number => {
                    d.with_help("turn a condition into a number with `if COND then 1 else 0`")
                }
                _ => d,
            }
        }
        Mismatch::EachList { found, at } => {
            error(CODE, format!("`criteria ... each` needs a list, found `{found}`"), at, "not a list")
        }
        Mismatch::Extracted { found, at } => {
            error(CODE, format!("an extracted value is Number, Text or Bool, not `{found}`"), at, "here")
        }
        Mismatch::ListElement { elem, found, at } => {
            error(CODE, format!("list elements must share a type: `{elem}` and `{found}`"), at, "this element")
        }
        Mismatch::Indexed { found, at } => {
            error(CODE, format!("only lists can be indexed, found `{found}`"), at, "not a list")
                .with_help("for JSON use `json_get(value, \"a.b[0]\")`")
        }
        Mismatch::Compare { op, lhs: (lt, ls), rhs: (rt, rs) } => {
            let d =
                error(CODE, format!("cannot compare `{lt}` with `{rt}` using `{op}`"), rs, format!("this is `{rt}`"))
                    .with_label(ls, format!("this is `{lt}`"));
            if lt.is_optional() || rt.is_optional() {
                d.with_help(MAYBE_NULL)
            } else if *lt == Type::Verdict || *rt == Type::Verdict {
                d.with_help("compare a criterion's `.met` or `.value`")
            } else {
                d
            }
        }
        Mismatch::Branches { then: (a, at), els: (b, bt) } => {
            let message = format!("the branches of `if` have different types: `{a}` and `{b}`");
            error(CODE, message, at, format!("`{a}`")).with_label(bt, format!("`{b}`"))
        }
        Mismatch::Fallback { want, found, at } => {
            error(CODE, format!("the fallback must be `{want}`, found `{found}`"), at, "fallback")
        }
        Mismatch::Arithmetic { op, lhs: (a, at), rhs: (b, bt) } => {
            let texts = if op == ast::BinOp::Add { " or two texts" } else { "" };
            let message = format!("`{}` needs two numbers{texts}, found `{a}` and `{b}`", op.symbol());
            let d = error(CODE, message, at, format!("`{a}`")).with_label(bt, format!("`{b}`"));
            if a.is_optional() || b.is_optional() {
                d.with_help(MAYBE_NULL)
            } else if *a == Type::Verdict || *b == Type::Verdict {
                d.with_help("use a criterion's `.value` (Number) in arithmetic")
            } else if *a == Type::Bool || *b == Type::Bool {
                d.with_help("turn a condition into a number with `if COND then 1 else 0`")
            } else {
                d
            }
        }
        Mismatch::TreeOfNonSet { at } => error(CODE, "`tree` takes a group", at, "not a group")
            .with_help("declare `group NAME weight W { ... }` and write `tree(NAME)`"),
        Mismatch::TreeOfNonGroup { set } => {
            let message = format!("`tree` takes a group; `{}` is not a group", set.text);
            error(CODE, message, set.span, "not a group").with_help("declare `group NAME weight W { ... }`")
        }
        Mismatch::HigherOrderList { found, at } => {
            error(CODE, format!("expected a list, found `{found}`"), at, "not a list")
        }
    }
}

/// What is wrong with the arguments of a call of `callee`.
pub(in crate::types::check) enum BadArguments<'a> {
    /// A named argument that is not a parameter; `params` are the parameters.
    NoParameter {
        name: &'a ast::Name,
        params: &'a [&'a str],
    },
    /// More positional arguments than the `count` parameters.
    Extra {
        count: usize,
        at: Span,
    },
    GivenTwice {
        param: &'a str,
        at: Span,
    },
    Missing {
        param: &'a str,
        call: Span,
    },
    /// No overload of an intrinsic fits: the first overload's complaint and every signature.
    NoOverload {
        complaint: &'a str,
        at: Span,
        signatures: &'a [String],
    },
    /// An aggregation given a named argument other than `unscored`.
    AggregationParameter {
        name: &'a ast::Name,
    },
    /// An aggregation with the wrong number of counts; `set` is its set as written.
    AggregationCount {
        set: &'a str,
        at: Span,
    },
}

pub(in crate::types::check) fn type_bad_arguments(callee: &str, what: BadArguments<'_>) -> Diagnostic {
    const CODE: &str = "rubric::type::bad_arguments";
    match what {
        BadArguments::NoParameter { name, params } => maybe_help(
            error(CODE, format!("`{callee}` has no parameter `{}`", name.text), name.span, "unknown parameter"),
            did_you_mean(&name.text, params.iter().copied()),
        ),
        BadArguments::Extra { count, at } => {
            error(CODE, format!("`{callee}` takes {count} arguments"), at, "extra argument")
        }
        BadArguments::GivenTwice { param, at } => {
            error(CODE, format!("argument `{param}` is given twice"), at, "again")
        }
        BadArguments::Missing { param, call } => {
            error(CODE, format!("missing argument `{param}` of `{callee}`"), call, "in this call")
        }
        BadArguments::NoOverload { complaint, at, signatures } => {
            let s = if signatures.len() > 1 { "s" } else { "" };
            error(CODE, format!("wrong arguments to `{callee}`: {complaint}"), at, "here")
                .with_help(format!("signature{s}: {}", signatures.join("; ")))
        }
        BadArguments::AggregationParameter { name } => {
            error(CODE, format!("`{callee}` has no parameter `{}`", name.text), name.span, "here")
                .with_help("aggregations take a set, `unscored: skip|unmet|propagate` and, for `at_least`, a count")
        }
        BadArguments::AggregationCount { set, at } => {
            let message = if callee == "at_least" {
                format!("`at_least` needs a count: `at_least({set}, K)`")
            } else {
                format!("`{callee}` takes one set")
            };
            error(CODE, message, at, "here")
        }
    }
}

/// `written`: the policy as written when it is a name, `None` when it is not even a name.
pub(in crate::types::check) fn type_bad_policy(at: Span, written: Option<&str>) -> Diagnostic {
    const CODE: &str = "rubric::type::bad_policy";
    match written {
        Some(other) => {
            let help = did_you_mean(other, ["skip", "unmet", "propagate"])
                .unwrap_or_else(|| "a policy is `skip`, `unmet` or `propagate`".into());
            error(CODE, format!("unknown unscored policy `{other}`"), at, "here").with_help(help)
        }
        None => error(CODE, "an unscored policy is `skip`, `unmet` or `propagate`", at, "here"),
    }
}

/// The help line is the last line of the regex parser's message (the text `regex::Error`
/// shows for a syntax error).
pub(in crate::types::check) fn type_bad_regex(at: Span, pattern: &str, e: &regex_syntax::Error) -> Diagnostic {
    let msg = e.to_string();
    let last = msg.lines().last().unwrap_or("").trim();
    let last = last.strip_prefix("error: ").unwrap_or(last).to_string();
    error("rubric::type::bad_regex", format!("`{pattern}` is not a valid regular expression"), at, "here")
        .with_help(last)
}

/// What is wrong with a criterion's kind.
pub(in crate::types::check) enum KindError<'a> {
    /// A second kind attribute after the one at `first`.
    Second {
        first: Span,
    },
    LevelTwice(f64),
    TooFewLevels,
    LevelsOutOfOrder,
    LabelTwice(&'a str),
    /// `check` on a criterion that is not binary.
    CheckNotBinary,
    /// `value` on a criterion that is not continuous.
    ValueNotContinuous,
}

/// Sub-checks on a criterion that has no id of its own (the template of an `each` block).
pub(in crate::types::check) fn type_sub_checks_place(at: Span) -> Diagnostic {
    error("rubric::type::sub_checks_place", "sub-checks belong to a named criterion", at, "in a per-instance template")
        .with_help(
            "give the sub-checks to a `criterion NAME`; a template's criteria are checked, valued or judged directly",
        )
}

pub(in crate::types::check) fn type_criterion_kind(at: Span, what: KindError<'_>) -> Diagnostic {
    const CODE: &str = "rubric::type::criterion_kind";
    match what {
        KindError::Second { first } => error(CODE, "a criterion has one kind", at, "second kind")
            .with_label(first, "first kind")
            .with_help("choose one of binary (the default), `ordinal [...]`, `nominal {...}` or `continuous`"),
        KindError::LevelTwice(v) => error(CODE, format!("level {v} is listed twice"), at, "again here"),
        KindError::TooFewLevels => error(CODE, "an ordinal criterion needs at least two levels", at, "here"),
        KindError::LevelsOutOfOrder => error(CODE, "ordinal levels must be listed in increasing order", at, "here"),
        KindError::LabelTwice(l) => error(CODE, format!("label `{l}` is listed twice"), at, "again here"),
        KindError::CheckNotBinary => error(CODE, "a `check` decides a binary criterion", at, "check")
            .with_help("use `value EXPR` for a continuous criterion computed deterministically"),
        KindError::ValueNotContinuous => error(CODE, "`value` computes a continuous criterion", at, "value"),
    }
}

pub(in crate::types::check) fn type_duplicate_field(field: &ast::Name) -> Diagnostic {
    error("rubric::type::duplicate_field", format!("field `{}` is given twice", field.text), field.span, "again here")
}

/// `callee`: the function that was given a lambda it does not take; `None` for a lambda
/// anywhere else.
pub(in crate::types::check) fn type_lambda_position(at: Span, callee: Option<&str>) -> Diagnostic {
    let message = match callee {
        Some(f) => format!("`{f}` does not take a lambda"),
        None => "a lambda `x => ...` may only be the last argument of `map`, `filter`, `all`, `any` or `count`".into(),
    };
    error("rubric::type::lambda_position", message, at, "lambda here")
}

pub(in crate::types::check) fn type_maybe_null(at: Span, ty: &Type, field: &str) -> Diagnostic {
    let message = format!("`{ty}` may be null, so `.{field}` cannot be read directly");
    error("rubric::type::maybe_null", message, at, "may be null")
        .with_help("test it first: `x != null and x.field ...`, or give a fallback: `(x ?? {...}).field`")
}

/// A warning: `??` after a value of type `ty`, which is never null (`narrowed`: an optional
/// value that a test before it proved not null).
pub(in crate::types::check) fn type_needless_coalesce(at: Span, ty: &Type, narrowed: bool) -> Diagnostic {
    const CODE: &str = "rubric::type::needless_coalesce";
    if narrowed {
        return Diagnostic::warning(CODE, format!("this `{ty}?` cannot be null here"))
            .with_label(at, "tested not null before this")
            .with_help("a `!= null` test (in a `score` gate, the left of `and`, or an `if`) already proved it is not null: remove the `??` fallback");
    }
    Diagnostic::warning(CODE, format!("`{ty}` is never null"))
        .with_label(at, "never null")
        .with_help("remove the `??` fallback")
}

/// A name used as a value that is not one.
pub(in crate::types::check) enum NotAValue<'a> {
    /// `alias.f` without a call: `module` is the module `alias` names.
    ModuleFunction { alias: &'a str, function: &'a str, module: &'a str },
    /// A root-level name that denotes `was` (`Global::describe`).
    Declaration { name: &'a str, was: &'static str },
}

pub(in crate::types::check) fn type_not_a_value(at: Span, what: NotAValue<'_>) -> Diagnostic {
    const CODE: &str = "rubric::type::not_a_value";
    match what {
        NotAValue::ModuleFunction { alias, function, module } => {
            let message = format!("`{alias}.{function}` is a function of module `{module}`; call it");
            error(CODE, message, at, "not called")
        }
        NotAValue::Declaration { name, was } => error(CODE, format!("`{name}` is {was}, not a value"), at, "here"),
    }
}

/// `declared`: the called name and what it denotes (`Global::describe`), when it is a name.
pub(in crate::types::check) fn type_not_callable(at: Span, declared: Option<(&str, &str)>) -> Diagnostic {
    let message = match declared {
        Some((name, was)) => format!("`{name}` is {was}, not a function"),
        None => "only functions can be called".into(),
    };
    error("rubric::type::not_callable", message, at, "not a function")
}

/// What is not a constant where one is needed.
pub(in crate::types::check) enum NotConstant<'a> {
    /// `what` (`a group weight`) must be a number literal.
    Literal(&'a str),
    Input(&'a str),
    Criterion(&'a str),
}

pub(in crate::types::check) fn type_not_constant(at: Span, what: NotConstant<'_>) -> Diagnostic {
    const CODE: &str = "rubric::type::not_constant";
    match what {
        NotConstant::Literal(what) => error(CODE, format!("{what} must be a number literal"), at, "not a literal"),
        NotConstant::Input(name) => {
            error(CODE, format!("`{name}` is an input; this value must be a constant"), at, "input")
        }
        NotConstant::Criterion(name) => error(CODE, format!("criterion `{name}` is not a constant"), at, "here"),
    }
}

pub(in crate::types::check) fn type_recursion(function: &str, at: Span) -> Diagnostic {
    error("rubric::type::recursion", format!("function `{function}` calls itself"), at, "part of a call cycle")
        .with_help("rubric functions cannot recurse, so every rubric terminates; use list functions like `map` and `count` instead")
}

pub(in crate::types::check) fn type_set_as_value(set: &ast::Name) -> Diagnostic {
    let n = &set.text;
    error("rubric::type::set_as_value", format!("`{n}` is a set of criteria, not a value"), set.span, "a set")
        .with_help(format!(
            "aggregate it: `fraction({n})`, `weighted_mean({n})`, `points_ratio({n})`, `all({n})`, `tree({n})`..."
        ))
}

/// Why a field cannot be read.
pub(in crate::types::check) enum UnknownField<'a> {
    /// A record of type `record` without the field; `fields` are its fields.
    Record {
        record: &'a Type,
        fields: &'a [&'a str],
    },
    Verdict,
    /// `.field` on a `Json` value.
    Json,
    /// A value of type `ty`, which has no fields at all.
    NoFields(&'a Type),
}

/// `field` is the field as written; `at` the whole field expression (used where the value
/// rather than the field is at fault).
pub(in crate::types::check) fn type_unknown_field(field: &ast::Name, at: Span, why: UnknownField<'_>) -> Diagnostic {
    const CODE: &str = "rubric::type::unknown_field";
    let name = &field.text;
    match why {
        UnknownField::Record { record, fields } => {
            let help = did_you_mean(name, fields.iter().copied())
                .unwrap_or_else(|| format!("the fields are: {}", fields.join(", ")));
            error(CODE, format!("no field `{name}` in `{record}`"), field.span, "unknown field").with_help(help)
        }
        UnknownField::Verdict => {
            let help = did_you_mean(name, ["met", "value", "points", "weight", "unscored", "agreement"])
                .unwrap_or_else(|| {
                    "a verdict has `met`, `value`, `points`, `weight`, `unscored` and `agreement`".into()
                });
            error(CODE, format!("a verdict has no field `{name}`"), field.span, "unknown field").with_help(help)
        }
        UnknownField::Json => error(CODE, "fields of `Json` values are read with `json_get`", at, "Json")
            .with_help(format!("json_get(value, \"{name}\")")),
        UnknownField::NoFields(ty) => error(CODE, format!("`{ty}` has no fields"), at, "no fields"),
    }
}
