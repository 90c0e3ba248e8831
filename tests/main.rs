//! The one integration test binary (few binaries keep link times low): every test module of
//! `tests/` is a `mod` here.
mod bundle;
mod cli;
mod common;
mod conformance;
mod conformance_data;
mod engine_props;
#[cfg(feature = "models")]
mod gpu;
mod ifeval;
mod jit_engine;
mod judge;
mod judge_fences;
#[cfg(all(feature = "models", feature = "judges"))]
mod local_judge;
mod models;
#[cfg(feature = "models")]
mod numeric;
mod props;
mod serve;
mod stdlib_docs;
mod tidy;
mod ui;
mod wasm_engine;
