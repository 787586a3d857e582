//! Blocks, `let` statements (including `let s = shared_array::<T, N>()`) and control flow:
//! `if`, `for`, `while`, `loop`, `break`/`continue`, `return`, `assert!`. Kept apart from
//! `expr.rs` because these decide where a value may come from (a block's tail, a branch) and
//! what a function returns, not what an operator does.

use super::checker::{ends_in_return, is_simple_block, is_simple_value, Checker, Ctx};
use crate::error::Sp;
use crate::intrinsics::{self, Group, Intrinsic, Ret};
use crate::ir::*;
use crate::types::{BufKind, BufTy, FragKind, FragTy, Scalar, Ty};

impl Checker<'_> {
    pub(super) fn block(&mut self, b: &mut Block, expect: Option<Ty>, ctx: Ctx) -> Ty {
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

    pub(super) fn let_stmt(&mut self, l: &mut Let) {
        if let Some(Expr {
            kind: ExprKind::Array(_) | ExprKind::ArrayRepeat { .. },
            ..
        }) = &l.init
        {
            self.array_let(l);
            return;
        }
        if let Some(Expr {
            kind: ExprKind::Call { name, .. },
            ..
        }) = &l.init
        {
            if let Some(row) = intrinsics::free(name).filter(|r| r.ret.is_declaration()) {
                self.decl_let(l, row);
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
                    Ty::Array(_) => {
                        self.errors.push(span, "local arrays are not copied: index the array itself (`acc[i]`), or declare a new one and copy its elements in a loop");
                        Ty::Error
                    }
                    Ty::Frag(_) | Ty::FragArray(_) => {
                        self.errors.push(span, "fragments stay in the array that declares them: pass `&acc[i]` / `&mut acc[i]` to the tensor-core intrinsics, or read a register as `acc[i][j]`");
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
        if let Some(init) = &l.init {
            self.record_deps(&l.c_name, init);
        }
    }

    /// A `let` whose initializer declares storage: `shared_array::<T, N>()`,
    /// `dyn_shared::<T>()` or a fragment array `frag_a/frag_b/frag_c::<T, N>()`. The row fixes
    /// which generic arguments it takes and which element types.
    pub(super) fn decl_let(&mut self, l: &mut Let, row: &'static Intrinsic) {
        let mutable = l.mutable;
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
        let name = row.name;
        let (what, form) = match row.ret {
            Ret::DynShared => ("dynamic shared memory", format!("`{name}::<T>()`")),
            Ret::FragArray(_) => ("a fragment array", format!("`{name}::<T, N>()`")),
            _ => ("a shared array", format!("`{name}::<T, N>()`")),
        };
        let mut result = Ty::Error;
        if !args.is_empty() {
            self.errors.push(span, format!("{form} takes no arguments"));
        }
        if l.declared.is_some() {
            self.errors.push(
                l.span,
                format!("{what}'s type comes from {form}; remove the annotation"),
            );
        }
        let with_len = row.ret != Ret::DynShared;
        match generics.as_slice() {
            [Generic::Type(t, tspan), rest @ ..] if rest.len() == usize::from(with_len) => {
                let elem_ok = intrinsics::type_text(row, *t).is_some();
                if !elem_ok {
                    let msg = match row.ret {
                        Ret::FragArray(FragKind::C) => format!("`frag_c` accumulators hold `f32` (mma.sync m16n8k16 and wgmma accumulate in f32, FP8 operands included), not `{t}`"),
                        Ret::FragArray(_) => format!("`{name}` fragments hold `bf16` or `f16` (the inputs of mma.sync m16n8k16), not `{t}`"),
                        Ret::DynShared => format!("dynamic shared memory of `{t}` is not supported; use an integer or float type"),
                        _ => format!("shared arrays of `{t}` are not supported; use an integer or float type"),
                    };
                    self.errors.push(*tspan, msg);
                }
                let n = match rest.first() {
                    None => Some(String::new()),
                    Some(Generic::Len(0, s)) => {
                        self.errors
                            .push(*s, format!("{what} needs at least one element"));
                        None
                    }
                    Some(Generic::Len(n, _)) => Some(n.to_string()),
                    Some(Generic::Name(pname, s)) => match self.lookup(pname) {
                        Some(i) if self.locals[i].comptime => {
                            let c = self.locals[i].c_name.clone();
                            self.read.insert(c.clone());
                            Some(c)
                        }
                        _ => {
                            self.errors.push(*s, format!("`{pname}` is not a `#[comptime]` parameter; {what}'s length is a literal or a comptime parameter"));
                            None
                        }
                    },
                    Some(Generic::Type(_, s)) => {
                        self.errors.push(
                            *s,
                            "expected the length: an integer literal or a comptime parameter",
                        );
                        None
                    }
                };
                if let (true, Some(n)) = (elem_ok, n) {
                    *callee = Callee::Intrinsic(row, Some(*t));
                    result = match row.ret {
                        Ret::FragArray(kind) => Ty::FragArray(FragTy {
                            kind,
                            elem: *t,
                            mutable,
                        }),
                        _ => Ty::Buf(BufTy {
                            kind: BufKind::Shared,
                            elem: *t,
                            mutable: true,
                        }),
                    };
                    if with_len {
                        l.array_len = Some(n);
                    }
                    if matches!(row.group, Group::Tiles | Group::Tensor) {
                        self.info.tensor = true;
                    }
                }
            }
            _ if with_len => self.errors.push(
                span,
                format!("write {form} with an element type and a length"),
            ),
            _ => self
                .errors
                .push(span, format!("write {form} with an element type")),
        }
        *ty = result;
        l.c_name = self.declare(&l.name, result, false, false, false);
        l.ty = result;
    }

    /// Check an `if`, block, loop, `break`/`continue`, `return` or `assert!`.
    pub(super) fn control_expr(&mut self, e: &mut Expr, expect: Option<Ty>, ctx: Ctx) -> Ty {
        let span = e.span;
        match &mut e.kind {
            ExprKind::If { cond, then, els } => self.if_expr(cond, then, els, expect, ctx, span),
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
                unroll,
            } => {
                let st = self.for_range(start, end, step.as_deref_mut());
                self.scopes.push(Vec::new());
                *c_var = self.declare(var, st, false, false, false);
                *c_end = self.c_name(&format!("{c_var}_end"), false);
                self.loop_body(body);
                self.scopes.pop();
                *unroll = self.frag_index_vars.contains(c_var.as_str());
                self.loop_body_unit(body);
                Ty::Unit
            }
            ExprKind::While { cond, body } => {
                self.expect(cond, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                self.loop_body(body);
                self.loop_body_unit(body);
                Ty::Unit
            }
            ExprKind::Loop(body) => {
                self.loop_body(body);
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
                self.return_value(value.as_deref_mut(), span);
                Ty::Never
            }
            ExprKind::Assert { cond, .. } => {
                self.expect(cond, Ty::Scalar(Scalar::Bool), Ctx::Nested);
                Ty::Unit
            }
            _ => unreachable!("control_expr takes control flow only"),
        }
    }

    /// `if cond { then } else { els }`: without `else` it has no value; with one, both branches
    /// have one type, and branches with statements produce a value only in a statement context.
    fn if_expr(
        &mut self, cond: &mut Expr, then: &mut Block, els: &mut Option<Box<Expr>>,
        expect: Option<Ty>, ctx: Ctx, span: Sp,
    ) -> Ty {
        self.expect(cond, Ty::Scalar(Scalar::Bool), Ctx::Nested);
        let inner_ctx = if ctx == Ctx::Stmt {
            Ctx::Stmt
        } else {
            Ctx::Nested
        };
        let tt = self.block(then, expect, inner_ctx);
        let Some(els) = els else {
            if !matches!(self.resolve(tt), Ty::Unit | Ty::Never | Ty::Error) {
                let shown = self.show(tt);
                self.errors.push(then.span, format!("`if` without `else` has no value, but this block evaluates to `{shown}`; add `;` or an `else`"));
                return Ty::Error;
            }
            return Ty::Unit;
        };
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

    /// A `for` loop's range `start..end` (integers of one type) and its `step_by` (`usize`);
    /// returns the type of `start`, the loop variable's.
    fn for_range(&mut self, start: &mut Expr, end: &mut Expr, step: Option<&mut Expr>) -> Ty {
        let st = self.expr(start, None, Ctx::Nested);
        let et = self.expr(end, Some(st), Ctx::Nested);
        if !self.unify(st, et) {
            let (a, b) = (self.show(st), self.show(et));
            self.errors.push(
                end.span,
                format!(
                    "the range ends have different types: `{a}` and `{b}`; convert one with `as`"
                ),
            );
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
        st
    }

    /// A loop's body, one loop deeper (where `break` and `continue` may stand).
    fn loop_body(&mut self, body: &mut Block) {
        self.loop_depth += 1;
        self.block(body, Some(Ty::Unit), Ctx::Stmt);
        self.loop_depth -= 1;
    }

    /// `return value;` / `return;`, against the function's return type.
    fn return_value(&mut self, value: Option<&mut Expr>, span: Sp) {
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
                            self.show(ret)
                        ),
                    );
                }
            }
        }
    }

    pub(super) fn loop_body_unit(&mut self, body: &Block) {
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
}
