//! Expressions outside the kernel subset: each is refused at its span with what to write
//! instead.

use super::lowerer::{err_expr, Lowerer};
use crate::error::Sp;
use crate::ir::Expr;

impl Lowerer<'_> {
    /// Record why `e` is not kernel code; an error placeholder in its place.
    pub fn unsupported(&mut self, e: &syn::Expr) -> Expr {
        let span = Sp::of(e);
        match e {
            syn::Expr::Closure(c) => self.errors.push(
                c.or1_token.span,
                "closures are not supported in kernels; write a #[pgas_device] function",
            ),
            syn::Expr::Range(r) => self.errors.push(
                Sp::of(&r),
                "ranges are only supported in `for` loops and in slices `&x[a..b]`",
            ),
            syn::Expr::Field(f) => self.errors.push(Sp::of(&f), "field access is not supported; kernels have no structs (use `x.len()` for a buffer's length)"),
            syn::Expr::Match(m) => self.errors.push(
                m.match_token.span,
                "`match` is not supported; use `if`/`else if`/`else`",
            ),
            syn::Expr::Unsafe(u) => self.errors.push(
                u.unsafe_token.span,
                "`unsafe` blocks are not needed or supported in kernels",
            ),
            syn::Expr::Try(t) => self.errors.push(
                t.question_token.span,
                "the `?` operator is not supported in kernels",
            ),
            syn::Expr::Async(_) | syn::Expr::Await(_) => {
                self.errors.push(span, "`async`/`.await` is not supported in kernels")
            }
            syn::Expr::Struct(_) => {
                self.errors.push(span, "struct expressions are not supported in kernels")
            }
            syn::Expr::Let(_) => self.errors.push(span, "`let` expressions are not supported here"),
            syn::Expr::Tuple(_) => self.errors.push(span, "tuples are not supported in kernels"),
            _ => self.errors.push(span, "this expression is not supported in kernels; see docs/dsl.md for the supported subset"),
        }
        err_expr(span)
    }
}
