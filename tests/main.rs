//! The one integration test binary (few binaries keep link times low): every test module of
//! `tests/` is a `mod` here.

// Tests and their helpers may unwrap, expect and panic: a failing test says why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The allocator the `rubric` binary uses, so that the in-process Wasm engine meters each
// row's memory as it does there.
#[global_allocator]
static GLOBAL: rubric::meter::Counting<std::alloc::System> = rubric::meter::Counting(std::alloc::System);

mod agree;
mod bundle;
mod cli;
mod common;
mod compare;
mod conformance;
mod conformance_data;
mod contained;
mod cost;
mod deadline;
mod docs;
mod engine_props;
#[cfg(all(feature = "exec", target_os = "linux"))]
mod exec;
#[cfg(all(feature = "exec", target_os = "linux"))]
mod exec_sandbox;
mod fast_path;
mod forged;
mod fuzz;
mod generate;
#[cfg(feature = "models")]
mod gpu;
mod group_judging;
mod hostile;
mod ifeval;
mod images;
mod import;
mod jit_engine;
mod json_patch;
mod judge;
mod judge_fences;
mod lint;
#[cfg(all(feature = "models", feature = "judges"))]
mod local_judge;
mod lsp;
mod models;
#[cfg(feature = "models")]
mod numeric;
mod pairwise;
mod props;
mod report;
mod sandbox;
mod serve;
mod similarity;
mod stdlib_docs;
mod tidy;
mod trajectory;
mod ui;
mod wasm_engine;
