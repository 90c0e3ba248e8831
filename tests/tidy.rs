//! Tidy checks that keep the docs and the module structure honest: `docs/stdlib.md` is generated
//! from the intrinsic table and the `stdlib/` modules, every `rubric::...` code in `src/` has a
//! heading in `docs/diagnostics.md`, every cross-module `crate::` path follows an edge allowed
//! by `docs/ARCHITECTURE.md`, and every source file opens with a `//!` line.
//!
//! Run alone with `cargo test --test integration tidy`; regenerate `docs/stdlib.md` with
//! `RUBRIC_UPDATE_DOCS=1 cargo test --test integration tidy`.

use rubric::source::FileId;
use rubric::syntax::ast::Item;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let p = root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Every `.rs` file under `src/`, sorted, as (path relative to `src/`, text).
fn source_files() -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).expect("read src/").filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, base, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
                out.push((rel, text));
            }
        }
    }
    let src = root().join("src");
    let mut out = Vec::new();
    walk(&src, &src, &mut out);
    out
}

/// Where two texts first differ, for a readable failure.
fn first_difference(want: &str, got: &str) -> String {
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        if w != g {
            return format!("line {}:\n  generated: {w}\n  on disk:   {g}", i + 1);
        }
    }
    format!("the generated text has {} lines, the file {}", want.lines().count(), got.lines().count())
}

// ------------------------------------------------------------------ (a) docs/stdlib.md

/// A fenced block that survives backticks inside `content`.
fn fenced(info: &str, content: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in content.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{info}\n{}\n{fence}\n", content.trim_end())
}

fn table_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// GitHub's heading anchor for a heading made of `text`.
fn anchor(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            'a'..='z' | '0'..='9' | '_' | '-' => Some(c),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

/// One function of a `stdlib/` module: its header as written, its doc lines and examples.
struct ModuleFn {
    name: String,
    header: String,
    doc: Vec<String>,
    examples: Vec<String>,
}

fn module_fns(text: &str) -> (Option<String>, Vec<ModuleFn>) {
    let parsed = rubric::syntax::parse_file(FileId(0), text);
    assert!(parsed.diagnostics.is_empty(), "a stdlib module does not parse");
    let title = parsed.file.header.as_ref().and_then(|h| h.title.as_ref()).map(|t| t.value.clone());
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for item in &parsed.file.items {
        let Item::Fn(f) = item else { continue };
        let start = f.span.start as usize;
        let header = text[start..f.body.span.start as usize].trim().trim_end_matches('=').trim();
        let header = header.split_whitespace().collect::<Vec<_>>().join(" ");
        // The `///` lines right above the `fn` line.
        let line = text[..start].matches('\n').count();
        let mut first = line;
        while first > 0 && lines[first - 1].trim_start().starts_with("///") {
            first -= 1;
        }
        let mut doc = Vec::new();
        let mut examples = Vec::new();
        for l in &lines[first..line] {
            let l = l.trim_start().trim_start_matches("///").trim();
            match l.strip_prefix("example:") {
                Some(ex) => examples.push(ex.trim().to_string()),
                None => doc.push(l.to_string()),
            }
        }
        out.push(ModuleFn { name: f.name.text.clone(), header, doc, examples });
    }
    (title, out)
}

/// The whole text of `docs/stdlib.md`, generated from `rubric::stdlib::intrinsics()` and
/// `rubric::resolve::STDLIB`.
fn stdlib_markdown() -> String {
    let mut s = String::new();
    let intrinsics = rubric::stdlib::intrinsics();
    s.push_str("# Standard library\n\n");
    s.push_str(
        "<!-- Generated by tests/tidy.rs from `rubric::stdlib::intrinsics()` (src/stdlib/intrinsics/) and\n     \
         `rubric::resolve::STDLIB` (stdlib/std/*.rubric). Do not edit by hand; regenerate with\n     \
         RUBRIC_UPDATE_DOCS=1 cargo test --test integration tidy -->\n\n",
    );
    s.push_str(
        "The standard library has two parts:\n\n\
         - **Intrinsics**: built-in functions implemented once in Rust (`src/stdlib/intrinsics/`) and \
         shared by every engine. They are always in scope; no import is needed.\n\
         - **Modules** written in the language (`stdlib/std/*.rubric`), embedded in the compiler. \
         Import one with `import std.NAME` and call its functions as `NAME.f(...)`, or unqualified \
         as `f(...)` when no other imported module defines `f`.\n\n\
         Signatures are written in rubric syntax. `T` is a type variable, bound by the first argument \
         that mentions it; `T?` may be null; a parameter with `= default` may be left out; any \
         parameter may be passed by name (`code_blocks(response, lang: \"html\")`); any call may be \
         written as a method of its first argument (`response.word_count()`). A `Text` argument is \
         accepted for a `Conversation` parameter (one user turn). A `pattern` written as a string \
         literal is compiled with the rubric, so an invalid one is a compile error \
         (`rubric::type::bad_regex`) rather than a trap on every row. An unscored argument \
         makes the call unscored without running it. Every example evaluates to `true` and runs as a \
         test (`tests/stdlib_docs.rs`). Errors raised inside a function are traps, listed in \
         [diagnostics.md](diagnostics.md#traps).\n\n",
    );
    s.push_str("## Contents\n\n");
    s.push_str("- [Built into the language](#built-into-the-language)\n");
    s.push_str("- [Intrinsics](#intrinsics)\n");
    for (name, _) in rubric::resolve::STDLIB {
        let h = format!("Module {name}");
        let _ = writeln!(s, "- [Module `{name}`](#{})", anchor(&h));
    }
    s.push('\n');

    s.push_str("## Built into the language\n\n");
    s.push_str(
        "These are part of the language rather than the tables below; see \
         [language.md](language.md#aggregations-and-unscored-policies).\n\n\
         - Aggregations over a set of criteria (`all`, or a `criteria`, `each`, `tier` or `group` \
         name), each with an optional `unscored: skip|unmet|propagate`: ",
    );
    let aggs: Vec<String> = rubric::ir::AggOp::ALL.iter().map(|a| format!("`{}`", a.name())).collect();
    s.push_str(&aggs.join(", "));
    s.push_str(".\n");
    s.push_str(
        "- List functions taking a lambda as their last argument: `map(list, x => ...)`, \
         `filter(list, x => ...)`, `all(list, x => ...)`, `any(list, x => ...)`, \
         `count(list, x => ...)`.\n\n",
    );

    s.push_str("## Intrinsics\n\n");
    s.push_str("| function | signature |\n| --- | --- |\n");
    let mut seen = BTreeSet::new();
    for i in intrinsics {
        let link =
            if seen.insert(i.name) { format!("[`{}`](#{})", i.name, anchor(i.name)) } else { format!("`{}`", i.name) };
        let _ = writeln!(s, "| {link} | `{}` |", table_cell(&format!("{}{}", i.name, i.sig)));
    }
    s.push('\n');
    let mut k = 0;
    while k < intrinsics.len() {
        let name = intrinsics[k].name;
        let _ = writeln!(s, "### `{name}`\n");
        while k < intrinsics.len() && intrinsics[k].name == name {
            let i = &intrinsics[k];
            s.push_str(&fenced("text", &format!("{}{}", i.name, i.sig)));
            s.push('\n');
            s.push_str(i.doc.trim());
            s.push_str("\n\n");
            if !i.examples.is_empty() {
                s.push_str(&fenced("text", &i.examples.join("\n")));
                s.push('\n');
            }
            k += 1;
        }
    }

    for (module, text) in rubric::resolve::STDLIB {
        let alias = module.rsplit('.').next().unwrap_or(module);
        let (title, fns) = module_fns(text);
        let _ = writeln!(s, "## Module `{module}`\n");
        if let Some(t) = title {
            let _ = writeln!(s, "{t}.\n");
        }
        let _ = writeln!(
            s,
            "Source: `stdlib/{}.rubric`. Import with `import {module}`; call as `{alias}.f(...)` or `f(...)`.\n",
            module.replace('.', "/")
        );
        s.push_str("| function | signature |\n| --- | --- |\n");
        for f in &fns {
            let h = format!("{alias}.{}", f.name);
            let _ = writeln!(s, "| [`{h}`](#{}) | `{}` |", anchor(&h), table_cell(&f.header));
        }
        s.push('\n');
        for f in &fns {
            let _ = writeln!(s, "### `{alias}.{}`\n", f.name);
            s.push_str(&fenced("text", &f.header));
            s.push('\n');
            if !f.doc.is_empty() {
                s.push_str(&f.doc.join("\n"));
                s.push_str("\n\n");
            }
            if !f.examples.is_empty() {
                s.push_str(&fenced("text", &f.examples.join("\n")));
                s.push('\n');
            }
        }
    }
    while s.ends_with("\n\n") {
        s.pop();
    }
    s
}

#[test]
fn tidy_stdlib_docs_are_up_to_date() {
    let want = stdlib_markdown();
    let path = root().join("docs/stdlib.md");
    if std::env::var_os("RUBRIC_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "docs/stdlib.md is out of date with the intrinsic table or stdlib/std/*.rubric ({}).\n\
         Regenerate it with: RUBRIC_UPDATE_DOCS=1 cargo test --test integration tidy",
        first_difference(&want, &got)
    );
}

// ------------------------------------------------------------------ (b) docs/diagnostics.md

fn codes_in_src() -> BTreeMap<String, String> {
    let re = regex::Regex::new(r#""(rubric(?:::[a-z_]+)+)""#).unwrap();
    let mut out = BTreeMap::new();
    for (path, text) in source_files() {
        for c in re.captures_iter(&text) {
            out.entry(c[1].to_string()).or_insert_with(|| format!("src/{path}"));
        }
    }
    out
}

#[test]
fn tidy_every_code_is_documented() {
    let src = codes_in_src();
    assert!(src.len() > 40, "only {} codes found in src/: is the pattern still right?", src.len());
    let doc = read("docs/diagnostics.md");
    let heading = regex::Regex::new(r"(?m)^#+ .*`(rubric(?:::[a-z_]+)+)`").unwrap();
    let documented: BTreeSet<String> = heading.captures_iter(&doc).map(|c| c[1].to_string()).collect();
    let missing: Vec<String> =
        src.iter().filter(|(c, _)| !documented.contains(*c)).map(|(c, p)| format!("{c} (used in {p})")).collect();
    let stale: Vec<&String> = documented.iter().filter(|c| !src.contains_key(*c)).collect();
    assert!(
        missing.is_empty(),
        "codes without a `### `code`` section in docs/diagnostics.md (add what triggers it, a minimal \
         example and the fix):\n  {}",
        missing.join("\n  ")
    );
    assert!(stale.is_empty(), "docs/diagnostics.md documents codes that no longer exist in src/: {stale:?}");
}

// ------------------------------------------------------------------ (c) module edges

/// The allowed `A -> B` edges of the ```edges block of docs/ARCHITECTURE.md.
fn allowed_edges() -> BTreeSet<(String, String)> {
    let doc = read("docs/ARCHITECTURE.md");
    let start = doc.find("```edges\n").expect("docs/ARCHITECTURE.md has no ```edges block");
    let body = &doc[start + "```edges\n".len()..];
    let body = &body[..body.find("```").expect("unterminated ```edges block")];
    let mut out = BTreeSet::new();
    for line in body.lines() {
        let line = line.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let (a, b) = line.split_once("->").unwrap_or_else(|| panic!("bad edge line `{line}`: expected `A -> B`"));
        out.insert((a.trim().to_string(), b.trim().to_string()));
    }
    out
}

/// The first path segments named by the `{...}` group that starts at `rest` (just after
/// `crate::{`), nested groups included only through their head.
fn group_heads(rest: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    let mut at_start = true;
    for c in rest.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                at_start = true;
                current.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 && at_start {
            if c.is_alphanumeric() || c == '_' {
                current.push(c);
            } else if !current.is_empty() {
                heads.push(std::mem::take(&mut current));
                at_start = false;
            }
        }
    }
    if at_start && !current.is_empty() {
        heads.push(current);
    }
    heads
}

/// Every top-level module named through `crate::` in `text` (comments ignored), with a line.
fn crate_references(text: &str) -> Vec<(String, usize)> {
    let path = regex::Regex::new(r"(^|[^$\w])crate::([A-Za-z_]\w*|\{)").unwrap();
    let mut out = Vec::new();
    let code: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("//") {
                String::new()
            } else {
                l.to_string()
            }
        })
        .collect();
    let joined = code.join("\n");
    for c in path.captures_iter(&joined) {
        let m = c.get(2).unwrap();
        let line = joined[..m.start()].matches('\n').count() + 1;
        if m.as_str() == "{" {
            for head in group_heads(&joined[m.end()..]) {
                out.push((head, line));
            }
        } else {
            out.push((m.as_str().to_string(), line));
        }
    }
    out
}

#[test]
fn tidy_module_edges_are_allowed() {
    let allowed = allowed_edges();
    let files = source_files();
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|(p, _)| {
            let top = p.split('/').next().unwrap();
            let name = top.strip_suffix(".rs").unwrap_or(top);
            (name != "lib" && name != "main").then(|| name.to_string())
        })
        .collect();
    for (a, b) in &allowed {
        assert!(modules.contains(a) && modules.contains(b), "edge `{a} -> {b}` names a module that does not exist");
    }
    let mut bad = Vec::new();
    for (path, text) in &files {
        let top = path.split('/').next().unwrap();
        let from = top.strip_suffix(".rs").unwrap_or(top);
        if from == "lib" || from == "main" {
            continue;
        }
        for (to, line) in crate_references(text) {
            if to == from || !modules.contains(&to) {
                continue;
            }
            if !allowed.contains(&(from.to_string(), to.clone())) {
                bad.push(format!("src/{path}:{line}: `{from}` uses `crate::{to}`"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "module dependencies not allowed by the ```edges block of docs/ARCHITECTURE.md:\n  {}\n\
         Either remove the dependency or, if the new edge is intended, add `FROM -> TO` to the block \
         (and explain it in the code map).",
        bad.join("\n  ")
    );
}

#[test]
fn tidy_group_heads_parse_nested_use_groups() {
    assert_eq!(group_heads("ir::{self, Expr}, source::Span, value};"), vec!["ir", "source", "value"]);
    assert_eq!(group_heads("diag};"), vec!["diag"]);
    let refs: Vec<String> =
        crate_references("use crate::{a::b, c};\n// use crate::d;\nlet x = crate::e::f();\n$crate::g")
            .into_iter()
            .map(|r| r.0)
            .collect();
    assert_eq!(refs, vec!["a", "c", "e"]);
}

// ------------------------------------------------------------------ (d) module docs

#[test]
fn tidy_every_source_file_opens_with_a_module_doc() {
    let missing: Vec<String> = source_files()
        .into_iter()
        .filter(|(_, text)| !text.lines().next().is_some_and(|l| l.starts_with("//!")))
        .map(|(p, _)| format!("src/{p}"))
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not start with a `//!` line saying what they do and where they sit in the \
         pipeline:\n  {}",
        missing.join("\n  ")
    );
}

// ------------------------------------------------------------------ (e) pest stays in syntax

#[test]
fn tidy_pest_rule_stays_in_syntax() {
    let leaks: Vec<String> = source_files()
        .into_iter()
        .filter(|(p, _)| !p.starts_with("syntax/"))
        .flat_map(|(p, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains("Rule::") || l.contains("syntax::Rule") || l.contains("RubricParser"))
                .map(|(i, _)| format!("src/{p}:{}", i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        leaks.is_empty(),
        "pest's `Rule` must not leave `syntax` (convert to the AST instead):\n  {}",
        leaks.join("\n  ")
    );
}
