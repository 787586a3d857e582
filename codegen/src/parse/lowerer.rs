//! The lowering state every part of the front end shares.

use crate::error::{Errors, Sp};
use crate::ir::{Expr, ExprKind};

/// Lowers `syn` syntax to the kernel IR. It keeps going after an error (each recorded at its
/// own span) so that one compile reports all of them.
pub struct Lowerer<'e> {
    pub errors: &'e mut Errors,
}

impl<'e> Lowerer<'e> {
    pub fn new(errors: &'e mut Errors) -> Self {
        Lowerer { errors }
    }
}

/// What an expression that did not lower becomes: its error is already recorded, and the
/// checker reads on past it.
pub fn err_expr(span: Sp) -> Expr {
    Expr::new(ExprKind::Bool(false), span)
}

/// An expression without its parentheses and invisible groups.
pub fn strip(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip(&p.expr),
        syn::Expr::Group(g) => strip(&g.expr),
        other => other,
    }
}
