//! Intrinsic calls (free functions and methods) against their rows in the intrinsic table,
//! which fix the element type `T`. This is also where the checker records what a call needs
//! of the kernel for the launcher and the emitter (`FnInfo`): whether a collective is used
//! (then the kernel needs a collective launch), whole warps or warpgroups, the support code of
//! the tile, Hopper, LL and multicast rows. Kept apart because it follows the intrinsic
//! table, not Rust syntax; `call.rs` decides which calls are intrinsic ones.

use super::checker::{Checker, Ctx};
use crate::error::Sp;
use crate::intrinsics::{self, Arg, Group, Intrinsic, Ret, Scope, REDUCE_BITWISE};
use crate::ir::*;
use crate::types::{BufKind, BufTy, EnumTy, Scalar, Ty};
use proc_macro2::Span;

impl Checker<'_> {
    /// Check a call of an intrinsic row; returns its type and element type. The phases, in
    /// order: the argument count, the buffers and tiles that fix `T`, the values that fix it
    /// when no buffer does, the other arguments, the row's own rules, and then what the
    /// kernel uses and the call's type.
    pub(super) fn intrinsic(
        &mut self, row: &'static Intrinsic, args: &mut [Expr], span: Sp, name_span: Span,
        method: bool, expect: Option<Ty>,
    ) -> (Ty, Option<Scalar>) {
        let shown_name = if method {
            format!(".{}", row.name)
        } else {
            row.name.to_string()
        };
        if !self.intrinsic_arity(row, args, span, method, &shown_name) {
            return (Ty::Error, None);
        }
        let mut found = Found::new(args.len());
        // Buffers and element addresses fix `T` first, so value arguments and literals can
        // take it from them.
        self.binding_args(row, args, &shown_name, &mut found);
        self.value_fixes_elem(row, args, expect, &shown_name, &mut found);
        self.other_args(row, args, &shown_name, &mut found);
        if found.failed || !self.setmaxnreg_range(row, args, &shown_name) {
            return (Ty::Error, None);
        }
        if let (None, Some(t)) = (found.elem, found.value_ty) {
            match self.resolve(t) {
                Ty::Scalar(s) => found.elem = Some(s),
                // Still a literal's type: it may unify later (`min(1, 2) ^ x_u64`), so the
                // element type is fixed and checked in the final pass.
                _ if row.ret == Ret::Elem => return (t, None),
                _ => found.elem = self.concrete(t).scalar(),
            }
        }
        if !self.row_types(row, &found, &shown_name, name_span) {
            return (Ty::Error, None);
        }
        self.record_uses(row, span);
        (intrinsic_ret(row, &found), found.elem)
    }

    /// The argument count; on a mismatch, reports it (listing the row's arguments), checks the
    /// arguments on their own and returns false.
    fn intrinsic_arity(
        &mut self, row: &'static Intrinsic, args: &mut [Expr], span: Sp, method: bool,
        shown_name: &str,
    ) -> bool {
        if args.len() == row.args.len() {
            return true;
        }
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
        false
    }

    /// The arguments that fix `T`: tiles, fragments and tensor maps (`tensor.rs`), then
    /// buffers and element addresses; each is marked done.
    fn binding_args(
        &mut self, row: &'static Intrinsic, args: &mut [Expr], shown_name: &str, found: &mut Found,
    ) {
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
                    | Arg::SharedBuf
            );
            if matches!(
                kind,
                Arg::Bytes16 { .. }
                    | Arg::Frag { .. }
                    | Arg::Vec16
                    | Arg::Mbar { .. }
                    | Arg::Map
                    | Arg::MapMut
                    | Arg::TmaSrc(_)
                    | Arg::TmaDst(_)
                    | Arg::WgTile { .. }
                    | Arg::WgTileMn { .. }
                    | Arg::WgAcc { .. }
                    | Arg::AccIn { .. }
            ) {
                found.done[i] = true;
                self.tile_binds(*kind, &mut args[i], pname, shown_name, found);
            } else if binds {
                found.done[i] = true;
                self.buffer_binds(i, *kind, &mut args[i], pname, shown_name, found);
            }
        }
    }

    /// A tile, fragment, vector or tensor-map argument: its element type (if it has one that
    /// fixes `T`) must agree with what earlier arguments fixed.
    fn tile_binds(
        &mut self, kind: Arg, a: &mut Expr, pname: &str, shown_name: &str, found: &mut Found,
    ) {
        match self.tensor_arg(kind, a, pname, shown_name) {
            Ok(Some(b)) => match found.elem {
                None => found.elem = Some(b),
                Some(e) if e != b => {
                    let hint = if e.is_fp8() && b.is_fp8() {
                        "; both FP8 operands are of one type (PTX's mixed `e4m3` x `e5m2` forms have no row)"
                    } else {
                        ""
                    };
                    self.errors.push(
                        a.span,
                        format!(
                            "mismatched element types in `{shown_name}`: `{e}` and `{b}`{hint}"
                        ),
                    );
                    found.failed = true;
                }
                _ => {}
            },
            Ok(None) => {}
            Err(()) => found.failed = true,
        }
    }

    /// A buffer or element-address argument (argument `i`): the receiver's mutability, and
    /// (but for signals and any-type buffers) its element type, which must agree with what
    /// earlier arguments fixed.
    fn buffer_binds(
        &mut self, i: usize, kind: Arg, a: &mut Expr, pname: &str, shown_name: &str,
        found: &mut Found,
    ) {
        let t = self.expr(a, None, Ctx::Arg);
        if t == Ty::Error {
            found.failed = true;
            return;
        }
        let Some(b) = self.buffer_arg(kind, t, pname, shown_name, a.span) else {
            found.failed = true;
            return;
        };
        if i == 0 {
            found.recv_mut = b.mutable;
        }
        if matches!(kind, Arg::Signal { .. } | Arg::AnyBuf) {
            return;
        }
        match found.elem {
            None => found.elem = Some(b.elem),
            Some(e) if e != b.elem => {
                self.errors.push(
                    a.span,
                    format!(
                        "mismatched element types in `{shown_name}`: `{e}` and `{}`",
                        b.elem
                    ),
                );
                found.failed = true;
            }
            _ => {}
        }
    }

    /// With no buffer argument the value arguments fix `T`: they unify with each other (and
    /// with the call's expected type when `T` is returned), like a Rust generic. Checks the
    /// first value argument here and keeps its type.
    fn value_fixes_elem(
        &mut self, row: &'static Intrinsic, args: &mut [Expr], expect: Option<Ty>,
        shown_name: &str, found: &mut Found,
    ) {
        if found.elem.is_some() || row.types.is_empty() {
            return;
        }
        let Some(i) = row.args.iter().position(|(_, k)| *k == Arg::Value) else {
            return;
        };
        found.done[i] = true;
        let hint = if row.ret == Ret::Elem { expect } else { None };
        let t = self.expr(&mut args[i], hint, Ctx::Nested);
        match self.resolve(t) {
            Ty::Scalar(_) | Ty::Var(_) => found.value_ty = Some(t),
            Ty::Error => found.failed = true,
            other => {
                let shown = self.show(other);
                self.errors.push(
                    args[i].span,
                    format!("`{shown_name}` takes a number, found `{shown}`"),
                );
                found.failed = true;
            }
        }
    }

    /// The arguments not checked yet: PEs, teams, exact scalars, cluster ranks and masks,
    /// columns, compile-time constants, the other values (of type `T`) and enum operands.
    fn other_args(
        &mut self, row: &'static Intrinsic, args: &mut [Expr], shown_name: &str, found: &mut Found,
    ) {
        for (i, (pname, kind)) in row.args.iter().enumerate() {
            if found.done[i] {
                continue;
            }
            let a = &mut args[i];
            let ok = match kind {
                Arg::Pe | Arg::TeamPe(_) => {
                    let t = self.expr(a, Some(Ty::Scalar(Scalar::I32)), Ctx::Nested);
                    let ok = self.is_int(t);
                    if !ok {
                        let shown = self.show(t);
                        self.errors.push(a.span, format!("`{pname}` is a PE number: an integer expression (i32-compatible), found `{shown}`"));
                    }
                    ok
                }
                Arg::Team => {
                    let t = self.expr(a, None, Ctx::Nested);
                    let ok = matches!(t, Ty::Team | Ty::Error);
                    if !ok {
                        let shown = self.show(t);
                        self.errors.push(
                            a.span,
                            format!("`{pname}` must be a `Team` parameter, found `{shown}`"),
                        );
                    }
                    ok
                }
                Arg::Exact(s) => self.expect(a, Ty::Scalar(*s), Ctx::Nested) != Ty::Error,
                Arg::ClusterRank | Arg::ClusterMask => {
                    let s = if *kind == Arg::ClusterRank {
                        Scalar::U32
                    } else {
                        Scalar::U16
                    };
                    self.expect(a, Ty::Scalar(s), Ctx::Nested) != Ty::Error
                }
                Arg::Col(_) => self.expect(a, Ty::Scalar(Scalar::Usize), Ctx::Nested) != Ty::Error,
                Arg::Const(s) => self.const_arg(*s, a, pname, shown_name),
                Arg::Value => match found.elem.map(Ty::Scalar).or(found.value_ty) {
                    Some(t) => self.expect(a, t, Ctx::Nested) != Ty::Error,
                    None => {
                        self.expr(a, None, Ctx::Nested);
                        true
                    }
                },
                Arg::SignalOp | Arg::Cmp | Arg::ReduceOp => {
                    self.enum_arg(row, *kind, a, pname, found)
                }
                Arg::ReduceOpValue => self.reduce_op_value(a, pname, found),
                _ => true,
            };
            if !ok {
                found.failed = true;
            }
        }
    }

    /// An operator argument, written as a variant of its enum (`SignalOp::Set`, `Cmp::Eq`,
    /// `ReduceOp::Sum`); a reduction's operator is kept for the row's rules. False when
    /// reported.
    fn enum_arg(
        &mut self, row: &Intrinsic, kind: Arg, a: &mut Expr, pname: &str, found: &mut Found,
    ) -> bool {
        let want = match kind {
            Arg::SignalOp => EnumTy::SignalOp,
            Arg::Cmp => EnumTy::Cmp,
            _ => EnumTy::ReduceOp,
        };
        self.expr(a, None, Ctx::Nested);
        match &a.kind {
            ExprKind::Enum(en, v) if *en == want => {
                if want == EnumTy::ReduceOp {
                    found.reduce_op = Some(v);
                }
                true
            }
            // pgas's own collectives take the reduction as a template argument, which a
            // comptime reduction names (`pgas_op_of<code>`); NVSHMEM's name it in the function.
            ExprKind::Var { name, .. }
                if want == EnumTy::ReduceOp && row.cuda.contains("pgas_op_{op}") =>
            {
                let comptime = self.lookup(name).is_some_and(|i| self.locals[i].comptime);
                if !comptime {
                    self.errors.push(a.span, format!("`{pname}` must be a `ReduceOp::` variant or the kernel's `#[comptime]` reduction, known when the kernel is compiled; `{name}` is not"));
                }
                comptime
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
                false
            }
        }
    }

    /// A reduction as a value: any expression of type `ReduceOp` (a variant is kept for the
    /// row's rules). False when reported.
    fn reduce_op_value(&mut self, a: &mut Expr, pname: &str, found: &mut Found) -> bool {
        let want = Ty::Enum(EnumTy::ReduceOp);
        let t = self.expr(a, Some(want), Ctx::Nested);
        if let ExprKind::Enum(EnumTy::ReduceOp, v) = &a.kind {
            found.reduce_op = Some(v);
        }
        if t == want || t == Ty::Error {
            return t == want;
        }
        self.errors.push(
            a.span,
            format!("`{pname}` is a reduction: `ReduceOp::Sum` ... `ReduceOp::Xor`, or a parameter of type `ReduceOp`"),
        );
        false
    }

    /// `setmaxnreg_*`'s register count, where it is a literal; false when reported.
    fn setmaxnreg_range(
        &mut self, row: &'static Intrinsic, args: &[Expr], shown_name: &str,
    ) -> bool {
        if !row.name.starts_with("setmaxnreg_") {
            return true;
        }
        // A literal is checked here, at its token; a comptime value by the helper's
        // static_assert when the specialization compiles.
        if let ExprKind::Int(v, _) = args[0].kind {
            if !(24..=256).contains(&v) || v % 8 != 0 {
                self.errors.push(args[0].span, format!("`{shown_name}` takes a register count from 24 to 256 that is a multiple of 8 (the `setmaxnreg` instruction's range), not {v}"));
                return false;
            }
        }
        true
    }

    /// The row's rules on `T`, once it is fixed: a type of the row's set (else a hint to a
    /// sibling row that takes it), and bit operations of reductions on integers only. False
    /// when the call fails (reported, or `T` still unknown).
    fn row_types(
        &mut self, row: &'static Intrinsic, found: &Found, shown_name: &str, name_span: Span,
    ) -> bool {
        if row.types.is_empty() {
            return true;
        }
        let Some(t) = found.elem else {
            return false;
        };
        if intrinsics::type_text(row, t).is_none() {
            let list: Vec<String> = row.types.iter().map(|(s, _)| s.to_string()).collect();
            // Another shape of the same instruction that takes `t` (`wgmma_m64n64k32` for
            // FP8 tiles passed to `wgmma_m64n64k16`): the same arguments, and the same name
            // but for its digits.
            let family = |n: &str| n.replace(|c: char| c.is_ascii_digit(), "");
            let alt = intrinsics::INTRINSICS
                .iter()
                .find(|r| {
                    r.args == row.args
                        && family(r.name) == family(row.name)
                        && intrinsics::type_text(r, t).is_some()
                })
                .map(|r| format!("; for `{t}`, call `{}`", r.name))
                .unwrap_or_default();
            self.errors.push(
                name_span,
                format!(
                    "`{shown_name}` does not support `{t}`; it takes {}{alt}",
                    list.join(", ")
                ),
            );
            return false;
        }
        if let Some(op) = found.reduce_op {
            if matches!(op, "And" | "Or" | "Xor") && !REDUCE_BITWISE.contains(&t) {
                self.errors.push(
                    name_span,
                    format!(
                        "`ReduceOp::{op}` is a bit operation, for integer types only, not `{t}`"
                    ),
                );
                return false;
            }
        }
        true
    }

    /// Record in `info` what a checked call of `row` needs of the kernel: its prelude, whole
    /// warps or warpgroups, the tensor, Hopper, LL and multicast support code, and where
    /// `setmaxnreg` is first called.
    fn record_uses(&mut self, row: &'static Intrinsic, span: Sp) {
        self.info.prelude = self.info.prelude.max(row.prelude);
        match row.scope {
            Scope::FullWarp => self.info.full_warp = true,
            Scope::Warpgroup => self.info.warpgroup = true,
            _ => {}
        }
        if matches!(
            row.group,
            Group::Tiles | Group::Tensor | Group::Hopper | Group::Cluster
        ) {
            self.info.tensor = true;
        }
        if matches!(row.group, Group::Hopper | Group::Cluster) {
            self.info.sm90 = true;
        }
        if row.name.starts_with("setmaxnreg_") && self.info.setmaxnreg.is_none() {
            self.info.setmaxnreg = Some(span);
        }
        if row.group == Group::PeerCollective {
            self.info.ll = true;
        }
        if row.group == Group::Multicast {
            self.info.multimem = true;
        }
    }
}

/// What the checks of one intrinsic call's arguments found so far.
struct Found {
    /// The element type `T`, once a buffer, tile or value fixed it.
    elem: Option<Scalar>,
    /// The first value argument's type, when no buffer fixed `T` (maybe still a literal's).
    value_ty: Option<Ty>,
    /// Whether the first argument (a method's receiver) is a mutable buffer: a peer view of it
    /// is mutable too.
    recv_mut: bool,
    /// The variant name of a `ReduceOp` argument.
    reduce_op: Option<&'static str>,
    /// An argument failed (and was reported): the call has no type.
    failed: bool,
    /// Which arguments are checked already.
    done: Vec<bool>,
}

impl Found {
    fn new(n_args: usize) -> Found {
        Found {
            elem: None,
            value_ty: None,
            recv_mut: false,
            reduce_op: None,
            failed: false,
            done: vec![false; n_args],
        }
    }
}

/// The type of a call of `row` whose arguments checked.
fn intrinsic_ret(row: &'static Intrinsic, found: &Found) -> Ty {
    let elem = found.elem;
    match row.ret {
        Ret::Unit => Ty::Unit,
        Ret::Elem => elem.map(Ty::Scalar).unwrap_or(Ty::Error),
        Ret::Exact(s) => Ty::Scalar(s),
        Ret::PeerView | Ret::ClusterView => match elem {
            Some(e) => Ty::Buf(BufTy {
                kind: if row.ret == Ret::PeerView {
                    BufKind::Peer
                } else {
                    BufKind::ClusterPeer
                },
                elem: e,
                mutable: found.recv_mut,
            }),
            None => Ty::Error,
        },
        Ret::Vec16 => elem.map(Ty::Vec16).unwrap_or(Ty::Error),
        // Declarations are checked as `let` initializers (`decl_let`), never here.
        Ret::SharedArray | Ret::DynShared | Ret::FragArray(_) => Ty::Error,
    }
}
