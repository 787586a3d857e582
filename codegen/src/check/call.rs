//! Calls: `#[pgas_device]` functions against their signatures, and intrinsics (free functions
//! and methods) against their rows in the intrinsic table, which fix the element type `T`.
//! This is also where the checker records what it found for the launcher (`FnInfo`): the
//! device functions called and whether a collective is used (then the kernel needs a
//! collective launch). Kept apart because it follows the intrinsic table, not Rust syntax.

use super::checker::{Checker, Ctx, FnSig};
use crate::error::Sp;
use crate::intrinsics::{self, Arg, Form, Group, Intrinsic, Ret, Scope, REDUCE_BITWISE};
use crate::ir::*;
use crate::types::{BufKind, BufTy, EnumTy, Scalar, Ty};
use proc_macro2::Span;

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
        &mut self,
        name: &str,
        sig: &FnSig,
        args: &mut [Expr],
        span: Sp,
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
            if self.is_local_array(a) {
                self.expr(a, None, Ctx::Nested);
                self.errors.push(a.span, format!("local arrays cannot be passed to a function (`{name}`): they live in the registers of the function that declares them; pass elements `acc[i]` as scalars"));
                continue;
            }
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
    pub(super) fn intrinsic(
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
                    | Arg::WgAcc { .. }
                    | Arg::AccIn { .. }
            ) {
                done[i] = true;
                match self.tensor_arg(*kind, &mut args[i], pname, &shown_name) {
                    Ok(Some(b)) => match elem {
                        None => elem = Some(b),
                        Some(e) if e != b => {
                            let hint = if e.is_fp8() && b.is_fp8() {
                                "; both FP8 operands are of one type (PTX's mixed `e4m3` x `e5m2` forms have no row)"
                            } else {
                                ""
                            };
                            self.errors.push(
                                args[i].span,
                                format!("mismatched element types in `{shown_name}`: `{e}` and `{b}`{hint}"),
                            );
                            failed = true;
                        }
                        _ => {}
                    },
                    Ok(None) => {}
                    Err(()) => failed = true,
                }
                continue;
            }
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
                Arg::ClusterRank | Arg::ClusterMask => {
                    let s = if *kind == Arg::ClusterRank {
                        Scalar::U32
                    } else {
                        Scalar::U16
                    };
                    if self.expect(a, Ty::Scalar(s), Ctx::Nested) == Ty::Error {
                        failed = true;
                    }
                }
                Arg::Col(_)
                    if self.expect(a, Ty::Scalar(Scalar::Usize), Ctx::Nested) == Ty::Error =>
                {
                    failed = true;
                }
                Arg::Const(s) if !self.const_arg(*s, a, pname, &shown_name) => failed = true,
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
        if row.name.starts_with("setmaxnreg_") {
            // A literal is checked here, at its token; a comptime value by the helper's
            // static_assert when the specialization compiles.
            if let ExprKind::Int(v, _) = args[0].kind {
                if !(24..=256).contains(&v) || v % 8 != 0 {
                    self.errors.push(args[0].span, format!("`{shown_name}` takes a register count from 24 to 256 that is a multiple of 8 (the `setmaxnreg` instruction's range), not {v}"));
                    return (Ty::Error, None);
                }
            }
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
                return (Ty::Error, None);
            }
            if let Some(op) = reduce_op {
                if matches!(op, "And" | "Or" | "Xor") && !REDUCE_BITWISE.contains(&t) {
                    self.errors.push(name_span, format!("`ReduceOp::{op}` is a bit operation: NVSHMEM provides it for integer types only, not `{t}`"));
                    return (Ty::Error, None);
                }
            }
        }
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
        let ty = match row.ret {
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
                    mutable: recv_mut,
                }),
                None => Ty::Error,
            },
            Ret::Vec16 => elem.map(Ty::Vec16).unwrap_or(Ty::Error),
            // Declarations are checked as `let` initializers (`decl_let`), never here.
            Ret::SharedArray | Ret::DynShared | Ret::FragArray(_) => Ty::Error,
        };
        (ty, elem)
    }
}

impl Checker<'_> {
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
