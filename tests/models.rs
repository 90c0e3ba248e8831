//! Local models on the CPU: the embedding verifiers against reference vectors computed by an
//! independent implementation (`scripts/embedding-reference.py`, NumPy), and through `rubric run`.
#![cfg(feature = "models")]

use crate::common::{json_lines, minilm, use_minilm, TempDir};
use rubric::models::embed::{cosine, Embedder};
use serde_json::Value as Json;
use std::process::Command;

fn reference() -> Json {
    let p = crate::common::crate_root().join("tests/fixtures/minilm_reference.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn load() -> Embedder {
    Embedder::load(&minilm(), &candle_core::Device::Cpu).expect("all-MiniLM-L6-v2 loads")
}

#[test]
fn minilm_embeddings_match_the_independent_reference() {
    let model = load();
    let fx = reference();
    let sentences = fx["sentences"].as_array().unwrap();
    assert_eq!(sentences.len(), 6);
    let texts: Vec<&str> = sentences.iter().map(|s| s["text"].as_str().unwrap()).collect();
    let got = model.embed_cached(&texts).unwrap();
    for (s, e) in sentences.iter().zip(&got) {
        let ids: Vec<u32> = s["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(model.token_ids(s["text"].as_str().unwrap()).unwrap(), ids, "token ids of {}", s["text"]);
        let want: Vec<f64> = s["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(e.len(), 384);
        let diff = e.iter().zip(&want).map(|(a, b)| (f64::from(*a) - b).abs()).fold(0.0, f64::max);
        assert!(diff < 1e-5, "{}: max |difference| {diff} from the reference", s["text"]);
        let norm: f64 = e.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "not unit length: {norm}");
    }
    // the similarity the verifiers report is the reference's cosine
    let want: f64 = {
        let a = &sentences[0]["embedding"];
        let b = &sentences[1]["embedding"];
        a.as_array()
            .unwrap()
            .iter()
            .zip(b.as_array().unwrap())
            .map(|(x, y)| x.as_f64().unwrap() * y.as_f64().unwrap())
            .sum()
    };
    assert!((cosine(&got[0], &got[1]) - want).abs() < 1e-5);
}

#[test]
fn padded_batches_agree_with_the_verifier_path() {
    let model = load();
    let texts = [
        "Short one.",
        "A rather longer sentence about emergency care and what to do when chest pain spreads.",
        "Medium length sentence here, with a comma.",
        "Short one.",
    ];
    let cached = model.embed_cached(&texts).unwrap();
    for batch in [1, 3, 4] {
        let padded = model.embed(&texts, batch).unwrap();
        for (a, b) in padded.iter().zip(&cached) {
            let diff = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
            assert!(diff < 1e-5, "batch {batch}: {diff}");
        }
    }
    assert_eq!(cached[0], cached[3], "the same text embeds the same");
}

/// `rubric bench-embed --random` and the device tests: a random-weight model of
/// all-MiniLM-L6-v2's shape loads and gives finite unit vectors, padded or not.
#[test]
fn random_models_of_a_real_shape_embed_to_unit_vectors() {
    let dir = TempDir::new("random-embed");
    Embedder::write_random(&minilm(), &dir.0).unwrap();
    let model = Embedder::load(&dir.0, &candle_core::Device::Cpu).unwrap();
    assert_eq!(model.dim, 384);
    let texts = ["Short one.", "A longer sentence about chest pain that spreads to the arm.", "Medium, with a comma."];
    let cached = model.embed_cached(&texts).unwrap();
    let padded = model.embed(&texts, 3).unwrap();
    for (a, b) in padded.iter().zip(&cached) {
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(a.iter().all(|x| x.is_finite()) && (norm - 1.0).abs() < 1e-5, "norm {norm}");
        let diff = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(diff < 1e-5, "padded differs by {diff}");
    }
    assert!(cosine(&cached[0], &cached[1]) < 0.999, "different texts embed differently");
}

const SEMANTIC: &str = r#"rubric semantic.demo @ 1.0.0 "embedding verifiers"
input response: Text
input reference: Text
criterion emergency "Tells the user to call emergency services"
  check covers(response, "Call emergency services.", 0.5)
criterion close "Close to the reference answer" check similarity(response, reference) >= 0.6
criterion picks "Matches the emergency advice best"
  check best_match(response, ["Drink water.", "Call emergency services now.", "See a dentist."]).index == 1
score = fraction(all)
"#;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rubric")).args(args).output().unwrap()
}

#[test]
fn rubric_run_scores_embedding_verifiers_on_every_engine() {
    let _ = use_minilm();
    let dir = TempDir::new("semantic");
    let rubric = dir.file("main.rubric", SEMANTIC);
    let rows = dir.file(
        "rows.jsonl",
        concat!(
            r#"{"response": "Rest first. If the pain spreads to your arm, call emergency services right away.", "reference": "Call emergency services if the pain spreads to your arm."}"#,
            "\n",
            r#"{"response": "Drink some water and rest.", "reference": "Call emergency services if the pain spreads to your arm."}"#,
            "\n"
        ),
    );
    let model = minilm();
    let mut outputs = Vec::new();
    for engine in ["interp", "wasm", "jit"] {
        let out_file = dir.path(&format!("out-{engine}.jsonl"));
        let o = run(&[
            "run",
            rubric.to_str().unwrap(),
            "--input",
            rows.to_str().unwrap(),
            "--output",
            out_file.to_str().unwrap(),
            "--engine",
            engine,
            "--embedding-model",
            model.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{engine}: {}", String::from_utf8_lossy(&o.stderr));
        outputs.push(std::fs::read_to_string(&out_file).unwrap());
    }
    let same = |a: &str, b: &str| {
        a.replace("\"engine\":\"wasm\"", "").replace("\"engine\":\"jit\"", "") == b.replace("\"engine\":\"interp\"", "")
    };
    assert!(same(&outputs[1], &outputs[0]), "wasm differs from the interpreter:\n{}\n{}", outputs[1], outputs[0]);
    assert!(same(&outputs[2], &outputs[0]), "jit differs from the interpreter:\n{}\n{}", outputs[2], outputs[0]);
    let recs = json_lines(&outputs[0]);
    let status = |r: &Json, id: &str| {
        r["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // the first response covers the nugget, is close to the reference and matches the advice
    assert_eq!(recs[0]["score"], 1.0, "{}", recs[0]);
    // the second says nothing of the kind
    assert_eq!(status(&recs[1], "emergency"), "unmet", "{}", recs[1]);
    assert_eq!(status(&recs[1], "picks"), "unmet", "{}", recs[1]);
    // the similarity a check reads is the model's cosine of the two texts
    let m = load();
    let e = m
        .embed_cached(&["Drink some water and rest.", "Call emergency services if the pain spreads to your arm."])
        .unwrap();
    let sim = cosine(&e[0], &e[1]);
    assert_eq!(status(&recs[1], "close"), if sim >= 0.6 { "met" } else { "unmet" });
}

/// The built binary run directly, outside `cargo` (no `RUBRIC_EMBEDDING_MODEL`): it finds the
/// model in `models/` beside its directory (`target/models/` for `target/debug/rubric`), else
/// in the user's data directory; with neither, the criterion is unscored with a reason that
/// says where it looked and how to install the model, and the run exits 3.
#[test]
fn the_binary_finds_the_model_outside_cargo_or_says_how_to_install_it() {
    let model = minilm();
    let dir = TempDir::new("semantic-lookup");
    let rubric = dir.file("main.rubric", SEMANTIC);
    let rows = dir.file("rows.jsonl", "{\"response\": \"Hi\", \"reference\": \"Hello\"}\n");
    let out_file = dir.path("out.jsonl");
    // A copy of the binary (a hard link where it can be) in a directory with no models/ beside.
    let bin = dir.path("elsewhere/bin/rubric");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    if std::fs::hard_link(env!("CARGO_BIN_EXE_rubric"), &bin).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_rubric"), &bin).unwrap();
    }
    let home = dir.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let run_with = |binary: &std::path::Path| {
        let o = Command::new(binary)
            .args(["run", rubric.to_str().unwrap(), "--input", rows.to_str().unwrap(), "--no-progress", "--output"])
            .arg(&out_file)
            .env_remove("RUBRIC_EMBEDDING_MODEL")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", &home)
            .output()
            .unwrap();
        let out = std::fs::read_to_string(&out_file).unwrap_or_default();
        let rec = json_lines(&out).into_iter().next().unwrap_or(Json::Null);
        let c = rec["criteria"].as_array().and_then(|cs| cs.iter().find(|c| c["id"] == "emergency").cloned());
        (o, c.unwrap_or(Json::Null))
    };
    // The binary cargo built: target/models/ beside target/debug/.
    let (o, c) = run_with(std::path::Path::new(env!("CARGO_BIN_EXE_rubric")));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(c["status"], "unmet", "{c}");
    // Elsewhere, with nothing installed.
    let (o, c) = run_with(&bin);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(c["status"], "unscored", "{c}");
    let reason = c["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("rubric::trap::model"), "{reason}");
    assert!(reason.contains("scripts/fetch-models.sh --user") && reason.contains("--embedding-model"), "{reason}");
    assert!(
        reason.contains(&home.join(".local/share/rubric/models/all-MiniLM-L6-v2").display().to_string()),
        "{reason}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rubric::trap::model 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Installed for the user (where `fetch-models.sh --user` puts it).
    let user = home.join(".local/share/rubric/models");
    std::fs::create_dir_all(&user).unwrap();
    std::os::unix::fs::symlink(&model, user.join("all-MiniLM-L6-v2")).unwrap();
    let (o, c) = run_with(&bin);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(c["status"], "unmet", "{c}");

    // a directory that is not a model is refused before anything runs
    let o = run(&[
        "run",
        rubric.to_str().unwrap(),
        "--input",
        rows.to_str().unwrap(),
        "--output",
        dir.path("out2.jsonl").to_str().unwrap(),
        "--embedding-model",
        "/nonexistent",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a model directory"));
}

/// On the GPU machine (scripts/gpu-check.sh): embeddings on CUDA agree with the CPU's within
/// 1e-4 (f32 reductions run in another order there), for a random-weight model of
/// all-MiniLM-L6-v2's shape written once and loaded on both devices.
#[test]
#[ignore = "needs a CUDA device: run by scripts/gpu-check.sh"]
fn gpu_embeddings_agree_with_the_cpu() {
    let cuda = match rubric::models::DeviceSpec::Cuda(0).open() {
        Ok(d) => d,
        Err(e) => panic!("no CUDA device to check against the CPU: {e}"),
    };
    let shape = std::env::var_os("RUBRIC_GPU_MINILM_SHAPE").map_or_else(minilm, std::path::PathBuf::from);
    let dir = TempDir::new("gpu-embed");
    Embedder::write_random(&shape, &dir.0).unwrap();
    let cpu = Embedder::load(&dir.0, &candle_core::Device::Cpu).unwrap();
    let gpu = Embedder::load(&dir.0, &cuda).unwrap();
    let texts = rubric::cli::bench_sentences(64);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for batch in [1, 16, 64] {
        let a = cpu.embed(&refs, batch).unwrap();
        let b = gpu.embed(&refs, batch).unwrap();
        let diff = a.iter().flatten().zip(b.iter().flatten()).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        println!("gpu_embeddings: batch {batch}: max |cpu - cuda| = {diff:e}");
        assert!(diff < 1e-4, "batch {batch}: CUDA differs from the CPU by {diff}");
    }
}
