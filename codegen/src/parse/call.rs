//! Calls: intrinsics and `#[pgas_device]` functions by plain name (the checker resolves them
//! against the intrinsic table), methods, generic arguments, and `assert!`.

use super::lowerer::{err_expr, Lowerer};
use super::ty::scalar_of_type;
use crate::error::Sp;
use crate::ir::{Callee, Expr, ExprKind, Generic};
use syn::spanned::Spanned;

impl Lowerer<'_> {
    /// `name(args)` or `name::<generics>(args)`.
    pub fn lower_call(&mut self, c: &syn::ExprCall) -> Expr {
        let span = Sp::of(c);
        let (name, name_span, generics) = match &*c.func {
            syn::Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
                let seg = &p.path.segments[0];
                let generics = match &seg.arguments {
                    syn::PathArguments::None => Vec::new(),
                    syn::PathArguments::AngleBracketed(ab) => self.lower_generics(ab),
                    syn::PathArguments::Parenthesized(pa) => {
                        self.errors.push(Sp::of(&pa), "unsupported call syntax");
                        Vec::new()
                    }
                };
                (seg.ident.to_string(), seg.ident.span(), generics)
            }
            syn::Expr::Path(p)
                if p.path.segments.first().is_some_and(|s| {
                    matches!(
                        s.ident.to_string().as_str(),
                        "Box" | "Vec" | "String" | "Rc" | "Arc"
                    )
                }) =>
            {
                self.errors.push(
                    Sp::of(p),
                    "heap allocation (`Box`, `Vec`, `String` ...) is not supported in kernels; use buffer parameters or `shared_array::<T, N>()`",
                );
                return err_expr(span);
            }
            other => {
                self.errors.push(Sp::of(&other),
                    "only calls of kernel intrinsics and #[pgas_device] functions by plain name are supported (no paths, closures or host functions)",
                );
                return err_expr(span);
            }
        };
        let kind = ExprKind::Call {
            name,
            name_span,
            generics,
            args: c.args.iter().map(|a| self.lower_expr(a)).collect(),
            callee: Callee::Unresolved,
        };
        Expr::new(kind, span)
    }

    /// `receiver.name(args)`: the receiver becomes the first argument.
    pub fn lower_method_call(&mut self, m: &syn::ExprMethodCall) -> Expr {
        if let Some(t) = &m.turbofish {
            self.errors
                .push(Sp::of(&t), "method turbofish is not supported");
        }
        let mut args = vec![self.lower_expr(&m.receiver)];
        args.extend(m.args.iter().map(|a| self.lower_expr(a)));
        let kind = ExprKind::Method {
            name: m.method.to_string(),
            name_span: m.method.span(),
            args,
            callee: Callee::Unresolved,
        };
        Expr::new(kind, Sp::of(m))
    }

    /// A call's generic arguments: scalar types, integer lengths, comptime parameter names.
    fn lower_generics(&mut self, ab: &syn::AngleBracketedGenericArguments) -> Vec<Generic> {
        let mut out = Vec::new();
        for arg in &ab.args {
            match arg {
                syn::GenericArgument::Type(t) => {
                    if let Some(s) = scalar_of_type(t) {
                        out.push(Generic::Type(s, t.span()));
                    } else if let syn::Type::Path(tp) = t {
                        match tp.path.get_ident() {
                        Some(id) => out.push(Generic::Name(id.to_string(), id.span())),
                        None => self.errors.push(Sp::of(&t), "expected a scalar type, an integer literal or a comptime parameter name"),
                    }
                    } else {
                        self.errors.push(
                        Sp::of(&t),
                        "expected a scalar type, an integer literal or a comptime parameter name",
                    );
                    }
                }
                syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                })) => match i.base10_parse::<u64>() {
                    Ok(v) => out.push(Generic::Len(v, i.span())),
                    Err(e) => self.errors.push(Sp::of(&i), e.to_string()),
                },
                syn::GenericArgument::Const(syn::Expr::Block(b)) => {
                    match b.block.stmts.as_slice() {
                        [syn::Stmt::Expr(syn::Expr::Path(p), None)]
                            if p.path.get_ident().is_some() =>
                        {
                            let id = p.path.get_ident().map(|i| (i.to_string(), i.span()));
                            if let Some((n, s)) = id {
                                out.push(Generic::Name(n, s));
                            }
                        }
                        _ => self.errors.push(
                            Sp::of(&b),
                            "expected an integer literal or a comptime parameter name",
                        ),
                    }
                }
                other => self.errors.push(
                    Sp::of(&other),
                    "expected a scalar type, an integer literal or a comptime parameter name",
                ),
            }
        }
        out
    }

    /// A macro call: `assert!(cond)` or `assert!(cond, "message")`; every other macro is refused
    /// with what to write instead.
    pub fn lower_macro(&mut self, mac: &syn::Macro) -> Expr {
        let span = Sp::of(mac);
        let name = mac
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        if name != "assert" {
            let hint = match name.as_str() {
            "println" | "print" | "eprintln" | "eprint" | "format" | "write" | "writeln" => {
                "printing and formatting are not supported in kernels"
            }
            "panic" | "unreachable" | "todo" | "unimplemented" => {
                "panicking macros are not supported in kernels; use `assert!(cond)`, which traps with the Rust file:line"
            }
            "vec" => "heap allocation (`vec!`) is not supported in kernels; use buffer parameters or `shared_array::<T, N>()`",
            _ => "macros are not supported in kernels except `assert!`",
        };
            self.errors.push(
                Sp::of(&mac.path),
                format!("`{}!`: {hint}", name_of(&mac.path)),
            );
            return err_expr(span);
        }
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        let args = match mac.parse_body_with(parser) {
            Ok(a) => a,
            Err(e) => {
                self.errors.push(e.span(), format!("in `assert!`: {e}"));
                return err_expr(span);
            }
        };
        let mut it = args.iter();
        let cond = match it.next() {
            Some(c) => c,
            None => {
                self.errors.push(span, "`assert!` needs a condition");
                return err_expr(span);
            }
        };
        let message = match it.next() {
            None => format!("assertion failed: {}", tokens_text(cond)),
            Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            })) if it.next().is_none() => s.value(),
            Some(other) => {
                self.errors.push(Sp::of(&other), "`assert!` takes a condition and at most a plain string message (no format arguments)");
                return err_expr(span);
            }
        };
        Expr::new(
            ExprKind::Assert {
                cond: self.boxed(cond),
                message,
            },
            span,
        )
    }
}

fn name_of(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn tokens_text(e: &syn::Expr) -> String {
    use quote::ToTokens;
    e.to_token_stream().to_string()
}
