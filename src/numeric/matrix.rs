//! The criterion results of a batch of rows as a rows × columns matrix, on the host
//! ([`HostMatrix`], built from `RowResult`s or from result records) and on a device
//! ([`DeviceMatrix`], candle tensors). Part of the tensor numeric stage (`numeric`).
//!
//! Columns follow the program's steps: one column per static criterion, and for each `each`
//! step a block as wide as the most instances any row of the batch has, instance `i` of every
//! row in the block's column `i`. A row with fewer instances has *absent* cells there (status
//! [`ABSENT`]): absent cells belong to no set, so every aggregation, count and sum leaves them
//! out. One more column, always absent, ends every matrix: an empty set is read as that column
//! alone, so no reduction ever runs over zero columns.

use crate::engine::{CriterionResult, Status};
use crate::ir::{Member, Program, Step};
use candle_core::{DType, Device, Tensor};
use serde_json::Value as Json;
use std::collections::HashMap;

/// Cell status codes (the `status` matrix).
pub const MET: u8 = 0;
pub const UNMET: u8 = 1;
pub const UNSCORED: u8 = 2;
pub const SKIPPED: u8 = 3;
/// Padding: no criterion in this cell for this row.
pub const ABSENT: u8 = 4;

/// The most columns (and rows of a group, sets, counts) a reason code can name: 2^20.
pub const MAX_INDEX: usize = 1 << 20;

/// The most cells a matrix built from results may have (2^26: about 2 GiB on the host).
pub const MAX_CELLS: usize = 1 << 26;

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Static criterion `criteria[i]`.
    Criterion(u32),
    /// Instance `instance` of the `each` step `steps[step]`.
    Each { step: u32, instance: u32 },
    /// The trailing always-absent column.
    Padding,
}

/// The columns of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub slots: Vec<Slot>,
    criterion_col: Vec<Option<usize>>,
    /// By step: the first column of an `each` block and its width.
    each_block: Vec<(usize, usize)>,
}

impl Layout {
    /// The layout for `widths[s]` instances of each `each` step `s` (other entries ignored).
    pub fn new(p: &Program, widths: &[usize]) -> Layout {
        let mut slots = Vec::new();
        let mut criterion_col = vec![None; p.criteria.len()];
        let mut each_block = vec![(0, 0); p.steps.len()];
        for (si, step) in p.steps.iter().enumerate() {
            match step {
                Step::Criterion(c) => {
                    if let Some(slot) = criterion_col.get_mut(*c as usize) {
                        *slot = Some(slots.len());
                    }
                    slots.push(Slot::Criterion(*c));
                }
                Step::Each(_) => {
                    let w = widths.get(si).copied().unwrap_or(0);
                    each_block[si] = (slots.len(), w);
                    slots.extend((0..w).map(|i| Slot::Each { step: si as u32, instance: i as u32 }));
                }
                Step::Gate(_) => {}
            }
        }
        slots.push(Slot::Padding);
        Layout { slots, criterion_col, each_block }
    }

    /// Columns, the padding column included.
    pub fn cols(&self) -> usize {
        self.slots.len()
    }

    /// The always-absent column.
    pub fn padding(&self) -> usize {
        self.slots.len() - 1
    }

    pub fn criterion(&self, c: u32) -> Option<usize> {
        self.criterion_col.get(c as usize).copied().flatten()
    }

    /// First column and width of the `each` step `step`.
    pub fn each(&self, step: u32) -> (usize, usize) {
        self.each_block.get(step as usize).copied().unwrap_or((0, 0))
    }

    /// The columns of a set in member order: the order in which `interp::aggregate` flattens
    /// the set's members (nested sets depth first, `each` instances in order). Never empty: an
    /// empty set is the padding column.
    pub fn set_columns(&self, p: &Program, set: u32) -> Vec<usize> {
        fn walk(l: &Layout, p: &Program, set: u32, depth: usize, out: &mut Vec<usize>) {
            let Some(s) = p.sets.get(set as usize) else { return };
            if depth > 64 {
                return;
            }
            for m in &s.members {
                match m {
                    Member::Criterion(c) => out.extend(l.criterion(*c)),
                    Member::Each(step) => {
                        let (first, w) = l.each(*step);
                        out.extend(first..first + w);
                    }
                    Member::Set(s) => walk(l, p, *s, depth + 1, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(self, p, set, 0, &mut out);
        if out.is_empty() {
            out.push(self.padding());
        }
        out
    }
}

/// One criterion result, as the matrix reads it.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'e> {
    pub id: &'e str,
    pub status: u8,
    pub value: Option<f64>,
    pub weight: f64,
    pub points: Option<f64>,
}

impl<'e> Entry<'e> {
    pub fn of_result(r: &'e CriterionResult) -> Entry<'e> {
        let status = match r.status {
            Status::Met => MET,
            Status::Unmet => UNMET,
            Status::Unscored => UNSCORED,
            Status::Skipped => SKIPPED,
        };
        Entry { id: &r.id, status, value: r.value, weight: r.weight, points: r.points }
    }

    /// A criterion of a result record (`criteria[i]` of a line `rubric run` writes), read as
    /// `runtime::groups` reads it: a missing weight is 1.
    pub fn of_record(c: &'e Json) -> Entry<'e> {
        let status = match c.get("status").and_then(Json::as_str) {
            Some("met") => MET,
            Some("unmet") => UNMET,
            Some("skipped") => SKIPPED,
            _ => UNSCORED,
        };
        Entry {
            id: c.get("id").and_then(Json::as_str).unwrap_or_default(),
            status,
            value: c.get("value").and_then(Json::as_f64),
            weight: c.get("weight").and_then(Json::as_f64).unwrap_or(1.0),
            points: c.get("points").and_then(Json::as_f64),
        }
    }
}

/// Criterion ids to columns: static criteria by id, `NAME[i]` by the `each` block of set `NAME`.
struct Resolver<'p> {
    statics: HashMap<&'p str, u32>,
    each: HashMap<&'p str, u32>,
}

impl<'p> Resolver<'p> {
    fn new(p: &'p Program) -> Resolver<'p> {
        let statics = p.criteria.iter().enumerate().map(|(i, c)| (c.id.as_str(), i as u32)).collect();
        let each = p
            .steps
            .iter()
            .enumerate()
            .filter_map(|(si, s)| match s {
                Step::Each(e) => p.sets.get(e.set as usize).map(|set| (set.name.as_str(), si as u32)),
                _ => None,
            })
            .collect();
        Resolver { statics, each }
    }

    /// `Ok(Err(c))`: static criterion `c`; `Ok(Ok((step, i)))`: instance `i` of an `each` step.
    fn resolve(&self, id: &str) -> Result<Result<(u32, usize), u32>, String> {
        if let Some(c) = self.statics.get(id) {
            return Ok(Err(*c));
        }
        let parsed = id.strip_suffix(']').and_then(|x| x.rsplit_once('[')).and_then(|(name, i)| {
            let step = self.each.get(name)?;
            Some((*step, i.parse::<usize>().ok()?))
        });
        parsed.map(Ok).ok_or_else(|| format!("criterion `{id}` is not one of the rubric's criteria"))
    }
}

/// The criterion results of a batch on the host, row-major (`rows × layout.cols()`).
#[derive(Debug, Clone, PartialEq)]
pub struct HostMatrix {
    pub rows: usize,
    pub layout: Layout,
    /// [`MET`], [`UNMET`], [`UNSCORED`], [`SKIPPED`] or [`ABSENT`].
    pub status: Vec<u8>,
    /// The criterion's value, 0 when it has none.
    pub value: Vec<f64>,
    /// 1 when the criterion has a value.
    pub has_value: Vec<u8>,
    pub weight: Vec<f64>,
    /// The criterion's points, 0 when it has none.
    pub points: Vec<f64>,
    /// Where the cell came from: the index of the entry in its row's list, `u32::MAX` when
    /// absent (reasons name the criterion of a cell through it).
    pub entry: Vec<u32>,
}

impl HostMatrix {
    /// An all-absent matrix of `rows` rows.
    pub fn empty(rows: usize, layout: Layout) -> HostMatrix {
        let n = rows * layout.cols();
        HostMatrix {
            rows,
            layout,
            status: vec![ABSENT; n],
            value: vec![0.0; n],
            has_value: vec![0; n],
            weight: vec![0.0; n],
            points: vec![0.0; n],
            entry: vec![u32::MAX; n],
        }
    }

    /// The matrix of rows given as lists of entries (a row's criteria in result order).
    pub fn build(p: &Program, rows: &[Vec<Entry<'_>>]) -> Result<HostMatrix, String> {
        let resolver = Resolver::new(p);
        let mut widths = vec![0usize; p.steps.len()];
        let mut cells: Vec<Vec<Result<(u32, usize), u32>>> = Vec::with_capacity(rows.len());
        for row in rows {
            let mut out = Vec::with_capacity(row.len());
            for e in row {
                let at = resolver.resolve(e.id)?;
                if let Ok((step, i)) = at {
                    let w = &mut widths[step as usize];
                    *w = (*w).max(i + 1);
                }
                out.push(at);
            }
            cells.push(out);
        }
        // Bounded before anything is allocated: an `each` block as wide as its longest list.
        let cols = p.criteria.len() + widths.iter().sum::<usize>() + 1;
        if cols >= MAX_INDEX || rows.len().saturating_mul(cols) > MAX_CELLS {
            return Err(format!(
                "{} rows × {cols} criterion columns: more than the numeric stage takes at once",
                rows.len()
            ));
        }
        let layout = Layout::new(p, &widths);
        let mut m = HostMatrix::empty(rows.len(), layout);
        let cols = m.layout.cols();
        for (r, (row, at)) in rows.iter().zip(&cells).enumerate() {
            for (k, (e, at)) in row.iter().zip(at).enumerate() {
                let col = match *at {
                    Err(c) => m.layout.criterion(c),
                    Ok((step, i)) => Some(m.layout.each(step).0 + i),
                };
                let Some(col) = col else { continue };
                let cell = r * cols + col;
                m.status[cell] = e.status;
                m.value[cell] = e.value.unwrap_or(0.0);
                m.has_value[cell] = u8::from(e.value.is_some());
                m.weight[cell] = e.weight;
                m.points[cell] = e.points.unwrap_or(0.0);
                m.entry[cell] = k as u32;
            }
        }
        Ok(m)
    }

    /// Rows `first..first + n` as a matrix of their own (same layout).
    pub fn rows_range(&self, first: usize, n: usize) -> HostMatrix {
        let cols = self.layout.cols();
        let (a, b) = (first * cols, (first + n) * cols);
        HostMatrix {
            rows: n,
            layout: self.layout.clone(),
            status: self.status[a..b].to_vec(),
            value: self.value[a..b].to_vec(),
            has_value: self.has_value[a..b].to_vec(),
            weight: self.weight[a..b].to_vec(),
            points: self.points[a..b].to_vec(),
            entry: self.entry[a..b].to_vec(),
        }
    }

    pub fn cell(&self, row: usize, col: usize) -> usize {
        row * self.layout.cols() + col
    }

    /// The index of the entry at `(row, col)` in its row's list.
    pub fn entry_at(&self, row: usize, col: usize) -> Option<usize> {
        self.entry.get(self.cell(row, col)).filter(|e| **e != u32::MAX).map(|e| *e as usize)
    }
}

/// The matrix on a device: `[rows, cols]` tensors; masks are `u8` 0/1, numbers `f64`.
pub struct DeviceMatrix {
    pub rows: usize,
    pub cols: usize,
    pub met: Tensor,
    pub unmet: Tensor,
    pub unscored: Tensor,
    pub skipped: Tensor,
    /// Not absent.
    pub valid: Tensor,
    pub has_value: Tensor,
    pub value: Tensor,
    pub weight: Tensor,
    pub points: Tensor,
}

impl DeviceMatrix {
    /// Copy the matrix to `dev`; the status masks are derived there.
    pub fn upload(m: &HostMatrix, dev: &Device) -> candle_core::Result<DeviceMatrix> {
        let shape = (m.rows, m.layout.cols());
        let status = Tensor::from_slice(&m.status, shape, dev)?;
        let f = |v: &[f64]| Tensor::from_slice(v, shape, dev);
        Ok(DeviceMatrix {
            rows: m.rows,
            cols: m.layout.cols(),
            met: status.eq(MET)?,
            unmet: status.eq(UNMET)?,
            unscored: status.eq(UNSCORED)?,
            skipped: status.eq(SKIPPED)?,
            valid: status.ne(ABSENT)?,
            has_value: Tensor::from_slice(&m.has_value, shape, dev)?,
            value: f(&m.value)?,
            weight: f(&m.weight)?,
            points: f(&m.points)?,
        })
    }

    /// The columns `cols` (in that order) of every field.
    pub fn select(&self, cols: &[usize]) -> candle_core::Result<DeviceMatrix> {
        let dev = self.value.device();
        let contiguous_run = cols.windows(2).all(|w| w[1] == w[0] + 1);
        let pick = |t: &Tensor| -> candle_core::Result<Tensor> {
            if contiguous_run {
                t.narrow(1, cols[0], cols.len())?.contiguous()
            } else {
                let idx: Vec<u32> = cols.iter().map(|c| *c as u32).collect();
                t.index_select(&Tensor::from_vec(idx, cols.len(), dev)?, 1)
            }
        };
        Ok(DeviceMatrix {
            rows: self.rows,
            cols: cols.len(),
            met: pick(&self.met)?,
            unmet: pick(&self.unmet)?,
            unscored: pick(&self.unscored)?,
            skipped: pick(&self.skipped)?,
            valid: pick(&self.valid)?,
            has_value: pick(&self.has_value)?,
            value: pick(&self.value)?,
            weight: pick(&self.weight)?,
            points: pick(&self.points)?,
        })
    }

    /// Column `col` of a `[rows, cols]` tensor, as `[rows]`.
    pub fn column(t: &Tensor, col: usize) -> candle_core::Result<Tensor> {
        t.narrow(1, col, 1)?.squeeze(1)?.contiguous()
    }
}

/// `f64` 0/1 of a `u8` mask.
pub fn as_f64(mask: &Tensor) -> candle_core::Result<Tensor> {
    mask.to_dtype(DType::F64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(src: &str) -> Program {
        let c = crate::types::compile_source("t.rubric", src);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        c.program.unwrap()
    }

    #[test]
    fn each_blocks_are_padded_to_the_widest_row_and_absent_cells_are_marked() {
        let p = program(
            r#"rubric t @ 1.0.0
input response: Text
input items: List[Text]
criterion a "A" check true
criteria item each it in items { criterion it check contains(response, it) }
criterion z "Z" weight 2 check false
"#,
        );
        let r = |id: &'static str, status: u8, v: f64| Entry { id, status, value: Some(v), weight: 1.0, points: None };
        let rows = vec![
            vec![r("a", MET, 1.0), r("item[0]", UNMET, 0.0), r("item[1]", MET, 1.0), r("z", UNMET, 0.0)],
            vec![r("a", UNSCORED, 0.0), r("z", MET, 1.0)],
        ];
        let m = HostMatrix::build(&p, &rows).unwrap();
        assert_eq!(m.layout.cols(), 5, "a, item[0], item[1], z, padding");
        assert_eq!(m.status, vec![MET, UNMET, MET, UNMET, ABSENT, UNSCORED, ABSENT, ABSENT, MET, ABSENT]);
        assert_eq!(m.entry_at(1, 3), Some(1));
        assert_eq!(m.entry_at(1, 1), None);
        let all = p.set_index("all").unwrap() as u32;
        assert_eq!(m.layout.set_columns(&p, all), vec![0, 1, 2, 3]);
        let bad = vec![vec![r("nope", MET, 1.0)]];
        assert!(HostMatrix::build(&p, &bad).unwrap_err().contains("`nope`"));
        let huge = vec![vec![r("item[999999999]", MET, 1.0)]];
        assert!(HostMatrix::build(&p, &huge).unwrap_err().contains("more than"));
    }
}
