//! Compiled engines: backends that lower the IR to code and run it behind `engine::Engine`,
//! sharing the interpreter's step driver (`interp::run_row`), value semantics (`interp::ops`)
//! and intrinsics (`stdlib`), so that only expression codegen can differ from the oracle.
//! `wasm` lowers to a WebAssembly module (wasm-encoder) and runs it sandboxed in wasmtime;
//! `jit` lowers to native code with Cranelift, for trusted rubrics.

pub mod cache;
#[cfg(any(feature = "wasm", feature = "jit"))]
pub mod host;
pub mod jit;
pub mod lower;
pub mod wasm;
