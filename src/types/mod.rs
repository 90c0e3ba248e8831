//! Stage 3, names and types: binds every name of the loaded modules, type-checks every
//! expression and elaborates the typed program straight into the IR (`ir::Program`); then
//! `facts` proves what it can about the result (score range, division by zero, weights, gates,
//! unused criteria). Errors keep going: one run reports every problem it finds.

mod check;
pub mod facts;
mod sig;

use crate::diag::{Diagnostic, Severity};
use crate::ir::{Program, SiteTable};
use crate::resolve::{self, Loaded};
use crate::source::SourceMap;
use std::path::Path;

pub use sig::{intrinsic_sig, Catalogue, IntrinsicSig, CATALOGUE};

/// The result of compiling one rubric: the program when there were no errors, where each of its
/// sites lies (the layout the IR leaves out, for diagnostics, trap locations and `explain`),
/// and every diagnostic (errors, warnings and proven facts) with the sources to render them.
pub struct Compiled {
    pub program: Option<Program>,
    pub sites: SiteTable,
    pub diagnostics: Vec<Diagnostic>,
    pub sources: SourceMap,
}

impl Compiled {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == Severity::Error)
    }
}

pub fn compile_path(path: &Path) -> Compiled {
    check_loaded(resolve::load_path(path))
}

pub fn compile_source(name: &str, text: &str) -> Compiled {
    check_loaded(resolve::load_source(name, text, None))
}

/// Compile `text` as if it were the file at `path` (an editor's unsaved buffer): diagnostics
/// name the file as `compile_path(path)` does, and relative imports resolve against the
/// directory of `path`, so the result is what `rubric check PATH` gives once the text is saved.
pub fn compile_source_at(path: &Path, text: &str) -> Compiled {
    check_loaded(load_source_at(path, text))
}

/// Load (parse, with every import) `text` as the file at `path`; see [`compile_source_at`].
pub fn load_source_at(path: &Path, text: &str) -> Loaded {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    resolve::load_source(&path.display().to_string(), text, Some(dir))
}

pub fn check_loaded(loaded: Loaded) -> Compiled {
    let Loaded { sources, modules, mut diagnostics } = loaded;
    if modules.is_empty() {
        return Compiled { program: None, sites: SiteTable::default(), diagnostics, sources };
    }
    let (program, sites, mut diags) = check::check_modules(&sources, &modules);
    diagnostics.append(&mut diags);
    let has_errors = diagnostics.iter().any(|d| d.severity == Severity::Error);
    let program = if has_errors {
        None
    } else {
        let facts = facts::analyse(&program, &sites, &sources);
        diagnostics.extend(facts);
        diagnostics.extend(check::no_inputs(&modules, &program));
        if diagnostics.iter().any(|d| d.severity == Severity::Error) {
            None
        } else {
            Some(program)
        }
    };
    // Stable order: by file, then position, errors before warnings at the same place.
    diagnostics.sort_by_key(|d| {
        let s = d.primary_span().unwrap_or_default();
        (s.file, s.start, d.severity)
    });
    Compiled { program, sites, diagnostics, sources }
}
