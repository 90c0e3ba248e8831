//! The batch numeric stage on a tensor backend (the `models` feature; `rubric run --numeric
//! tensor`, `rubric bench-numeric`): for a chunk of evaluated rows, the arithmetic over their
//! criterion results — scores, aggregations, group trees, and for `--groups` the rewards,
//! group-relative advantages, group statistics and token credit — as candle tensor operations
//! on the process's device (`models::device()`: the CPU, or CUDA).
//!
//! Pipeline position: after the engines. An engine evaluates each row (its gates and
//! criteria, and its score on the scalar path); then, per chunk, [`TensorStage`] (a
//! `runtime::ChunkNumeric`) builds the rows × criteria matrix and recomputes the scores and
//! group trees, and `runtime::groups` hands it complete groups to annotate.
//!
//! - `matrix`: the layout. Rows × columns, one column per static criterion and, per `each`
//!   block, as many columns as the most instances a row of the chunk has; cells are status
//!   masks (met, unmet, unscored, skipped) with a validity mask for the padding, and the
//!   value, weight and points.
//! - `plan`: which score expressions have a plan (aggregations, constants, arithmetic,
//!   comparisons, logic, `if`, `abs`/`floor`/`ceil`/`min`/`max`/`clip`, criterion fields);
//!   the rest stays on the scalar path.
//! - `eval`: every aggregation and unscored policy as masked reductions, trees member by
//!   member, and every plan node with the scalar path's rules for unscored values and traps.
//! - `rl`: advantages (all forms, clip, the three unscored policies), statistics, strict
//!   flags, saturation, per-criterion advantages and token credit.
//!
//! **Exactness.** The scalar path (the engine's `RowResult`, `runtime::groups`) is the oracle.
//! On the CPU the stage computes in `f64`, and every sum adds the same numbers in the same
//! order from +0.0 as the scalar path (candle's CPU reductions add left to right; cells left out
//! are selected away, never multiplied by 0), so its results are bit for bit the scalar ones and
//! `rubric run --numeric tensor` writes byte-identical records (tests: `numeric::tests`,
//! `tests/numeric.rs`). The one documented difference is the sign of a zero where Rust's float
//! `sum` starts from −0.0 (a sum of nothing but −0.0): no record can show it (`0` is written for
//! both) and no operation of a plan tells them apart except in a trap message's quoted number.
//!
//! **On CUDA** reductions run in a different order (tree reductions, f64 throughout), so sums
//! may differ in the last bits: results agree within [`CUDA_TOLERANCE`] relative to the larger
//! magnitude (at least 1), statuses, counts and flags exactly — except for a decision on a sum
//! that cancels to exactly zero in one order and not in the other (weights summing to 0, say),
//! which no rubric meets in practice. `tests/gpu.rs` checks this on a GPU.

pub mod eval;
pub mod matrix;
pub mod plan;
pub mod rl;

use crate::engine::{RowResult, TrapInfo};
use crate::interp::ops::trap_reason;
use crate::interp::Root;
use crate::ir::{Program, RewardDecl};
use crate::runtime::groups::PendingGroup;
use crate::runtime::ChunkNumeric;
use candle_core::Device;
use eval::Outcome;
use matrix::{Entry, HostMatrix};
use plan::Plan;

/// How far a CUDA result may be from the CPU's: `|a − b| ≤ CUDA_TOLERANCE × max(1, |a|, |b|)`.
pub const CUDA_TOLERANCE: f64 = 1e-9;

/// Whether `a` and `b` agree within [`CUDA_TOLERANCE`].
pub fn within_tolerance(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= CUDA_TOLERANCE * 1f64.max(a.abs()).max(b.abs())
}

/// The numeric stage of one rubric on one device.
pub struct TensorStage {
    plan: Plan,
    device: Device,
}

impl TensorStage {
    /// The stage for `program` on `device`, or why its score has no plan.
    pub fn new(program: &Program, device: Device) -> Result<TensorStage, String> {
        Ok(TensorStage { plan: Plan::compile(program)?, device })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The chunk's scores and group trees, computed on the device (nothing is changed).
    pub fn compute(&self, program: &Program, results: &[RowResult]) -> Result<ChunkNumbers, String> {
        let rows: Vec<Vec<Entry<'_>>> =
            results.iter().map(|r| r.criteria.iter().map(Entry::of_result).collect()).collect();
        let m = HostMatrix::build(program, &rows)?;
        let scores = eval::evaluate(&self.plan, program, &m, &self.device).map_err(|e| e.to_string())?;
        let outcomes = (0..results.len())
            .map(|i| results[i].score_evaluated.then(|| scores.outcome(program, &m, i, &results[i].criteria)))
            .collect();
        let groups = (0..results.len()).map(|i| scores.groups.iter().map(|g| g[i]).collect()).collect();
        Ok(ChunkNumbers { outcomes, groups })
    }
}

/// What the stage computed for a chunk: per row, the score expression's outcome (for the rows
/// whose score came from it) and the group trees.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkNumbers {
    pub outcomes: Vec<Option<Outcome>>,
    pub groups: Vec<Vec<Option<f64>>>,
}

impl ChunkNumbers {
    /// Write the numbers into the results as the step driver does (caps that fired bound the
    /// score; a rubric's reward without a penalty is its score).
    pub fn apply(&self, program: &Program, results: &mut [RowResult]) {
        for (i, r) in results.iter_mut().enumerate() {
            if let Some(Some(outcome)) = self.outcomes.get(i) {
                apply_score(program, r, outcome);
            }
            if let Some(trees) = self.groups.get(i) {
                if r.groups.len() == trees.len() {
                    for (slot, v) in r.groups.iter_mut().zip(trees) {
                        slot.1 = *v;
                    }
                }
            }
        }
    }
}

fn apply_score(p: &Program, r: &mut RowResult, outcome: &Outcome) {
    r.score = None;
    r.unscored_reason = None;
    r.trap = None;
    match outcome {
        Outcome::Value(n) if n.is_finite() => {
            let caps = r.gates.iter().filter(|g| g.action == "cap" && g.passed == Some(false)).filter_map(|g| g.value);
            r.score = Some(caps.fold(*n, f64::min));
        }
        Outcome::Value(n) => r.unscored_reason = Some(format!("the score is not finite ({n})")),
        Outcome::Unscored(why) => r.unscored_reason = Some(why.clone()),
        Outcome::Trap(t) => {
            let site = Root::Score.site(p);
            r.trap = Some(TrapInfo { code: t.kind.code(), message: t.message.clone(), site: p.known_site(site) });
            r.unscored_reason = Some(trap_reason(t));
        }
    }
    if let Some(rw) = &p.reward {
        // With a penalty the reward stays the scalar path's: the penalty reads inputs.
        if rw.penalty.is_none() {
            r.reward = Some(r.score);
        }
    }
}

impl ChunkNumeric for TensorStage {
    fn finish_chunk(&self, program: &Program, results: &mut [RowResult]) -> Result<(), String> {
        let numbers = self.compute(program, results)?;
        numbers.apply(program, results);
        Ok(())
    }

    fn annotate_groups(&self, program: &Program, decl: &RewardDecl, groups: &mut [PendingGroup]) -> Result<(), String> {
        rl::annotate_groups(program, decl, groups, &self.device)
    }
}

#[cfg(test)]
mod tests;
