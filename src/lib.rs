//! rubric: a typed language and toolchain for evaluation rubrics.
//!
//! Pipeline: `syntax` (pest → AST) → `resolve` (modules, names) → `types` (type check, static
//! facts) → `ir` (canonical, serialisable) → `interp` (reference engine) → `runtime` (rows in,
//! results out). See `docs/ARCHITECTURE.md`.

pub mod agree;
pub mod api;
pub mod backend;
pub mod bundle;
pub mod cli;
pub mod diag;
pub mod engine;
pub mod image;
pub mod interp;
pub mod ir;
#[cfg(feature = "judges")]
pub mod judge;
pub mod lint;
pub mod lsp;
pub mod meter;
#[cfg(feature = "models")]
pub mod models;
#[cfg(feature = "models")]
pub mod numeric;
pub mod resolve;
pub mod runtime;
#[cfg(all(feature = "exec", target_os = "linux"))]
pub mod sandbox;
#[cfg(feature = "serve")]
pub mod serve;
pub mod source;
pub mod stdlib;
pub mod syntax;
pub mod types;
pub mod value;
