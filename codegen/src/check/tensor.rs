//! What a GEMM tile needs: fragment arguments of the tensor-core intrinsics (kind, element type,
//! mutability), 16-byte element addresses in the right memory (`ldmatrix` reads shared memory
//! only, `cp.async` copies global to shared), `Vec16` values, compile-time constants
//! (`cp_async_wait(n)`), and which loop variables index fragments (those loops are unrolled so
//! the fragments stay in registers). Kept apart because these rules come from the hardware's
//! instructions, not from Rust's types.

use super::checker::{Checker, Ctx};
use crate::intrinsics::{Arg, Space};
use crate::ir::*;
use crate::types::{BufKind, FragKind, Scalar, Ty};
use std::collections::HashSet;

impl Checker<'_> {
    /// Check an argument of kind [`Arg::Bytes16`], [`Arg::Frag`] or [`Arg::Vec16`]. `Ok` holds
    /// the element type it fixes (`None`: an accumulator, whose `f32` does not fix `T`); `Err`
    /// means it was reported.
    pub(super) fn tensor_arg(
        &mut self, kind: Arg, a: &mut Expr, pname: &str, fname: &str,
    ) -> Result<Option<Scalar>, ()> {
        let kind = checked_as(kind);
        let t = self.expr(a, None, Ctx::Arg);
        if t == Ty::Error {
            return Err(());
        }
        let span = a.span;
        let shown = self.show(t);
        match kind {
            Arg::Bytes16 { space, mutable } => self.bytes16_arg(space, mutable, a, t, pname, fname),
            Arg::Frag {
                kind: want,
                mutable,
            } => self.frag_arg(want, mutable, a, t, pname, fname),
            Arg::Vec16 => match t {
                Ty::Vec16(s) => Ok(Some(s)),
                _ => {
                    self.errors.push(span, format!("`{pname}` of `{fname}` is a `Vec16<T>` from `load_vec16`, found `{shown}`"));
                    Err(())
                }
            },
            Arg::Mbar { mutable } => {
                let amp = if mutable { "&mut " } else { "&" };
                match t {
                    Ty::ElemRef(b)
                        if b.kind == BufKind::Shared
                            && b.elem == Scalar::U64
                            && (b.mutable || !mutable) =>
                    {
                        Ok(None)
                    }
                    _ => {
                        self.errors.push(span, format!("`{pname}` of `{fname}` is an mbarrier: `{amp}{pname}[i]` of a shared `u64` array (`shared_array::<u64, N>()`), found `{shown}`"));
                        Err(())
                    }
                }
            }
            Arg::Map => match t {
                Ty::TensorMap(s) | Ty::TensorMapMut(s) => Ok(Some(s)),
                _ => {
                    self.errors.push(span, format!("`{pname}` of `{fname}` is a `&TensorMap<T>` kernel parameter, found `{shown}`"));
                    Err(())
                }
            },
            Arg::MapMut => match t {
                Ty::TensorMapMut(s) => Ok(Some(s)),
                Ty::TensorMap(_) => {
                    self.errors.push(span, format!("`{fname}` writes the tensor behind `{pname}`: take the parameter as `&mut TensorMap<T>` (and build the map with `TensorMap::tiled_2d_mut`)"));
                    Err(())
                }
                _ => {
                    self.errors.push(span, format!("`{pname}` of `{fname}` is a `&mut TensorMap<T>` kernel parameter, found `{shown}`"));
                    Err(())
                }
            },
            _ => unreachable!("tensor_arg takes fragment, tile and vector arguments only"),
        }
    }

    /// A 16-byte element address `&x[i]` (`a`, checked to type `t`) in the memory `space`
    /// asks for, of a mutable buffer if the instruction writes there; fixes `T`.
    fn bytes16_arg(
        &mut self, space: Space, mutable: bool, a: &Expr, t: Ty, pname: &str, fname: &str,
    ) -> Result<Option<Scalar>, ()> {
        let span = a.span;
        let Ty::ElemRef(b) = t else {
            let shown = self.show(t);
            let amp = if mutable { "&mut " } else { "&" };
            self.errors.push(span, format!("`{fname}` takes an element address `{amp}{pname}[i]` (16 bytes from there on) as `{pname}`, found `{shown}`"));
            return Err(());
        };
        let msg = match (space, b.kind) {
            (Space::Shared, BufKind::Shared) | (Space::Any, _) => None,
            (Space::Shared, _) => Some(format!("`{pname}` of `{fname}` must be in shared memory (a `shared_array` or `dyn_shared` buffer), found global memory (`{b}`): stage the tile with `cp_async_16` first")),
            (Space::Global, BufKind::Shared) => Some(format!("`{pname}` of `{fname}` must be in global memory (a `SymTensor`, `CudaSlice` or peer view), found shared memory")),
            (Space::Global, _) => None,
        };
        if let Some(msg) = msg {
            self.errors.push(span, msg);
            return Err(());
        }
        if mutable && !b.mutable {
            self.errors.push(span, format!("`{pname}` of `{fname}` is written: pass `&mut {pname}[i]` of a mutable buffer (found a read-only `{b}`)"));
            return Err(());
        }
        Ok(Some(b.elem))
    }

    /// One fragment `&acc[i]` (`a`, checked to type `t`) of a `want` array, `&mut` if the
    /// instruction writes it; an operand fragment fixes `T`, an accumulator does not.
    fn frag_arg(
        &mut self, want: FragKind, mutable: bool, a: &Expr, t: Ty, pname: &str, fname: &str,
    ) -> Result<Option<Scalar>, ()> {
        let span = a.span;
        let amp = if mutable { "&mut " } else { "&" };
        let f = match t {
            Ty::Frag(f) if matches!(a.kind, ExprKind::ElemRef { .. }) => f,
            Ty::Frag(_) => {
                self.errors.push(
                    span,
                    format!("pass the fragment by reference: `{amp}{pname}[i]`"),
                );
                return Err(());
            }
            _ => {
                let shown = self.show(t);
                self.errors.push(span, format!("`{pname}` of `{fname}` is one fragment of a `{}` array, `{amp}{pname}[i]`; found `{shown}`", want.decl_name()));
                return Err(());
            }
        };
        if f.kind != want {
            self.errors.push(span, format!("`{pname}` of `{fname}` must be a fragment of a `{}` array, found one of a `{}` array", want.decl_name(), f.kind.decl_name()));
            return Err(());
        }
        if mutable && !f.mutable {
            self.errors.push(span, format!("`{fname}` writes `{pname}`: pass `&mut {pname}[i]` of a `let mut` fragment array"));
            return Err(());
        }
        Ok((want != FragKind::C).then_some(f.elem))
    }

    /// Check an [`Arg::Const`]: an integer of type `s` known at compile time.
    pub(super) fn const_arg(&mut self, s: Scalar, a: &mut Expr, pname: &str, fname: &str) -> bool {
        if self.expect(a, Ty::Scalar(s), Ctx::Nested) == Ty::Error {
            return false;
        }
        if !self.is_const(a) {
            self.errors.push(a.span, format!("`{pname}` of `{fname}` is an immediate of the instruction, so it must be known when the kernel is compiled: an integer literal, a `#[comptime]` parameter, or arithmetic on them"));
            return false;
        }
        true
    }

    /// Whether `e` is known when the kernel is compiled (after the checker named its variables).
    pub(super) fn is_const(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Int(..) => true,
            ExprKind::Var { name, .. } => {
                self.lookup(name).is_some_and(|i| self.locals[i].comptime)
            }
            ExprKind::Unary(_, x) | ExprKind::Cast(x, _) => self.is_const(x),
            ExprKind::Binary(_, l, r) => self.is_const(l) && self.is_const(r),
            _ => false,
        }
    }

    /// `index` indexes a fragment array (or a fragment's registers, or a local array): the loops
    /// over the variables it depends on must unroll, or the registers would become local memory.
    pub(super) fn note_frag_index(&mut self, index: &Expr) {
        let mut vars = HashSet::new();
        self.vars_in(index, &mut vars);
        self.frag_index_vars.extend(vars);
    }

    /// Remember which variables `init`, the initializer of local `c_name`, reads.
    pub(super) fn record_deps(&mut self, c_name: &str, init: &Expr) {
        let mut vars = HashSet::new();
        self.vars_in(init, &mut vars);
        if !vars.is_empty() {
            self.var_deps
                .insert(c_name.to_owned(), vars.into_iter().collect());
        }
    }

    /// The C names of the variables `e` reads, and of those their initializers read.
    fn vars_in(&self, e: &Expr, out: &mut HashSet<String>) {
        match &e.kind {
            ExprKind::Var { c_name, .. } => {
                out.insert(c_name.clone());
                // Stored closed over their own initializers' variables (`record_deps` reads
                // them through this function), so one level suffices.
                out.extend(self.var_deps.get(c_name).into_iter().flatten().cloned());
            }
            ExprKind::Unary(_, x) | ExprKind::Cast(x, _) => self.vars_in(x, out),
            ExprKind::Binary(_, l, r) | ExprKind::Index(l, r) => {
                self.vars_in(l, out);
                self.vars_in(r, out);
            }
            ExprKind::Call { args, .. } | ExprKind::Method { args, .. } => {
                for a in args {
                    self.vars_in(a, out);
                }
            }
            ExprKind::If {
                cond,
                then,
                els: Some(els),
            } => {
                self.vars_in(cond, out);
                if let Some(t) = &then.tail {
                    self.vars_in(t, out);
                }
                self.vars_in(els, out);
            }
            ExprKind::Block(b) => {
                if let Some(t) = &b.tail {
                    self.vars_in(t, out);
                }
            }
            _ => {}
        }
    }
}

/// The kind whose rules check an argument of kind `kind`: TMA destinations and wgmma operands
/// are shared-memory element addresses, wgmma accumulators `frag_c` fragments (the same
/// rules, with their own emission).
fn checked_as(kind: Arg) -> Arg {
    match kind {
        Arg::TmaDst(_) => Arg::Bytes16 {
            space: Space::Shared,
            mutable: true,
        },
        Arg::TmaSrc(_) => Arg::Bytes16 {
            space: Space::Shared,
            mutable: false,
        },
        Arg::WgTile { .. } | Arg::WgTileMn { .. } => Arg::Bytes16 {
            space: Space::Shared,
            mutable: false,
        },
        Arg::WgAcc { .. } => Arg::Frag {
            kind: FragKind::C,
            mutable: true,
        },
        Arg::AccIn { .. } => Arg::Frag {
            kind: FragKind::C,
            mutable: false,
        },
        k => k,
    }
}
