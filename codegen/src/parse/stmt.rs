//! Blocks, `let` and control flow: `if`, blocks, loops, `break`, `continue`, `return`.

use super::lowerer::{err_expr, strip, Lowerer};
use super::ty::{is_array_type, scalar_of_type};
use crate::error::Sp;
use crate::ir::{Block, Expr, ExprKind, Let, Stmt};
use crate::types::Ty;
use syn::spanned::Spanned;

impl Lowerer<'_> {
    /// A block: its statements and its tail expression.
    pub fn lower_block(&mut self, block: &syn::Block) -> Block {
        let mut stmts = Vec::new();
        let mut tail = None;
        let n = block.stmts.len();
        for (i, stmt) in block.stmts.iter().enumerate() {
            match stmt {
            syn::Stmt::Local(local) => {
                if let Some(l) = self.lower_let(local) {
                    stmts.push(Stmt::Let(l));
                }
            }
            syn::Stmt::Item(item) => self.errors.push(Sp::of(&item),
                "items (fn, struct, use, const, static ...) inside a kernel are not supported; declare helpers as #[pgas_device] functions outside it",
            ),
            syn::Stmt::Expr(e, semi) => {
                let ex = self.lower_expr(e);
                if semi.is_none() && i + 1 == n {
                    tail = Some(Box::new(ex));
                } else {
                    stmts.push(Stmt::Expr(ex));
                }
            }
            syn::Stmt::Macro(m) => {
                let ex = self.lower_macro(&m.mac);
                stmts.push(Stmt::Expr(ex));
            }
        }
        }
        Block {
            stmts,
            tail,
            span: block.brace_token.span.join().into(),
        }
    }

    fn lower_let(&mut self, local: &syn::Local) -> Option<Let> {
        let (pat, declared) = match &local.pat {
            syn::Pat::Type(pt) => {
                let d = match scalar_of_type(&pt.ty) {
                    Some(s) => Some((s, pt.ty.span())),
                    None if is_array_type(&pt.ty) => {
                        self.errors.push(Sp::of(&pt.ty),
                        "a local array takes its type from its initializer; remove the annotation and give the element type there: `let mut acc = [0f32; 8];`",
                    );
                        None
                    }
                    None => {
                        self.errors.push(Sp::of(&pt.ty),
                        "a `let` type annotation must be a scalar type; buffers, slices and peer views take their type from the initializer",
                    );
                        None
                    }
                };
                (&*pt.pat, d)
            }
            p => (p, None),
        };
        let (name, span, mutable) = match pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (
                pi.ident.to_string(),
                pi.ident.span(),
                pi.mutability.is_some(),
            ),
            syn::Pat::Wild(w) => {
                self.errors.push(
                    Sp::of(&w),
                    "`let _ = ...` is not supported; use the expression as a statement: `expr;`",
                );
                return None;
            }
            other => {
                self.errors.push(Sp::of(&other),
                "only `let name` and `let mut name` are supported; tuple and struct patterns are not",
            );
                return None;
            }
        };
        let init = match &local.init {
            Some(init) => {
                if let Some((_, d)) = &init.diverge {
                    self.errors
                        .push(Sp::of(&d), "`let ... else` is not supported");
                }
                Some(self.lower_expr(&init.expr))
            }
            None => None,
        };
        Some(Let {
            name,
            span,
            line: local.span().start().line,
            mutable,
            declared,
            init,
            ty: Ty::Error,
            c_name: String::new(),
            read: false,
            array_len: None,
        })
    }

    /// `for v in a..b` and `for v in (a..b).step_by(s)`.
    pub fn lower_for(&mut self, f: &syn::ExprForLoop) -> Expr {
        let span = Sp::of(f);
        self.no_label(f.label.as_ref());
        let var = match &*f.pat {
            syn::Pat::Ident(pi)
                if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() =>
            {
                pi.ident.to_string()
            }
            syn::Pat::Wild(_) => "_".to_string(),
            other => {
                self.errors
                    .push(Sp::of(&other), "the loop variable must be a plain name");
                return err_expr(span);
            }
        };
        let (range, step) = match strip(&f.expr) {
            syn::Expr::Range(r) => (r, None),
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                match strip(&m.receiver) {
                    syn::Expr::Range(r) => (r, Some(self.boxed(&m.args[0]))),
                    other => {
                        self.errors.push(
                            Sp::of(&other),
                            "`step_by` is supported on a range: `(a..b).step_by(s)`",
                        );
                        return err_expr(span);
                    }
                }
            }
            other => {
                self.errors.push(Sp::of(&other),
                "`for` loops iterate over `a..b` or `(a..b).step_by(s)`; iterators over buffers are not supported",
            );
                return err_expr(span);
            }
        };
        if let syn::RangeLimits::Closed(c) = range.limits {
            self.errors.push(
                Sp::of(&c),
                "inclusive ranges `a..=b` are not supported; use `a..b + 1`",
            );
        }
        let (start, end) = match (&range.start, &range.end) {
            (Some(s), Some(e)) => (self.boxed(s), self.boxed(e)),
            _ => {
                self.errors
                    .push(Sp::of(&range), "the loop range needs both ends: `a..b`");
                return err_expr(span);
            }
        };
        let body = self.lower_block(&f.body);
        Expr::new(
            ExprKind::For {
                var,
                c_var: String::new(),
                c_end: String::new(),
                start,
                end,
                step,
                body,
                unroll: false,
            },
            span,
        )
    }

    /// `if cond { .. } else ..` (not `if let`).
    pub fn lower_if(&mut self, i: &syn::ExprIf) -> Expr {
        let span = Sp::of(i);
        if let syn::Expr::Let(l) = &*i.cond {
            self.errors.push(
                Sp::of(&l),
                "`if let` is not supported; kernels have no enums or options to match",
            );
            return err_expr(span);
        }
        let kind = ExprKind::If {
            cond: self.boxed(&i.cond),
            then: self.lower_block(&i.then_branch),
            els: i.else_branch.as_ref().map(|(_, e)| self.boxed(e)),
        };
        Expr::new(kind, span)
    }

    /// A block expression `{ .. }`.
    pub fn lower_block_expr(&mut self, b: &syn::ExprBlock) -> Expr {
        if let Some(l) = &b.label {
            self.errors
                .push(Sp::of(&l), "labeled blocks are not supported");
        }
        Expr::new(ExprKind::Block(self.lower_block(&b.block)), Sp::of(b))
    }

    /// `while cond { .. }` (not `while let`).
    pub fn lower_while(&mut self, w: &syn::ExprWhile) -> Expr {
        let span = Sp::of(w);
        self.no_label(w.label.as_ref());
        if let syn::Expr::Let(l) = &*w.cond {
            self.errors.push(Sp::of(&l), "`while let` is not supported");
            return err_expr(span);
        }
        let kind = ExprKind::While {
            cond: self.boxed(&w.cond),
            body: self.lower_block(&w.body),
        };
        Expr::new(kind, span)
    }

    /// `loop { .. }`.
    pub fn lower_loop(&mut self, l: &syn::ExprLoop) -> Expr {
        self.no_label(l.label.as_ref());
        Expr::new(ExprKind::Loop(self.lower_block(&l.body)), Sp::of(l))
    }

    /// `break`, without a label or a value.
    pub fn lower_break(&mut self, b: &syn::ExprBreak) -> Expr {
        self.no_label(b.label.as_ref());
        if let Some(v) = &b.expr {
            self.errors.push(
                Sp::of(&v),
                "`break` with a value is not supported; assign to a `let mut` before breaking",
            );
        }
        Expr::new(ExprKind::Break, Sp::of(b))
    }

    /// `continue`, without a label.
    pub fn lower_continue(&mut self, c: &syn::ExprContinue) -> Expr {
        self.no_label(c.label.as_ref());
        Expr::new(ExprKind::Continue, Sp::of(c))
    }

    /// `return` and `return value`.
    pub fn lower_return(&mut self, r: &syn::ExprReturn) -> Expr {
        let value = r.expr.as_ref().map(|e| self.boxed(e));
        Expr::new(ExprKind::Return(value), Sp::of(r))
    }

    /// Loops and `break`/`continue` take no labels: the IR's loops are C's.
    fn no_label(&mut self, label: Option<&impl quote::ToTokens>) {
        if let Some(l) = label {
            self.errors.push(Sp::of(l), "loop labels are not supported");
        }
    }
}
