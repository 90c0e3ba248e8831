//! The similarity intrinsics against the implementations they follow: every case of
//! `tests/fixtures/similarity/reference.jsonl` (candidates and references from the
//! rouge-score and sacreBLEU READMEs, Papineni et al. 2002's examples, and edge cases written
//! for this project), with the values sacreBLEU 2.6.0 (`sentence_bleu`), rouge-score 0.1.2
//! (`RougeScorer`, no stemming, F-measure) and rapidfuzz 3.14.6 (`Levenshtein.distance`,
//! `normalized_similarity`) give, reproduced to 1e-12 on every engine with identical results.

use rubric::engine::Status;
use serde_json::Value as Json;

fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn similarity_intrinsics_reproduce_sacrebleu_rouge_score_and_rapidfuzz() {
    let path = crate::common::crate_root().join("tests/fixtures/similarity/reference.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut src = String::from("rubric t.similarity @ 0.0.0\n");
    let mut names = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let case: Json = serde_json::from_str(line).unwrap();
        let cand = lit(case["candidate"].as_str().unwrap());
        let refs: Vec<String> =
            case["references"].as_array().unwrap().iter().map(|r| lit(r.as_str().unwrap())).collect();
        let first = &refs[0];
        let checks = [
            ("bleu", format!("bleu({cand}, [{}])", refs.join(", "))),
            ("rouge1", format!("rouge({cand}, {first}, \"rouge1\")")),
            ("rouge2", format!("rouge({cand}, {first}, \"rouge2\")")),
            ("rougeL", format!("rouge({cand}, {first})")),
            ("edit_distance", format!("edit_distance({cand}, {first})")),
            ("edit_similarity", format!("edit_similarity({cand}, {first})")),
        ];
        for (metric, expr) in checks {
            let want = case[metric].as_f64().unwrap();
            let name = format!("c{i}_{metric}");
            src.push_str(&format!("criterion {name} \"{metric}\" check abs({expr} - {want:?}) < 1e-12\n"));
            names.push((name, format!("{} ({}): {metric} = {want}", case["candidate"], case["source"])));
        }
    }
    src.push_str("score = fraction(all)\n");
    let reference = crate::common::evaluate_on_every_engine("<similarity>", &src);
    let failed: Vec<&String> = names
        .iter()
        .filter(|(name, _)| reference.criterion(name).map(|r| r.status) != Some(Status::Met))
        .map(|(_, what)| what)
        .collect();
    assert!(names.len() >= 90, "only {} checks", names.len());
    assert!(failed.is_empty(), "{} of {} do not reproduce:\n{failed:#?}", failed.len(), names.len());
}
