//! The JIT engine (`--engine jit`, Cargo feature `jit`): `codegen` lowers an `ir::Program` to
//! native code with Cranelift, `runtime` compiles each program once per process and runs its
//! roots through the shared step driver, `host` implements the functions compiled code calls
//! (thin adapters to the interpreter's `ops`, `aggregate`, `verdict_value` and `stdlib`), and
//! `abi` is the contract between them. For trusted rubrics only: no sandbox, no fuel. Design
//! and reasoning: `docs/decisions/0006-jit-engine.md`.

#[cfg(feature = "jit")]
mod abi;
#[cfg(feature = "jit")]
mod codegen;
#[cfg(feature = "jit")]
mod host;
#[cfg(feature = "jit")]
mod runtime;

#[cfg(feature = "jit")]
pub use runtime::{code, BoundJitEngine, JitCode, JitEngine};

/// Whether this build can run `p` on the JIT: it has the engine and `p` compiles (compiled
/// once per process: the rows that follow find the code in the cache).
#[cfg(feature = "jit")]
pub fn compiles(p: &crate::ir::Program) -> bool {
    code(p).is_ok()
}

/// Without the `jit` feature nothing runs on the JIT.
#[cfg(not(feature = "jit"))]
pub fn compiles(_p: &crate::ir::Program) -> bool {
    false
}

/// Without the `jit` feature, the engine exists but refuses every row, saying why.
#[cfg(not(feature = "jit"))]
mod disabled {
    use crate::engine::{Engine, RowResult, TrapInfo, VerdictSource};
    use crate::ir::Program;
    use crate::value::Value;

    #[derive(Debug, Clone, Copy, Default)]
    pub struct JitEngine;

    impl JitEngine {
        pub const fn new() -> JitEngine {
            JitEngine
        }

        pub fn bind(self, _program: &Program) -> JitEngine {
            self
        }
    }

    impl Engine for JitEngine {
        fn name(&self) -> &'static str {
            "jit"
        }

        fn evaluate(&self, _: &Program, _: &[Value], _: &dyn VerdictSource) -> RowResult {
            let message = "this build has no JIT engine: rebuild with `--features jit`".to_string();
            RowResult {
                unscored_reason: Some(message.clone()),
                trap: Some(TrapInfo { code: "rubric::trap::limit", message, site: None }),
                ..RowResult::default()
            }
        }
    }
}
#[cfg(not(feature = "jit"))]
pub use disabled::JitEngine;
