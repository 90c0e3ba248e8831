//! Stage 2, module loading: parse the root file and, transitively, every module it imports
//! (`import std.text` from the embedded standard library, `import lib.common` from
//! `lib/common.rubric` under the root rubric's directory, whichever file imports it, so a
//! module has one name everywhere). Produces the parsed modules in dependency
//! order (imports before importers) and their diagnostics. Name binding itself happens in
//! `types`, which owns every scope.

use crate::diag::Diagnostic;
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::{ast, parse_file};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The standard library, embedded so that error messages inside it show real lines.
pub const STDLIB: &[(&str, &str)] = &[
    ("std.text", include_str!("../../stdlib/std/text.rubric")),
    ("std.format", include_str!("../../stdlib/std/format.rubric")),
    ("std.ifeval", include_str!("../../stdlib/std/ifeval.rubric")),
];

/// The version of the embedded standard library (part of every bundle's manifest).
pub const STDLIB_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone)]
pub struct Module {
    /// `std.text`, or `main` for the root file.
    pub name: String,
    pub file: FileId,
    pub ast: ast::File,
    /// Indices (into `Loaded::modules`) of the modules this one imports, with the import's
    /// position in `ast.items`.
    pub imports: Vec<(usize, usize)>,
}

#[derive(Debug, Default)]
pub struct Loaded {
    pub sources: SourceMap,
    /// Dependency order: every module comes after the modules it imports; the root is last.
    pub modules: Vec<Module>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    pub fn root(&self) -> Option<&Module> {
        self.modules.last()
    }
}

/// Load a rubric from a file on disk.
pub fn load_path(path: &Path) -> Loaded {
    let mut loaded = Loaded::default();
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            Loader { loaded: &mut loaded, by_name: HashMap::new(), stack: vec![], root_dir: Some(dir) }
                .load_root(&name, &text);
        }
        Err(e) => loaded.diagnostics.push(
            Diagnostic::error("rubric::io::read", format!("cannot read `{name}`: {e}"))
                .with_help("check the path and its permissions"),
        ),
    }
    loaded
}

/// Load a rubric from text; relative imports resolve against `dir` when given.
pub fn load_source(name: &str, text: &str, dir: Option<PathBuf>) -> Loaded {
    let mut loaded = Loaded::default();
    Loader { loaded: &mut loaded, by_name: HashMap::new(), stack: vec![], root_dir: dir }.load_root(name, text);
    loaded
}

struct Loader<'a> {
    loaded: &'a mut Loaded,
    by_name: HashMap<String, Option<usize>>,
    /// Modules being loaded (cycle detection).
    stack: Vec<String>,
    /// Relative imports (`a.b` → `a/b.rubric`) resolve against the root rubric's directory.
    root_dir: Option<PathBuf>,
}

impl Loader<'_> {
    fn load_root(&mut self, name: &str, text: &str) {
        self.load_module("main", name, text);
    }

    /// Parse one module and its imports; returns its index in `modules`.
    fn load_module(&mut self, module_name: &str, display: &str, text: &str) -> usize {
        let file = self.loaded.sources.add(display, text);
        crate::stdlib::warm_up_named_in(text);
        let parsed = parse_file(file, text);
        self.loaded.diagnostics.extend(parsed.diagnostics);
        self.stack.push(module_name.to_string());
        let mut imports = Vec::new();
        for (pos, item) in parsed.file.items.iter().enumerate() {
            if let ast::Item::Import(imp) = item {
                if let Some(idx) = self.import(&imp.path.text, imp.path.span) {
                    imports.push((idx, pos));
                }
            }
        }
        self.stack.pop();
        self.loaded.sources.set_module(file, module_name);
        self.loaded.modules.push(Module { name: module_name.to_string(), file, ast: parsed.file, imports });
        self.loaded.modules.len() - 1
    }

    fn import(&mut self, path: &str, span: Span) -> Option<usize> {
        if self.stack.iter().any(|s| s == path) {
            let chain = format!("{} -> {path}", self.stack.join(" -> "));
            self.loaded.diagnostics.push(
                Diagnostic::error("rubric::resolve::import_cycle", format!("import cycle: {chain}"))
                    .with_label(span, "this import closes the cycle")
                    .with_help("move the shared definitions into a module that both can import"),
            );
            return None;
        }
        if let Some(done) = self.by_name.get(path) {
            return *done;
        }
        let found = if let Some((_, text)) = STDLIB.iter().find(|(n, _)| *n == path) {
            Some((format!("<stdlib/{}.rubric>", path.replace('.', "/")), text.to_string()))
        } else if path.starts_with("std.") {
            None
        } else {
            let rel: PathBuf = format!("{}.rubric", path.replace('.', "/")).into();
            let full = self.root_dir.as_ref().map(|d| d.join(&rel)).unwrap_or(rel);
            std::fs::read_to_string(&full).ok().map(|t| (full.display().to_string(), t))
        };
        let Some((display, text)) = found else {
            let stdlib: Vec<&str> = STDLIB.iter().map(|(n, _)| *n).collect();
            let mut d = Diagnostic::error("rubric::resolve::unknown_module", format!("cannot find module `{path}`"))
                .with_label(span, "imported here");
            d = match crate::diag::did_you_mean(path, stdlib.iter().copied()) {
                Some(h) => d.with_help(h),
                None => d.with_help(format!(
                    "modules are `std.*` ({}) or `a.b` for the file `a/b.rubric` under the rubric's directory",
                    stdlib.join(", ")
                )),
            };
            self.loaded.diagnostics.push(d);
            self.by_name.insert(path.to_string(), None);
            return None;
        };
        let idx = self.load_module(path, &display, &text);
        let module = &self.loaded.modules[idx];
        match &module.ast.header {
            Some(h) if h.kind == ast::HeaderKind::Module && h.name.text == path => {}
            Some(h) => self.loaded.diagnostics.push(
                Diagnostic::error(
                    "rubric::resolve::module_header",
                    format!("`{display}` is imported as `{path}` but declares `{}`", h.name.text),
                )
                .with_label(h.span, "declared here")
                .with_help(format!("start the file with `module {path}`")),
            ),
            None => self.loaded.diagnostics.push(
                Diagnostic::error(
                    "rubric::resolve::module_header",
                    format!("`{display}` has no `module {path}` header"),
                )
                .with_label(span, "imported here"),
            ),
        }
        self.by_name.insert(path.to_string(), Some(idx));
        Some(idx)
    }
}
