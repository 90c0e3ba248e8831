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
        self.files.push(SourceFile { name: name.into(), text: text.into(), module: None });
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
        let text = &self.get(span.file).text;
        let upto = &text[..(span.start as usize).min(text.len())];
        let line = upto.matches('\n').count() + 1;
        let col = upto.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
        (line, col)
    }
}
