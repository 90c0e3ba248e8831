//! `json_patch` and `json_diff` against the JSON Patch test suite
//! (`tests/fixtures/json-patch/`, json-patch-tests as published on npm, 1.1.0): every record not
//! marked `disabled` gives its `expected` document, `null` where it names an `error`, and
//! something other than `null` where it names neither (the patch applies); and for
//! every record with an expected document, the patch `json_diff` makes from `doc` to it applies
//! to give it. On every engine, with identical results.

use rubric::engine::Status;
use serde_json::Value as Json;

/// A rubric text literal holding `j` as JSON text, parsed back with `json(...)`.
fn json_lit(j: &Json) -> String {
    format!("json({})", serde_json::to_string(&j.to_string()).unwrap())
}

#[test]
fn json_patch_passes_the_json_patch_test_suite() {
    let dir = crate::common::crate_root().join("tests/fixtures/json-patch");
    let mut src = String::from("rubric t.json_patch @ 0.0.0\n");
    let mut checks = Vec::new();
    let (mut expected, mut errors) = (0, 0);
    for file in ["tests.json", "spec_tests.json"] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let records: Vec<Json> = serde_json::from_str(&text).unwrap();
        for (i, r) in records.iter().enumerate() {
            if r["disabled"] == true {
                continue;
            }
            let (doc, patch) = (json_lit(&r["doc"]), json_lit(&r["patch"]));
            let what = format!("{file} #{i}: {}", r.get("comment").or(r.get("error")).unwrap_or(&Json::Null));
            let name = format!("c{}", checks.len());
            if let Some(want) = r.get("expected") {
                expected += 1;
                let want = json_lit(want);
                src.push_str(&format!("criterion {name} \"patch\" check json_patch({doc}, {patch}) == {want}\n"));
                checks.push((name, what.clone()));
                let name = format!("c{}", checks.len());
                src.push_str(&format!(
                    "criterion {name} \"diff\" check json_patch({doc}, json_diff({doc}, {want})) == {want}\n"
                ));
                checks.push((name, format!("{what} (json_diff)")));
            } else if r.get("error").is_none() {
                // a record with neither: the patch applies
                src.push_str(&format!("criterion {name} \"applies\" check json_patch({doc}, {patch}) != null\n"));
                checks.push((name, what));
            } else {
                errors += 1;
                src.push_str(&format!("criterion {name} \"error\" check json_patch({doc}, {patch}) == null\n"));
                checks.push((name, what));
            }
        }
    }
    src.push_str("score = fraction(all)\n");
    let reference = crate::common::evaluate_on_every_engine("<json patch>", &src);
    let failed: Vec<String> = checks
        .iter()
        .filter_map(|(name, what)| {
            let r = reference.criterion(name)?;
            (r.status != Status::Met)
                .then(|| format!("{what}: {:?} {}", r.status, r.reason.clone().unwrap_or_default()))
        })
        .collect();
    assert!(expected >= 60 && errors >= 20, "{expected} expected and {errors} error records");
    assert!(failed.is_empty(), "{} of {} checks fail:\n{}", failed.len(), checks.len(), failed.join("\n"));
}
