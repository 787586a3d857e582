//! Parameter groups: `#[pgas_params] struct Peers { pes: &SymTensor<i32>, n: u32, .. }` names
//! parameters that many kernels take together, and a kernel takes them as one destructuring
//! parameter, `Peers { pes, n, .. }: Peers`. The group stands for its fields, in the struct's
//! order, where it is written: in the kernel's CUDA signature and in its launchers' arguments,
//! so a kernel with a group compiles to the same source as one that lists the fields.
//!
//! A proc macro sees only its own item, so a group reaches the kernels that use it as device
//! functions do (`expand.rs`): `#[pgas_params]` expands to a macro, `__pgas_params_Peers!`,
//! that hands the struct to `#[pgas_kernel]` again as `__params { struct Peers { .. } }`.

use crate::attr::argless_item;
use crate::error::{CodegenError, Sp};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

/// Expand `#[pgas_params]` on a struct: the macro that adds the struct to a kernel's
/// `#[pgas_kernel]` arguments (nothing of it is Rust code: its fields are kernel parameter
/// types, which the launchers name).
pub fn expand_params(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (s, args_err) =
        match argless_item::<syn::ItemStruct>("pgas_params", "`struct`", &attr, item) {
            Ok(parsed) => parsed,
            Err(tokens) => return tokens,
        };
    let errs: Vec<TokenStream> = group_errors(&s)
        .iter()
        .map(CodegenError::to_compile_error)
        .chain(args_err)
        .collect();
    let mac = format_ident!("__pgas_params_{}", s.ident);
    quote! {
        #(#errs)*
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #mac {
            ({ $($args:tt)* } { $($helpers:tt)* } $($kernel:tt)*) => {
                #[::pgas::pgas_kernel($($args)* __params { #s }, __helpers { $($helpers)* })]
                $($kernel)*
            };
        }
        #[allow(unused_imports)]
        pub(crate) use #mac;
    }
}

/// What a group's declaration may not be: generic, a tuple or unit struct, empty.
fn group_errors(s: &syn::ItemStruct) -> Vec<CodegenError> {
    let mut errs = Vec::new();
    if !s.generics.params.is_empty() {
        errs.push(CodegenError::new(
            Sp::of(&s.generics),
            "a #[pgas_params] group takes no generics or lifetimes: its fields are kernel \
             parameter types, written as in a kernel's signature",
        ));
    }
    match &s.fields {
        syn::Fields::Named(f) if !f.named.is_empty() => {}
        _ => errs.push(CodegenError::new(
            Sp::of(&s.ident),
            "a #[pgas_params] group is a struct with named fields, one for each parameter",
        )),
    }
    errs
}

/// The group a parameter destructures, `Peers { .. }: Peers`, by its pattern's name.
fn group_of(arg: &syn::FnArg) -> Option<&syn::PatStruct> {
    match arg {
        syn::FnArg::Typed(pt) => match &*pt.pat {
            syn::Pat::Struct(ps) => Some(ps),
            _ => None,
        },
        syn::FnArg::Receiver(_) => None,
    }
}

/// The first group `f` destructures that is not among `groups`.
pub(crate) fn first_missing_group(f: &syn::ItemFn, groups: &[syn::ItemStruct]) -> Option<Ident> {
    f.sig
        .inputs
        .iter()
        .filter_map(group_of)
        .filter_map(|ps| ps.path.get_ident())
        .find(|id| !groups.iter().any(|g| g.ident == **id))
        .cloned()
}

/// `f` with each group parameter replaced by the group's fields, in the struct's order: the
/// name as the pattern writes it (so errors in the body point there), the type and attributes
/// as the struct declares them. A pattern must name every field by itself (`Peers { pes, n }`),
/// and its type be the group (`: Peers`).
pub(crate) fn flatten(
    f: &syn::ItemFn,
    groups: &[syn::ItemStruct],
) -> Result<syn::ItemFn, Vec<CodegenError>> {
    if !f.sig.inputs.iter().any(|a| group_of(a).is_some()) {
        return Ok(f.clone());
    }
    let mut errors = Vec::new();
    let mut inputs = syn::punctuated::Punctuated::new();
    for arg in &f.sig.inputs {
        let (Some(ps), syn::FnArg::Typed(pt)) = (group_of(arg), arg) else {
            inputs.push(arg.clone());
            continue;
        };
        match fields_of(ps, &pt.ty, groups) {
            Ok(params) => inputs.extend(params),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut out = f.clone();
    out.sig.inputs = inputs;
    Ok(out)
}

/// The parameters a group pattern stands for, or the error at the pattern's token.
fn fields_of(
    ps: &syn::PatStruct,
    ty: &syn::Type,
    groups: &[syn::ItemStruct],
) -> Result<Vec<syn::FnArg>, CodegenError> {
    let Some(g) = ps
        .path
        .get_ident()
        .and_then(|id| groups.iter().find(|g| g.ident == *id))
    else {
        return Err(CodegenError::new(
            Sp::of(&ps.path),
            "a parameter pattern names a #[pgas_params] group declared in this module (or \
             imported with its `__pgas_params_<Name>` macro)",
        ));
    };
    let same_type =
        matches!(ty, syn::Type::Path(tp) if tp.qself.is_none() && tp.path.is_ident(&g.ident));
    if !same_type {
        return Err(CodegenError::new(
            Sp::of(ty),
            format!("a `{0} {{ .. }}` parameter has the type `{0}`", g.ident),
        ));
    }
    let named: Vec<&syn::Field> = g.fields.iter().collect();
    let names = || {
        named
            .iter()
            .filter_map(|f| f.ident.as_ref().map(ToString::to_string))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(rest) = &ps.rest {
        return Err(CodegenError::new(
            Sp::of(rest),
            format!("name every field of `{}`: {}", g.ident, names()),
        ));
    }
    let mut written = Vec::new();
    for fp in &ps.fields {
        let member = match &fp.member {
            syn::Member::Named(id) => id,
            syn::Member::Unnamed(_) => {
                return Err(CodegenError::new(Sp::of(fp), "a group's fields have names"))
            }
        };
        let binds_itself = fp.colon_token.is_none()
            && matches!(&*fp.pat, syn::Pat::Ident(pi) if pi.ident == *member && pi.by_ref.is_none() && pi.subpat.is_none());
        if !binds_itself {
            return Err(CodegenError::new(
                Sp::of(fp),
                format!("write the field by its name alone, `{member}`: a group's fields keep their names in the kernel"),
            ));
        }
        if !named.iter().any(|f| f.ident.as_ref() == Some(member)) {
            return Err(CodegenError::new(
                Sp::of(member),
                format!(
                    "`{}` has no field `{member}`; its fields: {}",
                    g.ident,
                    names()
                ),
            ));
        }
        written.push(member);
    }
    let missing: Vec<String> = named
        .iter()
        .filter_map(|f| f.ident.as_ref())
        .filter(|id| !written.contains(id))
        .map(ToString::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(CodegenError::new(
            Sp::of(&ps.path),
            format!(
                "name every field of `{}`; missing: {}",
                g.ident,
                missing.join(", ")
            ),
        ));
    }
    Ok(named
        .iter()
        .map(|field| {
            let id = field.ident.as_ref().expect("a named field");
            // The pattern's own token, so that the body's uses and any error name the kernel.
            let name = written.iter().find(|w| **w == id).copied().unwrap_or(id);
            let (attrs, ty) = (&field.attrs, &field.ty);
            syn::parse_quote! { #(#attrs)* #name: #ty }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> syn::ItemStruct {
        syn::parse_quote! {
            struct Peers { pes: &SymTensor<i32>, n: u32, me: u32 }
        }
    }

    fn flat(kernel: syn::ItemFn) -> Result<String, String> {
        flatten(&kernel, &[group()])
            .map(|f| {
                let inputs = &f.sig.inputs;
                quote!(#inputs).to_string()
            })
            .map_err(|e| e[0].message.clone())
    }

    #[test]
    fn a_group_stands_for_its_fields_in_the_structs_order() {
        let k = syn::parse_quote! {
            fn k(x: &mut SymTensor<f32>, Peers { me, pes, n }: Peers, a: u32) {}
        };
        assert_eq!(
            flat(k).unwrap(),
            "x : & mut SymTensor < f32 > , pes : & SymTensor < i32 > , n : u32 , me : u32 , a : u32"
        );
    }

    #[test]
    fn a_pattern_names_every_field_by_itself() {
        let missing = syn::parse_quote! { fn k(Peers { pes, n }: Peers) {} };
        assert_eq!(
            flat(missing).unwrap_err(),
            "name every field of `Peers`; missing: me"
        );
        let rest = syn::parse_quote! { fn k(Peers { pes, .. }: Peers) {} };
        assert_eq!(
            flat(rest).unwrap_err(),
            "name every field of `Peers`: pes, n, me"
        );
        let renamed = syn::parse_quote! { fn k(Peers { pes, n: m, me }: Peers) {} };
        assert!(flat(renamed)
            .unwrap_err()
            .starts_with("write the field by its name alone, `n`"));
        let unknown = syn::parse_quote! { fn k(Peers { pes, n, me, sig }: Peers) {} };
        assert_eq!(
            flat(unknown).unwrap_err(),
            "`Peers` has no field `sig`; its fields: pes, n, me"
        );
        let other_type = syn::parse_quote! { fn k(Peers { pes, n, me }: u32) {} };
        assert_eq!(
            flat(other_type).unwrap_err(),
            "a `Peers { .. }` parameter has the type `Peers`"
        );
    }

    #[test]
    fn a_missing_group_is_asked_for_by_name() {
        let k: syn::ItemFn =
            syn::parse_quote! { fn k(Team { a }: Team, Peers { pes, n, me }: Peers) {} };
        assert_eq!(first_missing_group(&k, &[group()]).unwrap(), "Team");
        assert!(first_missing_group(&k, &[]).is_some());
    }
}
