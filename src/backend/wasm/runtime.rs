//! The Wasm engine proper: compiles a program's module once per process (cache keyed by the
//! IR hash), instantiates it once per thread, and evaluates rows through the shared step
//! driver (`interp::run_row`), each root a call into the module. Every row runs under its
//! `Limits`: fuel (Wasm instructions, and the work host functions do, from one tank), a
//! wall-clock deadline (epoch interruption in Wasm code, one ticker thread per process; the
//! row's budget inside host functions), a cap on the bytes the row allocates on the host
//! (counted by `meter` while the row runs, checked as values are made and as intrinsics work),
//! and a cap on linear memory. No WASI, no file system, no network: the only imports are
//! `abi`'s. A limit hit is a `rubric::trap::limit` trap in that row's result.

use super::abi;
use super::codegen::compile_module;
use super::host::{link, settle_fuel, FxBuild, Host};
use crate::backend::cache::{lookup, ProcessCache, Recent, PER_THREAD};
use crate::engine::{Engine, RowResult, TrapInfo, VerdictSource};
use crate::interp::{run_row, Decided, Evaluator, Root, Trace};
use crate::ir::{Expr, ExprKind, Program};
use crate::stdlib::{Budget, Trap, TrapKind};
use crate::value::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::{Config, InstancePre, Linker, Module, OptLevel, Store, StoreLimitsBuilder, TypedFunc};

pub use crate::stdlib::Limits;

/// The Wasm engine as an [`Engine`].
#[derive(Debug, Clone, Copy)]
pub struct WasmEngine {
    pub limits: Limits,
}

impl WasmEngine {
    pub const fn new() -> WasmEngine {
        WasmEngine { limits: Limits::DEFAULT }
    }

    pub const fn with_limits(limits: Limits) -> WasmEngine {
        WasmEngine { limits }
    }
}

impl Default for WasmEngine {
    fn default() -> WasmEngine {
        WasmEngine::new()
    }
}

/// A Wasm engine bound to one program (a batch's): rows of that program find its module
/// without any lookup. Sound because the borrow keeps that program alive and unchanged: a row
/// whose program is at the same address is that program. Rows of any other program take the
/// general path of [`WasmEngine`].
pub struct BoundWasmEngine<'p> {
    engine: WasmEngine,
    program: &'p Program,
    compiled: Result<Arc<Compiled>, String>,
}

impl WasmEngine {
    /// Bind to `program`, compiling its module now (or finding it in the process cache).
    pub fn bind(self, program: &Program) -> BoundWasmEngine<'_> {
        BoundWasmEngine { engine: self, program, compiled: compiled(program) }
    }

    /// Bind to `program` with a module compiled elsewhere (e.g. the bytes of a bundle, which
    /// must be `compile_module(program)`'s).
    pub fn bind_module(self, program: &Program, bytes: Vec<u8>) -> BoundWasmEngine<'_> {
        BoundWasmEngine {
            engine: self,
            program,
            compiled: Compiled::from_bytes(Arc::new(program.clone()), bytes).map(Arc::new),
        }
    }
}

impl Engine for BoundWasmEngine<'_> {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        if std::ptr::eq(program, self.program) {
            self.engine.evaluate_with(self.compiled.clone(), program, inputs, verdicts)
        } else {
            self.engine.evaluate(program, inputs, verdicts)
        }
    }
}

/// The period of the deadline clock: one epoch tick.
const TICK: Duration = Duration::from_millis(5);

/// The process's wasmtime engine, with fuel and epoch interruption on, and its ticker.
fn wasmtime_engine() -> Result<&'static wasmtime::Engine, String> {
    static ENGINE: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config.consume_fuel(true);
            config.epoch_interruption(true);
            config.cranelift_opt_level(OptLevel::Speed);
            config.max_wasm_stack(1 << 20);
            // Modules have one small memory that never grows: no need for the default 4 GiB
            // reservation per instance.
            config.memory_reservation(Limits::DEFAULT.memory_bytes as u64);
            config.memory_guard_size(1 << 16);
            let engine = wasmtime::Engine::new(&config).map_err(|e| format!("cannot start wasmtime: {e}"))?;
            let ticking = engine.clone();
            std::thread::Builder::new()
                .name("rubric-wasm-epoch".into())
                .spawn(move || loop {
                    std::thread::sleep(TICK);
                    ticking.increment_epoch();
                })
                .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
            Ok(engine)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A program compiled to a Wasm module and linked, ready to instantiate on any thread.
pub struct Compiled {
    pub program: Arc<Program>,
    /// The portable module (what a bundle carries).
    pub bytes: Vec<u8>,
    pre: InstancePre<Host>,
    /// The value of every root that is a literal (criterion texts, points, weights...): the
    /// driver gets it without a call into the module.
    constants: HashMap<Root, Value, FxBuild>,
}

impl Compiled {
    /// Compile `p`'s module and link it.
    pub fn new(p: &Program) -> Result<Compiled, String> {
        let bytes = compile_module(p)?;
        Compiled::from_bytes(Arc::new(p.clone()), bytes)
    }

    /// Link a module produced by [`compile_module`] for `program` (e.g. read from a bundle).
    /// Only the imports of `abi` resolve: a module that imports anything else is refused.
    pub fn from_bytes(program: Arc<Program>, bytes: Vec<u8>) -> Result<Compiled, String> {
        let engine = wasmtime_engine()?;
        let module = Module::new(engine, &bytes).map_err(|e| format!("invalid Wasm module: {e}"))?;
        let mut intrinsics = Vec::new();
        for import in module.imports() {
            match import.module() {
                abi::HOST_MODULE => {}
                abi::INTRINSIC_MODULE => intrinsics.push(import.name().to_string()),
                other => return Err(format!("the module imports from `{other}`, which the host does not provide")),
            }
        }
        let mut linker = Linker::new(engine);
        link(&mut linker, &intrinsics)?;
        let pre = linker.instantiate_pre(&module).map_err(|e| format!("cannot link the module: {e}"))?;
        let constants = crate::interp::roots(&program)
            .into_iter()
            .filter_map(|(root, e)| match &e.kind {
                ExprKind::Const(c) => Some((root, crate::interp::ops::const_value(c))),
                _ => None,
            })
            .collect();
        Ok(Compiled { program, bytes, pre, constants })
    }
}

/// Compiled modules by IR hash, for the whole process.
fn cache() -> &'static ProcessCache<Compiled> {
    static CACHE: OnceLock<ProcessCache<Compiled>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

thread_local! {
    /// The programs this thread evaluated last, by address, so that a batch of rows does not
    /// hash its program for every row (an entry is used only if the program is still equal).
    static RECENT: Recent<Compiled> = const { RefCell::new(Vec::new()) };
    /// This thread's instances, most recent last.
    static INSTANCES: RefCell<Vec<Instance>> = const { RefCell::new(Vec::new()) };
}

/// The compiled module of `p`: compiled at most once per process.
pub fn compiled(p: &Program) -> Result<Arc<Compiled>, String> {
    lookup(p, &RECENT, cache(), |c| &c.program, Compiled::new)
}

/// One instance of a compiled module, with its store, on one thread.
struct Instance {
    compiled: Arc<Compiled>,
    memory_bytes: usize,
    store: Store<Host>,
    roots: HashMap<Root, TypedFunc<(), i32>, FxBuild>,
}

impl Instance {
    fn new(compiled: Arc<Compiled>, limits: &Limits) -> Result<Instance, Trap> {
        let engine = wasmtime_engine().map_err(|e| Trap::new(TrapKind::Type, e))?;
        let store_limits =
            StoreLimitsBuilder::new().memory_size(limits.memory_bytes).instances(1).memories(1).tables(0).build();
        let host = Host::new(compiled.program.clone(), store_limits);
        let mut store = Store::new(engine, host);
        store.limiter(|h| &mut h.limits);
        store.set_fuel(limits.fuel).map_err(|e| Trap::new(TrapKind::Type, e.to_string()))?;
        store.set_epoch_deadline(deadline_ticks(limits));
        let instance = compiled.pre.instantiate(&mut store).map_err(|e| {
            Trap::new(TrapKind::Limit, format!("the module cannot be instantiated within the limits: {e}"))
        })?;
        let memory = instance.get_memory(&mut store, "memory");
        store.data_mut().memory = memory;
        let mut roots = HashMap::default();
        for (root, _) in crate::interp::roots(&compiled.program) {
            let f = instance
                .get_typed_func::<(), i32>(&mut store, &root.name())
                .map_err(|e| Trap::new(TrapKind::Type, format!("the module lacks root `{}`: {e}", root.name())))?;
            roots.insert(root, f);
        }
        Ok(Instance { compiled, memory_bytes: limits.memory_bytes, store, roots })
    }

    fn begin_row(&mut self, inputs: &[Value], limits: &Limits) -> Result<(), Trap> {
        self.store.set_fuel(limits.fuel).map_err(|e| Trap::new(TrapKind::Type, e.to_string()))?;
        self.store.set_epoch_deadline(deadline_ticks(limits));
        self.store.data_mut().begin_row(inputs, Budget::new(*limits));
        Ok(())
    }
}

fn deadline_ticks(limits: &Limits) -> u64 {
    deadline_ticks_for(limits.timeout)
}

/// Epoch ticks for `time` from now (at least one, plus one for the tick in progress).
pub(super) fn deadline_ticks_for(time: Duration) -> u64 {
    (time.as_nanos() / TICK.as_nanos()).max(1) as u64 + 1
}

/// The trap of a failed root call: the one a host import recorded, else wasmtime's.
fn call_trap(host: &mut Host, err: wasmtime::Error, limits: &Limits) -> Trap {
    if let Some(t) = host.core.trap.take() {
        return t;
    }
    match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => Budget::fuel_trap(limits),
        Some(wasmtime::Trap::Interrupt) => Budget::time_trap(limits),
        Some(wasmtime::Trap::StackOverflow) => {
            Trap::new(TrapKind::Limit, "stack limit: the row's call stack overflowed")
        }
        Some(t) => Trap::new(TrapKind::Type, format!("wasm trap: {t}")),
        None => Trap::new(TrapKind::Type, format!("wasm error: {err}")),
    }
}

/// Evaluates roots by calling the instance's exports.
struct WasmEval<'i> {
    inst: &'i mut Instance,
    limits: Limits,
}

impl Evaluator for WasmEval<'_> {
    fn eval(
        &mut self,
        root: Root,
        _e: &Expr,
        locals: &mut Vec<Value>,
        decided: &mut Decided,
        _trace: &mut Trace<'_>,
    ) -> Result<Value, Trap> {
        if let Some(v) = self.inst.compiled.constants.get(&root) {
            return Ok(v.clone());
        }
        let inst = &mut *self.inst;
        let Some(f) = inst.roots.get(&root) else {
            return Err(Trap::new(TrapKind::Type, format!("the module has no root `{}`", root.name())));
        };
        let store = &mut inst.store;
        {
            let core = &mut store.data_mut().core;
            core.begin_root();
            core.decided = std::mem::take(decided);
            core.locals = std::mem::take(locals);
        }
        let r = f.call(&mut *store, ());
        settle_fuel(store);
        let host = store.data_mut();
        *decided = std::mem::take(&mut host.core.decided);
        *locals = std::mem::take(&mut host.core.locals);
        let result = match r {
            Ok(h) => host.core.get(h).cloned(),
            Err(e) => Err(call_trap(host, e, &self.limits)),
        };
        if let Err(t) = &result {
            host.core.fail_pending_lets(t);
        }
        host.core.begin_root();
        result
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

impl Engine for WasmEngine {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        self.evaluate_with(compiled(program), program, inputs, verdicts)
    }
}

impl WasmEngine {
    fn evaluate_with(
        &self,
        compiled: Result<Arc<Compiled>, String>,
        program: &Program,
        inputs: &[Value],
        verdicts: &dyn VerdictSource,
    ) -> RowResult {
        let compiled = match compiled {
            Ok(c) => c,
            Err(e) => return failed_row(Trap::new(TrapKind::Type, format!("the Wasm engine cannot compile: {e}"))),
        };
        let limits = self.limits;
        // The instance leaves the thread's list while the row runs (a row that waits inside an
        // intrinsic may run another row on this thread).
        let taken = INSTANCES.with(|cell| {
            let mut list = cell.borrow_mut();
            let pos =
                list.iter().position(|i| Arc::ptr_eq(&i.compiled, &compiled) && i.memory_bytes == limits.memory_bytes);
            pos.map(|i| list.remove(i))
        });
        let mut inst = match taken {
            Some(i) => i,
            None => match Instance::new(compiled.clone(), &limits) {
                Ok(i) => i,
                Err(t) => return failed_row(t),
            },
        };
        // Everything the row allocates from here on counts against its memory limit.
        let meter = crate::meter::RowMeter::open();
        let result = match inst.begin_row(inputs, &limits) {
            Ok(()) => run_row(program, inputs, verdicts, &mut WasmEval { inst: &mut inst, limits }, None),
            Err(t) => failed_row(t),
        };
        inst.store.data_mut().core.end_row();
        drop(meter);
        INSTANCES.with(|cell| {
            let mut list = cell.borrow_mut();
            list.push(inst);
            if list.len() > PER_THREAD {
                list.remove(0);
            }
        });
        result
    }
}
