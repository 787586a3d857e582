//! Local arrays: `let mut acc = [0f32; 8];` and `let a = [x, y, z];`, their element type and
//! length, indexing them (`acc[j]`, `acc[j] += v`) and `acc.len()`. Kept apart because these
//! rules are about registers: the length must be known when the kernel is compiled and small
//! enough to stay in registers, and every loop whose counter indexes an array unrolls.

use super::checker::{Checker, Ctx};
use crate::error::Sp;
use crate::ir::*;
use crate::types::{ArrElem, ArrayTy, Scalar, Ty, MAX_LOCAL_ARRAY};

impl Checker<'_> {
    /// A `let` whose initializer is an array expression `[a, b, c]` or `[v; n]`.
    pub(super) fn array_let(&mut self, l: &mut Let) {
        let mutable = l.mutable;
        let Some(init) = &mut l.init else {
            return;
        };
        if let Some((s, span)) = l.declared {
            self.errors.push(
                span,
                format!("mismatched types: expected `{s}`, found an array; a local array takes its type from its initializer"),
            );
        }
        let span = init.span;
        let (elem_ty, len) = match &mut init.kind {
            ExprKind::Array(elems) => {
                let n = elems.len() as u64;
                let mut first: Option<Ty> = None;
                for e in elems.iter_mut() {
                    match first {
                        None => first = Some(self.expr(e, None, Ctx::Nested)),
                        Some(f) => {
                            let t = self.expr(e, Some(f), Ctx::Nested);
                            if !self.unify(f, t) {
                                let (a, b) = (self.show(f), self.show(t));
                                let hint = if self.is_numeric(f) && self.is_numeric(t) {
                                    format!("; convert it with `as {a}`")
                                } else {
                                    String::new()
                                };
                                self.errors.push(e.span, format!("mixed element types in an array: the first element is `{a}`, this one is `{b}`{hint}"));
                            }
                        }
                    }
                }
                if n == 0 {
                    self.errors.push(
                        span,
                        "a local array needs at least one element: `[x, y]` or `[0f32; 8]`",
                    );
                } else {
                    self.check_array_len(n, span);
                }
                (first.unwrap_or(Ty::Error), u32::try_from(n).ok())
            }
            ExprKind::ArrayRepeat { value, len } => {
                let t = self.expr(value, None, Ctx::Nested);
                let lt = self.expect(len, Ty::Scalar(Scalar::Usize), Ctx::Nested);
                let n = if lt == Ty::Error {
                    None
                } else if !self.is_const(len) {
                    self.errors.push(len.span, "the length of a local array must be known when the kernel is compiled: an integer literal, a `#[comptime]` parameter, or arithmetic on them");
                    None
                } else {
                    match self.const_value(len) {
                        Some(0) => {
                            self.errors
                                .push(len.span, "a local array needs at least one element");
                            None
                        }
                        Some(v) if v < 0 => {
                            self.errors.push(len.span, format!("the length of this local array is {v}; it needs at least one element"));
                            None
                        }
                        Some(v) => {
                            self.check_array_len(v as u64, len.span);
                            u32::try_from(v).ok()
                        }
                        // A comptime length: checked when the kernel is specialized.
                        None => None,
                    }
                };
                (t, n)
            }
            _ => unreachable!("array_let takes array initializers only"),
        };
        let elem = match self.resolve(elem_ty) {
            Ty::Scalar(s) => Some(ArrElem::Scalar(s)),
            Ty::Var(v) => Some(ArrElem::Var(v)),
            Ty::Vec16(s) => Some(ArrElem::Vec16(s)),
            Ty::Error | Ty::Never => None,
            other => {
                let shown = self.show(other);
                self.errors.push(span, format!("local arrays hold scalars (bool, integers, f16, bf16, e4m3, e5m2, f32, f64) or 16-byte vectors (`Vec16<T>`), not `{shown}`"));
                None
            }
        };
        let ty = match elem {
            Some(elem) if l.declared.is_none() => Ty::Array(ArrayTy { elem, len, mutable }),
            _ => Ty::Error,
        };
        init.ty = ty;
        self.info.local_arrays |= ty != Ty::Error;
        l.c_name = self.declare(&l.name, ty, mutable, false, false);
        l.ty = ty;
    }

    /// A length over [`MAX_LOCAL_ARRAY`] is refused: such an array cannot stay in registers.
    fn check_array_len(&mut self, n: u64, span: Sp) {
        if n > MAX_LOCAL_ARRAY {
            self.errors.push(span, format!("a local array of {n} elements is too large: at most {MAX_LOCAL_ARRAY}, so that it can live in registers (a thread has at most 255 registers; a larger array spills to local memory, per-thread DRAM); use `shared_array::<T, N>()` or a buffer"));
        }
    }

    /// Check `arr[index]` for the array `name`: the index is any integer (an unsuffixed
    /// literal or loop counter becomes `usize`), inside the array when it is a constant; the
    /// loops it depends on unroll. Returns the element type.
    pub(super) fn array_index(&mut self, arr: ArrayTy, name: &str, index: &mut Expr) -> Ty {
        let t = self.expr(index, Some(Ty::Scalar(Scalar::Usize)), Ctx::Nested);
        match self.resolve(t) {
            Ty::Var(_) if self.is_int(t) => {
                self.unify(t, Ty::Scalar(Scalar::Usize));
            }
            r if self.is_int(r) => {}
            r => {
                let shown = self.show(r);
                self.errors.push(
                    index.span,
                    format!("local arrays are indexed by an integer, found `{shown}`"),
                );
            }
        }
        self.note_frag_index(index);
        if let (Some(n), Some(v)) = (arr.len, self.const_value(index)) {
            if v < 0 || v >= i128::from(n) {
                self.errors.push(
                    index.span,
                    format!(
                        "index out of bounds: the length of `{name}` is {n} but the index is {v}"
                    ),
                );
            }
        }
        match arr.elem {
            ArrElem::Scalar(s) => Ty::Scalar(s),
            ArrElem::Var(v) => self.resolve(Ty::Var(v)),
            ArrElem::Vec16(s) => Ty::Vec16(s),
        }
    }

    /// An array expression anywhere but a `let` initializer: refused, its parts still checked.
    pub(super) fn stray_array(&mut self, e: &mut Expr) -> Ty {
        let span = e.span;
        match &mut e.kind {
            ExprKind::Array(elems) => {
                for x in elems {
                    self.expr(x, None, Ctx::Nested);
                }
            }
            ExprKind::ArrayRepeat { value, len } => {
                self.expr(value, None, Ctx::Nested);
                self.expr(len, None, Ctx::Nested);
            }
            _ => {}
        }
        self.errors.push(span, "an array expression can only initialize a `let`: `let mut acc = [0f32; 8];`; arrays are not values to pass, return or assign");
        Ty::Error
    }

    /// The value of an integer expression made of literals, if it is one (`8`, `2 * 4`).
    pub(super) fn const_value(&self, e: &Expr) -> Option<i128> {
        match &e.kind {
            ExprKind::Int(v, _) => i128::try_from(*v).ok(),
            ExprKind::Unary(UnOp::Neg, x) => self.const_value(x).map(|v| -v),
            ExprKind::Cast(x, s) => {
                let v = self.const_value(x)?;
                let (lo, hi) = s.int_range()?;
                (lo..=hi).contains(&v).then_some(v)
            }
            ExprKind::Binary(op, l, r) => {
                let (a, b) = (self.const_value(l)?, self.const_value(r)?);
                match op {
                    BinOp::Add => a.checked_add(b),
                    BinOp::Sub => a.checked_sub(b),
                    BinOp::Mul => a.checked_mul(b),
                    BinOp::Div => a.checked_div(b),
                    BinOp::Rem => a.checked_rem(b),
                    BinOp::Shl => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
                    BinOp::Shr => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
                    BinOp::BitAnd => Some(a & b),
                    BinOp::BitOr => Some(a | b),
                    BinOp::BitXor => Some(a ^ b),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}
