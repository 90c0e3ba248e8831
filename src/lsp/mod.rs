//! `rubric lsp`: a language server over standard input and output (JSON-RPC with
//! `Content-Length` framing, through `lsp-server`). Beside the front end, not part of the
//! pipeline: it compiles each open document from its text as `rubric check` compiles the file
//! (`types::load_source_at`, so relative imports resolve beside the document; a module
//! document as its importers see it) and publishes the diagnostics (`diagnostics`); hover, go to definition and completion come from a syntactic
//! index of the document and its imports (`analysis`); formatting is `rubric fmt`'s
//! (`syntax::printer::format_source`). Positions are UTF-16 (`position`).
//!
//! One thread, one message at a time. Diagnostics are published when no message is waiting,
//! so a burst of edits is compiled once. A panic while answering is caught and answered as an
//! internal error; the server keeps going.

mod analysis;
mod diagnostics;
mod position;
mod uri;

use crate::resolve::Loaded;
use crate::syntax::ast::HeaderKind;
use analysis::{Analysis, Kind};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types as lsp;
use position::LineIndex;
use std::collections::{BTreeSet, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The code `rubric check` reports for a module given as the root (not shown for modules).
const NOT_A_RUBRIC: &str = "rubric::resolve::not_a_rubric";

/// An open document: its text as the editor holds it.
struct Document {
    uri: lsp::Uri,
    text: String,
    version: i32,
}

/// Run the server on standard input and output until `exit`; returns the process's exit code:
/// 0 after `shutdown` then `exit`, 1 for an `exit` without `shutdown` or a broken connection
/// (as the protocol asks).
pub fn main() -> u8 {
    let (connection, io_threads) = Connection::stdio();
    let code = match serve(&connection) {
        Ok(Ending::Exit { after_shutdown }) => u8::from(!after_shutdown),
        Ok(Ending::Disconnected) => 1,
        Err(e) => {
            eprintln!("rubric lsp: {e}");
            drop(connection);
            // the reader thread may still wait on standard input: do not join it
            return 1;
        }
    };
    drop(connection);
    if let Err(e) = io_threads.join() {
        eprintln!("rubric lsp: {e}");
    }
    code
}

enum Ending {
    Exit { after_shutdown: bool },
    Disconnected,
}

/// What the server offers.
fn capabilities() -> lsp::ServerCapabilities {
    lsp::ServerCapabilities {
        text_document_sync: Some(lsp::TextDocumentSyncCapability::Kind(lsp::TextDocumentSyncKind::FULL)),
        hover_provider: Some(lsp::HoverProviderCapability::Simple(true)),
        definition_provider: Some(lsp::OneOf::Left(true)),
        completion_provider: Some(lsp::CompletionOptions {
            trigger_characters: Some(vec![".".to_string(), " ".to_string()]),
            ..lsp::CompletionOptions::default()
        }),
        document_formatting_provider: Some(lsp::OneOf::Left(true)),
        ..lsp::ServerCapabilities::default()
    }
}

fn serve(connection: &Connection) -> Result<Ending, String> {
    let (id, _params) = connection.initialize_start().map_err(|e| e.to_string())?;
    let init = serde_json::json!({
        "capabilities": capabilities(),
        "serverInfo": { "name": "rubric", "version": env!("CARGO_PKG_VERSION") },
    });
    connection.initialize_finish(id, init).map_err(|e| e.to_string())?;
    let mut docs: HashMap<String, Document> = HashMap::new();
    let mut dirty: BTreeSet<String> = BTreeSet::new();
    let mut shut_down = false;
    loop {
        if connection.receiver.is_empty() {
            for key in std::mem::take(&mut dirty) {
                let note = match docs.get(&key) {
                    Some(doc) => publish(doc),
                    // closed: clear what was published
                    None => key.parse().ok().map(|uri| diagnostics_notification(uri, vec![], None)),
                };
                if let Some(n) = note {
                    send(connection, n.into())?;
                }
            }
        }
        let Ok(msg) = connection.receiver.recv() else {
            return Ok(Ending::Disconnected);
        };
        match msg {
            Message::Request(req) => {
                let response = if shut_down {
                    error(req.id, ErrorCode::InvalidRequest, "the server is shut down".into())
                } else if req.method == "shutdown" {
                    shut_down = true;
                    Response::new_ok(req.id, ())
                } else {
                    let id = req.id.clone();
                    catch_unwind(AssertUnwindSafe(|| answer(&docs, req))).unwrap_or_else(|_| {
                        error(id, ErrorCode::InternalError, "internal error (a bug; please report it)".into())
                    })
                };
                send(connection, response.into())?;
            }
            Message::Notification(n) if n.method == "exit" => return Ok(Ending::Exit { after_shutdown: shut_down }),
            Message::Notification(_) if shut_down => {}
            Message::Notification(n) => {
                if let Some(key) = notify(&mut docs, n) {
                    dirty.insert(key);
                }
            }
            Message::Response(_) => {}
        }
    }
}

fn send(connection: &Connection, msg: Message) -> Result<(), String> {
    connection.sender.send(msg).map_err(|e| format!("cannot write to the client: {e}"))
}

fn error(id: RequestId, code: ErrorCode, message: String) -> Response {
    Response::new_err(id, code as i32, message)
}

/// Apply a document notification; returns the key of the document whose diagnostics changed.
fn notify(docs: &mut HashMap<String, Document>, n: Notification) -> Option<String> {
    match n.method.as_str() {
        "textDocument/didOpen" => {
            let p: lsp::DidOpenTextDocumentParams = serde_json::from_value(n.params).ok()?;
            let key = p.text_document.uri.as_str().to_string();
            let doc =
                Document { uri: p.text_document.uri, text: p.text_document.text, version: p.text_document.version };
            docs.insert(key.clone(), doc);
            Some(key)
        }
        "textDocument/didChange" => {
            let p: lsp::DidChangeTextDocumentParams = serde_json::from_value(n.params).ok()?;
            let key = p.text_document.uri.as_str().to_string();
            let doc = docs.get_mut(&key)?;
            for change in p.content_changes {
                match change.range {
                    // full sync is what the server asks for; a ranged change is applied anyway
                    Some(range) => {
                        let index = LineIndex::new(&doc.text);
                        let (start, end) = (index.offset(range.start), index.offset(range.end));
                        let (start, end) = (start.min(end), end.max(start));
                        doc.text.replace_range(start..end, &change.text);
                    }
                    None => doc.text = change.text,
                }
            }
            doc.version = p.text_document.version;
            Some(key)
        }
        "textDocument/didClose" => {
            let p: lsp::DidCloseTextDocumentParams = serde_json::from_value(n.params).ok()?;
            let key = p.text_document.uri.as_str().to_string();
            docs.remove(&key);
            Some(key)
        }
        // saved documents are compiled from the text already held; anything else is ignored
        _ => None,
    }
}

/// Load an open document with its imports, as `rubric check` loads the file: from the
/// document's text, imports beside it. A module document (`module lib.checks` in
/// `lib/checks.rubric`) is loaded as the rubrics that import it see it: its imports resolve
/// against the directory those rubrics lie in (the one above `lib/`).
fn load(doc: &Document) -> Loaded {
    let Some(path) = uri::to_path(&doc.uri) else {
        return crate::resolve::load_source(doc.uri.as_str(), &doc.text, None);
    };
    let loaded = crate::types::load_source_at(&path, &doc.text);
    match module_root_dir(&loaded, &path) {
        Some(dir) => crate::resolve::load_source(&path.display().to_string(), &doc.text, Some(dir)),
        None => loaded,
    }
}

/// For a module whose name matches where it lies (`lib.checks` at `DIR/lib/checks.rubric`),
/// `DIR`.
fn module_root_dir(loaded: &Loaded, path: &Path) -> Option<PathBuf> {
    let header = loaded.root()?.ast.header.as_ref().filter(|h| h.kind == HeaderKind::Module)?;
    let rel = PathBuf::from(format!("{}.rubric", header.name.text.replace('.', "/")));
    let mut dir = path.to_path_buf();
    if !path.ends_with(&rel) {
        return None;
    }
    for _ in rel.components() {
        dir.pop();
    }
    Some(dir)
}

/// Whether the document is a module (it has a `module` header).
fn is_module(loaded: &Loaded) -> bool {
    loaded.root().and_then(|m| m.ast.header.as_ref()).is_some_and(|h| h.kind == HeaderKind::Module)
}

/// The analysis of an open document.
fn analyse(doc: &Document) -> Analysis {
    Analysis::new(load(doc))
}

fn diagnostics_notification(uri: lsp::Uri, diagnostics: Vec<lsp::Diagnostic>, version: Option<i32>) -> Notification {
    Notification::new(
        "textDocument/publishDiagnostics".to_string(),
        lsp::PublishDiagnosticsParams { uri, diagnostics, version },
    )
}

/// Compile a document and its diagnostics notification (none if compiling panicked: that is
/// reported on standard error, and the editor keeps the previous diagnostics).
fn publish(doc: &Document) -> Option<Notification> {
    let diagnostics = catch_unwind(AssertUnwindSafe(|| {
        let loaded = load(doc);
        let sites = diagnostics::import_sites(&loaded);
        let root = loaded.root().map(|m| m.file);
        let module = is_module(&loaded);
        let mut compiled = crate::types::check_loaded(loaded);
        // `rubric check` of a module says it is no rubric; an editor edits modules on purpose
        if module {
            compiled.diagnostics.retain(|d| d.code != NOT_A_RUBRIC);
        }
        match root {
            Some(root) => diagnostics::convert(&compiled.diagnostics, &compiled.sources, root, &sites, &doc.uri),
            None => vec![],
        }
    }));
    match diagnostics {
        Ok(d) => Some(diagnostics_notification(doc.uri.clone(), d, Some(doc.version))),
        Err(_) => {
            eprintln!("rubric lsp: compiling `{}` panicked (a bug; please report it)", doc.uri.as_str());
            None
        }
    }
}

/// Answer one request (not `shutdown`).
fn answer(docs: &HashMap<String, Document>, req: Request) -> Response {
    /// The request's parameters, or the `InvalidParams` answer.
    fn params<P: serde::de::DeserializeOwned>(req: &Request) -> Result<P, Box<Response>> {
        serde_json::from_value(req.params.clone())
            .map_err(|e| Box::new(error(req.id.clone(), ErrorCode::InvalidParams, format!("invalid params: {e}"))))
    }
    macro_rules! ok_or_return {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(r) => return *r,
            }
        };
    }
    let id = req.id.clone();
    match req.method.as_str() {
        "textDocument/hover" => {
            let p: lsp::HoverParams = ok_or_return!(params(&req));
            let r = at_position(docs, &p.text_document_position_params, |a, offset, ix| {
                a.hover(offset).map(|(span, text)| lsp::Hover {
                    contents: lsp::HoverContents::Markup(lsp::MarkupContent {
                        kind: lsp::MarkupKind::Markdown,
                        value: text,
                    }),
                    range: Some(ix.range(span.start as usize, span.end as usize)),
                })
            });
            Response::new_ok(id, r)
        }
        "textDocument/definition" => {
            let p: lsp::GotoDefinitionParams = ok_or_return!(params(&req));
            let doc_uri = p.text_document_position_params.text_document.uri.clone();
            let r = at_position(docs, &p.text_document_position_params, |a, offset, ix| {
                let t = a.definition(offset)?;
                let file = a.loaded.sources.get(t.file);
                let (uri, range) = if Some(t.file) == a.root_file() {
                    (doc_uri.clone(), ix.range(t.span.start as usize, t.span.end as usize))
                } else {
                    let uri = uri::from_file_name(&file.name)?;
                    (uri, LineIndex::new(&file.text).range(t.span.start as usize, t.span.end as usize))
                };
                Some(lsp::GotoDefinitionResponse::Scalar(lsp::Location { uri, range }))
            });
            Response::new_ok(id, r)
        }
        "textDocument/completion" => {
            let p: lsp::CompletionParams = ok_or_return!(params(&req));
            let r = at_position(docs, &p.text_document_position, |a, offset, _| {
                let items: Vec<lsp::CompletionItem> = a
                    .completions(offset)
                    .into_iter()
                    .map(|c| lsp::CompletionItem {
                        sort_text: Some(format!("{}{}", c.rank, c.label)),
                        kind: Some(match c.kind {
                            Kind::Criterion | Kind::Set => lsp::CompletionItemKind::FIELD,
                            Kind::Judge => lsp::CompletionItemKind::CLASS,
                            Kind::Function => lsp::CompletionItemKind::FUNCTION,
                            Kind::Gate => lsp::CompletionItemKind::EVENT,
                            Kind::Let => lsp::CompletionItemKind::CONSTANT,
                            Kind::Input => lsp::CompletionItemKind::VARIABLE,
                            Kind::Module => lsp::CompletionItemKind::MODULE,
                        }),
                        detail: Some(c.detail),
                        label: c.label,
                        ..lsp::CompletionItem::default()
                    })
                    .collect();
                Some(lsp::CompletionResponse::Array(items))
            });
            Response::new_ok(id, r)
        }
        "textDocument/formatting" => {
            let p: lsp::DocumentFormattingParams = ok_or_return!(params(&req));
            let Some(doc) = docs.get(p.text_document.uri.as_str()) else {
                return Response::new_ok(id, serde_json::Value::Null);
            };
            // a text that does not parse (or would not format faithfully) gets no edits
            let edits = match crate::syntax::printer::format_source(crate::source::FileId(0), &doc.text) {
                Ok(out) if out != doc.text => {
                    let range = lsp::Range { start: lsp::Position::default(), end: LineIndex::new(&doc.text).end() };
                    vec![lsp::TextEdit { range, new_text: out }]
                }
                _ => vec![],
            };
            Response::new_ok(id, edits)
        }
        _ => error(id, ErrorCode::MethodNotFound, format!("unknown method `{}`", req.method)),
    }
}

/// `f` over the analysis of the document at `pos` and the byte offset of the position; `None`
/// (a `null` result) for a document that is not open.
fn at_position<T>(
    docs: &HashMap<String, Document>,
    pos: &lsp::TextDocumentPositionParams,
    f: impl FnOnce(&Analysis, usize, &LineIndex<'_>) -> Option<T>,
) -> Option<T> {
    let doc = docs.get(pos.text_document.uri.as_str())?;
    let analysis = analyse(doc);
    let index = LineIndex::new(&doc.text);
    f(&analysis, index.offset(pos.position), &index)
}
