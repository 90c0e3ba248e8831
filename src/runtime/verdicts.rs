//! Recorded verdicts (`--verdicts FILE`): JSON lines keyed by row and criterion, loaded once
//! and looked up per row. A row is named by its 0-based index or by its `id` field.
//!
//! Accepted lines:
//! `{"row": 0, "criterion": "er", "verdict": "met", "evidence": "..."}` (one verdict) and
//! `{"row": "case-7", "verdicts": {"er": "met", "items[2]": {"samples": ["met", "unmet", "met"]}}}`.

use serde_json::{Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct VerdictFile {
    by_index: HashMap<u64, Vec<(String, Json)>>,
    by_id: HashMap<String, Vec<(String, Json)>>,
    /// What the rows of a run named (an index or id that reached the runtime, erroneous rows
    /// included), and the verdicts for criteria a row turned out not to have: what the file
    /// says that matched nothing is reported, never dropped in silence ([`Self::unmatched`]).
    seen_index: Mutex<HashSet<u64>>,
    seen_id: Mutex<HashSet<String>>,
    unknown_criteria: Mutex<BTreeMap<String, usize>>,
}

/// What a verdict file named that the run did not have.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unmatched {
    /// Row keys that no row of the run had: indices, and ids.
    pub indices: Vec<u64>,
    pub ids: Vec<String>,
    /// Criterion ids a row's verdicts named and the row did not have, with the count of rows.
    pub criteria: Vec<(String, usize)>,
}

impl Unmatched {
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty() && self.ids.is_empty() && self.criteria.is_empty()
    }
}

fn key_of(v: &Json) -> Option<Result<u64, String>> {
    match v {
        Json::Number(n) => n.as_u64().map(Ok),
        Json::String(s) => Some(Err(s.clone())),
        _ => None,
    }
}

/// The key a row id is filed under.
fn id_key(id: &Json) -> String {
    match id {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl VerdictFile {
    pub fn load(path: &Path) -> Result<VerdictFile, String> {
        let f = std::fs::File::open(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let mut vf = VerdictFile::default();
        for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
            let line = line.map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let v: Json =
                serde_json::from_str(&line).map_err(|e| format!("`{}` line {}: {e}", path.display(), n + 1))?;
            vf.add(&v).map_err(|e| format!("`{}` line {}: {e}", path.display(), n + 1))?;
        }
        Ok(vf)
    }

    pub fn add(&mut self, v: &Json) -> Result<(), String> {
        let key = v.get("row").and_then(key_of).ok_or("a verdict line needs `row` (an index or an id)")?;
        let mut entries = Vec::new();
        if let Some(map) = v.get("verdicts").and_then(Json::as_object) {
            for (c, x) in map {
                entries.push((c.clone(), x.clone()));
            }
        } else {
            let c =
                v.get("criterion").and_then(Json::as_str).ok_or("a verdict line needs `criterion` or `verdicts`")?;
            let mut rest: Map<String, Json> = v.as_object().cloned().unwrap_or_default();
            rest.remove("row");
            rest.remove("criterion");
            entries.push((c.to_string(), Json::Object(rest)));
        }
        let slot = match key {
            Ok(i) => self.by_index.entry(i).or_default(),
            Err(id) => self.by_id.entry(id).or_default(),
        };
        slot.extend(entries);
        Ok(())
    }

    /// A row with this index reached the run (even one that ends as an error record).
    pub fn saw_index(&self, index: usize) {
        if let Ok(mut s) = self.seen_index.lock() {
            s.insert(index as u64);
        }
    }

    /// A row with this id reached the run.
    pub fn saw_id(&self, id: &Json) {
        if let Ok(mut s) = self.seen_id.lock() {
            s.insert(id_key(id));
        }
    }

    /// After a row's evaluation: its verdicts that name no criterion of its result.
    pub fn note_result<'a>(&self, verdicts: &[(String, Json)], criteria: impl Iterator<Item = &'a str>) {
        if verdicts.is_empty() {
            return;
        }
        let have: HashSet<&str> = criteria.collect();
        let missing: BTreeSet<&str> = verdicts.iter().map(|(c, _)| c.as_str()).filter(|c| !have.contains(c)).collect();
        if missing.is_empty() {
            return;
        }
        if let Ok(mut m) = self.unknown_criteria.lock() {
            for c in missing {
                *m.entry(c.to_string()).or_default() += 1;
            }
        }
    }

    /// What the file named that the run did not have: row keys no row had (meaningful only when
    /// the run read every row of its input), and criteria rows did not have.
    pub fn unmatched(&self) -> Unmatched {
        let seen_index = self.seen_index.lock().map(|s| s.clone()).unwrap_or_default();
        let seen_id = self.seen_id.lock().map(|s| s.clone()).unwrap_or_default();
        let mut indices: Vec<u64> = self.by_index.keys().filter(|k| !seen_index.contains(k)).copied().collect();
        indices.sort_unstable();
        let mut ids: Vec<String> = self.by_id.keys().filter(|k| !seen_id.contains(*k)).cloned().collect();
        ids.sort();
        let criteria =
            self.unknown_criteria.lock().map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect()).unwrap_or_default();
        Unmatched { indices, ids, criteria }
    }

    /// The verdicts of one row: those given by its id, then those given by its index.
    /// (What reached the run is marked by the caller, `runtime::prepare_row`, before a row can
    /// fail: [`Self::saw_index`], [`Self::saw_id`].)
    pub fn for_row(&self, index: usize, id: Option<&Json>) -> Vec<(String, Json)> {
        let mut out = Vec::new();
        if let Some(v) = self.by_index.get(&(index as u64)) {
            out.extend(v.iter().cloned());
        }
        let id = id.map(id_key);
        if let Some(v) = id.and_then(|id| self.by_id.get(&id)) {
            out.extend(v.iter().cloned());
        }
        out
    }
}
