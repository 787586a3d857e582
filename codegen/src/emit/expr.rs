//! Expressions: buffers as (pointer, length), indexing, values.

use super::emitter::{cast, device_fn_name, float_literal, int_literal, Emitter};
use super::intrinsic::bare;
use crate::intrinsics::Ret;
use crate::ir::*;
use crate::types::{ArrayTy, EnumTy, Scalar, Ty};

impl Emitter {
    /// A buffer-valued expression as (pointer, length).
    pub(super) fn buf(&mut self, e: &Expr) -> (String, String) {
        match &e.kind {
            ExprKind::Var { c_name, .. } => (c_name.clone(), format!("{c_name}_len")),
            ExprKind::Slice {
                base, start, end, ..
            } => {
                let (bp, bl) = self.buf(base);
                let s = match start {
                    Some(s) => self.expr(s),
                    None => "(size_t)0".into(),
                };
                let en = match end {
                    Some(x) => self.expr(x),
                    None => format!("(size_t){bl}"),
                };
                if start.is_none() && end.is_none() {
                    return (bp, bl);
                }
                let ptr = if self.checked {
                    format!("({bp} + pgas_check_range({s}, {en}, {bl}, {}))", e.line)
                } else {
                    format!("({bp} + {s})")
                };
                (ptr, format!("((size_t)({en}) - ({s}))"))
            }
            ExprKind::Method {
                args,
                callee: Callee::Intrinsic(row, _),
                ..
            } if row.name == "peer" => {
                let (bp, bl) = self.buf(&args[0]);
                let pe = self.expr(&args[1]);
                let ptr = if self.checked {
                    format!("pgas_check_peer({bp}, (long long)({pe}), {})", e.line)
                } else {
                    let c = match e.ty {
                        Ty::Buf(b) => b.elem.c_type(),
                        _ => "void",
                    };
                    format!("(({c} *)nvshmem_ptr({bp}, {}))", self.int_pe(&args[1], pe))
                };
                (ptr, bl)
            }
            ExprKind::Method {
                args,
                callee: Callee::Intrinsic(row, _),
                ..
            } if row.name == "cluster_peer" => {
                let (bp, bl) = self.buf(&args[0]);
                let rank = self.expr(&args[1]);
                let rank = if self.checked {
                    format!("pgas_check_cluster_rank({rank}, {})", e.line)
                } else {
                    rank
                };
                (format!("pgas_cluster_map({bp}, {rank})"), bl)
            }
            ExprKind::Call {
                callee: Callee::Intrinsic(row, Some(t)),
                ..
            } if row.ret == Ret::DynShared => {
                let c = t.c_type();
                (
                    format!("(({c} *)pgas_dyn_smem)"),
                    format!("pgas_dyn_smem_len(sizeof({c}))"),
                )
            }
            _ => (self.expr(e), "0ull".into()),
        }
    }

    pub(super) fn int_pe(&self, e: &Expr, text: String) -> String {
        if e.ty == Ty::Scalar(Scalar::I32) {
            text
        } else {
            format!("(int)({text})")
        }
    }

    pub(super) fn index(&mut self, base: &Expr, index: &Expr, line: usize) -> String {
        if let (Ty::Array(a), ExprKind::Var { name, c_name }) = (base.ty, &base.kind) {
            // An element of a local array.
            let i = self.expr(index);
            return if self.checked {
                let len = array_len(a, c_name);
                format!(
                    "{c_name}[pgas_check_local_index({}, {len}, \"{name}\", {line})]",
                    bare(&i)
                )
            } else {
                format!("{c_name}[{}]", bare(&i))
            };
        }
        if let Ty::Frag(f) = base.ty {
            // A register of one fragment: `acc[i][j]`.
            let frag = self.expr(base);
            let j = self.expr(index);
            let regs = f.kind.regs().0;
            return if self.checked {
                format!("{frag}.x[pgas_check_index({j}, {regs}, {line})]")
            } else {
                format!("{frag}.x[{j}]")
            };
        }
        let (bp, bl) = self.buf(base);
        let i = self.expr(index);
        if self.checked {
            format!("{bp}[pgas_check_index({i}, {bl}, {line})]")
        } else {
            format!("{bp}[{i}]")
        }
    }

    pub(super) fn expr(&mut self, e: &Expr) -> String {
        let scalar = e.ty.scalar();
        match &e.kind {
            ExprKind::Int(v, _) => int_literal(*v, scalar.unwrap_or(Scalar::I32)),
            ExprKind::Float(t, _) => float_literal(t, scalar.unwrap_or(Scalar::F64)),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Var { c_name, .. } => c_name.clone(),
            // A reduction as a value (`combine`'s operand, a device function's argument) is its
            // code; in an NVSHMEM call its name, which `intrinsic.rs` puts in the function name.
            ExprKind::Enum(EnumTy::ReduceOp, v) => EnumTy::ReduceOp.code(v).to_string(),
            ExprKind::Enum(en, v) => en
                .variants()
                .iter()
                .find(|(n, _)| n == v)
                .map(|(_, c)| c.to_string())
                .unwrap_or_default(),
            ExprKind::Unary(op, inner) => {
                let x = self.expr(inner);
                match (op, scalar) {
                    (UnOp::Not, Some(Scalar::Bool)) => format!("(!{x})"),
                    (UnOp::Not, Some(s)) if s.is_narrow_int() => format!("(({})~{x})", s.c_type()),
                    (UnOp::Not, _) => format!("(~{x})"),
                    (UnOp::Neg, Some(s)) if s.is_narrow_int() => format!("(({})-{x})", s.c_type()),
                    (UnOp::Neg, _) => format!("(-{x})"),
                }
            }
            ExprKind::Binary(op, l, r) => {
                let (a, b) = (self.expr(l), self.expr(r));
                let operand = l.ty.scalar();
                match (op, operand) {
                    (BinOp::Rem, Some(s)) if s.is_float() => {
                        let f = if s == Scalar::F32 { "fmodf" } else { "fmod" };
                        format!("{f}({a}, {b})")
                    }
                    (op, Some(s)) if s.is_narrow_int() && !op.is_comparison() => {
                        format!("(({})({a} {} {b}))", s.c_type(), op.text())
                    }
                    _ => format!("({a} {} {b})", op.text()),
                }
            }
            ExprKind::Cast(inner, to) => {
                let x = self.expr(inner);
                match inner.ty.scalar() {
                    Some(from) => cast(&x, from, *to),
                    None => x,
                }
            }
            ExprKind::Index(base, index) => self.index(base, index, e.line),
            ExprKind::ElemRef { base, index, .. } => {
                format!("&{}", self.index(base, index, e.line))
            }
            ExprKind::Slice { .. } => self.buf(e).0,
            ExprKind::Call {
                name, args, callee, ..
            } => match callee {
                Callee::Device => {
                    let mut parts = Vec::new();
                    for a in args {
                        if matches!(a.ty, Ty::Buf(_) | Ty::FragArray(_)) {
                            let (p, l) = self.buf(a);
                            parts.push(p);
                            parts.push(l);
                        } else if let (Ty::Array(arr), ExprKind::Var { c_name, .. }) =
                            (a.ty, &a.kind)
                        {
                            // A borrowed local array: its address and length.
                            parts.push(c_name.clone());
                            parts.push(array_len(arr, c_name));
                        } else if let (
                            Ty::TensorMap(_) | Ty::TensorMapMut(_),
                            ExprKind::Var { c_name, .. },
                        ) = (a.ty, &a.kind)
                        {
                            // A tensor map: the parameter, and its box for the bounds.
                            parts.push(c_name.clone());
                            parts.push(format!("{c_name}_box"));
                        } else {
                            parts.push(self.expr(a));
                        }
                    }
                    format!("{}({})", device_fn_name(name), parts.join(", "))
                }
                Callee::Intrinsic(row, elem) => self.intrinsic(row, *elem, args, e.line),
                Callee::Unresolved => String::new(),
            },
            ExprKind::Method { args, callee, .. } => match callee {
                Callee::Intrinsic(row, _)
                    if row.name == "len" && matches!(args[0].ty, Ty::Array(_)) =>
                {
                    match (args[0].ty, &args[0].kind) {
                        (Ty::Array(a), ExprKind::Var { c_name, .. }) => {
                            format!("((size_t){})", array_len(a, c_name))
                        }
                        _ => String::new(),
                    }
                }
                Callee::Intrinsic(row, _) if row.name == "peer" => self.buf(e).0,
                Callee::Intrinsic(row, elem) => self.intrinsic(row, *elem, args, e.line),
                _ => String::new(),
            },
            ExprKind::If {
                cond,
                then,
                els: Some(els),
            } => {
                let c = self.expr(cond);
                let t = then
                    .tail
                    .as_deref()
                    .map(|t| self.expr(t))
                    .unwrap_or_default();
                let f = self.expr(els);
                format!("({c} ? {t} : {f})")
            }
            ExprKind::Block(b) => b.tail.as_deref().map(|t| self.expr(t)).unwrap_or_default(),
            // Statement kinds never reach here: the checker only lets simple values nest.
            _ => String::new(),
        }
    }
}

/// A local array's length as C: the number, or the constant declared for a `#[comptime]` one.
fn array_len(a: ArrayTy, c_name: &str) -> String {
    match a.len {
        Some(n) => n.to_string(),
        None => format!("{c_name}_len"),
    }
}
