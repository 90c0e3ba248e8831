//! The Wasm engine: `codegen` lowers an `ir::Program` to a portable WebAssembly module
//! (always built: bundles carry the module bytes), `runtime` runs it in wasmtime under per-row
//! limits (the `wasm` Cargo feature), `host` implements the imports, and `abi` is the contract
//! between them. Design and reasoning: `docs/decisions/0005-wasm-engine.md`.

pub mod abi;
mod codegen;
#[cfg(feature = "wasm")]
mod host;
#[cfg(feature = "wasm")]
mod runtime;

pub use codegen::compile_module;
#[cfg(feature = "wasm")]
pub use runtime::{compiled, BoundWasmEngine, Compiled, Limits, WasmEngine};

/// Without the `wasm` feature, the engine exists but refuses every row, saying why.
#[cfg(not(feature = "wasm"))]
mod disabled {
    use crate::engine::{Engine, RowResult, TrapInfo, VerdictSource};
    use crate::ir::Program;
    use crate::value::Value;

    #[derive(Debug, Clone, Copy, Default)]
    pub struct WasmEngine;

    impl WasmEngine {
        pub const fn new() -> WasmEngine {
            WasmEngine
        }

        pub fn bind(self, _program: &Program) -> WasmEngine {
            self
        }
    }

    impl Engine for WasmEngine {
        fn name(&self) -> &'static str {
            "wasm"
        }

        fn evaluate(&self, _: &Program, _: &[Value], _: &dyn VerdictSource) -> RowResult {
            let message = "this build has no Wasm runtime: rebuild with `--features wasm`".to_string();
            RowResult {
                unscored_reason: Some(message.clone()),
                trap: Some(TrapInfo { code: "rubric::trap::limit", message, site: None }),
                ..RowResult::default()
            }
        }
    }
}
#[cfg(not(feature = "wasm"))]
pub use disabled::WasmEngine;
