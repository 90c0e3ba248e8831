//! Recorded verdicts (`--verdicts FILE`): JSON lines keyed by row and criterion, loaded once
//! and looked up per row. A row is named by its 0-based index or by its `id` field.
//!
//! Accepted lines:
//! `{"row": 0, "criterion": "er", "verdict": "met", "evidence": "..."}` (one verdict) and
//! `{"row": "case-7", "verdicts": {"er": "met", "items[2]": {"samples": ["met", "unmet", "met"]}}}`.

use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

#[derive(Debug, Default)]
pub struct VerdictFile {
    by_index: HashMap<u64, Vec<(String, Json)>>,
    by_id: HashMap<String, Vec<(String, Json)>>,
}

fn key_of(v: &Json) -> Option<Result<u64, String>> {
    match v {
        Json::Number(n) => n.as_u64().map(Ok),
        Json::String(s) => Some(Err(s.clone())),
        _ => None,
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

    /// The verdicts of one row: those given by its id, then those given by its index.
    pub fn for_row(&self, index: usize, id: Option<&Json>) -> Vec<(String, Json)> {
        let mut out = Vec::new();
        if let Some(v) = self.by_index.get(&(index as u64)) {
            out.extend(v.iter().cloned());
        }
        let id = id.map(|j| match j {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        });
        if let Some(v) = id.and_then(|id| self.by_id.get(&id)) {
            out.extend(v.iter().cloned());
        }
        out
    }
}
