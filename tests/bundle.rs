//! Bundles (`src/bundle`, `rubric build | inspect | diff`): round trip of every `examples/`
//! directory (same program, same result lines, examples pass), byte-identical rebuilds from
//! different paths and working directories, tamper tests (every kind of damage rejected with a
//! message that names it), the structural diff and the probe, and the commands on the built
//! binary.

use rubric::api::{bundle_limits as limits, WASM_ABI_VERSION};
use rubric::bundle::container::{self, Entry};
use rubric::bundle::diff::{diff, Change};
use rubric::bundle::{self, describe, load_bytes, BundleError, Limits, Manifest};
use rubric::cli::bundle::build_compiled;
use rubric::interp::Interpreter;
use rubric::ir::Program;
use rubric::runtime::{examples::run_examples, score_line, Identity, VerdictFile};
use rubric::types::{compile_path, compile_source};
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::{crate_root, example_dirs, json_lines, TempDir};

fn rubric_in(dir: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
    cmd.current_dir(dir);
    for a in args {
        cmd.arg(a);
    }
    cmd.env_remove("RUST_BACKTRACE").env("NO_COLOR", "1");
    cmd.output().expect("the rubric binary runs")
}

fn describe_output(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn compile(path: &Path) -> rubric::types::Compiled {
    let c = compile_path(path);
    assert!(c.program.is_some(), "`{}` does not compile: {:?}", path.display(), c.diagnostics);
    c
}

fn build_file(path: &Path, with_sources: bool) -> bundle::Built {
    build_compiled(&compile(path), with_sources).unwrap_or_else(|e| panic!("build `{}`: {e}", path.display()))
}

const TIERS: &str = "examples/tiers/main.rubric";

// ---------------------------------------------------------------- round trip

#[test]
fn bundle_round_trip_reproduces_every_example() {
    // The examples that run programs answer from their transcripts.
    #[cfg(all(feature = "exec", target_os = "linux"))]
    crate::common::executor_ready();
    for dir in example_dirs() {
        let main = dir.join("main.rubric");
        let source = compile(&main);
        let program = source.program.as_ref().unwrap();
        for with_sources in [false, true] {
            let built = build_file(&main, with_sources);
            let b = load_bytes(&built.bytes, &limits())
                .unwrap_or_else(|e| panic!("`{}` (sources: {with_sources}): {e}", dir.display()));
            assert_eq!(&b.program, program, "{}: the bundle's program differs from the source's", dir.display());
            assert_eq!(b.program.hash(), program.hash());
            assert_eq!(b.hash, built.hash);
            assert_eq!(b.manifest, built.manifest);
            assert_eq!(b.size, built.bytes.len() as u64);
            assert_eq!(b.sources.is_empty(), !with_sources);
            // The module is the portable one the Wasm backend compiles, not machine code.
            assert_eq!(b.wasm, rubric::backend::wasm::compile_module(program).unwrap(), "{}", dir.display());
            if with_sources {
                let root = b.sources.first().expect("the root module is bundled");
                assert_eq!(root.0, "main");
                assert_eq!(root.1, std::fs::read_to_string(&main).unwrap());
            }
            // The examples pass from the bundle.
            for o in run_examples(&Interpreter, &b.program) {
                assert!(o.passed(), "{}: example {:?} fails from the bundle: {:?}", dir.display(), o.name, o.failures);
            }
        }
        // Every row gives the same result line, plus the bundle hash.
        let built = build_file(&main, false);
        let b = load_bytes(&built.bytes, &limits()).unwrap();
        let verdicts_path = dir.join("verdicts.jsonl");
        let vf = verdicts_path.is_file().then(|| VerdictFile::load(&verdicts_path).unwrap());
        let rows = std::fs::read_to_string(dir.join("inputs.jsonl")).unwrap();
        let plain = Identity::of(program, &source.sites);
        let stamped = Identity::of(&b.program, &b.sites).with_bundle(&b.hash);
        let lines: Vec<&str> = rows.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty());
        for (i, line) in lines.iter().enumerate() {
            let want = score_line(&Interpreter, program, &plain, i, line, vf.as_ref());
            let mut got = score_line(&Interpreter, &b.program, &stamped, i, line, vf.as_ref());
            assert_eq!(got["bundle"], Json::String(b.hash.clone()));
            got.as_object_mut().unwrap().remove("bundle");
            assert_eq!(got, want, "{} row {i}: the bundle scores differently", dir.display());
        }
    }
}

#[test]
fn bundle_manifest_describes_the_program() {
    let built = build_file(&crate_root().join(TIERS), false);
    let m = &built.manifest;
    assert_eq!(m.format, "rubric-bundle");
    assert_eq!(m.format_version, bundle::FORMAT_VERSION);
    assert_eq!(m.ir_version, rubric::ir::IR_VERSION);
    assert_eq!(m.wasm_abi_version, WASM_ABI_VERSION);
    assert_eq!(m.stdlib_version, rubric::resolve::STDLIB_VERSION);
    assert_eq!(m.rubric.name, "tiers.bill_split");
    assert_eq!(m.rubric.version, "1.0.0");
    let entry = &m.entry_points[0];
    assert_eq!(entry.name, "score");
    let inputs: Vec<(&str, &str)> = entry.inputs.iter().map(|i| (i.name.as_str(), i.ty.as_str())).collect();
    assert_eq!(inputs, [("question", "Text"), ("response", "Text"), ("answer", "Number")]);
    assert_eq!(entry.output.score, "Number");
    assert_eq!(entry.output.criteria, ["correct", "method", "sound", "clarity", "tone", "concise", "rounding"]);
    let grader = &m.judges[0];
    assert_eq!(grader.model.as_deref(), Some("gpt-4.1-mini"));
    assert_eq!(grader.sees, ["question", "response"]);
    assert!(grader.template.as_deref().unwrap().contains("{{question}}"));
    assert_eq!(m.examples.len(), 3);
    let paths: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["ir.json", "module.wasm", "source-map.json"]);
    // The identity is the manifest's hash; ir.json's hash is the ir_hash.
    let entries = container::read(&built.bytes, 100).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["manifest.json", "ir.json", "module.wasm", "source-map.json", "manifest.sha256"]);
    assert_eq!(built.hash, bundle::sha256(&entries[0].data));
    assert_eq!(m.ir_hash, bundle::sha256(&entries[1].data));
    assert_eq!(entries[4].data, format!("{}\n", built.hash).into_bytes());
}

#[test]
fn bundle_source_map_locates_sites_and_stdlib_modules() {
    let main = crate_root().join("examples/ifeval/main.rubric");
    let built = build_file(&main, true);
    let b = load_bytes(&built.bytes, &limits()).unwrap();
    let modules: Vec<&str> = b.source_map.files.iter().map(|f| f.module.as_str()).collect();
    assert_eq!(modules.first(), Some(&"main"), "the root comes first");
    assert!(modules.contains(&"std.ifeval"), "{modules:?}");
    let paths: Vec<&str> = b.manifest.files.iter().map(|f| f.path.as_str()).collect();
    assert!(paths.contains(&"src/std/ifeval.rubric") && paths.contains(&"src/main.rubric"), "{paths:?}");
    assert_eq!(b.source_map.sites.len(), b.program.site_count as usize);
    // The site table read back from the source map is the compiler's.
    assert_eq!(b.sites, compile(&main).sites);
    // Site 0 of the root lies where the source map says.
    let text = std::fs::read_to_string(&main).unwrap();
    let (i, site) = b.sites.iter().enumerate().find(|(_, s)| s.file == "main").unwrap();
    let before = &text[..site.start as usize];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap().chars().count() + 1;
    assert_eq!(b.site_location(i as u32), Some(format!("main.rubric:{line}:{col}")));
}

#[test]
fn bundle_module_is_the_backends_and_records_its_abi() {
    assert_eq!(bundle::WASM_ABI_SECTION, rubric::backend::wasm::abi::ABI_SECTION);
    assert_eq!(WASM_ABI_VERSION, rubric::backend::wasm::abi::ABI_VERSION);
    let built = build_file(&crate_root().join(TIERS), false);
    let b = load_bytes(&built.bytes, &limits()).unwrap();
    assert!(b.wasm.starts_with(b"\0asm\x01\0\0\0"));
    let abi = bundle::wasm_custom_section(&b.wasm, bundle::WASM_ABI_SECTION).unwrap().unwrap();
    assert_eq!(abi, WASM_ABI_VERSION.to_string().as_bytes());
}

/// The bundle's own module links in wasmtime (what `--engine wasm` would instantiate).
#[cfg(feature = "wasm")]
#[test]
fn bundle_module_links_in_the_wasm_runtime() {
    for dir in example_dirs() {
        let built = build_file(&dir.join("main.rubric"), false);
        let b = load_bytes(&built.bytes, &limits()).unwrap();
        let program = std::sync::Arc::new(b.program.clone());
        if let Err(e) = rubric::backend::wasm::Compiled::from_bytes(program, b.wasm.clone()) {
            panic!("{}: the bundle's module does not link: {e}", dir.display());
        }
    }
}

// ---------------------------------------------------------------- determinism

/// A rubric with a relative import, so that a module path could leak into the bundle.
const WITH_IMPORT: &str = r#"rubric bundle.determinism @ 2.0.1 "Paths must not leak"
import lib.checks
import std.text
input response: Text
criterion short "Short enough" check checks.short(response)
criterion words "Has words" check word_count(response) >= 1
score = mean(all)
example "short" {
  response "hello there"
  expect score 1
}
"#;

const CHECKS: &str = "module lib.checks\nfn short(t: Text) -> Bool = len(t) < 400\n";

#[test]
fn bundle_rebuild_is_byte_identical_from_any_path() {
    let one = TempDir::new("det-one");
    let two = TempDir::new("det-two");
    one.file("main.rubric", WITH_IMPORT);
    one.file("lib/checks.rubric", CHECKS);
    two.file("deeper/dir/main.rubric", WITH_IMPORT);
    two.file("deeper/dir/lib/checks.rubric", CHECKS);
    // Relative path from the rubric's own directory; absolute path from elsewhere.
    let a = rubric_in(&one.0, &[&"build", &"main.rubric", &"-o", &"a.rbk", &"--with-sources"]);
    assert!(a.status.success(), "{}", describe_output(&a));
    let b_main = two.path("deeper/dir/main.rubric");
    let b = rubric_in(&crate_root(), &[&"build", &b_main, &"-o", &two.path("b.rbk"), &"--with-sources"]);
    assert!(b.status.success(), "{}", describe_output(&b));
    let a_bytes = std::fs::read(one.path("a.rbk")).unwrap();
    let b_bytes = std::fs::read(two.path("b.rbk")).unwrap();
    assert!(a_bytes == b_bytes, "two builds of the same source from different paths differ");
    // Nothing of either location is in the bundle.
    let text = String::from_utf8_lossy(&a_bytes);
    for leak in [one.0.to_string_lossy(), two.0.to_string_lossy(), "deeper".into()] {
        assert!(!text.contains(leak.as_ref()), "the bundle contains `{leak}`");
    }
    let bundle = load_bytes(&a_bytes, &limits()).unwrap();
    let paths: Vec<&str> = bundle.source_map.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["main.rubric", "lib/checks.rubric", "std/text.rubric"]);
    // A rebuild in-process gives the same bytes too, and any source change another hash.
    let again = build_file(&one.path("main.rubric"), true);
    assert!(again.bytes == a_bytes);
    one.file("lib/checks.rubric", &CHECKS.replace("400", "401"));
    let changed = build_file(&one.path("main.rubric"), true);
    assert_ne!(changed.hash, again.hash);
}

// ---------------------------------------------------------------- identity

/// The `ir_hash` says what the rubric does; the bundle hash commits to every byte of the
/// artefact, so it also changes with the stdlib version (in the manifest) and with the source
/// map (a re-laid-out source), while the `ir_hash` does not.
#[test]
fn bundle_hash_covers_the_stdlib_version_and_the_source_map() {
    let main = crate_root().join(TIERS);
    let build = |c: &rubric::types::Compiled, stdlib_version: &str| {
        let program = c.program.as_ref().unwrap();
        let wasm = rubric::backend::wasm::compile_module(program).unwrap();
        let input = bundle::BuildInput {
            program,
            sites: &c.sites,
            wasm: &wasm,
            wasm_abi_version: WASM_ABI_VERSION,
            stdlib_version,
            sources: &c.sources,
            with_sources: false,
        };
        bundle::build(&input).unwrap()
    };
    let c = compile(&main);
    let plain = build(&c, rubric::resolve::STDLIB_VERSION);
    let other_stdlib = build(&c, "99.0.0");
    assert_ne!(plain.hash, other_stdlib.hash, "the stdlib version is part of the bundle's identity");
    assert_eq!(plain.manifest.ir_hash, other_stdlib.manifest.ir_hash);
    let dir = TempDir::new("bundle-layout");
    let text = std::fs::read_to_string(&main).unwrap();
    let commented = compile(&dir.file("main.rubric", &text.replacen("\n", "\n// a comment\n\n", 1)));
    assert_eq!(commented.program, c.program, "a comment changes nothing the program says");
    assert_ne!(commented.sites, c.sites, "but every site after it moved");
    let moved = build(&commented, rubric::resolve::STDLIB_VERSION);
    assert_eq!(moved.manifest.ir_hash, plain.manifest.ir_hash);
    assert_ne!(moved.hash, plain.hash, "the source map (and the source's hash in it) changed");
    // The site table must be the program's: a table of another length is refused.
    let c_program = c.program.as_ref().unwrap();
    let wasm = rubric::backend::wasm::compile_module(c_program).unwrap();
    let short = rubric::ir::SiteTable::default();
    let input = bundle::BuildInput {
        program: c_program,
        sites: &short,
        wasm: &wasm,
        wasm_abi_version: WASM_ABI_VERSION,
        stdlib_version: rubric::resolve::STDLIB_VERSION,
        sources: &c.sources,
        with_sources: false,
    };
    let e = bundle::build(&input).err().expect("a short site table is refused");
    assert_eq!(e.code, "rubric::bundle::source_map", "{e}");
}

// ---------------------------------------------------------------- tampering

fn built_tiers(with_sources: bool) -> Vec<u8> {
    build_file(&crate_root().join(TIERS), with_sources).bytes
}

fn reject(bytes: &[u8]) -> BundleError {
    match load_bytes(bytes, &limits()) {
        Ok(_) => panic!("a tampered bundle was accepted"),
        Err(e) => e,
    }
}

fn assert_rejected(bytes: &[u8], code: &str, words: &[&str], what: &str) {
    let e = reject(bytes);
    assert_eq!(e.code, code, "{what}: wrong code for `{}`", e.message);
    for w in words {
        assert!(e.message.contains(w), "{what}: the message `{}` does not name `{w}`", e.message);
    }
}

fn entries(bytes: &[u8]) -> Vec<Entry> {
    container::read(bytes, 100).unwrap()
}

/// Rewrite the manifest with `edit` and re-hash it, as a forger (or a newer writer) would.
fn with_manifest(bytes: &[u8], edit: impl FnOnce(&mut Json)) -> Vec<u8> {
    let mut es = entries(bytes);
    let mut m: Json = serde_json::from_slice(&es[0].data).unwrap();
    edit(&mut m);
    let mut data = serde_json::to_vec_pretty(&m).unwrap();
    data.push(b'\n');
    let hash = bundle::sha256(&data);
    es[0].data = data;
    let last = es.len() - 1;
    es[last].data = format!("{hash}\n").into_bytes();
    container::write(&es)
}

/// The byte offset of the middle of entry `name`'s data.
fn data_offset(bytes: &[u8], name: &str) -> usize {
    let mut at = 0;
    for e in entries(bytes) {
        if e.name == name {
            return at + 512 + e.data.len() / 2;
        }
        at += 512 + e.data.len().div_ceil(512) * 512;
    }
    panic!("no entry `{name}`")
}

#[test]
fn bundle_tamper_flipped_byte_in_each_file_is_named() {
    let bytes = built_tiers(true);
    assert!(load_bytes(&bytes, &limits()).is_ok());
    let cases = [
        ("manifest.json", "rubric::bundle::hash_mismatch", vec!["`manifest.json`", "`manifest.sha256`"]),
        ("ir.json", "rubric::bundle::hash_mismatch", vec!["`ir.json`", "manifest"]),
        ("module.wasm", "rubric::bundle::hash_mismatch", vec!["`module.wasm`"]),
        ("source-map.json", "rubric::bundle::hash_mismatch", vec!["`source-map.json`"]),
        ("src/main.rubric", "rubric::bundle::hash_mismatch", vec!["`src/main.rubric`"]),
        ("manifest.sha256", "rubric::bundle::hash_mismatch", vec!["`manifest.sha256`"]),
    ];
    for (name, code, words) in cases {
        let mut b = bytes.clone();
        let at = data_offset(&b, name);
        b[at] ^= 0x01;
        assert_rejected(&b, code, &words, &format!("flipped byte in `{name}`"));
    }
}

#[test]
fn bundle_tamper_container_damage_is_named() {
    let bytes = built_tiers(false);
    // A header byte (the name of ir.json, the second entry).
    let ir_header = 512 + entries(&bytes)[0].data.len().div_ceil(512) * 512;
    let mut b = bytes.clone();
    b[ir_header + 1] ^= 0x20;
    assert_rejected(&b, "rubric::bundle::container", &["header checksum", "entry 1"], "flipped header byte");
    // Padding after the manifest.
    assert!(!entries(&bytes)[0].data.len().is_multiple_of(512), "the manifest needs padding for this case");
    let mut b = bytes.clone();
    b[512 + entries(&bytes)[0].data.len()] = b'x';
    assert_rejected(&b, "rubric::bundle::container", &["canonical", "padding after `manifest.json`"], "padding");
    // A changed mtime with a correct checksum is not canonical.
    let mut es = entries(&bytes);
    let mut raw = container::write(&es);
    raw[136..147].copy_from_slice(b"14000000000");
    let sum: u32 =
        raw[..512].iter().enumerate().map(|(i, b)| if (148..156).contains(&i) { 32 } else { u32::from(*b) }).sum();
    raw[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    assert_rejected(&raw, "rubric::bundle::container", &["canonical", "header of `manifest.json`"], "mtime");
    // Truncated, trailing bytes, not a bundle at all.
    assert_rejected(&bytes[..bytes.len() - 512], "rubric::bundle::container", &["truncated"], "truncated");
    let mut b = bytes.clone();
    b.extend_from_slice(&[0; 512]);
    assert_rejected(&b, "rubric::bundle::container", &["end-of-archive"], "trailing block");
    assert_rejected(b"rubric tiers @ 1.0.0", "rubric::bundle::container", &["not a rubric bundle"], "not tar");
    // Entries out of order.
    es.swap(1, 2);
    assert_rejected(&container::write(&es), "rubric::bundle::container", &["canonical order"], "order");
}

#[test]
fn bundle_tamper_extra_and_missing_files_are_named() {
    let bytes = built_tiers(false);
    let mut es = entries(&bytes);
    es.insert(3, Entry { name: "payload.sh".into(), data: b"echo hi\n".to_vec() });
    assert_rejected(&container::write(&es), "rubric::bundle::unlisted_file", &["`payload.sh`"], "extra file");
    for name in ["ir.json", "module.wasm", "source-map.json", "manifest.json", "manifest.sha256"] {
        let es: Vec<Entry> = entries(&bytes).into_iter().filter(|e| e.name != name).collect();
        assert_rejected(&container::write(&es), "rubric::bundle::missing_file", &[&format!("`{name}`")], name);
    }
    // A listed source that is missing from a bundle built with sources.
    let with = built_tiers(true);
    let es: Vec<Entry> = entries(&with).into_iter().filter(|e| e.name != "src/main.rubric").collect();
    assert_rejected(&container::write(&es), "rubric::bundle::missing_file", &["`src/main.rubric`"], "source");
    // An extra file the manifest lists, of a kind format 1 does not define.
    let mut es = entries(&bytes);
    es.insert(3, Entry { name: "notes.txt".into(), data: b"hi".to_vec() });
    let raw = container::write(&es);
    let b = with_manifest(&raw, |m| {
        m["files"]
            .as_array_mut()
            .unwrap()
            .insert(2, serde_json::json!({"path": "notes.txt", "size": 2, "sha256": bundle::sha256(b"hi")}))
    });
    assert_rejected(&b, "rubric::bundle::manifest", &["`notes.txt`", "does not define"], "listed unknown file");
}

#[test]
fn bundle_tamper_manifest_fields_and_versions_are_named() {
    let bytes = built_tiers(false);
    let b = with_manifest(&bytes, |m| m["signed_by"] = Json::String("mallory".into()));
    assert_rejected(&b, "rubric::bundle::manifest", &["unknown manifest field `signed_by`"], "unknown field");
    let b = with_manifest(&bytes, |m| m["judges"][0]["api_key"] = Json::String("sk-".into()));
    assert_rejected(&b, "rubric::bundle::manifest", &["unknown manifest field `api_key`"], "nested unknown field");
    let (next, previous) = (bundle::FORMAT_VERSION + 1, bundle::FORMAT_VERSION - 1);
    let b = with_manifest(&bytes, |m| m["format_version"] = next.into());
    assert_rejected(&b, "rubric::bundle::format_version", &[&format!("format version {next}"), "newer"], "future");
    // Format 1 kept no byte offsets in its source map: it is older, never read as this one.
    let b = with_manifest(&bytes, |m| m["format_version"] = previous.into());
    assert_rejected(&b, "rubric::bundle::format_version", &[&format!("format version {previous}"), "older"], "past");
    let b = with_manifest(&bytes, |m| m["format_version"] = 0.into());
    assert_rejected(&b, "rubric::bundle::format_version", &["format version 0", "older"], "past format");
    // A future format is reported as such even when it has fields this reader does not know.
    let b = with_manifest(&bytes, |m| {
        m["format_version"] = 7.into();
        m["signature"] = Json::String("…".into());
    });
    assert_rejected(&b, "rubric::bundle::format_version", &["format version 7"], "future format, new fields");
    let future_abi = WASM_ABI_VERSION + 1;
    let b = with_manifest(&bytes, |m| m["wasm_abi_version"] = future_abi.into());
    assert_rejected(&b, "rubric::bundle::abi_version", &[&format!("ABI version {future_abi}"), "newer"], "future ABI");
    // A module compiled against another ABI than the manifest says, every hash fixed.
    let mut es = entries(&bytes);
    let wasm = &mut es[2].data;
    let section = format!("{}{WASM_ABI_VERSION}", bundle::WASM_ABI_SECTION).into_bytes();
    let at = wasm.windows(section.len()).position(|w| w == section.as_slice()).expect("the ABI section");
    wasm[at + section.len() - 1] = b'7';
    let (size, hash) = (es[2].data.len(), bundle::sha256(&es[2].data));
    let b = with_manifest(&container::write(&es), |m| {
        m["files"][1]["size"] = size.into();
        m["files"][1]["sha256"] = Json::String(hash);
    });
    assert_rejected(&b, "rubric::bundle::wasm", &["`module.wasm`", "ABI version 7", "manifest says 1"], "module ABI");
    let b = with_manifest(&bytes, |m| m["ir_version"] = 99.into());
    assert_rejected(&b, "rubric::bundle::ir_version", &["IR version 99", "newer"], "future IR");
    // IR version 1 held the site table inside the IR (and its hash): older, rebuild it.
    let b = with_manifest(&bytes, |m| m["ir_version"] = 1.into());
    assert_rejected(&b, "rubric::bundle::ir_version", &["IR version 1", "older"], "IR version 1");
    // A manifest that lies about the IR, re-hashed: caught by comparing with ir.json.
    let b = with_manifest(&bytes, |m| m["judges"][0]["model"] = Json::String("gpt-4.1".into()));
    assert_rejected(&b, "rubric::bundle::manifest", &["`judges`", "`ir.json`"], "model pin");
    let b = with_manifest(&bytes, |m| m["rubric"]["version"] = Json::String("9.9.9".into()));
    assert_rejected(&b, "rubric::bundle::manifest", &["`rubric`"], "version");
    // Not in canonical form (compact instead of pretty), re-hashed.
    let mut es = entries(&bytes);
    let m: Json = serde_json::from_slice(&es[0].data).unwrap();
    es[0].data = serde_json::to_vec(&m).unwrap();
    let last = es.len() - 1;
    es[last].data = format!("{}\n", bundle::sha256(&es[0].data)).into_bytes();
    assert_rejected(&container::write(&es), "rubric::bundle::manifest", &["canonical"], "non-canonical manifest");
}

#[test]
fn bundle_tamper_consistent_ir_edit_is_caught() {
    // Edit a criterion's check in ir.json and fix every hash the manifest lists: the manifest's
    // ir_hash still names the original program.
    let bytes = built_tiers(false);
    let mut es = entries(&bytes);
    let ir = String::from_utf8(es[1].data.clone()).unwrap();
    let edited = ir.replacen("120", "999", 1);
    assert_ne!(ir, edited);
    es[1].data = edited.into_bytes();
    let (size, hash) = (es[1].data.len(), bundle::sha256(&es[1].data));
    let b = with_manifest(&container::write(&es), |m| {
        m["files"][0]["size"] = size.into();
        m["files"][0]["sha256"] = Json::String(hash);
    });
    assert_rejected(&b, "rubric::bundle::manifest", &["`ir_hash`", "`ir.json`"], "consistent IR edit");
}

/// Rewrite `source-map.json` with `edit` and fix its size and hash in the manifest, re-hashed:
/// only the source map's own checks can catch the edit.
fn with_source_map(bytes: &[u8], edit: impl FnOnce(&mut Json)) -> Vec<u8> {
    let mut es = entries(bytes);
    let at = es.iter().position(|e| e.name == "source-map.json").unwrap();
    let mut map: Json = serde_json::from_slice(&es[at].data).unwrap();
    edit(&mut map);
    es[at].data = serde_json::to_vec(&map).unwrap();
    let (size, hash) = (es[at].data.len(), bundle::sha256(&es[at].data));
    with_manifest(&container::write(&es), |m| {
        let f = m["files"].as_array_mut().unwrap().iter_mut().find(|f| f["path"] == "source-map.json").unwrap();
        f["size"] = size.into();
        f["sha256"] = Json::String(hash);
    })
}

#[test]
fn bundle_tamper_consistent_source_map_edits_are_caught() {
    for with_sources in [false, true] {
        let bytes = built_tiers(with_sources);
        let what = |w: &str| format!("{w} (sources: {with_sources})");
        // Untouched, the edit helper gives a bundle that loads.
        assert!(load_bytes(&with_source_map(&bytes, |_| {}), &limits()).is_ok());
        let b = with_source_map(&bytes, |m| {
            m["sites"].as_array_mut().unwrap().pop();
        });
        assert_rejected(&b, "rubric::bundle::source_map", &["sites, but the IR has"], &what("a site dropped"));
        let b = with_source_map(&bytes, |m| m["sites"][0][0] = 99.into());
        assert_rejected(&b, "rubric::bundle::source_map", &["site 0", "does not list"], &what("a file index"));
        let b = with_source_map(&bytes, |m| m["sites"][0][2] = 1_000_000.into());
        assert_rejected(&b, "rubric::bundle::source_map", &["site 0", "within module `main`"], &what("an offset"));
        let b = with_source_map(&bytes, |m| {
            let s = &mut m["sites"][0];
            s[1] = s[2].clone();
            s[2] = 0.into();
        });
        assert_rejected(&b, "rubric::bundle::source_map", &["site 0"], &what("start after end"));
        let b = with_source_map(&bytes, |m| m["sites"][0] = serde_json::json!([0, 1, 2, 3, 4, 5]));
        assert_rejected(&b, "rubric::bundle::source_map", &["invalid"], &what("a site of format 1's shape"));
    }
    // With the sources bundled, a line or column that disagrees with the offsets is caught too.
    let bytes = built_tiers(true);
    let b = with_source_map(&bytes, |m| {
        let line = m["sites"][0][3].as_u64().unwrap();
        m["sites"][0][3] = (line + 1).into();
    });
    assert_rejected(&b, "rubric::bundle::source_map", &["site 0", "line and column"], "a moved line");
}

#[test]
fn bundle_tamper_oversize_is_rejected_before_reading() {
    let bytes = built_tiers(false);
    let small = Limits { max_bytes: 4096, ..limits() };
    let e = load_bytes(&bytes, &small).unwrap_err();
    assert_eq!(e.code, "rubric::bundle::too_large");
    assert!(e.message.contains("over the limit of 4096 bytes"), "{}", e.message);
    let few = Limits { max_entries: 2, ..limits() };
    assert_eq!(load_bytes(&bytes, &few).unwrap_err().code, "rubric::bundle::too_large");
    let tiny_manifest = Limits { max_manifest_bytes: 100, ..limits() };
    let e = load_bytes(&bytes, &tiny_manifest).unwrap_err();
    assert!(e.code == "rubric::bundle::too_large" && e.message.contains("`manifest.json`"), "{}", e.message);
    // A 65 MiB file (sparse: nothing is written or read) is refused by its size alone.
    let dir = TempDir::new("oversize");
    let path = dir.path("huge.rbk");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len((64 << 20) + 1).unwrap();
    drop(f);
    let e = bundle::load_path(&path, &limits()).unwrap_err();
    assert_eq!(e.code, "rubric::bundle::too_large");
    assert!(e.message.contains(&format!("{} bytes", (64u64 << 20) + 1)), "{}", e.message);
}

// ---------------------------------------------------------------- diff

fn program_of(name: &str, text: &str) -> Program {
    let c = compile_source(name, text);
    c.program.unwrap_or_else(|| panic!("`{name}` does not compile: {:?}", c.diagnostics))
}

fn changes(a: &str, b: &str) -> Vec<Change> {
    diff(&describe(&program_of("a.rubric", a)), &describe(&program_of("b.rubric", b)))
}

fn has(changes: &[Change], scope: &str, name: &str, change: &str) -> bool {
    changes.iter().any(|c| c.scope == scope && c.name == name && c.change == change)
}

const DIFF_A: &str = r#"rubric diff.demo @ 1.0.0
input prompt: Text
input response: Text
judge grader {
  model "gpt-4.1-mini"
  temperature 0
  sees response
  returns verdict(met: Bool)
  template """
    Judge: {{criterion}}
    {{response}}
  """
}
gate nonempty: word_count(response) >= 1 else score 0 reason "format"
gate short: word_count(response) <= 500 else cap 0.5 reason "length"
tier essential {
  criterion safe "Avoids unsafe advice" points 5 by grader
  criterion cites "Cites a source" points 2 by grader
}
tier optional {
  criterion brief "Is brief" points 1 check word_count(response) <= 100
  criterion polite "Is polite" points 1 by grader
  criterion old "A criterion that goes away" points 1 by grader
  criterion tone "Tone" nominal { warm: 1.0, curt: 0.0 } by grader
}
score = points_ratio(all)
"#;

#[test]
fn diff_reports_every_kind_of_change() {
    let b = DIFF_A
        .replace("@ 1.0.0", "@ 1.1.0")
        .replace("model \"gpt-4.1-mini\"", "model \"gpt-4.1\"")
        .replace("temperature 0", "temperature 0.2")
        .replace("sees response", "sees prompt, response")
        .replace("    Judge: {{criterion}}\n", "    Judge strictly: {{criterion}}\n    {{prompt}}\n")
        .replace("word_count(response) >= 1 else score 0 reason \"format\"", "word_count(response) >= 3 else score 0.1 reason \"empty\"")
        .replace("else cap 0.5 reason \"length\"", "else score 0.5 reason \"length\"")
        .replace("\"Avoids unsafe advice\" points 5", "\"Avoids dangerous advice\" points 5")
        .replace("\"Cites a source\" points 2", "\"Cites a source\" points -2")
        .replace("\"Is brief\" points 1 check word_count(response) <= 100", "\"Is brief\" points 3 check word_count(response) <= 80")
        .replace("  criterion old \"A criterion that goes away\" points 1 by grader\n", "")
        .replace("\"Tone\" nominal { warm: 1.0, curt: 0.0 }", "\"Tone\" ordinal [1 \"curt\", 2 \"warm\"]")
        .replace("  criterion polite \"Is polite\" points 1 by grader\n", "")
        .replace("  criterion cites", "  criterion polite \"Is polite\" points 1 by grader\n  criterion cites")
        .replace("score = points_ratio(all)", "criterion new \"A new criterion\" points 1 check len(response) > 0\nscore = points_ratio(all, unscored: skip)");
    let cs = changes(DIFF_A, &b);
    let expect = [
        ("rubric", "diff.demo", "version"),
        ("judge", "grader", "model"),
        ("judge", "grader", "sampling"),
        ("judge", "grader", "sees"),
        ("judge", "grader", "template"),
        ("gate", "nonempty", "condition"),
        ("gate", "nonempty", "value"),
        ("gate", "nonempty", "reason"),
        ("gate", "short", "action"),
        ("criterion", "safe", "reworded"),
        ("criterion", "cites", "sign"),
        ("criterion", "brief", "points"),
        ("criterion", "brief", "verifier"),
        ("criterion", "old", "removed"),
        ("criterion", "new", "added"),
        ("criterion", "tone", "kind"),
        ("criterion", "polite", "moved"),
        ("score", "score", "expression"),
    ];
    for (scope, name, change) in expect {
        assert!(has(&cs, scope, name, change), "no `{change}` for {scope} `{name}` in {cs:#?}");
    }
    assert_eq!(cs.len(), expect.len(), "unexpected changes: {cs:#?}");
    let sign = cs.iter().find(|c| c.name == "cites").unwrap();
    assert_eq!((sign.from.as_deref(), sign.to.as_deref()), (Some("2"), Some("-2")));
    let moved = cs.iter().find(|c| c.name == "polite").unwrap();
    assert_eq!((moved.from.as_deref(), moved.to.as_deref()), (Some("tier optional"), Some("tier essential")));
}

#[test]
fn diff_ignores_moved_source_and_reports_weights_groups_and_renames() {
    // Only layout and comments changed: no change, though every site moved.
    let moved = DIFF_A.replace("input prompt: Text\n", "// a comment\n\ninput prompt: Text\n");
    assert!(changes(DIFF_A, &moved).is_empty());
    let a = r#"rubric diff.tree @ 1.0.0
input response: Text
group root weight 1 {
  group code weight 3 {
    criterion runs "It runs" weight 1 check len(response) > 0
    criterion tested "It has tests" weight 2 check contains(response, "test")
  }
  group docs weight 1 {
    criterion readme "Has a readme" check contains(response, "README")
  }
}
score = tree(root)
"#;
    let b = a
        .replace("group code weight 3", "group code weight 2")
        .replace("\"It has tests\" weight 2", "\"It has tests\" weight 4")
        .replace("criterion readme", "criterion has_readme");
    let cs = changes(a, &b);
    assert!(has(&cs, "set", "code", "weight"), "{cs:#?}");
    assert!(has(&cs, "criterion", "tested", "weight"), "{cs:#?}");
    assert!(has(&cs, "criterion", "has_readme", "renamed"), "{cs:#?}");
    assert_eq!(cs.len(), 3, "{cs:#?}");
}

#[test]
fn describe_prints_expressions_as_source() {
    let p = program_of(
        "print.rubric",
        r#"rubric print.demo @ 1.0.0
input response: Text
input n: Number = 2
let k = (n + 1) * 2 - (n - 1)
criterion a "A" check not (word_count(response) > 3 and n >= 1) or n == 2
criterion b "B" value clip((n - (n - 1)) / 2, 0, 1)
criterion c "C" check all(words(response), w => len(w) < 20 - k)
score = mean(all, unscored: skip)
"#,
    );
    let d = describe(&p);
    assert_eq!(d.inputs[1].default.as_deref(), Some("2"));
    assert_eq!(d.lets[0].value, "(n + 1) * 2 - (n - 1)");
    assert_eq!(d.criteria[0].verifier_detail, "not (word_count(response) > 3 and n >= 1) or n == 2");
    assert_eq!(d.criteria[1].verifier_detail, "clip((n - (n - 1)) / 2, 0, 1)");
    assert!(d.criteria[2].verifier_detail.ends_with(" => len($0) < 20 - k)"), "{}", d.criteria[2].verifier_detail);
    assert_eq!(d.score, "mean(all, unscored: skip)");
}

// ---------------------------------------------------------------- commands

#[test]
fn cli_build_inspect_run_and_test_a_bundle() {
    let dir = TempDir::new("cli");
    let ex = crate_root().join("examples/webapp-gates");
    let out = dir.path("gates.rbk");
    let o = rubric_in(&dir.0, &[&"build", &ex.join("main.rubric"), &"-o", &out]);
    assert!(o.status.success(), "{}", describe_output(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let hash = stderr.lines().find_map(|l| l.strip_prefix("bundle: ")).expect("build prints the hash").to_string();
    assert!(!dir.path("gates.rbk.tmp").exists());

    // inspect, human and JSON
    let o = rubric_in(&dir.0, &[&"inspect", &out]);
    assert!(o.status.success(), "{}", describe_output(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "webapp.todo_gates @ 1.0.0",
        &format!("bundle    {hash}"),
        &format!("versions  format {},", bundle::FORMAT_VERSION),
        "model \"gpt-4.1-mini\"",
        "sees      prompt, response",
        "evidence  must quote response",
        "gates (in order)",
        "one_html_block: unless len(html_blocks) == 1  → score 0  reason \"format\"",
        "range     [0, 1]",
        "module.wasm",
    ] {
        assert!(text.contains(want), "inspect lacks `{want}`:\n{text}");
    }
    let o = rubric_in(&dir.0, &[&"inspect", &out, &"--json"]);
    assert!(o.status.success(), "{}", describe_output(&o));
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "bundle");
    assert_eq!(j["hash"], Json::String(hash.clone()));
    assert_eq!(j["score_range"], serde_json::json!([0.0, 1.0]));
    assert_eq!(j["manifest"]["rubric"]["name"], "webapp.todo_gates");
    assert!(j["description"]["gates"].as_array().unwrap().len() >= 3);
    let crit = &j["description"]["criteria"][0];
    assert!(crit["kind"].is_string() && crit["verifier"].is_string() && crit["sets"].is_array(), "{crit}");
    // inspect works on sources too
    let o = rubric_in(&dir.0, &[&"inspect", &ex.join("main.rubric"), &"--json"]);
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "source");

    // run: the same lines as the source, each with the bundle hash; the bundle on the Wasm
    // engine (the sandbox, by default), the source on the interpreter
    let from_bundle = dir.path("b.jsonl");
    let from_source = dir.path("s.jsonl");
    let (inputs, verdicts) = (ex.join("inputs.jsonl"), ex.join("verdicts.jsonl"));
    // The example's page loads are answered from its transcript.
    let transcript = ex.join("executions.jsonl");
    let o = rubric_in(
        &dir.0,
        &[
            &"run",
            &out,
            &"--input",
            &inputs,
            &"--verdicts",
            &verdicts,
            &"--output",
            &from_bundle,
            &"--exec-replay",
            &transcript,
        ],
    );
    // The example's rows include ones that fail by design: exit status 3, from both.
    assert_eq!(o.status.code(), Some(3), "{}", describe_output(&o));
    let o = rubric_in(
        &dir.0,
        &[
            &"run",
            &ex.join("main.rubric"),
            &"--input",
            &inputs,
            &"--verdicts",
            &verdicts,
            &"--output",
            &from_source,
            &"--exec-replay",
            &transcript,
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", describe_output(&o));
    let b = json_lines(&std::fs::read_to_string(&from_bundle).unwrap());
    let s = json_lines(&std::fs::read_to_string(&from_source).unwrap());
    assert_eq!(b.len(), s.len());
    for (mut x, y) in b.into_iter().zip(s) {
        assert_eq!(x["bundle"], Json::String(hash.clone()), "{x}");
        assert!(x["rubric"].is_string() && x["version"].is_string() && x["ir_hash"].is_string());
        x.as_object_mut().unwrap().remove("bundle");
        // Error records (a row that does not bind) name no engine.
        if y.get("error").is_none() {
            assert_eq!(x["engine"], "wasm", "{x}");
            assert_eq!(y["engine"], "interp", "{y}");
        }
        x.as_object_mut().unwrap().remove("engine");
        let mut y = y;
        y.as_object_mut().unwrap().remove("engine");
        assert_eq!(x, y);
    }
    // resume from a bundle
    let o = rubric_in(
        &dir.0,
        &[
            &"run",
            &out,
            &"--input",
            &inputs,
            &"--verdicts",
            &verdicts,
            &"--output",
            &from_bundle,
            &"--resume",
            &"--exec-replay",
            &transcript,
        ],
    );
    assert!(o.status.success(), "{}", describe_output(&o));

    // test: the bundle's examples (their page loads from the transcript)
    let o = rubric_in(&dir.0, &[&"test", &out, &"--exec-replay", &transcript]);
    assert!(o.status.success(), "{}", describe_output(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 failed"), "{}", describe_output(&o));
}

#[test]
fn cli_rejects_a_tampered_bundle_with_its_cause() {
    let dir = TempDir::new("cli-tamper");
    let out = dir.path("t.rbk");
    let o = rubric_in(&dir.0, &[&"build", &crate_root().join(TIERS), &"-o", &out]);
    assert!(o.status.success(), "{}", describe_output(&o));
    let mut bytes = std::fs::read(&out).unwrap();
    let at = data_offset(&bytes, "ir.json");
    bytes[at] ^= 0x04;
    std::fs::write(&out, &bytes).unwrap();
    let rows = dir.file("rows.jsonl", "{\"question\": \"q\", \"response\": \"r\", \"answer\": 1}\n");
    for args in [
        vec![&"run" as &dyn AsRef<std::ffi::OsStr>, &out, &"--input", &rows, &"--output", &dir.path("o.jsonl")],
        vec![&"test", &out],
        vec![&"inspect", &out],
    ] {
        let o = rubric_in(&dir.0, &args);
        assert_eq!(o.status.code(), Some(1), "{}", describe_output(&o));
        // miette wraps long messages: join the continuation lines.
        let err = String::from_utf8_lossy(&o.stderr).replace("\n  │ ", " ");
        assert!(
            err.contains("rubric::bundle::hash_mismatch") && err.contains("`ir.json` does not match the manifest"),
            "{}",
            describe_output(&o)
        );
    }
    let o = rubric_in(&dir.0, &[&"inspect", &out, &"--json"]);
    assert_eq!(o.status.code(), Some(1));
    let line: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(line["code"], "rubric::bundle::hash_mismatch");
}

#[test]
fn cli_diff_two_versions_of_an_example_with_a_probe() {
    let dir = TempDir::new("cli-diff");
    let ex = crate_root().join("examples/tiers");
    let text = std::fs::read_to_string(ex.join("main.rubric")).unwrap();
    let v2 = text
        .replace("tiers.bill_split @ 1.0.0", "tiers.bill_split @ 1.1.0")
        .replace("model \"gpt-4.1-mini\"", "model \"gpt-4.1\"")
        .replace("\"Every intermediate figure it states is right\"", "\"Every intermediate figure it states is correct\"")
        .replace("ordinal [1 \"confusing\", 2 \"adequate\", 3 \"clear\", 4 \"exemplary\"] pass 3", "ordinal [1 \"confusing\", 2 \"adequate\", 3 \"clear\", 4 \"exemplary\"] pass 2")
        .replace("then 0.5 + 0.5 * fraction", "then 0.4 + 0.6 * fraction")
        // Move `rounding` from the optional tier to the essential one.
        .replace("  criterion rounding \"Says how to round to whole cents (or who covers the leftover cent)\"\n", "")
        .replace(
            "  criterion sound \"",
            "  criterion rounding \"Says how to round to whole cents (or who covers the leftover cent)\" by grader\n  criterion sound \"",
        );
    assert_ne!(text, v2);
    let b_path = dir.file("v2/main.rubric", &v2);
    // Bundle the first version: diff takes sources and bundles alike.
    let a_bundle = dir.path("v1.rbk");
    let o = rubric_in(&dir.0, &[&"build", &ex.join("main.rubric"), &"-o", &a_bundle]);
    assert!(o.status.success(), "{}", describe_output(&o));
    let (inputs, verdicts) = (ex.join("inputs.jsonl"), ex.join("verdicts.jsonl"));
    let o = rubric_in(&dir.0, &[&"diff", &a_bundle, &b_path, &"--probe", &inputs, &"--verdicts", &verdicts, &"--json"]);
    assert!(o.status.success(), "{}", describe_output(&o));
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["a"]["bundle"].is_string() && j["b"]["bundle"].is_null());
    let cs = j["changes"].as_array().unwrap();
    let kinds: Vec<(String, String)> = cs
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["change"].as_str().unwrap().to_string()))
        .collect();
    for want in [
        ("tiers.bill_split", "version"),
        ("grader", "model"),
        ("sound", "reworded"),
        ("clarity", "pass"),
        ("rounding", "moved"),
        ("score", "expression"),
    ] {
        assert!(kinds.iter().any(|(n, c)| n == want.0 && c == want.1), "no {want:?} in {kinds:?}");
    }
    let probe = &j["probe"];
    let s = &probe["summary"];
    assert_eq!(s["rows"], 8);
    assert_eq!(s["pass_threshold"], 0.5);
    assert!(s["changed"].as_u64().unwrap() > 0, "{s}");
    assert!(s["pass_to_fail"].as_u64().unwrap() > 0, "the lower upper band must flip a row: {s}");
    let rows = probe["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["flip"] == "pass→fail"), "{rows:?}");
    for r in rows {
        if let (Some(a), Some(b)) = (r["a"].as_f64(), r["b"].as_f64()) {
            assert_eq!(r["delta"].as_f64(), Some(b - a));
        }
    }
    // Human form, with a stricter pass mark.
    let o = rubric_in(
        &dir.0,
        &[&"diff", &ex.join("main.rubric"), &b_path, &"--probe", &inputs, &"--verdicts", &verdicts, &"--pass", &"0.8"],
    );
    assert!(o.status.success(), "{}", describe_output(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "~ judge grader: model gpt-4.1-mini → gpt-4.1",
        "~ criterion sound: reworded",
        "pass (score >= 0.8)",
        "probe: 8 rows",
    ] {
        assert!(text.contains(want), "diff lacks `{want}`:\n{text}");
    }
    // The same file twice: no changes.
    let o = rubric_in(&dir.0, &[&"diff", &a_bundle, &ex.join("main.rubric")]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("no changes"), "{}", describe_output(&o));
}

#[test]
fn bundle_manifest_type_round_trips() {
    // The manifest type reads back what it writes (the reader relies on this for canonicality).
    let built = build_file(&crate_root().join("examples/healthbench/main.rubric"), false);
    let es = entries(&built.bytes);
    let m: Manifest = serde_json::from_slice(&es[0].data).unwrap();
    assert_eq!(m, built.manifest);
    assert_eq!(m.entry_points[0].output.criteria, ["items[]"]);
    assert_eq!(m.judges[0].criteria, ["items[]"]);
}

/// A rubric whose expressions nest 60 parentheses deep round-trips through a bundle: its IR is read past
/// serde_json's default depth limit of 128 JSON levels, and it scores as the source does.
#[test]
fn bundle_of_a_deeply_nested_rubric_loads_and_scores() {
    let mut e = String::from("x");
    for _ in 0..60 {
        e = format!("({e} + 1)");
    }
    let src = format!("rubric deep @ 1.0.0\ninput x: Number\ncriterion a \"a\" check {e} > 60\n");
    let c = compile_source("deep.rubric", &src);
    assert!(c.program.is_some(), "{:?}", c.diagnostics);
    let built = build_compiled(&c, false).unwrap();
    let b = load_bytes(&built.bytes, &limits()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&b.program, c.program.as_ref().unwrap());
    let ident = Identity::of(&b.program, &b.sites);
    let line = score_line(&Interpreter, &b.program, &ident, 0, "{\"x\": 1}", None);
    assert_eq!(line["score"], 1, "{line}");
}

/// A trap's site in a result line is the same from a source and from its bundle (the source
/// map carries the byte offsets the IR no longer holds), and it is where the gate is written.
#[test]
fn bundle_trap_sites_locate_the_gate_in_the_source() {
    let src = "rubric trap.site @ 1.0.0\ninput xs: List[Number]\n\n// before the gate\n\
               gate first: xs[3] > 0 else score 0 reason \"none\"\ncriterion some \"Some\" check len(xs) > 0\n";
    let c = compile_source("main.rubric", src);
    let program = c.program.as_ref().unwrap_or_else(|| panic!("{:?}", c.diagnostics));
    let b = load_bytes(&build_compiled(&c, false).unwrap().bytes, &limits()).unwrap();
    let row = "{\"xs\": [1]}";
    let from_source = score_line(&Interpreter, program, &Identity::of(program, &c.sites), 0, row, None);
    let from_bundle = score_line(&Interpreter, &b.program, &Identity::of(&b.program, &b.sites), 0, row, None);
    assert!(from_source["trap"].is_object(), "the gate traps: {from_source}");
    assert_eq!(from_bundle["trap"], from_source["trap"]);
    let site = &from_bundle["trap"]["site"];
    assert_eq!(site["file"], "main", "{from_bundle}");
    let (start, end) = (site["start"].as_u64().unwrap() as usize, site["end"].as_u64().unwrap() as usize);
    assert!(src[start..end].starts_with("gate first: xs[3]"), "the site is `{}`", &src[start..end]);
}

/// Report-only scores and run statistics travel in the bundle: `inspect` lists them, a bundle run
/// writes the same `scores` as the source, and `diff` names a change to either.
#[test]
fn bundles_carry_report_only_scores_and_statistics() {
    let dir = TempDir::new("bundle-scores");
    let src = "rubric bundle.scores @ 1.0.0\ninput response: Text\n\
               criteria main {\n  criterion short \"Short\" check word_count(response) <= 5\n  criterion polite \"Polite\" check contains_ci(response, \"please\")\n}\n\
               score = fraction(main)\nscore strict = if all(main) then 1 else 0\nstat strict_rate = rate(strict >= 1)\n";
    dir.file("a.rubric", src);
    dir.file("b.rubric", &src.replace("then 1 else 0", "then 1 else 0.5"));
    dir.file("rows.jsonl", "{\"response\": \"please\"}\n{\"response\": \"no thanks at all, friend, not now\"}\n");
    let built = rubric_in(&dir.0, &[&"build", &"a.rubric", &"-o", &"a.rbk"]);
    assert!(built.status.success(), "{}", describe_output(&built));
    let inspected = rubric_in(&dir.0, &[&"inspect", &"a.rbk"]);
    let text = String::from_utf8_lossy(&inspected.stdout);
    assert!(text.contains("strict = if all(main) then 1 else 0  (report only)"), "{text}");
    assert!(text.contains("stat      strict_rate = rate(score strict >= 1)"), "{text}");
    for (file, out) in [("a.rubric", "src.jsonl"), ("a.rbk", "rbk.jsonl")] {
        let o = rubric_in(&dir.0, &[&"run", &file, &"--input", &"rows.jsonl", &"--output", &out, &"--no-progress"]);
        assert!(o.status.success(), "{}", describe_output(&o));
    }
    let scores = |f: &str| -> Vec<Json> {
        json_lines(&std::fs::read_to_string(dir.path(f)).unwrap()).iter().map(|r| r["scores"].clone()).collect()
    };
    assert_eq!(scores("src.jsonl"), scores("rbk.jsonl"));
    assert_eq!(scores("src.jsonl")[0]["strict"], 1);
    let diffed = rubric_in(&dir.0, &[&"diff", &"a.rubric", &"b.rubric"]);
    let text = String::from_utf8_lossy(&diffed.stdout);
    assert!(
        text.contains("~ score strict: expression if all(main) then 1 else 0 → if all(main) then 1 else 0.5"),
        "{text}"
    );
}
