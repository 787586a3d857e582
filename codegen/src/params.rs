//! Parameter groups: `#[pgas_params] struct Peers { pes: &SymTensor<i32>, n: u32, .. }` names
//! parameters that many kernels take together. A kernel or device function takes them whole,
//! `peers: Peers` (read as `peers.n`, passed on as `f(peers)`), or destructured,
//! `Peers { pes, n, me }: Peers`. The group stands for its fields, in the struct's order, where
//! it is written: in the CUDA signature and in the launchers' arguments, so a kernel with a group
//! compiles to the same source as one that lists the fields.
//!
//! A proc macro sees only its own item, so a group reaches the kernels that use it as device
//! functions do (`expand.rs`): `#[pgas_params]` expands to a macro, `__pgas_params_Peers!`,
//! that hands the struct to `#[pgas_kernel]` again as `__params { struct Peers { .. } }`.

use crate::attr::argless_item;
use crate::error::{CodegenError, Sp};
use crate::types::Scalar;
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};
use syn::visit_mut::{self, VisitMut};

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

/// How a parameter takes a group: destructured, `Peers { pes, n, me }: Peers`, or whole under a
/// name, `peers: Peers` (a bare CamelCase type name that is none of [`NOT_GROUPS`] nor the
/// function's type parameter).
enum GroupParam<'a> {
    Pattern(&'a syn::PatStruct, &'a syn::Type),
    Named(&'a Ident, &'a Ident),
}

impl GroupParam<'_> {
    /// The group's name as the parameter writes it.
    fn group(&self) -> Option<&Ident> {
        match self {
            GroupParam::Pattern(ps, _) => ps.path.get_ident(),
            GroupParam::Named(_, g) => Some(g),
        }
    }
}

/// Bare type names that are no group: the language's own, and Rust's that a newcomer may try
/// (the parser says which types a parameter takes).
const NOT_GROUPS: &[&str] = &["Team", "ReduceOp", "String", "Self"];

/// `f`'s parameters that take a group.
fn group_params(f: &syn::ItemFn) -> impl Iterator<Item = GroupParam<'_>> {
    f.sig
        .inputs
        .iter()
        .filter_map(|a| group_param(a, &f.sig.generics))
}

/// How `arg` takes a group, if it does (a bare type name that is one of `generics`' type
/// parameters is not a group).
fn group_param<'a>(arg: &'a syn::FnArg, generics: &syn::Generics) -> Option<GroupParam<'a>> {
    let syn::FnArg::Typed(pt) = arg else {
        return None;
    };
    match &*pt.pat {
        syn::Pat::Struct(ps) => Some(GroupParam::Pattern(ps, &pt.ty)),
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            let syn::Type::Path(tp) = &*pt.ty else {
                return None;
            };
            let g = tp.path.get_ident().filter(|_| tp.qself.is_none())?;
            let name = g.to_string();
            let group_like = name.starts_with(|c: char| c.is_ascii_uppercase())
                && !NOT_GROUPS.contains(&name.as_str())
                && Scalar::from_rust(&name).is_none()
                && !generics.type_params().any(|t| t.ident == *g);
            group_like.then_some(GroupParam::Named(&pi.ident, g))
        }
        _ => None,
    }
}

/// Whether `f` takes a group, in either form: such a device function is checked in the kernels
/// that call it, where its groups are known.
pub(crate) fn takes_group(f: &syn::ItemFn) -> bool {
    group_params(f).next().is_some()
}

/// The first group that one of `fns` (a kernel and its device functions) takes and that is not
/// among `groups`.
pub(crate) fn first_missing_group<'f>(
    fns: impl IntoIterator<Item = &'f syn::ItemFn>, groups: &[syn::ItemStruct],
) -> Option<Ident> {
    fns.into_iter()
        .flat_map(group_params)
        .filter_map(|p| p.group().cloned())
        .find(|id| !groups.iter().any(|g| g.ident == *id))
}

/// `f` with each group parameter replaced by the group's fields, in the struct's order, with the
/// type and attributes the struct declares. A pattern names every field by itself, and they keep
/// their names (errors in the body point there). A group taken whole as `peers: Peers` becomes
/// parameters `peers_pes`, `peers_n`, ..: in the body, `peers.n` reads one, and `peers` as the
/// argument of a call stands for all of them, in order (the callee takes a `Peers` there).
pub(crate) fn flatten(
    f: &syn::ItemFn, groups: &[syn::ItemStruct],
) -> Result<syn::ItemFn, Vec<CodegenError>> {
    if !takes_group(f) {
        return Ok(f.clone());
    }
    let mut errors = Vec::new();
    let mut bound = Vec::new();
    let mut inputs = syn::punctuated::Punctuated::new();
    for arg in &f.sig.inputs {
        match group_param(arg, &f.sig.generics) {
            Some(GroupParam::Pattern(ps, ty)) => match fields_of(ps, ty, groups) {
                Ok(params) => inputs.extend(params),
                Err(e) => errors.push(e),
            },
            Some(GroupParam::Named(name, g)) => match groups.iter().find(|s| s.ident == *g) {
                Some(group) => {
                    inputs.extend(group.fields.iter().map(|field| {
                        let id = field.ident.as_ref().expect("a group's fields have names");
                        let param = field_param(name, id, name.span());
                        let (attrs, ty) = (&field.attrs, &field.ty);
                        let p: syn::FnArg = syn::parse_quote! { #(#attrs)* #param: #ty };
                        p
                    }));
                    bound.push((name.clone(), group));
                }
                // Not a group: the parameter's type is reported as any unknown type is.
                None => inputs.push(arg.clone()),
            },
            None => inputs.push(arg.clone()),
        }
    }
    let mut out = f.clone();
    out.sig.inputs = inputs;
    let mut uses = Uses {
        bound,
        errors: Vec::new(),
    };
    uses.visit_block_mut(&mut out.block);
    errors.extend(uses.errors);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Rewrites a body's uses of the groups bound by name: `peers.n` to `peers_n`, `peers` as a
/// call's argument to its fields; any other use is an error at its token.
struct Uses<'g> {
    bound: Vec<(Ident, &'g syn::ItemStruct)>,
    errors: Vec<CodegenError>,
}

impl Uses<'_> {
    /// The group bound to `e`, where `e` is the bare name.
    fn group_named(&self, e: &syn::Expr) -> Option<(Ident, &syn::ItemStruct)> {
        let syn::Expr::Path(p) = e else {
            return None;
        };
        let id = p.path.get_ident().filter(|_| p.qself.is_none())?;
        self.bound
            .iter()
            .find(|(name, _)| name == id)
            .map(|(_, g)| (id.clone(), *g))
    }
}

/// The parameter field `field` of group `name` becomes (`peers.n`: `peers_n`), at `span`.
fn field_param(name: &Ident, field: &Ident, span: proc_macro2::Span) -> Ident {
    format_ident!("{name}_{field}", span = span)
}

fn path_expr(id: Ident) -> syn::Expr {
    syn::parse_quote! { #id }
}

impl VisitMut for Uses<'_> {
    fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
        if let syn::Expr::Field(f) = e {
            if let Some((name, g)) = self.group_named(&f.base) {
                let known = match &f.member {
                    syn::Member::Named(m) => g.fields.iter().any(|x| x.ident.as_ref() == Some(m)),
                    syn::Member::Unnamed(_) => false,
                };
                if known {
                    let syn::Member::Named(m) = &f.member else {
                        unreachable!("checked above")
                    };
                    *e = path_expr(field_param(&name, m, m.span()));
                } else {
                    let member = &f.member;
                    self.errors.push(CodegenError::new(
                        Sp::of(member),
                        format!(
                            "`{}` has no field `{}`; its fields: {}",
                            g.ident,
                            quote!(#member),
                            field_names(g)
                        ),
                    ));
                }
                return;
            }
        }
        if let Some((name, g)) = self.group_named(e) {
            self.errors.push(CodegenError::new(
                Sp::of(&*e),
                format!(
                    "`{name}` is a parameter group: read a field (`{name}.{}`) or pass it whole as a call's argument to a device function that takes a `{}`",
                    g.fields.iter().next().and_then(|f| f.ident.as_ref()).map(ToString::to_string).unwrap_or_default(),
                    g.ident
                ),
            ));
            return;
        }
        visit_mut::visit_expr_mut(self, e);
    }

    fn visit_expr_call_mut(&mut self, c: &mut syn::ExprCall) {
        let mut args = syn::punctuated::Punctuated::new();
        for arg in std::mem::take(&mut c.args) {
            match self.group_named(&arg) {
                Some((name, g)) => args.extend(g.fields.iter().map(|field| {
                    let id = field.ident.as_ref().expect("a group's fields have names");
                    path_expr(field_param(&name, id, name.span()))
                })),
                None => args.push(arg),
            }
        }
        c.args = args;
        visit_mut::visit_expr_call_mut(self, c);
    }
}

/// A group's field names, `pes, n, me`.
fn field_names(g: &syn::ItemStruct) -> String {
    g.fields
        .iter()
        .filter_map(|f| f.ident.as_ref().map(ToString::to_string))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parameters a group pattern stands for, or the error at the pattern's token.
fn fields_of(
    ps: &syn::PatStruct, ty: &syn::Type, groups: &[syn::ItemStruct],
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
    let names = || field_names(g);
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

    fn team() -> syn::ItemStruct {
        syn::parse_quote! { struct Team { a: u32 } }
    }

    fn flat_fn(f: syn::ItemFn) -> Result<String, String> {
        flatten(&f, &[group()])
            .map(|f| quote!(#f).to_string())
            .map_err(|e| e[0].message.clone())
    }

    #[test]
    fn a_group_taken_whole_is_its_fields_by_the_name_and_field() {
        let k = syn::parse_quote! {
            fn k(x: &mut SymTensor<f32>, peers: Peers) {
                x[peers.me as usize] = 1.0;
                f(peers, peers.n);
            }
        };
        let out = flat_fn(k).unwrap();
        assert!(
            out.contains("peers_pes : & SymTensor < i32 > , peers_n : u32 , peers_me : u32"),
            "{out}"
        );
        assert!(out.contains("x [peers_me as usize] = 1.0"), "{out}");
        // Whole as an argument: every field, in the struct's order.
        assert!(
            out.contains("f (peers_pes , peers_n , peers_me , peers_n)"),
            "{out}"
        );
    }

    #[test]
    fn a_group_taken_whole_is_used_by_its_fields_or_passed_on() {
        let unknown = syn::parse_quote! { fn k(peers: Peers) { let a = peers.sig; } };
        assert_eq!(
            flat_fn(unknown).unwrap_err(),
            "`Peers` has no field `sig`; its fields: pes, n, me"
        );
        let bare = syn::parse_quote! { fn k(peers: Peers) { let a = peers; } };
        assert!(flat_fn(bare)
            .unwrap_err()
            .starts_with("`peers` is a parameter group: read a field (`peers.pes`)"));
        // A name that is no group stays a parameter, for the parser to report its type.
        let other = syn::parse_quote! { fn k(q: Queue) {} };
        assert_eq!(flat_fn(other).unwrap(), "fn k (q : Queue) { }");
    }

    #[test]
    fn a_missing_group_is_asked_for_by_name() {
        let k: syn::ItemFn =
            syn::parse_quote! { fn k(Team { a }: Team, Peers { pes, n, me }: Peers) {} };
        assert_eq!(first_missing_group([&k], &[group()]).unwrap(), "Team");
        assert!(first_missing_group([&k], &[]).is_some());
        // A group taken whole, in a device function.
        let f: syn::ItemFn =
            syn::parse_quote! { fn f<T: Elem>(x: u32, y: T, t: Team, r: ReduceOp, q: Queue) {} };
        assert_eq!(
            first_missing_group([&k, &f], &[group(), team()]).unwrap(),
            "Queue"
        );
    }
}
