//! IR → native code with Cranelift: one function per IR function (typed parameters and
//! results), one per `let` (cached through the host), one per driver root that is not a
//! literal. Numbers and booleans stay in registers where the static type says so; arithmetic,
//! comparisons, `not`, negation, Kleene `and`/`or`, `??` and `if` on plain numbers and booleans
//! are machine instructions, and everything else — an operand that is not plain (unscored...),
//! texts, lists, records, fields, intrinsics, aggregations, criterion values, folds — calls the
//! host functions of `abi`, which apply the interpreter's own `ops`. The lowering follows the
//! Wasm engine's (`backend::wasm::codegen`) construct for construct, so both engines order the
//! shared operations alike (except that a fold hands a lambda its element in the one register
//! representation the lambda reads it in); see `docs/decisions/0006-jit-engine.md`.
//!
//! Every function takes the row's context pointer first, starts by checking the stack pointer
//! against the context's limit, and reads the context's `trapped` word after every call that
//! can fail, returning at once (zeros) when a host function recorded a trap.

use super::abi::{HostFn, Ty, DERIVED_WORD, STRING_WORD};
use super::host::{
    self, IntrinsicEntry, SlotCall, Tables, EPOCH_OFFSET, NUM_OUT_OFFSET, SLOTS_OFFSET, SLOT_EPOCH_OFFSET,
    SLOT_NUM_OFFSET, SLOT_SIZE, SLOT_WORD_OFFSET, STACK_LIMIT_OFFSET, TRAPPED_OFFSET,
};
use crate::backend::lower::{self as codes, slot_uses, Repr, NULL};
use crate::interp::{ops, roots, Root};
use crate::ir::{self, BinOp, CmpOp, Const, Expr, ExprKind, HigherOrder, Program, Type, UnOp};
use crate::stdlib::scan::Answer;
use crate::value::Value;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockArg, FuncRef, InstBuilder, MemFlagsData, Signature, UserFuncName, Value as V,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

/// How a root is evaluated: a literal's value, or its compiled function.
pub enum Entry {
    Const(Value),
    Code(Compiled),
}

/// A root's compiled function: the address of an `extern "C" fn(*mut host::Ctx) -> i32`
/// returning the root's value in its natural representation (`repr`: a Bool's word, a
/// Number's word with the `f64` half in the context's `num_out`, a handle).
pub struct Compiled {
    pub address: *const u8,
    pub repr: Repr,
    /// Whether the root reads only the row's inputs, constants and `let`s: no criterion, no
    /// aggregation and no value bound by the driver (an `each` element, an extracted value),
    /// so that it needs neither the decided criteria nor the driver's locals.
    pub inputs_only: bool,
}

/// A compiled program: the JIT module that owns the machine code, the tables its host
/// functions read, and every root's entry, sorted by root.
pub struct Native {
    pub module: JITModule,
    pub tables: Tables,
    pub roots: Vec<(Root, Entry)>,
}

/// The host's instruction set, detected once per process.
fn isa() -> Result<OwnedTargetIsa, String> {
    static ISA: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, name: &str, value: &str| {
            flags.set(name, value).map_err(|e| format!("cranelift setting `{name}`: {e}"))
        };
        set(&mut flags, "opt_level", "speed")?;
        // cranelift-jit's requirements.
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        // A frame larger than a page touches every page it spans, so it cannot skip the guard.
        set(&mut flags, "enable_probestack", "true")?;
        set(&mut flags, "probestack_strategy", "inline")?;
        set(&mut flags, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
        let builder = cranelift_native::builder().map_err(|e| format!("this machine is not supported: {e}"))?;
        builder.finish(settings::Flags::new(flags)).map_err(|e| format!("cannot configure Cranelift: {e}"))
    })
    .clone()
}

/// Compile `p` to native code.
pub fn compile(p: &Program) -> Result<Native, String> {
    let mut jb = JITBuilder::with_isa(isa()?, default_libcall_names());
    for f in HostFn::ALL {
        jb.symbol(f.symbol(), host::address(f));
    }
    let module = JITModule::new(jb);
    let ptr = module.target_config().pointer_type();
    let roots = roots(p);
    let mut m = ModuleGen {
        p,
        module,
        ptr,
        host_ids: Vec::new(),
        fn_ids: Vec::new(),
        let_ids: Vec::new(),
        strings: Vec::new(),
        string_index: HashMap::new(),
        intrinsics: Vec::new(),
        intrinsic_index: HashMap::new(),
        slots: Vec::new(),
        slot_index: HashMap::new(),
        derived: Vec::new(),
    };
    for f in HostFn::ALL {
        let (params, results) = f.signature();
        let params: Vec<types::Type> = params.iter().map(|t| clif(*t)).collect();
        let results: Vec<types::Type> = results.iter().map(|t| clif(*t)).collect();
        let sig = m.signature(&params, &results);
        let id = m.declare(f.symbol(), Linkage::Import, &sig)?;
        m.host_ids.push(id);
    }
    let mut fn_sigs = Vec::new();
    for (i, f) in p.functions.iter().enumerate() {
        let params: Vec<types::Type> =
            f.params.iter().flat_map(|(_, t)| clif_types(Repr::of(t)).iter().copied()).collect();
        let sig = m.signature(&params, clif_types(Repr::of(&f.ret)));
        let id = m.declare(&format!("fn{i}"), Linkage::Local, &sig)?;
        m.fn_ids.push(id);
        fn_sigs.push(sig);
    }
    let handle_sig = m.signature(&[], &[types::I32]);
    for i in 0..p.lets.len() {
        let id = m.declare(&format!("let{i}"), Linkage::Local, &handle_sig)?;
        m.let_ids.push(id);
    }
    let mut root_ids = Vec::new();
    for (i, (root, e)) in roots.iter().enumerate() {
        match &e.kind {
            ExprKind::Const(c) => root_ids.push((*root, Err(ops::const_value(c)))),
            _ => {
                let id = m.declare(&format!("root{i}"), Linkage::Export, &handle_sig)?;
                root_ids.push((*root, Ok((id, *e, Repr::of(&e.ty), p.reads_only_inputs(e)))));
            }
        }
    }

    let mut cctx = m.module.make_context();
    let mut fbc = FunctionBuilderContext::new();
    for (i, f) in p.functions.iter().enumerate() {
        let (id, sig) = (m.fn_ids[i], fn_sigs[i].clone());
        m.define(id, sig, &mut cctx, &mut fbc, |g, params| {
            let reprs: Vec<Repr> = f.params.iter().map(|(_, t)| Repr::of(t)).collect();
            let mut vals = Vec::new();
            let mut at = 0;
            for r in reprs {
                let n = clif_types(r).len();
                vals.push(Val::from_values(r, &params[at..at + n]));
                at += n;
            }
            g.setup_slots(&f.body, &vals, false)?;
            let v = g.expr_as(&f.body, Repr::of(&f.ret))?;
            Ok(v.values())
        })?;
    }
    for (i, l) in p.lets.iter().enumerate() {
        let id = m.let_ids[i];
        m.define(id, handle_sig.clone(), &mut cctx, &mut fbc, |g, _| {
            g.setup_slots(&l.value, &[], false)?;
            Ok(vec![g.let_body(i as i32, &l.value)?])
        })?;
    }
    for (_, entry) in &root_ids {
        if let Ok((id, e, repr, _)) = entry {
            m.define(*id, handle_sig.clone(), &mut cctx, &mut fbc, |g, _| {
                g.setup_slots(e, &[], true)?;
                // A Number's `f64` half goes back in `num_out`, as a host function's does.
                Ok(match g.expr_as(e, *repr)? {
                    Val::Num(f, h) => {
                        g.b.ins().store(MemFlagsData::trusted(), f, g.ctx, NUM_OUT_OFFSET);
                        vec![h]
                    }
                    v => v.values(),
                })
            })?;
        }
    }
    m.module.finalize_definitions().map_err(|e| format!("cannot link the compiled code: {e}"))?;

    let mut out: Vec<(Root, Entry)> = root_ids
        .into_iter()
        .map(|(root, entry)| {
            let entry = match entry {
                Ok((id, _, repr, inputs_only)) => {
                    Entry::Code(Compiled { address: m.module.get_finalized_function(id), repr, inputs_only })
                }
                Err(v) => Entry::Const(v),
            };
            (root, entry)
        })
        .collect();
    out.sort_by_key(|(root, _)| *root);
    // Slots one pass over one input answers, grouped (`SlotCall::group`).
    let mut slots = m.slots;
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut group_of: HashMap<(i32, u8), u32> = HashMap::new();
    for (k, call) in slots.iter_mut().enumerate() {
        if let Some((answer, _)) = call.answer {
            let g = *group_of.entry((call.args[0], answer.pass())).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() as u32 - 1
            });
            groups[g as usize].push(k as u32);
            call.group = Some(g);
        }
    }
    let tables = Tables {
        program: Arc::new(p.clone()),
        strings: m.strings,
        intrinsics: m.intrinsics,
        slots,
        derived: m.derived,
        groups,
    };
    Ok(Native { module: m.module, tables, roots: out })
}

fn clif(t: Ty) -> types::Type {
    match t {
        Ty::I32 => types::I32,
        Ty::F64 => types::F64,
    }
}

/// The machine types that hold a value of representation `r`.
fn clif_types(r: Repr) -> &'static [types::Type] {
    match r {
        Repr::Num => &[types::F64, types::I32],
        Repr::Bool | Repr::Handle => &[types::I32],
    }
}

/// A value in registers.
#[derive(Debug, Clone, Copy)]
enum Val {
    Num(V, V),
    Bool(V),
    Handle(V),
}

impl Val {
    fn repr(self) -> Repr {
        match self {
            Val::Num(..) => Repr::Num,
            Val::Bool(_) => Repr::Bool,
            Val::Handle(_) => Repr::Handle,
        }
    }

    fn values(self) -> Vec<V> {
        match self {
            Val::Num(f, h) => vec![f, h],
            Val::Bool(v) | Val::Handle(v) => vec![v],
        }
    }

    /// The `i32` part: the handle half of a Number, a Bool, a handle.
    fn word(self) -> V {
        match self {
            Val::Num(_, h) | Val::Bool(h) | Val::Handle(h) => h,
        }
    }

    fn from_values(r: Repr, vs: &[V]) -> Val {
        match r {
            Repr::Num => Val::Num(vs[0], vs[1]),
            Repr::Bool => Val::Bool(vs[0]),
            Repr::Handle => Val::Handle(vs[0]),
        }
    }
}

struct ModuleGen<'p> {
    p: &'p Program,
    module: JITModule,
    ptr: types::Type,
    /// By `HostFn::index`.
    host_ids: Vec<FuncId>,
    fn_ids: Vec<FuncId>,
    let_ids: Vec<FuncId>,
    strings: Vec<Arc<str>>,
    string_index: HashMap<String, i32>,
    intrinsics: Vec<IntrinsicEntry>,
    intrinsic_index: HashMap<(String, u32, usize), i32>,
    /// Calls with a row slot (`host::SlotCall`), by slot.
    slots: Vec<SlotCall>,
    slot_index: HashMap<SlotCall, u32>,
    derived: Vec<(i32, smallvec::SmallVec<[i32; 3]>)>,
}

impl ModuleGen<'_> {
    /// A signature: the context pointer, then `params`.
    fn signature(&self, params: &[types::Type], results: &[types::Type]) -> Signature {
        let mut s = self.module.make_signature();
        s.params.push(AbiParam::new(self.ptr));
        s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
        s.returns.extend(results.iter().map(|t| AbiParam::new(*t)));
        s
    }

    fn declare(&mut self, name: &str, linkage: Linkage, sig: &Signature) -> Result<FuncId, String> {
        self.module.declare_function(name, linkage, sig).map_err(|e| format!("cannot declare `{name}`: {e}"))
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(i) = self.string_index.get(s) {
            return *i;
        }
        let i = self.strings.len() as i32;
        self.strings.push(Arc::from(s));
        self.string_index.insert(s.to_string(), i);
        i
    }

    /// The row slot of `call`, when it may have one: its intrinsic is one the program's scan
    /// plan memoises (`call_memoised` would answer every call of it in a row after the first
    /// from the memo; the slot answers them without a host call), or it is a check one of the
    /// plan's passes answers (`scan::Answer`; its slot is then in that pass's group).
    fn slot(&mut self, mut call: SlotCall) -> Option<i32> {
        let entry = self.intrinsics.get(usize::try_from(call.intrinsic).ok()?)?;
        let resolved = entry.resolved?;
        let plan = crate::interp::prepared(self.p).scan(self.p);
        // A check of an input against a needle or pattern the plan holds: its pass answers it.
        call.answer = match (Answer::of(&entry.name, entry.overload), call.args.as_slice()) {
            (Some(answer), &[input, needle])
                if input < 0 && i64::from(input) > STRING_WORD && i64::from(needle) <= STRING_WORD =>
            {
                let needle = self.strings.get(usize::try_from(STRING_WORD - i64::from(needle)).ok()?)?;
                plan.place(answer, needle).map(|place| (answer, place))
            }
            _ => None,
        };
        if call.answer.is_none() && !plan.memoises(resolved) {
            return None;
        }
        if let Some(k) = self.slot_index.get(&call) {
            return Some(*k as i32);
        }
        let k = self.slots.len() as u32;
        self.slots.push(call.clone());
        self.slot_index.insert(call, k);
        Some(k as i32)
    }

    /// The word of argument `a` of an intrinsic call when it is passed as a word rather than a
    /// value: an input, a text constant, `null`, or (where `derive`) a call of an intrinsic the scan
    /// plan memoises on inputs and text constants, computed by the host (`abi::DERIVED_WORD`).
    fn arg_word(&mut self, a: &Expr, derive: bool) -> Option<i64> {
        match &a.kind {
            ExprKind::Input(i) => Some(-(*i as i64) - 1),
            ExprKind::Const(Const::Text(t)) => Some(STRING_WORD - self.string(t) as i64),
            // `null` is always handle `NULL`, in every root.
            ExprKind::Const(Const::Null) => Some(i64::from(NULL)),
            ExprKind::Intrinsic { name, overload, args, .. } if derive && (1..=3).contains(&args.len()) => {
                let words: Vec<i64> = args.iter().map(|a| self.arg_word(a, false)).collect::<Option<_>>()?;
                let index = self.intrinsic(name, *overload, args.len());
                let resolved = self.intrinsics.get(index as usize)?.resolved?;
                if !crate::interp::prepared(self.p).scan(self.p).memoises(resolved) {
                    return None;
                }
                let call = (index, words.iter().map(|w| *w as i32).collect());
                let j = match self.derived.iter().position(|d| *d == call) {
                    Some(j) => j,
                    None => {
                        self.derived.push(call);
                        self.derived.len() - 1
                    }
                };
                Some(DERIVED_WORD - j as i64)
            }
            _ => None,
        }
    }

    /// Whether intrinsic `name`#`overload` is `max` (`Some(true)`) or `min` (`Some(false)`) of
    /// two Numbers (`stdlib::number_pair_extreme`).
    fn pair_extreme(&self, name: &str, overload: u32) -> Option<bool> {
        let intr = crate::interp::ops::resolve_intrinsic(name, overload).ok()?;
        crate::stdlib::number_pair_extreme(intr)
    }

    fn intrinsic(&mut self, name: &str, overload: u32, arity: usize) -> i32 {
        let key = (name.to_string(), overload, arity);
        if let Some(i) = self.intrinsic_index.get(&key) {
            return *i;
        }
        let i = self.intrinsics.len() as i32;
        self.intrinsics.push(IntrinsicEntry {
            name: name.to_string(),
            overload,
            arity,
            resolved: ops::resolve_intrinsic(name, overload).ok(),
        });
        self.intrinsic_index.insert(key, i);
        i
    }

    /// Define function `id`: `body` gets the parameters after the context pointer and returns
    /// the values to return.
    fn define(
        &mut self,
        id: FuncId,
        sig: Signature,
        cctx: &mut cranelift_codegen::Context,
        fbc: &mut FunctionBuilderContext,
        body: impl FnOnce(&mut FnGen<'_, '_, '_>, &[V]) -> Result<Vec<V>, String>,
    ) -> Result<(), String> {
        let rets: Vec<types::Type> = sig.returns.iter().map(|a| a.value_type).collect();
        cctx.func.signature = sig;
        cctx.func.name = UserFuncName::user(0, id.as_u32());
        let built = {
            let mut b = FunctionBuilder::new(&mut cctx.func, fbc);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let params = b.block_params(entry).to_vec();
            let mut g =
                FnGen { m: self, b, ctx: params[0], refs: HashMap::new(), slots: BTreeMap::new(), exit: None, rets };
            g.stack_check();
            let values = body(&mut g, &params[1..]);
            match values {
                Ok(values) => {
                    g.finish(&values);
                    Ok(())
                }
                Err(e) => Err(e),
            }
        };
        let r = built.and_then(|()| {
            self.module.define_function(id, cctx).map_err(|e| format!("cannot compile function {id}: {e:?}"))
        });
        self.module.clear_context(cctx);
        r
    }
}

/// The variables that hold one IR local slot, one set per representation it is read in.
#[derive(Default, Clone, Copy)]
struct Slot {
    num: Option<(Variable, Variable)>,
    boolean: Option<Variable>,
    handle: Option<Variable>,
}

struct FnGen<'m, 'p, 'f> {
    m: &'m mut ModuleGen<'p>,
    b: FunctionBuilder<'f>,
    /// The context pointer (the first parameter).
    ctx: V,
    refs: HashMap<FuncId, FuncRef>,
    slots: BTreeMap<u32, Slot>,
    /// The block that returns zeros after a trap (made on first use).
    exit: Option<Block>,
    rets: Vec<types::Type>,
}

impl FnGen<'_, '_, '_> {
    fn finish(mut self, values: &[V]) {
        self.b.ins().return_(values);
        if let Some(exit) = self.exit {
            self.b.switch_to_block(exit);
            let zeros: Vec<V> = self
                .rets
                .clone()
                .into_iter()
                .map(|t| if t == types::F64 { self.b.ins().f64const(0.0) } else { self.b.ins().iconst(t, 0) })
                .collect();
            self.b.ins().return_(&zeros);
        }
        self.b.seal_all_blocks();
        let config = self.m.module.target_config();
        self.b.finalize(config);
    }

    fn exit_block(&mut self) -> Block {
        match self.exit {
            Some(b) => b,
            None => {
                let b = self.b.create_block();
                self.b.set_cold_block(b);
                self.exit = Some(b);
                b
            }
        }
    }

    /// A function starts below the context's stack limit: trap (`StackExhausted`) and return.
    fn stack_check(&mut self) {
        let sp = self.b.ins().get_stack_pointer(self.m.ptr);
        let limit = self.b.ins().load(self.m.ptr, MemFlagsData::trusted(), self.ctx, STACK_LIMIT_OFFSET);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, limit);
        let deep = self.b.create_block();
        let body = self.b.create_block();
        self.b.set_cold_block(deep);
        self.b.ins().brif(low, deep, &[], body, &[]);
        self.b.switch_to_block(deep);
        let id = self.m.host_ids[HostFn::StackExhausted.index()];
        let f = self.func_ref(id);
        self.b.ins().call(f, &[self.ctx]);
        let exit = self.exit_block();
        self.b.ins().jump(exit, &[]);
        self.b.switch_to_block(body);
    }

    fn func_ref(&mut self, id: FuncId) -> FuncRef {
        if let Some(r) = self.refs.get(&id) {
            return *r;
        }
        let r = self.m.module.declare_func_in_func(id, self.b.func);
        self.refs.insert(id, r);
        r
    }

    /// After a call that may have recorded a trap: return at once if it did.
    fn check_trap(&mut self) {
        let t = self.b.ins().load(types::I32, MemFlagsData::trusted(), self.ctx, TRAPPED_OFFSET);
        let exit = self.exit_block();
        let cont = self.b.create_block();
        self.b.ins().brif(t, exit, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    fn call(&mut self, id: FuncId, args: &[V], check: bool) -> Vec<V> {
        let f = self.func_ref(id);
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(self.ctx);
        all.extend_from_slice(args);
        let inst = self.b.ins().call(f, &all);
        let results = self.b.inst_results(inst).to_vec();
        if check {
            self.check_trap();
        }
        results
    }

    fn host(&mut self, f: HostFn, args: &[V]) -> Vec<V> {
        let id = self.m.host_ids[f.index()];
        self.call(id, args, f.can_trap())
    }

    /// A host function with one result.
    fn host1(&mut self, f: HostFn, args: &[V]) -> V {
        self.host(f, args)[0]
    }

    fn i32(&mut self, n: i64) -> V {
        self.b.ins().iconst(types::I32, n)
    }

    fn null(&mut self, r: Repr) -> Val {
        let h = self.i32(NULL as i64);
        match r {
            Repr::Num => Val::Num(self.b.ins().f64const(0.0), h),
            Repr::Bool => Val::Bool(h),
            Repr::Handle => Val::Handle(h),
        }
    }

    /// The call of row slot `k` (a Number or a Bool, `repr`): the slot's value when this row
    /// filled it, else the host's call, which fills it.
    fn slotted(&mut self, k: i32, repr: Repr) -> Result<Val, String> {
        let flags = MemFlagsData::trusted();
        let slots = self.b.ins().load(self.m.ptr, flags, self.ctx, SLOTS_OFFSET);
        let epoch = self.b.ins().load(types::I32, flags, self.ctx, EPOCH_OFFSET);
        let at = k * SLOT_SIZE;
        let filled = self.b.ins().load(types::I32, flags, slots, at + SLOT_EPOCH_OFFSET);
        let hit = self.b.ins().icmp(IntCC::Equal, filled, epoch);
        // The value: a Bool's word, or a Number's word with its `f64` at `num`.
        let value = |s: &mut Self, word: V, base: V, num: i32| match repr {
            Repr::Num => Val::Num(s.b.ins().load(types::F64, flags, base, num), word),
            _ => Val::Bool(word),
        };
        self.branch(
            hit,
            repr,
            |s| {
                let word = s.b.ins().load(types::I32, flags, slots, at + SLOT_WORD_OFFSET);
                Ok(value(s, word, slots, at + SLOT_NUM_OFFSET))
            },
            |s| {
                let k = s.i32(k as i64);
                let word = s.host1(HostFn::IntrinsicSlot, &[k]);
                let ctx = s.ctx;
                Ok(value(s, word, ctx, NUM_OUT_OFFSET))
            },
        )
    }

    fn unbox_num(&mut self, h: V) -> Val {
        let word = self.host1(HostFn::UnboxNum, &[h]);
        let f = self.b.ins().load(types::F64, MemFlagsData::trusted(), self.ctx, NUM_OUT_OFFSET);
        Val::Num(f, word)
    }

    fn coerce(&mut self, v: Val, to: Repr) -> Val {
        match (v, to) {
            (v, r) if v.repr() == r => v,
            (Val::Num(f, h), Repr::Handle) => Val::Handle(self.host1(HostFn::BoxNum, &[f, h])),
            (Val::Bool(b), Repr::Handle) => Val::Handle(self.host1(HostFn::BoxBool, &[b])),
            (Val::Handle(h), Repr::Num) => self.unbox_num(h),
            (Val::Handle(h), Repr::Bool) => Val::Bool(self.host1(HostFn::UnboxBool, &[h])),
            (v, r) => {
                let h = self.coerce(v, Repr::Handle);
                self.coerce(h, r)
            }
        }
    }

    /// `cond ? then : els`, both arms coerced to `repr`.
    fn branch(
        &mut self,
        cond: V,
        repr: Repr,
        then: impl FnOnce(&mut Self) -> Result<Val, String>,
        els: impl FnOnce(&mut Self) -> Result<Val, String>,
    ) -> Result<Val, String> {
        let t = self.b.create_block();
        let e = self.b.create_block();
        let merge = self.b.create_block();
        for ty in clif_types(repr) {
            self.b.append_block_param(merge, *ty);
        }
        self.b.ins().brif(cond, t, &[], e, &[]);
        self.b.switch_to_block(t);
        let v = then(self)?;
        let v = self.coerce(v, repr);
        self.jump(merge, &v.values());
        self.b.switch_to_block(e);
        let v = els(self)?;
        let v = self.coerce(v, repr);
        self.jump(merge, &v.values());
        self.b.switch_to_block(merge);
        let params = self.b.block_params(merge).to_vec();
        Ok(Val::from_values(repr, &params))
    }

    fn jump(&mut self, to: Block, args: &[V]) {
        let args: Vec<BlockArg> = args.iter().map(|v| BlockArg::from(*v)).collect();
        self.b.ins().jump(to, &args);
    }

    /// Allocate the variables of every slot `body` uses and give them their initial values
    /// (`null`, or the parameters); for a root, load the slots the driver bound.
    fn setup_slots(&mut self, body: &Expr, params: &[Val], root: bool) -> Result<(), String> {
        let (reads, bound) = slot_uses(body);
        let mut all: BTreeSet<u32> = reads.keys().copied().collect();
        all.extend(bound.iter().copied());
        all.extend(0..params.len() as u32);
        for slot in all {
            // A lambda's parameter is held only in the representations it is read in (its
            // fold delivers each element in the one it needs, see `fold`).
            let mut want: BTreeSet<Repr> = reads.get(&slot).cloned().unwrap_or_default();
            let param = params.get(slot as usize).copied();
            if let Some(p) = param {
                want.insert(p.repr());
            }
            let mut s = Slot::default();
            for r in &want {
                match r {
                    Repr::Num => s.num = Some((self.b.declare_var(types::F64), self.b.declare_var(types::I32))),
                    Repr::Bool => s.boolean = Some(self.b.declare_var(types::I32)),
                    Repr::Handle => s.handle = Some(self.b.declare_var(types::I32)),
                }
            }
            self.slots.insert(slot, s);
            match param {
                Some(v) => self.bind(slot, v),
                None if root && reads.contains_key(&slot) && !bound.contains(&slot) => {
                    let i = self.i32(slot as i64);
                    let h = self.host1(HostFn::Local, &[i]);
                    self.bind(slot, Val::Handle(h));
                }
                None => {
                    // `null` in every representation: what unboxing the `null` handle gives.
                    let h = self.i32(NULL as i64);
                    if let Some((f, w)) = s.num {
                        let zero = self.b.ins().f64const(0.0);
                        self.b.def_var(f, zero);
                        self.b.def_var(w, h);
                    }
                    for var in [s.boolean, s.handle].into_iter().flatten() {
                        self.b.def_var(var, h);
                    }
                }
            }
        }
        Ok(())
    }

    /// Set every variable of `slot` to `v`.
    fn bind(&mut self, slot: u32, v: Val) {
        let s = self.slots.get(&slot).copied().unwrap_or_default();
        if let Some((f, w)) = s.num {
            if let Val::Num(x, h) = self.coerce(v, Repr::Num) {
                self.b.def_var(f, x);
                self.b.def_var(w, h);
            }
        }
        if let Some(var) = s.boolean {
            let b = self.coerce(v, Repr::Bool).word();
            self.b.def_var(var, b);
        }
        if let Some(var) = s.handle {
            let h = self.coerce(v, Repr::Handle).word();
            self.b.def_var(var, h);
        }
    }

    /// A `let`'s function: its cached value, or evaluate and cache it.
    fn let_body(&mut self, index: i32, value: &Expr) -> Result<V, String> {
        let i = self.i32(index as i64);
        let h = self.host1(HostFn::LetGet, &[i]);
        let v = self.branch(
            h,
            Repr::Handle,
            |_| Ok(Val::Handle(h)),
            |g| {
                let v = g.expr_as(value, Repr::Handle)?;
                let i = g.i32(index as i64);
                g.host(HostFn::LetSet, &[i, v.word()]);
                Ok(v)
            },
        )?;
        Ok(v.word())
    }

    fn expr_as(&mut self, e: &Expr, want: Repr) -> Result<Val, String> {
        let v = self.expr(e)?;
        Ok(self.coerce(v, want))
    }

    fn expr(&mut self, e: &Expr) -> Result<Val, String> {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &Expr) -> Result<Val, String> {
        let natural = Repr::of(&e.ty);
        match &e.kind {
            ExprKind::Const(c) => Ok(match c {
                Const::Null => Val::Handle(self.i32(NULL as i64)),
                Const::Bool(b) => Val::Bool(self.i32(*b as i64)),
                Const::Number(n) => {
                    let f = self.b.ins().f64const(*n);
                    Val::Num(f, self.i32(0))
                }
                Const::Text(t) => {
                    let s = self.m.string(t);
                    let s = self.i32(s as i64);
                    Val::Handle(self.host1(HostFn::Text, &[s]))
                }
            }),
            ExprKind::Input(i) => {
                let i = self.i32(*i as i64);
                Ok(Val::Handle(self.host1(HostFn::Input, &[i])))
            }
            ExprKind::Local(i) => {
                let s = self.slots.get(i).copied().ok_or_else(|| format!("local {i} has no slot"))?;
                Ok(match natural {
                    Repr::Num => {
                        let (f, w) = s.num.ok_or_else(|| format!("local {i} has no number slot"))?;
                        Val::Num(self.b.use_var(f), self.b.use_var(w))
                    }
                    Repr::Bool => {
                        Val::Bool(self.b.use_var(s.boolean.ok_or_else(|| format!("local {i} has no bool slot"))?))
                    }
                    Repr::Handle => {
                        Val::Handle(self.b.use_var(s.handle.ok_or_else(|| format!("local {i} has no handle slot"))?))
                    }
                })
            }
            ExprKind::Let(i) => {
                let id = *self.m.let_ids.get(*i as usize).ok_or_else(|| format!("unknown let {i}"))?;
                Ok(Val::Handle(self.call(id, &[], true)[0]))
            }
            ExprKind::Criterion(c) => {
                let c = self.i32(*c as i64);
                Ok(Val::Handle(self.host1(HostFn::Criterion, &[c])))
            }
            ExprKind::List(xs) => {
                self.host(HostFn::ListBegin, &[]);
                for x in xs {
                    let h = self.expr_as(x, Repr::Handle)?.word();
                    self.host(HostFn::ListPush, &[h]);
                }
                Ok(Val::Handle(self.host1(HostFn::ListEnd, &[])))
            }
            ExprKind::Record(fs) => {
                self.host(HostFn::RecordBegin, &[]);
                for (n, x) in fs {
                    let h = self.expr_as(x, Repr::Handle)?.word();
                    let s = self.m.string(n);
                    let s = self.i32(s as i64);
                    self.host(HostFn::RecordPut, &[s, h]);
                }
                Ok(Val::Handle(self.host1(HostFn::RecordEnd, &[])))
            }
            ExprKind::Field { base, name, .. } => {
                let b = self.expr_as(base, Repr::Handle)?.word();
                let s = self.m.string(name);
                let s = self.i32(s as i64);
                Ok(Val::Handle(self.host1(HostFn::Field, &[b, s])))
            }
            ExprKind::Index { base, index, .. } => {
                let b = self.expr_as(base, Repr::Handle)?.word();
                let i = self.expr_as(index, Repr::Handle)?.word();
                Ok(Val::Handle(self.host1(HostFn::Index, &[b, i])))
            }
            ExprKind::Unary { op, arg } => self.unary(*op, arg),
            ExprKind::Narrowed(arg) => self.expr_as(arg, natural),
            ExprKind::Binary { op, lhs, rhs, .. } => self.binary(*op, lhs, rhs, natural),
            ExprKind::Compare { first, rest } => self.compare_chain(first, rest),
            ExprKind::If { cond, then, els } => {
                let c = self.expr_as(cond, Repr::Bool)?.word();
                let is_true = self.b.ins().icmp_imm_s(IntCC::Equal, c, 1);
                self.branch(
                    is_true,
                    natural,
                    |g| g.expr(then),
                    |g| {
                        let is_false = g.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
                        g.branch(is_false, natural, |g| g.expr(els), |g| Ok(Val::Handle(g.host1(HostFn::Cond, &[c]))))
                    },
                )
            }
            ExprKind::Intrinsic { name, overload, args, .. }
                if natural == Repr::Num
                    && args.len() == 2
                    && args.iter().all(|a| a.ty == Type::Number)
                    && self.m.pair_extreme(name, *overload).is_some() =>
            {
                self.pair_extreme(name, *overload, &args[0], &args[1])
            }
            ExprKind::Intrinsic { name, overload, args, .. } if (1..=3).contains(&args.len()) => {
                // Up to three arguments go straight to the call (one host call, not one per
                // argument and one for the call).
                let index = self.m.intrinsic(name, *overload, args.len());
                // Inputs, text constants and memoised calls on them are passed as words, not
                // values: no handle, and no host call of their own.
                let words: Vec<Option<i64>> = args.iter().map(|a| self.m.arg_word(a, true)).collect();
                if natural != Repr::Handle && words.iter().all(Option::is_some) {
                    let call = SlotCall {
                        intrinsic: index,
                        args: words.iter().map(|w| w.unwrap_or_default() as i32).collect(),
                        bool: natural == Repr::Bool,
                        answer: None,
                        group: None,
                    };
                    if let Some(k) = self.m.slot(call) {
                        return self.slotted(k, natural);
                    }
                }
                let mut call = vec![self.i32(index as i64)];
                for (a, w) in args.iter().zip(words) {
                    let w = match w {
                        Some(w) => self.i32(w),
                        None => self.expr_as(a, Repr::Handle)?.word(),
                    };
                    call.push(w);
                }
                if natural == Repr::Bool {
                    // A Bool result comes back as its word, not through the value table.
                    let f = [HostFn::IntrinsicBool1, HostFn::IntrinsicBool2, HostFn::IntrinsicBool3][args.len() - 1];
                    return Ok(Val::Bool(self.host1(f, &call)));
                }
                if natural == Repr::Num {
                    // A Number result comes back in `num_out`, not through the value table.
                    let f = [HostFn::IntrinsicNum1, HostFn::IntrinsicNum2, HostFn::IntrinsicNum3][args.len() - 1];
                    let word = self.host1(f, &call);
                    let n = self.b.ins().load(types::F64, MemFlagsData::trusted(), self.ctx, NUM_OUT_OFFSET);
                    return Ok(Val::Num(n, word));
                }
                let f = [HostFn::Intrinsic1, HostFn::Intrinsic2, HostFn::Intrinsic3][args.len() - 1];
                Ok(Val::Handle(self.host1(f, &call)))
            }
            ExprKind::Intrinsic { name, overload, args, .. } => {
                let index = self.m.intrinsic(name, *overload, args.len());
                for a in args {
                    let h = self.expr_as(a, Repr::Handle)?.word();
                    self.host(HostFn::Arg, &[h]);
                }
                let index = self.i32(index as i64);
                Ok(Val::Handle(self.host1(HostFn::Intrinsic, &[index])))
            }
            ExprKind::Call { func, args, .. } => {
                let f = self.m.p.functions.get(*func as usize).ok_or_else(|| format!("unknown function {func}"))?;
                if args.len() > f.params.len() {
                    return Err(format!("`{}` takes {} arguments, called with {}", f.name, f.params.len(), args.len()));
                }
                let params: Vec<Repr> = f.params.iter().map(|(_, t)| Repr::of(t)).collect();
                let ret = Repr::of(&f.ret);
                let mut values = Vec::new();
                for (i, r) in params.iter().enumerate() {
                    let v = match args.get(i) {
                        Some(a) => self.expr_as(a, *r)?,
                        None => self.null(*r),
                    };
                    values.extend(v.values());
                }
                let id = self.m.fn_ids[*func as usize];
                let results = self.call(id, &values, true);
                Ok(Val::from_values(ret, &results))
            }
            ExprKind::Aggregate { op, set, policy, args, .. } => {
                for a in args {
                    let h = self.expr_as(a, Repr::Handle)?.word();
                    self.host(HostFn::Arg, &[h]);
                }
                let op = self.i32(codes::code_of(ir::AggOp::ALL, op) as i64);
                let set = self.i32(*set as i64);
                let policy = self.i32(codes::code_of(&codes::POLICIES, policy) as i64);
                let n = self.i32(args.len() as i64);
                Ok(Val::Handle(self.host1(HostFn::Aggregate, &[op, set, policy, n])))
            }
            ExprKind::HigherOrder { op, list, local, body } => self.fold(*op, list, *local, body),
        }
    }

    /// Whether two Numbers are both plain: their handle halves are both `0`.
    fn both_plain(&mut self, xh: V, yh: V) -> V {
        let both = self.b.ins().bor(xh, yh);
        self.b.ins().icmp_imm_s(IntCC::Equal, both, 0)
    }

    /// `max(a, b)` or `min(a, b)` of two Numbers: on plain numbers, a direct call of the
    /// intrinsic's own function (`HostFn::NumMax`, `NumMin`: nothing to check after it); an
    /// operand that is not plain (`unscored`, `null`) goes to the intrinsic as any call does.
    fn pair_extreme(&mut self, name: &str, overload: u32, a: &Expr, b: &Expr) -> Result<Val, String> {
        let larger = self.m.pair_extreme(name, overload) == Some(true);
        let Val::Num(xf, xh) = self.expr_as(a, Repr::Num)? else { unreachable!("coerced to a Number") };
        let Val::Num(yf, yh) = self.expr_as(b, Repr::Num)? else { unreachable!("coerced to a Number") };
        let plain = self.both_plain(xh, yh);
        self.branch(
            plain,
            Repr::Num,
            |g| {
                let f = if larger { HostFn::NumMax } else { HostFn::NumMin };
                let r = g.host1(f, &[xf, yf]);
                Ok(Val::Num(r, g.i32(0)))
            },
            |g| {
                let index = g.m.intrinsic(name, overload, 2);
                let index = g.i32(index as i64);
                let x = g.coerce(Val::Num(xf, xh), Repr::Handle).word();
                let y = g.coerce(Val::Num(yf, yh), Repr::Handle).word();
                let word = g.host1(HostFn::IntrinsicNum2, &[index, x, y]);
                let n = g.b.ins().load(types::F64, MemFlagsData::trusted(), g.ctx, NUM_OUT_OFFSET);
                Ok(Val::Num(n, word))
            },
        )
    }

    fn unary(&mut self, op: UnOp, arg: &Expr) -> Result<Val, String> {
        let code = codes::code_of(&codes::UNARY_OPS, &op) as i64;
        match (op, Repr::of(&arg.ty)) {
            (UnOp::Neg, Repr::Num) => {
                let Val::Num(x, h) = self.expr_as(arg, Repr::Num)? else { unreachable!("coerced to a Number") };
                let plain = self.b.ins().icmp_imm_s(IntCC::Equal, h, 0);
                self.branch(
                    plain,
                    Repr::Num,
                    |g| {
                        let n = g.b.ins().fneg(x);
                        Ok(Val::Num(n, g.i32(0)))
                    },
                    |g| {
                        let code = g.i32(code);
                        let r = g.host1(HostFn::Unary, &[code, h]);
                        Ok(g.unbox_num(r))
                    },
                )
            }
            (UnOp::Not, Repr::Bool) => {
                let b = self.expr_as(arg, Repr::Bool)?.word();
                let plain = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, b, 2);
                self.branch(
                    plain,
                    Repr::Bool,
                    |g| {
                        let z = g.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                        Ok(Val::Bool(g.b.ins().uextend(types::I32, z)))
                    },
                    |g| {
                        let code = g.i32(code);
                        let r = g.host1(HostFn::Unary, &[code, b]);
                        Ok(Val::Bool(g.host1(HostFn::UnboxBool, &[r])))
                    },
                )
            }
            _ => {
                let h = self.expr_as(arg, Repr::Handle)?.word();
                let code = self.i32(code);
                Ok(Val::Handle(self.host1(HostFn::Unary, &[code, h])))
            }
        }
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, natural: Repr) -> Result<Val, String> {
        let code = codes::code_of(&codes::BINARY_OPS, &op) as i64;
        match op {
            BinOp::And | BinOp::Or => {
                let a = self.expr_as(lhs, Repr::Bool)?.word();
                // `false and _` is false, `true or _` is true, whatever `_` is.
                let decides = if op == BinOp::And { 0 } else { 1 };
                let decided = self.b.ins().icmp_imm_s(IntCC::Equal, a, decides);
                self.branch(
                    decided,
                    Repr::Bool,
                    |g| Ok(Val::Bool(g.i32(decides))),
                    |g| {
                        let b = g.expr_as(rhs, Repr::Bool)?.word();
                        let both = g.b.ins().bor(a, b);
                        let plain = g.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, both, 2);
                        // Both plain and `a` did not decide: `b` does.
                        g.branch(
                            plain,
                            Repr::Bool,
                            |_| Ok(Val::Bool(b)),
                            |g| {
                                let code = g.i32(code);
                                Ok(Val::Bool(g.host1(HostFn::Kleene, &[code, a, b])))
                            },
                        )
                    },
                )
            }
            BinOp::Coalesce => {
                let a = self.expr(lhs)?;
                // `null` is always the handle NULL (for a Number, in its handle half).
                let is_null = self.b.ins().icmp_imm_s(IntCC::Equal, a.word(), NULL as i64);
                self.branch(is_null, natural, |g| g.expr(rhs), |_| Ok(a))
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
                if lhs.ty == Type::Number && rhs.ty == Type::Number =>
            {
                let Val::Num(xf, xh) = self.expr_as(lhs, Repr::Num)? else { unreachable!("coerced to a Number") };
                let Val::Num(yf, yh) = self.expr_as(rhs, Repr::Num)? else { unreachable!("coerced to a Number") };
                let slow = |g: &mut Self| {
                    let code = g.i32(code);
                    let h = g.host1(HostFn::ArithNum, &[code, xf, xh, yf, yh]);
                    let f = g.b.ins().load(types::F64, MemFlagsData::trusted(), g.ctx, NUM_OUT_OFFSET);
                    Ok(Val::Num(f, h))
                };
                if op == BinOp::Rem {
                    // Cranelift has no `frem`; the host computes Rust's `%`.
                    return slow(self);
                }
                let mut plain = self.both_plain(xh, yh);
                if op == BinOp::Div {
                    // Division by zero traps, with the host's message.
                    let zero = self.b.ins().f64const(0.0);
                    let nonzero = self.b.ins().fcmp(FloatCC::NotEqual, yf, zero);
                    plain = self.b.ins().band(plain, nonzero);
                }
                self.branch(
                    plain,
                    Repr::Num,
                    |g| {
                        let r = match op {
                            BinOp::Add => g.b.ins().fadd(xf, yf),
                            BinOp::Sub => g.b.ins().fsub(xf, yf),
                            BinOp::Mul => g.b.ins().fmul(xf, yf),
                            _ => g.b.ins().fdiv(xf, yf),
                        };
                        Ok(Val::Num(r, g.i32(0)))
                    },
                    slow,
                )
            }
            _ => {
                let a = self.expr_as(lhs, Repr::Handle)?.word();
                let b = self.expr_as(rhs, Repr::Handle)?.word();
                let code = self.i32(code);
                Ok(Val::Handle(self.host1(HostFn::Arith, &[code, a, b])))
            }
        }
    }

    /// `a op b`, as a Bool word.
    fn compare_values(&mut self, op: CmpOp, a: Val, b: Val) -> Result<V, String> {
        let code = codes::code_of(&codes::CMP_OPS, &op) as i64;
        let v = match (a, b) {
            (Val::Num(af, ah), Val::Num(bf, bh)) => {
                let plain = self.both_plain(ah, bh);
                self.branch(
                    plain,
                    Repr::Bool,
                    |g| {
                        let cc = match op {
                            CmpOp::Eq => FloatCC::Equal,
                            CmpOp::Ne => FloatCC::NotEqual,
                            CmpOp::Lt => FloatCC::LessThan,
                            CmpOp::Le => FloatCC::LessThanOrEqual,
                            CmpOp::Gt => FloatCC::GreaterThan,
                            CmpOp::Ge => FloatCC::GreaterThanOrEqual,
                        };
                        let c = g.b.ins().fcmp(cc, af, bf);
                        Ok(Val::Bool(g.b.ins().uextend(types::I32, c)))
                    },
                    |g| {
                        let code = g.i32(code);
                        Ok(Val::Bool(g.host1(HostFn::CompareNum, &[code, af, ah, bf, bh])))
                    },
                )?
            }
            (Val::Bool(x), Val::Bool(y)) if matches!(op, CmpOp::Eq | CmpOp::Ne) => {
                let both = self.b.ins().bor(x, y);
                let plain = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, both, 2);
                self.branch(
                    plain,
                    Repr::Bool,
                    |g| {
                        let cc = if op == CmpOp::Eq { IntCC::Equal } else { IntCC::NotEqual };
                        let c = g.b.ins().icmp(cc, x, y);
                        Ok(Val::Bool(g.b.ins().uextend(types::I32, c)))
                    },
                    |g| {
                        let code = g.i32(code);
                        let hx = g.host1(HostFn::BoxBool, &[x]);
                        let hy = g.host1(HostFn::BoxBool, &[y]);
                        Ok(Val::Bool(g.host1(HostFn::Compare, &[code, hx, hy])))
                    },
                )?
            }
            _ => {
                let code = self.i32(code);
                let ha = self.coerce(a, Repr::Handle).word();
                let hb = self.coerce(b, Repr::Handle).word();
                Val::Bool(self.host1(HostFn::Compare, &[code, ha, hb]))
            }
        };
        Ok(v.word())
    }

    /// `a < b <= c`: every operand evaluated once, left to right, every comparison made (it
    /// may trap); the result is `false` if any is false, else the first unscored, else true.
    fn compare_chain(&mut self, first: &Expr, rest: &[(CmpOp, Expr)]) -> Result<Val, String> {
        let mut acc = self.i32(1);
        let mut prev = self.expr(first)?;
        for (op, x) in rest {
            let cur = self.expr(x)?;
            let r = self.compare_values(*op, prev, cur)?;
            // acc = (acc == 0 || r == 0) ? 0 : (acc >= 2 ? acc : (r >= 2 ? r : 1))
            let one = self.i32(1);
            let zero = self.i32(0);
            let r_unscored = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, r, 2);
            let later = self.b.ins().select(r_unscored, r, one);
            let acc_unscored = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, acc, 2);
            let kept = self.b.ins().select(acc_unscored, acc, later);
            let acc_false = self.b.ins().icmp_imm_s(IntCC::Equal, acc, 0);
            let r_false = self.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
            let any_false = self.b.ins().bor(acc_false, r_false);
            acc = self.b.ins().select(any_false, zero, kept);
            prev = cur;
        }
        Ok(Val::Bool(acc))
    }

    /// `map`/`filter`/`all`/`any`/`count`: the host holds the fold's state (`ops::Fold`); a
    /// plain boolean predicate that cannot change it does not call the host.
    fn fold(&mut self, op: HigherOrder, list: &Expr, local: u32, body: &Expr) -> Result<Val, String> {
        let lh = self.expr_as(list, Repr::Handle)?.word();
        let code = self.i32(codes::code_of(&codes::HIGHER_ORDER_OPS, &op) as i64);
        let n = self.host1(HostFn::FoldBegin, &[code, lh]);
        let done = self.b.create_block();
        self.b.append_block_param(done, types::I32);
        let start = self.b.create_block();
        let header = self.b.create_block();
        let i = self.b.append_block_param(header, types::I32);
        // An unscored list is the result.
        let unscored = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        self.b.ins().brif(unscored, done, &[lh.into()], start, &[]);
        self.b.switch_to_block(start);
        let zero = self.i32(0);
        self.jump(header, &[zero]);

        self.b.switch_to_block(header);
        let end = self.b.create_block();
        let item = self.b.create_block();
        let finished = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, i, n);
        self.b.ins().brif(finished, end, &[], item, &[]);
        self.b.switch_to_block(end);
        let r = self.host1(HostFn::FoldEnd, &[]);
        self.jump(done, &[r]);

        self.b.switch_to_block(item);
        // The element, in the representation the body reads it in when there is one.
        let s = self.slots.get(&local).copied().unwrap_or_default();
        let element = match (s.num, s.boolean, s.handle) {
            (Some(_), None, None) => {
                let w = self.host1(HostFn::FoldItemNum, &[i]);
                let f = self.b.ins().load(types::F64, MemFlagsData::trusted(), self.ctx, NUM_OUT_OFFSET);
                Val::Num(f, w)
            }
            (None, Some(_), None) => Val::Bool(self.host1(HostFn::FoldItemBool, &[i])),
            _ => Val::Handle(self.host1(HostFn::FoldItem, &[i])),
        };
        self.bind(local, element);
        let next = self.b.create_block();
        if op == HigherOrder::Map {
            let v = self.expr_as(body, Repr::Handle)?.word();
            self.host(HostFn::FoldStep, &[v]);
            self.b.ins().jump(next, &[]);
        } else {
            // The predicate value that leaves the fold as it is.
            let idle = if op == HigherOrder::All { 1 } else { 0 };
            let b = self.expr_as(body, Repr::Bool)?.word();
            let is_idle = self.b.ins().icmp_imm_s(IntCC::Equal, b, idle);
            let step = self.b.create_block();
            self.b.ins().brif(is_idle, next, &[], step, &[]);
            self.b.switch_to_block(step);
            let r = self.host1(HostFn::FoldStepBool, &[b]);
            self.b.ins().brif(r, done, &[r.into()], next, &[]);
        }
        self.b.switch_to_block(next);
        let i1 = self.b.ins().iadd_imm_s(i, 1);
        self.jump(header, &[i1]);

        self.b.switch_to_block(done);
        Ok(Val::Handle(self.b.block_params(done)[0]))
    }
}
