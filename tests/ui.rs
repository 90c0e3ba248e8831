//! Diagnostic snapshots, stages 1–3 (parse, resolve, type check, facts): every case file under
//! `tests/ui/<category>/` is compiled and its source plus every diagnostic, rendered without
//! colour, is snapshotted under `tests/ui/snapshots/`.
//!
//! A case file opens with comment headers:
//! - `// expect: CODE, CODE` (required): codes that must be among the file's diagnostics;
//! - `// bug: WHAT` (optional): the file's diagnostics are known to be wrong. Such files are
//!   left out of the snapshots and of the strict checks, and are checked by the ignored
//!   `known_bugs_are_fixed` test instead, so the suite stays green until the fix lands;
//! - `// want: TEXT` and `// wrong: TEXT` (optional, repeatable): the rendered diagnostics must
//!   contain (`want`) or must not contain (`wrong`) `TEXT`. They pin down what a `// bug:` is
//!   about when its codes alone cannot show it (a cascade, a misleading message, a label in
//!   the wrong place); in other files they guard against regressions.
//!
//! Files without an `// expect:` header are helper modules imported by the cases.
//! Regenerate the snapshots with `INSTA_UPDATE=always cargo test --test integration ui::`, then
//! read every changed `.snap` file.

use rubric::diag::{Diagnostic, Severity};
use rubric::source::SourceMap;
use rubric::types::{compile_path, Compiled};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const CATEGORIES: &[&str] = &["parse", "types", "judges", "examples", "facts", "modules", "lint"];

/// Codes the compiler never emits for a single file on its own: they are covered elsewhere.
const NOT_COMPILE_TIME: &[(&str, &str)] = &[
    ("rubric::example::failed", "emitted by `rubric test`; see tests/cli.rs"),
    ("rubric::lint::leak", "found in rows' criteria by `rubric lint --input`; see tests/lint.rs"),
];

struct Case {
    category: &'static str,
    /// Path relative to the package root (the working directory of `cargo test`), so that the
    /// file names in diagnostics are stable.
    path: PathBuf,
    source: String,
    expect: Vec<String>,
    bug: Option<String>,
    want: Vec<String>,
    wrong: Vec<String>,
}

impl Case {
    fn name(&self) -> String {
        format!("{}__{}", self.category, self.path.file_stem().unwrap().to_string_lossy())
    }
}

fn ui_root() -> &'static Path {
    let root = Path::new("tests/ui");
    assert!(
        root.is_dir(),
        "tests/ui not found from {:?}: run the tests with cargo from the package root",
        std::env::current_dir().ok()
    );
    root
}

fn header_values(source: &str, key: &str) -> Vec<String> {
    let prefix = format!("// {key}:");
    source.lines().filter_map(|l| l.trim().strip_prefix(prefix.as_str())).map(|v| v.trim().to_string()).collect()
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for category in CATEGORIES {
        let dir = ui_root().join(category);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rubric"))
            .collect();
        files.sort();
        for path in files {
            let source = std::fs::read_to_string(&path).unwrap();
            let expect: Vec<String> = header_values(&source, "expect")
                .iter()
                .flat_map(|v| v.split(',').map(|c| c.trim().to_string()).collect::<Vec<_>>())
                .filter(|c| !c.is_empty())
                .collect();
            if expect.is_empty() {
                continue; // a helper module
            }
            let bug = header_values(&source, "bug").into_iter().next();
            let want = header_values(&source, "want");
            let wrong = header_values(&source, "wrong");
            out.push(Case { category, path, source, expect, bug, want, wrong });
        }
    }
    assert!(out.len() >= 40, "expected at least 40 ui cases, found {}", out.len());
    out
}

/// The `lint` category is compiled as `rubric check --lint` compiles.
fn compile(case: &Case) -> Compiled {
    if case.category == "lint" {
        rubric::lint::check_path(&case.path)
    } else {
        compile_path(&case.path)
    }
}

/// The snapshot text: the source, then every diagnostic rendered without colour.
fn render(case: &Case, c: &Compiled) -> String {
    let mut out = String::new();
    out.push_str(&case.source);
    if !case.source.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("\n==================== diagnostics ====================\n");
    for d in &c.diagnostics {
        out.push('\n');
        out.push_str(&render_one(d, &c.sources));
        out.push('\n');
    }
    out
}

fn render_one(d: &Diagnostic, sources: &SourceMap) -> String {
    d.render(sources, false).lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

fn codes(c: &Compiled) -> BTreeSet<&'static str> {
    c.diagnostics.iter().map(|d| d.code).collect()
}

fn missing_codes(case: &Case, c: &Compiled) -> Vec<String> {
    let got = codes(c);
    case.expect.iter().filter(|e| !got.contains(e.as_str())).cloned().collect()
}

/// The `// want:` texts the diagnostics lack and the `// wrong:` texts they contain. A text is
/// looked for in the rendering (which shows `file:line:column` of each primary label) and in
/// the unwrapped code, message, labels and help.
fn text_problems(case: &Case, c: &Compiled) -> Vec<String> {
    let mut parts = Vec::new();
    for d in &c.diagnostics {
        parts.push(render_one(d, &c.sources));
        parts.push(d.code.to_string());
        parts.push(d.message.clone());
        parts.extend(d.labels.iter().map(|l| l.message.clone()));
        parts.extend(d.help.clone());
    }
    let rendered = parts.join("\n");
    let mut out = Vec::new();
    for w in &case.want {
        if !rendered.contains(w.as_str()) {
            out.push(format!("the diagnostics do not contain `{w}`"));
        }
    }
    for w in &case.wrong {
        if rendered.contains(w.as_str()) {
            out.push(format!("the diagnostics contain `{w}`"));
        }
    }
    out
}

/// The house rules for one diagnostic (docs/STYLE.md): a stable code, a lowercase message
/// without a trailing period, a span inside the file, no duplicates.
fn rule_violations(case: &Case, c: &Compiled) -> Vec<String> {
    let mut out = Vec::new();
    let code_shape = regex::Regex::new(r"^rubric::[a-z]+::[a-z_]+$").unwrap();
    let mut seen: Vec<(&str, &str, Option<rubric::source::Span>)> = Vec::new();
    for d in &c.diagnostics {
        let what = format!("{} `{}`", d.code, d.message);
        if !code_shape.is_match(d.code) {
            out.push(format!("{what}: code is not `rubric::stage::name`"));
        }
        if d.message.is_empty() {
            out.push(format!("{what}: empty message"));
        }
        if d.message.chars().next().is_some_and(char::is_uppercase) {
            out.push(format!("{what}: message starts with a capital letter"));
        }
        if d.message.ends_with('.') {
            out.push(format!("{what}: message ends with a period"));
        }
        if d.help.as_deref().is_some_and(|h| h.trim().is_empty()) {
            out.push(format!("{what}: empty help"));
        }
        match d.primary_span() {
            None => out.push(format!("{what}: no span")),
            Some(s) => {
                let len = c.sources.get(s.file).text.len() as u32;
                if s.start > s.end || s.end > len {
                    out.push(format!("{what}: span {}..{} outside the file (length {len})", s.start, s.end));
                }
            }
        }
        let key = (d.code, d.message.as_str(), d.primary_span());
        if seen.contains(&key) {
            out.push(format!("{what}: reported twice at the same place"));
        }
        seen.push(key);
    }
    // Errors stop compilation; a file that expects an error must not produce a program.
    let expects_error = case.expect.iter().any(|code| c.diagnostics.iter().any(|d| d.code == code && d.is_error()));
    if expects_error && c.program.is_some() {
        out.push("has errors but produced a program".into());
    }
    out
}

/// Compiling twice gives the same diagnostics in the same order.
fn nondeterminism(case: &Case, first: &str) -> Option<String> {
    for _ in 0..8 {
        let again = render(case, &compile(case));
        if again != first {
            return Some("two compilations rendered different diagnostics".into());
        }
    }
    None
}

fn run_caught(f: impl FnOnce()) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

#[test]
fn ui_snapshots() {
    let mut failures = Vec::new();
    let mut names = BTreeSet::new();
    for case in cases().iter().filter(|c| c.bug.is_none()) {
        let compiled = compile(case);
        let text = render(case, &compiled);
        let name = case.name();
        names.insert(name.clone());
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("ui/snapshots");
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_input_file(&case.path);
        if let Err(e) = run_caught(|| settings.bind(|| insta::assert_snapshot!(name.clone(), text))) {
            failures.push(format!("{}: snapshot differs: {}", case.path.display(), e.lines().next().unwrap_or("")));
        }
    }
    // Every snapshot belongs to a case: a renamed or deleted case must take its snapshot along.
    let snap_dir = ui_root().join("snapshots");
    if let Ok(rd) = std::fs::read_dir(&snap_dir) {
        for e in rd {
            let p = e.unwrap().path();
            let file = p.file_name().unwrap().to_string_lossy().to_string();
            if let Some(stem) = file.strip_suffix(".snap") {
                if !names.contains(stem) {
                    failures.push(format!("{}: no case file produces this snapshot", p.display()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} ui snapshot failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn ui_cases_report_their_expected_codes_and_follow_the_rules() {
    let mut failures = Vec::new();
    for case in cases().iter().filter(|c| c.bug.is_none()) {
        let compiled = compile(case);
        let text = render(case, &compiled);
        for code in missing_codes(case, &compiled) {
            failures.push(format!(
                "{}: expected a `{code}` diagnostic, got {:?}",
                case.path.display(),
                codes(&compiled)
            ));
        }
        for v in rule_violations(case, &compiled).into_iter().chain(text_problems(case, &compiled)) {
            failures.push(format!("{}: {v}", case.path.display()));
        }
        if let Some(v) = nondeterminism(case, &text) {
            failures.push(format!("{}: {v}", case.path.display()));
        }
    }
    assert!(failures.is_empty(), "{} ui failure(s):\n{}", failures.len(), failures.join("\n"));
}

/// Every compile-time code used in `src/` is produced by at least one ui case.
#[test]
fn ui_cases_cover_every_compile_time_code() {
    let pattern = regex::Regex::new(r#""(rubric::(?:parse|resolve|type|judge|facts|example)::[a-z_]+)""#).unwrap();
    let mut in_src = BTreeSet::new();
    let mut stack = vec![PathBuf::from("src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for cap in pattern.captures_iter(&text) {
                    in_src.insert(cap[1].to_string());
                }
            }
        }
    }
    let mut produced = BTreeSet::new();
    for case in cases() {
        for d in compile(&case).diagnostics {
            produced.insert(d.code.to_string());
        }
    }
    let missing: Vec<&String> =
        in_src.iter().filter(|c| !produced.contains(*c) && !NOT_COMPILE_TIME.iter().any(|(n, _)| n == c)).collect();
    assert!(missing.is_empty(), "no ui case under tests/ui produces these codes: {missing:?}");
}

/// Files marked `// bug:` hold diagnostics known to be wrong. This test passes once every one
/// of them reports its expected codes, contains its `// want:` texts and none of its
/// `// wrong:` texts, follows the rules and is deterministic; then drop the `// bug:` header,
/// read the diagnostics and snapshot the file.
#[test]
#[ignore = "no open bugs: add a `// bug:` case file, then run with --ignored"]
fn known_bugs_are_fixed() {
    let mut failures = Vec::new();
    for case in cases().iter().filter(|c| c.bug.is_some()) {
        let compiled = compile(case);
        let text = render(case, &compiled);
        let mut problems: Vec<String> =
            missing_codes(case, &compiled).into_iter().map(|c| format!("no `{c}`")).collect();
        problems.extend(rule_violations(case, &compiled));
        problems.extend(text_problems(case, &compiled));
        problems.extend(nondeterminism(case, &text));
        if !problems.is_empty() {
            failures.push(format!(
                "{} ({}): {}",
                case.path.display(),
                case.bug.as_deref().unwrap(),
                problems.join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{} known bug(s) remain:\n{}", failures.len(), failures.join("\n"));
}

/// Notes (proven facts) are shown only for programs that compile; warnings never stop one.
#[test]
fn warning_only_cases_still_compile() {
    for case in cases().iter().filter(|c| c.bug.is_none()) {
        let compiled = compile(case);
        let only_warnings = compiled.diagnostics.iter().all(|d| d.severity != Severity::Error);
        assert_eq!(
            only_warnings,
            compiled.program.is_some(),
            "{}: a program is produced exactly when there are no errors",
            case.path.display()
        );
        if only_warnings {
            assert!(
                compiled.diagnostics.iter().any(|d| d.code == "rubric::facts::score_range"),
                "{}: a compiled program reports its score range",
                case.path.display()
            );
        }
    }
}
