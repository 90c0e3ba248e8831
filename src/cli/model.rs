//! `rubric model init` (a random-weight model directory of a real architecture, with a
//! tokenizer of the full vocabulary size: the benchmark model where no weights can be had) and
//! `rubric model bench` (a local judge on synthetic responses: criteria per second with shared
//! prefixes and batching, and scoring each prompt alone; scores and prompts are written as JSON
//! for `bench/local_judge.py` to check against Hugging Face transformers).

use crate::ir::{CriterionKind, Scoring, Type, Vote};
use crate::judge::{prompt, Ask, Criterion, SeenInput};
use crate::models::causal::Family;
use crate::models::chat::ChatMessage;
use crate::models::local_judge::LocalJudge;
use crate::models::random::{write_random_model, RandomModel, Shape};
use crate::value::Value;
use clap::Subcommand;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Write a random-weight model directory (config.json, model.safetensors, tokenizer.json,
    /// tokenizer_config.json with a chat template) of a real architecture.
    Init {
        dir: PathBuf,
        /// qwen2, qwen3 or llama.
        #[arg(long, default_value = "qwen3")]
        family: String,
        /// tiny (for tests) or qwen3-0.6b.
        #[arg(long, default_value = "tiny")]
        shape: String,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Standard deviation of the weights.
        #[arg(long, default_value_t = 0.02)]
        std: f64,
        /// The dtype stored: f32 or bf16.
        #[arg(long, default_value = "bf16")]
        dtype: String,
    },
    /// Time a local judge model on synthetic responses: every criterion of every response
    /// scored with shared prefixes and batching, and each alone; writes scores, timings and
    /// the prompts as JSON.
    Bench {
        dir: PathBuf,
        /// Responses to score.
        #[arg(long, default_value_t = 2)]
        rows: usize,
        /// Criteria per response.
        #[arg(long, default_value_t = 20)]
        criteria: usize,
        /// Words per response (about one token each with `model init`'s tokenizer).
        #[arg(long, default_value_t = 300)]
        words: usize,
        /// `shared`, `naive` or both (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "shared,naive")]
        modes: Vec<String>,
        /// cpu, cuda or cuda:N (default: RUBRIC_DEVICE, else the CPU).
        #[arg(long)]
        device: Option<String>,
        /// The JSON report.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

pub fn main(command: ModelCommand) -> ExitCode {
    match command {
        ModelCommand::Init { dir, family, shape, seed, std, dtype } => init(&dir, &family, &shape, seed, std, &dtype),
        ModelCommand::Bench { dir, rows, criteria, words, modes, device, out } => {
            if let Some(d) = device {
                match d.parse() {
                    Ok(device) => {
                        crate::models::configure(crate::models::ModelsConfig {
                            device,
                            ..crate::models::config().clone()
                        });
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            bench(&dir, rows, criteria, words, &modes, out.as_deref())
        }
    }
}

fn init(dir: &Path, family: &str, shape: &str, seed: u64, std: f64, dtype: &str) -> ExitCode {
    let parsed = (|| -> Result<RandomModel, String> {
        let dtype = match dtype {
            "f32" => candle_core::DType::F32,
            "bf16" => candle_core::DType::BF16,
            other => return Err(format!("unknown dtype `{other}`: expected f32 or bf16")),
        };
        if !(std.is_finite() && std > 0.0) {
            return Err("`--std` must be a positive number".into());
        }
        Ok(RandomModel { family: family.parse::<Family>()?, shape: shape.parse::<Shape>()?, seed, std, dtype })
    })();
    let spec = match parsed {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let start = Instant::now();
    match write_random_model(dir, &spec) {
        Ok(cfg) => {
            let params: usize = cfg.weight_shapes().iter().map(|(_, s)| s.iter().product::<usize>()).sum();
            eprintln!(
                "wrote a random {} model ({} parameters, {} layers, vocabulary {}) to {} in {:.1}s",
                cfg.family.name(),
                params,
                cfg.num_layers,
                cfg.vocab_size,
                dir.display(),
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Words the synthetic responses and criteria are made of.
const TOPICS: &[&str] = &[
    "advice",
    "care",
    "source",
    "step",
    "example",
    "summary",
    "number",
    "list",
    "item",
    "answer",
    "question",
    "reference",
    "explanation",
    "tone",
    "citation",
    "material",
    "work",
    "data",
    "text",
    "time",
];

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A synthetic response of `words` words, different for every row.
fn response(row: usize, words: usize) -> String {
    let pool: Vec<&str> = crate::models::random::WORDS.split_whitespace().collect();
    let mut s = 0x5EED_u64 ^ (row as u64).wrapping_mul(0x9E37_79B9);
    let mut out = Vec::with_capacity(words);
    for i in 0..words {
        let w = pool[(splitmix(&mut s) % pool.len() as u64) as usize];
        out.push(if i % 12 == 11 { format!("{w}.") } else { w.to_string() });
    }
    out.join(" ")
}

/// The messages of every (row, criterion), rendered as `rubric run` renders a local judge's.
pub fn bench_prompts(rows: usize, criteria: usize, words: usize) -> Vec<Vec<ChatMessage>> {
    let judge = crate::ir::JudgeDecl {
        name: "bench".into(),
        model: None,
        temperature: None,
        top_p: None,
        max_tokens: None,
        seed: None,
        samples: 1,
        min_samples: None,
        vote: Vote::Majority,
        sees: vec![0],
        returns: "verdict".into(),
        reply_fields: vec![],
        evidence_from: None,
        template: None,
        system: None,
        scoring: Scoring::Logprob,
        per_call: 1,
        local: Some("bench".into()),
        calibration: None,
        order: crate::ir::Order::Fixed,
        jury: None,
        reasoning_effort: None,
        cascade: None,
        compares: None,
        rollouts: None,
    };
    let mut out = Vec::with_capacity(rows * criteria);
    for r in 0..rows {
        let seen =
            [SeenInput { index: 0, name: "response".into(), ty: Type::Text, value: Value::text(response(r, words)) }];
        for c in 0..criteria {
            let topic = TOPICS[c % TOPICS.len()];
            let text = format!("The response gives a clear and accurate {topic} ({})", c + 1);
            let criterion =
                Criterion { id: format!("c{c}"), text, ask: Ask::Verdict(CriterionKind::Binary), from_data: false };
            // Stable tags: the benchmark's prompts are the same on every run.
            let rendered = prompt::render_local(&judge, &criterion, &seen, &prompt::Fences::Stable);
            out.push(rendered.messages.iter().map(|m| ChatMessage::new(m.role.clone(), m.content.clone())).collect());
        }
    }
    out
}

/// CPU seconds this process has used (user + system, all threads), from `/proc/self/stat`;
/// `None` where that file does not exist. On a shared machine it measures the work done,
/// whatever else runs.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn bench(dir: &Path, rows: usize, criteria: usize, words: usize, modes: &[String], out: Option<&Path>) -> ExitCode {
    let run = || -> Result<serde_json::Value, String> {
        let device = crate::models::device();
        let t0 = Instant::now();
        let judge = LocalJudge::load(dir, device).map_err(|e| e.to_string())?;
        let load_s = t0.elapsed().as_secs_f64();
        let prompts = bench_prompts(rows, criteria, words);
        let t1 = Instant::now();
        let tokens: Vec<Vec<u32>> =
            prompts.iter().map(|m| judge.prompt_tokens(m)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        let tokenize_s = t1.elapsed().as_secs_f64();
        let n = tokens.len();
        let mean_tokens = tokens.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1) as f64;
        // Warm up (kernels, allocations) on one prompt, untimed.
        judge.score_alone(&tokens[0]).map_err(|e| e.to_string())?;
        let mut report = json!({
            "model": dir.display().to_string(),
            "device": format!("{device:?}"),
            "dtype": format!("{:?}", judge.model.dtype()),
            "rows": rows,
            "criteria": criteria,
            "prompts": n,
            "mean_prompt_tokens": mean_tokens,
            "load_s": load_s,
            "tokenize_s": tokenize_s,
            "batch_tokens": judge.options.token_budget,
        });
        let mut shared_scores = None;
        let mut naive_scores = None;
        for mode in modes {
            let t = Instant::now();
            let cpu0 = cpu_seconds();
            let scores: Vec<f64> = match mode.as_str() {
                "shared" => judge
                    .score_tokens(&tokens)
                    .into_iter()
                    .map(|r| r.map(|s| s.p_yes()))
                    .collect::<Result<_, _>>()
                    .map_err(|e| e.to_string())?,
                "naive" => tokens
                    .iter()
                    .map(|t| judge.score_alone(t).map(|s| s.p_yes()))
                    .collect::<Result<_, _>>()
                    .map_err(|e| e.to_string())?,
                other => return Err(format!("unknown mode `{other}`: expected shared or naive")),
            };
            let secs = t.elapsed().as_secs_f64();
            let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
            eprintln!(
                "{mode}: {n} criteria in {secs:.2}s ({:.2} criteria/s){}",
                n as f64 / secs,
                cpu.map(|c| format!(", {c:.1} CPU seconds")).unwrap_or_default()
            );
            report[mode.as_str()] =
                json!({"seconds": secs, "cpu_seconds": cpu, "criteria_per_s": n as f64 / secs, "scores": scores});
            match mode.as_str() {
                "shared" => shared_scores = Some(scores),
                _ => naive_scores = Some(scores),
            }
        }
        if let (Some(a), Some(b)) = (&shared_scores, &naive_scores) {
            let diff = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            eprintln!("max |shared - naive| = {diff:.3e}");
            report["max_abs_diff_shared_naive"] = json!(diff);
        }
        report["messages"] = json!(prompts);
        report["token_ids"] = json!(tokens);
        Ok(report)
    };
    match run() {
        Ok(report) => {
            let text = serde_json::to_string(&report).unwrap_or_default();
            match out {
                Some(p) => {
                    if let Err(e) = std::fs::write(p, text + "\n") {
                        eprintln!("error: cannot write `{}`: {e}", p.display());
                        return ExitCode::from(2);
                    }
                }
                None => outln!("{text}"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
