//! Calls: `#[pgas_device]` functions against their signatures, and which calls are of
//! intrinsics (free functions and methods), whose rows `intrinsic.rs` checks. This is also where
//! the checker records the device functions a function calls (`FnInfo::calls`), for the
//! launcher. Kept apart because it follows the intrinsic table, not Rust syntax.

use super::checker::{Checker, Ctx, FnSig};
use crate::error::Sp;
use crate::intrinsics::{self, Form, Ret};
use crate::ir::*;
use crate::types::{ArrElem, BufKind, Scalar, Ty};

impl Checker<'_> {
    /// Check a call `f(...)` or a method call `x.f(...)`.
    pub(super) fn call_expr(&mut self, e: &mut Expr, expect: Option<Ty>) -> Ty {
        let span = e.span;
        match &mut e.kind {
            ExprKind::Call {
                name,
                name_span,
                generics,
                args,
                callee,
            } => {
                let name_span = *name_span;
                if let Some(row) = intrinsics::free(name).filter(|r| r.ret.is_declaration()) {
                    let example = match row.ret {
                        Ret::DynShared => "let s = dyn_shared::<bf16>();",
                        Ret::FragArray(_) => "let mut acc = frag_c::<f32, 16>();",
                        _ => "let s = shared_array::<f32, 256>();",
                    };
                    let form = if row.ret == Ret::DynShared {
                        "<T>"
                    } else {
                        "<T, N>"
                    };
                    self.errors.push(
                        span,
                        format!(
                            "`{name}::{form}()` must be the initializer of a `let`: `{example}`"
                        ),
                    );
                    return Ty::Error;
                }
                // A device function checked on its own (`lenient`) may call a generic one,
                // `f::<T>(..)`, whose instance it cannot see yet.
                let known =
                    self.sigs.contains_key(name.as_str()) || intrinsics::free(name).is_some();
                if !generics.is_empty() && (known || !self.lenient) {
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
                // `acc.len()` of a local array: its length, a constant.
                if let (Some(row), [recv]) = (intrinsics::method(name), args.as_mut_slice()) {
                    if row.name == "len" && self.is_local_array(recv) {
                        self.expr(recv, None, Ctx::Nested);
                        *callee = Callee::Intrinsic(row, None);
                        return Ty::Scalar(Scalar::Usize);
                    }
                }
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
            _ => unreachable!("call_expr takes calls only"),
        }
    }

    pub(super) fn device_call(
        &mut self, name: &str, sig: &FnSig, args: &mut [Expr], span: Sp,
    ) -> Ty {
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
            if self.is_local_array(a) && !matches!(p, Ty::Array(_)) {
                self.expr(a, None, Ctx::Nested);
                self.errors.push(a.span, format!("`{name}` does not take a local array here: an array is passed whole only to a slice parameter (`acc: &mut [f32]`); pass elements `acc[i]` as scalars"));
                continue;
            }
            match p {
                Ty::Array(_) | Ty::FragArray(_) => self.register_arg(name, a, *p),
                Ty::Buf(want) => {
                    let t = self.expr(a, None, Ctx::Nested);
                    match t {
                        Ty::Buf(got) => {
                            // A `SymTensor` parameter can be a remote target, so it takes only
                            // a `SymTensor`; a `CudaSlice` one is memory this thread loads and
                            // stores, so it takes any buffer: a `CudaSlice`, this PE's copy of a
                            // `SymTensor`, shared memory, a peer view.
                            let kind_ok = want.kind != BufKind::Sym || got.kind == BufKind::Sym;
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

    /// An argument for a register array parameter (`&mut [f32]`, `&[FragA<bf16>]`): the
    /// caller's array itself (`&mut acc`, or a slice parameter of its own), of the element type
    /// and kind the parameter names, and `let mut` where the parameter is `&mut`.
    fn register_arg(&mut self, name: &str, a: &mut Expr, want: Ty) {
        let got = self.expr(a, None, Ctx::Nested);
        let resolved = self.resolve(got);
        // Whether `got` fits, and how the parameter is written (`&mut [f32]`, `&[FragA<bf16>]`).
        let (ok, mutable, elem) = match want {
            Ty::Array(w) => {
                let elem_ok = match (w.elem, resolved) {
                    (_, Ty::Error) => true,
                    (_, Ty::Array(g)) => match (w.elem, g.elem) {
                        (ArrElem::Scalar(ws), ArrElem::Var(v)) => {
                            self.unify(Ty::Var(v), Ty::Scalar(ws))
                        }
                        (we, ge) => we == ge,
                    },
                    _ => false,
                };
                let mut_ok = !matches!(resolved, Ty::Array(g) if w.mutable && !g.mutable);
                (elem_ok && mut_ok, w.mutable, self.show_elem(w.elem))
            }
            Ty::FragArray(w) => {
                let ok = match resolved {
                    Ty::Error => true,
                    Ty::FragArray(g) => {
                        w.kind == g.kind && w.elem == g.elem && (g.mutable || !w.mutable)
                    }
                    _ => false,
                };
                (
                    ok,
                    w.mutable,
                    format!("{}<{}>", w.kind.param_name(), w.elem),
                )
            }
            // `device_call` sends only register array parameters here.
            _ => return,
        };
        if !ok {
            let borrow = if mutable { "&mut " } else { "&" };
            let got = self.show(got);
            self.errors.push(a.span, format!("mismatched types: `{name}` borrows `{borrow}[{elem}]`, found `{got}` (a `&mut` slice takes a `let mut` array)"));
        }
    }

    /// Whether `e` names a local array (before it is checked).
    pub(super) fn is_local_array(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Var { name, .. } => self
                .lookup(name)
                .is_some_and(|i| matches!(self.locals[i].ty, Ty::Array(_))),
            _ => false,
        }
    }
}
