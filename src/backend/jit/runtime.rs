//! The JIT engine proper: compiles a program to native code once per process (a cache keyed by
//! the IR hash), and evaluates rows through the shared step driver (`interp::run_row`), each
//! root a call into its compiled function with the row's `host::Ctx`. This file is the call
//! boundary: the only place compiled code is entered, and where its memory is freed.
//!
//! The JIT has no sandbox and no fuel or time limits (the interpreter has none either): it is
//! for trusted rubrics, the user's own sources. A rubric from elsewhere runs on the Wasm engine.
//! What it does guard is the stack: a root call always starts with `NATIVE_RED_ZONE` bytes of
//! stack (a fresh segment otherwise), every compiled function checks the stack pointer on entry
//! against a limit that keeps `HOST_RESERVE` bytes free for host functions, and host functions
//! grow their own segment as the interpreter's walk does; deep nesting is a
//! `rubric::trap::limit`, never a crash.

#![expect(
    unsafe_code,
    reason = "the JIT call boundary: finalized addresses become function pointers, roots are called, modules freed"
)]

use super::codegen::{compile, Entry};
use super::host::{Ctx, Tables};
use crate::backend::cache::{lookup, ProcessCache, Recent, PER_THREAD};
use crate::backend::lower::Repr;
use crate::engine::{Engine, RowResult, TrapInfo, VerdictSource};
use crate::interp::{run_row, CheckOutcomes, Decided, Evaluator, Root, Trace};
use crate::ir::{Expr, Program};
use crate::stdlib::{Trap, TrapKind};
use crate::value::Value;
use cranelift_jit::JITModule;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, OnceLock};

/// A root's compiled function: the row's context in, the root's value out in its
/// representation (`codegen::Compiled`).
type RootFn = unsafe extern "C" fn(*mut Ctx) -> i32;

/// Stack a root call must have left when it starts; it runs on a new segment otherwise.
const NATIVE_RED_ZONE: usize = 1 << 20;
/// The size of such a segment.
const NATIVE_STACK: usize = 8 << 20;
/// Stack compiled code leaves free for the host functions it calls (which grow their own
/// segment when they need more than 128 KiB).
const HOST_RESERVE: usize = 256 << 10;

#[derive(Clone)]
enum RootEntry {
    /// A literal root (most criterion texts, points, weights): no call at all.
    Const(Value),
    Code {
        f: RootFn,
        repr: Repr,
        inputs_only: bool,
    },
}

/// A program compiled to native code, shareable by every thread.
pub struct JitCode {
    tables: Arc<Tables>,
    roots: rustc_hash::FxHashMap<Root, RootEntry>,
    /// By plain run of the program (`interp::prepared::PlainRun`): the entries of its checks,
    /// in order, called together by `Evaluator::checks`.
    runs: Vec<Vec<RootEntry>>,
    /// Owns the machine code the entries point into; freed when this drops.
    module: Option<Mutex<JITModule>>,
}

impl JitCode {
    /// Compile `p`. A panic inside Cranelift (a bug) is an error for this program's rows, not
    /// the end of the batch.
    pub fn new(p: &Program) -> Result<JitCode, String> {
        let native = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile(p)))
            .unwrap_or_else(|_| Err("internal error: the JIT compiler panicked".to_string()))?;
        let roots = native
            .roots
            .into_iter()
            .map(|(root, entry)| {
                let entry = match entry {
                    Entry::Const(v) => RootEntry::Const(v),
                    // SAFETY: `codegen` compiled this function with the signature
                    // `(pointer) -> i32` in the target's default calling convention, the C one
                    // (`Module::make_signature`), which is `RootFn`'s. The code it points to
                    // lives as long as `module`, which this `JitCode` owns and frees only when
                    // it drops, after which no entry can be reached.
                    Entry::Code(c) => RootEntry::Code {
                        f: unsafe { std::mem::transmute::<*const u8, RootFn>(c.address) },
                        repr: c.repr,
                        inputs_only: c.inputs_only,
                    },
                };
                (root, entry)
            })
            .collect::<rustc_hash::FxHashMap<Root, RootEntry>>();
        let runs = crate::interp::prepared(p)
            .runs
            .iter()
            .map(|run| run.checks(p).map_while(|(root, _)| roots.get(&root).cloned()).collect())
            .collect();
        Ok(JitCode { tables: Arc::new(native.tables), roots, runs, module: Some(Mutex::new(native.module)) })
    }

    /// The program this code was compiled from.
    pub fn program(&self) -> &Program {
        &self.tables.program
    }

    /// The shape of the program's row slots (`host::SlotCall`), for tests and diagnosis: how
    /// many calls have a slot, how many of those a scan pass answers, and the size of each pass
    /// group, in group order.
    pub fn slot_shape(&self) -> (usize, usize, Vec<usize>) {
        let answered = self.tables.slots.iter().filter(|s| s.answer.is_some()).count();
        (self.tables.slots.len(), answered, self.tables.groups.iter().map(Vec::len).collect())
    }

    fn entry(&self, root: Root) -> Option<&RootEntry> {
        self.roots.get(&root)
    }
}

impl Drop for JitCode {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            let module = module.into_inner().unwrap_or_else(|e| e.into_inner());
            // SAFETY: the only pointers into this module are the entries of this `JitCode`,
            // which are private to it. Every call runs through an `Arc<JitCode>` that it holds
            // for the whole call, so no compiled function is running now, and none can be
            // called after this drop.
            unsafe { module.free_memory() };
        }
    }
}

/// Compiled programs by IR hash, for the whole process.
fn cache() -> &'static ProcessCache<JitCode> {
    static CACHE: OnceLock<ProcessCache<JitCode>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

thread_local! {
    /// The programs this thread evaluated last, by address, so that a batch of rows does not
    /// hash its program for every row (an entry is used only if the program is still equal).
    static RECENT: Recent<JitCode> = const { RefCell::new(Vec::new()) };
    /// Row contexts to reuse (their tables keep their allocations).
    static SPARE: RefCell<Vec<Ctx>> = const { RefCell::new(Vec::new()) };
}

/// The compiled code of `p`: compiled at most once per process.
pub fn code(p: &Program) -> Result<Arc<JitCode>, String> {
    lookup(p, &RECENT, cache(), JitCode::program, JitCode::new)
}

/// The JIT engine as an [`Engine`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JitEngine;

impl JitEngine {
    pub const fn new() -> JitEngine {
        JitEngine
    }

    /// Bind to `program`, compiling it now (or finding it in the process cache).
    pub fn bind(self, program: &Program) -> BoundJitEngine<'_> {
        BoundJitEngine { program, code: code(program) }
    }
}

/// A JIT engine bound to one program (a batch's): rows of that program find its code without
/// any lookup. Sound because the borrow keeps that program alive and unchanged: a row whose
/// program is at the same address is that program. Rows of any other program take the general
/// path of [`JitEngine`].
pub struct BoundJitEngine<'p> {
    program: &'p Program,
    code: Result<Arc<JitCode>, String>,
}

impl Engine for JitEngine {
    fn name(&self) -> &'static str {
        "jit"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        evaluate_with(&code(program), program, inputs, verdicts)
    }
}

impl Engine for BoundJitEngine<'_> {
    fn name(&self) -> &'static str {
        "jit"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        if std::ptr::eq(program, self.program) {
            evaluate_with(&self.code, program, inputs, verdicts)
        } else {
            JitEngine.evaluate(program, inputs, verdicts)
        }
    }
}

/// A row the engine could not evaluate at all: unscored, with the trap.
fn failed_row(t: Trap) -> RowResult {
    RowResult {
        unscored_reason: Some(crate::interp::ops::trap_reason(&t)),
        trap: Some(TrapInfo { code: t.kind.code(), message: t.message, site: None }),
        ..RowResult::default()
    }
}

fn evaluate_with(
    code: &Result<Arc<JitCode>, String>,
    program: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
) -> RowResult {
    let code = match code {
        Ok(c) => c,
        Err(e) => return failed_row(Trap::new(TrapKind::Type, format!("the JIT engine cannot compile: {e}"))),
    };
    let mut ctx = SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    ctx.begin_row(&code.tables, inputs);
    let mut ev = JitEval { code, ctx: &mut ctx, reserve: HOST_RESERVE };
    let result = run_row(program, inputs, verdicts, &mut ev, None);
    ctx.end_row();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < PER_THREAD {
            s.push(ctx);
        }
    });
    result
}

/// Evaluates roots by calling their compiled functions.
struct JitEval<'c> {
    code: &'c Arc<JitCode>,
    ctx: &'c mut Ctx,
    /// Stack kept free for host functions below the compiled code's limit.
    reserve: usize,
}

impl Evaluator for JitEval<'_> {
    fn eval(
        &mut self,
        root: Root,
        _e: &Expr,
        locals: &mut Vec<Value>,
        decided: &mut Decided,
        _trace: &mut Trace<'_>,
    ) -> Result<Value, Trap> {
        let (f, repr, inputs_only) = match self.code.entry(root) {
            Some(RootEntry::Const(v)) => return Ok(v.clone()),
            Some(RootEntry::Code { f, repr, inputs_only }) => (*f, *repr, *inputs_only),
            None => {
                return Err(Trap::new(TrapKind::Type, format!("the compiled program has no root `{}`", root.name())))
            }
        };
        // The context is clean here: `begin_row` left it so, and every root call cleans up
        // after itself (`finish`).
        let ctx = &mut *self.ctx;
        let reserve = self.reserve;
        // A root that reads only inputs needs neither the decided criteria nor the locals.
        if inputs_only {
            on_native_stack(ctx, reserve, |ctx| run_root(f, repr, ctx))
        } else {
            ctx.core.decided = std::mem::take(decided);
            ctx.core.locals = std::mem::take(locals);
            let result = on_native_stack(ctx, reserve, |ctx| run_root(f, repr, ctx));
            *decided = std::mem::take(&mut ctx.core.decided);
            *locals = std::mem::take(&mut ctx.core.locals);
            result
        }
    }

    /// A plain run's checks read only inputs: their functions are called one after another on
    /// one native stack, with no lookup of their roots and no driver in between; a check that
    /// answers a plain boolean (most) becomes one, with no value made of it.
    fn checks(
        &mut self,
        _p: &Program,
        run: u32,
        _decided: &mut Decided,
        _trace: &mut Trace<'_>,
        out: &mut CheckOutcomes,
    ) {
        // A run this code does not have (its program is not the one compiled) decides nothing
        // here: the driver then evaluates each criterion as a root.
        let Some(entries) = self.code.runs.get(run as usize) else { return };
        on_native_stack(self.ctx, self.reserve, |ctx| {
            for entry in entries {
                let v = match entry {
                    RootEntry::Code { f, repr: Repr::Bool, .. } => {
                        let word = call(*f, ctx);
                        if ctx.trapped == 0 && (word == 0 || word == 1) {
                            out.met.push(word == 1);
                            ctx.begin_root();
                            continue;
                        }
                        finish(ctx, word, Repr::Bool)
                    }
                    RootEntry::Code { f, repr, .. } => run_root(*f, *repr, ctx),
                    RootEntry::Const(v) => Ok(v.clone()),
                };
                if !out.push(v) {
                    return;
                }
            }
        });
    }
}

/// Call root function `f`, whose value is in representation `repr`: its value or its trap,
/// and the context clean again for the next call. Only inside [`on_native_stack`].
fn run_root(f: RootFn, repr: Repr, ctx: &mut Ctx) -> Result<Value, Trap> {
    let word = call(f, ctx);
    finish(ctx, word, repr)
}

/// The value of a root call that returned `word` in representation `repr` (or its trap), and
/// the context clean again for the next call.
fn finish(ctx: &mut Ctx, word: i32, repr: Repr) -> Result<Value, Trap> {
    let result = if ctx.trapped != 0 {
        Err(ctx.take_trap())
    } else {
        match repr {
            Repr::Bool => ctx.core.bool_value(word),
            Repr::Num => ctx.core.num_value(ctx.num_out, word),
            Repr::Handle => ctx.core.get(word).cloned(),
        }
    };
    if let Err(t) = &result {
        ctx.core.fail_pending_lets(t);
    }
    ctx.begin_root();
    result
}

/// Run `body`, which calls compiled functions ([`call`]), with room on the stack: `ctx`'s stack
/// limit is set here, below which compiled functions stop (`StackExhausted`) rather than start
/// with less than `reserve` bytes of stack left. `body` itself must use little stack.
fn on_native_stack<R>(ctx: &mut Ctx, reserve: usize, body: impl FnOnce(&mut Ctx) -> R) -> R {
    stacker::maybe_grow(NATIVE_RED_ZONE, NATIVE_STACK, || {
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        let room = stacker::remaining_stack().unwrap_or(NATIVE_RED_ZONE);
        ctx.stack_floor = here.saturating_sub(room);
        ctx.stack_limit = ctx.stack_floor.saturating_add(reserve);
        body(ctx)
    })
}

/// Call a root's compiled function with `ctx`: only inside [`on_native_stack`], which set the
/// stack limit the function checks.
fn call(f: RootFn, ctx: &mut Ctx) -> i32 {
    let p: *mut Ctx = ctx;
    // SAFETY: `f` is a root function of a `JitCode` (see `JitCode::new` for its signature) that
    // the caller (`JitEval`) holds for the whole call, so its machine code is alive. `p` comes
    // from a `&mut Ctx` that is not used again until the call returns; the compiled code only
    // reads the context's `trapped`, `num_out`, `stack_limit`, `epoch` and `slots` words at
    // their `repr(C)` offsets (and the slots they point to) and hands `p` to host functions,
    // which borrow it one at a time (`host::enter`) and never keep it. Nothing unwinds through
    // the native frames: host functions catch panics and report traps through `trapped`.
    unsafe { f(p) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::NoVerdicts;
    use crate::ir::{
        CmpOp, Const, CriterionDecl, CriterionKind, ExprKind, InputDecl, RubricInfo, Step, Type, Verifier, IR_VERSION,
    };

    /// `input x: Number`, `criterion a "a" check x > 0`, `score = 1`.
    fn program() -> Program {
        let check = Expr {
            kind: ExprKind::Compare {
                first: Box::new(Expr { kind: ExprKind::Input(0), ty: Type::Number }),
                rest: vec![(CmpOp::Gt, Expr::constant(Const::Number(0.0)))],
            },
            ty: Type::Bool,
        };
        Program {
            ir_version: IR_VERSION,
            rubric: RubricInfo { name: "t".into(), version: "1.0.0".into(), title: None },
            inputs: vec![InputDecl { name: "x".into(), ty: Type::Number, default: None, field: None }],
            judges: vec![],
            functions: vec![],
            lets: vec![],
            steps: vec![Step::Criterion(0)],
            criteria: vec![CriterionDecl {
                id: "a".into(),
                text: Expr::constant(Const::Text("a".into())),
                kind: CriterionKind::Binary,
                points: None,
                weight: None,
                axis: None,
                tags: None,
                pass: None,
                verifier: Verifier::Check { expr: check },
                sets: vec![],
                site: 0,
            }],
            sets: vec![],
            score: Expr::constant(Const::Number(1.0)),
            reward: None,
            scores: vec![],
            stats: vec![],
            generators: vec![],
            examples: vec![],
            site_count: 1,
            prepared: Default::default(),
        }
    }

    /// A compiled function that finds the stack below its limit stops the row with a limit
    /// trap at the root's site, and never runs on: forced here by a reserve larger than any
    /// stack.
    #[test]
    fn running_out_of_native_stack_is_a_limit_trap() {
        let p = program();
        let inputs = [Value::Number(1.0)];
        let code = code(&p).unwrap();
        let mut ctx = Ctx::new();
        ctx.begin_row(&code.tables, &inputs);
        let mut ev = JitEval { code: &code, ctx: &mut ctx, reserve: usize::MAX / 2 };
        let r = run_row(&p, &inputs, &NoVerdicts, &mut ev, None);
        let trap = r.trap.expect("a trap");
        assert_eq!(trap.code, "rubric::trap::limit");
        assert!(trap.message.starts_with("stack limit"), "{}", trap.message);
        assert!(trap.site.is_some());
        assert_eq!(r.score, None);
        // With the usual reserve the same row is scored.
        let r = JitEngine.evaluate(&p, &inputs, &NoVerdicts);
        assert_eq!((r.score, r.criteria[0].is_met()), (Some(1.0), true), "{r:?}");
    }
}
