//! Local logprob judges (`judge NAME { local "DIR" }`) on tiny random-weight models of the real
//! Qwen3, Qwen2 and Llama architectures, written by the test (`models::random`: a real
//! `model.safetensors`, `config.json`, a word-level `tokenizer.json` written by the tokenizers
//! crate and a ChatML-style chat template):
//!
//! - scores with shared prefixes, batched suffixes and several responses packed into one
//!   padded batch equal each prompt scored alone with a full prefill, within 1e-5;
//! - `rubric run` on a rubric with a local judge writes records whose `p_yes` equals the
//!   prompts (read back from the transcript) scored alone, and a re-run is answered from the
//!   cache;
//! - a missing or broken model directory gives unscored rows with a `judge_local_model` reason;
//! - the scores equal those Hugging Face transformers computed once on the same tiny models and
//!   token ids (`tests/local_judge_transformers.json`), an independent check of the model code.

use crate::common::{json_lines, TempDir};
use rubric::models::causal::Family;
use rubric::models::chat::ChatMessage;
use rubric::models::local_judge::{group_prompts, BatchOptions, LocalJudge, YesNo};
use rubric::models::random::{write_random_model, RandomModel, Shape};
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Command, Output};

/// Weights spread enough that P(yes) moves with the context (a flat model would score every
/// prompt about the same and prove nothing).
const STD: f64 = 0.3;

fn tiny_model(dir: &Path, family: Family, seed: u64) {
    let spec = RandomModel { family, shape: Shape::Tiny, seed, std: STD, dtype: candle_core::DType::F32 };
    write_random_model(dir, &spec).unwrap();
}

fn words(seed: usize, n: usize) -> String {
    let pool: Vec<&str> = rubric::models::random::WORDS.split_whitespace().collect();
    (0..n).map(|i| pool[(seed * 7919 + i * 104_729 + i * i * 31) % pool.len()]).collect::<Vec<_>>().join(" ")
}

/// `responses` responses of different lengths, each with `per` criteria of different lengths,
/// rendered as a judge's messages (system, then the response and the criterion).
fn prompts(responses: usize, per: usize) -> Vec<Vec<ChatMessage>> {
    let mut out = Vec::new();
    for r in 0..responses {
        let response = words(r, 12 + 9 * r);
        for c in 0..per {
            let criterion = words(100 + c, 2 + (c * 3) % 7);
            out.push(vec![
                ChatMessage::new("system", "You are a careful grader. Answer yes or no."),
                ChatMessage::new(
                    "user",
                    format!("Response: {response}\n\nCriterion: {criterion}\n\nAnswer yes or no."),
                ),
            ]);
        }
    }
    out
}

fn scores_alone(judge: &LocalJudge, tokens: &[Vec<u32>]) -> Vec<YesNo> {
    tokens.iter().map(|t| judge.score_alone(t).unwrap()).collect()
}

fn assert_close(shared: &[YesNo], alone: &[YesNo], what: &str) {
    assert_eq!(shared.len(), alone.len());
    for (i, (s, a)) in shared.iter().zip(alone).enumerate() {
        let (ps, pa) = (s.p_yes(), a.p_yes());
        assert!((ps - pa).abs() < 1e-5, "{what}: prompt {i}: P(yes) {ps} shared vs {pa} alone");
        assert!((s.logprob_yes - a.logprob_yes).abs() < 1e-4, "{what}: prompt {i}: ln P(yes) {s:?} vs {a:?}");
        assert!((s.logprob_no - a.logprob_no).abs() < 1e-4, "{what}: prompt {i}: ln P(no) {s:?} vs {a:?}");
        assert_eq!(s.prompt_tokens, a.prompt_tokens);
    }
}

/// The batched path (prefixes shared, suffixes batched, responses packed) equals every prompt
/// scored alone, for each family, under several batching limits.
#[test]
fn shared_prefix_batches_equal_scoring_each_prompt_alone() {
    for (family, seed) in [(Family::Qwen3, 1), (Family::Qwen2, 2), (Family::Llama, 3)] {
        let dir = TempDir::new(&format!("local-{}", family.name()));
        tiny_model(&dir.0, family, seed);
        let mut judge = LocalJudge::load(&dir.0, &candle_core::Device::Cpu).unwrap();
        let (yes, no) = judge.answer_tokens();
        assert_eq!((yes.len(), no.len()), (3, 3), "yes/Yes/YES and no/No/NO");
        let mut messages = prompts(3, 5);
        // A prompt that shares nothing with the others but the template.
        messages.push(vec![ChatMessage::new("user", "yes")]);
        let tokens: Vec<Vec<u32>> = messages.iter().map(|m| judge.prompt_tokens(m).unwrap()).collect();
        let alone = scores_alone(&judge, &tokens);
        let p: Vec<f64> = alone.iter().map(YesNo::p_yes).collect();
        let spread = p.iter().cloned().fold(f64::MIN, f64::max) - p.iter().cloned().fold(f64::MAX, f64::min);
        assert!(spread > 0.05, "{}: scores hardly vary ({p:?}); the test would prove nothing", family.name());
        // The criteria of one response share its prefix.
        let live: Vec<usize> = (0..tokens.len()).collect();
        let groups = group_prompts(&tokens, &live, 64);
        assert!(groups.len() <= 5, "{groups:?}");
        assert!(groups.iter().any(|g| g.members.len() == 5 && g.prefix >= 20), "{groups:?}");
        // Everything in one pass: several responses' prefixes packed into one padded batch.
        judge.options = BatchOptions { token_budget: 1 << 20, max_group: 64 };
        assert_close(&scores_ok(judge.score_tokens(&tokens)), &alone, "one pack");
        // Small passes, and groups cut short (the same prefix in several groups).
        judge.options = BatchOptions { token_budget: 48, max_group: 2 };
        assert_close(&scores_ok(judge.score_tokens(&tokens)), &alone, "small packs");
        // Through the chat template.
        judge.options = BatchOptions { token_budget: 8192, max_group: 64 };
        assert_close(&scores_ok(judge.score(&messages)), &alone, "messages");
    }
}

fn scores_ok(r: Vec<Result<YesNo, rubric::models::ModelError>>) -> Vec<YesNo> {
    r.into_iter().map(|x| x.unwrap()).collect()
}

/// Hugging Face transformers' scores for the same seeded tiny models and prompts (computed
/// once with `bench/local_judge.py`, stored in `tests/local_judge_transformers.json`) agree with
/// ours, batched and alone, within 1e-5: an independent implementation of the three families.
#[test]
fn scores_equal_transformers_on_the_same_models() {
    let fixture: Json = serde_json::from_str(include_str!("local_judge_transformers.json")).unwrap();
    for f in fixture["families"].as_array().unwrap() {
        let family: Family = f["family"].as_str().unwrap().parse().unwrap();
        let dir = TempDir::new(&format!("local-hf-{}", family.name()));
        let spec = RandomModel {
            family,
            shape: Shape::Tiny,
            seed: f["seed"].as_u64().unwrap(),
            std: f["std"].as_f64().unwrap(),
            dtype: candle_core::DType::F32,
        };
        write_random_model(&dir.0, &spec).unwrap();
        let judge = LocalJudge::load(&dir.0, &candle_core::Device::Cpu).unwrap();
        let tokens: Vec<Vec<u32>> = serde_json::from_value(f["token_ids"].clone()).unwrap();
        let expected: Vec<f64> = serde_json::from_value(f["p_yes"].clone()).unwrap();
        let shared = scores_ok(judge.score_tokens(&tokens));
        for (i, (s, e)) in shared.iter().zip(&expected).enumerate() {
            let alone = judge.score_alone(&tokens[i]).unwrap().p_yes();
            assert!(
                (s.p_yes() - e).abs() < 1e-5,
                "{}: prompt {i}: ours {}, transformers {e}",
                family.name(),
                s.p_yes()
            );
            assert!((alone - e).abs() < 1e-5, "{}: prompt {i}: ours alone {alone}, transformers {e}", family.name());
        }
    }
}

/// On a GPU (a `cuda` build on a machine with one; run with `--include-ignored`): the same
/// scores as on the CPU, within 1e-4 in f32 and 0.03 in bf16, and the batched path equal to
/// each prompt alone on the GPU too. Without a CUDA device it says so and checks nothing.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh runs it)"]
fn gpu_local_judge_scores_equal_cpu_scores() {
    let gpu = match rubric::models::DeviceSpec::Cuda(0).open() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no CUDA device, nothing checked: {e}");
            return;
        }
    };
    let dir = TempDir::new("local-cuda");
    tiny_model(&dir.0, Family::Qwen3, 21);
    let cpu = LocalJudge::load(&dir.0, &candle_core::Device::Cpu).unwrap();
    let messages = prompts(4, 6);
    let tokens: Vec<Vec<u32>> = messages.iter().map(|m| cpu.prompt_tokens(m).unwrap()).collect();
    let reference = scores_alone(&cpu, &tokens);
    for (dtype, tolerance) in [(candle_core::DType::F32, 1e-4), (candle_core::DType::BF16, 0.03)] {
        let judge = LocalJudge::load_as(&dir.0, &gpu, dtype).unwrap();
        let shared = scores_ok(judge.score_tokens(&tokens));
        let alone = scores_alone(&judge, &tokens);
        for (i, ((s, a), r)) in shared.iter().zip(&alone).zip(&reference).enumerate() {
            let (s, a, r) = (s.p_yes(), a.p_yes(), r.p_yes());
            assert!((s - r).abs() < tolerance, "{dtype:?}: prompt {i}: GPU shared {s}, CPU {r}");
            assert!((s - a).abs() < tolerance, "{dtype:?}: prompt {i}: GPU shared {s}, GPU alone {a}");
        }
        eprintln!("{dtype:?}: {} prompts agree with the CPU within {tolerance}", tokens.len());
    }
}

/// The model directory's files carry Hugging Face's names for the architecture.
#[test]
fn random_models_use_hugging_face_names() {
    let dir = TempDir::new("local-names");
    tiny_model(&dir.0, Family::Qwen3, 5);
    let tensors = candle_core::safetensors::load(dir.path("model.safetensors"), &candle_core::Device::Cpu).unwrap();
    let mut names: Vec<&str> = tensors.keys().map(String::as_str).filter(|n| n.contains("layers.0.")).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "model.layers.0.input_layernorm.weight",
            "model.layers.0.mlp.down_proj.weight",
            "model.layers.0.mlp.gate_proj.weight",
            "model.layers.0.mlp.up_proj.weight",
            "model.layers.0.post_attention_layernorm.weight",
            "model.layers.0.self_attn.k_norm.weight",
            "model.layers.0.self_attn.k_proj.weight",
            "model.layers.0.self_attn.o_proj.weight",
            "model.layers.0.self_attn.q_norm.weight",
            "model.layers.0.self_attn.q_proj.weight",
            "model.layers.0.self_attn.v_proj.weight",
        ]
    );
    assert!(!tensors.contains_key("lm_head.weight"), "Qwen3 tiny ties its embeddings");
    let cfg: Json = serde_json::from_str(&std::fs::read_to_string(dir.path("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["model_type"], "qwen3");
    assert_eq!(cfg["architectures"][0], "Qwen3ForCausalLM");
    // The same seed writes the same weights.
    let again = TempDir::new("local-names-again");
    tiny_model(&again.0, Family::Qwen3, 5);
    assert_eq!(
        std::fs::read(dir.path("model.safetensors")).unwrap(),
        std::fs::read(again.path("model.safetensors")).unwrap()
    );
}

fn rubric(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rubric"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUBRIC_DEVICE")
        .env("NO_COLOR", "1")
        .output()
        .expect("the rubric binary runs")
}

fn describe(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const LOCAL_RUBRIC: &str = r#"rubric local.demo @ 1.0.0
input response: Text
judge j {
  local "models/judge"
  sees response
}
criterion helpful "Gives helpful advice" by j
criterion clear "Is clear and concise" by j
criterion calm "Keeps a calm tone" continuous by j
score = mean(all)
"#;

const ROWS: &str = "{\"response\": \"Call the emergency number now and stay calm.\"}\n\
{\"response\": \"yes yes no\"}\n\
{\"response\": \"It depends on the source; read the reference.\"}\n";

/// `rubric run` scores local judges with no judges configuration; every record's `p_yes`
/// (binary) and `value` (continuous) equals its prompt scored alone; a re-run with the same
/// cache asks the model nothing and writes the same records.
#[test]
fn rubric_run_scores_local_judges_as_their_prompts_alone() {
    let dir = TempDir::new("local-run");
    let model_dir = dir.path("models/judge");
    let o = rubric(
        &dir.0,
        &[
            "model",
            "init",
            "--family",
            "qwen3",
            "--shape",
            "tiny",
            "--seed",
            "11",
            "--std",
            "0.3",
            "--dtype",
            "f32",
            "models/judge",
        ],
    );
    assert!(o.status.success(), "{}", describe(&o));
    dir.file("main.rubric", LOCAL_RUBRIC);
    dir.file("rows.jsonl", ROWS);
    let run = |out: &str| {
        let o = rubric(
            &dir.0,
            &[
                "run",
                "main.rubric",
                "--input",
                "rows.jsonl",
                "--output",
                out,
                "--cache",
                "cache.sqlite",
                "--record",
                &format!("{out}.transcript"),
                "--no-progress",
            ],
        );
        assert!(o.status.success(), "{}", describe(&o));
        o
    };
    let first = run("first.jsonl");
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(err.contains("local judges: 9 requests answered by local models in 1 batched calls"), "{err}");
    let records = json_lines(&std::fs::read_to_string(dir.path("first.jsonl")).unwrap());
    assert_eq!(records.len(), 3);
    // The transcript holds every request: its messages, scored alone, give the record's value.
    let judge = LocalJudge::load(&model_dir, &candle_core::Device::Cpu).unwrap();
    let transcript = json_lines(&std::fs::read_to_string(dir.path("first.jsonl.transcript")).unwrap());
    assert_eq!(transcript.len(), 9);
    let mut by_prompt = std::collections::HashMap::new();
    for t in &transcript {
        assert_eq!(t["source"], "local");
        assert_eq!(t["request"]["model"], "local:models/judge");
        let messages: Vec<ChatMessage> = t["request"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let user = messages[1].content.clone();
        let p = judge.score_alone(&judge.prompt_tokens(&messages).unwrap()).unwrap().p_yes();
        by_prompt.insert(user, p);
    }
    let mut seen = 0;
    for (row, rec) in records.iter().enumerate() {
        let response = serde_json::from_str::<Json>(ROWS.lines().nth(row).unwrap()).unwrap()["response"]
            .as_str()
            .unwrap()
            .to_string();
        for c in rec["criteria"].as_array().unwrap() {
            let text = c["text"].as_str().unwrap();
            let (_, p) = by_prompt
                .iter()
                .find(|(user, _)| user.contains(&response) && user.contains(&format!("Criterion: {text}\n")))
                .unwrap_or_else(|| panic!("no request for row {row}, `{text}`"));
            let got = if c["kind"] == "binary" {
                assert_eq!(c["status"], if *p >= 0.5 { "met" } else { "unmet" }, "{c}");
                c["p_yes"].as_f64().unwrap()
            } else {
                c["value"].as_f64().unwrap()
            };
            assert!((got - p).abs() < 1e-5, "row {row} `{text}`: record {got}, alone {p}");
            seen += 1;
        }
        assert!(rec["score"].is_number(), "{rec}");
    }
    assert_eq!(seen, 9);
    // Again, from the cache: no model call, the same bytes.
    let second = run("second.jsonl");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("9 answered from the cache"), "{err}");
    assert!(!err.contains("local judges:"), "{err}");
    assert_eq!(std::fs::read(dir.path("first.jsonl")).unwrap(), std::fs::read(dir.path("second.jsonl")).unwrap());
}

/// `[local]` in the judges configuration maps a judge's `local` name to a directory, relative
/// to the configuration file.
#[test]
fn judges_toml_maps_local_names_to_directories() {
    let dir = TempDir::new("local-toml");
    tiny_model(&dir.path("conf/weights/tiny"), Family::Llama, 4);
    dir.file("conf/judges.toml", "[local]\n\"house-judge\" = \"weights/tiny\"\n");
    dir.file("main.rubric", &LOCAL_RUBRIC.replace("models/judge", "house-judge"));
    dir.file("rows.jsonl", ROWS);
    let o = rubric(
        &dir.0,
        &[
            "run",
            "main.rubric",
            "--input",
            "rows.jsonl",
            "--output",
            "out.jsonl",
            "--judges",
            "conf/judges.toml",
            "--no-cache",
            "--no-progress",
        ],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let records = json_lines(&std::fs::read_to_string(dir.path("out.jsonl")).unwrap());
    for rec in &records {
        for c in rec["criteria"].as_array().unwrap() {
            assert_ne!(c["status"], "unscored", "{c}");
        }
    }
}

/// A missing or broken model directory leaves the local judge's criteria unscored with the
/// reason; the run itself succeeds.
#[test]
fn a_missing_or_broken_model_gives_unscored_rows() {
    let dir = TempDir::new("local-broken");
    dir.file("main.rubric", LOCAL_RUBRIC);
    dir.file("rows.jsonl", ROWS);
    let check = |expect: &str| {
        let o = rubric(
            &dir.0,
            &["run", "main.rubric", "--input", "rows.jsonl", "--output", "out.jsonl", "--no-cache", "--no-progress"],
        );
        // Every row is unscored by the model's failure: exit status 3, the code named.
        assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("3 failed rows by code: judge_local_model 3"),
            "{}",
            describe(&o)
        );
        let records = json_lines(&std::fs::read_to_string(dir.path("out.jsonl")).unwrap());
        assert_eq!(records.len(), 3);
        for rec in &records {
            for c in rec["criteria"].as_array().unwrap() {
                assert_eq!(c["status"], "unscored", "{c}");
                let reason = c["reason"].as_str().unwrap();
                assert!(reason.starts_with("judge_local_model: ") && reason.contains(expect), "{reason}");
            }
        }
    };
    // No directory at all.
    check("models/judge");
    // Weights cut short.
    tiny_model(&dir.path("models/judge"), Family::Qwen3, 9);
    let w = dir.path("models/judge/model.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap();
    check("model.safetensors");
    // A config that is not an architecture we run.
    std::fs::write(&w, &bytes).unwrap();
    let cfg = dir.path("models/judge/config.json");
    let text = std::fs::read_to_string(&cfg).unwrap().replace("\"qwen3\"", "\"gpt2\"");
    std::fs::write(&cfg, text).unwrap();
    check("gpt2");
}
