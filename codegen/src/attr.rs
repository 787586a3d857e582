//! The arguments of `#[pgas_kernel(...)]`, parsed once for the macro (`expand`) and the
//! compiler (`compile`).

use crate::bound::MaxThreads;
use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::Ident;

/// The arguments of `#[pgas_kernel(...)]`: the user's `max_threads = N` and the internal
/// `__helpers { fn ... }` and `__params { struct ... }` that device-function and
/// parameter-group macros add (`params.rs`).
#[derive(Default)]
pub(crate) struct KernelAttr {
    /// `max_threads = N`: the value, and the expression as written (re-emitted through the
    /// device-function macros so a later error still points at the user's token).
    pub max_threads: Option<(MaxThreads, syn::Expr)>,
    pub helpers: Vec<syn::ItemFn>,
    pub params: Vec<syn::ItemStruct>,
}

impl KernelAttr {
    /// The user's arguments and the groups already held, as tokens, to hand to a device
    /// function's or a group's macro (which adds the helpers itself).
    pub(crate) fn user_args(&self) -> TokenStream {
        let max = self
            .max_threads
            .as_ref()
            .map(|(_, e)| quote! { max_threads = #e, });
        let params = &self.params;
        let params = (!params.is_empty()).then(|| quote! { __params { #(#params)* }, });
        quote! { #max #params }
    }
}

/// Parses `#[pgas_kernel]`'s arguments: `max_threads = N` (1 to 1024), `__helpers { fn... }`
/// and `__params { struct... }`, comma-separated. Errors point at the offending token.
pub(crate) fn parse_kernel_attr(attr: TokenStream) -> syn::Result<KernelAttr> {
    let parser = |input: ParseStream| -> syn::Result<KernelAttr> {
        let mut out = KernelAttr::default();
        while !input.is_empty() {
            // Any word, keywords included, so `#[pgas_kernel(type = 1)]` gets the same message.
            let key = input.call(Ident::parse_any)?;
            if key == "__helpers" {
                let content;
                syn::braced!(content in input);
                while !content.is_empty() {
                    out.helpers.push(content.parse()?);
                }
            } else if key == "__params" {
                let content;
                syn::braced!(content in input);
                while !content.is_empty() {
                    out.params.push(content.parse()?);
                }
            } else if key == "max_threads" {
                if out.max_threads.is_some() {
                    return Err(syn::Error::new(key.span(), "`max_threads` is given twice"));
                }
                if !input.peek(syn::Token![=]) {
                    return Err(syn::Error::new(
                        key.span(),
                        "write `max_threads = N`, N the most threads per block (1 to 1024)",
                    ));
                }
                input.parse::<syn::Token![=]>()?;
                let e: syn::Expr = input.parse()?;
                out.max_threads = Some((MaxThreads::parse(e.clone())?, e));
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown #[pgas_kernel] argument `{key}`; the one argument is \
                         `max_threads = N` (the most threads per block, 1 to 1024)"
                    ),
                ));
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(out)
    };
    parser.parse2(attr)
}

/// The item of an attribute that takes no arguments (`#[pgas_device]`, `#[pgas_params]`):
/// `item` parsed as a `T` (`what` names it in the error), with an error for arguments in
/// `attr`; or, where `item` is not a `T`, the tokens to expand to (the error and the item).
pub(crate) fn argless_item<T: syn::parse::Parse>(
    name: &str, what: &str, attr: &TokenStream, item: TokenStream,
) -> Result<(T, Option<TokenStream>), TokenStream> {
    let parsed: T = match syn::parse2(item.clone()) {
        Ok(t) => t,
        Err(e) => {
            let err = syn::Error::new(e.span(), format!("#[{name}] applies to a {what}"))
                .to_compile_error();
            return Err(quote! { #err #item });
        }
    };
    let args = (!attr.is_empty()).then(|| {
        syn::Error::new(attr.span(), format!("#[{name}] takes no arguments")).to_compile_error()
    });
    Ok((parsed, args))
}
