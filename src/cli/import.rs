//! `rubric import`: converts another system's rubric file into `.rubric` source.
//! PaperBench: a tree of `{id, requirements, weight, task_category, sub_tasks}` nodes becomes
//! nested `group`s with one judged `criterion` per leaf and `score = tree(ROOT)`.

use clap::ValueEnum;
use serde_json::Value as Json;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Format {
    /// PaperBench rubric trees (openai/preparedness `paperbench`).
    Paperbench,
}

pub fn run(format: Format, file: &Path, output: Option<&Path>) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let json: Json = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: `{}` is not JSON: {e}", file.display());
            return ExitCode::from(1);
        }
    };
    let name = file.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "rubric".into());
    let out = match format {
        Format::Paperbench => paperbench(&json, &name),
    };
    match out {
        Ok(src) => match output {
            Some(path) => match std::fs::write(path, src) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write `{}`: {e}", path.display());
                    ExitCode::from(2)
                }
            },
            None => {
                out!("{src}");
                ExitCode::SUCCESS
            }
        },
        Err(e) => {
            eprintln!("error: `{}`: {e}", file.display());
            ExitCode::from(1)
        }
    }
}

/// A rubric identifier for a PaperBench node id.
pub fn node_name(id: &str) -> String {
    let mut s = String::from("n_");
    s.extend(id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }));
    s
}

/// A string literal in rubric syntax.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn sanitize_package(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) || s.is_empty() {
        format!("r_{s}")
    } else {
        s
    }
}

/// Convert a PaperBench tree.
pub fn paperbench(root: &Json, name: &str) -> Result<String, String> {
    let mut out = String::new();
    let title = root.get("requirements").and_then(Json::as_str).unwrap_or("");
    let _ = writeln!(out, "rubric paperbench.{} @ 1.0.0 {}", sanitize_package(name), quote(title));
    out.push_str("\n// Imported from a PaperBench rubric tree: each leaf is a judged requirement,\n");
    out.push_str("// each node scores the weighted mean of its children.\n\n");
    out.push_str("input submission: Text\n\n");
    out.push_str("judge grader {\n  sees submission\n  returns verdict\n}\n\n");
    let is_leaf = root.get("sub_tasks").and_then(Json::as_array).is_none_or(|s| s.is_empty());
    let mut names = Names::default();
    let root_name = if is_leaf {
        out.push_str("group root weight 1 {\n");
        names.used.insert("root".into());
        node(root, 1, &mut out, &mut names)?;
        out.push_str("}\n");
        "root".to_string()
    } else {
        node(root, 0, &mut out, &mut names)?
    };
    let _ = writeln!(out, "\nscore = tree({root_name})");
    Ok(out)
}

/// Node names handed out so far: a repeated PaperBench id gets a `_2`, `_3`... suffix.
#[derive(Default)]
struct Names {
    used: std::collections::HashSet<String>,
}

impl Names {
    fn fresh(&mut self, id: &str) -> String {
        let base = node_name(id);
        let mut name = base.clone();
        let mut k = 2;
        while !self.used.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }
}

/// Write one node; returns the name it was given.
fn node(n: &Json, depth: usize, out: &mut String, names: &mut Names) -> Result<String, String> {
    let id = n.get("id").and_then(Json::as_str).ok_or("a node has no `id`")?;
    let name = names.fresh(id);
    let weight =
        n.get("weight").and_then(Json::as_f64).ok_or_else(|| format!("node `{id}` has no numeric `weight`"))?;
    let text = n.get("requirements").and_then(Json::as_str).unwrap_or("");
    let indent = "  ".repeat(depth);
    let subs = n.get("sub_tasks").and_then(Json::as_array).cloned().unwrap_or_default();
    if subs.is_empty() {
        let _ = write!(out, "{indent}criterion {name} {} weight {weight}", quote(text));
        if let Some(cat) = n.get("task_category").and_then(Json::as_str) {
            let _ = write!(out, " axis {}", quote(cat));
        }
        let _ = writeln!(out, " by grader");
    } else {
        let _ = writeln!(out, "{indent}// {}", text.lines().next().unwrap_or("").chars().take(100).collect::<String>());
        let _ = writeln!(out, "{indent}group {name} weight {weight} {{");
        for s in &subs {
            node(s, depth + 1, out, names)?;
        }
        let _ = writeln!(out, "{indent}}}");
    }
    Ok(name)
}
