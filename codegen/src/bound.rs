//! A kernel's block bound, `#[pgas_kernel(max_threads = ...)]`: a number, or an expression of
//! its `#[comptime]` parameters (`128 * (1 + wgs)`), so that each specialization gets its own
//! `__launch_bounds__`. The bound is also the register budget a block starts with, which
//! `setmaxnreg` shares out among its warpgroups: a kernel whose warpgroup count is a comptime
//! value needs the bound to follow it.

use crate::error::{CodegenError, Errors, Sp};
use syn::spanned::Spanned;

/// The largest block CUDA allows, so the largest `max_threads`.
pub const MAX_BLOCK_THREADS: u64 = 1024;

/// A kernel's `max_threads`.
#[derive(Clone, Debug)]
pub enum MaxThreads {
    /// An integer literal, 1 to [`MAX_BLOCK_THREADS`].
    Fixed(u32),
    /// Integer literals and comptime parameters under `+ - * /` and parentheses.
    Comptime(Box<syn::Expr>),
}

impl MaxThreads {
    /// `max_threads`'s value as written: a literal in range, or an expression of the allowed
    /// form (its names are checked against the kernel by [`MaxThreads::check_names`]).
    pub fn parse(value: syn::Expr) -> syn::Result<MaxThreads> {
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(lit),
            ..
        }) = &value
        {
            return match lit.base10_parse::<u64>() {
                Ok(n @ 1..=MAX_BLOCK_THREADS) => Ok(MaxThreads::Fixed(n as u32)),
                _ => Err(syn::Error::new(
                    lit.span(),
                    format!(
                        "`max_threads` must be from 1 to {MAX_BLOCK_THREADS} (CUDA's largest block), not {}",
                        lit.base10_digits()
                    ),
                )),
            };
        }
        arithmetic(&value)?;
        Ok(MaxThreads::Comptime(Box::new(value)))
    }

    /// The value, where it is a number.
    pub fn fixed(&self) -> Option<u32> {
        match self {
            MaxThreads::Fixed(n) => Some(*n),
            MaxThreads::Comptime(_) => None,
        }
    }

    /// Every name in the expression is one of the kernel's `comptime` parameters.
    pub fn check_names(&self, comptime: &[String]) -> Result<(), Vec<CodegenError>> {
        let MaxThreads::Comptime(e) = self else {
            return Ok(());
        };
        let mut errors = Errors::default();
        for name in names(e) {
            if !comptime.contains(&name.to_string()) {
                errors.push(Sp::of(&name), format!("`max_threads` may name the kernel's `#[comptime]` parameters only, and `{name}` is not one"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.into_vec())
        }
    }

    /// The bound as C, for `__launch_bounds__`: the number, or the expression over the
    /// specialization's `PGAS_CT_<param>` values.
    pub fn c_text(&self) -> String {
        match self {
            MaxThreads::Fixed(n) => n.to_string(),
            MaxThreads::Comptime(e) => format!("({})", c_expr(e)),
        }
    }
}

/// Checks that `e` is integer literals and names under `+ - * /` and parentheses.
fn arithmetic(e: &syn::Expr) -> syn::Result<()> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(_),
            ..
        }) => Ok(()),
        syn::Expr::Path(p) if p.path.get_ident().is_some() => Ok(()),
        syn::Expr::Paren(p) => arithmetic(&p.expr),
        syn::Expr::Binary(b)
            if matches!(
                b.op,
                syn::BinOp::Add(_) | syn::BinOp::Sub(_) | syn::BinOp::Mul(_) | syn::BinOp::Div(_)
            ) =>
        {
            arithmetic(&b.left)?;
            arithmetic(&b.right)
        }
        other => Err(syn::Error::new(
            other.span(),
            "`max_threads` takes an integer literal, or an expression of the kernel's `#[comptime]` parameters and literals with `+ - * /` (`128 * (1 + wgs)`)",
        )),
    }
}

/// The names `e` reads.
fn names(e: &syn::Expr) -> Vec<syn::Ident> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().cloned().into_iter().collect(),
        syn::Expr::Paren(p) => names(&p.expr),
        syn::Expr::Binary(b) => [names(&b.left), names(&b.right)].concat(),
        _ => Vec::new(),
    }
}

/// `e` in C, a name `x` as its specialization's value `PGAS_CT_x`.
fn c_expr(e: &syn::Expr) -> String {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(l),
            ..
        }) => l.base10_digits().to_string(),
        syn::Expr::Path(p) => format!(
            "PGAS_CT_{}",
            p.path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default()
        ),
        syn::Expr::Paren(p) => format!("({})", c_expr(&p.expr)),
        syn::Expr::Binary(b) => {
            let op = match b.op {
                syn::BinOp::Add(_) => "+",
                syn::BinOp::Sub(_) => "-",
                syn::BinOp::Mul(_) => "*",
                _ => "/",
            };
            format!("{} {op} {}", c_expr(&b.left), c_expr(&b.right))
        }
        _ => String::new(),
    }
}
