//! The compiler's diagnostics as LSP diagnostics: the code, severity, message and primary span
//! of each, as `rubric check --error-format json` reports it, with the byte span converted to
//! UTF-16 line and character positions. A diagnostic whose primary span lies in an imported
//! module (a syntax error in `lib/checks.rubric`) is attached to the root file's `import` that
//! loads that module (directly or through other modules), its message prefixed with the file's
//! name, and points at its real place through `relatedInformation`. The help line follows the
//! message after a line break (`help: ...`): LSP has no field of its own for it.

use super::position::LineIndex;
use super::uri;
use crate::diag::{Diagnostic, Severity};
use crate::resolve::Loaded;
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::ast::Item;
use lsp_types as lsp;
use std::collections::HashMap;

/// For every module loaded for the root (by file), the span of the root's `import` through
/// which it was loaded.
pub fn import_sites(loaded: &Loaded) -> HashMap<FileId, Span> {
    let mut sites = HashMap::new();
    let Some(root) = loaded.root() else {
        return sites;
    };
    for &(idx, pos) in &root.imports {
        let Some(Item::Import(imp)) = root.ast.items.get(pos) else {
            continue;
        };
        // every module reachable from this import
        let mut stack = vec![idx];
        while let Some(m) = stack.pop() {
            let Some(module) = loaded.modules.get(m) else {
                continue;
            };
            if sites.contains_key(&module.file) || module.file == root.file {
                continue;
            }
            sites.insert(module.file, imp.span);
            stack.extend(module.imports.iter().map(|&(i, _)| i));
        }
    }
    sites
}

/// The LSP form of `diags` for the document holding file `root` of `sources`.
pub fn convert(
    diags: &[Diagnostic],
    sources: &SourceMap,
    root: FileId,
    sites: &HashMap<FileId, Span>,
    doc_uri: &lsp::Uri,
) -> Vec<lsp::Diagnostic> {
    let text = &sources.get(root).text;
    let index = LineIndex::new(text);
    diags
        .iter()
        .map(|d| {
            let mut message = d.message.clone();
            let mut related = Vec::new();
            let range = match d.primary_span() {
                Some(s) if s.file == root => index.range(s.start as usize, s.end as usize),
                Some(s) => {
                    let file = &sources.get(s.file).name;
                    message = format!("in `{file}`: {message}");
                    if let Some(loc) = location(sources, s, d.labels[0].message.as_str(), root, doc_uri) {
                        related.push(loc);
                    }
                    sites
                        .get(&s.file)
                        .map_or_else(lsp::Range::default, |i| index.range(i.start as usize, i.end as usize))
                }
                None => lsp::Range::default(),
            };
            for l in d.labels.iter().skip(1) {
                if let Some(loc) = location(sources, l.span, &l.message, root, doc_uri) {
                    related.push(loc);
                }
            }
            if let Some(h) = &d.help {
                message.push_str(&format!("\nhelp: {h}"));
            }
            lsp::Diagnostic {
                range,
                severity: Some(match d.severity {
                    Severity::Error => lsp::DiagnosticSeverity::ERROR,
                    Severity::Warning => lsp::DiagnosticSeverity::WARNING,
                    Severity::Note => lsp::DiagnosticSeverity::INFORMATION,
                }),
                code: Some(lsp::NumberOrString::String(d.code.to_string())),
                source: Some("rubric".to_string()),
                message,
                related_information: (!related.is_empty()).then_some(related),
                ..lsp::Diagnostic::default()
            }
        })
        .collect()
}

/// A label's place as related information: in the document, or in a module file on disk
/// (the embedded stdlib has no file to point at).
fn location(
    sources: &SourceMap,
    span: Span,
    message: &str,
    root: FileId,
    doc_uri: &lsp::Uri,
) -> Option<lsp::DiagnosticRelatedInformation> {
    let uri = if span.file == root { doc_uri.clone() } else { uri::from_file_name(&sources.get(span.file).name)? };
    let index = LineIndex::new(&sources.get(span.file).text);
    let message = if message.is_empty() { "here".to_string() } else { message.to_string() };
    Some(lsp::DiagnosticRelatedInformation {
        location: lsp::Location { uri, range: index.range(span.start as usize, span.end as usize) },
        message,
    })
}
