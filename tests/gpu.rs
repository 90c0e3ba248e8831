//! Tests for the GPU machine: the tensor numeric stage (`rubric::numeric`) on CUDA agrees with
//! the same stage on the CPU (which equals the scalar path exactly) within
//! `numeric::CUDA_TOLERANCE`, statuses and reasons exactly. Every test is `#[ignore]`d and named
//! `gpu_…`; run them with a `cuda` build: `cargo test --release --features cuda -- --ignored gpu_`
//! (or the carried test executable with `--ignored gpu_`). They skip nothing: without a usable
//! CUDA device they fail, saying so. `gpu_bench_numeric…` runs the `rubric` binary named by
//! `RUBRIC_BIN` (default: the one cargo built next to this test).

use crate::common::{crate_root, read_lines};
use candle_core::Device;
use rubric::engine::{CriterionResult, Engine, RowResult, Status};
use rubric::interp::Interpreter;
use rubric::ir::{AdvantageForm, AggOp, Policy, Program, RewardDecl, RewardUnscored, Uncovered};
use rubric::models::DeviceSpec;
use rubric::numeric::eval::{evaluate, Outcome};
use rubric::numeric::matrix::{Entry, HostMatrix};
use rubric::numeric::plan::{Node, Plan};
use rubric::numeric::{rl, within_tolerance, TensorStage, CUDA_TOLERANCE};
use rubric::runtime::groups::{default_reward, PendingGroup};
use rubric::runtime::{prepare_line, Identity, VerdictFile};
use rubric::types::compile_path;
use serde_json::{json, Value as Json};

/// The first CUDA device, or a failure that says why there is none.
fn cuda() -> Device {
    match DeviceSpec::Cuda(0).open() {
        Ok(d) if d.is_cuda() => d,
        Ok(_) => panic!("gpu tests: `cuda:0` opened as a CPU device"),
        Err(e) => panic!("gpu test: no usable CUDA device: {e}"),
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn agree(what: &str, cpu: &Outcome, gpu: &Outcome) {
    match (cpu, gpu) {
        (Outcome::Value(a), Outcome::Value(b)) => {
            assert!(
                within_tolerance(*a, *b) || (a.is_nan() && b.is_nan()),
                "{what}: cpu {a:e}, cuda {b:e}, tolerance {CUDA_TOLERANCE:e}"
            )
        }
        (a, b) => assert_eq!(a, b, "{what}"),
    }
}

fn agree_groups(what: &str, cpu: &[Vec<Option<f64>>], gpu: &[Vec<Option<f64>>]) {
    for (i, (a, b)) in cpu.iter().zip(gpu).enumerate() {
        for (x, y) in a.iter().zip(b) {
            match (x, y) {
                (Some(x), Some(y)) => assert!(within_tolerance(*x, *y), "{what} row {i}: {x:e} vs {y:e}"),
                (x, y) => assert_eq!(x, y, "{what} row {i}"),
            }
        }
    }
}

/// The case directories under `rel` (`tests/conformance`, `examples`): from the working
/// directory when it holds them (a test executable carried to another machine runs in a copy
/// of the tree), else from the crate the test was built in.
fn case_dirs(rel: &str) -> Vec<std::path::PathBuf> {
    let local = std::path::PathBuf::from(rel);
    let root = if local.is_dir() { local } else { crate_root().join(rel) };
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e} (run from the repository root)", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("main.rubric").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Every conformance case and example with a plan: scores and group trees on CUDA agree with
/// the CPU's.
#[test]
#[ignore = "needs a CUDA device (the GPU machine)"]
fn gpu_numeric_corpus_agrees_with_the_cpu() {
    let dev = cuda();
    let mut dirs = case_dirs("tests/conformance");
    dirs.extend(case_dirs("examples"));
    let mut compared = 0;
    for dir in dirs {
        let compiled = compile_path(&dir.join("main.rubric"));
        let p = compiled.program.as_ref().unwrap();
        let (Ok(on_cpu), Ok(on_gpu)) = (TensorStage::new(p, Device::Cpu), TensorStage::new(p, dev.clone())) else {
            continue;
        };
        let ident = Identity::of(p, &compiled.sites);
        let verdicts = dir.join("verdicts.jsonl");
        let verdicts = verdicts.is_file().then(|| VerdictFile::load(&verdicts).unwrap());
        let results: Vec<RowResult> = read_lines(&dir.join("inputs.jsonl"))
            .iter()
            .enumerate()
            .filter_map(|(i, l)| prepare_line(p, &ident, i, l, verdicts.as_ref()).ok())
            .map(|row| Interpreter.evaluate(p, &row.inputs, &row.verdicts))
            .collect();
        let a = on_cpu.compute(p, &results).unwrap();
        let b = on_gpu.compute(p, &results).unwrap();
        let name = dir.display().to_string();
        for (i, (x, y)) in a.outcomes.iter().zip(&b.outcomes).enumerate() {
            match (x, y) {
                (Some(x), Some(y)) => agree(&format!("{name} row {i}"), x, y),
                (x, y) => assert_eq!(x.is_some(), y.is_some(), "{name} row {i}"),
            }
            compared += 1;
        }
        agree_groups(&name, &a.groups, &b.groups);
    }
    assert!(compared >= 100, "only {compared} rows compared");
}

const RUBRIC: &str = r#"rubric gpu.oracle @ 1.0.0
input response: Text
input items: List[Text]
judge g { model "m" sees response }
tier core by g {
  criterion a "A" points 3 weight 2
  criterion b "B" points -2
  criterion c "C"
}
criteria item each it in items by g { criterion it points 1 }
group root by g {
  group left weight 2 {
    criterion d "D" weight 3
    criterion e "E" points 2
  }
  group right weight 0.5 { criterion f "F" }
  criterion h "H" weight 0.25
}
score = if all(core, unscored: skip) then 0.5 + 0.5 * tree(root, unscored: skip) else clip(points_ratio(all, unscored: unmet), 0, 1)
"#;

/// A random criterion result for row `r`, slot `k`.
fn result(seed: u64, id: String, r: usize, k: usize) -> CriterionResult {
    let h = splitmix(seed ^ splitmix((r as u64) << 12 ^ k as u64));
    let u = unit(h);
    let status = match u {
        u if u < 0.5 => Status::Met,
        u if u < 0.85 => Status::Unmet,
        u if u < 0.97 => Status::Unscored,
        _ => Status::Skipped,
    };
    let scored = matches!(status, Status::Met | Status::Unmet);
    CriterionResult {
        id: id.into(),
        text: None,
        kind: "continuous",
        status,
        reason: (status == Status::Unscored).then(|| "judge_timeout".into()),
        value: scored.then_some(unit(splitmix(h))),
        judged: None,
        points: Some([3.0, -2.0, 1.0, 0.5][(h >> 3) as usize % 4]),
        weight: [1.0, 2.0, 0.5, 0.25][(h >> 7) as usize % 4],
        axis: None,
        tags: vec![],
        source: "judge:g".into(),
        step: None,
        sets: Default::default(),
    }
}

fn random_rows(p: &Program, rows: usize, seed: u64) -> Vec<Vec<CriterionResult>> {
    (0..rows)
        .map(|r| {
            let each = (splitmix(seed ^ r as u64) % 5) as usize;
            let mut list = Vec::new();
            for (k, c) in p.criteria.iter().enumerate() {
                list.push(result(seed, c.id.clone(), r, k));
                if c.id == "c" {
                    list.extend((0..each).map(|i| result(seed, format!("item[{i}]"), r, 100 + i)));
                }
            }
            list
        })
        .collect()
}

/// Every aggregation with every policy over every set, the score plan and the group trees on
/// 20,000 random rows: CUDA agrees with the CPU.
#[test]
#[ignore = "needs a CUDA device (the GPU machine)"]
fn gpu_numeric_random_matrices_agree_with_the_cpu() {
    let dev = cuda();
    let compiled = rubric::types::compile_source("gpu.rubric", RUBRIC);
    let p = compiled.program.as_ref().unwrap();
    let rows = random_rows(p, 20_000, 7);
    let entries: Vec<Vec<Entry<'_>>> = rows.iter().map(|l| l.iter().map(Entry::of_result).collect()).collect();
    let m = HostMatrix::build(p, &entries).unwrap();
    let mut plans = vec![Plan::compile(p).unwrap()];
    for set in 0..p.sets.len() as u32 {
        for &op in AggOp::ALL {
            if op == AggOp::Tree && p.sets[set as usize].kind != rubric::ir::SetKind::Group {
                continue;
            }
            for policy in [Policy::Propagate, Policy::Skip, Policy::Unmet] {
                plans.push(Plan { score: Node::Agg { op, set, policy, k: 2.0 }, groups: vec![] });
            }
        }
    }
    for plan in &plans {
        let a = evaluate(plan, p, &m, &Device::Cpu).unwrap();
        let b = evaluate(plan, p, &m, &dev).unwrap();
        for (i, l) in rows.iter().enumerate() {
            agree(&format!("{:?} row {i}", plan.score), &a.outcome(p, &m, i, l), &b.outcome(p, &m, i, l));
        }
        for (g, (x, y)) in a.groups.iter().zip(&b.groups).enumerate() {
            agree_groups(&format!("group {g}"), std::slice::from_ref(x), std::slice::from_ref(y));
        }
    }
}

/// Advantages of every form and policy, and group annotation with token credit, on random
/// groups: the records CUDA annotates agree with the CPU's, numbers within the tolerance.
#[test]
#[ignore = "needs a CUDA device (the GPU machine)"]
fn gpu_numeric_advantages_and_token_credit_agree_with_the_cpu() {
    let dev = cuda();
    let compiled = rubric::types::compile_source("gpu.rubric", RUBRIC);
    let p = compiled.program.as_ref().unwrap();
    let rows = random_rows(p, 4_000, 11);
    let words = ["call", "911", "now", "rest", "é", "[1]", "water"];
    for (form, unscored) in [
        (AdvantageForm::Zscore, RewardUnscored::Exclude),
        (AdvantageForm::Mean, RewardUnscored::Zero),
        (AdvantageForm::LeaveOneOut, RewardUnscored::FlagGroup),
        (AdvantageForm::Rank, RewardUnscored::Exclude),
    ] {
        let decl = RewardDecl {
            advantage: form,
            unscored,
            uncovered: Uncovered::Row,
            clip: Some((-3.0, 3.0)),
            ..default_reward()
        };
        let mut groups: Vec<PendingGroup> = Vec::new();
        for (gi, chunk) in rows.chunks(8).enumerate() {
            let mut g = PendingGroup::default();
            for (j, list) in chunk.iter().enumerate() {
                let h = splitmix((gi * 8 + j) as u64);
                let n = 3 + (h % 20) as usize;
                let toks: Vec<&str> = (0..n).map(|t| words[(splitmix(h ^ t as u64) % 7) as usize]).collect();
                let response = toks.join(" ");
                let criteria: Vec<Json> = list
                    .iter()
                    .enumerate()
                    .map(|(k, c)| {
                        let mut j = c.to_json();
                        if c.status == Status::Met && k % 2 == 0 {
                            let s = (splitmix(h ^ k as u64) % n as u64) as usize;
                            j["evidence"] = json!(toks[s..(s + 2).min(n)].join(" "));
                        }
                        j
                    })
                    .collect();
                let score = if h.is_multiple_of(9) { Json::Null } else { json!(unit(h)) };
                g.members.push(json!({"row": 0, "score": score, "criteria": criteria}));
                let mut at = 0;
                let offsets = toks
                    .iter()
                    .map(|w| {
                        let k = w.chars().count();
                        at += k + 1;
                        (at - k - 1, at - 1)
                    })
                    .collect();
                g.tokens.push(Some(Ok((response, offsets))));
            }
            groups.push(g);
        }
        let mut on_cpu = groups.clone();
        let mut on_gpu = groups;
        rl::annotate_groups(p, &decl, &mut on_cpu, &Device::Cpu).unwrap();
        rl::annotate_groups(p, &decl, &mut on_gpu, &dev).unwrap();
        for (a, b) in on_cpu.iter().zip(&on_gpu) {
            for (x, y) in a.members.iter().zip(&b.members) {
                json_agree(&format!("{form:?}"), x, y);
            }
        }
    }
}

/// Two records are equal but for numbers, which agree within the tolerance.
fn json_agree(what: &str, a: &Json, b: &Json) {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(within_tolerance(x, y), "{what}: {x:e} vs {y:e}");
        }
        (Json::Array(x), Json::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{what}");
            x.iter().zip(y).for_each(|(x, y)| json_agree(what, x, y));
        }
        (Json::Object(x), Json::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{what}");
            x.iter().zip(y).for_each(|((k, x), (_, y))| json_agree(&format!("{what}.{k}"), x, y));
        }
        (x, y) => assert_eq!(x, y, "{what}"),
    }
}

/// `rubric bench-numeric` on CUDA (the configured device): it checks the CPU stage against the
/// scalar path exactly and CUDA against the CPU within the tolerance, and exits 1 otherwise.
#[test]
#[ignore = "needs a CUDA device (the GPU machine)"]
fn gpu_bench_numeric_agrees_on_cuda() {
    let _ = cuda();
    let bin = std::env::var_os("RUBRIC_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_rubric").into());
    let out = std::process::Command::new(&bin)
        .args(["bench-numeric", "--rows", "200000"])
        .env("RUBRIC_DEVICE", "cuda")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin:?} (set RUBRIC_BIN): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("tensor cuda:0"), "{stdout}");
}
