//! Every ```rubric block of the README and the docs is checked, so the docs cannot drift from
//! the language:
//!
//! - in `README.md`, `docs/language.md`, `docs/rl.md`, `docs/cost.md` and `docs/exec.md`, each block compiles
//!   without an error;
//! - in `docs/diagnostics.md`, each block under a `### `CODE`` heading makes the checker report
//!   CODE, or — for the codes only a run reports (`rubric::row`, `rubric::trap`, `rubric::bundle`,
//!   `rubric::serve`, `rubric::io`, `rubric::example::failed`) — compiles without an error;
//! - a block that is part of a larger file says so on the line before its fence,
//!   `<!-- fragment -->`, and is not compiled;
//! - blocks of one section that start with `// file: PATH` are files of one project: they are
//!   written under their paths (a block of the section without a path is `main.rubric`), and
//!   the roots among them (a block without a path, a file with a `rubric` header) are compiled.

use crate::common::{crate_root, TempDir};
use rubric::types::compile_path;

/// One ```rubric block: where it is, the `### ` heading it is under, whether it is marked as a
/// fragment, and its text.
struct Block {
    doc: &'static str,
    line: usize,
    heading: String,
    /// Which section (counted by headings) the block is in.
    section: usize,
    fragment: bool,
    text: String,
}

fn blocks(doc: &'static str) -> Vec<Block> {
    let text = std::fs::read_to_string(crate_root().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut section = 0;
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('#') {
            heading = lines[i].trim_start_matches('#').trim().to_string();
            section += 1;
        }
        if lines[i].trim() == "```rubric" {
            let start = i;
            let mut body = String::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            assert!(i < lines.len(), "{doc}:{}: a ```rubric block that is never closed", start + 1);
            let fragment = start > 0 && lines[start - 1].trim() == "<!-- fragment -->";
            out.push(Block { doc, line: start + 1, heading: heading.clone(), section, fragment, text: body });
        }
        i += 1;
    }
    out
}

/// The path a block names on its first line (`// file: lib/checks.rubric`).
fn file_of(b: &Block) -> Option<&str> {
    b.text.lines().next()?.trim().strip_prefix("// file:").map(str::trim)
}

/// The diagnostic codes (notes included) of each root file of one project (or of one block),
/// by the block that holds it, and whether any is an error.
fn check_project(blocks: &[&Block]) -> Vec<(usize, Vec<&'static str>, bool)> {
    let dir = TempDir::new("docs");
    let mut files = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        let rel = file_of(b).unwrap_or("main.rubric");
        let path = dir.file(rel, &b.text);
        files.push((k, path));
    }
    let mut out = Vec::new();
    for (k, path) in files {
        // The root: a block that names no file, or a named file that is a rubric.
        let root = file_of(blocks[k]).is_none() || blocks[k].text.lines().any(|l| l.starts_with("rubric "));
        if !root {
            continue;
        }
        // The catalogue's lint blocks show their codes under `rubric check --lint`.
        let c = if blocks[k].heading.contains("rubric::lint::") {
            rubric::lint::check_path(&path)
        } else {
            compile_path(&path)
        };
        let codes: Vec<&'static str> = c.diagnostics.iter().map(|d| d.code).collect();
        out.push((k, codes, c.has_errors()));
    }
    out
}

/// The blocks of `doc` grouped into projects: the blocks of one section, when some of them
/// name a file; every other block alone.
fn projects(doc: &'static str) -> Vec<Vec<Block>> {
    let all: Vec<Block> = blocks(doc).into_iter().filter(|b| !b.fragment).collect();
    let with_files: std::collections::BTreeSet<usize> =
        all.iter().filter(|b| file_of(b).is_some()).map(|b| b.section).collect();
    let mut groups: Vec<Vec<Block>> = Vec::new();
    for b in all {
        match groups.last_mut() {
            Some(g) if with_files.contains(&b.section) && g[0].section == b.section => g.push(b),
            _ => groups.push(vec![b]),
        }
    }
    groups
}

#[test]
fn every_rubric_block_of_the_guides_compiles() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for doc in ["README.md", "docs/language.md", "docs/rl.md", "docs/cost.md", "docs/exec.md", "docs/trajectories.md"] {
        for project in projects(doc) {
            let refs: Vec<&Block> = project.iter().collect();
            for (k, codes, errors) in check_project(&refs) {
                checked += 1;
                if errors {
                    failures.push(format!("{}:{}: {codes:?}", refs[k].doc, refs[k].line));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} blocks were found: is the block syntax still ```rubric?");
    assert!(
        failures.is_empty(),
        "blocks that do not compile (mark a block that is part of a larger file with `<!-- fragment -->` on the line before its fence):\n  {}",
        failures.join("\n  ")
    );
}

/// Codes only a run reports: their blocks are the rubrics those runs score.
fn reported_by_a_run(code: &str) -> bool {
    ["rubric::row::", "rubric::trap::", "rubric::bundle::", "rubric::serve::", "rubric::io::"]
        .iter()
        .any(|p| code.starts_with(p))
        || code == "rubric::example::failed"
        // found in rows' criteria (`rubric lint --input`): see tests/lint.rs
        || code == "rubric::lint::leak"
}

#[test]
fn every_block_of_the_diagnostics_catalogue_reports_its_code() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for project in projects("docs/diagnostics.md") {
        let refs: Vec<&Block> = project.iter().collect();
        let code = refs[0].heading.trim_matches('`').to_string();
        if !code.starts_with("rubric::") {
            continue;
        }
        let results = check_project(&refs);
        checked += 1;
        let ok = if reported_by_a_run(&code) {
            results.iter().all(|(_, _, errors)| !errors)
        } else {
            results.iter().any(|(_, codes, _)| codes.contains(&code.as_str()))
        };
        if !ok {
            let got: Vec<_> = results.iter().map(|(_, c, _)| c.clone()).collect();
            failures.push(format!("docs/diagnostics.md:{}: `{code}`, got {got:?}", refs[0].line));
        }
    }
    assert!(checked >= 60, "only {checked} sections with blocks were found");
    assert!(failures.is_empty(), "catalogue blocks that do not show their code:\n  {}", failures.join("\n  "));
}
