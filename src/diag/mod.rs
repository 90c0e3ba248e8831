//! Diagnostics: one plain data type shared by every stage, rendered with miette (human) or as
//! JSON. Codes are stable and documented in `docs/diagnostics.md`.

use crate::source::{SourceMap, Span};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic};

mod excerpt;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// A fact the checker proved (score range...), shown by `rubric check`.
    Note,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    /// The first label is the primary one.
    pub labels: Vec<Label>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { code, severity: Severity::Error, message: message.into(), labels: vec![], help: None }
    }

    pub fn warning(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, message) }
    }

    pub fn note(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Note, ..Diagnostic::error(code, message) }
    }

    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: message.into() });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    pub fn primary_span(&self) -> Option<Span> {
        self.labels.first().map(|l| l.span)
    }

    /// Render for a terminal or a snapshot: miette's graphical report, without colour when
    /// `color` is false, at a fixed width.
    pub fn render(&self, sources: &SourceMap, color: bool) -> String {
        let severity = match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
            Severity::Note => miette::Severity::Advice,
        };
        let mut d = MietteDiagnostic::new(self.message.clone()).with_code(self.code).with_severity(severity);
        if let Some(help) = &self.help {
            d = d.with_help(help.clone());
        }
        let file = self.primary_span().map(|s| s.file);
        // The lines around the labels, not the whole file (see `excerpt`).
        let excerpt = file.map(|f| {
            let spans: Vec<(usize, usize)> = self
                .labels
                .iter()
                .filter(|l| l.span.file == f)
                .map(|l| (l.span.start as usize, l.span.end as usize))
                .collect();
            excerpt::Excerpt::new(sources.get(f), &spans)
        });
        // miette shows one source per report: labels in other files are appended as text.
        let mut extra = String::new();
        for (i, l) in self.labels.iter().enumerate() {
            match (&excerpt, Some(l.span.file) == file) {
                (Some(x), true) => {
                    let label = if l.message.is_empty() { None } else { Some(l.message.clone()) };
                    let start = x.place(l.span.start as usize);
                    let span = (start, x.place(l.span.end as usize).saturating_sub(start));
                    d = d.and_label(if i == 0 {
                        LabeledSpan::new_primary_with_span(label, span)
                    } else {
                        LabeledSpan::new_with_span(label, span)
                    });
                }
                _ => {
                    let f = sources.get(l.span.file);
                    let (line, col) = sources.line_col(l.span);
                    extra.push_str(&format!("\n  note: {} ({}:{line}:{col})", l.message, f.name));
                }
            }
        }
        let report = match excerpt {
            Some(x) => miette::Report::new(d).with_source_code(x),
            None => miette::Report::new(d),
        };
        let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
        let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
        let mut out = String::new();
        if handler.render_report(&mut out, report.as_ref()).is_err() {
            out = format!("{}: {}", self.code, self.message);
        }
        out.push_str(&extra);
        out
    }

    /// The JSON form used by `--error-format json`.
    pub fn to_json(&self, sources: &SourceMap) -> serde_json::Value {
        let labels: Vec<_> = self
            .labels
            .iter()
            .map(|l| {
                let (line, column) = sources.line_col(l.span);
                serde_json::json!({
                    "file": sources.get(l.span.file).name,
                    "start": l.span.start,
                    "end": l.span.end,
                    "line": line,
                    "column": column,
                    "message": l.message,
                })
            })
            .collect();
        serde_json::json!({
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "labels": labels,
            "help": self.help,
        })
    }
}

/// Collected diagnostics of one compilation.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics {
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.is_error()).count()
    }

    pub fn extend(&mut self, other: impl IntoIterator<Item = Diagnostic>) {
        self.items.extend(other);
    }
}

/// "did you mean" help: the closest candidate within a small edit distance.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    if name.chars().count() < 3 {
        return None;
    }
    let candidates: Vec<&'a str> = candidates.into_iter().collect();
    for &c in &candidates {
        if c.chars().count() < 3 {
            continue;
        }
        let d = strsim::levenshtein(name, c);
        let limit = (name.chars().count().max(c.chars().count()) / 3).max(1);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.or_else(|| same_words(name, &candidates).map(|c| (0, c))).map(|(_, c)| format!("did you mean `{c}`?"))
}

/// The candidate made of the same words as `name` in another order (`count_words` →
/// `word_count`), a plural `s` aside.
fn same_words<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    fn key(s: &str) -> Vec<&str> {
        let mut w: Vec<&str> = s
            .split('_')
            .filter(|w| !w.is_empty())
            .map(|w| w.strip_suffix('s').filter(|stem| stem.len() >= 3).unwrap_or(w))
            .collect();
        w.sort_unstable();
        w
    }
    let k = key(name);
    if k.len() < 2 {
        return None;
    }
    candidates.iter().copied().find(|c| key(c) == k)
}
