//! The expression walk: literals, variables, unary and binary operators, casts, assignment
//! and its target. `expr_kind` hands buffer accesses to `buffer.rs`, calls to `call.rs` and
//! control flow to `stmt.rs`, so this file holds only the rules for scalar values.

use super::checker::{var_name, Checker, Ctx, Slot};
use crate::error::Sp;
use crate::intrinsics;
use crate::ir::*;
use crate::types::{Scalar, Ty};

impl Checker<'_> {
    /// Check `e` where a `want` is required, reporting a mismatch at `e`.
    pub(super) fn expect(&mut self, e: &mut Expr, want: Ty, ctx: Ctx) -> Ty {
        let t = self.expr(e, Some(want), ctx);
        if !self.unify(t, want) {
            let (found, wanted) = (self.show(t), self.show(want));
            let want_fp8 = matches!(self.resolve(want), Ty::Scalar(s) if s.is_fp8());
            let hint = if want_fp8 && matches!(e.kind, ExprKind::Int(..) | ExprKind::Float(..)) {
                format!("; `{wanted}` has no literals: convert one, `0.5f32 as {wanted}`")
            } else if let ExprKind::Int(v, None) = &e.kind {
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

    pub(super) fn expr(&mut self, e: &mut Expr, expect: Option<Ty>, ctx: Ctx) -> Ty {
        let mut ty = self.expr_kind(e, expect, ctx);
        // A buffer view is a pointer plus a length; C has no conditional pair of them.
        let else_reported =
            matches!(&e.kind, ExprKind::If { els: Some(x), .. } if x.ty == Ty::Error);
        if matches!(ty, Ty::Buf(_) | Ty::Array(_))
            && !else_reported
            && matches!(e.kind, ExprKind::If { .. } | ExprKind::Block(_))
        {
            let msg = if matches!(ty, Ty::Array(_)) {
                "an `if` or block cannot produce a local array; index it inside the branches instead"
            } else {
                "an `if` or block cannot produce a buffer view; index or slice inside the branches instead"
            };
            self.errors.push(e.span, msg);
            ty = Ty::Error;
        }
        e.ty = ty;
        ty
    }

    pub(super) fn expr_kind(&mut self, e: &mut Expr, expect: Option<Ty>, ctx: Ctx) -> Ty {
        let span = e.span;
        let expect = expect.map(|t| self.resolve(t));
        match &mut e.kind {
            ExprKind::Int(_, suffix) => self.int_literal(*suffix, expect),
            ExprKind::Float(_, suffix) => self.float_literal(*suffix, expect),
            ExprKind::Bool(_) => Ty::Scalar(Scalar::Bool),
            ExprKind::Var { name, c_name } => self.var_expr(name, c_name, span),
            ExprKind::Enum(en, _) => Ty::Enum(*en),
            ExprKind::Unary(op, inner) => {
                let op = *op;
                self.unary(op, inner, expect, span)
            }
            ExprKind::Binary(op, l, r) => {
                let op = *op;
                self.binary(op, l, r, expect, span)
            }
            ExprKind::Cast(inner, target) => {
                let target = *target;
                self.cast(inner, target, span)
            }
            ExprKind::Assign(l, r) => self.assign(l, r),
            ExprKind::AssignOp(op, l, r) => {
                let op = *op;
                self.assign_op(op, l, r, span)
            }
            ExprKind::Index(..) | ExprKind::Slice { .. } | ExprKind::ElemRef { .. } => {
                self.buffer_expr(e, ctx)
            }
            ExprKind::Array(_) | ExprKind::ArrayRepeat { .. } => self.stray_array(e),
            ExprKind::Call { .. } | ExprKind::Method { .. } => self.call_expr(e, expect),
            ExprKind::If { .. }
            | ExprKind::Block(_)
            | ExprKind::For { .. }
            | ExprKind::While { .. }
            | ExprKind::Loop(_)
            | ExprKind::Break
            | ExprKind::Continue
            | ExprKind::Return(_)
            | ExprKind::Assert { .. } => self.control_expr(e, expect, ctx),
        }
    }

    /// An integer literal: its suffix's type, else the expected integer type, else a fresh
    /// integer variable (`i32` unless something fixes it).
    fn int_literal(&mut self, suffix: Option<Scalar>, expect: Option<Ty>) -> Ty {
        match suffix {
            Some(s) => Ty::Scalar(s),
            None => match expect {
                Some(Ty::Scalar(s)) if s.is_int() => Ty::Scalar(s),
                Some(Ty::Var(x)) if matches!(self.slots[x as usize], Slot::Int) => Ty::Var(x),
                _ => self.fresh(Slot::Int),
            },
        }
    }

    /// A float literal: its suffix's type, else the expected float type (FP8 has no
    /// literals), else a fresh float variable.
    fn float_literal(&mut self, suffix: Option<Scalar>, expect: Option<Ty>) -> Ty {
        match suffix {
            Some(s) => Ty::Scalar(s),
            None => match expect {
                Some(Ty::Scalar(s)) if s.is_float() && !s.is_fp8() => Ty::Scalar(s),
                Some(Ty::Var(x)) if matches!(self.slots[x as usize], Slot::Float) => Ty::Var(x),
                _ => self.fresh(Slot::Float),
            },
        }
    }

    /// A variable read: a parameter or local in scope, whose C name it takes.
    fn var_expr(&mut self, name: &str, c_name: &mut String, span: Sp) -> Ty {
        match self.lookup(name) {
            Some(i) => {
                let l = &self.locals[i];
                *c_name = l.c_name.clone();
                self.read.insert(l.c_name.clone());
                l.ty
            }
            None => {
                let msg = if intrinsics::free(name).is_some() || self.sigs.contains_key(name) {
                    format!("`{name}` is a function; call it: `{name}(...)`")
                } else {
                    format!("cannot find `{name}` in this kernel; kernels see only their parameters and locals (no host globals or constants)")
                };
                self.errors.push(span, msg);
                Ty::Error
            }
        }
    }

    /// `-x` (signed integers and floats, not FP8) and `!x` (`bool` and integers).
    fn unary(&mut self, op: UnOp, inner: &mut Expr, expect: Option<Ty>, span: Sp) -> Ty {
        let t = self.expr(inner, expect, Ctx::Nested);
        let r = self.resolve(t);
        match op {
            UnOp::Neg => {
                if self.fp8_arith(r, "-", span) {
                    return Ty::Error;
                }
                let bad = match r {
                    Ty::Scalar(s) => s == Scalar::Bool || (s.is_int() && !s.is_signed_int()),
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
                    self.errors.push(
                        span,
                        format!(
                            "cannot apply `!` to type `{shown}`; it works on `bool` and integers"
                        ),
                    );
                    return Ty::Error;
                }
            }
        }
        t
    }

    /// `x as T`: between scalar types, `bool` only from `bool` and only to integers.
    fn cast(&mut self, inner: &mut Expr, target: Scalar, span: Sp) -> Ty {
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
                self.errors.push(
                    span,
                    format!(
                        "cannot cast `{shown}` as `{target}`; `as` converts between scalar types"
                    ),
                );
                Ty::Error
            }
        }
    }

    /// `place = value`: the value takes the place's type.
    fn assign(&mut self, l: &mut Expr, r: &mut Expr) -> Ty {
        let lt = self.place(l);
        if lt != Ty::Error {
            self.expect(r, lt, Ctx::Stmt);
        } else {
            self.expr(r, None, Ctx::Stmt);
        }
        Ty::Unit
    }

    /// `place op= value`: shifts take integers, the other operators the arithmetic rules.
    fn assign_op(&mut self, op: BinOp, l: &mut Expr, r: &mut Expr, span: Sp) -> Ty {
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

    /// Check an assignment target; returns its type (or `Error`).
    pub(super) fn place(&mut self, e: &mut Expr) -> Ty {
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
                    } else if matches!(l.ty, Ty::Array(_)) {
                        self.errors.push(span, format!("a local array cannot be assigned as a whole; assign its elements: `{name}[i] = v`"));
                        Ty::Error
                    } else if matches!(l.ty, Ty::FragArray(_)) {
                        self.errors.push(span, "fragment arrays cannot be reassigned; intrinsics write whole fragments, and `acc[i][j] = v` one register");
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
                if !matches!(bt, Ty::Array(_)) {
                    self.expect_index(index);
                }
                match bt {
                    Ty::Buf(b) if b.mutable => Ty::Scalar(b.elem),
                    Ty::Buf(b) => {
                        self.read_only(base.span, &b, "write through it");
                        Ty::Error
                    }
                    Ty::Array(a) if a.mutable => {
                        let name = var_name(base);
                        self.array_index(a, &name, index)
                    }
                    Ty::Array(a) => {
                        let name = var_name(base);
                        self.array_index(a, &name, index);
                        self.errors.push(base.span, format!("cannot assign to an element of `{name}`, which is not mutable; declare it `let mut {name}`"));
                        Ty::Error
                    }
                    Ty::Frag(f) if f.mutable => {
                        self.note_frag_index(index);
                        Ty::Scalar(f.kind.regs().1)
                    }
                    Ty::Frag(_) => {
                        self.errors.push(base.span, "cannot assign to a fragment register: declare the fragment array with `let mut`");
                        Ty::Error
                    }
                    Ty::FragArray(_) => {
                        self.errors.push(base.span, "a whole fragment cannot be assigned; write one register `acc[i][j] = v`, or pass `&mut acc[i]` to an intrinsic");
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

    pub(super) fn binary(
        &mut self, op: BinOp, l: &mut Expr, r: &mut Expr, expect: Option<Ty>, span: Sp,
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
                let t = self.resolve(lt);
                if self.fp8_arith(t, op.text(), span) {
                    return Ty::Error;
                }
                match t {
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
    pub(super) fn arith_operands(&mut self, op: BinOp, lt: Ty, rt: Ty, span: Sp) -> Ty {
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
        if self.fp8_arith(t, op.text(), span) {
            return Ty::Error;
        }
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

    /// Report an operator applied to FP8 (`e4m3`/`e5m2`), which has no arithmetic or
    /// comparisons on the GPU: the operands convert to `f32` first. True if reported.
    fn fp8_arith(&mut self, t: Ty, op: &str, span: Sp) -> bool {
        let Ty::Scalar(s) = t else {
            return false;
        };
        if !s.is_fp8() {
            return false;
        }
        self.errors.push(span, format!("cannot apply `{op}` to `{s}`: FP8 is a storage type without arithmetic; convert to `f32` first (`x as f32`) and back with `as {s}`"));
        true
    }
}
