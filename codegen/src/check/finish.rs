//! The final pass, after the whole body is checked: replace inference variables by their
//! (defaulted) types, check literal ranges, fix a literal-typed intrinsic's element type, and
//! mark unread locals. Kept apart because it runs once all types are known.

use super::checker::Checker;
use crate::intrinsics;
use crate::ir::*;
use crate::types::Ty;
use std::collections::HashSet;

impl Checker<'_> {
    /// Replace inference variables by their (defaulted) types, check literal ranges, and mark
    /// unread locals.
    pub(super) fn finish_block(&mut self, b: &mut Block, read: &HashSet<String>) {
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

    pub(super) fn finish_expr(&mut self, e: &mut Expr, read: &HashSet<String>) {
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
            ExprKind::Call { args, .. } | ExprKind::Method { args, .. } | ExprKind::Array(args) => {
                for a in args {
                    self.finish_expr(a, read);
                }
            }
            ExprKind::ArrayRepeat { value, len } => {
                self.finish_expr(value, read);
                self.finish_expr(len, read);
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
