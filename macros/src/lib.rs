//! `#[pgas_kernel]`, `#[pgas_device]` and `#[pgas_params]`: a thin shim; all the work is in
//! `pgas-codegen`.

// Every public item is documented (docs are part of the feature).
#![deny(missing_docs)]

use proc_macro::TokenStream;

/// Compile a Rust function into a GPU kernel. The function is replaced by a module of the same
/// name with `SPEC` and the launchers `launch`, `launch_unchecked`, `launch_on`,
/// `launch_unchecked_on`. See the language reference in `docs/dsl.md`.
#[proc_macro_attribute]
pub fn pgas_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    pgas_codegen::expand_kernel(attr.into(), item.into()).into()
}

/// A device function that `#[pgas_kernel]` functions in the same module may call.
#[proc_macro_attribute]
pub fn pgas_device(attr: TokenStream, item: TokenStream) -> TokenStream {
    pgas_codegen::expand_device(attr.into(), item.into()).into()
}

/// A group of kernel parameters that many kernels take together: a kernel takes it as one
/// destructuring parameter, `Peers { pes, n, me }: Peers`, which stands for the fields in the
/// struct's order (in the kernel's signature and its launchers). See `docs/dsl.md`.
#[proc_macro_attribute]
pub fn pgas_params(attr: TokenStream, item: TokenStream) -> TokenStream {
    pgas_codegen::expand_params(attr.into(), item.into()).into()
}
