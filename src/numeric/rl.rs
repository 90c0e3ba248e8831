//! Group-relative advantages, group statistics, strict completion, saturation, per-criterion
//! advantages and token credit (docs/rl.md) as tensor operations over a batch of complete
//! groups: the tensor half of `runtime::groups` and `runtime::credit`. Part of the tensor
//! numeric stage (`numeric`).
//!
//! Layout: `G` groups of at most `S` scored members become a `[G, S]` grid (padding slots
//! masked), and their criterion results a `[G·S, C]` matrix (`matrix`). Group sums run over a
//! group's members in row order (on the CPU, from +0.0, as the scalar path adds them), ranks
//! compare every pair of members (`[G, S, S]`), and token credit tests every token against every
//! span of every criterion of its row (`[M, T, K, P]`, in sub-batches) and adds the covering
//! criteria's advantages in criterion order. What is text — finding spans in a response,
//! character offsets, ids — stays on the host.

use super::matrix::{as_f64, DeviceMatrix, Entry, HostMatrix};
use crate::ir::{AdvantageForm, Program, RewardDecl, RewardUnscored, StdForm, Uncovered};
use crate::runtime::credit::{char_offsets, spans, Spans};
use crate::runtime::groups::{
    reward_of, scored_members, write_figures, write_token_credit, GroupFigures, GroupStats, PendingGroup,
};
use candle_core::{DType, Device, Result, Tensor};
use serde_json::{json, Value as Json};

/// Each member's advantage (`None`: left out) and the group statistics, for groups of
/// rewards: the tensor form of `runtime::groups::advantages`, for many groups at once.
pub fn advantages(
    decl: &RewardDecl,
    groups: &[Vec<Option<f64>>],
    dev: &Device,
) -> Result<Vec<(Vec<Option<f64>>, GroupStats)>> {
    let g = groups.len();
    let s = groups.iter().map(Vec::len).max().unwrap_or(0).max(1);
    if g == 0 {
        return Ok(Vec::new());
    }
    let mut r = vec![0.0; g * s];
    let mut has = vec![0u8; g * s];
    let mut valid = vec![0u8; g * s];
    for (i, members) in groups.iter().enumerate() {
        for (j, x) in members.iter().enumerate() {
            valid[i * s + j] = 1;
            if let Some(x) = x {
                r[i * s + j] = *x;
                has[i * s + j] = 1;
            }
        }
    }
    let r = Tensor::from_vec(r, (g, s), dev)?;
    let has = Tensor::from_vec(has, (g, s), dev)?;
    let valid = Tensor::from_vec(valid, (g, s), dev)?;
    let out = advantages_on(decl, &r, &has, &valid)?;
    let adv = out.advantage.to_vec2::<f64>()?;
    let counted = out.counted.to_vec2::<u8>()?;
    let n = out.n.to_vec1::<f64>()?;
    let mean = out.mean.to_vec1::<f64>()?;
    let std = out.std.to_vec1::<f64>()?;
    let flagged = out.flagged.to_vec1::<u8>()?;
    Ok(groups
        .iter()
        .enumerate()
        .map(|(i, members)| {
            let live = flagged[i] == 0 && n[i] > 0.0;
            let a = (0..members.len()).map(|j| (live && counted[i][j] == 1).then_some(adv[i][j])).collect();
            let has_mean = n[i] > 0.0;
            let stats = GroupStats {
                n: n[i] as usize,
                mean: has_mean.then_some(mean[i]),
                std: has_mean.then_some(std[i]),
                flagged: flagged[i] == 1,
            };
            (a, stats)
        })
        .collect())
}

/// Advantages of a `[G, S]` grid of rewards on the device.
struct GroupAdvantages {
    /// `[G, S]`, meaningful where `counted`, in live groups.
    advantage: Tensor,
    /// `[G, S]` u8: the member's reward entered the statistics.
    counted: Tensor,
    n: Tensor,
    mean: Tensor,
    std: Tensor,
    flagged: Tensor,
}

fn advantages_on(decl: &RewardDecl, r: &Tensor, has: &Tensor, valid: &Tensor) -> Result<GroupAdvantages> {
    let (g, s) = r.dims2()?;
    let dev = r.device();
    let zeros = r.zeros_like()?;
    let (r, counted) = match decl.unscored {
        RewardUnscored::Zero => (has.where_cond(r, &zeros)?, valid.clone()),
        _ => (r.clone(), has.clone()),
    };
    let missing = valid.mul(&has.eq(0u8)?)?;
    let flagged = if decl.unscored == RewardUnscored::FlagGroup {
        as_f64(&missing)?.sum(1)?.gt(0.0)?
    } else {
        Tensor::zeros(g, DType::U8, dev)?
    };
    let c = as_f64(&counted)?;
    let n = c.sum(1)?;
    let sum = counted.where_cond(&r, &zeros)?.sum(1)?;
    let mean = sum.div(&n)?;
    let full = |x: f64| Tensor::full(x, g, dev);
    let col = |t: &Tensor| t.unsqueeze(1)?.broadcast_as((g, s))?.contiguous();
    let d = counted.where_cond(&r.sub(&col(&mean)?)?, &zeros)?;
    let ss = d.mul(&d)?.sum(1)?;
    let n_minus_1 = n.affine(1.0, -1.0)?;
    let few = n.lt(2.0)?;
    let divisor = match decl.std {
        StdForm::Sample => n_minus_1.clone(),
        StdForm::Population => n.clone(),
    };
    let std = few.where_cond(&full(0.0)?, &ss.div(&divisor)?.sqrt()?)?;
    let few_b = col(&as_f64(&few)?)?.ne(0.0)?;
    let advantage = match decl.advantage {
        AdvantageForm::Zscore => r.sub(&col(&mean)?)?.div(&col(&std.affine(1.0, decl.epsilon)?)?)?,
        AdvantageForm::Mean => r.sub(&col(&mean)?)?,
        AdvantageForm::LeaveOneOut => {
            let others = col(&sum)?.sub(&r)?.div(&col(&n_minus_1)?)?;
            few_b.where_cond(&zeros, &r.sub(&others)?)?
        }
        AdvantageForm::Rank => {
            // 1-based rank; ties share the mean of the ranks they span.
            let mine = r.unsqueeze(2)?.broadcast_as((g, s, s))?;
            let theirs = r.unsqueeze(1)?.broadcast_as((g, s, s))?;
            let other_counted = as_f64(&counted.unsqueeze(1)?.broadcast_as((g, s, s))?.contiguous()?)?;
            let below = as_f64(&theirs.lt(&mine)?)?.mul(&other_counted)?.sum(2)?;
            let equal = as_f64(&theirs.eq(&mine)?)?.mul(&other_counted)?.sum(2)?;
            let rank = below.add(&equal.affine(1.0, 1.0)?.affine(0.5, 0.0)?)?;
            let mid = n.affine(1.0, 1.0)?.affine(0.5, 0.0)?;
            let half_span = n_minus_1.affine(0.5, 0.0)?;
            let a = rank.sub(&col(&mid)?)?.div(&col(&half_span)?)?;
            few_b.where_cond(&zeros, &a)?
        }
    };
    let advantage = match decl.clip {
        Some((lo, hi)) => {
            let lo_t = Tensor::full(lo, (g, s), dev)?;
            let hi_t = Tensor::full(hi, (g, s), dev)?;
            let a = advantage.lt(&lo_t)?.where_cond(&lo_t, &advantage)?;
            a.gt(&hi_t)?.where_cond(&hi_t, &a)?
        }
        None => advantage,
    };
    Ok(GroupAdvantages { advantage, counted, n, mean, std, flagged })
}

/// Per member (a row of the matrix) and criterion (a column): the criterion's advantage
/// within the member's group (docs/rl.md), and whether it has one (the criterion is decided).
/// Rows are `groups` runs of `rows_per_group` members (the grid's `S`).
pub fn criterion_advantages(m: &DeviceMatrix, groups: usize, rows_per_group: usize) -> Result<(Tensor, Tensor)> {
    let (rows, cols) = (m.rows, m.cols);
    let zeros = m.value.zeros_like()?;
    let ones = m.value.ones_like()?;
    let decided = m.met.maximum(&m.unmet)?;
    let met_value = m.has_value.where_cond(&m.value, &ones)?;
    let v = m.met.where_cond(&met_value, &zeros)?;
    let grid = |t: &Tensor| t.reshape((groups, rows_per_group, cols));
    // Sums over the members of a group, in member order.
    let sums = grid(&decided.where_cond(&v, &zeros)?)?.sum_keepdim(1)?;
    let counts = grid(&as_f64(&decided)?)?.sum_keepdim(1)?;
    let mean = sums.div(&counts)?.broadcast_as((groups, rows_per_group, cols))?.reshape((rows, cols))?;
    let total = m.valid.where_cond(&m.weight, &zeros)?.sum_keepdim(1)?.broadcast_as((rows, cols))?.contiguous()?;
    let share = total.gt(0.0)?.where_cond(&m.weight.div(&total)?, &zeros)?;
    let sign = m.points.lt(0.0)?.where_cond(&ones.neg()?, &ones)?;
    let a = sign.mul(&v.sub(&mean)?)?.mul(&share)?;
    Ok((a, decided))
}

/// One member's token-credit input: its row in the matrix, its tokens (character offsets),
/// and per criterion with spans (in criterion order) its column and spans (character offsets).
struct CreditRow {
    row: usize,
    tokens: Vec<(usize, usize)>,
    spans: Vec<(usize, Vec<(usize, usize)>)>,
    uncovered: f64,
}

/// The most elements a token-credit overlap tensor may hold at once.
const CREDIT_BATCH: usize = 1 << 22;

/// Token credit of each row: per token, the sum of the advantages of the decided criteria with
/// a span overlapping it, in criterion order, or the row's `uncovered` credit.
fn token_credit(rows: &[CreditRow], a: &Tensor, decided: &Tensor, dev: &Device) -> Result<Vec<Vec<f64>>> {
    token_credit_within(rows, a, decided, dev, CREDIT_BATCH)
}

/// [`token_credit`] with overlap tensors of at most `budget` elements (but one token's).
fn token_credit_within(
    rows: &[CreditRow],
    a: &Tensor,
    decided: &Tensor,
    dev: &Device,
    budget: usize,
) -> Result<Vec<Vec<f64>>> {
    let cols = a.dim(1)?;
    let flat_a = a.flatten_all()?;
    let flat_decided = decided.flatten_all()?;
    // Tokens are independent: a long row is split into runs of tokens whose overlap tensor
    // stays under the budget.
    let mut pieces: Vec<(usize, Piece<'_>)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let per = budget / (r.spans.len().max(1) * r.spans.iter().map(|s| s.1.len()).max().unwrap_or(1).max(1));
        if r.tokens.is_empty() {
            pieces.push((i, Piece { row: r, tokens: &[] }));
        }
        for run in r.tokens.chunks(per.max(1)) {
            pieces.push((i, Piece { row: r, tokens: run }));
        }
    }
    let mut out = vec![Vec::new(); rows.len()];
    let mut start = 0;
    while start < pieces.len() {
        // Grow the sub-batch while its overlap tensor stays under the budget.
        let mut end = start;
        let (mut t, mut k, mut p) = (1, 1, 1);
        while end < pieces.len() {
            let r = &pieces[end].1;
            let (t2, k2) = (t.max(r.tokens.len()), k.max(r.row.spans.len()));
            let p2 = p.max(r.row.spans.iter().map(|s| s.1.len()).max().unwrap_or(1));
            if end > start && (end + 1 - start) * t2 * k2 * p2 > budget {
                break;
            }
            (t, k, p) = (t2, k2, p2);
            end += 1;
        }
        let batch: Vec<&Piece<'_>> = pieces[start..end].iter().map(|(_, piece)| piece).collect();
        let credits = credit_batch(&batch, (t, k, p), &flat_a, &flat_decided, cols, dev)?;
        for ((i, _), c) in pieces[start..end].iter().zip(credits) {
            out[*i].extend(c);
        }
        start = end;
    }
    Ok(out)
}

/// Some consecutive tokens of a row.
struct Piece<'r> {
    row: &'r CreditRow,
    tokens: &'r [(usize, usize)],
}

fn credit_batch(
    rows: &[&Piece<'_>],
    (t, k, p): (usize, usize, usize),
    flat_a: &Tensor,
    flat_decided: &Tensor,
    cols: usize,
    dev: &Device,
) -> Result<Vec<Vec<f64>>> {
    let m = rows.len();
    let mut tok = vec![0.0; m * t * 2];
    let mut span = vec![0.0; m * k * p * 2];
    let mut span_valid = vec![0u8; m * k * p];
    let mut cell = vec![0u32; m * k];
    let mut crit_valid = vec![0u8; m * k];
    let mut uncovered = vec![0.0; m];
    for (i, piece) in rows.iter().enumerate() {
        let r = piece.row;
        uncovered[i] = r.uncovered;
        for (j, (s, e)) in piece.tokens.iter().enumerate() {
            tok[(i * t + j) * 2] = *s as f64;
            tok[(i * t + j) * 2 + 1] = *e as f64;
        }
        for (c, (col, ss)) in r.spans.iter().enumerate() {
            cell[i * k + c] = (r.row * cols + col) as u32;
            crit_valid[i * k + c] = 1;
            for (q, (s, e)) in ss.iter().enumerate() {
                let at = (i * k + c) * p + q;
                span[at * 2] = *s as f64;
                span[at * 2 + 1] = *e as f64;
                span_valid[at] = 1;
            }
        }
    }
    let tok = Tensor::from_vec(tok, (m, t, 1, 1, 2), dev)?;
    let span = Tensor::from_vec(span, (m, 1, k, p, 2), dev)?;
    let shape = (m, t, k, p);
    let ts = tok.narrow(4, 0, 1)?.squeeze(4)?.broadcast_as(shape)?;
    let te = tok.narrow(4, 1, 1)?.squeeze(4)?.broadcast_as(shape)?;
    let ss = span.narrow(4, 0, 1)?.squeeze(4)?.broadcast_as(shape)?;
    let se = span.narrow(4, 1, 1)?.squeeze(4)?.broadcast_as(shape)?;
    let span_valid = Tensor::from_vec(span_valid, (m, 1, k, p), dev)?.broadcast_as(shape)?;
    // A span [s, e) overlaps a token [ts, te) when s < te and ts < e.
    let overlap = ss.lt(&te)?.mul(&ts.lt(&se)?)?.mul(&span_valid.contiguous()?)?;
    let covers = as_f64(&overlap)?.sum(3)?.gt(0.0)?; // [m, t, k]
    let cell = Tensor::from_vec(cell, m * k, dev)?;
    let a = flat_a.index_select(&cell, 0)?.reshape((m, 1, k))?.broadcast_as((m, t, k))?;
    let decided = flat_decided.index_select(&cell, 0)?;
    let crit_valid = Tensor::from_vec(crit_valid, m * k, dev)?;
    let usable = decided.mul(&crit_valid)?.reshape((m, 1, k))?.broadcast_as((m, t, k))?;
    let covers = covers.mul(&usable.contiguous()?)?;
    let zeros = Tensor::zeros((m, t, k), DType::F64, dev)?;
    let sum = covers.where_cond(&a.contiguous()?, &zeros)?.sum(2)?; // [m, t]
    let covered = as_f64(&covers)?.sum(2)?.gt(0.0)?;
    let uncovered = Tensor::from_vec(uncovered, (m, 1), dev)?.broadcast_as((m, t))?.contiguous()?;
    let credit = covered.where_cond(&sum, &uncovered)?.to_vec2::<f64>()?;
    Ok(rows.iter().zip(credit).map(|(piece, c)| c.into_iter().take(piece.tokens.len()).collect()).collect())
}

/// Annotate complete groups as `runtime::groups::annotate_scalar` does, with every number
/// computed on `dev`: rewards, advantages, statistics, strict flags, saturation, and token
/// credit for members that carry token offsets. Nothing is written unless everything was
/// computed.
pub fn annotate_groups(
    program: &Program,
    decl: &RewardDecl,
    groups: &mut [PendingGroup],
    dev: &Device,
) -> std::result::Result<(), String> {
    let err = |e: candle_core::Error| e.to_string();
    let scored: Vec<Vec<usize>> = groups.iter().map(|g| scored_members(&g.members)).collect();
    let rewards: Vec<Vec<Option<f64>>> =
        groups.iter().zip(&scored).map(|(g, sc)| sc.iter().map(|&i| reward_of(&g.members[i])).collect()).collect();
    let n_groups = groups.len();
    let s = scored.iter().map(Vec::len).max().unwrap_or(0).max(1);
    // The criterion matrix: row g·S + j is scored member j of group g (padding rows empty).
    let mut entries: Vec<Vec<Entry<'_>>> = vec![Vec::new(); n_groups * s];
    for (gi, (g, sc)) in groups.iter().zip(&scored).enumerate() {
        for (j, &i) in sc.iter().enumerate() {
            entries[gi * s + j] = g.members[i]
                .get("criteria")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .map(Entry::of_record)
                .collect();
        }
    }
    let host = HostMatrix::build(program, &entries)?;
    let cols = host.layout.cols();
    let adv = advantages(decl, &rewards, dev).map_err(err)?;
    let m = DeviceMatrix::upload(&host, dev).map_err(err)?;
    // Strict completion: every criterion met where meeting is wanted (points not negative),
    // unmet where it is not.
    let strict = (|| -> Result<Vec<u8>> {
        let negative = m.points.lt(0.0)?;
        let wanted = m.met.mul(&negative.eq(0u8)?)?.maximum(&m.unmet.mul(&negative)?)?;
        let wrong = m.valid.mul(&wanted.eq(0u8)?)?;
        as_f64(&wrong)?.sum(1)?.eq(0.0)?.to_vec1::<u8>()
    })()
    .map_err(err)?;
    // Saturation: per group and column, every scored member met it (or left it unmet).
    let (sat_met, sat_unmet) = (|| -> Result<Saturation> {
        let grid = |t: &Tensor| -> Result<Tensor> { as_f64(t)?.reshape((n_groups, s, cols))?.sum(1) };
        let size: Vec<f64> = scored.iter().map(|sc| sc.len() as f64).collect();
        let size = Tensor::from_vec(size, (n_groups, 1), dev)?.broadcast_as((n_groups, cols))?.contiguous()?;
        let (met, unmet) = (grid(&m.met)?, grid(&m.unmet)?);
        let none = Tensor::zeros((n_groups, cols), DType::F64, dev)?;
        let sat_met = met.eq(&size)?.mul(&unmet.eq(&none)?)?.mul(&size.gt(0.0)?)?;
        let sat_unmet = unmet.eq(&size)?.mul(&met.eq(&none)?)?.mul(&size.gt(0.0)?)?;
        Ok((sat_met.to_vec2()?, sat_unmet.to_vec2()?))
    })()
    .map_err(err)?;
    // The id of each column, from any member that has it.
    let id_of = |gi: usize, col: usize| -> Option<String> {
        (0..scored[gi].len()).find_map(|j| {
            let e = host.entry_at(gi * s + j, col)?;
            let member = &groups[gi].members[scored[gi][j]];
            member.get("criteria")?.get(e)?.get("id")?.as_str().map(str::to_string)
        })
    };
    let mut figures: Vec<GroupFigures> = Vec::with_capacity(n_groups);
    for (gi, (a, stats)) in adv.into_iter().enumerate() {
        let ids = |flags: &[u8]| -> Vec<String> {
            let mut v: Vec<String> =
                flags.iter().enumerate().filter(|(_, f)| **f == 1).filter_map(|(c, _)| id_of(gi, c)).collect();
            v.sort();
            v
        };
        let stats_flagged = stats.flagged;
        figures.push(GroupFigures {
            scored: scored[gi].clone(),
            rewards: rewards[gi].clone(),
            advantages: a,
            stats,
            strict: (0..scored[gi].len()).map(|j| strict[gi * s + j] == 1).collect(),
            saturated_met: ids(&sat_met[gi]),
            saturated_unmet: ids(&sat_unmet[gi]),
            // From the records' step rewards, which the scalar path wrote (no tensor stage).
            step_advantages: crate::runtime::groups::step_advantages(
                decl,
                &groups[gi].members,
                &scored[gi],
                stats_flagged,
            ),
        });
    }
    // Token credit for the members that carry token offsets.
    let mut credit_rows: Vec<CreditRow> = Vec::new();
    let mut credit_of: Vec<(usize, usize, CreditOut)> = Vec::new(); // (group, member, what to write)
    for (gi, g) in groups.iter().enumerate() {
        if !g.tokens.iter().any(Option::is_some) {
            continue;
        }
        for (j, &i) in scored[gi].iter().enumerate() {
            match &g.tokens[i] {
                None => {}
                Some(Err(why)) => credit_of.push((gi, i, CreditOut::Error(why.clone()))),
                Some(Ok((response, offsets))) => {
                    let record = &g.members[i];
                    let found = spans(program, record, response);
                    let map = char_offsets(response);
                    let to_chars = |(s, e): (usize, usize)| (map[s.min(response.len())], map[e.min(response.len())]);
                    let row = gi * s + j;
                    let mut by_col = Vec::new();
                    for (id, ss) in &found {
                        let col = (0..cols).find(|&c| {
                            host.entry_at(row, c).and_then(|e| record.get("criteria")?.get(e)?.get("id")?.as_str())
                                == Some(id.as_str())
                        });
                        if let Some(col) = col {
                            by_col.push((col, ss.iter().map(|x| to_chars(*x)).collect()));
                        }
                    }
                    let uncovered = match decl.uncovered {
                        Uncovered::Row => figures[gi].advantages[j].unwrap_or(0.0),
                        Uncovered::Zero => 0.0,
                    };
                    credit_of.push((gi, i, CreditOut::Credit(credit_rows.len(), found, response.clone())));
                    credit_rows.push(CreditRow { row, tokens: offsets.clone(), spans: by_col, uncovered });
                }
            }
        }
    }
    let credits = if credit_rows.is_empty() {
        Vec::new()
    } else {
        let (a, decided) = criterion_advantages(&m, n_groups, s).map_err(err)?;
        token_credit(&credit_rows, &a, &decided, dev).map_err(err)?
    };
    // Everything is computed: write.
    for (g, f) in groups.iter_mut().zip(&figures) {
        write_figures(&mut g.members, f);
    }
    for (gi, i, what) in credit_of {
        let Some(o) = groups[gi].members[i].as_object_mut() else { continue };
        match what {
            CreditOut::Error(why) => {
                o.insert("token_credit_error".into(), json!(why));
            }
            CreditOut::Credit(k, found, response) => {
                let credit: &[f64] = credits.get(k).map_or(&[][..], Vec::as_slice);
                write_token_credit(o, credit, &found, &response);
            }
        }
    }
    Ok(())
}

/// Per group and column: saturated met, saturated unmet (1 or 0).
type Saturation = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// What a member with token offsets gets.
enum CreditOut {
    Error(String),
    /// Its credit (index into the batch's results), its spans (bytes) and its response.
    Credit(usize, Vec<(String, Spans)>, String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_credit_is_the_same_in_any_split() {
        // Two rows of three criteria: advantages 0.5, -0.25, 1 (the third undecided).
        let dev = Device::Cpu;
        let a = Tensor::from_vec(vec![0.5, -0.25, 1.0, 0.1, 0.2, 0.3], (2, 3), &dev).unwrap();
        let decided = Tensor::from_vec(vec![1u8, 1, 0, 1, 1, 1], (2, 3), &dev).unwrap();
        let tokens: Vec<(usize, usize)> = (0..40).map(|i| (i * 3, i * 3 + 2)).collect();
        let rows = vec![
            CreditRow {
                row: 0,
                tokens: tokens.clone(),
                spans: vec![(0, vec![(0, 10), (50, 61)]), (1, vec![(5, 7)]), (2, vec![(0, 120)])],
                uncovered: 0.75,
            },
            CreditRow { row: 1, tokens: tokens[..7].to_vec(), spans: vec![(2, vec![(4, 9)])], uncovered: 0.0 },
            CreditRow { row: 1, tokens: vec![], spans: vec![], uncovered: 0.0 },
        ];
        let whole = token_credit_within(&rows, &a, &decided, &dev, CREDIT_BATCH).unwrap();
        // Token 2 ([6, 8)) is covered by criterion 0's [0, 10) and criterion 1's [5, 7); the
        // undecided criterion 2 covers everything and counts for nothing.
        assert_eq!(&whole[0][..5], &[0.5, 0.5, 0.25, 0.5, 0.75]);
        assert_eq!(whole[0][17], 0.5, "[51, 53) is in [50, 61)");
        assert_eq!(&whole[1][..4], &[0.0, 0.3, 0.3, 0.0], "[4, 9) covers [3, 5) and [6, 8)");
        assert!(whole[2].is_empty());
        for budget in [1, 5, 37, 200] {
            assert_eq!(token_credit_within(&rows, &a, &decided, &dev, budget).unwrap(), whole, "budget {budget}");
        }
    }
}
