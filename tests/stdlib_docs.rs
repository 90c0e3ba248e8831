//! Every doc example of the standard library runs: each intrinsic's `examples` and every
//! `/// example:` line of the `stdlib/` modules must compile and evaluate to `true`, on every
//! engine, with identical results.

use rubric::engine::{Engine, NoVerdicts, Status};
use rubric::interp::Interpreter;
use rubric::types::compile_source;

/// The engines every example runs on; the first is the reference.
const ENGINES: &[&dyn Engine] = &[
    &Interpreter as &dyn Engine,
    #[cfg(feature = "wasm")]
    &rubric::backend::wasm::WasmEngine::new(),
    #[cfg(feature = "jit")]
    &rubric::backend::jit::JitEngine::new(),
];

/// Compile `expr` as the check of a one-criterion rubric and evaluate it; `Err` explains why
/// it did not hold.
fn holds(expr: &str, import: Option<&str>) -> Result<(), String> {
    let import_line = import.map(|m| format!("import {m}\n")).unwrap_or_default();
    let src = format!(
        "rubric doc.example @ 0.0.0\n{import_line}criterion ex \"doc example\" check {expr}\nscore = fraction(all)\n"
    );
    let c = compile_source("<doc example>", &src);
    let Some(p) = c.program else {
        let msgs: Vec<String> =
            c.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
        return Err(format!("does not compile: {}", msgs.join("; ")));
    };
    let r = Interpreter.evaluate(&p, &[], &NoVerdicts);
    for engine in &ENGINES[1..] {
        let theirs = engine.evaluate(&p, &[], &NoVerdicts);
        if format!("{theirs:?}") != format!("{r:?}") {
            return Err(format!("engine `{}` disagrees with the interpreter:\n{theirs:?}\n{r:?}", engine.name()));
        }
    }
    let c = r.criterion("ex").ok_or("no result")?;
    match c.status {
        Status::Met => Ok(()),
        Status::Unmet => Err("evaluates to false".into()),
        Status::Unscored | Status::Skipped => Err(format!("unscored: {}", c.reason.clone().unwrap_or_default())),
    }
}

#[test]
fn every_intrinsic_has_a_passing_doc_example() {
    // the embedding verifiers' examples run with all-MiniLM-L6-v2
    #[cfg(feature = "models")]
    crate::common::use_minilm();
    // `exec`'s examples run their programs in the sandbox (scripts/install-sandbox.sh), once
    // for all three engines.
    #[cfg(all(feature = "exec", target_os = "linux"))]
    crate::common::executor_ready();
    let mut failures = Vec::new();
    let mut count = 0;
    for intr in rubric::stdlib::intrinsics() {
        if intr.examples.is_empty() {
            failures.push(format!("`{}` has no doc example", intr.name));
        }
        if intr.doc.trim().is_empty() {
            failures.push(format!("`{}` has no documentation", intr.name));
        }
        for ex in intr.examples {
            count += 1;
            if let Err(e) = holds(ex, None) {
                failures.push(format!("`{}`: `{ex}` {e}", intr.name));
            }
        }
    }
    assert!(count > 50, "only {count} intrinsic examples ran");
    assert!(failures.is_empty(), "{} failing intrinsic doc examples:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_stdlib_module_function_has_a_passing_doc_example() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (module, text) in rubric::resolve::STDLIB {
        let mut pending: Vec<&str> = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if let Some(ex) = t.strip_prefix("/// example:") {
                pending.push(ex.trim());
            } else if let Some(rest) = t.strip_prefix("fn ") {
                let name = rest.split('(').next().unwrap_or("").trim();
                if pending.is_empty() {
                    failures.push(format!("{module}.{name} has no `/// example:` line"));
                }
                for ex in pending.drain(..) {
                    count += 1;
                    if let Err(e) = holds(ex, Some(module)) {
                        failures.push(format!("{module}.{name}: `{ex}` {e}"));
                    }
                }
            } else if !t.starts_with("///") {
                pending.clear();
            }
        }
    }
    assert!(count >= 10, "only {count} module examples ran");
    assert!(failures.is_empty(), "{} failing module doc examples:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn intrinsic_parameter_names_are_not_keywords() {
    // A parameter named like a hard keyword could never be passed by name.
    for i in rubric::stdlib::intrinsics() {
        let params = &i.sig[1..i.sig.find(") -> ").expect("signature has a return type")];
        for p in params.split(',').filter(|p| !p.trim().is_empty()) {
            let name = p.split(':').next().unwrap().trim();
            assert!(!rubric::syntax::printer::KEYWORDS.contains(&name), "{}{}: `{name}` is a keyword", i.name, i.sig);
        }
    }
}
