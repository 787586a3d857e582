//! Buffers: indexing `x[i]`, slices `&x[a..b]`, element addresses `&x[i]`, and buffer-like
//! intrinsic arguments, checked against their kind (only a `SymTensor` is a remote target)
//! and mutability. Kept apart because these rules are about memory, not about values.

use super::checker::{var_name, Checker, Ctx};
use crate::error::Sp;
use crate::intrinsics::Arg;
use crate::ir::*;
use crate::types::{BufKind, BufTy, FragTy, Scalar, Ty};

impl Checker<'_> {
    /// Check an index `x[i]`, a slice `&x[a..b]` or an element address `&x[i]`.
    pub(super) fn buffer_expr(&mut self, e: &mut Expr, ctx: Ctx) -> Ty {
        let span = e.span;
        match &mut e.kind {
            ExprKind::Index(base, index) => {
                let bt = self.expr(base, None, Ctx::Nested);
                if let Ty::Array(a) = bt {
                    let name = var_name(base);
                    return self.array_index(a, &name, index);
                }
                self.expect_index(index);
                match bt {
                    Ty::Buf(b) => Ty::Scalar(b.elem),
                    Ty::FragArray(f) => {
                        self.note_frag_index(index);
                        Ty::Frag(f)
                    }
                    Ty::Frag(f) => {
                        self.note_frag_index(index);
                        Ty::Scalar(f.kind.regs().1)
                    }
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
                    Ty::Array(_) => {
                        self.errors.push(
                            span,
                            "local arrays cannot be sliced; index their elements `acc[i]`",
                        );
                        Ty::Error
                    }
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
                if let Ty::Array(_) = bt {
                    self.expr(index, None, Ctx::Nested);
                    self.errors.push(span, "an element of a local array lives in a register and has no address; pass its value `acc[i]` (or use a `shared_array` where an address is needed)");
                    return Ty::Error;
                }
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
                    Ty::FragArray(f) => {
                        self.note_frag_index(index);
                        if mutable && !f.mutable {
                            self.errors.push(base.span, "cannot borrow a fragment as mutable: declare its array with `let mut`");
                            return Ty::Error;
                        }
                        Ty::Frag(FragTy { mutable, ..f })
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
            _ => unreachable!("buffer_expr takes buffer accesses only"),
        }
    }

    pub(super) fn expect_index(&mut self, index: &mut Expr) {
        let t = self.expr(index, Some(Ty::Scalar(Scalar::Usize)), Ctx::Nested);
        if !self.unify(t, Ty::Scalar(Scalar::Usize)) {
            let shown = self.show(t);
            self.errors.push(
                index.span,
                format!("buffers are indexed by `usize`, found `{shown}`; convert with `as usize`"),
            );
        }
    }

    pub(super) fn read_only(&mut self, span: Sp, b: &BufTy, fix: &str) {
        let msg = match b.kind {
            BufKind::Sym => format!("cannot write through a read-only `&SymTensor<{0}>`; take the parameter as `&mut SymTensor<{0}>` and {fix}", b.elem),
            BufKind::Local => format!("cannot write through a read-only `&CudaSlice<{0}>`; take the parameter as `&mut CudaSlice<{0}>` and {fix}", b.elem),
            BufKind::Peer => "cannot write through a peer view of a read-only `&SymTensor`; take the parameter as `&mut SymTensor`".to_string(),
            BufKind::ClusterPeer => format!("cannot write through a read-only cluster view; {fix}"),
            BufKind::Shared => format!("cannot write through a read-only view; {fix}"),
        };
        self.errors.push(span, msg);
    }

    /// Validate a buffer-like argument against its kind; returns the buffer type.
    pub(super) fn buffer_arg(
        &mut self, kind: Arg, t: Ty, pname: &str, fname: &str, span: Sp,
    ) -> Option<BufTy> {
        let want_text = match kind {
            Arg::RemoteDst => "a `&mut SymTensor<T>` or a slice `&mut x[a..b]` of one",
            Arg::SymSrc => "a `SymTensor<T>` or a slice `&x[a..b]` of one",
            Arg::AnySrc | Arg::AnyBuf => "a buffer or a slice `&x[a..b]`",
            Arg::SharedBuf => {
                "a shared-memory buffer (`shared_array` or `dyn_shared`) or a slice of one"
            }
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
        if kind == Arg::SharedBuf && b.kind != BufKind::Shared {
            self.errors.push(
                span,
                format!("`{fname}` maps this block's shared memory onto another block of the cluster: `{pname}` must be a `shared_array` or `dyn_shared` buffer, found `{b}`"),
            );
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
}
