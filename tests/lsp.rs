//! `rubric lsp` on the built binary: a client that speaks JSON-RPC with `Content-Length`
//! framing over the server's standard input and output, and checks each feature against the
//! command line (`rubric check --error-format json`, `rubric fmt --stdout`) on the same text:
//! diagnostics (codes, messages, ranges in UTF-16), hover, definition, completion, formatting,
//! errors for unknown methods, shutdown and exit. Also the VS Code package's grammar against
//! the pest grammar's keywords.

use crate::common::{crate_root, TempDir};
use serde_json::{json, Value as Json};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

/// How long any one message may take to arrive.
const WAIT: Duration = Duration::from_secs(60);

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Json>,
    next_id: i64,
    /// Notifications read while waiting for something else.
    notifications: Vec<Json>,
}

impl Client {
    /// Start `rubric lsp` and initialize it; returns the client and the `initialize` result.
    fn start() -> (Client, Json) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rubric"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, incoming) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut len = None;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length: ") {
                        len = Some(v.parse::<usize>().unwrap());
                    }
                }
                let mut body = vec![0; len.expect("a Content-Length header")];
                r.read_exact(&mut body).unwrap();
                if tx.send(serde_json::from_slice::<Json>(&body).unwrap()).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut c = Client { child, stdin, incoming, next_id: 0, notifications: vec![] };
        let init = c.request("initialize", json!({ "processId": null, "rootUri": null, "capabilities": {} }));
        c.notify("initialized", json!({}));
        (c, init["result"].clone())
    }

    fn send(&mut self, msg: &Json) {
        let body = serde_json::to_string(msg).unwrap();
        let stdin = self.stdin.as_mut().unwrap();
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Json {
        self.incoming.recv_timeout(WAIT).expect("the server answers in time")
    }

    /// Send a request and return its whole response (`result` or `error`).
    fn request(&mut self, method: &str, params: Json) -> Json {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let msg = self.recv();
            if msg["id"] == json!(id) && msg.get("method").is_none() {
                return msg;
            }
            self.notifications.push(msg);
        }
    }

    fn notify(&mut self, method: &str, params: Json) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// The next diagnostics published for `uri` (earlier ones already read included).
    fn diagnostics(&mut self, uri: &str) -> Vec<Json> {
        loop {
            let found = self
                .notifications
                .iter()
                .position(|n| n["method"] == "textDocument/publishDiagnostics" && n["params"]["uri"] == json!(uri));
            if let Some(i) = found {
                let n = self.notifications.remove(i);
                return n["params"]["diagnostics"].as_array().unwrap().clone();
            }
            let msg = self.recv();
            self.notifications.push(msg);
        }
    }

    fn open(&mut self, uri: &str, text: &str) {
        let doc = json!({ "uri": uri, "languageId": "rubric", "version": 1, "text": text });
        self.notify("textDocument/didOpen", json!({ "textDocument": doc }));
    }

    fn change(&mut self, uri: &str, version: i64, text: &str) {
        let params =
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": [{ "text": text }] });
        self.notify("textDocument/didChange", params);
    }

    /// `textDocument/METHOD` at byte `offset` of `text` (the document's text).
    fn at(&mut self, method: &str, uri: &str, text: &str, offset: usize) -> Json {
        let params = json!({ "textDocument": { "uri": uri }, "position": position(text, offset) });
        let r = self.request(&format!("textDocument/{method}"), params);
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    /// `shutdown` then `exit`; the server's exit code.
    fn shut_down(mut self) -> Option<i32> {
        let r = self.request("shutdown", json!(null));
        assert_eq!(r["result"], json!(null), "{r}");
        self.notify("exit", json!(null));
        self.stdin = None;
        wait(&mut self.child)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's exit code, waiting at most `WAIT`.
fn wait(child: &mut Child) -> Option<i32> {
    let start = std::time::Instant::now();
    while start.elapsed() < WAIT {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the server did not exit");
}

/// The LSP position (line, UTF-16 character) of byte `offset`, computed here independently of
/// the server.
fn position(text: &str, offset: usize) -> Json {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    json!({ "line": line, "character": text[line_start..offset].encode_utf16().count() })
}

fn range(text: &str, start: usize, end: usize) -> Json {
    json!({ "start": position(text, start), "end": position(text, end) })
}

fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// `rubric check --error-format json FILE`: one JSON object per diagnostic.
fn check_json(path: &Path) -> Vec<Json> {
    let o = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .args(["check", "--error-format", "json"])
        .arg(path)
        .output()
        .unwrap();
    crate::common::json_lines(&String::from_utf8(o.stdout).unwrap())
}

/// The server's diagnostics are the command line's: same code, severity, message (with the
/// help line after it) and range (the CLI's byte offsets in UTF-16 positions).
fn assert_same_as_check(lsp: &[Json], cli: &[Json], text: &str) {
    assert_eq!(lsp.len(), cli.len(), "server: {lsp:#?}\ncli: {cli:#?}");
    for (l, c) in lsp.iter().zip(cli) {
        assert_eq!(l["code"], c["code"]);
        let severity = match c["severity"].as_str().unwrap() {
            "error" => 1,
            "warning" => 2,
            _ => 3,
        };
        assert_eq!(l["severity"], json!(severity), "{l}");
        let message = match c["help"].as_str() {
            Some(h) => format!("{}\nhelp: {h}", c["message"].as_str().unwrap()),
            None => c["message"].as_str().unwrap().to_string(),
        };
        assert_eq!(l["message"], json!(message));
        let label = &c["labels"][0];
        let (start, end) = (label["start"].as_u64().unwrap() as usize, label["end"].as_u64().unwrap() as usize);
        assert_eq!(l["range"], range(text, start, end), "{l}\n{c}");
        assert_eq!(l["range"]["start"]["line"], json!(label["line"].as_u64().unwrap() - 1));
    }
}

const DEMO: &str = r#"rubric lsp.demo @ 1.0.0
input response: Text
judge grader {
  model "gpt-4.1-mini"
  temperature 0
  samples 3
  sees response
}
criterion brief "At most 50 words" check word_count(response) <= 50
criterion polite "Asks politely" by grader weight 2
score = if brief.met then weighted_mean(all) else 0
"#;

fn tiers() -> String {
    std::fs::read_to_string(crate_root().join("examples/tiers/main.rubric")).unwrap()
}

#[test]
fn lsp_initialize_announces_its_capabilities_and_exits_cleanly() {
    let (c, init) = Client::start();
    let caps = &init["capabilities"];
    assert_eq!(caps["textDocumentSync"], json!(1), "full sync: {init}");
    assert_eq!(caps["hoverProvider"], json!(true));
    assert_eq!(caps["definitionProvider"], json!(true));
    assert_eq!(caps["documentFormattingProvider"], json!(true));
    assert!(caps["completionProvider"].is_object(), "{init}");
    assert_eq!(init["serverInfo"]["name"], json!("rubric"));
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_diagnostics_are_rubric_checks_and_clear_when_fixed() {
    let dir = TempDir::new("lsp-diag");
    // examples/tiers with an unknown judge and a comparison of a number with a text
    let good = tiers();
    let bad = good.replace("by grader\n  criterion sound", "by gradr\n  criterion sound").replace("<= 120", "<= \"x\"");
    assert_ne!(bad, good);
    let path = dir.file("main.rubric", &bad);
    let cli = check_json(&path);
    assert!(cli.iter().filter(|d| d["severity"] == "error").count() >= 2, "{cli:?}");
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, &bad);
    let diags = c.diagnostics(&uri);
    assert_same_as_check(&diags, &cli, &bad);
    assert!(diags.iter().any(|d| d["code"] == "rubric::resolve::unknown_judge"));

    // fixed in the editor, not on disk: the diagnostics are those of the fixed text
    c.change(&uri, 2, &good);
    let diags = c.diagnostics(&uri);
    std::fs::write(&path, &good).unwrap();
    assert_same_as_check(&diags, &check_json(&path), &good);
    assert!(diags.iter().all(|d| d["severity"] == json!(3)), "only notes (the score range) remain: {diags:?}");

    // closing the document clears them
    c.notify("textDocument/didClose", json!({ "textDocument": { "uri": uri } }));
    assert_eq!(c.diagnostics(&uri), Vec::<Json>::new());
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_diagnostics_of_a_clean_rubric_are_empty() {
    let dir = TempDir::new("lsp-clean");
    // a score the checker can prove nothing about: nothing to report, not even a note
    let text = "rubric c @ 1.0.0\ninput n: Number\nscore = n\n";
    let path = dir.file("main.rubric", text);
    assert_eq!(check_json(&path), Vec::<Json>::new());
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, "rubric c @ 1.0.0\ninput n: Number\nscore = n +\n");
    assert_eq!(c.diagnostics(&uri)[0]["code"], json!("rubric::parse::syntax"));
    c.change(&uri, 2, text);
    assert_eq!(c.diagnostics(&uri), Vec::<Json>::new());
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_a_module_document_is_checked_as_its_importers_see_it() {
    let dir = TempDir::new("lsp-module");
    dir.file("lib/words.rubric", "module lib.words \"Words\"\n\nfn short(t: Text) -> Bool = word_count(t) < 5\n");
    // `lib.words` resolves against the rubric's directory, not `lib/`
    let text = "module lib.checks \"Checks\"\nimport lib.words\n\nfn terse(t: Text) -> Bool = words.short(t)\n";
    let path = dir.file("lib/checks.rubric", text);
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, text);
    // `rubric check` says a module is not a rubric; in an editor that is no news
    assert_eq!(c.diagnostics(&uri), Vec::<Json>::new());
    let broken = text.replace("words.short(t)", "words.shrt(t)");
    c.change(&uri, 2, &broken);
    let diags = c.diagnostics(&uri);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let at = broken.find("words.shrt").unwrap();
    assert!(
        diags[0]["range"]["start"] == position(&broken, at) || diags[0]["range"]["start"] == position(&broken, at + 6),
        "{diags:?}"
    );
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_an_error_in_an_imported_module_is_shown_at_its_import() {
    let dir = TempDir::new("lsp-import");
    let lib = "module lib.checks \"Checks\"\n\nfn polite(t: Text) -> Bool = contains_ci(t, \"please\" \n";
    let lib_path = dir.file("lib/checks.rubric", lib);
    let main = "rubric m @ 1.0.0\nimport lib.checks\ninput response: Text\ncriterion p \"Polite\" check checks.polite(response)\nscore = mean(all)\n";
    let path = dir.file("main.rubric", main);
    let cli = check_json(&path);
    let syntax = cli.iter().find(|d| d["code"] == "rubric::parse::syntax").expect("a syntax error in the module");
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, main);
    let diags = c.diagnostics(&uri);
    let d = diags.iter().find(|d| d["code"] == "rubric::parse::syntax").unwrap();
    let import = main.find("import lib.checks").unwrap();
    assert_eq!(d["range"], range(main, import, import + "import lib.checks".len()), "{d}");
    assert!(d["message"].as_str().unwrap().contains(syntax["message"].as_str().unwrap()), "{d}");
    assert!(d["message"].as_str().unwrap().starts_with("in `"), "{d}");
    let related = &d["relatedInformation"][0]["location"];
    assert_eq!(related["uri"], json!(file_uri(&lib_path)));
    let label = &syntax["labels"][0];
    let (start, end) = (label["start"].as_u64().unwrap() as usize, label["end"].as_u64().unwrap() as usize);
    assert_eq!(related["range"], range(lib, start, end));
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_positions_count_utf16_units_on_a_non_ascii_line() {
    let dir = TempDir::new("lsp-utf16");
    let text = "rubric u @ 1.0.0\ninput response: Text\ncriterion ok \"Réponse 🙂 claire\" check nope(response)\nscore = mean(all)\n";
    let path = dir.file("main.rubric", text);
    let cli = check_json(&path);
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, text);
    let diags = c.diagnostics(&uri);
    assert_same_as_check(&diags, &cli, text);
    let nope = text.find("nope").unwrap();
    let d = diags.iter().find(|d| d["range"]["start"]["line"] == json!(2)).expect("an error on the line");
    // 14 ASCII characters, `Réponse` (7), a space, 🙂 (two UTF-16 units), ` claire"` (8), ` check ` (7)
    assert_eq!(d["range"]["start"]["character"], json!(39), "{d}");
    assert_eq!(nope - text.find("criterion").unwrap(), 42, "bytes differ from UTF-16 units");
    // and back: a position after the emoji lands on `response`
    let response = text.find("(response)").unwrap() + 1;
    let hover = c.at("hover", &uri, text, response + 2);
    assert!(hover["contents"]["value"].as_str().unwrap().contains("input response: Text"), "{hover}");
    assert_eq!(hover["range"], range(text, response, response + "response".len()));
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_hover_shows_stdlib_docs_criteria_and_judges() {
    let text = tiers();
    let uri = file_uri(&crate_root().join("examples/tiers/main.rubric"));
    let (mut c, _) = Client::start();
    c.open(&uri, &text);
    // a stdlib function: its signature and its documentation from the intrinsic table
    let hover = c.at("hover", &uri, &text, text.find("word_count(response)").unwrap() + 2);
    let value = hover["contents"]["value"].as_str().unwrap();
    let intr = rubric::stdlib::lookup("word_count").next().unwrap().1;
    assert!(value.contains(intr.doc) && value.contains(intr.sig), "{value}");
    // a criterion id (in an example's `expect`): its text, its verifier and its weight
    let hover = c.at("hover", &uri, &text, text.find("expect correct").unwrap() + "expect ".len());
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(value.contains("**criterion** `correct`"), "{value}");
    assert!(value.contains("States the correct amount per person"), "{value}");
    assert!(value.contains("verifier: `check any(numbers(response)"), "{value}");
    assert!(value.contains("weight: 1 (default)"), "{value}");
    // a judged one takes its tier's judge
    let hover = c.at("hover", &uri, &text, text.find("criterion clarity").unwrap() + "criterion ".len());
    assert!(hover["contents"]["value"].as_str().unwrap().contains("judged by `grader`"), "{hover}");
    // a judge after `by`: its settings as declared
    let hover = c.at("hover", &uri, &text, text.find("by grader").unwrap() + 4);
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(value.contains("**judge** `grader`"), "{value}");
    assert!(value.contains("model \"gpt-4.1-mini\"") && value.contains("temperature 0"), "{value}");
    assert!(value.contains("sees question, response"), "{value}");
    // nothing under a number or a comment-free blank
    assert_eq!(c.at("hover", &uri, &text, text.find("0.5 + 0.5").unwrap()), json!(null));
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_definition_finds_criteria_judges_and_modules() {
    let dir = TempDir::new("lsp-def");
    let path = dir.file("main.rubric", DEMO);
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, DEMO);
    // a criterion id in `score`
    let def = c.at("definition", &uri, DEMO, DEMO.find("brief.met").unwrap() + 1);
    let decl = DEMO.find("criterion brief").unwrap() + "criterion ".len();
    assert_eq!(def, json!({ "uri": uri, "range": range(DEMO, decl, decl + "brief".len()) }));
    // a judge after `by`
    let def = c.at("definition", &uri, DEMO, DEMO.find("by grader").unwrap() + 3);
    let decl = DEMO.find("judge grader").unwrap() + "judge ".len();
    assert_eq!(def, json!({ "uri": uri, "range": range(DEMO, decl, decl + "grader".len()) }));

    // a module function and the module of an import, in a file on disk
    let lib = "module lib.checks \"Checks\"\n\n/// Whether it says please.\nfn polite(t: Text) -> Bool = contains_ci(t, \"please\")\n";
    let lib_path = dir.file("lib/checks.rubric", lib);
    let main = "rubric m @ 1.0.0\nimport lib.checks\ninput response: Text\ncriterion p \"Polite\" check checks.polite(response)\nscore = mean(all)\n";
    let main_uri = file_uri(&dir.file("other.rubric", main));
    c.open(&main_uri, main);
    let def = c.at("definition", &main_uri, main, main.find("polite(response)").unwrap() + 1);
    let decl = lib.find("polite(t").unwrap();
    assert_eq!(def, json!({ "uri": file_uri(&lib_path), "range": range(lib, decl, decl + "polite".len()) }));
    let hover = c.at("hover", &main_uri, main, main.find("polite(response)").unwrap() + 1);
    assert!(hover["contents"]["value"].as_str().unwrap().contains("Whether it says please."), "{hover}");
    let def = c.at("definition", &main_uri, main, main.find("lib.checks").unwrap() + 5);
    assert_eq!(def["uri"], json!(file_uri(&lib_path)), "{def}");
    // a stdlib function has no file to go to
    assert_eq!(c.at("definition", &uri, DEMO, DEMO.find("word_count").unwrap()), json!(null));
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_completion_offers_judges_after_by_and_criteria_in_score() {
    let text = tiers();
    let uri = file_uri(&crate_root().join("examples/tiers/main.rubric"));
    let (mut c, _) = Client::start();
    c.open(&uri, &text);
    let labels = |r: &Json| -> Vec<String> {
        r.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap().to_string()).collect()
    };
    // just after `by ` (before `grader`): the judges and nothing else
    let after_by = text.find("by grader\n  criterion sound").unwrap() + 3;
    assert_eq!(labels(&c.at("completion", &uri, &text, after_by)), vec!["grader"]);
    // inside `score`: the criterion ids and sets, ranked first
    let in_score = text.find("if all(").unwrap() + "if all(".len();
    let items = c.at("completion", &uri, &text, in_score);
    let got = labels(&items);
    for id in ["correct", "method", "sound", "clarity", "tone", "concise", "rounding", "essential", "optional"] {
        assert!(got.iter().any(|l| l == id), "`{id}` missing from {got:?}");
    }
    assert!(got.iter().any(|l| l == "fraction"), "stdlib names too: {got:?}");
    assert!(!got.iter().any(|l| l == "grader"), "no judges in a score: {got:?}");
    let rank = |label: &str| {
        items.as_array().unwrap().iter().find(|i| i["label"] == label).unwrap()["sortText"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(rank("correct") < rank("fraction"), "criteria sort before the stdlib");
    // typing a new criterion: `by ` at the end of a line that does not parse yet
    let typing = text.replace("  criterion rounding", "  criterion draft \"Draft\" by \n  criterion rounding");
    c.change(&uri, 2, &typing);
    let at = typing.find("\"Draft\" by ").unwrap() + "\"Draft\" by ".len();
    assert_eq!(labels(&c.at("completion", &uri, &typing, at)), vec!["grader"]);
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_formatting_is_rubric_fmt() {
    let dir = TempDir::new("lsp-fmt");
    // examples/tiers laid out badly (comments kept)
    let messy = tiers()
        .replace("\n  criterion correct", "\n        criterion    correct")
        .replace("score =\n  if", "score =     if");
    let path = dir.file("main.rubric", &messy);
    let o = Command::new(env!("CARGO_BIN_EXE_rubric")).args(["fmt", "--stdout"]).arg(&path).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let want = String::from_utf8(o.stdout).unwrap();
    assert_ne!(want, messy);
    let uri = file_uri(&path);
    let (mut c, _) = Client::start();
    c.open(&uri, &messy);
    let params = json!({ "textDocument": { "uri": uri }, "options": { "tabSize": 2, "insertSpaces": true } });
    let r = c.request("textDocument/formatting", params.clone());
    let edits = r["result"].as_array().unwrap();
    assert_eq!(edits.len(), 1, "{r}");
    assert_eq!(edits[0]["newText"], json!(want));
    assert_eq!(edits[0]["range"], range(&messy, 0, messy.len()), "the edit replaces the whole document");
    // formatted already: no edits; a parse error: no edits, and the server goes on
    c.change(&uri, 2, &want);
    assert_eq!(c.request("textDocument/formatting", params.clone())["result"], json!([]));
    c.change(&uri, 3, "rubric x @ 1.0.0\ncriterion a \"A\" check (\n");
    assert_eq!(c.request("textDocument/formatting", params)["result"], json!([]));
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_survives_malformed_input_and_unknown_methods() {
    let (mut c, _) = Client::start();
    let texts = [
        String::new(),
        "\"unclosed".to_string(),
        "criterion \u{0} ☃ by by by".to_string(),
        format!("rubric d @ 1.0.0\nlet x = {}1{}\n", "(".repeat(5000), ")".repeat(4000)),
        "judge { model }\nscore = .\n\u{feff}🙂".to_string(),
    ];
    for (i, text) in texts.iter().enumerate() {
        let uri = format!("untitled:Untitled-{i}");
        c.open(&uri, text);
        let diags = c.diagnostics(&uri);
        assert!(!diags.is_empty() || text.is_empty(), "{text:?}: {diags:?}");
        for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)).step_by(7).take(50) {
            c.at("hover", &uri, text, offset);
            c.at("completion", &uri, text, offset);
            c.at("definition", &uri, text, offset);
        }
    }
    // a position past the end of the document
    let r = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "untitled:Untitled-1" }, "position": { "line": 99, "character": 99 } }),
    );
    assert!(r.get("error").is_none(), "{r}");
    let r = c.request("textDocument/noSuchThing", json!({}));
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    let r = c.request("textDocument/hover", json!({ "not": "params" }));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(c.shut_down(), Some(0));
}

#[test]
fn lsp_exit_without_shutdown_exits_1_and_requests_after_shutdown_are_refused() {
    let (mut c, _) = Client::start();
    c.notify("exit", json!(null));
    c.stdin = None;
    assert_eq!(wait(&mut c.child), Some(1));

    let (mut c, _) = Client::start();
    assert_eq!(c.request("shutdown", json!(null))["result"], json!(null));
    let r = c.request("textDocument/hover", json!({}));
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    c.notify("exit", json!(null));
    c.stdin = None;
    assert_eq!(wait(&mut c.child), Some(0));
}

// ------------------------------------------------------------------ the VS Code package

/// Every word the pest grammar matches literally (hard keywords, soft keywords, judge and
/// reward settings, `List`).
fn grammar_words() -> std::collections::BTreeSet<String> {
    let pest = std::fs::read_to_string(crate_root().join("grammar/rubric.pest")).unwrap();
    let mut words = std::collections::BTreeSet::new();
    for line in pest.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (i, part) in line.split('"').enumerate() {
            if i % 2 == 1 && part.len() > 1 && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                words.insert(part.to_string());
            }
        }
    }
    words
}

#[test]
fn lsp_vscode_grammar_covers_every_keyword_of_the_pest_grammar() {
    let dir = crate_root().join("editors/vscode");
    let read = |rel: &str| -> Json {
        let text = std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
    };
    let grammar = read("syntaxes/rubric.tmLanguage.json");
    assert_eq!(grammar["scopeName"], json!("source.rubric"));
    // every regex in the grammar is one of the alternatives `\b(a|b|c)\b`: collect the words
    let mut listed = std::collections::BTreeSet::new();
    fn walk(v: &Json, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Json::Object(m) => {
                for (k, v) in m {
                    if k == "match" || k == "begin" {
                        let re = v.as_str().unwrap();
                        for w in re.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                            out.insert(w.to_string());
                        }
                    }
                    walk(v, out);
                }
            }
            Json::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&grammar, &mut listed);
    let words = grammar_words();
    assert!(words.len() > 60 && words.contains("criterion") && words.contains("temperature"), "{words:?}");
    let missing: Vec<&String> = words.iter().filter(|w| !listed.contains(*w)).collect();
    assert!(missing.is_empty(), "keywords of grammar/rubric.pest missing from rubric.tmLanguage.json: {missing:?}");
    // the grammar's patterns are valid regular expressions (Oniguruma's syntax is close enough
    // to the regex crate's for the constructs used here)
    let mut patterns = Vec::new();
    fn regexes(v: &Json, out: &mut Vec<String>) {
        match v {
            Json::Object(m) => m.iter().for_each(|(k, v)| {
                if matches!(k.as_str(), "match" | "begin" | "end") {
                    out.push(v.as_str().unwrap().to_string());
                }
                regexes(v, out);
            }),
            Json::Array(a) => a.iter().for_each(|v| regexes(v, out)),
            _ => {}
        }
    }
    regexes(&grammar, &mut patterns);
    for p in &patterns {
        regex::Regex::new(p).unwrap_or_else(|e| panic!("bad pattern {p}: {e}"));
    }
    // the package: a `rubric` language for `.rubric` files, its grammar and configuration
    let package = read("package.json");
    let lang = &package["contributes"]["languages"][0];
    assert_eq!(lang["id"], json!("rubric"));
    assert_eq!(lang["extensions"], json!([".rubric"]));
    assert!(dir.join(lang["configuration"].as_str().unwrap()).is_file());
    let g = &package["contributes"]["grammars"][0];
    assert_eq!(g["scopeName"], json!("source.rubric"));
    assert!(dir.join(g["path"].as_str().unwrap()).is_file());
    assert!(package["contributes"]["configuration"]["properties"]["rubric.server.path"].is_object());
    let config = read("language-configuration.json");
    assert_eq!(config["comments"]["lineComment"], json!("//"));
    assert_eq!(config["comments"]["blockComment"], json!(["/*", "*/"]));
    assert!(dir.join("extension.js").is_file() && dir.join("README.md").is_file());
}
