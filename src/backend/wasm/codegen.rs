//! IR → Wasm module bytes (wasm-encoder). One function per IR function (typed parameters and
//! result), one per `let` (cached through the host), one exported function per driver root.
//! Numbers and booleans stay in Wasm values where the static type says so; arithmetic,
//! comparisons, `not`, negation, Kleene `and`/`or`, `??` and `if` on plain numbers and
//! booleans run as Wasm instructions, and everything else — an operand that is not plain
//! (unscored...), texts, lists, records, fields, intrinsics, aggregations — goes through the
//! host imports of `abi`, which apply the interpreter's own `ops`. See `abi` for the value
//! representation and `docs/decisions/0005-wasm-engine.md` for the reasoning.
//!
//! The output is deterministic: the same program gives the same bytes (imports in a fixed
//! order, intrinsics sorted, strings laid out in first-use order of a fixed walk).

use super::abi::{self, HostFn, NULL};
use crate::backend::lower::{slot_uses, Repr};
use crate::interp::{roots, Root};
use crate::ir::{self, BinOp, CmpOp, Const, Expr, ExprKind, HigherOrder, Program, Type, UnOp};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, CustomSection, DataSection, EntityType, ExportKind, ExportSection, Function,
    FunctionSection, ImportSection, Instruction as W, MemorySection, MemoryType, Module, TypeSection, ValType,
};

/// The Wasm values that hold a value of representation `r`.
fn val_types(r: Repr) -> &'static [ValType] {
    match r {
        Repr::Num => &[ValType::F64, ValType::I32],
        Repr::Bool | Repr::Handle => &[ValType::I32],
    }
}

/// Compile a program to a Wasm module. Deterministic: the same program gives the same bytes.
pub fn compile_module(p: &Program) -> Result<Vec<u8>, String> {
    let roots = roots(p);
    let mut m = ModuleGen::new(p, &roots);
    let mut bodies = Vec::new();
    for f in &p.functions {
        bodies.push(m.function(f)?);
    }
    for l in &p.lets {
        bodies.push(m.let_function(l)?);
    }
    for (root, e) in &roots {
        bodies.push(m.root_function(*root, e)?);
    }
    Ok(m.finish(&roots, bodies))
}

/// Function type indices, deduplicated in first-use order.
#[derive(Default)]
struct Types {
    list: Vec<(Vec<ValType>, Vec<ValType>)>,
}

impl Types {
    fn index(&mut self, params: &[ValType], results: &[ValType]) -> u32 {
        if let Some(i) = self.list.iter().position(|(p, r)| p == params && r == results) {
            return i as u32;
        }
        self.list.push((params.to_vec(), results.to_vec()));
        (self.list.len() - 1) as u32
    }
}

struct ModuleGen<'p> {
    p: &'p Program,
    types: Types,
    /// The data segment: every string constant, deduplicated.
    data: Vec<u8>,
    strings: HashMap<String, (i32, i32)>,
    /// Intrinsic imports `(name, overload, arity)`, sorted; function index = host imports + i.
    intrinsics: BTreeMap<(String, u32, usize), u32>,
    /// Function indices: IR functions, then lets, then roots.
    fn_base: u32,
    let_base: u32,
    root_base: u32,
    /// Each function's type index, in function-index order (defined functions only).
    fn_types: Vec<u32>,
}

impl<'p> ModuleGen<'p> {
    fn new(p: &'p Program, roots: &[(Root, &Expr)]) -> ModuleGen<'p> {
        let mut wanted = BTreeSet::new();
        let mut visit = |e: &Expr| {
            ir::walk(e, &mut |x| {
                if let ExprKind::Intrinsic { name, overload, args, .. } = &x.kind {
                    wanted.insert((name.clone(), *overload, args.len()));
                }
            })
        };
        p.functions.iter().for_each(|f| visit(&f.body));
        p.lets.iter().for_each(|l| visit(&l.value));
        roots.iter().for_each(|(_, e)| visit(e));
        let host = HostFn::ALL.len() as u32;
        let intrinsics: BTreeMap<_, _> = wanted.into_iter().enumerate().map(|(i, k)| (k, host + i as u32)).collect();
        let fn_base = host + intrinsics.len() as u32;
        let let_base = fn_base + p.functions.len() as u32;
        let root_base = let_base + p.lets.len() as u32;
        ModuleGen {
            p,
            types: Types::default(),
            data: Vec::new(),
            strings: HashMap::new(),
            intrinsics,
            fn_base,
            let_base,
            root_base,
            fn_types: Vec::new(),
        }
    }

    fn string(&mut self, s: &str) -> (i32, i32) {
        if let Some(&r) = self.strings.get(s) {
            return r;
        }
        let r = (self.data.len() as i32, s.len() as i32);
        self.data.extend_from_slice(s.as_bytes());
        self.strings.insert(s.to_string(), r);
        r
    }

    fn function(&mut self, f: &ir::Function) -> Result<Function, String> {
        let params: Vec<Repr> = f.params.iter().map(|(_, t)| Repr::of(t)).collect();
        let ret = Repr::of(&f.ret);
        let pv: Vec<ValType> = params.iter().flat_map(|r| val_types(*r).iter().copied()).collect();
        let ty = self.types.index(&pv, val_types(ret));
        self.fn_types.push(ty);
        let mut g = FnGen::new(self, pv.len() as u32);
        g.setup_slots(&f.body, &params, false)?;
        g.expr_as(&f.body, ret)?;
        Ok(g.finish())
    }

    fn let_function(&mut self, l: &ir::LetDecl) -> Result<Function, String> {
        let ty = self.types.index(&[], &[ValType::I32]);
        self.fn_types.push(ty);
        let index = (self.fn_types.len() - 1 - self.p.functions.len()) as i32;
        let mut g = FnGen::new(self, 0);
        g.setup_slots(&l.value, &[], false)?;
        let h = g.temp(ValType::I32);
        g.emit(W::I32Const(index));
        g.host(HostFn::LetGet);
        g.emit(W::LocalTee(h));
        g.open(W::If(BlockType::Result(ValType::I32)));
        g.emit(W::LocalGet(h));
        g.emit(W::Else);
        g.expr_as(&l.value, Repr::Handle)?;
        g.emit(W::LocalSet(h));
        g.emit(W::I32Const(index));
        g.emit(W::LocalGet(h));
        g.host(HostFn::LetSet);
        g.emit(W::LocalGet(h));
        g.close();
        Ok(g.finish())
    }

    fn root_function(&mut self, _root: Root, e: &Expr) -> Result<Function, String> {
        let ty = self.types.index(&[], &[ValType::I32]);
        self.fn_types.push(ty);
        let mut g = FnGen::new(self, 0);
        g.setup_slots(e, &[], true)?;
        g.expr_as(e, Repr::Handle)?;
        Ok(g.finish())
    }

    fn finish(mut self, roots: &[(Root, &Expr)], bodies: Vec<Function>) -> Vec<u8> {
        let host_types: Vec<u32> = HostFn::ALL
            .iter()
            .map(|f| {
                let (params, results) = f.signature();
                self.types.index(params, results)
            })
            .collect();
        let intrinsic_types: Vec<u32> = self
            .intrinsics
            .keys()
            .map(|(_, _, arity)| self.types.index(&vec![ValType::I32; *arity], &[ValType::I32]))
            .collect();

        let mut types = TypeSection::new();
        for (params, results) in &self.types.list {
            types.ty().function(params.iter().copied(), results.iter().copied());
        }
        let mut imports = ImportSection::new();
        for (f, ty) in HostFn::ALL.iter().zip(&host_types) {
            imports.import(abi::HOST_MODULE, f.name(), EntityType::Function(*ty));
        }
        for ((name, overload, arity), ty) in self.intrinsics.keys().zip(&intrinsic_types) {
            imports.import(
                abi::INTRINSIC_MODULE,
                &abi::intrinsic_import(name, *overload, *arity),
                EntityType::Function(*ty),
            );
        }
        let mut functions = FunctionSection::new();
        for ty in &self.fn_types {
            functions.function(*ty);
        }
        let pages = (self.data.len() as u64).div_ceil(65536).max(1);
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: pages,
            maximum: Some(pages),
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        let mut exports = ExportSection::new();
        exports.export("memory", ExportKind::Memory, 0);
        for (i, (root, _)) in roots.iter().enumerate() {
            exports.export(&root.name(), ExportKind::Func, self.root_base + i as u32);
        }
        let mut code = CodeSection::new();
        for b in &bodies {
            code.function(b);
        }
        let mut data = DataSection::new();
        if !self.data.is_empty() {
            data.active(0, &ConstExpr::i32_const(0), self.data.iter().copied());
        }
        let abi_version = abi::ABI_VERSION.to_string();
        let custom = CustomSection { name: abi::ABI_SECTION.into(), data: abi_version.as_bytes().into() };

        let mut module = Module::new();
        module.section(&types);
        module.section(&imports);
        module.section(&functions);
        module.section(&memories);
        module.section(&exports);
        module.section(&code);
        if !self.data.is_empty() {
            module.section(&data);
        }
        module.section(&custom);
        module.finish()
    }
}

/// The Wasm locals that hold one IR local slot, one per representation it is read in.
#[derive(Default, Clone)]
struct Slot {
    num: Option<(u32, u32)>,
    boolean: Option<u32>,
    handle: Option<u32>,
}

struct FnGen<'m, 'p> {
    m: &'m mut ModuleGen<'p>,
    n_params: u32,
    locals: Vec<ValType>,
    code: Vec<W<'static>>,
    slots: BTreeMap<u32, Slot>,
    /// Nesting depth of blocks, loops and ifs (for branch targets).
    depth: u32,
}

impl<'m, 'p> FnGen<'m, 'p> {
    fn new(m: &'m mut ModuleGen<'p>, n_params: u32) -> FnGen<'m, 'p> {
        FnGen { m, n_params, locals: Vec::new(), code: Vec::new(), slots: BTreeMap::new(), depth: 0 }
    }

    fn finish(mut self) -> Function {
        self.emit(W::End);
        let mut f = Function::new(self.locals.iter().map(|t| (1u32, *t)));
        for ins in &self.code {
            f.instruction(ins);
        }
        f
    }

    fn emit(&mut self, ins: W<'static>) {
        self.code.push(ins);
    }

    fn host(&mut self, f: HostFn) {
        self.emit(W::Call(f.index()));
    }

    fn temp(&mut self, t: ValType) -> u32 {
        self.locals.push(t);
        self.n_params + self.locals.len() as u32 - 1
    }

    /// Locals for a value of representation `r`.
    fn temps(&mut self, r: Repr) -> Vec<u32> {
        val_types(r).iter().map(|t| self.temp(*t)).collect()
    }

    /// Pop a value (of the representation `ls` was made for) into `ls`.
    fn set(&mut self, ls: &[u32]) {
        for l in ls.iter().rev() {
            self.emit(W::LocalSet(*l));
        }
    }

    fn get(&mut self, ls: &[u32]) {
        for l in ls {
            self.emit(W::LocalGet(*l));
        }
    }

    fn block_type(&mut self, r: Repr) -> BlockType {
        match r {
            Repr::Num => BlockType::FunctionType(self.m.types.index(&[], &[ValType::F64, ValType::I32])),
            Repr::Bool | Repr::Handle => BlockType::Result(ValType::I32),
        }
    }

    /// Open a block, loop or if; returns its depth (for [`FnGen::br`]).
    fn open(&mut self, ins: W<'static>) -> u32 {
        self.emit(ins);
        self.depth += 1;
        self.depth
    }

    fn close(&mut self) {
        self.emit(W::End);
        self.depth -= 1;
    }

    fn br(&mut self, label: u32) {
        self.emit(W::Br(self.depth - label));
    }

    fn null(&mut self, r: Repr) {
        if r == Repr::Num {
            self.emit(W::F64Const(0.0f64.into()));
        }
        self.emit(W::I32Const(NULL));
    }

    fn coerce(&mut self, from: Repr, to: Repr) {
        match (from, to) {
            (a, b) if a == b => {}
            (Repr::Num, Repr::Handle) => self.host(HostFn::BoxNum),
            (Repr::Bool, Repr::Handle) => self.host(HostFn::BoxBool),
            (Repr::Handle, Repr::Num) => self.host(HostFn::UnboxNum),
            (Repr::Handle, Repr::Bool) => self.host(HostFn::UnboxBool),
            (Repr::Num, Repr::Bool) => {
                self.host(HostFn::BoxNum);
                self.host(HostFn::UnboxBool);
            }
            (Repr::Bool, Repr::Num) => {
                self.host(HostFn::BoxBool);
                self.host(HostFn::UnboxNum);
            }
            _ => unreachable!("equal representations return early"),
        }
    }

    /// Allocate the locals of every slot `body` uses, give them their initial values (`null`,
    /// or the parameters), and for a root load the slots the driver bound.
    fn setup_slots(&mut self, body: &Expr, params: &[Repr], root: bool) -> Result<(), String> {
        let (reads, bound) = slot_uses(body);
        let mut all: BTreeSet<u32> = reads.keys().copied().collect();
        all.extend(bound.iter().copied());
        all.extend(0..params.len() as u32);
        // Parameters first: their home is the Wasm parameter.
        let mut next_param = 0u32;
        let mut homes: BTreeMap<u32, (Repr, Vec<u32>)> = BTreeMap::new();
        for (i, r) in params.iter().enumerate() {
            let n = val_types(*r).len() as u32;
            homes.insert(i as u32, (*r, (next_param..next_param + n).collect()));
            next_param += n;
        }
        for slot in &all {
            let mut want: BTreeSet<Repr> = reads.get(slot).cloned().unwrap_or_default();
            if bound.contains(slot) {
                want.insert(Repr::Handle);
            }
            let mut s = Slot::default();
            let home = homes.get(slot).cloned();
            if let Some((r, ls)) = &home {
                want.insert(*r);
                match r {
                    Repr::Num => s.num = Some((ls[0], ls[1])),
                    Repr::Bool => s.boolean = Some(ls[0]),
                    Repr::Handle => s.handle = Some(ls[0]),
                }
            }
            for r in &want {
                match r {
                    Repr::Num if s.num.is_none() => {
                        s.num = Some((self.temp(ValType::F64), self.temp(ValType::I32)));
                    }
                    Repr::Bool if s.boolean.is_none() => s.boolean = Some(self.temp(ValType::I32)),
                    Repr::Handle if s.handle.is_none() => s.handle = Some(self.temp(ValType::I32)),
                    _ => {}
                }
            }
            self.slots.insert(*slot, s);
            match home {
                Some((r, ls)) => {
                    self.get(&ls);
                    self.bind(*slot, r);
                }
                None => {
                    let from_driver = root && reads.contains_key(slot) && !bound.contains(slot);
                    if from_driver {
                        self.emit(W::I32Const(*slot as i32));
                        self.host(HostFn::Local);
                    } else {
                        self.emit(W::I32Const(NULL));
                    }
                    self.bind(*slot, Repr::Handle);
                }
            }
        }
        Ok(())
    }

    /// Pop a value of representation `from` into every local of `slot`.
    fn bind(&mut self, slot: u32, from: Repr) {
        let s = self.slots.get(&slot).cloned().unwrap_or_default();
        let src = self.temps(from);
        self.set(&src);
        let targets: [(Repr, Vec<u32>); 3] = [
            (Repr::Num, s.num.map(|(a, b)| vec![a, b]).unwrap_or_default()),
            (Repr::Bool, s.boolean.map(|a| vec![a]).unwrap_or_default()),
            (Repr::Handle, s.handle.map(|a| vec![a]).unwrap_or_default()),
        ];
        for (r, ls) in targets {
            if ls.is_empty() || ls == src {
                continue;
            }
            self.get(&src);
            self.coerce(from, r);
            self.set(&ls);
        }
    }

    fn expr_as(&mut self, e: &Expr, want: Repr) -> Result<(), String> {
        let r = self.expr(e)?;
        self.coerce(r, want);
        Ok(())
    }

    /// Emit `e`, leaving its value on the stack; returns the representation it is in.
    fn expr(&mut self, e: &Expr) -> Result<Repr, String> {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &Expr) -> Result<Repr, String> {
        let natural = Repr::of(&e.ty);
        match &e.kind {
            ExprKind::Const(c) => Ok(match c {
                Const::Null => {
                    self.emit(W::I32Const(NULL));
                    Repr::Handle
                }
                Const::Bool(b) => {
                    self.emit(W::I32Const(*b as i32));
                    Repr::Bool
                }
                Const::Number(n) => {
                    self.emit(W::F64Const((*n).into()));
                    self.emit(W::I32Const(0));
                    Repr::Num
                }
                Const::Text(t) => {
                    let (off, len) = self.m.string(t);
                    self.emit(W::I32Const(off));
                    self.emit(W::I32Const(len));
                    self.host(HostFn::Text);
                    Repr::Handle
                }
            }),
            ExprKind::Input(i) => {
                self.emit(W::I32Const(*i as i32));
                self.host(HostFn::Input);
                Ok(Repr::Handle)
            }
            ExprKind::Local(i) => {
                let s = self.slots.get(i).cloned().ok_or_else(|| format!("local {i} has no slot"))?;
                match natural {
                    Repr::Num => {
                        let (a, b) = s.num.ok_or_else(|| format!("local {i} has no number slot"))?;
                        self.get(&[a, b]);
                    }
                    Repr::Bool => {
                        self.emit(W::LocalGet(s.boolean.ok_or_else(|| format!("local {i} has no bool slot"))?))
                    }
                    Repr::Handle => {
                        self.emit(W::LocalGet(s.handle.ok_or_else(|| format!("local {i} has no handle slot"))?))
                    }
                }
                Ok(natural)
            }
            ExprKind::Let(i) => {
                if *i as usize >= self.m.p.lets.len() {
                    return Err(format!("unknown let {i}"));
                }
                self.emit(W::Call(self.m.let_base + i));
                Ok(Repr::Handle)
            }
            ExprKind::Criterion(c) => {
                self.emit(W::I32Const(*c as i32));
                self.host(HostFn::Criterion);
                Ok(Repr::Handle)
            }
            ExprKind::List(xs) => {
                self.host(HostFn::ListBegin);
                for x in xs {
                    self.expr_as(x, Repr::Handle)?;
                    self.host(HostFn::ListPush);
                }
                self.host(HostFn::ListEnd);
                Ok(Repr::Handle)
            }
            ExprKind::Record(fs) => {
                self.host(HostFn::RecordBegin);
                for (n, x) in fs {
                    let (off, len) = self.m.string(n);
                    self.emit(W::I32Const(off));
                    self.emit(W::I32Const(len));
                    self.expr_as(x, Repr::Handle)?;
                    self.host(HostFn::RecordPut);
                }
                self.host(HostFn::RecordEnd);
                Ok(Repr::Handle)
            }
            ExprKind::Field { base, name, .. } => {
                self.expr_as(base, Repr::Handle)?;
                let (off, len) = self.m.string(name);
                self.emit(W::I32Const(off));
                self.emit(W::I32Const(len));
                self.host(HostFn::Field);
                Ok(Repr::Handle)
            }
            ExprKind::Narrowed(arg) => {
                self.expr_as(arg, natural)?;
                Ok(natural)
            }
            ExprKind::Index { base, index, .. } => {
                self.expr_as(base, Repr::Handle)?;
                self.expr_as(index, Repr::Handle)?;
                self.host(HostFn::Index);
                Ok(Repr::Handle)
            }
            ExprKind::Unary { op, arg } => self.unary(*op, arg),
            ExprKind::Binary { op, lhs, rhs, .. } => self.binary(*op, lhs, rhs, natural),
            ExprKind::Compare { first, rest } => self.compare_chain(first, rest),
            ExprKind::If { cond, then, els } => {
                let c = self.temp(ValType::I32);
                self.expr_as(cond, Repr::Bool)?;
                self.emit(W::LocalSet(c));
                self.emit(W::LocalGet(c));
                self.emit(W::I32Const(1));
                self.emit(W::I32Eq);
                let bt = self.block_type(natural);
                self.open(W::If(bt));
                self.expr_as(then, natural)?;
                self.emit(W::Else);
                self.emit(W::LocalGet(c));
                self.emit(W::I32Eqz);
                self.open(W::If(bt));
                self.expr_as(els, natural)?;
                self.emit(W::Else);
                self.emit(W::LocalGet(c));
                self.host(HostFn::Cond);
                self.coerce(Repr::Handle, natural);
                self.close();
                self.close();
                Ok(natural)
            }
            ExprKind::Intrinsic { name, overload, args, .. } => {
                let index = *self
                    .m
                    .intrinsics
                    .get(&(name.clone(), *overload, args.len()))
                    .ok_or_else(|| format!("intrinsic `{name}` was not collected"))?;
                for a in args {
                    self.expr_as(a, Repr::Handle)?;
                }
                self.emit(W::Call(index));
                Ok(Repr::Handle)
            }
            ExprKind::Call { func, args, .. } => {
                let f = self.m.p.functions.get(*func as usize).ok_or_else(|| format!("unknown function {func}"))?;
                if args.len() > f.params.len() {
                    return Err(format!("`{}` takes {} arguments, called with {}", f.name, f.params.len(), args.len()));
                }
                let params: Vec<Repr> = f.params.iter().map(|(_, t)| Repr::of(t)).collect();
                let ret = Repr::of(&f.ret);
                for (i, r) in params.iter().enumerate() {
                    match args.get(i) {
                        Some(a) => self.expr_as(a, *r)?,
                        None => self.null(*r),
                    }
                }
                self.emit(W::Call(self.m.fn_base + func));
                Ok(ret)
            }
            ExprKind::Aggregate { op, set, policy, args, .. } => {
                self.emit(W::I32Const(abi::code_of(ir::AggOp::ALL, op)));
                self.emit(W::I32Const(*set as i32));
                self.emit(W::I32Const(abi::code_of(&abi::POLICIES, policy)));
                match args.split_first() {
                    None => self.emit(W::I32Const(0)),
                    Some((first, rest)) => {
                        self.expr_as(first, Repr::Handle)?;
                        for a in rest {
                            self.expr_as(a, Repr::Handle)?;
                            self.emit(W::Drop);
                        }
                    }
                }
                self.host(HostFn::Aggregate);
                Ok(Repr::Handle)
            }
            ExprKind::HigherOrder { op, list, local, body } => self.fold(*op, list, *local, body),
        }
    }

    fn unary(&mut self, op: UnOp, arg: &Expr) -> Result<Repr, String> {
        let code = abi::code_of(&abi::UNARY_OPS, &op);
        let ra = Repr::of(&arg.ty);
        match (op, ra) {
            (UnOp::Neg, Repr::Num) => {
                let t = self.temps(Repr::Num);
                self.expr_as(arg, Repr::Num)?;
                self.set(&t);
                self.emit(W::LocalGet(t[1]));
                self.emit(W::I32Eqz);
                let bt = self.block_type(Repr::Num);
                self.open(W::If(bt));
                self.emit(W::LocalGet(t[0]));
                self.emit(W::F64Neg);
                self.emit(W::I32Const(0));
                self.emit(W::Else);
                self.emit(W::I32Const(code));
                self.emit(W::LocalGet(t[1]));
                self.host(HostFn::Unary);
                self.host(HostFn::UnboxNum);
                self.close();
                Ok(Repr::Num)
            }
            (UnOp::Not, Repr::Bool) => {
                let t = self.temp(ValType::I32);
                self.expr_as(arg, Repr::Bool)?;
                self.emit(W::LocalTee(t));
                self.emit(W::I32Const(2));
                self.emit(W::I32LtU);
                self.open(W::If(BlockType::Result(ValType::I32)));
                self.emit(W::LocalGet(t));
                self.emit(W::I32Eqz);
                self.emit(W::Else);
                self.emit(W::I32Const(code));
                self.emit(W::LocalGet(t));
                self.host(HostFn::Unary);
                self.host(HostFn::UnboxBool);
                self.close();
                Ok(Repr::Bool)
            }
            _ => {
                self.emit(W::I32Const(code));
                self.expr_as(arg, Repr::Handle)?;
                self.host(HostFn::Unary);
                Ok(Repr::Handle)
            }
        }
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, natural: Repr) -> Result<Repr, String> {
        let code = abi::code_of(&abi::BINARY_OPS, &op);
        match op {
            BinOp::And | BinOp::Or => {
                let a = self.temp(ValType::I32);
                let b = self.temp(ValType::I32);
                self.expr_as(lhs, Repr::Bool)?;
                self.emit(W::LocalTee(a));
                // `false and _` is false, `true or _` is true, whatever `_` is.
                let decides = if op == BinOp::And { 0 } else { 1 };
                self.emit(W::I32Const(decides));
                self.emit(W::I32Eq);
                self.open(W::If(BlockType::Result(ValType::I32)));
                self.emit(W::I32Const(decides));
                self.emit(W::Else);
                self.expr_as(rhs, Repr::Bool)?;
                self.emit(W::LocalSet(b));
                self.emit(W::LocalGet(a));
                self.emit(W::LocalGet(b));
                self.emit(W::I32Or);
                self.emit(W::I32Const(2));
                self.emit(W::I32LtU);
                self.open(W::If(BlockType::Result(ValType::I32)));
                // Both plain and `a` did not decide: `b` does.
                self.emit(W::LocalGet(b));
                self.emit(W::Else);
                self.emit(W::I32Const(code));
                self.emit(W::LocalGet(a));
                self.emit(W::LocalGet(b));
                self.host(HostFn::Kleene);
                self.close();
                self.close();
                Ok(Repr::Bool)
            }
            BinOp::Coalesce => {
                let ra = self.expr(lhs)?;
                let t = self.temps(ra);
                self.set(&t);
                // `null` is always the handle NULL (for a Number, in its handle half).
                let handle = *t.last().ok_or("a value of no Wasm type")?;
                self.emit(W::LocalGet(handle));
                self.emit(W::I32Const(NULL));
                self.emit(W::I32Eq);
                let bt = self.block_type(natural);
                self.open(W::If(bt));
                self.expr_as(rhs, natural)?;
                self.emit(W::Else);
                self.get(&t);
                self.coerce(ra, natural);
                self.close();
                Ok(natural)
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
                if lhs.ty == Type::Number && rhs.ty == Type::Number =>
            {
                let x = self.temps(Repr::Num);
                let y = self.temps(Repr::Num);
                self.expr_as(lhs, Repr::Num)?;
                self.set(&x);
                self.expr_as(rhs, Repr::Num)?;
                self.set(&y);
                let slow = |g: &mut Self| {
                    g.emit(W::I32Const(code));
                    g.get(&x);
                    g.get(&y);
                    g.host(HostFn::ArithNum);
                };
                if op == BinOp::Rem {
                    // Wasm has no `f64.rem`; the host computes Rust's `%`.
                    slow(self);
                    return Ok(Repr::Num);
                }
                self.emit(W::LocalGet(x[1]));
                self.emit(W::LocalGet(y[1]));
                self.emit(W::I32Or);
                self.emit(W::I32Eqz);
                if op == BinOp::Div {
                    // Division by zero traps, with the host's message.
                    self.emit(W::LocalGet(y[0]));
                    self.emit(W::F64Const(0.0f64.into()));
                    self.emit(W::F64Ne);
                    self.emit(W::I32And);
                }
                let bt = self.block_type(Repr::Num);
                self.open(W::If(bt));
                self.emit(W::LocalGet(x[0]));
                self.emit(W::LocalGet(y[0]));
                self.emit(match op {
                    BinOp::Add => W::F64Add,
                    BinOp::Sub => W::F64Sub,
                    BinOp::Mul => W::F64Mul,
                    _ => W::F64Div,
                });
                self.emit(W::I32Const(0));
                self.emit(W::Else);
                slow(self);
                self.close();
                Ok(Repr::Num)
            }
            _ => {
                self.emit(W::I32Const(code));
                self.expr_as(lhs, Repr::Handle)?;
                self.expr_as(rhs, Repr::Handle)?;
                self.host(HostFn::Arith);
                Ok(Repr::Handle)
            }
        }
    }

    /// `a op b` for values already in locals, leaving a Bool.
    fn compare_values(&mut self, op: CmpOp, a: (Repr, &[u32]), b: (Repr, &[u32])) {
        let code = abi::code_of(&abi::CMP_OPS, &op);
        match (a.0, b.0) {
            (Repr::Num, Repr::Num) => {
                self.emit(W::LocalGet(a.1[1]));
                self.emit(W::LocalGet(b.1[1]));
                self.emit(W::I32Or);
                self.emit(W::I32Eqz);
                self.open(W::If(BlockType::Result(ValType::I32)));
                self.emit(W::LocalGet(a.1[0]));
                self.emit(W::LocalGet(b.1[0]));
                self.emit(match op {
                    CmpOp::Eq => W::F64Eq,
                    CmpOp::Ne => W::F64Ne,
                    CmpOp::Lt => W::F64Lt,
                    CmpOp::Le => W::F64Le,
                    CmpOp::Gt => W::F64Gt,
                    CmpOp::Ge => W::F64Ge,
                });
                self.emit(W::Else);
                self.emit(W::I32Const(code));
                self.get(a.1);
                self.get(b.1);
                self.host(HostFn::CompareNum);
                self.close();
            }
            (Repr::Bool, Repr::Bool) if matches!(op, CmpOp::Eq | CmpOp::Ne) => {
                self.emit(W::LocalGet(a.1[0]));
                self.emit(W::LocalGet(b.1[0]));
                self.emit(W::I32Or);
                self.emit(W::I32Const(2));
                self.emit(W::I32LtU);
                self.open(W::If(BlockType::Result(ValType::I32)));
                self.emit(W::LocalGet(a.1[0]));
                self.emit(W::LocalGet(b.1[0]));
                self.emit(if op == CmpOp::Eq { W::I32Eq } else { W::I32Ne });
                self.emit(W::Else);
                self.emit(W::I32Const(code));
                self.emit(W::LocalGet(a.1[0]));
                self.host(HostFn::BoxBool);
                self.emit(W::LocalGet(b.1[0]));
                self.host(HostFn::BoxBool);
                self.host(HostFn::Compare);
                self.close();
            }
            _ => {
                self.emit(W::I32Const(code));
                self.get(a.1);
                self.coerce(a.0, Repr::Handle);
                self.get(b.1);
                self.coerce(b.0, Repr::Handle);
                self.host(HostFn::Compare);
            }
        }
    }

    /// `a < b <= c`: every operand evaluated once, left to right, every comparison made (it
    /// may trap); the result is `false` if any is false, else the first unscored, else true.
    fn compare_chain(&mut self, first: &Expr, rest: &[(CmpOp, Expr)]) -> Result<Repr, String> {
        let acc = self.temp(ValType::I32);
        let r = self.temp(ValType::I32);
        let mut prev_repr = self.expr(first)?;
        let mut prev = self.temps(prev_repr);
        self.set(&prev);
        self.emit(W::I32Const(1));
        self.emit(W::LocalSet(acc));
        for (op, x) in rest {
            let cur_repr = self.expr(x)?;
            let cur = self.temps(cur_repr);
            self.set(&cur);
            self.compare_values(*op, (prev_repr, &prev), (cur_repr, &cur));
            self.emit(W::LocalSet(r));
            // acc = (acc == 0 || r == 0) ? 0 : (acc >= 2 ? acc : (r >= 2 ? r : 1))
            self.emit(W::I32Const(0));
            self.emit(W::LocalGet(acc));
            self.emit(W::LocalGet(r));
            self.emit(W::I32Const(1));
            self.emit(W::LocalGet(r));
            self.emit(W::I32Const(2));
            self.emit(W::I32GeU);
            self.emit(W::Select);
            self.emit(W::LocalGet(acc));
            self.emit(W::I32Const(2));
            self.emit(W::I32GeU);
            self.emit(W::Select);
            self.emit(W::LocalGet(acc));
            self.emit(W::I32Eqz);
            self.emit(W::LocalGet(r));
            self.emit(W::I32Eqz);
            self.emit(W::I32Or);
            self.emit(W::Select);
            self.emit(W::LocalSet(acc));
            prev_repr = cur_repr;
            prev = cur;
        }
        self.emit(W::LocalGet(acc));
        Ok(Repr::Bool)
    }

    /// `map`/`filter`/`all`/`any`/`count`: the host holds the fold's state (`ops::Fold`); a
    /// plain boolean predicate that cannot change it does not call the host.
    fn fold(&mut self, op: HigherOrder, list: &Expr, local: u32, body: &Expr) -> Result<Repr, String> {
        let lh = self.temp(ValType::I32);
        let n = self.temp(ValType::I32);
        let i = self.temp(ValType::I32);
        let b = self.temp(ValType::I32);
        self.expr_as(list, Repr::Handle)?;
        self.emit(W::LocalSet(lh));
        self.emit(W::I32Const(abi::code_of(&abi::HIGHER_ORDER_OPS, &op)));
        self.emit(W::LocalGet(lh));
        self.host(HostFn::FoldBegin);
        self.emit(W::LocalSet(n));
        let done = self.open(W::Block(BlockType::Result(ValType::I32)));
        // An unscored list is the result.
        self.emit(W::LocalGet(n));
        self.emit(W::I32Const(0));
        self.emit(W::I32LtS);
        self.open(W::If(BlockType::Empty));
        self.emit(W::LocalGet(lh));
        self.br(done);
        self.close();
        self.emit(W::I32Const(0));
        self.emit(W::LocalSet(i));
        let next = self.open(W::Loop(BlockType::Empty));
        self.emit(W::LocalGet(i));
        self.emit(W::LocalGet(n));
        self.emit(W::I32GeS);
        self.open(W::If(BlockType::Empty));
        self.host(HostFn::FoldEnd);
        self.br(done);
        self.close();
        self.emit(W::LocalGet(i));
        self.host(HostFn::FoldItem);
        self.bind(local, Repr::Handle);
        if op == HigherOrder::Map {
            self.expr_as(body, Repr::Handle)?;
            self.host(HostFn::FoldStep);
            self.emit(W::Drop);
        } else {
            // The predicate value that leaves the fold as it is.
            let idle = match op {
                HigherOrder::All => 1,
                _ => 0,
            };
            self.expr_as(body, Repr::Bool)?;
            self.emit(W::LocalTee(b));
            self.emit(W::I32Const(idle));
            self.emit(W::I32Ne);
            self.open(W::If(BlockType::Empty));
            self.emit(W::LocalGet(b));
            self.host(HostFn::FoldStepBool);
            self.emit(W::LocalTee(b));
            self.open(W::If(BlockType::Empty));
            self.emit(W::LocalGet(b));
            self.br(done);
            self.close();
            self.close();
        }
        self.emit(W::LocalGet(i));
        self.emit(W::I32Const(1));
        self.emit(W::I32Add);
        self.emit(W::LocalSet(i));
        self.br(next);
        self.close();
        self.emit(W::Unreachable);
        self.close();
        Ok(Repr::Handle)
    }
}
