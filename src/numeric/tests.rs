//! The tensor numeric stage against its oracle, the scalar path, on the CPU: every aggregation
//! with every policy over random matrices (`interp::aggregate`), whole score plans
//! (`interp::eval_decided`), group advantages (`runtime::groups::advantages`, and the figures
//! its unit tests check by hand) and group annotation with token credit
//! (`runtime::groups::annotate_scalar`). Results must be identical, bit for bit.

use super::eval::{evaluate, Outcome};
use super::matrix::{Entry, HostMatrix};
use super::plan::{Node, Plan};
use super::rl;
use crate::engine::{CriterionResult, Status};
use crate::interp::{aggregate, eval_decided, Decided};
use crate::ir::{
    AdvantageForm, AggOp, Member, Policy, Program, RewardDecl, RewardUnscored, SetDecl, SetKind, Step, Uncovered,
};
use crate::runtime::groups::{advantages, annotate_scalar, default_reward, PendingGroup};
use crate::stdlib::Trap;
use crate::value::Value;
use candle_core::Device;
use proptest::prelude::*;
use serde_json::{json, Value as Json};

const RUBRIC: &str = r#"rubric numeric.oracle @ 1.0.0
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
  group right weight 0.5 {
    criterion f "F"
  }
  criterion h "H" weight 0.25
}
tier empty_tier by g { }
"#;

/// The oracle rubric with `score`; two extra sets exercise what the syntax cannot write: a
/// group holding an `each` block (`mixed`) and a set of nothing (`nothing`).
fn program(score: &str) -> Program {
    let src = format!("{RUBRIC}score = {score}\n");
    let c = crate::types::compile_source("oracle.rubric", &src);
    assert!(!c.has_errors(), "{src}\n{:?}", c.diagnostics);
    let mut p = c.program.unwrap();
    let each = p.steps.iter().position(|s| matches!(s, Step::Each(_))).unwrap() as u32;
    let left = p.set_index("left").unwrap() as u32;
    let a = p.criteria.iter().position(|c| c.id == "a").unwrap() as u32;
    p.sets.push(SetDecl {
        name: "mixed".into(),
        kind: SetKind::Group,
        weight: Some(1.5),
        members: vec![Member::Criterion(a), Member::Each(each), Member::Set(left)],
    });
    p.sets.push(SetDecl { name: "nothing".into(), kind: SetKind::Group, weight: None, members: vec![] });
    p
}

/// One criterion's random result: status, value, weight, points, reason.
type Cell = (u8, f64, f64, Option<f64>, bool);

fn cell() -> impl Strategy<Value = Cell> {
    let status = prop_oneof![4 => Just(0u8), 4 => Just(1u8), 2 => Just(2u8), 1 => Just(3u8)];
    let value = prop_oneof![Just(0.0), Just(1.0), Just(0.5), (0.0f64..=1.0)];
    let weight = prop_oneof![4 => Just(1.0), 1 => Just(0.0), 1 => Just(2.5), 1 => Just(-1.0), 1 => 0.0f64..10.0];
    let points =
        prop_oneof![Just(None), Just(Some(3.0)), Just(Some(-2.0)), Just(Some(0.0)), (0.1f64..5.0).prop_map(Some)];
    (status, value, weight, points, any::<bool>())
}

/// A row: one cell per static criterion (7), and 0 to 4 `each` instances.
fn row() -> impl Strategy<Value = (Vec<Cell>, Vec<Cell>)> {
    (prop::collection::vec(cell(), 7), prop::collection::vec(cell(), 0..5))
}

fn result(id: String, c: &Cell) -> CriterionResult {
    let (status, value, weight, points, has_reason) = *c;
    let status = [Status::Met, Status::Unmet, Status::Unscored, Status::Skipped][status as usize];
    let scored = matches!(status, Status::Met | Status::Unmet);
    CriterionResult {
        id: id.into(),
        text: None,
        kind: "binary",
        status,
        reason: has_reason.then(|| "judge_timeout".to_string()),
        value: scored.then_some(value),
        judged: None,
        points,
        weight,
        axis: None,
        tags: vec![],
        source: "judge:g".into(),
        step: None,
        sets: Default::default(),
    }
}

/// A row's decided criteria and its criteria list in step order (a `RowResult`'s `criteria`).
fn decide(p: &Program, (statics, each): &(Vec<Cell>, Vec<Cell>)) -> (Decided, Vec<CriterionResult>) {
    let mut d = Decided::new(p);
    let mut list = Vec::new();
    for (si, step) in p.steps.iter().enumerate() {
        match step {
            Step::Criterion(c) => {
                let r = result(p.criteria[*c as usize].id.clone(), &statics[*c as usize % statics.len()]);
                d.set_criterion(*c, r.clone());
                list.push(r);
            }
            Step::Each(_) => {
                let rs: Vec<CriterionResult> =
                    each.iter().enumerate().map(|(i, c)| result(format!("item[{i}]"), c)).collect();
                d.set_each(si as u32, rs.clone());
                list.extend(rs);
            }
            Step::Gate(_) => {}
        }
    }
    (d, list)
}

fn same(scalar: &Result<Value, Trap>, tensor: &Outcome) -> bool {
    super::eval::agrees(scalar, tensor)
}

fn tensor_outcomes(p: &Program, plan: &Plan, rows: &[(Decided, Vec<CriterionResult>)]) -> Vec<Outcome> {
    let entries: Vec<Vec<Entry<'_>>> = rows.iter().map(|(_, l)| l.iter().map(Entry::of_result).collect()).collect();
    let m = HostMatrix::build(p, &entries).unwrap();
    let scores = evaluate(plan, p, &m, &Device::Cpu).unwrap();
    rows.iter().enumerate().map(|(i, (_, l))| scores.outcome(p, &m, i, l)).collect()
}

fn check_aggregations(p: &Program, rows: &[(Decided, Vec<CriterionResult>)], k: f64) -> Result<(), TestCaseError> {
    for (set, decl) in p.sets.iter().enumerate() {
        let set = set as u32;
        for &op in AggOp::ALL {
            if op == AggOp::Tree && decl.kind != SetKind::Group {
                continue;
            }
            for policy in [Policy::Propagate, Policy::Skip, Policy::Unmet] {
                let args = if op == AggOp::AtLeast { vec![Value::Number(k)] } else { vec![] };
                let plan = Plan { score: Node::Agg { op, set, policy, k }, groups: vec![] };
                let got = tensor_outcomes(p, &plan, rows);
                for (i, (d, _)) in rows.iter().enumerate() {
                    let want = aggregate(p, d, op, set, policy, &args);
                    prop_assert!(
                        same(&want, &got[i]),
                        "{}({}, unscored: {policy:?}) row {i}: scalar {want:?}, tensor {:?}",
                        op.name(),
                        decl.name,
                        got[i]
                    );
                }
            }
        }
    }
    Ok(())
}

/// Score expressions made of every planned form.
const SCORES: &[&str] = &[
    "weighted_mean(all)",
    "clip(points_ratio(all, unscored: skip), 0, 1)",
    "0.5 * points_ratio(item) + 0.5 * fraction(core, unscored: unmet)",
    "if all(core) then 0.5 + 0.5 * fraction(root) else 0.25 * fraction(core, unscored: skip)",
    "tree(root, unscored: skip) - min(a.value, max(e.value, 0.2)) / count(item)",
    "if a.met and not b.unscored or at_least(all, 3, unscored: unmet) then abs(sum_points(all) - max_points(core)) else floor(mean(all, unscored: skip) * 10) / ceil(c.weight + 0.5)",
    "if 0 < min_value(core, unscored: skip) <= max_value(all, unscored: unmet) then tree(root, unscored: unmet) else -count_met(all) / (count_met(core) - 1)",
    "if any(core) == all(root, unscored: skip) then d.points + h.weight else e.points / a.points",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn every_aggregation_and_policy_equals_the_scalar_path(rows in prop::collection::vec(row(), 1..12), k in prop_oneof![Just(0.0), Just(1.0), Just(2.0), Just(3.5), Just(-1.0)]) {
        let p = program("weighted_mean(all)");
        let rows: Vec<_> = rows.iter().map(|r| decide(&p, r)).collect();
        check_aggregations(&p, &rows, k)?;
    }

    #[test]
    fn score_plans_equal_the_scalar_path(rows in prop::collection::vec(row(), 1..12)) {
        for score in SCORES {
            let p = program(score);
            let plan = Plan::compile(&p).unwrap();
            let rows: Vec<_> = rows.iter().map(|r| decide(&p, r)).collect();
            let got = tensor_outcomes(&p, &plan, &rows);
            for (i, (d, _)) in rows.iter().enumerate() {
                let want = eval_decided(&p, d, &p.score);
                prop_assert!(same(&want, &got[i]), "`{score}` row {i}: scalar {want:?}, tensor {:?}", got[i]);
            }
        }
    }

    #[test]
    fn group_advantages_equal_the_scalar_path(
        groups in prop::collection::vec(prop::collection::vec(prop_oneof![4 => (-2.0f64..3.0).prop_map(Some), 1 => Just(Some(0.5)), 1 => Just(Some(1.0)), 1 => Just(None)], 1..9), 1..8),
        form in 0usize..4, unscored in 0usize..3, clip in any::<bool>(), std in 0usize..2,
    ) {
        let decl = RewardDecl {
            advantage: AdvantageForm::ALL[form].1,
            unscored: RewardUnscored::ALL[unscored].1,
            clip: clip.then_some((-0.75, 0.75)),
            std: crate::ir::StdForm::ALL[std].1,
            ..default_reward()
        };
        let got = rl::advantages(&decl, &groups, &Device::Cpu).unwrap();
        for (g, (adv, stats)) in groups.iter().zip(&got) {
            let (want, want_stats) = advantages(&decl, g);
            prop_assert_eq!(stats, &want_stats);
            prop_assert_eq!(adv.len(), want.len());
            for (a, b) in adv.iter().zip(&want) {
                prop_assert!(a.map(f64::to_bits) == b.map(f64::to_bits), "{decl:?} {g:?}: {adv:?} vs {want:?}");
            }
        }
    }

    #[test]
    fn group_annotation_and_token_credit_equal_the_scalar_path(
        groups in prop::collection::vec(prop::collection::vec(member(), 1..7), 1..6),
        form in 0usize..4, unscored in 0usize..3, uncovered_row in any::<bool>(),
    ) {
        let p = program("fraction(all)");
        let decl = RewardDecl {
            advantage: AdvantageForm::ALL[form].1,
            unscored: RewardUnscored::ALL[unscored].1,
            uncovered: if uncovered_row { Uncovered::Row } else { Uncovered::Zero },
            ..default_reward()
        };
        let mut pending: Vec<PendingGroup> = groups.iter().map(|g| pending_group(&p, g)).collect();
        let mut scalar = pending.clone();
        for g in &mut scalar {
            annotate_scalar(&p, &decl, g);
        }
        rl::annotate_groups(&p, &decl, &mut pending, &Device::Cpu).unwrap();
        for (a, b) in pending.iter().zip(&scalar) {
            for (x, y) in a.members.iter().zip(&b.members) {
                prop_assert_eq!(x.to_string(), y.to_string());
            }
        }
    }
}

/// A random group member: its row's criteria, score, whether it is an error record, and its
/// response words with the words each judged criterion quotes.
type MemberSpec = (Vec<Cell>, Vec<Cell>, Option<f64>, bool, Vec<usize>, Vec<Option<(usize, usize)>>, u8);

fn member() -> impl Strategy<Value = MemberSpec> {
    (
        prop::collection::vec(cell(), 7),
        prop::collection::vec(cell(), 0..4),
        prop_oneof![3 => (0.0f64..1.0).prop_map(Some), 1 => Just(None)],
        prop::bool::weighted(0.1),
        prop::collection::vec(0usize..6, 3..12),
        prop::collection::vec(prop_oneof![Just(None), (0usize..12, 1usize..4).prop_map(Some)], 11),
        0u8..3,
    )
}

const WORDS: [&str; 6] = ["call", "911", "now", "rest", "é", "[1]"];

/// A group of records as `rubric run` writes them, with the token offsets of each row.
fn pending_group(p: &Program, members: &[MemberSpec]) -> PendingGroup {
    let mut g = PendingGroup::default();
    for (statics, each, score, error, words, quotes, tokens) in members {
        if *error {
            g.members.push(json!({"row": 0, "error": {"code": "rubric::row::missing_input", "message": "x"}}));
            g.tokens.push(None);
            continue;
        }
        let words: Vec<&str> = words.iter().map(|w| WORDS[*w]).collect();
        let response = words.join(" ");
        let (_, list) = decide(p, &(statics.clone(), each.clone()));
        let criteria: Vec<Json> = list
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut j = c.to_json();
                if let Some(Some((start, len))) = quotes.get(i) {
                    if c.status == Status::Met && *start < words.len() {
                        let end = (*start + *len).min(words.len());
                        j["evidence"] = json!(words[*start..end].join(" "));
                    }
                }
                j
            })
            .collect();
        g.members.push(json!({"row": 0, "score": score, "criteria": criteria}));
        // Tokens: every word, or a malformed list, or none.
        let mut offsets = Vec::new();
        let mut at = 0;
        for w in &words {
            let n = w.chars().count();
            offsets.push((at, at + n));
            at += n + 1;
        }
        g.tokens.push(match tokens {
            0 => Some(Ok((response, offsets))),
            1 => Some(Err("`token_offsets` must be a list of [start, end] character offsets".into())),
            _ => None,
        });
    }
    g
}

/// The tensor advantages of `groups` equal the scalar path's bit for bit; returns them.
fn tensor_advantages(
    decl: &RewardDecl,
    groups: &[Vec<Option<f64>>],
) -> Vec<(Vec<Option<f64>>, crate::runtime::groups::GroupStats)> {
    let got = rl::advantages(decl, groups, &Device::Cpu).unwrap();
    for (g, (a, s)) in groups.iter().zip(&got) {
        let (want, want_stats) = advantages(decl, g);
        assert_eq!(
            a.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>(),
            want.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>()
        );
        assert_eq!(s, &want_stats);
    }
    got
}

fn close(a: &[Option<f64>], b: &[Option<f64>]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Some(x), Some(y)) => assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}"),
            (None, None) => {}
            _ => panic!("{a:?} vs {b:?}"),
        }
    }
}

#[test]
fn hand_computed_group_figures() {
    // The figures runtime::groups checks by hand: rewards 1, 0, 0.5, 0.5.
    let r = vec![vec![Some(1.0), Some(0.0), Some(0.5), Some(0.5)]];
    let decl = |form| RewardDecl { advantage: form, ..default_reward() };
    let sd = (1.0f64 / 6.0).sqrt();
    let (a, s) = &tensor_advantages(&decl(AdvantageForm::Zscore), &r)[0];
    close(a, &[Some(0.5 / (sd + 1e-6)), Some(-0.5 / (sd + 1e-6)), Some(0.0), Some(0.0)]);
    assert_eq!((s.n, s.mean), (4, Some(0.5)));
    assert!((s.std.unwrap() - sd).abs() < 1e-12);
    close(&tensor_advantages(&decl(AdvantageForm::Mean), &r)[0].0, &[Some(0.5), Some(-0.5), Some(0.0), Some(0.0)]);
    close(&tensor_advantages(&decl(AdvantageForm::Rank), &r)[0].0, &[Some(1.0), Some(-1.0), Some(0.0), Some(0.0)]);
    close(
        &tensor_advantages(&decl(AdvantageForm::LeaveOneOut), &r)[0].0,
        &[Some(1.0 - 1.0 / 3.0), Some(-2.0 / 3.0), Some(0.0), Some(0.0)],
    );
    // Unscored rows: excluded, zeroed, or flagging the group.
    let r = vec![vec![Some(1.0), None, Some(0.0)]];
    let mut d = decl(AdvantageForm::Mean);
    close(&tensor_advantages(&d, &r)[0].0, &[Some(0.5), None, Some(-0.5)]);
    d.unscored = RewardUnscored::Zero;
    close(&tensor_advantages(&d, &r)[0].0, &[Some(2.0 / 3.0), Some(-1.0 / 3.0), Some(-1.0 / 3.0)]);
    d.unscored = RewardUnscored::FlagGroup;
    let (a, s) = &tensor_advantages(&d, &r)[0];
    assert_eq!((a.clone(), s.flagged), (vec![None, None, None], true));
    // Clip and single-member groups.
    let mut d = decl(AdvantageForm::Zscore);
    d.clip = Some((-0.5, 0.5));
    close(&tensor_advantages(&d, &[vec![Some(1.0), Some(0.0)]])[0].0, &[Some(0.5), Some(-0.5)]);
    for form in [AdvantageForm::Zscore, AdvantageForm::Rank, AdvantageForm::LeaveOneOut] {
        close(&tensor_advantages(&decl(form), &[vec![Some(0.7)]])[0].0, &[Some(0.0)]);
    }
}

#[test]
fn the_empty_set_and_a_group_of_nothing_follow_the_empty_set_rules() {
    let p = program("weighted_mean(all)");
    let rows = vec![decide(&p, &(vec![(0, 1.0, 1.0, None, false); 7], vec![]))];
    check_aggregations(&p, &rows, 0.0).unwrap();
    let empty_tier = p.set_index("empty_tier").unwrap() as u32;
    let plan = Plan {
        score: Node::Agg { op: AggOp::MaxPoints, set: empty_tier, policy: Policy::Propagate, k: f64::NAN },
        groups: vec![],
    };
    match &tensor_outcomes(&p, &plan, &rows)[0] {
        Outcome::Value(v) => assert!(*v == 0.0 && v.is_sign_negative(), "Rust's empty float sum is -0.0, got {v:?}"),
        other => panic!("{other:?}"),
    }
}
