//! `rubric plan RUBRIC --input ROWS [--judges F]`: what `rubric run` would ask the judges and
//! what it would cost, sending nothing. Each row is evaluated as the first planning round of a
//! run evaluates it (`runtime::dispatch::plan_rows`): the judged criteria its result needs are
//! planned into requests, deduplicated, checked against the cache, their prompts counted with
//! the model's tokenizer where its family is known (estimated otherwise, and said so) and priced
//! from `judges.toml`. Criteria that later rounds may still ask for (behind a judged gate, read
//! by another criterion's check) are counted apart: the plan cannot know their verdicts.

use super::{bundle, judge_settings, EngineArgs, ErrorFormat, ReportFormat};
use crate::judge::DryRun;
use crate::runtime::{self, VerdictFile};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `rubric plan` was asked.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    pub file: PathBuf,
    /// The rows, JSONL.
    #[arg(long)]
    pub input: PathBuf,
    /// The endpoints and prices (`judges.toml`); no key is read and nothing is sent.
    #[arg(long)]
    pub judges: Option<PathBuf>,
    /// Recorded judge verdicts, JSONL keyed by row and criterion: what they decide is not asked.
    #[arg(long)]
    pub verdicts: Option<PathBuf>,
    /// The judge cache (SQLite) whose answers need no request; default: the user's cache.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Plan as if the cache were empty.
    #[arg(long)]
    pub no_cache: bool,
    /// RL groups, as `rubric run --groups`: a group judge (`rollouts X`) is planned as one
    /// request per group of consecutive rows with the same value of this field.
    #[arg(long, num_args = 0..=1, default_missing_value = "group", value_name = "FIELD")]
    pub groups: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// `json`: the plan as one JSON document on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

pub fn run(a: PlanArgs) -> ExitCode {
    let Some(rubric) = bundle::load_or_report_as(&a.file, ErrorFormat::Human, false) else {
        return ExitCode::from(1);
    };
    let program = rubric.program();
    let ident = rubric.identity().with_rows_file(&a.input);
    let settings = match judge_settings(a.judges.as_deref(), None, None, a.cache.as_deref(), a.no_cache) {
        Ok(s) => s,
        Err(e) => return fail(&e, 2),
    };
    let dispatcher = match settings.dry_dispatcher() {
        Ok(d) => d,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let vf = match a.verdicts.as_deref().map(VerdictFile::load).transpose() {
        Ok(v) => v,
        Err(e) => return fail(&e, 2),
    };
    let lines = match runtime::read_rows(&a.input) {
        Ok(l) => l,
        Err(e) => return fail(&format!("{}: {e}", a.input.display()), 2),
    };
    let engine = a.engine.kind_for(&rubric, &a.file).engine_for(program, a.engine.limits());
    let mut rows = Vec::new();
    let mut bad = 0u64;
    for (i, line) in lines.iter().enumerate() {
        match runtime::prepare_row(program, &ident, i, line.row(), vf.as_ref()) {
            Ok(r) => {
                let group = a.groups.as_deref().and_then(|f| runtime::line_group(line, f));
                rows.push(runtime::JudgeRow { inputs: r.inputs, verdicts: r.verdicts, group })
            }
            Err(_) => bad += 1,
        }
    }
    let n = rows.len() as u64;
    let (dry, asked, later) = runtime::dispatch::plan_rows(engine.as_ref(), program, rows, &dispatcher);
    if a.format == ReportFormat::Json {
        let doc = json!({
            "rows": n + bad,
            "rows_with_errors": bad,
            "criteria_asked": asked,
            "criteria_maybe_later": later,
            "plan": dry,
            "total": totals(&dry),
        });
        outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        out!("{}", text(&dry, n + bad, bad, asked, later));
    }
    ExitCode::SUCCESS
}

/// The plan's dollars: the prompts at the full input price, and the replies at most; `None`
/// where a model has no price, or a reply no `max_tokens`.
fn totals(dry: &DryRun) -> serde_json::Value {
    let sum = |f: &dyn Fn(&crate::judge::PlannedCalls) -> Option<f64>| -> Option<f64> {
        dry.calls.iter().map(f).sum::<Option<f64>>()
    };
    let requests: u64 = dry.calls.iter().map(|c| c.requests).sum();
    let prompt = sum(&|c| c.prompt_usd);
    let reply = sum(&|c| c.max_completion_usd);
    json!({
        "requests": requests,
        "prompt_tokens": dry.calls.iter().map(|c| c.prompt_tokens).sum::<u64>(),
        "prompt_usd": prompt,
        "max_completion_usd": reply,
        "max_usd": prompt.zip(reply).map(|(p, r)| p + r),
    })
}

fn usd(x: Option<f64>) -> String {
    x.map_or_else(|| "unknown".to_string(), |x| format!("${x:.6}"))
}

/// `rubric generate --plan`: the generation requests the rows need, as `rubric plan` shows a
/// run's (`--format json`: one JSON document).
pub(super) fn generation(dry: &DryRun, rows: u64, asked: u64, format: ReportFormat) {
    if format == ReportFormat::Json {
        let doc = json!({ "rows": rows, "inputs_to_generate": asked, "plan": dry, "total": totals(dry) });
        outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    let body = text(dry, rows, 0, 0, 0);
    let body = body.split_once('\n').map_or(body.as_str(), |(_, rest)| rest);
    out!("plan: {rows} rows; {asked} inputs to generate\n{body}");
}

fn text(dry: &DryRun, rows: u64, bad: u64, asked: u64, later: u64) -> String {
    let mut out = format!(
        "plan: {rows} rows{}; {asked} judged criteria asked in the first round",
        if bad > 0 { format!(" ({bad} with errors, not planned)") } else { String::new() }
    );
    if later > 0 {
        out.push_str(&format!(
            ", up to {later} more once verdicts are known (behind judged gates or read by other checks)"
        ));
    }
    let to_send: u64 = dry.calls.iter().map(|c| c.requests).sum();
    out.push_str(&format!(
        "\nrequests: {} planned, {} identical to another, {} answered by the cache: {to_send} to send\n",
        dry.planned, dry.deduplicated, dry.cached
    ));
    for (reason, k) in &dry.unroutable {
        out.push_str(&format!("not sendable: {k} (unscored `{reason}`)\n"));
    }
    for c in &dry.calls {
        let counted = match c.tokenizer {
            Some(t) => format!("counted with {t}"),
            None => "estimated at 4 bytes per token: no tokenizer known for this model".to_string(),
        };
        let replies = match c.max_completion_tokens {
            Some(m) => format!("replies at most {m} tokens (max_tokens)"),
            None => "replies unbounded (the judge sets no max_tokens)".to_string(),
        };
        let price = match (c.prompt_usd, c.max_completion_usd) {
            (None, _) => "no price for this model in the judges configuration".to_string(),
            (Some(p), Some(r)) => format!(
                "prompts {}, replies at most {}, at most {} in all",
                usd(Some(p)),
                usd(Some(r)),
                usd(Some(p + r))
            ),
            (Some(p), None) => format!("prompts {}, replies unbounded", usd(Some(p))),
        };
        out.push_str(&format!(
            "judge `{}` at `{}` ({}): {} requests for {} criteria; prompt tokens {} ({counted}); {replies}; {price}\n",
            c.judge, c.endpoint, c.model, c.requests, c.entries, c.prompt_tokens
        ));
    }
    let t = totals(dry);
    let f = |k: &str| t.get(k).and_then(serde_json::Value::as_f64);
    let unpriced = dry.calls.iter().any(|c| c.price.is_none());
    out.push_str(&match (f("prompt_usd"), f("max_completion_usd")) {
        _ if dry.calls.is_empty() => "cost: nothing to send\n".to_string(),
        (None, _) if unpriced => {
            "cost: unknown: a model above has no price in the judges configuration (`[prices.\"MODEL\"]`)\n".to_string()
        }
        (Some(p), Some(r)) => format!(
            "cost: prompts {} at the full input price (a provider's prefix cache may lower it), replies at most {}: \
             at most {} in all\n",
            usd(Some(p)),
            usd(Some(r)),
            usd(Some(p + r))
        ),
        (p, _) => format!(
            "cost: prompts {} at the full input price; the replies have no bound (a judge above sets no max_tokens)\n",
            usd(p)
        ),
    });
    out
}
