//! Judge dispatch for a chunk of rows: plan, call, and evaluate in rounds.
//!
//! A row is first evaluated with the verdicts it already has (recorded ones). The engine asks
//! for a verdict only for the judge criteria it actually reaches: a criterion behind a gate that
//! fired is never asked for, so it costs no call. The criteria asked for and not known are
//! dispatched for the whole chunk at once (the dispatcher deduplicates identical requests across
//! rows and runs them concurrently), and the rows are evaluated again with the answers. A gate
//! that reads a judged criterion can let evaluation reach further criteria in the next round, so
//! rounds repeat until no row asks for anything new (at most one round per gate, plus one).

use crate::engine::{Engine, RowResult, VerdictSource};
use crate::ir::{Program, Step};
use crate::judge::{Criterion, Dispatcher, Task};
use crate::value::Value;
use rayon::prelude::*;
use serde_json::{json, Value as Json};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// A verdict source that remembers which criteria were asked for and had no verdict.
struct Recording<'a> {
    known: &'a Vec<(String, Json)>,
    missing: RefCell<Vec<String>>,
}

impl VerdictSource for Recording<'_> {
    fn verdict(&self, id: &str) -> Option<&Json> {
        let found = self.known.verdict(id);
        if found.is_none() {
            self.missing.borrow_mut().push(id.to_string());
        }
        found
    }
}

/// The dispatcher as the runtime's [`super::ChunkJudge`], with planning counters.
pub struct Dispatching {
    pub dispatcher: Dispatcher,
    planned: std::sync::Mutex<ChunkStats>,
}

impl Dispatching {
    pub fn new(dispatcher: Dispatcher) -> Dispatching {
        Dispatching { dispatcher, planned: std::sync::Mutex::new(ChunkStats::default()) }
    }
}

impl super::ChunkJudge for Dispatching {
    fn evaluate_chunk(
        &self,
        engine: &dyn Engine,
        program: &Program,
        rows: Vec<super::JudgeRow>,
    ) -> Vec<(RowResult, super::ModelsByCriterion)> {
        let mut pending: Vec<PendingRow> = rows
            .into_iter()
            .map(|(inputs, verdicts)| PendingRow { inputs, verdicts, result: None, models: BTreeMap::new() })
            .collect();
        let s = evaluate_chunk(engine, program, &mut pending, &self.dispatcher);
        if let Ok(mut p) = self.planned.lock() {
            p.dispatched += s.dispatched;
            p.skipped += s.skipped;
            p.rounds += s.rounds;
        }
        pending.into_iter().map(|r| (r.result.unwrap_or_default(), r.models)).collect()
    }

    fn stats(&self) -> Json {
        let mut j = self.dispatcher.stats().to_json();
        if let (Some(o), Ok(p)) = (j.as_object_mut(), self.planned.lock()) {
            o.insert("criteria_dispatched".into(), json!(p.dispatched));
            o.insert("criteria_skipped_by_gates".into(), json!(p.skipped));
        }
        j
    }
}

/// One row being scored: its bound inputs, the verdicts known so far and its latest result.
pub struct PendingRow {
    pub inputs: Vec<Value>,
    pub verdicts: Vec<(String, Json)>,
    pub result: Option<RowResult>,
    /// The models that answered this row's judge calls, by criterion id.
    pub models: BTreeMap<String, Vec<String>>,
}

/// What planning saved: criteria a gate kept from being asked, counted over the chunk.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ChunkStats {
    /// Judge criteria that were asked for and dispatched.
    pub dispatched: u64,
    /// Judge criteria never asked for because a gate stopped evaluation before them.
    pub skipped: u64,
    pub rounds: u64,
}

/// The judge criterion with result id `id` (`er`, `items[3]`), with its evaluated text.
fn criterion_for(program: &Program, id: &str, result: &RowResult) -> Option<(u32, Criterion)> {
    let text = result.criterion(id).and_then(|c| c.text.clone()).unwrap_or_default();
    let decl = match id.split_once('[') {
        Some((name, _)) => program.steps.iter().find_map(|s| match s {
            Step::Each(e) if program.sets[e.set as usize].name == name => Some(&e.template),
            _ => None,
        })?,
        None => program.criteria.iter().find(|c| c.id == id)?,
    };
    let judge = match &decl.verifier {
        crate::ir::Verifier::Judge { judge } | crate::ir::Verifier::Extract { judge, .. } => *judge,
        _ => return None,
    };
    Some((judge, Criterion::for_decl(program, decl, id.to_string(), text)?))
}

/// Evaluate every row of a chunk, dispatching the judge calls they need.
pub fn evaluate_chunk(
    engine: &dyn Engine,
    program: &Program,
    rows: &mut [PendingRow],
    dispatcher: &Dispatcher,
) -> ChunkStats {
    let mut stats = ChunkStats::default();
    let gated_judge_criteria = |r: &RowResult| {
        r.criteria
            .iter()
            .filter(|c| c.source.starts_with("judge:") || c.source.starts_with("extract:"))
            .filter(|c| c.reason.as_deref().is_some_and(|x| x.starts_with("gated:")))
            .count() as u64
    };
    let max_rounds = program.steps.iter().filter(|s| matches!(s, Step::Gate(_))).count() + 2;
    let mut asked_total = 0u64;
    for _ in 0..max_rounds {
        stats.rounds += 1;
        // Evaluate in parallel, each row recording what it asked for and did not have.
        let missing: Vec<Vec<String>> = rows
            .par_iter_mut()
            .map(|row| {
                let rec = Recording { known: &row.verdicts, missing: RefCell::new(Vec::new()) };
                let result = engine.evaluate(program, &row.inputs, &rec);
                row.result = Some(result);
                let mut m = rec.missing.into_inner();
                m.sort();
                m.dedup();
                m
            })
            .collect();
        if missing.iter().all(Vec::is_empty) {
            break;
        }
        // One task per (row, judge) with every criterion the row needs from that judge.
        let mut tasks = Vec::new();
        let mut owners = Vec::new();
        for (ri, ids) in missing.iter().enumerate() {
            let Some(result) = rows[ri].result.as_ref() else { continue };
            let mut by_judge: BTreeMap<u32, Vec<Criterion>> = BTreeMap::new();
            for id in ids {
                match criterion_for(program, id, result) {
                    Some((j, c)) => by_judge.entry(j).or_default().push(c),
                    // Not a judge criterion we can ask about: settle it so the rounds end.
                    None => rows[ri]
                        .verdicts
                        .push((id.clone(), json!({"unscored": "judge_internal: not a judged criterion"}))),
                }
            }
            for (j, criteria) in by_judge {
                asked_total += criteria.len() as u64;
                if let Some(t) = Task::for_program(program, j, criteria, &rows[ri].inputs) {
                    tasks.push(t);
                    owners.push(ri);
                }
            }
        }
        let answers = dispatcher.resolve_blocking(&tasks);
        for ((ri, task), verdicts) in owners.iter().zip(&tasks).zip(answers) {
            let row = &mut rows[*ri];
            let mut answered: Vec<&str> = Vec::new();
            for v in verdicts {
                answered.push(task.criteria().iter().find(|c| c.id == v.id).map_or("", |c| c.id.as_str()));
                row.models.insert(v.id.clone(), v.models.clone());
                row.verdicts.push((v.id, v.verdict));
            }
            for c in task.criteria() {
                if !answered.contains(&c.id.as_str()) {
                    row.verdicts
                        .push((c.id.clone(), json!({"unscored": "judge_internal: no reply for this criterion"})));
                }
            }
        }
        // Ids asked again after being answered would loop: they are settled by the push above.
        for (ri, ids) in missing.iter().enumerate() {
            for id in ids {
                if rows[ri].verdicts.verdict(id).is_none() {
                    rows[ri].verdicts.push((id.clone(), json!({"unscored": "judge_internal: no reply"})));
                }
            }
        }
    }
    stats.dispatched = asked_total;
    stats.skipped = rows.iter().filter_map(|r| r.result.as_ref()).map(gated_judge_criteria).sum();
    stats
}
