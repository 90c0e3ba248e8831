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
    // A family of at most 16 needles is searched needle by needle, a larger one by one
    // automaton (`stdlib::scan`): both answer as the intrinsics do.
    let shares = planned_answers_match(&needles);
    assert!(shares.exact <= 16 && shares.folded <= 16, "{shares:?}");
    // `(?i)\bwor\w*\b`, `o{2,}`, `(?i)STRASSE`, `(?i)\bcat\b`, `(?i)kelvin\w*` and `\bword\b` are
    // led by literals and asked alone; `^$`, `(?m)^b` and `\d+` are not, and form the set.
    assert_eq!((shares.patterns, shares.patterns_alone), (9, 6), "{shares:?}");
    let more: Vec<&str> =
        needles.iter().copied().chain(["o", "ba", "aab", "Σ", "ss", "NAÏVE", "wor", "12", "\n\n"]).collect();
    let shares = planned_answers_match(&more);
    assert!(shares.exact > 16 && shares.folded > 16, "{shares:?}");
}

/// The planned answers of a rubric counting, finding and finding case-insensitively each of
/// `needles` (and matching some patterns) are the intrinsics' answers; returns the plan's shares.
fn planned_answers_match(needles: &[&str]) -> rubric::stdlib::scan::Shares {
    // The literal-led ones are asked from their literals' first occurrence, by a DFA anchored
    // there (`stdlib::scan::Leads`): `cat` first occurs inside `concatenate`, where `\b` fails;
    // `(?i)k` also matches the Kelvin sign; a non-ASCII byte before `word` stops the DFA.
    let patterns = [
        r"(?i)\bwor\w*\b",
        r"^$",
        r"(?m)^b",
        r"o{2,}",
        r"\d+",
        r"(?i)STRASSE",
        r"(?i)\bcat\b",
        r"(?i)kelvin\w*",
        r"\bword\b",
    ];
    let mut src = String::from("rubric scan.test @ 1.0.0\ninput t: Text\n");
    for (i, n) in needles.iter().enumerate() {
        let n = n.replace('\n', "\\n");
        src += &format!("criterion c{i} \"c{i}\" value min(count_occurrences(t, \"{n}\") / 10, 1)\n");
        src += &format!("criterion i{i} \"i{i}\" check contains_ci(t, \"{n}\")\n");
        src += &format!("criterion e{i} \"e{i}\" check contains(t, \"{n}\")\n");
    }
    // Needles only asked whether they occur (their searcher may stop at the first), and one of
    // them counted through a needle made at run time, which the plan does not count: the count
    // is the intrinsic's own, not the presence the pass kept.
    src += "criterion o0 \"o0\" check contains(t, \"xy\")\n";
    src += "criterion o1 \"o1\" check contains(t, \"yx\")\n";
    src += "criterion o2 \"o2\" value min(count_occurrences(t, lower(\"XY\")) / 10, 1)\n";
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
    let shares = rubric::interp::prepared(&p).scan(&p).shares();
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
        "xyxyxy",
        "concatenate cat",
        "concatenate",
        "\u{212A}ELVIN",
        "éword word",
        "éword",
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
    let xy = FAST.evaluate(&p, &[Value::text("xyxyxy")], &NoVerdicts);
    assert_eq!(xy.criterion("o2").and_then(|c| c.value), Some(0.3), "`xy` occurs three times in `xyxyxy`");
    assert!(xy.criterion("o0").is_some_and(|c| c.is_met()) && xy.criterion("o1").is_some_and(|c| c.is_met()));
    // What the anchored DFA cannot decide alone is still answered: a later occurrence of the
    // literal, and a word boundary after a non-ASCII letter.
    for (t, k, met) in [
        ("concatenate cat", "m6", true),
        ("concatenate", "m6", false),
        ("éword word", "m8", true),
        ("éword", "m8", false),
        ("\u{212A}ELVIN", "m7", true),
    ] {
        let r = FAST.evaluate(&p, &[Value::text(t)], &NoVerdicts);
        assert_eq!(r.criterion(k).map(|c| c.is_met()), Some(met), "{k} on {t:?}");
    }
    shares
}

#[test]
fn repeated_calls_are_memoised_and_distinct_ones_are_not() {
    let src = "rubric memo.test @ 1.0.0\ninput t: Text\n\
               criterion a \"a\" check word_count(t) > 1\n\
               criterion b \"b\" check word_count(t) < 9\n\
               criterion c \"c\" check sentence_count(t) > 0\n\
               score = weighted_mean(all)\n";
    let p = rubric::types::compile_source("main.rubric", src).program.unwrap_or_else(|| panic!("compiles"));
    let plan = rubric::interp::prepared(&p).scan(&p);
    let wc = rubric::stdlib::lookup("word_count").next().map(|(_, f)| f);
    let sc = rubric::stdlib::lookup("sentence_count").next().map(|(_, f)| f);
    assert!(wc.is_some_and(|f| plan.memoises(f)), "word_count(t) is called twice");
    assert!(sc.is_some_and(|f| !plan.memoises(f)), "sentence_count(t) is called once");
}

/// A row's result under `fuel` (none: unlimited), with the program's text switches or
/// (`walked`) with every condition of their chains tested as written.
fn switch_row(p: &rubric::ir::Program, inputs: &[Value], fuel: Option<u64>, walked: bool) -> rubric::engine::RowResult {
    let limits = fuel.map(|fuel| rubric::stdlib::Limits { fuel, ..rubric::stdlib::Limits::DEFAULT });
    if walked {
        rubric::interp::evaluate_walked(p, inputs, &NoVerdicts, limits)
    } else {
        rubric::interp::evaluate_within(p, inputs, &NoVerdicts, None, limits)
    }
}

/// A chain of text tests (`if k == "a" then ... else if k == "b" ...`, what `std.ifeval`
/// dispatches on an instruction's id with) takes the branch the first equal constant names,
/// whatever the text (one of the constants, a constant named twice, none of them, a null
/// place), and charges the work its tests one by one charge: under every fuel from none to
/// enough, the row traps or not, and scores, exactly as the walk over the conditions does.
#[test]
fn text_switches_take_the_walks_branch_and_charge_its_work() {
    let src = r#"rubric t.switch @ 1.0.0
input kind: Text?
input r: {id: Text}
fn pick(k: Text) -> Number =
  if k == "a" then 1 else if k == "b" then 2 else if "c" == k then 3 else if k == "a" then 4
  else if k == "d" then 5 else 0
criterion c "c" value pick(kind ?? "none") / 5
criterion d "d" value if r.id == "x" then 1 else if r.id == "y" then 0.5 else if r.id == "z" then 0.25 else if r.id == "w" then 0.125 else 0
criterion e "e" check if kind == "a" then true else if kind == "b" then false else if kind == "c" then true else if kind == "d" then false else kind == null
criterion short "short" check if kind == "a" then true else if kind == "b" then false else true
score = weighted_mean(all)
"#;
    let c = rubric::types::compile_source("main.rubric", src);
    let errors: Vec<&str> = c.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.as_str()).collect();
    let p = c.program.unwrap_or_else(|| panic!("{errors:?}"));
    let mut lens: Vec<u32> = rubric::interp::prepared(&p).switches.values().map(|s| s.len).collect();
    lens.sort_unstable();
    assert_eq!(lens, [4, 4, 5], "the three chains of four or more tests are switches, not the short one");
    let record = |id: &str| Value::from_json(&serde_json::json!({ "id": id }));
    let kinds =
        [Value::text("a"), Value::text("b"), Value::text("c"), Value::text("d"), Value::text("zzz"), Value::Null];
    let ids = ["x", "y", "z", "w", "q"];
    let mut compared = 0;
    for (i, kind) in kinds.iter().enumerate() {
        let inputs = [kind.clone(), record(ids[i % ids.len()])];
        let free = switch_row(&p, &inputs, None, false);
        assert_eq!(format!("{free:?}"), format!("{:?}", switch_row(&p, &inputs, None, true)), "{kind:?}");
        let want = match kind {
            Value::Text(t) if &**t == "a" => 0.2,
            Value::Text(t) if &**t == "b" => 0.4,
            Value::Text(t) if &**t == "c" => 0.6,
            Value::Text(t) if &**t == "d" => 1.0,
            _ => 0.0,
        };
        assert_eq!(free.criterion("c").and_then(|c| c.value), Some(want), "{kind:?}: the first test of a text decides");
        let mut trapped = false;
        for fuel in 1..400 {
            let (fast, walked) =
                (switch_row(&p, &inputs, Some(fuel), false), switch_row(&p, &inputs, Some(fuel), true));
            assert_eq!(format!("{fast:?}"), format!("{walked:?}"), "{kind:?} under {fuel} fuel");
            trapped |= fast.trap.is_some();
            compared += 1;
        }
        assert!(trapped, "{kind:?}: some fuel runs out");
        assert!(switch_row(&p, &inputs, Some(400), false).trap.is_none(), "400 fuel is enough");
    }
    assert_eq!(compared, kinds.len() * 399);
}

/// `rubric run`'s plain path scores chunks of 512 rows two at a time while it reads and writes
/// (`runtime::stream_plain`): over several chunks, with blank, malformed and unbindable lines
/// among the rows, its records and summary are those of the chunk-by-chunk path (which a row
/// deadline takes), in row order, full and `--compact`.
#[test]
fn pipelined_runs_write_the_chunked_runs_records_in_order() {
    let scratch = crate::common::TempDir::new("pipelined");
    let main = scratch.file(
        "main.rubric",
        r#"rubric t @ 1.0.0
input response: Text
criterion cites "Cites" points 2 check matches(response, "\\[\\d+\\]")
criterion calm "Calm" check contains(response, "calm")
criterion long "Long" check word_count(response) > 3
score = points_ratio(all)
"#,
    );
    let words = ["calm", "[1]", "storm", "waves", "[22]", "sea"];
    let mut rows = String::new();
    for i in 0..1300usize {
        match i % 211 {
            7 => rows.push('\n'),
            8 => rows.push_str("{not json\n"),
            9 => rows.push_str("{\"response\": 7}\n"),
            _ => {
                let text: Vec<&str> = (0..1 + i % 5).map(|k| words[(i * 3 + k) % words.len()]).collect();
                rows.push_str(&format!("{{\"id\": {i}, \"response\": \"{}\"}}\n", text.join(" ")));
            }
        }
    }
    let input = scratch.file("rows.jsonl", &rows);
    let run = |name: &str, extra: &[&str]| {
        let out = scratch.path(name);
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &main, &"--input", &input, &"--output", &out, &"--allow-errors"];
        for e in extra {
            args.push(e);
        }
        let o = crate::cli::rubric(&args);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let summary = String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string();
        // The summary line without its time: "N rows scored in T s (...)".
        let summary = summary.split_once(" in ").map(|(a, b)| format!("{a} {}", &b[b.find('(').unwrap_or(0)..]));
        (std::fs::read_to_string(&out).unwrap(), summary)
    };
    for compact in [false, true] {
        let extra: &[&str] = if compact { &["--compact"] } else { &[] };
        let (piped, piped_summary) = run("piped.jsonl", extra);
        let mut chunked_args = extra.to_vec();
        chunked_args.extend(["--row-deadline-ms", "600000"]);
        let (chunked, chunked_summary) = run("chunked.jsonl", &chunked_args);
        assert_eq!(piped, chunked, "compact: {compact}");
        assert_eq!(piped_summary, chunked_summary);
        let rows: Vec<u64> = piped
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["row"].as_u64().unwrap())
            .collect();
        // blank lines are not rows
        assert_eq!(rows, (0..rows.len() as u64).collect::<Vec<_>>());
        assert_eq!(rows.len(), 1300 - 7);
        assert_eq!(piped.matches("\"error\"").count(), 14, "malformed and unbindable lines are error records");
    }
}

#[cfg(feature = "jit")]
fn compiled(src: &str) -> rubric::ir::Program {
    let c = rubric::types::compile_source("main.rubric", src);
    let errors: Vec<String> = c.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    c.program.unwrap_or_else(|| panic!("{errors:?}"))
}

/// Row slots: a memoised call (`word_count(t)`, twice, one slot) and the checks one pass answers
/// (per input and pass: exact, case-folded, regex set) get slots; a row reads each slot
/// only once it filled it (a slot of the row before is stale), and the slots a pass fills
/// for its siblings hold what their calls return. Rows of two programs alternate on one
/// thread's context, so a slot filled by the other program's row must never be read.
#[cfg(feature = "jit")]
#[test]
fn row_slots_answer_as_their_calls_do() {
    let a = compiled(
        r#"rubric slots.a @ 1.0.0
input t: Text
input u: Text = ""
criterion w1 "w1" check word_count(t) > 2
criterion w2 "w2" value min(word_count(t) / 10, 1)
criterion n0 "n0" value min(count_occurrences(t, "a") / 10, 1)
criterion e0 "e0" check contains(t, "ab")
criterion e1 "e1" check contains(t, "b")
criterion i0 "i0" check contains_ci(t, "AB")
criterion i1 "i1" check contains_ci(t, "x")
criterion m0 "m0" check matches(t, "^a")
criterion m1 "m1" check matches(t, "\\d")
criterion f0 "f0" check contains(u, "ab")
criterion f1 "f1" check contains(u, "b")
criterion g0 "g0" value min(count_occurrences(u, "a") / 4, 1)
score = weighted_mean(all)
"#,
    );
    // The same slot count and the same checks in a different order, on other needles.
    let b = compiled(
        r#"rubric slots.b @ 1.0.0
input t: Text
input u: Text = ""
criterion f0 "f0" check contains(u, "b")
criterion f1 "f1" check contains(u, "ab")
criterion g0 "g0" value min(count_occurrences(u, "b") / 4, 1)
criterion i0 "i0" check contains_ci(t, "X")
criterion i1 "i1" check contains_ci(t, "b")
criterion m0 "m0" check matches(t, "b$")
criterion m1 "m1" check matches(t, "[0-9]{2}")
criterion n0 "n0" value min(count_occurrences(t, "b") / 10, 1)
criterion e0 "e0" check contains(t, "a")
criterion e1 "e1" check contains(t, "ba")
criterion w1 "w1" check word_count(t) > 1
criterion w2 "w2" value min(word_count(t) / 5, 1)
score = weighted_mean(all)
"#,
    );
    let (slots, answered, mut groups) = rubric::backend::jit::code(&a).unwrap().slot_shape();
    assert_eq!((slots, answered), (11, 10));
    // t: exact, folded, regex; u: exact; every answered slot in one group.
    groups.sort();
    assert_eq!(groups, [2, 2, 3, 3]);
    assert_eq!(groups.iter().sum::<usize>(), answered);

    let texts = ["", "ab", "AB ab x", "a1 b", "b", "aaaa bbbb 42", "X", "abab abab ab"];
    for (i, t) in texts.iter().enumerate() {
        for p in [&a, &b] {
            let u = texts[(i * 3 + 1) % texts.len()];
            let row = [Value::text(*t), Value::text(u)];
            let jit = FAST.evaluate(p, &row, &NoVerdicts);
            let interp = Interpreter.evaluate(p, &row, &NoVerdicts);
            assert_eq!(format!("{jit:?}"), format!("{interp:?}"), "{} on {row:?}", p.rubric.name);
            assert!(jit.score.is_some(), "{jit:?}");
        }
    }
}

/// A rubric of plain runs (`interp::prepared::PlainRun`: consecutive criteria whose checks read
/// only inputs, with constant attributes) broken by what may not join one: a criterion that
/// reads another, a weight read from an input, a gate, a lone plain criterion. One check is a
/// constant; one divides by an input, so a row with `n = 0` traps in the middle of a run.
const RUNS: &str = r#"rubric runs.t @ 1.0.0
input t: Text
input n: Number = 1
criterion a "a" check contains(t, "a")
criterion b "b" weight 2 check word_count(t) > 1
criterion z "z" check true
criterion c "c" check 10 / n > 1
criterion d "d" check contains(t, "d")
criterion e "e" check a.met or contains(t, "e")
criterion f "f" check len(t) > 2
criterion g "g" weight n check contains(t, "g")
criterion h "h" points 3 check contains(t, "h")
criterion i "i" check matches(t, "i+")
gate long: len(t) >= 1 else score 0 reason "empty"
criterion j "j" check contains(t, "j")
criterion k "k" check contains(t, "k")
score = weighted_mean(all)
"#;

/// The rows the plain-run rubric is scored on: every check met and unmet somewhere, a trap in
/// the middle of the first run (`n = 0`), and the gate closed (empty text).
fn run_rows() -> Vec<[Value; 2]> {
    let texts = ["", "a d e", "abc def ghi hjk", "iii", "no", "g h i j k"];
    let mut rows = Vec::new();
    for t in texts {
        for n in [1.0, 0.0, 20.0] {
            rows.push([Value::text(t), Value::Number(n)]);
        }
    }
    rows
}

/// The plain runs are where they should be, and deciding a run's checks together (every
/// engine's `Evaluator::checks`) decides each criterion as evaluating it alone does: the
/// interpreter with a trace (which decides every criterion one by one) and without agree on
/// every row under every fuel from none to enough, so a limit hit in the middle of a run ends
/// the row at the same criterion; the Wasm and JIT engines agree with the interpreter.
#[test]
fn plain_runs_decide_as_their_criteria_one_by_one() {
    let p = rubric::types::compile_source("main.rubric", RUNS).program.unwrap_or_else(|| panic!("compiles"));
    let prepared = rubric::interp::prepared(&p);
    let ids = |run: &rubric::interp::prepared::PlainRun| -> Vec<String> {
        run.criteria.iter().map(|c| p.criteria[*c as usize].id.clone()).collect()
    };
    let runs: Vec<Vec<String>> = prepared.runs.iter().map(ids).collect();
    assert_eq!(runs, [vec!["a", "b", "z", "c", "d"], vec!["h", "i"], vec!["j", "k"]]);

    let wasm = rubric::backend::wasm::WasmEngine::new();
    for row in run_rows() {
        let plain = Interpreter.evaluate(&p, &row, &NoVerdicts);
        let mut trace = Vec::new();
        let alone = rubric::interp::evaluate_within(&p, &row, &NoVerdicts, Some(&mut trace), None);
        assert_eq!(format!("{plain:?}"), format!("{alone:?}"), "{row:?}");
        assert!(!trace.is_empty());
        let w = wasm.evaluate(&p, &row, &NoVerdicts);
        assert_eq!(format!("{w:?}"), format!("{plain:?}"), "wasm on {row:?}");
        #[cfg(feature = "jit")]
        {
            let jit = FAST.evaluate(&p, &row, &NoVerdicts);
            assert_eq!(format!("{jit:?}"), format!("{plain:?}"), "jit on {row:?}");
        }
    }
    // The trap in the middle of the first run leaves `c` unscored and decides `d` after it.
    let r = Interpreter.evaluate(&p, &[Value::text("a d"), Value::Number(0.0)], &NoVerdicts);
    let c = r.criterion("c").unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(c.status, rubric::engine::Status::Unscored, "{c:?}");
    assert!(r.criterion("d").is_some_and(|d| d.is_met()), "{r:?}");

    // Under every fuel: a row that runs out does so at the same criterion either way.
    let row = [Value::text("abc def ghi hjk"), Value::Number(1.0)];
    let mut limited = 0;
    for fuel in 0..400 {
        let limits = Some(rubric::stdlib::Limits { fuel, ..rubric::stdlib::Limits::DEFAULT });
        let plain = rubric::interp::evaluate_within(&p, &row, &NoVerdicts, None, limits);
        let mut trace = Vec::new();
        let alone = rubric::interp::evaluate_within(&p, &row, &NoVerdicts, Some(&mut trace), limits);
        assert_eq!(format!("{plain:?}"), format!("{alone:?}"), "fuel {fuel}");
        limited += usize::from(plain.trap.as_ref().is_some_and(|t| t.code == "rubric::trap::limit"));
    }
    assert!(limited > 10 && limited < 400, "the sweep crosses the runs: {limited} rows ran out");
}

/// A plain run whose check answers something other than a boolean (here `unscored`: `exec` of a
/// runtime no machine has) in the middle: the engines' `Evaluator::checks` stop there
/// (`CheckOutcomes::last`), the driver decides the rest of the run one by one, and every
/// criterion, the score and the row are as the interpreter decides them alone (with a trace),
/// on every engine.
#[test]
fn a_check_that_answers_no_boolean_ends_its_run_there() {
    let src = r#"rubric runs.u @ 1.0.0
input t: Text
criterion a "a" check contains(t, "a")
criterion b "b" weight 2 check word_count(t) > 1
criterion x "x" check exec("no-such-runtime", t).ok
criterion c "c" check contains(t, "c")
criterion d "d" weight 3 check matches(t, "d+")
score = weighted_mean(all, unscored: skip)
"#;
    let p = rubric::types::compile_source("main.rubric", src).program.unwrap_or_else(|| panic!("compiles"));
    let runs: Vec<usize> = rubric::interp::prepared(&p).runs.iter().map(|r| r.criteria.len()).collect();
    assert_eq!(runs, [5], "the five criteria are one plain run");
    let wasm = rubric::backend::wasm::WasmEngine::new();
    for t in ["", "a c", "dd a b c", "nothing here", "x"] {
        let row = [Value::text(t)];
        let plain = Interpreter.evaluate(&p, &row, &NoVerdicts);
        let mut trace = Vec::new();
        let alone = rubric::interp::evaluate_within(&p, &row, &NoVerdicts, Some(&mut trace), None);
        assert_eq!(format!("{plain:?}"), format!("{alone:?}"), "{t:?}");
        let x = plain.criterion("x").unwrap_or_else(|| panic!("{plain:?}"));
        assert_eq!(x.status, rubric::engine::Status::Unscored, "{x:?}");
        assert!(x.reason.as_deref().is_some_and(|r| r.contains("exec")), "{x:?}");
        // The criteria after it are decided, and the score is made of the others.
        let c = plain.criterion("c").unwrap_or_else(|| panic!("{plain:?}"));
        assert_eq!(c.is_met(), t.contains('c'), "{t:?}: {c:?}");
        let d = plain.criterion("d").unwrap_or_else(|| panic!("{plain:?}"));
        assert_eq!(d.is_met(), t.contains('d'), "{t:?}: {d:?}");
        let met = |id: &str, w: f64| if plain.criterion(id).is_some_and(|r| r.is_met()) { w } else { 0.0 };
        let want = (met("a", 1.0) + met("b", 2.0) + met("c", 1.0) + met("d", 3.0)) / 7.0;
        assert_eq!(plain.score, Some(want), "{t:?}");
        let w = wasm.evaluate(&p, &row, &NoVerdicts);
        assert_eq!(format!("{w:?}"), format!("{plain:?}"), "wasm on {t:?}");
        #[cfg(feature = "jit")]
        {
            let jit = FAST.evaluate(&p, &row, &NoVerdicts);
            assert_eq!(format!("{jit:?}"), format!("{plain:?}"), "jit on {t:?}");
        }
    }
}

/// Arguments computed by the host (`abi::DERIVED_WORD`): `letter_count(lower(t), c)` and
/// `len`/`sum` of `numbers(t)`, memoised calls on a memoised call, get row slots; a `null`
/// argument (`heading_count(t)`'s optional one) is a word too. Their slots answer as the calls
/// do, on rows of text where lowercasing and numbers bite. A derived argument is computed once
/// per row and kept for the row's other calls (`Ctx::derived_store`): these rows run in turn on
/// one thread's context, so a value kept into the next row makes them differ (checked by not
/// emptying the store between rows: this test and `planned_answers_are_the_intrinsics_answers`
/// failed).
#[cfg(feature = "jit")]
#[test]
fn derived_arguments_answer_as_their_calls_do() {
    let p = compiled(
        r#"rubric derived.t @ 1.0.0
input t: Text
criterion l1 "l1" check letter_count(lower(t), "i") >= 2
criterion l2 "l2" check letter_count(lower(t), "i") >= 3
criterion l3 "l3" value min(letter_count(lower(t), "σ") / 4, 1)
criterion n1 "n1" check len(numbers(t)) >= 1 and sum(numbers(t)) < 100
criterion n2 "n2" check len(numbers(t)) >= 2 and sum(numbers(t)) < 10
criterion h1 "h1" check heading_count(t) <= 1
criterion h2 "h2" check heading_count(t) >= 1
score = weighted_mean(all)
"#,
    );
    let (slots, answered, groups) = rubric::backend::jit::code(&p).unwrap().slot_shape();
    // letter_count twice (two letters), len, sum, heading_count; no pass answers any.
    assert_eq!((slots, answered, groups.len()), (5, 0, 0));
    let texts = ["", "İIi ii", "ΣΑΣ σας 3 4", "# Head\n1.5 and -2 and 1e3", "# a\n# b\nIII 7 8 9"];
    for t in texts {
        let row = [Value::text(t)];
        let jit = FAST.evaluate(&p, &row, &NoVerdicts);
        let interp = Interpreter.evaluate(&p, &row, &NoVerdicts);
        assert_eq!(format!("{jit:?}"), format!("{interp:?}"), "{t:?}");
    }
}

/// A source of `checks` criteria decided by a check on its input, then `judged` judged ones.
#[cfg(feature = "jit")]
fn shaped(checks: usize, judged: usize) -> String {
    let mut src = String::from(
        "rubric shaped @ 1.0.0\ninput response: Text\njudge grader {\n  model \"m\"\n  sees response\n}\n",
    );
    for i in 0..checks {
        src.push_str(&format!(
            "criterion c{i} \"C{i}\" check contains_ci(response, \"w{i}\") or word_count(response) > {i}\n"
        ));
    }
    for i in 0..judged {
        src.push_str(&format!("criterion j{i} \"J{i}\" by grader\n"));
    }
    src.push_str("score = mean(all)\n");
    src
}

/// With no engine named, a source runs on the engine its shape calls for (`api::SourceShape`):
/// the JIT when checks on its inputs alone make it up (at least 8, three times its other
/// criteria), the interpreter otherwise; a bundle on the Wasm engine. `rubric run` writes the
/// engine it chose in every record, and the records are those of the other engine but for it.
#[cfg(feature = "jit")]
#[test]
fn a_source_runs_on_the_engine_its_shape_calls_for() {
    use rubric::api::{EngineChoice, EngineKind, Rubric, SourceShape};
    for (checks, judged, engine) in [
        (8, 0, EngineKind::Jit),
        (7, 0, EngineKind::Interp),
        (9, 3, EngineKind::Jit),
        (9, 4, EngineKind::Interp),
        (0, 2, EngineKind::Interp),
    ] {
        let p = compiled(&shaped(checks, judged));
        assert_eq!(SourceShape::of(&p), SourceShape { plain_checks: checks, other_criteria: judged });
        assert_eq!(EngineKind::for_source(&p), engine, "{checks} checks, {judged} judged");
    }
    let scratch = crate::common::TempDir::new("shaped");
    let input = scratch.file(
        "rows.jsonl",
        "{\"response\": \"w1 w2 W3\"}\n{\"response\": \"one two three four five six seven eight nine\"}\n{\"response\": 3}\n",
    );
    let source = scratch.file("main.rubric", &shaped(8, 0));
    let loaded = Rubric::load(&source).expect("loads");
    assert_eq!(EngineChoice::default().kind_for(&loaded), EngineKind::Jit);
    let named = EngineChoice { engine: Some(EngineKind::Interp), ..EngineChoice::default() };
    assert_eq!(named.kind_for(&loaded), EngineKind::Interp);
    let run = |extra: &[&str]| {
        let out = scratch.path("out.jsonl");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &source, &"--input", &input, &"--output", &out, &"--allow-errors", &"--no-progress"];
        for e in extra {
            args.push(e);
        }
        let o = crate::cli::rubric(&args);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&out).expect("records")
    };
    let chosen = run(&[]);
    let interp = run(&["--engine", "interp"]);
    assert_eq!(chosen.matches("\"engine\":\"jit\"").count(), 2, "{chosen}");
    assert_eq!(chosen.replace("\"engine\":\"jit\"", "\"engine\":\"interp\""), interp);
    assert!(chosen.contains("\"score\":1.0") || chosen.contains("\"score\":1,"), "{chosen}");
    let bundle = scratch.path("main.rbk");
    let o = crate::cli::rubric(&[&"build", &source, &"--output", &bundle]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let loaded = Rubric::load(&bundle).expect("loads");
    assert_eq!(EngineChoice::default().kind_for(&loaded), EngineKind::Wasm);
}

const MEMO: &str = r#"rubric t.memo @ 1.0.0
input t: Text
input items: List[Text]
fn heavy(x: Text, k: Number) -> Bool = word_count(x) > k
fn once(x: Text) -> Bool = len(x) > 0
fn runs(x: Text) -> Bool = len(x) > 1000 and exec("python3", x).ok
criterion a "a" check heavy(t, 1)
criterion c "c" check heavy(t, 1)
criteria listed each s in items {
  criterion s check heavy(s, 0) and all(items, r => heavy(r, 1))
}
criterion d "d" check once(t)
criterion e "e" check runs(t)
criterion f "f" check runs(t)
score = weighted_mean(all)
"#;

/// The interpreter keeps a row's answers of a function called from two places that answers
/// from its arguments alone, by the identity of its arguments (two equal texts are two keys),
/// and answers the calls asked again; not of a function called once, nor of one that runs a
/// program or reads a criterion, nor under limits or a trace. Every row's result is the walk's.
#[test]
fn functions_asked_again_are_answered_from_the_rows_memo() {
    use rubric::interp::{evaluate_memo_use, evaluate_walked, MemoUse};
    let p = compiled(MEMO);
    let index = |name: &str| p.functions.iter().position(|f| f.name == name).unwrap_or(usize::MAX);
    let memoised = &rubric::interp::prepared(&p).memoised;
    assert!(memoised.get(index("heavy")) == Some(&true), "{memoised:?}");
    assert!(memoised.get(index("once")) == Some(&false), "called from one place: {memoised:?}");
    assert!(memoised.get(index("runs")) == Some(&false), "runs a program: {memoised:?}");
    // A body that reads a criterion (the language has no way to write one; an IR can).
    let mut q = p.clone();
    if let Some(f) = q.functions.get_mut(index("heavy")) {
        f.body = rubric::ir::Expr { kind: rubric::ir::ExprKind::Criterion(0), ty: rubric::ir::Type::Verdict };
    }
    assert_eq!(rubric::interp::prepared::Prepared::of(&q).memoised.get(index("heavy")), Some(&false));

    let items = Value::list(vec![Value::text("x y z"), Value::text("x y z"), Value::text("w")]);
    let inputs = [Value::text("one two three"), items];
    let (memo, used) = evaluate_memo_use(&p, &inputs, &NoVerdicts, None, None);
    // Kept: heavy(t, 1), heavy(s, 0) of each item and heavy(r, 1) of each item (the `all` of
    // the first instance reaches every item: the last, "w", fails it), seven in all: the two
    // "x y z" are two texts. Answered: criterion `c`, and the three calls of the `all` of each
    // of the other two instances.
    assert_eq!(used, MemoUse { kept: 7, answered: 7 });
    let walked = evaluate_walked(&p, &inputs, &NoVerdicts, None);
    assert_eq!(format!("{memo:?}"), format!("{walked:?}"));
    assert_eq!(memo.criterion("a").map(|c| c.status), Some(rubric::engine::Status::Met));

    let (limited, used) = evaluate_memo_use(&p, &inputs, &NoVerdicts, None, Some(rubric::stdlib::Limits::DEFAULT));
    assert_eq!(used, MemoUse { kept: 0, answered: 0 }, "no memo under limits");
    assert_eq!(format!("{limited:?}"), format!("{walked:?}"));
    let mut events = Vec::new();
    let (traced, used) = evaluate_memo_use(&p, &inputs, &NoVerdicts, Some(&mut events), None);
    assert_eq!(used, MemoUse { kept: 0, answered: 0 }, "no memo under a trace");
    assert!(!events.is_empty() && format!("{traced:?}") == format!("{walked:?}"));
}
