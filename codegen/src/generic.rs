//! Generic kernels and device functions: `fn k<T: Elem>(..)` is compiled once for each type of
//! its bound, by substituting the type for `T` (and `T::Acc`, `T::LANES`) in its tokens, so
//! the checker and the emitter only ever see concrete types.
//!
//! A generic device function is called with its type written out, `f::<T>(..)` (in a generic
//! kernel `T` is already concrete there); each such call is renamed to the instance it needs,
//! `f__u8(..)`, and that instance is compiled beside the kernel.

use std::collections::BTreeSet;

use proc_macro2::{Delimiter, Group, Ident, Literal, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;

use crate::error::{CodegenError, Errors, Sp};
use crate::types::Scalar;
use Scalar::*;

/// A bound a kernel's type parameter may have: the types it is compiled for.
pub struct Bound {
    /// The bound as kernels write it (`T: Elem`).
    pub name: &'static str,
    /// The types, in the order their instances are made.
    pub members: &'static [Scalar],
    /// What the bound is for (the DSL reference shows it).
    pub doc: &'static str,
}

/// The one table of bounds.
pub const BOUNDS: &[Bound] = &[
    Bound {
        name: "Elem",
        members: &[F32, F64, F16, Bf16, I8, I16, I32, I64, U8, U16, U32, U64],
        doc: "the element types of pgas's collectives: the floats and the 8- to 64-bit integers",
    },
    Bound {
        name: "Float",
        members: &[F32, F64, F16, Bf16],
        doc: "the float element types",
    },
    Bound {
        name: "Int",
        members: &[I8, I16, I32, I64, U8, U16, U32, U64],
        doc: "the 8- to 64-bit integers",
    },
    Bound {
        name: "Unsigned",
        members: &[U8, U16, U32, U64],
        doc: "one type of each size: for kernels that only move bytes",
    },
];

/// `T::Acc`: the type `T` is computed in (16-bit floats in `f32`, every other type in itself).
pub fn acc(t: Scalar) -> Scalar {
    if t.is_half() {
        F32
    } else {
        t
    }
}

/// `T::LANES`: elements of `T` in 16 bytes (one `load_vec16`).
pub fn lanes(t: Scalar) -> usize {
    16 / t.size()
}

/// A function's type parameter and its bound.
pub struct Generic {
    /// The parameter's name (`T`).
    pub param: Ident,
    /// Its bound.
    pub bound: &'static Bound,
}

/// The function's type parameter, `None` when it has none. Errors (at the user's token) for
/// what is not one type parameter with one bound of [`BOUNDS`].
pub fn generic_of(sig: &syn::Signature) -> Result<Option<Generic>, CodegenError> {
    let g = &sig.generics;
    if let Some(w) = &g.where_clause {
        return Err(CodegenError::new(
            Sp::of(w),
            "write the bound in the parameter list (`<T: Elem>`), not in a `where` clause",
        ));
    }
    let mut params = g.params.iter();
    let Some(first) = params.next() else {
        return Ok(None);
    };
    let only_one = "a kernel or device function has at most one type parameter, `<T: Elem>`; pass values as `#[comptime]` parameters";
    if let Some(extra) = params.next() {
        return Err(CodegenError::new(Sp::of(extra), only_one));
    }
    let syn::GenericParam::Type(tp) = first else {
        return Err(CodegenError::new(Sp::of(first), only_one));
    };
    let names: Vec<&str> = BOUNDS.iter().map(|b| b.name).collect();
    let unknown = format!(
        "a type parameter takes one of the bounds {} (`<T: Elem>`)",
        names.join(", ")
    );
    let bound = match (tp.bounds.len(), tp.bounds.first(), &tp.default) {
        (1, Some(syn::TypeParamBound::Trait(t)), None) if t.path.get_ident().is_some() => {
            let name = t.path.segments[0].ident.to_string();
            BOUNDS.iter().find(|b| b.name == name)
        }
        _ => None,
    };
    match bound {
        Some(bound) => Ok(Some(Generic {
            param: tp.ident.clone(),
            bound,
        })),
        None => Err(CodegenError::new(Sp::of(tp), unknown)),
    }
}

/// `f` for `T` = `ty`: its type parameter dropped and `T`, `T::Acc`, `T::LANES` replaced in
/// its signature and body (each at `T`'s span, so errors point at the user's token).
pub fn instantiate(
    f: &syn::ItemFn, g: &Generic, ty: Scalar,
) -> Result<syn::ItemFn, Vec<CodegenError>> {
    let mut f = f.clone();
    f.sig.generics = syn::Generics::default();
    let mut errors = Errors::default();
    let tokens = substitute(f.to_token_stream(), &g.param, ty, &mut errors);
    if !errors.is_empty() {
        return Err(errors.into_vec());
    }
    syn::parse2(tokens).map_err(|e| vec![CodegenError::from(e)])
}

fn substitute(ts: TokenStream, param: &Ident, ty: Scalar, errors: &mut Errors) -> TokenStream {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            TokenTree::Ident(id) if id == param => {
                let span = id.span();
                if let Some(item) = path_item(&toks[i + 1..]) {
                    i += 3;
                    out.push(match item.to_string().as_str() {
                        "Acc" => type_token(acc(ty), span),
                        "LANES" => {
                            let mut l = Literal::usize_unsuffixed(lanes(ty));
                            l.set_span(span);
                            TokenTree::Literal(l)
                        }
                        other => {
                            errors.push(
                                item.span(),
                                format!("`{param}::{other}` is not known: a type parameter has `{param}::Acc` (the type it is computed in) and `{param}::LANES` (its elements in 16 bytes)"),
                            );
                            TokenTree::Ident(item.clone())
                        }
                    });
                } else {
                    out.push(type_token(ty, span));
                }
            }
            TokenTree::Group(gr) => {
                let mut ng = Group::new(gr.delimiter(), substitute(gr.stream(), param, ty, errors));
                ng.set_span(gr.span());
                out.push(TokenTree::Group(ng));
            }
            t => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// The `X` of `:: X` at the start of `rest`.
fn path_item(rest: &[TokenTree]) -> Option<&Ident> {
    match rest {
        [TokenTree::Punct(a), TokenTree::Punct(b), TokenTree::Ident(x), ..]
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':' =>
        {
            Some(x)
        }
        _ => None,
    }
}

fn type_token(ty: Scalar, span: Span) -> TokenTree {
    TokenTree::Ident(Ident::new(ty.rust_name(), span))
}

/// The name of `f`'s instance for `ty`.
pub fn instance_name(f: &str, ty: Scalar) -> String {
    format!("{f}__{}", ty.rust_name())
}

/// The kernel and the device functions with every call of a generic device function
/// (`f::<u8>(..)`) renamed to its instance (`f__u8(..)`), and those instances made (each
/// once, also for calls inside instances). Device functions that are not generic pass through.
pub fn monomorphize(
    kernel: &syn::ItemFn, helpers: &[syn::ItemFn],
) -> Result<(syn::ItemFn, Vec<syn::ItemFn>), Vec<CodegenError>> {
    let mut errors = Errors::default();
    let mut generic = Vec::new();
    let mut plain = Vec::new();
    for h in helpers {
        match generic_of(&h.sig) {
            Ok(Some(g)) => generic.push((h, g)),
            Ok(None) => plain.push(h.clone()),
            Err(e) => errors.extend(vec![e]),
        }
    }
    if !errors.is_empty() {
        return Err(errors.into_vec());
    }
    let mut wanted: Vec<(usize, Scalar)> = Vec::new();
    let kernel = rename_calls(kernel, &generic, &mut wanted, &mut errors)?;
    let mut out: Vec<syn::ItemFn> = Vec::new();
    for h in &plain {
        out.push(rename_calls(h, &generic, &mut wanted, &mut errors)?);
    }
    let mut made = BTreeSet::new();
    while let Some((gi, ty)) = wanted.pop() {
        if !made.insert((gi, ty.rust_name())) {
            continue;
        }
        let (h, g) = &generic[gi];
        let mut inst = instantiate(h, g, ty)?;
        inst.sig.ident = Ident::new(
            &instance_name(&h.sig.ident.to_string(), ty),
            h.sig.ident.span(),
        );
        out.push(rename_calls(&inst, &generic, &mut wanted, &mut errors)?);
    }
    if errors.is_empty() {
        Ok((kernel, out))
    } else {
        Err(errors.into_vec())
    }
}

/// `f` with its calls of the generic functions renamed to their instances, each instance
/// wanted pushed onto `wanted` (index into `generic`, type).
fn rename_calls(
    f: &syn::ItemFn, generic: &[(&syn::ItemFn, Generic)], wanted: &mut Vec<(usize, Scalar)>,
    errors: &mut Errors,
) -> Result<syn::ItemFn, Vec<CodegenError>> {
    if generic.is_empty() {
        return Ok(f.clone());
    }
    let tokens = rename_in(f.to_token_stream(), generic, wanted, errors);
    syn::parse2(tokens).map_err(|e| vec![CodegenError::from(e)])
}

fn rename_in(
    ts: TokenStream, generic: &[(&syn::ItemFn, Generic)], wanted: &mut Vec<(usize, Scalar)>,
    errors: &mut Errors,
) -> TokenStream {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            TokenTree::Ident(id) => {
                let gi = generic.iter().position(|(h, _)| h.sig.ident == *id);
                match gi.map(|gi| (gi, turbofish(&toks[i + 1..]))) {
                    Some((gi, Some((ty_tok, len)))) => {
                        let (h, g) = &generic[gi];
                        match Scalar::from_rust(&ty_tok.to_string())
                            .filter(|t| g.bound.members.contains(t))
                        {
                            Some(ty) => {
                                wanted.push((gi, ty));
                                out.push(TokenTree::Ident(Ident::new(
                                    &instance_name(&id.to_string(), ty),
                                    id.span(),
                                )));
                            }
                            None => {
                                errors.push(ty_tok.span(), bound_message(h, g, &ty_tok));
                                out.push(TokenTree::Ident(id.clone()));
                            }
                        }
                        i += 1 + len;
                        continue;
                    }
                    Some((gi, None)) if is_call(&toks[i + 1..]) => {
                        let (h, g) = &generic[gi];
                        errors.push(
                            id.span(),
                            format!(
                                "`{name}` is generic: write its type, `{name}::<{p}>(..)` (`{p}: {b}`)",
                                name = h.sig.ident,
                                p = g.param,
                                b = g.bound.name
                            ),
                        );
                    }
                    _ => {}
                }
                out.push(toks[i].clone());
            }
            TokenTree::Group(gr) => {
                let mut ng = Group::new(
                    gr.delimiter(),
                    rename_in(gr.stream(), generic, wanted, errors),
                );
                ng.set_span(gr.span());
                out.push(TokenTree::Group(ng));
            }
            t => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

fn bound_message(h: &syn::ItemFn, g: &Generic, ty: &Ident) -> String {
    let members: Vec<&str> = g.bound.members.iter().map(|m| m.rust_name()).collect();
    format!(
        "`{}` takes `{}: {}` ({}), not `{ty}`",
        h.sig.ident,
        g.param,
        g.bound.name,
        members.join(", ")
    )
}

/// `::<X>` followed by a call's parentheses at the start of `rest`: `X` and the tokens before
/// the parentheses.
fn turbofish(rest: &[TokenTree]) -> Option<(Ident, usize)> {
    match rest {
        [TokenTree::Punct(a), TokenTree::Punct(b), TokenTree::Punct(lt), TokenTree::Ident(x), TokenTree::Punct(gt), TokenTree::Group(args), ..]
            if a.as_char() == ':'
                && b.as_char() == ':'
                && lt.as_char() == '<'
                && gt.as_char() == '>'
                && args.delimiter() == Delimiter::Parenthesis =>
        {
            Some((x.clone(), 5))
        }
        _ => None,
    }
}

fn is_call(rest: &[TokenTree]) -> bool {
    matches!(rest.first(), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(src: &str) -> syn::ItemFn {
        syn::parse_str(src).unwrap()
    }

    #[test]
    fn associated_items_and_the_parameter_are_substituted() {
        let f = item("fn k<T: Elem>(x: &mut SymTensor<T>) { let a = x[0] as T::Acc; let w = T::LANES; let s = dyn_shared::<T>(); }");
        let g = generic_of(&f.sig).unwrap().unwrap();
        let h = instantiate(&f, &g, F16).unwrap();
        let text = h.to_token_stream().to_string();
        assert!(h.sig.generics.params.is_empty());
        assert!(text.contains("SymTensor < f16 >"), "{text}");
        assert!(text.contains("as f32"), "{text}");
        assert!(text.contains("let w = 8"), "{text}");
        assert!(text.contains("dyn_shared :: < f16 >"), "{text}");
    }

    #[test]
    fn bounds_are_checked() {
        for (src, want) in [
            ("fn k<T: Elem, U: Elem>() {}", "at most one type parameter"),
            ("fn k<T: Copy>() {}", "one of the bounds"),
            ("fn k<T>() {}", "one of the bounds"),
            ("fn k<T>() where T: Elem {}", "`where` clause"),
            ("fn k<const N: usize>() {}", "at most one type parameter"),
        ] {
            let e = generic_of(&item(src).sig).err().expect(src);
            assert!(e.message.contains(want), "{src}: {}", e.message);
        }
        let f = item("fn k<T: Int>() { let x = T::Bits; }");
        let g = generic_of(&f.sig).unwrap().unwrap();
        let e = instantiate(&f, &g, U8).unwrap_err();
        assert!(e[0].message.contains("`T::Bits` is not known"));
    }

    #[test]
    fn generic_device_calls_become_instances() {
        let k = item("fn k(x: &mut SymTensor<u8>) { f::<u8>(x); f::<u8>(x); }");
        let f = item("fn f<T: Unsigned>(x: &mut SymTensor<T>) { g::<T>(x); }");
        let g = item("fn g<T: Unsigned>(x: &mut SymTensor<T>) { }");
        let (k2, hs) = monomorphize(&k, &[f, g]).unwrap();
        let text = k2.to_token_stream().to_string();
        assert!(text.contains("f__u8 (x)"), "{text}");
        let names: Vec<String> = hs.iter().map(|h| h.sig.ident.to_string()).collect();
        assert_eq!(names, ["f__u8", "g__u8"]);
        assert!(hs[0].to_token_stream().to_string().contains("g__u8 (x)"));
        // Outside the bound, and without the type.
        let bad = item("fn k(x: &mut SymTensor<f32>) { f::<f32>(x); f(x); }");
        let f = item("fn f<T: Unsigned>(x: &mut SymTensor<T>) { }");
        let e = monomorphize(&bad, &[f]).unwrap_err();
        assert!(
            e[0].message.contains("takes `T: Unsigned`"),
            "{}",
            e[0].message
        );
        assert!(e[1].message.contains("write its type"), "{}", e[1].message);
    }
}
