//! Type checker: Rust's rules on the kernel IR.
//!
//! Unsuffixed literals get inference variables that unify with the first concrete type they
//! meet (and default to `i32`/`f64`, as in Rust). Numeric types never mix implicitly. The
//! checker also resolves calls against the intrinsic table, enforces buffer kinds (only
//! `SymTensor` is a remote target) and mutability, gives every local a unique C name, and
//! records whether the function needs a collective launch.

use crate::error::{Errors, Sp};
use crate::intrinsics::{self, Arg, Form, Intrinsic, Ret, REDUCE_BITWISE};
use crate::ir::*;
use crate::types::{BufKind, BufTy, EnumTy, Scalar, Ty};
use proc_macro2::Span;
use std::collections::{BTreeSet, HashMap, HashSet};

/// A device function's signature, as callers see it.
#[derive(Clone, Debug)]
pub struct FnSig {
    pub params: Vec<Ty>,
    pub ret: Ty,
}

/// What checking one function found out.
#[derive(Debug, Default)]
pub struct FnInfo {
    /// Calls a barrier, sync or collective directly.
    pub collective: bool,
    /// Device functions it calls directly.
    pub calls: BTreeSet<String>,
}

#[derive(Clone, Copy, Debug)]
enum Slot {
    Int,
    Float,
    Bound(Scalar),
    Link(u32),
}

#[derive(Clone, Debug)]
struct Local {
    name: String,
    ty: Ty,
    mutable: bool,
    is_param: bool,
    c_name: String,
    comptime: bool,
}

/// Where an expression sits, which decides what it may be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Inside a larger expression.
    Nested,
    /// A statement, `let` initializer, assignment source, `return` value or block tail: an
    /// `if`/block with statements may produce the value here.
    Stmt,
    /// An intrinsic argument: element addresses `&x[i]` are allowed.
    Arg,
}

/// C/C++/CUDA names a Rust local must not take.
const RESERVED: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "const",
    "constexpr",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    "NULL",
    "main",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "printf",
    "assert",
    "std",
    "half",
    "size_t",
    "ptrdiff_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "min",
    "max",
    "abs",
    "sqrt",
    "sqrtf",
    "rsqrt",
    "rsqrtf",
    "exp",
    "expf",
    "log",
    "logf",
    "log2",
    "log2f",
    "sin",
    "sinf",
    "cos",
    "cosf",
    "tanh",
    "tanhf",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "fabs",
    "fabsf",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    "pow",
    "powf",
    "fma",
    "fmaf",
    "fmod",
    "fmodf",
    "atomicAdd",
    "atomicSub",
    "atomicMin",
    "atomicMax",
    "atomicExch",
    "atomicCAS",
];

/// Checks one function.
pub struct Checker<'a> {
    sigs: &'a HashMap<String, FnSig>,
    /// Unknown callees are not errors (checking a `#[pgas_device]` alone, before the kernel
    /// that uses it supplies its callees).
    lenient: bool,
    errors: Errors,
    slots: Vec<Slot>,
    locals: Vec<Local>,
    scopes: Vec<Vec<usize>>,
    used_c_names: HashSet<String>,
    read: HashSet<String>,
    ret: Ty,
    loop_depth: usize,
    info: FnInfo,
    /// A lenient check met a callee it does not know, so its types are incomplete.
    incomplete: bool,
}

/// Check `f` against the signatures of the device functions it may call. On success the IR
/// is fully typed and named.
pub fn check_fn(
    f: &mut Function,
    sigs: &HashMap<String, FnSig>,
    lenient: bool,
) -> Result<FnInfo, Errors> {
    let mut c = Checker {
        sigs,
        lenient,
        errors: Errors::default(),
        slots: Vec::new(),
        locals: Vec::new(),
        scopes: vec![Vec::new()],
        used_c_names: HashSet::new(),
        read: HashSet::new(),
        ret: f.ret.map(|(s, _)| Ty::Scalar(s)).unwrap_or(Ty::Unit),
        loop_depth: 0,
        info: FnInfo::default(),
        incomplete: false,
    };
    let mut seen = HashSet::new();
    for p in &mut f.params {
        if !seen.insert(p.name.clone()) {
            c.errors
                .push(p.span, format!("parameter `{}` is declared twice", p.name));
        }
        if f.is_kernel && matches!(p.name.as_str(), "pgas" | "cfg" | "stream") {
            c.errors.push(
                p.span,
                format!(
                    "`{}` is the name of a launcher argument; rename this parameter",
                    p.name
                ),
            );
        }
        p.c_name = c.declare(&p.name, p.ty, false, true, p.comptime);
    }
    let ret = c.ret;
    let body_ty = c.block(&mut f.body, Some(ret), Ctx::Stmt);
    if ret != Ty::Unit {
        let tail_span = f.body.tail.as_ref().map(|t| t.span).unwrap_or(f.body.span);
        if f.body.tail.is_none() && !ends_in_return(&f.body) {
            c.errors.push(
                tail_span,
                format!(
                    "this function must return a `{}`: end it with a value or a `return`",
                    show_scalar(ret)
                ),
            );
        } else if !c.unify(body_ty, ret) {
            let found = c.show(body_ty);
            c.errors.push(
                tail_span,
                format!(
                    "mismatched types: expected `{}`, found `{found}`",
                    show_scalar(ret)
                ),
            );
        }
    } else if let Some(t) = &f.body.tail {
        let t_ty = t.ty;
        if !matches!(c.resolve(t_ty), Ty::Unit | Ty::Never | Ty::Error) {
            let found = c.show(t_ty);
            c.errors.push(t.span, format!("a kernel returns nothing, but this block ends in a value of type `{found}`; add `;`"));
        }
    }
    let read = std::mem::take(&mut c.read);
    for p in &mut f.params {
        p.read = read.contains(&p.c_name);
    }
    c.finish_block(&mut f.body, &read);
    // Without its callees' signatures a lenient check cannot judge types; the kernel that
    // supplies them reports any error.
    if c.errors.is_empty() || c.incomplete {
        Ok(c.info)
    } else {
        Err(c.errors)
    }
}

fn ends_in_return(b: &Block) -> bool {
    matches!(
        b.stmts.last(),
        Some(Stmt::Expr(Expr {
            kind: ExprKind::Return(_),
            ..
        }))
    )
}

fn show_scalar(t: Ty) -> String {
    match t {
        Ty::Scalar(s) => s.to_string(),
        _ => "()".into(),
    }
}

fn is_simple_block(b: &Block) -> bool {
    b.stmts.is_empty() && b.tail.as_ref().is_some_and(|t| is_simple_value(t))
}

/// Whether an expression can be printed as one C expression (a ternary for `if`).
pub fn is_simple_value(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::If {
            then,
            els: Some(els),
            ..
        } => is_simple_block(then) && is_simple_value(els),
        ExprKind::Block(b) => is_simple_block(b),
        ExprKind::If { .. }
        | ExprKind::For { .. }
        | ExprKind::While { .. }
        | ExprKind::Loop(_)
        | ExprKind::Return(_)
        | ExprKind::Break
        | ExprKind::Continue
        | ExprKind::Assert { .. } => false,
        _ => true,
    }
}

impl Checker<'_> {
    // ---- inference variables ----

    fn fresh(&mut self, slot: Slot) -> Ty {
        self.slots.push(slot);
        Ty::Var(self.slots.len() as u32 - 1)
    }

    fn root(&self, mut v: u32) -> u32 {
        while let Slot::Link(n) = self.slots[v as usize] {
            v = n;
        }
        v
    }

    fn resolve(&self, t: Ty) -> Ty {
        match t {
            Ty::Var(v) => {
                let r = self.root(v);
                match self.slots[r as usize] {
                    Slot::Bound(s) => Ty::Scalar(s),
                    _ => Ty::Var(r),
                }
            }
            other => other,
        }
    }

    /// Make `a` and `b` the same type if Rust would; false if they cannot be.
    fn unify(&mut self, a: Ty, b: Ty) -> bool {
        let (a, b) = (self.resolve(a), self.resolve(b));
        match (a, b) {
            (Ty::Error, _) | (_, Ty::Error) | (Ty::Never, _) | (_, Ty::Never) => true,
            (Ty::Var(x), Ty::Var(y)) => {
                if x == y {
                    return true;
                }
                match (self.slots[x as usize], self.slots[y as usize]) {
                    (Slot::Int, Slot::Int) | (Slot::Float, Slot::Float) => {
                        self.slots[x as usize] = Slot::Link(y);
                        true
                    }
                    _ => false,
                }
            }
            (Ty::Var(x), Ty::Scalar(s)) | (Ty::Scalar(s), Ty::Var(x)) => {
                let ok = match self.slots[x as usize] {
                    Slot::Int => s.is_int(),
                    Slot::Float => s.is_float(),
                    _ => false,
                };
                if ok {
                    self.slots[x as usize] = Slot::Bound(s);
                }
                ok
            }
            (a, b) => a == b,
        }
    }

    /// Resolve `t`, defaulting an unconstrained literal type as Rust does.
    fn concrete(&mut self, t: Ty) -> Ty {
        match self.resolve(t) {
            Ty::Var(v) => {
                let s = match self.slots[v as usize] {
                    Slot::Float => Scalar::F64,
                    _ => Scalar::I32,
                };
                self.slots[v as usize] = Slot::Bound(s);
                Ty::Scalar(s)
            }
            other => other,
        }
    }

    fn show(&self, t: Ty) -> String {
        match self.resolve(t) {
            Ty::Scalar(s) => s.to_string(),
            Ty::Var(v) => match self.slots[v as usize] {
                Slot::Float => "float".into(),
                _ => "integer".into(),
            },
            Ty::Buf(b) => b.to_string(),
            Ty::ElemRef(b) => format!("element address of {b}"),
            Ty::Team => "Team".into(),
            Ty::Enum(e) => e.name().into(),
            Ty::Unit => "()".into(),
            Ty::Never => "!".into(),
            Ty::Error => "{error}".into(),
        }
    }

    fn is_int(&self, t: Ty) -> bool {
        match self.resolve(t) {
            Ty::Scalar(s) => s.is_int(),
            Ty::Var(v) => matches!(self.slots[v as usize], Slot::Int),
            Ty::Error | Ty::Never => true,
            _ => false,
        }
    }

    fn is_numeric(&self, t: Ty) -> bool {
        match self.resolve(t) {
            Ty::Scalar(s) => s != Scalar::Bool,
            Ty::Var(_) | Ty::Error | Ty::Never => true,
            _ => false,
        }
    }

    // ---- names ----

    fn c_name(&mut self, name: &str, is_buf: bool) -> String {
        let base = if name == "_" {
            "unused".to_string()
        } else if RESERVED.contains(&name)
            || name.starts_with("pgas_")
            || name.starts_with("PGAS_")
            || name.starts_with("nvshmem")
            || name.starts_with("__")
            || !name.is_ascii()
        {
            let clean: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            format!("{}_", clean.trim_start_matches('_'))
        } else {
            name.to_string()
        };
        let mut candidate = base.clone();
        let mut k = 1;
        while self.used_c_names.contains(&candidate)
            || (is_buf && self.used_c_names.contains(&format!("{candidate}_len")))
        {
            candidate = format!("{base}_{k}");
            k += 1;
        }
        self.used_c_names.insert(candidate.clone());
        if is_buf {
            self.used_c_names.insert(format!("{candidate}_len"));
        }
        candidate
    }

    fn declare(
        &mut self,
        name: &str,
        ty: Ty,
        mutable: bool,
        is_param: bool,
        comptime: bool,
    ) -> String {
        let c_name = self.c_name(name, matches!(ty, Ty::Buf(_)));
        self.locals.push(Local {
            name: name.to_string(),
            ty,
            mutable,
            is_param,
            c_name: c_name.clone(),
            comptime,
        });
        let idx = self.locals.len() - 1;
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(idx);
        }
        c_name
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .copied()
            .find(|&i| self.locals[i].name == name)
    }

    // ---- blocks and statements ----

    fn block(&mut self, b: &mut Block, expect: Option<Ty>, ctx: Ctx) -> Ty {
        self.scopes.push(Vec::new());
        for stmt in &mut b.stmts {
            match stmt {
                Stmt::Let(l) => self.let_stmt(l),
                Stmt::Expr(e) => {
                    self.expr(e, None, Ctx::Stmt);
                }
            }
        }
        let ty = match &mut b.tail {
            Some(t) => self.expr(
                t,
                expect,
                if ctx == Ctx::Stmt {
                    Ctx::Stmt
                } else {
                    Ctx::Nested
                },
            ),
            None => {
                if ends_in_return(b) {
                    Ty::Never
                } else {
                    Ty::Unit
                }
            }
        };
        self.scopes.pop();
        ty
    }

    fn let_stmt(&mut self, l: &mut Let) {
        if let Some(Expr {
            kind: ExprKind::Call { name, .. },
            ..
        }) = &l.init
        {
            if name == "shared_array" {
                self.shared_let(l);
                return;
            }
        }
        let ty = match (&mut l.init, l.declared) {
            (Some(init), Some((s, _))) => {
                self.expect(init, Ty::Scalar(s), Ctx::Stmt);
                Ty::Scalar(s)
            }
            (Some(init), None) => {
                let t = self.expr(init, None, Ctx::Stmt);
                let span = init.span;
                match self.resolve(t) {
                    Ty::ElemRef(_) => {
                        self.errors.push(span, "an element address `&x[i]` can only be passed to an intrinsic; bind the value `x[i]` or a slice `&x[i..j]` instead");
                        Ty::Error
                    }
                    Ty::Enum(e) => {
                        self.errors.push(span, format!("a `{}` cannot be stored in a variable; pass it to the intrinsic directly", e.name()));
                        Ty::Error
                    }
                    Ty::Unit => {
                        self.errors
                            .push(span, "this expression has no value (type `()`) to bind");
                        Ty::Error
                    }
                    _ => t,
                }
            }
            (None, Some((s, _))) => Ty::Scalar(s),
            (None, None) => {
                self.errors.push(
                    l.span,
                    format!("`let {}` needs a type annotation or an initializer", l.name),
                );
                Ty::Error
            }
        };
        if matches!(ty, Ty::Buf(_)) && l.mutable {
            self.errors.push(
                l.span,
                "a buffer view cannot be `mut`; its elements are written through `&mut` views",
            );
        }
        // A `let` without initializer may be assigned once later, like in Rust.
        let assignable = l.mutable || l.init.is_none();
        l.c_name = self.declare(&l.name, ty, assignable, false, false);
        l.ty = ty;
    }

    fn shared_let(&mut self, l: &mut Let) {
        let Some(Expr {
            kind:
                ExprKind::Call {
                    generics,
                    args,
                    callee,
                    ..
                },
            span,
            ty,
            ..
        }) = &mut l.init
        else {
            return;
        };
        let span = *span;
        let row = intrinsics::free("shared_array");
        let mut result = Ty::Error;
        if !args.is_empty() {
            self.errors
                .push(span, "`shared_array::<T, N>()` takes no arguments");
        }
        if l.declared.is_some() {
            self.errors.push(
                l.span,
                "a shared array's type comes from `shared_array::<T, N>()`; remove the annotation",
            );
        }
        match generics.as_slice() {
            [Generic::Type(t, tspan), len] => {
                let elem_ok = row.is_some_and(|r| intrinsics::type_text(r, *t).is_some());
                if !elem_ok {
                    self.errors.push(*tspan, format!("shared arrays of `{t}` are not supported; use an integer or float type"));
                }
                let n = match len {
                    Generic::Len(0, s) => {
                        self.errors
                            .push(*s, "a shared array needs at least one element");
                        None
                    }
                    Generic::Len(n, _) => Some(n.to_string()),
                    Generic::Name(name, s) => match self.lookup(name) {
                        Some(i) if self.locals[i].comptime => {
                            let c = self.locals[i].c_name.clone();
                            self.read.insert(c.clone());
                            Some(c)
                        }
                        _ => {
                            self.errors.push(*s, format!("`{name}` is not a `#[comptime]` parameter; a shared array's length is a literal or a comptime parameter"));
                            None
                        }
                    },
                    Generic::Type(_, s) => {
                        self.errors.push(
                            *s,
                            "expected the length: an integer literal or a comptime parameter",
                        );
                        None
                    }
                };
                if let (true, Some(n), Some(row)) = (elem_ok, n, row) {
                    l.shared_len = Some(n);
                    *callee = Callee::Intrinsic(row, Some(*t));
                    result = Ty::Buf(BufTy {
                        kind: BufKind::Shared,
                        elem: *t,
                        mutable: true,
                    });
                }
            }
            _ => self.errors.push(
                span,
                "write `shared_array::<T, N>()` with an element type and a length",
            ),
        }
        *ty = result;
        l.c_name = self.declare(&l.name, result, false, false, false);
        l.ty = result;
    }

    // ---- expressions ----

    /// Check `e` where a `want` is required, reporting a mismatch at `e`.
    fn expect(&mut self, e: &mut Expr, want: Ty, ctx: Ctx) -> Ty {
        let t = self.expr(e, Some(want), ctx);
        if !self.unify(t, want) {
            let (found, wanted) = (self.show(t), self.show(want));
            let hint = if let ExprKind::Int(v, None) = &e.kind {
                if matches!(self.resolve(want), Ty::Scalar(s) if s.is_float()) {
                    format!("; write a float literal: `{v}.0`")
                } else {
                    String::new()
                }
            } else if self.is_numeric(t) && self.is_numeric(want) {
                format!("; Rust does not convert numbers implicitly: use `as {wanted}`")
            } else {
                String::new()
            };
            self.errors.push(
                e.span,
                format!("mismatched types: expected `{wanted}`, found `{found}`{hint}"),
            );
            return Ty::Error;
        }
        want
    }

    fn expr(&mut self, e: &mut Expr, expect: Option<Ty>, ctx: Ctx) -> Ty {
        let mut ty = self.expr_kind(e, expect, ctx);
        // A buffer view is a pointer plus a length; C has no conditional pair of them.
        let else_reported =
            matches!(&e.kind, ExprKind::If { els: Some(x), .. } if x.ty == Ty::Error);
        if matches!(ty, Ty::Buf(_))
            && !else_reported
            && matches!(e.kind, ExprKind::If { .. } | ExprKind::Block(_))
        {
            self.errors.push(e.span, "an `if` or block cannot produce a buffer view; index or slice inside the branches instead");
            ty = Ty::Error;
        }
        e.ty = ty;
        ty
    }

    fn expr_kind(&mut self, e: &mut Expr, expect: Option<Ty>, ctx: Ctx) -> Ty {
        let span = e.span;
        let expect = expect.map(|t| self.resolve(t));
        match &mut e.kind {
            ExprKind::Int(v, suffix) => match suffix {
                Some(s) => Ty::Scalar(*s),
                None => match expect {
                    Some(Ty::Scalar(s)) if s.is_int() => Ty::Scalar(s),
                    Some(Ty::Var(x)) if matches!(self.slots[x as usize], Slot::Int) => Ty::Var(x),
                    _ => {
                        let _ = v;
                        self.fresh(Slot::Int)
                    }
                },
            },
            ExprKind::Float(_, suffix) => match suffix {
                Some(s) => Ty::Scalar(*s),
                None => match expect {
                    Some(Ty::Scalar(s)) if s.is_float() => Ty::Scalar(s),
                    Some(Ty::Var(x)) if matches!(self.slots[x as usize], Slot::Float) => Ty::Var(x),
                    _ => self.fresh(Slot::Float),
                },
            },
            ExprKind::Bool(_) => Ty::Scalar(Scalar::Bool),
            ExprKind::Var { name, c_name } => match self.lookup(name) {
                Some(i) => {
                    let l = &self.locals[i];
                    *c_name = l.c_name.clone();
                    self.read.insert(l.c_name.clone());
                    l.ty
                }
                None => {
                    let msg = if intrinsics::free(name).is_some()
                        || self.sigs.contains_key(name.as_str())
                    {
                        format!("`{name}` is a function; call it: `{name}(...)`")
                    } else {
                        format!("cannot find `{name}` in this kernel; kernels see only their parameters and locals (no host globals or constants)")
                    };
                    self.errors.push(span, msg);
                    Ty::Error
                }
            },
            ExprKind::Enum(en, _) => Ty::Enum(*en),
            ExprKind::Unary(op, inner) => {
                let t = self.expr(inner, expect, Ctx::Nested);
                let r = self.resolve(t);
                match op {
                    UnOp::Neg => {
                        let bad = match r {
                            Ty::Scalar(s) => {
                                s == Scalar::Bool || (s.is_int() && !s.is_signed_int())
                            }
                            _ => !self.is_numeric(r),
                        };
                        if bad {
                            let shown = self.show(r);
                            self.errors
                                .push(span, format!("cannot apply unary `-` to type `{shown}`"));
                            return Ty::Error;
                        }
                    }
                    UnOp::Not => {
                        let ok = matches!(r, Ty::Scalar(Scalar::Bool)) || self.is_int(r);
                        if !ok {
                            let shown = self.show(r);
                            self.errors.push(span, format!("cannot apply `!` to type `{shown}`; it works on `bool` and integers"));
                            return Ty::Error;
                        }
                    }
                }
                t
            }
            ExprKind::Binary(op, l, r) => {
                let op = *op;
                self.binary(op, l, r, expect, span)
            }
            ExprKind::Cast(inner, target) => {
                let target = *target;
                let t = self.expr(inner, None, Ctx::Nested);
                let from = self.concrete(t);
                match from {
                    Ty::Scalar(s) => {
                        let ok = if target == Scalar::Bool {
                            s == Scalar::Bool
                        } else if s == Scalar::Bool {
                            target.is_int()
                        } else {
                            true
                        };
                        if !ok {
                            let hint = if target == Scalar::Bool {
                                "; compare instead: `x != 0`"
                            } else {
                                ""
                            };
                            self.errors
                                .push(span, format!("cannot cast `{s}` as `{target}`{hint}"));
                            return Ty::Error;
                        }
                        Ty::Scalar(target)
                    }
                    Ty::Error => Ty::Error,
                    other => {
                        let shown = self.show(other);
                        self.errors.push(span, format!("cannot cast `{shown}` as `{target}`; `as` converts between scalar types"));
                        Ty::Error
                    }
                }
            }
            ExprKind::Assign(l, r) => {
                let lt = self.place(l);
                if lt != Ty::Error {
                    self.expect(r, lt, Ctx::Stmt);
                } else {
                    self.expr(r, None, Ctx::Stmt);
                }
                Ty::Unit
            }
            ExprKind::AssignOp(op, l, r) => {
                let op = *op;
                let lt = self.place(l);
                if lt == Ty::Error {
                    self.expr(r, None, Ctx::Nested);
                    return Ty::Unit;
                }
                if matches!(op, BinOp::Shl | BinOp::Shr) {
                    let rt = self.expr(r, None, Ctx::Nested);
                    if !self.is_int(lt) || !self.is_int(rt) {
                        self.errors.push(span, "shifts take integers");
                    }
                } else {
                    let rt = self.expr(r, Some(lt), Ctx::Nested);
                    self.arith_operands(op, lt, rt, span);
                }
                Ty::Unit
            }
            ExprKind::Index(base, index) => {
                let bt = self.expr(base, None, Ctx::Nested);
                self.expect_index(index);
                match bt {
                    Ty::Buf(b) => Ty::Scalar(b.elem),
                    Ty::Error => Ty::Error,
                    other => {
                        let shown = self.show(other);
                        self.errors.push(base.span, format!("cannot index a value of type `{shown}`; only buffers can be indexed"));
                        Ty::Error
                    }
                }
            }
            ExprKind::Slice {
                base,
                start,
                end,
                mutable,
            } => {
                let mutable = *mutable;
                let bt = self.expr(base, None, Ctx::Nested);
                if let Some(s) = start {
                    self.expect_index(s);
                }
                if let Some(x) = end {
                    self.expect_index(x);
                }
                match bt {
                    Ty::Buf(b) => {
                        if mutable && !b.mutable {
                            self.read_only(base.span, &b, "borrow it as `&mut`");
                            return Ty::Error;
                        }
                        Ty::Buf(BufTy { mutable, ..b })
                    }
                    Ty::Error => Ty::Error,
                    other => {
                        let shown = self.show(other);
                        self.errors.push(base.span, format!("cannot slice a value of type `{shown}`; only buffers can be sliced"));
                        Ty::Error
                    }
                }
            }
            ExprKind::ElemRef {
                base,
                index,
                mutable,
            } => {
                let mutable = *mutable;
                let bt = self.expr(base, None, Ctx::Nested);
                self.expect_index(index);
                if ctx != Ctx::Arg {
                    self.errors.push(span, "an element address `&x[i]` can only be an intrinsic's argument (like `p(&mut x[i], v, pe)`); read the value with `x[i]`");
                    return Ty::Error;
                }
                match bt {
                    Ty::Buf(b) => {
                        if mutable && !b.mutable {
                            self.read_only(base.span, &b, "borrow it as `&mut`");
                            return Ty::Error;
                        }
                        Ty::ElemRef(BufTy { mutable, ..b })
                    }
                    Ty::Error => Ty::Error,
                    other => {
                        let shown = self.show(other);
                        self.errors
                            .push(base.span, format!("cannot index a value of type `{shown}`"));
                        Ty::Error
                    }
                }
            }
            ExprKind::Call {
                name,
                name_span,
                generics,
                args,
                callee,
            } => {
                let name_span = *name_span;
                if name == "shared_array" {
                    self.errors.push(span, "`shared_array::<T, N>()` must be the initializer of a `let`: `let s = shared_array::<f32, 256>();`");
                    return Ty::Error;
                }
                if !generics.is_empty() {
                    self.errors
                        .push(name_span, format!("`{name}` takes no generic arguments"));
                }
                if let Some(sig) = self.sigs.get(name.as_str()).cloned() {
                    *callee = Callee::Device;
                    self.info.calls.insert(name.clone());
                    return self.device_call(name, &sig, args, span);
                }
                if let Some(row) = intrinsics::free(name) {
                    let (t, elem) = self.intrinsic(row, args, span, name_span, false, expect);
                    if t != Ty::Error {
                        *callee = Callee::Intrinsic(row, elem);
                    }
                    return t;
                }
                for a in args.iter_mut() {
                    self.expr(a, None, Ctx::Arg);
                }
                if intrinsics::method(name).is_some() {
                    self.errors.push(
                        name_span,
                        format!("`{name}` is a method: write `x.{name}(...)`"),
                    );
                } else if self.lenient {
                    self.incomplete = true;
                } else {
                    self.errors.push(name_span, format!("cannot find function `{name}`: a kernel can call the intrinsics listed in docs/dsl.md and #[pgas_device] functions"));
                }
                Ty::Error
            }
            ExprKind::Method {
                name,
                name_span,
                args,
                callee,
            } => {
                let name_span = *name_span;
                match intrinsics::method(name) {
                    Some(row) => {
                        let (t, elem) = self.intrinsic(row, args, span, name_span, true, expect);
                        if t != Ty::Error {
                            *callee = Callee::Intrinsic(row, elem);
                        }
                        t
                    }
                    None => {
                        for a in args.iter_mut() {
                            self.expr(a, None, Ctx::Nested);
                        }
                        let list: Vec<&str> = intrinsics::INTRINSICS
                            .iter()
                            .filter(|r| r.form != Form::Free)
                            .map(|r| r.name)
                            .collect();
                        self.errors.push(
                            name_span,
                            format!(
                                "unsupported method `.{name}()`; kernels support {}",
                                list.join(", ")
                            ),
                        );
                        Ty::Error
                    }
                }
            }
            ExprKind::If { cond, then, els } => {
                self.expect(cond, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                let inner_ctx = if ctx == Ctx::Stmt {
                    Ctx::Stmt
                } else {
                    Ctx::Nested
                };
                let tt = self.block(then, expect, inner_ctx);
                match els {
                    None => {
                        if !matches!(self.resolve(tt), Ty::Unit | Ty::Never | Ty::Error) {
                            let shown = self.show(tt);
                            self.errors.push(then.span, format!("`if` without `else` has no value, but this block evaluates to `{shown}`; add `;` or an `else`"));
                            return Ty::Error;
                        }
                        Ty::Unit
                    }
                    Some(els) => {
                        let et = self.expr(els, expect.or(Some(tt)), inner_ctx);
                        if ctx != Ctx::Stmt && !(is_simple_block(then) && is_simple_value(els)) {
                            self.errors.push(span, "an `if` whose branches contain statements can only produce a value as a `let` initializer, an assignment, a `return` value or a block's last expression; bind it with `let` first");
                        }
                        if !self.unify(tt, et) {
                            let (a, b) = (self.show(tt), self.show(et));
                            self.errors.push(
                                els.span,
                                format!("`if` and `else` have incompatible types: `{a}` and `{b}`"),
                            );
                            return Ty::Error;
                        }
                        match self.resolve(tt) {
                            Ty::Never => et,
                            _ => tt,
                        }
                    }
                }
            }
            ExprKind::Block(b) => {
                if ctx != Ctx::Stmt && !b.stmts.is_empty() {
                    self.errors.push(span, "a block with statements can only produce a value as a `let` initializer, an assignment, a `return` value or a block's last expression");
                }
                let inner_ctx = if ctx == Ctx::Stmt {
                    Ctx::Stmt
                } else {
                    Ctx::Nested
                };
                self.block(b, expect, inner_ctx)
            }
            ExprKind::For {
                var,
                c_var,
                c_end,
                start,
                end,
                step,
                body,
            } => {
                let st = self.expr(start, None, Ctx::Nested);
                let et = self.expr(end, Some(st), Ctx::Nested);
                if !self.unify(st, et) {
                    let (a, b) = (self.show(st), self.show(et));
                    self.errors.push(end.span, format!("the range ends have different types: `{a}` and `{b}`; convert one with `as`"));
                } else if !self.is_int(st) {
                    let shown = self.show(st);
                    self.errors.push(
                        start.span,
                        format!("`for` ranges are over integers, not `{shown}`"),
                    );
                }
                if let Some(s) = step {
                    self.expect(s, Ty::Scalar(Scalar::Usize), Ctx::Nested);
                }
                self.scopes.push(Vec::new());
                *c_var = self.declare(var, st, false, false, false);
                *c_end = self.c_name(&format!("{c_var}_end"), false);
                self.loop_depth += 1;
                self.block(body, Some(Ty::Unit), Ctx::Stmt);
                self.loop_depth -= 1;
                self.scopes.pop();
                self.loop_body_unit(body);
                Ty::Unit
            }
            ExprKind::While { cond, body } => {
                self.expect(cond, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                self.loop_depth += 1;
                self.block(body, Some(Ty::Unit), Ctx::Stmt);
                self.loop_depth -= 1;
                self.loop_body_unit(body);
                Ty::Unit
            }
            ExprKind::Loop(body) => {
                self.loop_depth += 1;
                self.block(body, Some(Ty::Unit), Ctx::Stmt);
                self.loop_depth -= 1;
                self.loop_body_unit(body);
                Ty::Unit
            }
            ExprKind::Break | ExprKind::Continue => {
                if self.loop_depth == 0 {
                    self.errors
                        .push(span, "`break`/`continue` outside of a loop");
                }
                Ty::Never
            }
            ExprKind::Return(value) => {
                let ret = self.ret;
                match value {
                    Some(v) => {
                        if ret == Ty::Unit {
                            self.expr(v, None, Ctx::Stmt);
                            self.errors
                                .push(v.span, "this function returns nothing; use `return;`");
                        } else {
                            self.expect(v, ret, Ctx::Stmt);
                        }
                    }
                    None => {
                        if ret != Ty::Unit {
                            self.errors.push(
                                span,
                                format!(
                                    "this function returns `{}`: `return value;`",
                                    show_scalar(ret)
                                ),
                            );
                        }
                    }
                }
                Ty::Never
            }
            ExprKind::Assert { cond, .. } => {
                self.expect(cond, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                Ty::Unit
            }
        }
    }

    fn loop_body_unit(&mut self, body: &Block) {
        if let Some(t) = &body.tail {
            if !matches!(self.resolve(t.ty), Ty::Unit | Ty::Never | Ty::Error) {
                let shown = self.show(t.ty);
                self.errors.push(
                    t.span,
                    format!("a loop body has no value, but this evaluates to `{shown}`; add `;`"),
                );
            }
        }
    }

    fn expect_index(&mut self, index: &mut Expr) {
        let t = self.expr(index, Some(Ty::Scalar(Scalar::Usize)), Ctx::Nested);
        if !self.unify(t, Ty::Scalar(Scalar::Usize)) {
            let shown = self.show(t);
            self.errors.push(
                index.span,
                format!("buffers are indexed by `usize`, found `{shown}`; convert with `as usize`"),
            );
        }
    }

    fn read_only(&mut self, span: Sp, b: &BufTy, fix: &str) {
        let msg = match b.kind {
            BufKind::Sym => format!("cannot write through a read-only `&SymTensor<{0}>`; take the parameter as `&mut SymTensor<{0}>` and {fix}", b.elem),
            BufKind::Local => format!("cannot write through a read-only `&CudaSlice<{0}>`; take the parameter as `&mut CudaSlice<{0}>` and {fix}", b.elem),
            BufKind::Peer => "cannot write through a peer view of a read-only `&SymTensor`; take the parameter as `&mut SymTensor`".to_string(),
            BufKind::Shared => format!("cannot write through a read-only view; {fix}"),
        };
        self.errors.push(span, msg);
    }

    /// Check an assignment target; returns its type (or `Error`).
    fn place(&mut self, e: &mut Expr) -> Ty {
        let span = e.span;
        let ty = match &mut e.kind {
            ExprKind::Var { name, c_name } => match self.lookup(name) {
                Some(i) => {
                    let l = self.locals[i].clone();
                    *c_name = l.c_name.clone();
                    if l.is_param {
                        self.errors.push(span, format!("cannot assign to parameter `{name}`; copy it into a local: `let mut {name} = {name};`"));
                        Ty::Error
                    } else if matches!(l.ty, Ty::Buf(_)) {
                        self.errors.push(
                            span,
                            "buffer views cannot be reassigned; assign to elements: `x[i] = v`",
                        );
                        Ty::Error
                    } else if !l.mutable {
                        self.errors.push(span, format!("cannot assign twice to immutable variable `{name}`; declare it `let mut {name}`"));
                        Ty::Error
                    } else {
                        l.ty
                    }
                }
                None => {
                    self.errors
                        .push(span, format!("cannot find `{name}` in this kernel"));
                    Ty::Error
                }
            },
            ExprKind::Index(base, index) => {
                let bt = self.expr(base, None, Ctx::Nested);
                self.expect_index(index);
                match bt {
                    Ty::Buf(b) if b.mutable => Ty::Scalar(b.elem),
                    Ty::Buf(b) => {
                        self.read_only(base.span, &b, "write through it");
                        Ty::Error
                    }
                    Ty::Error => Ty::Error,
                    other => {
                        let shown = self.show(other);
                        self.errors
                            .push(base.span, format!("cannot index a value of type `{shown}`"));
                        Ty::Error
                    }
                }
            }
            _ => {
                self.expr(e, None, Ctx::Nested);
                self.errors.push(span, "cannot assign to this expression; assign to a `let mut` variable or a buffer element `x[i]`");
                Ty::Error
            }
        };
        e.ty = ty;
        ty
    }

    fn binary(
        &mut self,
        op: BinOp,
        l: &mut Expr,
        r: &mut Expr,
        expect: Option<Ty>,
        span: Sp,
    ) -> Ty {
        match op {
            BinOp::And | BinOp::Or => {
                self.expect(l, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                self.expect(r, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                Ty::Scalar(Scalar::Bool)
            }
            BinOp::Shl | BinOp::Shr => {
                let lt = self.expr(l, expect, Ctx::Nested);
                let rt = self.expr(r, None, Ctx::Nested);
                if !self.is_int(lt) || !self.is_int(rt) {
                    let (a, b) = (self.show(lt), self.show(rt));
                    self.errors.push(
                        span,
                        format!("cannot shift `{a}` by `{b}`; shifts take integers"),
                    );
                    return Ty::Error;
                }
                lt
            }
            _ if op.is_comparison() => {
                let lt = self.expr(l, None, Ctx::Nested);
                let rt = self.expr(r, Some(lt), Ctx::Nested);
                if !self.unify(lt, rt) {
                    let (a, b) = (self.show(lt), self.show(rt));
                    self.errors.push(span, format!("cannot compare `{a}` with `{b}`; Rust does not convert numbers implicitly: use `as` on one side"));
                    return Ty::Error;
                }
                match self.resolve(lt) {
                    Ty::Scalar(_) | Ty::Var(_) | Ty::Error | Ty::Never => {}
                    other => {
                        let shown = self.show(other);
                        self.errors
                            .push(span, format!("cannot compare values of type `{shown}`"));
                    }
                }
                Ty::Scalar(Scalar::Bool)
            }
            _ => {
                let lt = self.expr(l, expect, Ctx::Nested);
                let rt = self.expr(r, Some(lt), Ctx::Nested);
                self.arith_operands(op, lt, rt, span)
            }
        }
    }

    /// Operands of `+ - * / % & | ^`: same type, numeric (bit ops: integers or bool).
    fn arith_operands(&mut self, op: BinOp, lt: Ty, rt: Ty, span: Sp) -> Ty {
        if !self.unify(lt, rt) {
            let (a, b) = (self.show(lt), self.show(rt));
            let hint = if self.is_numeric(lt) && self.is_numeric(rt) {
                format!("; Rust does not convert numbers implicitly: use `as`, e.g. `(...) as {a}`")
            } else {
                String::new()
            };
            self.errors.push(
                span,
                format!("cannot apply `{}` to `{a}` and `{b}`{hint}", op.text()),
            );
            return Ty::Error;
        }
        let t = self.resolve(lt);
        let ok = match op {
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => {
                self.is_int(t) || t == Ty::Scalar(Scalar::Bool)
            }
            BinOp::Rem => self.is_numeric(t) && !matches!(t, Ty::Scalar(s) if s.is_half()),
            _ => self.is_numeric(t),
        };
        if !ok {
            let shown = self.show(t);
            let hint = match t {
                Ty::Buf(_) => "; index the buffer: `x[i]`",
                _ => "",
            };
            self.errors.push(
                span,
                format!("cannot apply `{}` to type `{shown}`{hint}", op.text()),
            );
            return Ty::Error;
        }
        lt
    }

    fn device_call(&mut self, name: &str, sig: &FnSig, args: &mut [Expr], span: Sp) -> Ty {
        if args.len() != sig.params.len() {
            self.errors.push(
                span,
                format!(
                    "`{name}` takes {} argument(s) but {} were given",
                    sig.params.len(),
                    args.len()
                ),
            );
            for a in args.iter_mut() {
                self.expr(a, None, Ctx::Nested);
            }
            return sig.ret;
        }
        for (a, p) in args.iter_mut().zip(&sig.params) {
            match p {
                Ty::Buf(want) => {
                    let t = self.expr(a, None, Ctx::Nested);
                    match t {
                        Ty::Buf(got) => {
                            let kind_ok = match want.kind {
                                BufKind::Sym => got.kind == BufKind::Sym,
                                _ => got.kind != BufKind::Sym,
                            };
                            if !kind_ok || got.elem != want.elem || (want.mutable && !got.mutable) {
                                self.errors.push(a.span, format!("mismatched types: `{name}` expects `{want}`, found `{got}`"));
                            }
                        }
                        Ty::Error => {}
                        other => {
                            let shown = self.show(other);
                            self.errors.push(
                                a.span,
                                format!(
                                    "mismatched types: `{name}` expects `{want}`, found `{shown}`"
                                ),
                            );
                        }
                    }
                }
                other => {
                    self.expect(a, *other, Ctx::Nested);
                }
            }
        }
        sig.ret
    }

    /// Check a call of an intrinsic row; returns its type and element type.
    fn intrinsic(
        &mut self,
        row: &'static Intrinsic,
        args: &mut [Expr],
        span: Sp,
        name_span: Span,
        method: bool,
        expect: Option<Ty>,
    ) -> (Ty, Option<Scalar>) {
        let shown_name = if method {
            format!(".{}", row.name)
        } else {
            row.name.to_string()
        };
        if args.len() != row.args.len() {
            let skip = usize::from(method);
            let list: Vec<String> = row.args.iter().skip(skip).map(|(n, a)| a.doc(n)).collect();
            let (want, got) = (row.args.len() - skip, args.len().saturating_sub(skip));
            self.errors.push(
                span,
                if list.is_empty() {
                    format!("`{shown_name}` takes no arguments but {got} were given")
                } else {
                    format!(
                        "`{shown_name}` takes {want} argument(s) ({}) but {got} were given",
                        list.join(", ")
                    )
                },
            );
            for a in args.iter_mut() {
                self.expr(a, None, Ctx::Arg);
            }
            return (Ty::Error, None);
        }
        let mut elem: Option<Scalar> = None;
        let mut recv_mut = false;
        let mut failed = false;
        let mut done = vec![false; args.len()];
        let mut reduce_op: Option<&'static str> = None;
        // Buffers and element addresses fix `T` first, so value arguments and literals can
        // take it from them.
        for (i, (pname, kind)) in row.args.iter().enumerate() {
            let binds = matches!(
                kind,
                Arg::RemoteDst
                    | Arg::SymSrc
                    | Arg::AnySrc
                    | Arg::AnyDst
                    | Arg::SymElem { .. }
                    | Arg::Signal { .. }
                    | Arg::AnyElemMut
                    | Arg::AnyBuf
            );
            if !binds {
                continue;
            }
            done[i] = true;
            let a = &mut args[i];
            let t = self.expr(a, None, Ctx::Arg);
            if t == Ty::Error {
                failed = true;
                continue;
            }
            match self.buffer_arg(*kind, t, pname, &shown_name, a.span) {
                Some(b) => {
                    if i == 0 {
                        recv_mut = b.mutable;
                    }
                    if matches!(kind, Arg::Signal { .. } | Arg::AnyBuf) {
                        continue;
                    }
                    match elem {
                        None => elem = Some(b.elem),
                        Some(e) if e != b.elem => {
                            self.errors.push(
                                a.span,
                                format!(
                                    "mismatched element types in `{shown_name}`: `{e}` and `{}`",
                                    b.elem
                                ),
                            );
                            failed = true;
                        }
                        _ => {}
                    }
                }
                None => failed = true,
            }
        }
        // With no buffer argument the value arguments fix `T`: they unify with each other
        // (and with the call's expected type when `T` is returned), like a Rust generic.
        let mut value_ty: Option<Ty> = None;
        if elem.is_none() && !row.types.is_empty() {
            if let Some(i) = row.args.iter().position(|(_, k)| *k == Arg::Value) {
                done[i] = true;
                let hint = if row.ret == Ret::Elem { expect } else { None };
                let t = self.expr(&mut args[i], hint, Ctx::Nested);
                match self.resolve(t) {
                    Ty::Scalar(_) | Ty::Var(_) => value_ty = Some(t),
                    Ty::Error => failed = true,
                    other => {
                        let shown = self.show(other);
                        self.errors.push(
                            args[i].span,
                            format!("`{shown_name}` takes a number, found `{shown}`"),
                        );
                        failed = true;
                    }
                }
            }
        }
        for (i, (pname, kind)) in row.args.iter().enumerate() {
            if done[i] {
                continue;
            }
            let a = &mut args[i];
            match kind {
                Arg::Pe | Arg::TeamPe(_) => {
                    let t = self.expr(a, Some(Ty::Scalar(Scalar::I32)), Ctx::Nested);
                    if !self.is_int(t) {
                        let shown = self.show(t);
                        self.errors.push(a.span, format!("`{pname}` is a PE number: an integer expression (i32-compatible), found `{shown}`"));
                        failed = true;
                    }
                }
                Arg::Team => {
                    let t = self.expr(a, None, Ctx::Nested);
                    if !matches!(t, Ty::Team | Ty::Error) {
                        let shown = self.show(t);
                        self.errors.push(
                            a.span,
                            format!("`{pname}` must be a `Team` parameter, found `{shown}`"),
                        );
                        failed = true;
                    }
                }
                Arg::Exact(s) if self.expect(a, Ty::Scalar(*s), Ctx::Nested) == Ty::Error => {
                    failed = true;
                }
                Arg::Value => match elem.map(Ty::Scalar).or(value_ty) {
                    Some(t) => {
                        if self.expect(a, t, Ctx::Nested) == Ty::Error {
                            failed = true;
                        }
                    }
                    None => {
                        self.expr(a, None, Ctx::Nested);
                    }
                },
                Arg::SignalOp | Arg::Cmp | Arg::ReduceOp => {
                    let want = match kind {
                        Arg::SignalOp => EnumTy::SignalOp,
                        Arg::Cmp => EnumTy::Cmp,
                        _ => EnumTy::ReduceOp,
                    };
                    self.expr(a, None, Ctx::Nested);
                    match &a.kind {
                        ExprKind::Enum(en, v) if *en == want => {
                            if want == EnumTy::ReduceOp {
                                reduce_op = Some(v);
                            }
                        }
                        _ => {
                            let list: Vec<String> = want
                                .variants()
                                .iter()
                                .map(|(v, _)| format!("{}::{v}", want.name()))
                                .collect();
                            self.errors.push(
                                a.span,
                                format!("`{pname}` must be written as one of {}", list.join(", ")),
                            );
                            failed = true;
                        }
                    }
                }
                _ => {}
            }
        }
        if failed {
            return (Ty::Error, None);
        }
        if let (None, Some(t)) = (elem, value_ty) {
            match self.resolve(t) {
                Ty::Scalar(s) => elem = Some(s),
                // Still a literal's type: it may unify later (`min(1, 2) ^ x_u64`), so the
                // element type is fixed and checked in the final pass.
                _ if row.ret == Ret::Elem => return (t, None),
                _ => elem = self.concrete(t).scalar(),
            }
        }
        if !row.types.is_empty() {
            let Some(t) = elem else {
                return (Ty::Error, None);
            };
            if intrinsics::type_text(row, t).is_none() {
                let list: Vec<String> = row.types.iter().map(|(s, _)| s.to_string()).collect();
                self.errors.push(
                    name_span,
                    format!(
                        "`{shown_name}` does not support `{t}`; it takes {}",
                        list.join(", ")
                    ),
                );
                return (Ty::Error, None);
            }
            if let Some(op) = reduce_op {
                if matches!(op, "And" | "Or" | "Xor") && !REDUCE_BITWISE.contains(&t) {
                    self.errors.push(name_span, format!("`ReduceOp::{op}` is a bit operation: NVSHMEM provides it for integer types only, not `{t}`"));
                    return (Ty::Error, None);
                }
            }
        }
        if row.collective {
            self.info.collective = true;
        }
        let ty = match row.ret {
            Ret::Unit => Ty::Unit,
            Ret::Elem => elem.map(Ty::Scalar).unwrap_or(Ty::Error),
            Ret::Exact(s) => Ty::Scalar(s),
            Ret::PeerView => match elem {
                Some(e) => Ty::Buf(BufTy {
                    kind: BufKind::Peer,
                    elem: e,
                    mutable: recv_mut,
                }),
                None => Ty::Error,
            },
            Ret::SharedArray => Ty::Error,
        };
        (ty, elem)
    }

    /// Validate a buffer-like argument against its kind; returns the buffer type.
    fn buffer_arg(
        &mut self,
        kind: Arg,
        t: Ty,
        pname: &str,
        fname: &str,
        span: Sp,
    ) -> Option<BufTy> {
        let want_text = match kind {
            Arg::RemoteDst => "a `&mut SymTensor<T>` or a slice `&mut x[a..b]` of one",
            Arg::SymSrc => "a `SymTensor<T>` or a slice `&x[a..b]` of one",
            Arg::AnySrc | Arg::AnyBuf => "a buffer or a slice `&x[a..b]`",
            Arg::AnyDst => "a mutable buffer or a slice `&mut x[a..b]`",
            Arg::SymElem { mutable: true } => {
                "an element address `&mut x[i]` of a `&mut SymTensor`"
            }
            Arg::SymElem { mutable: false } => "an element address `&x[i]` of a `SymTensor`",
            Arg::Signal { mutable: true } => "a signal `&mut sig[k]` of a `&mut SymTensor<u64>`",
            Arg::Signal { mutable: false } => "a signal `&sig[k]` of a `SymTensor<u64>`",
            _ => "an element address `&mut x[i]`",
        };
        let elem_kind = matches!(
            kind,
            Arg::SymElem { .. } | Arg::Signal { .. } | Arg::AnyElemMut
        );
        let b = match (t, elem_kind) {
            (Ty::Buf(b), false) | (Ty::ElemRef(b), true) => b,
            (Ty::Scalar(_), true) => {
                let shown = self.show(t);
                self.errors.push(span, format!("`{fname}` takes {want_text} as `{pname}`, found a value of type `{shown}`; write `&mut x[i]` / `&x[i]`"));
                return None;
            }
            _ => {
                let shown = self.show(t);
                self.errors.push(
                    span,
                    format!("`{fname}` takes {want_text} as `{pname}`, found `{shown}`"),
                );
                return None;
            }
        };
        let remote = matches!(
            kind,
            Arg::RemoteDst | Arg::SymSrc | Arg::SymElem { .. } | Arg::Signal { .. }
        );
        if remote && b.kind != BufKind::Sym {
            let msg = match b.kind {
                BufKind::Local => format!("a `CudaSlice` is local memory and cannot be a remote target: `{pname}` of `{fname}` must be a `SymTensor` (symmetric memory)"),
                BufKind::Shared => format!("shared memory cannot be a remote target: `{pname}` of `{fname}` must be a `SymTensor`"),
                _ => format!("a peer view is already a direct pointer to another PE; pass the `SymTensor` itself as `{pname}` of `{fname}`, or use the view with plain indexing"),
            };
            self.errors.push(span, msg);
            return None;
        }
        let needs_mut = matches!(
            kind,
            Arg::RemoteDst
                | Arg::AnyDst
                | Arg::SymElem { mutable: true }
                | Arg::Signal { mutable: true }
                | Arg::AnyElemMut
        );
        if needs_mut && !b.mutable {
            let msg = if elem_kind {
                format!("`{pname}` of `{fname}` is written: pass `&mut x[i]` of a mutable buffer (found a read-only `{}`)", b)
            } else {
                format!("`{pname}` of `{fname}` is written, so it must be mutable (found `{b}`); take `&mut` and pass `&mut x[a..b]` for slices")
            };
            self.errors.push(span, msg);
            return None;
        }
        if matches!(kind, Arg::Signal { .. }) && b.elem != Scalar::U64 {
            self.errors.push(span, format!("signals are `u64`: `{pname}` of `{fname}` must point into a `SymTensor<u64>`, found `{}`", b.elem));
            return None;
        }
        Some(b)
    }

    // ---- final pass ----

    /// Replace inference variables by their (defaulted) types, check literal ranges, and mark
    /// unread locals.
    fn finish_block(&mut self, b: &mut Block, read: &HashSet<String>) {
        for s in &mut b.stmts {
            match s {
                Stmt::Let(l) => {
                    l.ty = self.concrete(l.ty);
                    l.read = read.contains(&l.c_name);
                    if let Some(init) = &mut l.init {
                        self.finish_expr(init, read);
                    }
                }
                Stmt::Expr(e) => self.finish_expr(e, read),
            }
        }
        if let Some(t) = &mut b.tail {
            self.finish_expr(t, read);
        }
    }

    fn finish_expr(&mut self, e: &mut Expr, read: &HashSet<String>) {
        e.ty = self.concrete(e.ty);
        if let (ExprKind::Int(v, _), Ty::Scalar(s)) = (&e.kind, e.ty) {
            if let Some((lo, hi)) = s.int_range() {
                // One past the maximum is allowed for signed types so `-128i8` works.
                let hi = if lo < 0 { hi + 1 } else { hi };
                if (*v as i128) > hi || *v > i128::MAX as u128 {
                    self.errors
                        .push(e.span, format!("literal out of range for `{s}`"));
                }
            }
        }
        if let ExprKind::Call { callee, .. } | ExprKind::Method { callee, .. } = &mut e.kind {
            if let (Callee::Intrinsic(row, None), Ty::Scalar(t)) = (*callee, e.ty) {
                if !row.types.is_empty() {
                    if intrinsics::type_text(row, t).is_some() {
                        *callee = Callee::Intrinsic(row, Some(t));
                    } else {
                        let list: Vec<String> =
                            row.types.iter().map(|(s, _)| s.to_string()).collect();
                        self.errors.push(
                            e.span,
                            format!(
                                "`{}` does not support `{t}`; it takes {}",
                                row.name,
                                list.join(", ")
                            ),
                        );
                    }
                }
            }
        }
        match &mut e.kind {
            ExprKind::Unary(_, a) | ExprKind::Cast(a, _) => self.finish_expr(a, read),
            ExprKind::Binary(_, a, b)
            | ExprKind::Assign(a, b)
            | ExprKind::AssignOp(_, a, b)
            | ExprKind::Index(a, b)
            | ExprKind::ElemRef {
                base: a, index: b, ..
            } => {
                self.finish_expr(a, read);
                self.finish_expr(b, read);
            }
            ExprKind::Slice {
                base, start, end, ..
            } => {
                self.finish_expr(base, read);
                if let Some(s) = start {
                    self.finish_expr(s, read);
                }
                if let Some(x) = end {
                    self.finish_expr(x, read);
                }
            }
            ExprKind::Call { args, .. } | ExprKind::Method { args, .. } => {
                for a in args {
                    self.finish_expr(a, read);
                }
            }
            ExprKind::If { cond, then, els } => {
                self.finish_expr(cond, read);
                self.finish_block(then, read);
                if let Some(x) = els {
                    self.finish_expr(x, read);
                }
            }
            ExprKind::Block(b) | ExprKind::Loop(b) => self.finish_block(b, read),
            ExprKind::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                self.finish_expr(start, read);
                self.finish_expr(end, read);
                if let Some(s) = step {
                    self.finish_expr(s, read);
                }
                self.finish_block(body, read);
            }
            ExprKind::While { cond, body } => {
                self.finish_expr(cond, read);
                self.finish_block(body, read);
            }
            ExprKind::Return(Some(v)) => self.finish_expr(v, read),
            ExprKind::Assert { cond, .. } => self.finish_expr(cond, read),
            _ => {}
        }
    }
}
