//! Source files and spans: every tree node carries a `Span`; text is attached only when a
//! diagnostic is rendered. Shared by every stage from `syntax` to `interp`.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span { file, start: start as u32, end: end as u32 }
    }

    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.end == self.start
    }
}

#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Display name: a path as the user gave it, or `<stdlib/std/text.rubric>`.
    pub name: String,
    pub text: Arc<str>,
    /// The module the file defines (`main` for the root rubric, `std.text`...): the name the
    /// IR's site table uses, so that the IR does not depend on where the file lies.
    pub module: Option<String>,
    /// Byte offset of each line's start, built the first time a position is asked for, so
    /// that placing many diagnostics in a large file costs a search each, not a scan.
    line_starts: std::sync::OnceLock<Vec<usize>>,
}

impl SourceFile {
    /// The byte offset where each line starts (the first is 0).
    pub fn line_starts(&self) -> &[usize] {
        self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1))
                .collect()
        })
    }

    /// The 0-based line holding byte `offset` (clamped to the text).
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_starts().partition_point(|&s| s <= offset.min(self.text.len())) - 1
    }

    /// The bytes of 0-based line `line`, without its line break.
    pub fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let starts = self.line_starts();
        let start = starts[line];
        let end = starts.get(line + 1).map_or(self.text.len(), |&next| next - 1);
        start..end
    }
}

/// All files loaded for one compilation.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<Arc<str>>) -> FileId {
        self.files.push(SourceFile {
            name: name.into(),
            text: text.into(),
            module: None,
            line_starts: std::sync::OnceLock::new(),
        });
        FileId((self.files.len() - 1) as u32)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    pub fn set_module(&mut self, id: FileId, module: &str) {
        self.files[id.0 as usize].module = Some(module.to_string());
    }

    /// The file named `name`: a module name (as in IR sites) or a display name.
    pub fn find(&self, name: &str) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.module.as_deref() == Some(name))
            .or_else(|| self.files.iter().position(|f| f.name == name))
            .map(|i| FileId(i as u32))
    }

    /// The text a span covers (empty when out of range).
    pub fn slice(&self, span: Span) -> &str {
        let text = &self.get(span.file).text;
        text.get(span.start as usize..span.end as usize).unwrap_or("")
    }

    /// 1-based line and column of a span's start.
    pub fn line_col(&self, span: Span) -> (usize, usize) {
        let f = self.get(span.file);
        let at = (span.start as usize).min(f.text.len());
        let line = f.line_of(at);
        let start = f.line_starts()[line];
        // A span inside a character (a forged one) counts the character's bytes as columns.
        let col = f.text.get(start..at).map_or(at - start, |t| t.chars().count()) + 1;
        (line + 1, col)
    }
}
