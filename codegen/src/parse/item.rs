//! The entry points: a function's signature and parameters.

use super::lowerer::Lowerer;
use super::ty::{is_array_type, scalar_of_type, vec16_of_type, LOCAL_ARRAY_ACROSS_CALLS};
use crate::error::{Errors, Sp};
use crate::ir::{Function, Param};
use crate::types::{EnumTy, Scalar, Ty};
use syn::spanned::Spanned;

/// Lower one function. `is_kernel` selects the kernel rules (comptime parameters, no return
/// value); device functions may return a scalar.
pub fn lower_fn(item: &syn::ItemFn, is_kernel: bool, errors: &mut Errors) -> Function {
    Lowerer::new(errors).lower_fn(item, is_kernel)
}

impl Lowerer<'_> {
    /// Lower one function (see [`lower_fn`]).
    fn lower_fn(&mut self, item: &syn::ItemFn, is_kernel: bool) -> Function {
        let sig = &item.sig;
        let what = if is_kernel {
            "#[pgas_kernel]"
        } else {
            "#[pgas_device]"
        };
        if let Some(c) = &sig.constness {
            self.errors
                .push(c.span, format!("a {what} function cannot be `const`"));
        }
        if let Some(a) = &sig.asyncness {
            self.errors
                .push(a.span, format!("a {what} function cannot be `async`"));
        }
        if let Some(u) = &sig.unsafety {
            self.errors.push(u.span, format!("a {what} function cannot be `unsafe`; the `launch_unchecked` launcher is the unsafe entry point"));
        }
        if let Some(abi) = &sig.abi {
            self.errors.push(
                Sp::of(&abi),
                format!("a {what} function cannot declare an ABI"),
            );
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            self.errors.push(Sp::of(&sig.generics),
            "generic kernels are not supported; use concrete types, or `#[comptime]` parameters for values",
        );
        }
        if let Some(v) = &sig.variadic {
            self.errors
                .push(Sp::of(&v), "variadic functions are not supported");
        }
        let mut params = Vec::new();
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(r) => self.errors.push(
                    Sp::of(&r),
                    format!("a {what} function cannot take `self`; it is a free function"),
                ),
                syn::FnArg::Typed(pt) => {
                    if let Some(p) = self.lower_param(pt, is_kernel) {
                        params.push(p);
                    }
                }
            }
        }
        let ret = match &sig.output {
            syn::ReturnType::Default => None,
            syn::ReturnType::Type(_, ty) => {
                if is_kernel {
                    self.errors.push(Sp::of(&ty),
                    "a #[pgas_kernel] returns nothing; write results into a `&mut SymTensor` or `&mut CudaSlice`",
                );
                    None
                } else {
                    match scalar_of_type(ty)
                        .map(Ty::Scalar)
                        .or_else(|| vec16_of_type(ty).map(Ty::Vec16))
                    {
                        Some(t) => Some((t, ty.span())),
                        None if is_array_type(ty) => {
                            self.errors.push(Sp::of(&ty), LOCAL_ARRAY_ACROSS_CALLS);
                            None
                        }
                        None => {
                            self.errors.push(Sp::of(&ty),
                            "a #[pgas_device] function returns a scalar type (bool, i8..i64, u8..u64, usize, isize, f16, bf16, f32, f64), a 16-byte vector (`Vec16<T>`) or nothing",
                        );
                            None
                        }
                    }
                }
            }
        };
        let body = self.lower_block(&item.block);
        Function {
            name: sig.ident.to_string(),
            span: sig.ident.span(),
            line: sig.ident.span().start().line,
            is_kernel,
            params,
            ret,
            body,
        }
    }

    /// One parameter: a plain name, its type, and `#[comptime]` on a kernel's integer or `bool`.
    pub fn lower_param(&mut self, pt: &syn::PatType, is_kernel: bool) -> Option<Param> {
        let mut comptime = false;
        for attr in &pt.attrs {
            if attr.path().is_ident("comptime") && matches!(attr.meta, syn::Meta::Path(_)) {
                if is_kernel {
                    comptime = true;
                } else {
                    self.errors.push(Sp::of(&attr),
                    "`#[comptime]` parameters belong to #[pgas_kernel] functions; pass the value to the helper as an ordinary argument",
                );
                }
            } else {
                self.errors.push(
                    Sp::of(&attr),
                    "unsupported parameter attribute; only `#[comptime]` is allowed",
                );
            }
        }
        let (name, span) = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                if let Some(m) = &pi.mutability {
                    self.errors.push(
                        m.span,
                        "kernel parameters cannot be `mut`; copy the value into a `let mut` local",
                    );
                }
                (pi.ident.to_string(), pi.ident.span())
            }
            other => {
                self.errors.push(
                    Sp::of(&other),
                    "parameters must be plain names (`x: T`); patterns are not supported",
                );
                return None;
            }
        };
        let ty = self.lower_param_type(&pt.ty, is_kernel)?;
        if comptime {
            match ty {
                Ty::Scalar(s) if s.is_int() || s == Scalar::Bool => {}
                Ty::Enum(EnumTy::ReduceOp) => {}
                _ => {
                    self.errors.push(
                        Sp::of(&pt.ty),
                        "a `#[comptime]` parameter must be an integer, `bool` or `ReduceOp`",
                    );
                    return None;
                }
            }
        } else if is_kernel && ty == Ty::Enum(EnumTy::ReduceOp) {
            self.errors.push(
                Sp::of(&pt.ty),
                "a kernel takes its reduction as `#[comptime] op: ReduceOp` (each reduction its own specialization)",
            );
            return None;
        }
        Some(Param {
            name,
            span,
            ty,
            comptime,
            c_name: String::new(),
            read: false,
        })
    }
}

/// Whether every parameter of `item` is of a supported kernel type (used to keep the
/// launchers' signatures after an error elsewhere in the kernel).
pub fn params_valid(item: &syn::ItemFn) -> bool {
    let mut errors = Errors::default();
    item.sig.inputs.iter().all(|input| match input {
        syn::FnArg::Typed(pt) => Lowerer::new(&mut errors).lower_param(pt, true).is_some(),
        syn::FnArg::Receiver(_) => false,
    }) && errors.is_empty()
}
