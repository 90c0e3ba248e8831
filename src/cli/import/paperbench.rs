//! `rubric import paperbench`: a tree of `{id, requirements, weight, task_category, sub_tasks}` nodes becomes
//! nested `group`s with one judged `criterion` per leaf and `score = tree(ROOT)`.

use super::{node_name, quote, sanitize_package};
use serde_json::Value as Json;
use std::fmt::Write as _;

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
