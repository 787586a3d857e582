//! What `#[pgas_kernel]` and `#[pgas_device]` expand to.
//!
//! A kernel becomes a module of the same name holding `SPEC` (both generated sources, the
//! parameter list, comptime names, the collective flag) and typed launchers. The user's body
//! is never re-emitted as Rust: its intrinsics have no Rust definitions, and rustc would
//! report every one of them.
//!
//! A proc macro sees only its own item, so device functions reach kernels through the macro
//! system: `#[pgas_device] fn f` expands to a `macro_rules! __pgas_device_f` holding `f`'s
//! tokens. When a kernel calls a function that is not an intrinsic and not among the helpers
//! it already holds, it expands to `__pgas_device_f! { {args} {helpers} kernel }`, which
//! re-invokes `#[::pgas::pgas_kernel(args __helpers { helpers f })]` on the kernel (`args`: the
//! user's own arguments, such as `max_threads = N`). This repeats until every callee
//! (transitively) is present; then the kernel compiles. Parameter groups come the same way
//! (`params.rs`), and a kernel compiles with each group replaced by its fields.

use crate::attr::{argless_item, parse_kernel_attr};
use crate::compile::{
    compile_instances, device_errors, CompiledKernel, ParamKind, FILE_PLACEHOLDER,
};
use crate::error::{CodegenError, Sp};
use crate::params::{first_missing_group, flatten};
use crate::types::Scalar;
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};
use std::collections::HashSet;
use syn::visit::Visit;

/// Expand `#[pgas_kernel]` (`attr` is the attribute's arguments).
pub fn expand_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item_fn: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let err =
                syn::Error::new(e.span(), "#[pgas_kernel] applies to a `fn`").to_compile_error();
            return quote! { #err #item };
        }
    };
    let attr = match parse_kernel_attr(attr) {
        Ok(a) => a,
        Err(e) => {
            let err = e.to_compile_error();
            let module = fallback_module(&item_fn);
            return quote! { #err #module };
        }
    };
    let helpers = &attr.helpers;
    if let Some(missing) =
        first_missing_group(std::iter::once(&item_fn).chain(helpers), &attr.params)
    {
        // As for a device function below: the group's macro adds it and re-runs this attribute.
        let mac = format_ident!("__pgas_params_{}", missing, span = missing.span());
        let args = attr.user_args();
        return quote! { #mac! { { #args } { #(#helpers)* } #item_fn } };
    }
    if let Some(missing) = first_missing_callee(&item_fn, helpers) {
        // Ask the device function's macro (spanned at the call, so a missing function is
        // reported there) to add itself and re-run this attribute with the user's arguments.
        let mac = format_ident!("__pgas_device_{}", missing, span = missing.span());
        let args = attr.user_args();
        return quote! { #mac! { { #args } { #(#helpers)* } #item_fn } };
    }
    // Every group is known: the kernel and its device functions take their fields instead.
    let flat = flatten(&item_fn, &attr.params).and_then(|k| {
        let hs = helpers.iter().map(|h| flatten(h, &attr.params));
        Ok((k, hs.collect::<Result<Vec<_>, _>>()?))
    });
    let (flat_fn, flat_helpers) = match flat {
        Ok(f) => f,
        Err(errors) => {
            let errs = errors.iter().map(CodegenError::to_compile_error);
            let module = fallback_module(&item_fn);
            return quote! { #(#errs)* #module };
        }
    };
    let max_threads = attr.max_threads.as_ref().map(|(m, _)| m);
    match compile_instances(&flat_fn, &flat_helpers, max_threads, FILE_PLACEHOLDER) {
        Ok(ks) => match ks.as_slice() {
            [(None, k)] => kernel_module(&flat_fn, k),
            _ => generic_module(&flat_fn, &ks),
        },
        Err(errors) => {
            // A device function with errors of its own reports them where it is declared;
            // do not repeat them here (one that takes a group is checked only in kernels).
            let reported: Vec<Sp> = helpers
                .iter()
                .filter(|h| !device_errors(h).is_empty())
                .map(Sp::of)
                .collect();
            let errs = errors
                .iter()
                .filter(|e| !reported.iter().any(|h| contains(*h, e.span)))
                .map(CodegenError::to_compile_error);
            let module = fallback_module(&flat_fn);
            quote! { #(#errs)* #module }
        }
    }
}

/// Expand `#[pgas_device]`.
pub fn expand_device(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (f, args_err) = match argless_item::<syn::ItemFn>("pgas_device", "`fn`", &attr, item) {
        Ok(parsed) => parsed,
        Err(tokens) => return tokens,
    };
    let errs: Vec<TokenStream> = device_errors(&f)
        .iter()
        .map(CodegenError::to_compile_error)
        .chain(args_err)
        .collect();
    let mac = format_ident!("__pgas_device_{}", f.sig.ident);
    let cfgs: Vec<&syn::Attribute> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr"))
        .collect();
    quote! {
        #(#errs)*
        #(#cfgs)*
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #mac {
            ({ $($args:tt)* } { $($helpers:tt)* } $($kernel:tt)*) => {
                #[::pgas::pgas_kernel($($args)* __helpers { $($helpers)* #f })]
                $($kernel)*
            };
        }
        #(#cfgs)*
        #[allow(unused_imports)]
        pub(crate) use #mac;
    }
}

/// The first called name that is neither an intrinsic nor a helper already present.
fn first_missing_callee(kernel: &syn::ItemFn, helpers: &[syn::ItemFn]) -> Option<Ident> {
    struct Calls(Vec<Ident>);
    impl<'ast> Visit<'ast> for Calls {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func {
                if p.qself.is_none() && p.path.segments.len() == 1 {
                    self.0.push(p.path.segments[0].ident.clone());
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let have: HashSet<String> = helpers.iter().map(|h| h.sig.ident.to_string()).collect();
    let mut calls = Calls(Vec::new());
    calls.visit_item_fn(kernel);
    for h in helpers {
        calls.visit_item_fn(h);
    }
    calls.0.into_iter().find(|id| {
        let n = id.to_string();
        !have.contains(&n)
            && kernel.sig.ident != n
            && crate::intrinsics::free(&n).is_none()
            && crate::intrinsics::method(&n).is_none()
    })
}

/// Whether `outer` contains `inner` (by line/column; false when spans carry no location).
fn contains(outer: Sp, inner: Span) -> bool {
    let (os, oe, is) = (outer.start.start(), outer.end.end(), inner.start());
    if os.line == 0 {
        return false;
    }
    (os.line, os.column) <= (is.line, is.column) && (is.line, is.column) <= (oe.line, oe.column)
}

/// `concat!` of the source with `file!()` where the placeholder stands.
fn source_tokens(src: &str) -> TokenStream {
    let parts = src.split(FILE_PLACEHOLDER).collect::<Vec<_>>();
    let mut items = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            items.push(quote! { ::core::file!() });
        }
        items.push(quote! { #p });
    }
    quote! { ::core::concat!(#(#items),*) }
}

struct LauncherParam<'a> {
    name: &'a Ident,
    ty: &'a syn::Type,
}

fn launcher_params(f: &syn::ItemFn) -> Option<Vec<LauncherParam<'_>>> {
    f.sig
        .inputs
        .iter()
        .map(|a| match a {
            syn::FnArg::Typed(pt) => match &*pt.pat {
                syn::Pat::Ident(pi) => Some(LauncherParam {
                    name: &pi.ident,
                    ty: &pt.ty,
                }),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect()
}

/// The module a compiled kernel expands to: `SPEC` and the four launchers.
fn kernel_module(f: &syn::ItemFn, k: &CompiledKernel) -> TokenStream {
    let vis = &f.vis;
    let name = &f.sig.ident;
    let docs = kept_attrs(f);
    let Some(lparams) = launcher_params(f) else {
        return fallback_module(f);
    };
    let spec = spec_literal(k);
    let launchers = launchers(f, k, &lparams, quote! {}, quote! { &SPEC });
    quote! {
        #(#docs)*
        #[allow(non_snake_case, dead_code, unused_imports, clippy::all)]
        #vis mod #name {
            use super::*;

            /// What the runtime needs to JIT-compile and launch this kernel.
            pub const SPEC: ::pgas::__private::KernelSpec = #spec;

            #launchers
        }
    }
}

/// The module a generic kernel (`fn k<T: Elem>`) expands to: the trait `Instance`, implemented
/// by each type of the bound with that instance's `SPEC`, `spec::<T>()`, and the four
/// launchers, generic over `T: Instance`.
fn generic_module(f: &syn::ItemFn, ks: &[(Option<Scalar>, CompiledKernel)]) -> TokenStream {
    let vis = &f.vis;
    let name = &f.sig.ident;
    let docs = kept_attrs(f);
    let (Some(lparams), Some(param)) = (
        launcher_params(f),
        f.sig.generics.type_params().next().map(|p| &p.ident),
    ) else {
        return fallback_module(f);
    };
    let impls = ks.iter().filter_map(|(ty, k)| {
        let ty = match (*ty)? {
            Scalar::F16 => quote! { ::pgas::f16 },
            Scalar::Bf16 => quote! { ::pgas::bf16 },
            t => {
                let id = Ident::new(t.rust_name(), Span::call_site());
                quote! { #id }
            }
        };
        let spec = spec_literal(k);
        Some(quote! {
            impl Instance for #ty {
                const SPEC: &'static ::pgas::__private::KernelSpec = &#spec;
            }
        })
    });
    let members: Vec<&str> = ks
        .iter()
        .filter_map(|(t, _)| Some((*t)?.rust_name()))
        .collect();
    let trait_doc = format!(
        "The types `{name}` is compiled for ({}), each with its own specification.",
        members.join(", ")
    );
    let launchers = launchers(
        f,
        &ks[0].1,
        &lparams,
        quote! { <#param: Instance> },
        quote! { <#param as Instance>::SPEC },
    );
    quote! {
        #(#docs)*
        #[allow(non_snake_case, dead_code, unused_imports, clippy::all)]
        #vis mod #name {
            use super::*;

            #[doc = #trait_doc]
            pub trait Instance: ::pgas::__private::KernelScalar + ::pgas::__private::DeviceRepr {
                /// What the runtime needs to JIT-compile and launch this instance.
                const SPEC: &'static ::pgas::__private::KernelSpec;
            }

            #(#impls)*

            /// The specification of the instance for `T`.
            pub fn spec<T: Instance>() -> &'static ::pgas::__private::KernelSpec {
                T::SPEC
            }

            #launchers
        }
    }
}

/// The `KernelSpec` literal of a compiled kernel.
fn spec_literal(k: &CompiledKernel) -> TokenStream {
    let rust_name = &k.rust_name;
    let cuda_name = &k.cuda_name;
    let line = k.line as u32;
    let plain = source_tokens(&k.plain);
    let checked = source_tokens(&k.checked);
    let collective = k.collective;
    let max_threads = match k.max_threads {
        Some(n) => quote! { ::core::option::Option::Some(#n) },
        None => quote! { ::core::option::Option::None },
    };
    let specs = k.params.iter().map(|p| {
        let pname = &p.name;
        let kind = param_kind_tokens(p.kind);
        quote! { ::pgas::__private::ParamSpec { name: #pname, kind: #kind } }
    });
    quote! {
        ::pgas::__private::KernelSpec {
            rust_name: #rust_name,
            cuda_name: #cuda_name,
            file: ::core::file!(),
            line: #line,
            plain_source: #plain,
            checked_source: #checked,
            params: &[#(#specs),*],
            collective: #collective,
            max_threads: #max_threads,
        }
    }
}

/// A parameter's `ParamKind`, as the spec spells it.
fn param_kind_tokens(kind: ParamKind) -> TokenStream {
    let name = |s: Scalar| s.rust_name();
    match kind {
        ParamKind::Sym { elem, mutable } => {
            let e = name(elem);
            quote! { ::pgas::__private::ParamKind::Sym { elem: #e, mutable: #mutable } }
        }
        ParamKind::Local { elem, mutable } => {
            let e = name(elem);
            quote! { ::pgas::__private::ParamKind::Local { elem: #e, mutable: #mutable } }
        }
        ParamKind::Scalar(s) => {
            let e = name(s);
            quote! { ::pgas::__private::ParamKind::Scalar(#e) }
        }
        ParamKind::Team => quote! { ::pgas::__private::ParamKind::Team },
        ParamKind::TensorMap(s) => {
            let e = name(s);
            quote! { ::pgas::__private::ParamKind::TensorMap(#e) }
        }
        ParamKind::TensorMapMut(s) => {
            let e = name(s);
            quote! { ::pgas::__private::ParamKind::TensorMapMut(#e) }
        }
        ParamKind::Comptime(s) => {
            let e = name(s);
            quote! { ::pgas::__private::ParamKind::Comptime(#e) }
        }
        ParamKind::ComptimeOp => quote! { ::pgas::__private::ParamKind::Comptime("ReduceOp") },
    }
}

/// How the parameter `id` reaches the launch: the statement that pushes its value into the
/// launch's arguments, or for a comptime one its value among the comptime values.
fn param_push(kind: ParamKind, id: &Ident) -> Result<TokenStream, TokenStream> {
    Ok(match kind {
        ParamKind::Sym { mutable: true, .. } => quote! { __pgas_args.push_sym_mut(#id); },
        ParamKind::Sym { .. } => quote! { __pgas_args.push_sym(#id); },
        ParamKind::Local { mutable: true, .. } => quote! { __pgas_args.push_local_mut(#id); },
        ParamKind::Local { .. } => quote! { __pgas_args.push_local(#id); },
        ParamKind::Scalar(_) => quote! { __pgas_args.push_scalar(#id); },
        ParamKind::Team => quote! { __pgas_args.push_team(#id); },
        ParamKind::TensorMap(_) => quote! { __pgas_args.push_tensor_map(#id); },
        ParamKind::TensorMapMut(_) => quote! { __pgas_args.push_tensor_map_mut(#id); },
        ParamKind::Comptime(_) | ParamKind::ComptimeOp => return Err(quote! { (#id) as i128 }),
    })
}

/// The kernel module's launchers: `launch` (checked variant), `launch_unchecked` (plain), the
/// two `_on` forms on a given stream, and `launch_checked_if_on` (either, by a flag); each pushes the arguments of `k`'s parameters and
/// passes their comptime values to the launch of `spec`. `generics`: the launchers' own
/// (`<T: Instance>` for a generic kernel).
fn launchers(
    f: &syn::ItemFn, k: &CompiledKernel, lparams: &[LauncherParam<'_>], generics: TokenStream,
    spec: TokenStream,
) -> TokenStream {
    let rust_name = &f.sig.ident;
    let (mut pushes, mut comptime) = (Vec::new(), Vec::new());
    for (p, lp) in k.params.iter().zip(lparams) {
        match param_push(p.kind, lp.name) {
            Ok(push) => pushes.push(push),
            Err(value) => comptime.push(value),
        }
    }
    let sig_params: Vec<TokenStream> = lparams
        .iter()
        .map(|p| {
            let (n, t) = (p.name, p.ty);
            quote! { #n: #t }
        })
        .collect();
    let launch_doc = format!("Launch `{rust_name}` (checked variant: indices and PEs are checked; a violation traps after printing the Rust file:line).");
    let unchecked_doc = format!("Launch `{rust_name}` without index and PE checks.\n\n# Safety\nAn out-of-bounds index or PE in the kernel is undefined behavior.");
    let body = |variant: TokenStream, stream: TokenStream| {
        quote! {
            let mut __pgas_args = ::pgas::__private::KernelArgs::new();
            #(#pushes)*
            ::pgas::__private::launch(pgas, #spec, #variant, &[#(#comptime),*], cfg, #stream, &mut __pgas_args)
        }
    };
    let none = quote! { ::core::option::Option::None };
    let some = quote! { ::core::option::Option::Some(stream) };
    let checked_v = quote! { ::pgas::__private::Variant::Checked };
    let plain_v = quote! { ::pgas::__private::Variant::Plain };
    let b1 = body(checked_v.clone(), none.clone());
    let b2 = body(plain_v.clone(), none);
    let b3 = body(checked_v, some.clone());
    let b4 = body(plain_v, some.clone());
    let either_v = quote! {
        if checked { ::pgas::__private::Variant::Checked } else { ::pgas::__private::Variant::Plain }
    };
    let b5 = body(either_v, some);
    quote! {
        #[doc = #launch_doc]
        pub fn launch #generics (pgas: &::pgas::Pgas, cfg: ::pgas::LaunchConfig, #(#sig_params),*) -> ::pgas::Result<()> {
            #b1
        }

        #[doc = #unchecked_doc]
        pub unsafe fn launch_unchecked #generics (pgas: &::pgas::Pgas, cfg: ::pgas::LaunchConfig, #(#sig_params),*) -> ::pgas::Result<()> {
            #b2
        }

        /// Like `launch`, on `stream`.
        pub fn launch_on #generics (pgas: &::pgas::Pgas, stream: &::pgas::__private::CudaStream, cfg: ::pgas::LaunchConfig, #(#sig_params),*) -> ::pgas::Result<()> {
            #b3
        }

        /// Like `launch_unchecked`, on `stream`.
        ///
        /// # Safety
        /// An out-of-bounds index or PE in the kernel is undefined behavior.
        pub unsafe fn launch_unchecked_on #generics (pgas: &::pgas::Pgas, stream: &::pgas::__private::CudaStream, cfg: ::pgas::LaunchConfig, #(#sig_params),*) -> ::pgas::Result<()> {
            #b4
        }

        /// `launch_on` when `checked`, else `launch_unchecked_on`: for a host function that
        /// offers its caller both variants.
        ///
        /// # Safety
        /// When `checked` is false, an out-of-bounds index or PE in the kernel is undefined
        /// behavior.
        pub unsafe fn launch_checked_if_on #generics (pgas: &::pgas::Pgas, stream: &::pgas::__private::CudaStream, cfg: ::pgas::LaunchConfig, checked: bool, #(#sig_params),*) -> ::pgas::Result<()> {
            #b5
        }
    }
}

/// The kernel's attributes that also make sense on its module: docs, `cfg`, lint levels.
fn kept_attrs(f: &syn::ItemFn) -> impl Iterator<Item = &syn::Attribute> {
    const KEPT: &[&str] = &["doc", "cfg", "cfg_attr", "allow", "warn", "deny", "expect"];
    f.attrs
        .iter()
        .filter(|a| KEPT.iter().any(|k| a.path().is_ident(k)))
}

/// After an error: the module with the launchers' signatures (so call sites still resolve
/// in editors) when the parameters are valid, else an empty module.
fn fallback_module(f: &syn::ItemFn) -> TokenStream {
    let vis = &f.vis;
    let name = &f.sig.ident;
    let valid = crate::parse::params_valid(f);
    let lparams = launcher_params(f).filter(|_| valid);
    let Some(lparams) = lparams else {
        let attrs = kept_attrs(f);
        return quote! {
            #(#attrs)*
            #[allow(non_snake_case, dead_code)]
            #vis mod #name {}
        };
    };
    let names: Vec<&Ident> = lparams.iter().map(|p| p.name).collect();
    let sig_params: Vec<TokenStream> = lparams
        .iter()
        .map(|p| {
            let (n, t) = (p.name, p.ty);
            quote! { #n: #t }
        })
        .collect();
    let msg = format!("kernel `{name}` failed to compile");
    let attrs = kept_attrs(f);
    quote! {
        #(#attrs)*
        #[allow(non_snake_case, dead_code, unused_imports, unused_variables, clippy::all)]
        #vis mod #name {
            use super::*;
            pub fn launch(pgas: &::pgas::Pgas, cfg: ::pgas::LaunchConfig, #(#sig_params),*) -> ::pgas::Result<()> {
                let _ = (pgas, cfg, #(#names),*);
                ::core::unreachable!(#msg)
            }
            pub unsafe fn launch_unchecked(pgas: &::pgas::Pgas, cfg: ::pgas::LaunchConfig, #(#sig_params),*) -> ::pgas::Result<()> {
                let _ = (pgas, cfg, #(#names),*);
                ::core::unreachable!(#msg)
            }
        }
    }
}
