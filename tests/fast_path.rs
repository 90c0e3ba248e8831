//! The fast path (issue 22): the one pass per text of `stdlib::scan` and its memo give the
//! answers each intrinsic gives alone. The JIT (no limits) runs rows with the program's scan
//! plan; the interpreter, the oracle, computes every call as written, so the two are compared
//! on texts where case mapping, overlapping needles and Unicode bite. The engine property test
//! (`engine_props`) also generates planned checks.

use rubric::engine::{Engine, NoVerdicts};
use rubric::interp::Interpreter;
use rubric::value::Value;

#[cfg(feature = "jit")]
const FAST: rubric::backend::jit::JitEngine = rubric::backend::jit::JitEngine::new();

/// Every planned intrinsic on constant needles, answered from one pass per text (the JIT) and
/// one by one (the interpreter): the answers must be the same on texts where case mapping,
/// overlaps and Unicode bite.
#[cfg(feature = "jit")]
#[test]
fn planned_answers_are_the_intrinsics_answers() {
    let needles = ["aa", "a", "ab", "b", "σ", "ΣΑΣ", "İ", "i̇", "ß", "SS", "é", "naïve", "\n", "oo"];
    let patterns = [r"(?i)\bwor\w*\b", r"^$", r"(?m)^b", r"o{2,}", r"\d+", r"(?i)STRASSE"];
    let mut src = String::from("rubric scan.test @ 1.0.0\ninput t: Text\n");
    for (i, n) in needles.iter().enumerate() {
        let n = n.replace('\n', "\\n");
        src += &format!("criterion c{i} \"c{i}\" value min(count_occurrences(t, \"{n}\") / 10, 1)\n");
        src += &format!("criterion i{i} \"i{i}\" check contains_ci(t, \"{n}\")\n");
        src += &format!("criterion e{i} \"e{i}\" check contains(t, \"{n}\")\n");
    }
    for (i, p) in patterns.iter().enumerate() {
        let p = p.replace('\\', "\\\\");
        src += &format!("criterion m{i} \"m{i}\" check matches(t, \"{p}\")\n");
    }
    for (i, l) in ["a", "A", "σ", "İ", "ß", "É"].iter().enumerate() {
        src += &format!("criterion l{i} \"l{i}\" value min(letter_count(lower(t), \"{l}\") / 10, 1)\n");
        src += &format!("criterion k{i} \"k{i}\" value min(letter_count(t, \"{l}\") / 10, 1)\n");
    }
    src += "score = weighted_mean(all)\n";
    let c = rubric::types::compile_source("main.rubric", &src);
    let errors: Vec<String> = c.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    let p = c.program.unwrap_or_else(|| panic!("{errors:?}\n{src}"));
    let shares = rubric::interp::prepared(&p).scan.shares();
    assert!(shares.exact > 1 && shares.folded > 1 && shares.patterns > 1, "the plan holds every family: {shares:?}");
    let texts = [
        "",
        "aaaa",
        "abab aab",
        "ΣΑΣ σας ΌΣΟΣ",
        "İstanbul i̇",
        "Straße STRASSE ss ß",
        "naïve Naïve NAÏVE é É",
        "b\nb\n\nwords World WORD 12",
        "oooooo",
    ];

    for t in texts {
        let row = [Value::text(t)];
        let planned = FAST.evaluate(&p, &row, &NoVerdicts);
        let alone = Interpreter.evaluate(&p, &row, &NoVerdicts);
        assert_eq!(format!("{planned:?}"), format!("{alone:?}"), "text {t:?}");
        assert!(planned.score.is_some(), "{planned:?}");
    }
    let four_a = FAST.evaluate(&p, &[Value::text("aaaa")], &NoVerdicts);
    let c0 = four_a.criterion("c0").and_then(|c| c.value);
    assert_eq!(c0, Some(0.2), "`aa` occurs twice in `aaaa` without overlapping");
}

#[test]
fn repeated_calls_are_memoised_and_distinct_ones_are_not() {
    let src = "rubric memo.test @ 1.0.0\ninput t: Text\n\
               criterion a \"a\" check word_count(t) > 1\n\
               criterion b \"b\" check word_count(t) < 9\n\
               criterion c \"c\" check sentence_count(t) > 0\n\
               score = weighted_mean(all)\n";
    let p = rubric::types::compile_source("main.rubric", src).program.unwrap_or_else(|| panic!("compiles"));
    let plan = &rubric::interp::prepared(&p).scan;
    let wc = rubric::stdlib::lookup("word_count").next().map(|(_, f)| f);
    let sc = rubric::stdlib::lookup("sentence_count").next().map(|(_, f)| f);
    assert!(wc.is_some_and(|f| plan.memoises(f)), "word_count(t) is called twice");
    assert!(sc.is_some_and(|f| !plan.memoises(f)), "sentence_count(t) is called once");
}
