//! The bundle manifest (`manifest.json`) and the source map (`source-map.json`): their shapes,
//! strict (unknown fields are errors), and the parts of the manifest that are derived from the
//! IR, so that a reader can check the manifest says nothing the IR does not.

use super::describe::{describe, InputView, JudgeView, RubricView};
use crate::ir::{Program, Step};
use serde::{Deserialize, Serialize};

/// The value of the manifest's `format` field.
pub const FORMAT_NAME: &str = "rubric-bundle";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `rubric-bundle`.
    pub format: String,
    pub format_version: u32,
    pub language_version: String,
    pub compiler_version: String,
    pub ir_version: u32,
    pub wasm_abi_version: u32,
    pub stdlib_version: String,
    pub rubric: RubricView,
    /// `sha256:` of `ir.json`, equal to the program's `ir_hash`.
    pub ir_hash: String,
    pub entry_points: Vec<EntryPoint>,
    pub judges: Vec<JudgeView>,
    /// Names of the `example` blocks (they are in the IR).
    pub examples: Vec<String>,
    /// What running the rubric may do beyond scoring text: `exec` when it runs programs in the
    /// sandbox (the `exec` intrinsic), which a run must allow (`--allow-exec`). Derived from the
    /// IR and checked like the rest; absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Every other file of the bundle, in container order.
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryPoint {
    pub name: String,
    pub inputs: Vec<InputView>,
    pub output: OutputView,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputView {
    /// The static type of the score expression (`Number`); a result's score may also be
    /// `null` (unscored).
    pub score: String,
    /// The criteria a result reports, in step order; a per-instance block reads `name[]`.
    pub criteria: Vec<String>,
    /// The groups whose tree values a result reports.
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// The manifest fields derived from the IR alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub ir_version: u32,
    pub rubric: RubricView,
    pub ir_hash: String,
    pub entry_points: Vec<EntryPoint>,
    pub judges: Vec<JudgeView>,
    pub examples: Vec<String>,
    pub capabilities: Vec<String>,
}

pub fn derive(p: &Program) -> Derived {
    let d = describe(p);
    let criteria = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Criterion(c) => p.criteria.get(*c as usize).map(|c| c.id.clone()),
            Step::Each(e) => Some(format!("{}[]", e.template.id)),
            Step::Gate(_) => None,
        })
        .collect();
    let groups = p.sets.iter().filter(|s| s.kind == crate::ir::SetKind::Group).map(|s| s.name.clone()).collect();
    Derived {
        ir_version: p.ir_version,
        rubric: d.rubric,
        ir_hash: d.ir_hash,
        entry_points: vec![EntryPoint {
            name: "score".into(),
            inputs: d.inputs,
            output: OutputView { score: d.score_type, criteria, groups },
        }],
        judges: d.judges,
        examples: d.examples,
        capabilities: if p.executes() { vec!["exec".into()] } else { Vec::new() },
    }
}

impl Manifest {
    /// The first field of the manifest that disagrees with what the IR says, if any.
    pub fn disagreement(&self, d: &Derived) -> Option<&'static str> {
        if self.ir_version != d.ir_version {
            Some("ir_version")
        } else if self.rubric != d.rubric {
            Some("rubric")
        } else if self.ir_hash != d.ir_hash {
            Some("ir_hash")
        } else if self.entry_points != d.entry_points {
            Some("entry_points")
        } else if self.judges != d.judges {
            Some("judges")
        } else if self.examples != d.examples {
            Some("examples")
        } else if self.capabilities != d.capabilities {
            Some("capabilities")
        } else {
            None
        }
    }
}

/// `source-map.json`: where every IR site lies in the sources, usable without them. The IR
/// holds only site ids (its hash does not depend on layout); this is the site table beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceMapFile {
    /// Every source module the program was compiled from, in load order.
    pub files: Vec<SourceEntry>,
    /// One entry per IR site, in site order:
    /// `[file, start, end, line, column, end_line, end_column]`, `file` an index into `files`,
    /// `start` and `end` byte offsets into its text, lines and columns 1-based, columns in
    /// characters.
    pub sites: Vec<[u32; 7]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceEntry {
    /// `main` for the rubric, `std.text`, `lib.checks`...
    pub module: String,
    /// Relative to the root rubric's directory (`main.rubric`, `lib/checks.rubric`); the
    /// standard library's modules as `std/text.rubric`. Under `src/` when sources are bundled.
    pub path: String,
    pub size: u64,
    pub sha256: String,
}
