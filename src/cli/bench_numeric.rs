//! `rubric bench-numeric` (the `models` feature): the batch numeric stage (`numeric`) measured
//! on a synthetic criterion-result matrix — by default 1,000,000 rows × 50 criteria in RL
//! groups of 8 — against the scalar path, in the same run: the score and group trees of every
//! row, the groups' advantages, and every member's per-criterion advantages (the input of
//! token credit). Each part is timed on the scalar path (one thread, and all cores with rayon),
//! on the tensor stage on the CPU, and on the configured device when it is CUDA (`--device`,
//! `RUBRIC_DEVICE`). Results are checked: the CPU stage must equal the scalar path exactly, and
//! the largest CUDA difference is reported against `numeric::CUDA_TOLERANCE`.
//!
//! The matrix is generated in blocks from a seed (a hash of row and column), so memory stays
//! bounded by one block; only the computation is timed, never the generation or the building
//! of the scalar path's inputs (criterion results, JSON records).

use crate::engine::{CriterionResult, Status};
use crate::interp::{aggregate, eval_decided, Decided};
use crate::ir::{AggOp, Program, RewardDecl};
use crate::numeric::eval::{agrees, evaluate, Outcome, OK};
use crate::numeric::matrix::{DeviceMatrix, HostMatrix, Layout, MET, SKIPPED, UNMET, UNSCORED};
use crate::numeric::plan::Plan;
use crate::numeric::{rl, within_tolerance, CUDA_TOLERANCE};
use crate::runtime::groups::{advantages, criterion_advantages, default_reward, GroupStats};
use crate::stdlib::Trap;
use crate::value::Value;
use candle_core::Device;
use rayon::prelude::*;
use serde_json::{json, Value as Json};
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub struct Options {
    pub rows: usize,
    pub criteria: usize,
    pub group_size: usize,
    pub block: usize,
    pub seed: u64,
}

/// The synthetic rubric: a fifth of the criteria in a tier, the rest in four weighted groups
/// under one root; a score that reads the tier, the points of all criteria and the tree.
fn source(criteria: usize) -> String {
    let core = (criteria / 5).max(1);
    let mut s =
        String::from("rubric bench.numeric @ 1.0.0\ninput response: Text\njudge g { model \"m\" sees response }\n");
    let decl = |i: usize| format!("  criterion c{i} \"C{i}\" points {} weight {}\n", points(i), weight(i));
    s.push_str("tier core by g {\n");
    for i in 0..core {
        s.push_str(&decl(i));
    }
    s.push_str("}\ngroup root by g {\n");
    let rest: Vec<usize> = (core..criteria).collect();
    for (k, part) in rest.chunks(rest.len().div_ceil(4).max(1)).enumerate() {
        s.push_str(&format!("group part{k} weight {} {{\n", k + 1));
        for &i in part {
            s.push_str(&decl(i));
        }
        s.push_str("}\n");
    }
    s.push_str(
        "}\nscore = if all(core, unscored: skip) then 0.5 + 0.25 * clip(points_ratio(all, unscored: skip), 0, 1) \
         + 0.25 * tree(root, unscored: skip) else 0.5 * weighted_mean(all, unscored: unmet)\n",
    );
    s
}

fn points(i: usize) -> f64 {
    if i % 10 == 3 {
        -3.0
    } else {
        (1 + i % 5) as f64
    }
}

fn weight(i: usize) -> f64 {
    1.0 + (i % 3) as f64 * 0.5
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The status and value of criterion `col` in row `row`: 55% met, 35% unmet, 9% unscored,
/// 1% skipped; binary values in even columns, continuous ones in odd columns.
fn cell(seed: u64, row: usize, col: usize) -> (u8, f64) {
    let h = splitmix(seed ^ splitmix((row as u64) << 8 ^ col as u64));
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    let v = (splitmix(h) >> 11) as f64 / (1u64 << 53) as f64;
    let binary = col.is_multiple_of(2);
    match u {
        u if u < 0.55 => (MET, if binary { 1.0 } else { 0.5 + 0.5 * v }),
        u if u < 0.90 => (UNMET, if binary { 0.0 } else { 0.5 * v }),
        u if u < 0.99 => (UNSCORED, 0.0),
        _ => (SKIPPED, 0.0),
    }
}

fn criterion_result(p: &Program, c: usize, (status, value): (u8, f64)) -> CriterionResult {
    let d = &p.criteria[c];
    let status = match status {
        MET => Status::Met,
        UNMET => Status::Unmet,
        UNSCORED => Status::Unscored,
        _ => Status::Skipped,
    };
    let scored = matches!(status, Status::Met | Status::Unmet);
    CriterionResult {
        id: d.id.as_str().into(),
        text: None,
        kind: "binary",
        status,
        reason: (status == Status::Unscored).then(|| "judge_timeout".into()),
        value: scored.then_some(value),
        judged: None,
        points: Some(points(c)),
        weight: weight(c),
        axis: None,
        tags: vec![],
        source: "judge:g".into(),
        step: None,
        sets: Default::default(),
    }
}

/// The stage's scores and group trees for a block.
type Computed = (Vec<Outcome>, Vec<Vec<Option<f64>>>);

/// Per-criterion advantages and whether each is defined, per row and column.
type PerCriterion = (Vec<Vec<f64>>, Vec<Vec<u8>>);

/// Rows the tensor stage computes at a time on the CPU.
const CPU_BATCH: usize = 8192;

/// Rows whose scalar-path inputs are built at a time.
const SCALAR_BATCH: usize = 8192;

/// The matrix of rows `start..start + n`.
fn block_matrix(seed: u64, start: usize, n: usize, layout: &Layout, col_of: &[usize]) -> HostMatrix {
    let mut m = HostMatrix::empty(n, layout.clone());
    for r in 0..n {
        for (c, col) in col_of.iter().enumerate() {
            let (st, v) = cell(seed, start + r, c);
            let at = m.cell(r, *col);
            m.status[at] = st;
            m.value[at] = v;
            m.has_value[at] = u8::from(st == MET || st == UNMET);
            m.weight[at] = weight(c);
            m.points[at] = points(c);
            m.entry[at] = c as u32;
        }
    }
    m
}

/// The matrix in runs of at most `batch` rows (the first row of each, and its rows); the whole
/// matrix, uncopied, when it fits.
fn batches(m: &HostMatrix, batch: usize) -> Vec<(usize, std::borrow::Cow<'_, HostMatrix>)> {
    if m.rows <= batch {
        return vec![(0, std::borrow::Cow::Borrowed(m))];
    }
    (0..m.rows)
        .step_by(batch)
        .map(|first| (first, std::borrow::Cow::Owned(m.rows_range(first, batch.min(m.rows - first)))))
        .collect()
}

/// One part's timings.
#[derive(Default)]
struct Times {
    scalar_one: Duration,
    scalar_all: Duration,
    tensor_cpu: Duration,
    tensor_dev: Duration,
}

/// Agreement of the device's results with the CPU stage's.
#[derive(Default)]
struct DeviceAgreement {
    max_abs: f64,
    outside_tolerance: usize,
    state_mismatch: usize,
}

impl DeviceAgreement {
    fn compare(&mut self, cpu: f64, dev: f64) {
        if cpu.is_nan() && dev.is_nan() {
            return;
        }
        self.max_abs = self.max_abs.max((cpu - dev).abs());
        if !within_tolerance(cpu, dev) {
            self.outside_tolerance += 1;
        }
    }
}

pub fn command(o: &Options) -> ExitCode {
    if o.criteria < 5 || o.group_size == 0 || o.rows < o.group_size {
        eprintln!("error: `bench-numeric` needs at least 5 criteria, a group size of at least 1 and a group's rows");
        return ExitCode::from(2);
    }
    let compiled = crate::types::compile_source("bench-numeric.rubric", &source(o.criteria));
    let Some(p) = compiled.program.as_ref() else {
        eprintln!("error: the synthetic rubric does not compile: {:?}", compiled.diagnostics);
        return ExitCode::from(1);
    };
    let plan = match Plan::compile(p) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: the synthetic rubric has no plan: {e}");
            return ExitCode::from(1);
        }
    };
    let spec = crate::models::config().device;
    let configured = crate::models::device();
    let cuda = match spec {
        crate::models::DeviceSpec::Cpu => None,
        crate::models::DeviceSpec::Cuda(_) if configured.is_cuda() => Some(configured.clone()),
        crate::models::DeviceSpec::Cuda(_) => {
            eprintln!("error: the configured device `{spec}` could not be opened (see the warning above)");
            return ExitCode::from(2);
        }
    };
    let rows = o.rows / o.group_size * o.group_size;
    let block = (o.block / o.group_size).max(1) * o.group_size;
    let decl = RewardDecl { clip: Some((-5.0, 5.0)), ..default_reward() };
    outln!(
        "bench-numeric: {rows} rows × {} criteria, RL groups of {}, blocks of {block} rows, seed {}; scalar on 1 and {} threads; tensor on cpu{}",
        o.criteria,
        o.group_size,
        o.seed,
        rayon::current_num_threads(),
        cuda.as_ref().map_or(String::new(), |_| format!(" and {spec}"))
    );
    let mut scores = Times::default();
    let mut adv = Times::default();
    let mut crit = Times::default();
    let (mut cpu_disagree, mut checked) = (0usize, 0usize);
    let mut dev_scores = DeviceAgreement::default();
    let mut dev_adv = DeviceAgreement::default();
    let mut dev_crit = DeviceAgreement::default();
    let cols = p.criteria.len();
    let layout = Layout::new(p, &vec![0; p.steps.len()]);
    let col_of: Vec<usize> = (0..cols).map(|c| layout.criterion(c as u32).unwrap_or(0)).collect();
    let mut start = 0;
    while start < rows {
        let n = block.min(rows - start);
        let m = block_matrix(o.seed, start, n, &layout, &col_of);
        let list = |r: usize| -> Vec<CriterionResult> {
            (0..cols).map(|c| criterion_result(p, c, cell(o.seed, start + r, c))).collect()
        };
        // The stage: scores and trees, on the CPU in batches of CPU_BATCH rows (candle's CPU
        // operations allocate a fresh buffer each: small ones are reused, large ones fault
        // pages in), on CUDA the whole block at once.
        let stage = |dev: &Device, batch: usize| -> candle_core::Result<Computed> {
            let mut outcomes = Vec::with_capacity(n);
            let mut trees = vec![Vec::with_capacity(n); plan.groups.len()];
            for (first, part) in batches(&m, batch) {
                let s = evaluate(&plan, p, &part, dev)?;
                for r in 0..part.rows {
                    // Reasons quote the row's criteria: only rows that are not a value need them.
                    let criteria = if s.state[r] == OK { Vec::new() } else { list(first + r) };
                    outcomes.push(s.outcome(p, &part, r, &criteria));
                }
                for (all, g) in trees.iter_mut().zip(s.groups) {
                    all.extend(g);
                }
            }
            Ok((outcomes, trees))
        };
        let t = Instant::now();
        let cpu = match stage(&Device::Cpu, CPU_BATCH) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("error: the tensor stage failed on the CPU: {e}");
                return ExitCode::from(1);
            }
        };
        scores.tensor_cpu += t.elapsed();
        if let Some(dev) = &cuda {
            let t = Instant::now();
            let got = match stage(dev, n) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("error: the tensor stage failed on {spec}: {e}");
                    return ExitCode::from(1);
                }
            };
            scores.tensor_dev += t.elapsed();
            for r in 0..n {
                match (&cpu.0[r], &got.0[r]) {
                    (Outcome::Value(a), Outcome::Value(b)) => dev_scores.compare(*a, *b),
                    (a, b) if a == b => {}
                    _ => dev_scores.state_mismatch += 1,
                }
                for g in 0..plan.groups.len() {
                    match (cpu.1[g][r], got.1[g][r]) {
                        (Some(a), Some(b)) => dev_scores.compare(a, b),
                        (None, None) => {}
                        _ => dev_scores.state_mismatch += 1,
                    }
                }
            }
        }
        // Advantages of the groups, the scores being the rewards (the scalar scores: they are
        // checked equal to the stage's below).
        let rewards: Vec<Vec<Option<f64>>> = cpu
            .0
            .chunks(o.group_size)
            .map(|g| {
                g.iter()
                    .map(|s| match s {
                        Outcome::Value(x) if x.is_finite() => Some(*x),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let advantages_on = |dev: &Device, batch: usize| -> candle_core::Result<Vec<(Vec<Option<f64>>, GroupStats)>> {
            let mut out = Vec::with_capacity(rewards.len());
            for part in rewards.chunks((batch / o.group_size).max(1)) {
                out.extend(rl::advantages(&decl, part, dev)?);
            }
            Ok(out)
        };
        let t = Instant::now();
        let adv_cpu = match advantages_on(&Device::Cpu, CPU_BATCH) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("error: advantages failed on the CPU: {e}");
                return ExitCode::from(1);
            }
        };
        adv.tensor_cpu += t.elapsed();
        if let Some(dev) = &cuda {
            let t = Instant::now();
            let on_dev = match advantages_on(dev, n) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("error: advantages failed on {spec}: {e}");
                    return ExitCode::from(1);
                }
            };
            adv.tensor_dev += t.elapsed();
            for ((a, _), (b, _)) in adv_cpu.iter().zip(&on_dev) {
                for (x, y) in a.iter().zip(b) {
                    match (x, y) {
                        (Some(x), Some(y)) => dev_adv.compare(*x, *y),
                        (None, None) => {}
                        _ => dev_adv.state_mismatch += 1,
                    }
                }
            }
        }
        // Per-criterion advantages: the stage reads the matrix.
        let per_criterion = |dev: &Device, batch: usize| -> candle_core::Result<PerCriterion> {
            let (mut a, mut d) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for (_, part) in batches(&m, batch) {
                let dm = DeviceMatrix::upload(&part, dev)?;
                let (x, y) = rl::criterion_advantages(&dm, part.rows / o.group_size, o.group_size)?;
                a.extend(x.to_vec2::<f64>()?);
                d.extend(y.to_vec2::<u8>()?);
            }
            Ok((a, d))
        };
        let t = Instant::now();
        let (a_cpu, decided_cpu) = match per_criterion(&Device::Cpu, CPU_BATCH) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("error: criterion advantages failed on the CPU: {e}");
                return ExitCode::from(1);
            }
        };
        crit.tensor_cpu += t.elapsed();
        if let Some(dev) = &cuda {
            let t = Instant::now();
            let (a_dev, decided_dev) = match per_criterion(dev, n) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("error: criterion advantages failed on {spec}: {e}");
                    return ExitCode::from(1);
                }
            };
            crit.tensor_dev += t.elapsed();
            for r in 0..n {
                for c in &col_of {
                    if decided_dev[r][*c] != decided_cpu[r][*c] {
                        dev_crit.state_mismatch += 1;
                    } else if decided_cpu[r][*c] == 1 {
                        dev_crit.compare(a_cpu[r][*c], a_dev[r][*c]);
                    }
                }
            }
        }
        // The scalar path, a sub-block at a time (its inputs — criterion results, JSON
        // records — take far more memory than the matrix), checked against the stage.
        let mut first = 0;
        while first < n {
            let k = SCALAR_BATCH.min(n - first);
            let mut decided: Vec<Decided> = (first..first + k)
                .into_par_iter()
                .map(|r| {
                    let mut d = Decided::new(p);
                    for (c, x) in list(r).into_iter().enumerate() {
                        d.set_criterion(c as u32, x);
                    }
                    d
                })
                .collect();
            let scalar_row = |d: &Decided| -> (Result<Value, Trap>, Vec<Option<f64>>) {
                let score = eval_decided(p, d, &p.score);
                let trees = plan
                    .groups
                    .iter()
                    .map(|(set, policy)| match aggregate(p, d, AggOp::Tree, *set, *policy, &[]) {
                        Ok(Value::Number(x)) => Some(x),
                        _ => None,
                    })
                    .collect();
                (score, trees)
            };
            let t = Instant::now();
            let scalar: Vec<_> = decided.iter().map(scalar_row).collect();
            scores.scalar_one += t.elapsed();
            let t = Instant::now();
            let scalar_par: Vec<_> = decided.par_iter_mut().map(|d| scalar_row(d)).collect();
            scores.scalar_all += t.elapsed();
            drop(scalar_par);
            drop(decided);
            for (i, (score, trees)) in scalar.iter().enumerate() {
                let r = first + i;
                checked += 1;
                let trees_agree =
                    trees.iter().enumerate().all(|(g, t)| cpu.1[g][r].map(f64::to_bits) == t.map(f64::to_bits));
                if !agrees(score, &cpu.0[r]) || !trees_agree {
                    cpu_disagree += 1;
                }
            }
            let groups = &rewards[first / o.group_size..(first + k) / o.group_size];
            let t = Instant::now();
            let want: Vec<_> = groups.iter().map(|g| advantages(&decl, g)).collect();
            adv.scalar_one += t.elapsed();
            let t = Instant::now();
            let want_par: Vec<_> = groups.par_iter().map(|g| advantages(&decl, g)).collect();
            adv.scalar_all += t.elapsed();
            drop(want_par);
            for ((a, s), (b, t)) in adv_cpu[first / o.group_size..].iter().zip(&want) {
                checked += 1;
                let same = s == t && a.iter().map(|x| x.map(f64::to_bits)).eq(b.iter().map(|x| x.map(f64::to_bits)));
                if !same {
                    cpu_disagree += 1;
                }
            }
            let records: Vec<Json> = (first..first + k)
                .into_par_iter()
                .map(|r| json!({"criteria": list(r).iter().map(CriterionResult::to_json).collect::<Vec<_>>()}))
                .collect();
            let t = Instant::now();
            let want: Vec<_> = records.chunks(o.group_size).map(criterion_advantages).collect();
            crit.scalar_one += t.elapsed();
            let t = Instant::now();
            let want_par: Vec<_> = records.par_chunks(o.group_size).map(criterion_advantages).collect();
            crit.scalar_all += t.elapsed();
            drop(want_par);
            drop(records);
            for i in 0..k {
                let r = first + i;
                checked += 1;
                let maps = &want[i / o.group_size][i % o.group_size];
                let same = col_of.iter().enumerate().all(|(c, col)| {
                    let tensor = (decided_cpu[r][*col] == 1).then_some(a_cpu[r][*col]);
                    tensor.map(f64::to_bits) == maps.get(&p.criteria[c].id).copied().map(f64::to_bits)
                });
                if !same {
                    cpu_disagree += 1;
                }
            }
            first += k;
        }
        start += n;
    }
    let rate = |d: Duration| rows as f64 / d.as_secs_f64().max(1e-9);
    let line = |part: &str, path: &str, d: Duration, base: Duration| {
        outln!(
            "{part:<22} {path:<14} {:>9.3} s {:>13.0} rows/s {:>8.2}×",
            d.as_secs_f64(),
            rate(d),
            base.as_secs_f64() / d.as_secs_f64().max(1e-9)
        );
    };
    outln!("{:<22} {:<14} {:>11} {:>20} {:>9}", "part", "path", "time", "throughput", "× scalar 1T");
    let threads = format!("scalar {}T", rayon::current_num_threads());
    for (name, t) in [("score + group trees", &scores), ("group advantages", &adv), ("criterion advantages", &crit)] {
        line(name, "scalar 1T", t.scalar_one, t.scalar_one);
        line(name, &threads, t.scalar_all, t.scalar_one);
        line(name, "tensor cpu", t.tensor_cpu, t.scalar_one);
        if cuda.is_some() {
            line(name, &format!("tensor {spec}"), t.tensor_dev, t.scalar_one);
        }
    }
    let total = |f: fn(&Times) -> Duration| f(&scores) + f(&adv) + f(&crit);
    let (one, cpu) = (total(|t| t.scalar_one), total(|t| t.tensor_cpu));
    line("all parts", "scalar 1T", one, one);
    line("all parts", &threads, total(|t| t.scalar_all), one);
    line("all parts", "tensor cpu", cpu, one);
    if cuda.is_some() {
        let dev = total(|t| t.tensor_dev);
        line("all parts", &format!("tensor {spec}"), dev, one);
        outln!("tensor {spec} vs tensor cpu: {:.2}×", cpu.as_secs_f64() / dev.as_secs_f64().max(1e-9));
    }
    outln!(
        "agreement: tensor cpu == scalar exactly on {} of {checked} rows, groups and members{}",
        checked - cpu_disagree,
        if cpu_disagree == 0 { "" } else { " (DISAGREEMENT)" }
    );
    let mut failed = cpu_disagree > 0;
    if cuda.is_some() {
        for (part, a) in
            [("scores and trees", &dev_scores), ("advantages", &dev_adv), ("criterion advantages", &dev_crit)]
        {
            outln!(
                "agreement {spec} vs cpu, {part}: max |Δ| = {:.3e}, {} outside the tolerance {CUDA_TOLERANCE:e}, {} status mismatches",
                a.max_abs, a.outside_tolerance, a.state_mismatch
            );
            failed |= a.outside_tolerance > 0 || a.state_mismatch > 0;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_synthetic_rubric_compiles_with_a_plan_for_any_size() {
        for n in [5, 7, 50, 123] {
            let c = crate::types::compile_source("b.rubric", &super::source(n));
            let p = c.program.unwrap_or_else(|| panic!("{n}: {:?}", c.diagnostics));
            assert_eq!(p.criteria.len(), n);
            assert!(super::Plan::compile(&p).is_ok());
        }
    }
}
