//! What the attribute macros expand to, checked on token streams (the UI tests check the same
//! through rustc).

use quote::quote;

fn norm(s: String) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn kernel_becomes_a_module_with_spec_and_launchers() {
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(),
            quote! {
                pub fn scale(#[comptime] n: u32, x: &mut SymTensor<f32>, team: Team) {
                    x[0] = n as f32;
                }
            },
        )
        .to_string(),
    );
    assert!(out.contains("pub mod scale"), "{out}");
    assert!(out.contains("pub const SPEC : :: pgas :: __private :: KernelSpec"));
    // The file name is spliced in by the user's crate.
    assert!(out.contains(":: core :: concat !"));
    assert!(out.contains(":: core :: file ! ()"));
    assert!(!out.contains(pgas_codegen::FILE_PLACEHOLDER));
    for f in [
        "fn launch (",
        "unsafe fn launch_unchecked (",
        "fn launch_on (",
        "unsafe fn launch_unchecked_on (",
        "unsafe fn launch_checked_if_on (",
    ] {
        assert!(out.contains(f), "{f} missing");
    }
    assert!(out.contains("__pgas_args . push_sym_mut (x)"));
    assert!(out.contains("__pgas_args . push_team (team)"));
    assert!(out.contains("(n) as i128"));
    assert!(out.contains("ParamKind :: Comptime (\"u32\")"));
    assert!(out.contains("collective : false"));
    // The body is never re-emitted as Rust.
    assert!(!out.contains("x [0] = n as f32"));
}

#[test]
fn unknown_callee_asks_its_device_macro() {
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = helper(1.0); } },
        )
        .to_string(),
    );
    assert!(
        out.starts_with("__pgas_device_helper ! { { } { } fn k"),
        "{out}"
    );
}

#[test]
fn helpers_passed_back_compile_into_the_kernel() {
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(__helpers { fn helper(v: f32) -> f32 { v * 2.0 } }),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = helper(1.0); } },
        )
        .to_string(),
    );
    assert!(out.contains("pub const SPEC"), "{out}");
    assert!(out.contains("pgas_fn_helper"));
}

#[test]
fn max_threads_reaches_the_spec_and_the_source() {
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(max_threads = 512),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = 1.0; } },
        )
        .to_string(),
    );
    assert!(
        out.contains("max_threads : :: core :: option :: Option :: Some (512u32)"),
        "{out}"
    );
    assert!(out.contains("__launch_bounds__(512) PGAS_KERNEL_NAME"));
    let none = norm(
        pgas_codegen::expand_kernel(
            quote!(),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = 1.0; } },
        )
        .to_string(),
    );
    assert!(none.contains("max_threads : :: core :: option :: Option :: None"));
    assert!(!none.contains("__launch_bounds__"));
}

#[test]
fn max_threads_survives_the_device_macros() {
    // A kernel waiting for a helper hands its arguments to the helper's macro, which puts them
    // back in front of `__helpers`; the re-expanded kernel still has its bound.
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(max_threads = 1024),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = helper(1.0); } },
        )
        .to_string(),
    );
    assert!(
        out.starts_with("__pgas_device_helper ! { { max_threads = 1024 , } { } fn k"),
        "{out}"
    );
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(max_threads = 1024, __helpers { fn helper(v: f32) -> f32 { v * 2.0 } }),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = helper(1.0); } },
        )
        .to_string(),
    );
    assert!(out.contains("Some (1024u32)"), "{out}");
    assert!(out.contains("__launch_bounds__(1024)"));
}

#[test]
fn bad_kernel_arguments_are_errors_at_their_token() {
    for (attr, message) in [
        (quote!(fast), "unknown #[pgas_kernel] argument `fast`"),
        (
            quote!(max_threads = 0),
            "from 1 to 1024 (CUDA's largest block), not 0",
        ),
        (quote!(max_threads = 2048), "not 2048"),
        (quote!(max_threads = "256"), "takes an integer literal"),
        (quote!(max_threads = 2.5), "takes an integer literal"),
        (quote!(max_threads), "write `max_threads = N`"),
        (quote!(max_threads = 64, max_threads = 64), "given twice"),
    ] {
        let out = pgas_codegen::expand_kernel(
            attr.clone(),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = 1.0; } },
        )
        .to_string();
        assert!(out.contains("compile_error"), "{attr}: {out}");
        assert!(out.contains(message), "{attr}: {out}");
        assert!(!out.contains("SPEC"), "{attr}: {out}");
    }
}

#[test]
fn device_function_becomes_a_macro() {
    let out = norm(
        pgas_codegen::expand_device(quote!(), quote! { fn helper(v: f32) -> f32 { v * 2.0 } })
            .to_string(),
    );
    assert!(out.contains("macro_rules ! __pgas_device_helper"), "{out}");
    assert!(out
        .contains("# [:: pgas :: pgas_kernel ($ ($ args) * __helpers { $ ($ helpers) * fn helper"));
    assert!(out.contains("pub (crate) use __pgas_device_helper"));
    assert!(!out.contains("compile_error"));
}

#[test]
fn errors_keep_the_launcher_signatures() {
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(),
            quote! { fn k(x: &mut SymTensor<f32>) { x[0] = 1; } },
        )
        .to_string(),
    );
    assert!(out.contains("compile_error !"), "{out}");
    assert!(out.contains("pub fn launch ("));
    assert!(!out.contains("SPEC"));
}

#[test]
fn a_non_function_is_an_error_and_kept() {
    let out = norm(pgas_codegen::expand_kernel(quote!(), quote! { struct S; }).to_string());
    assert!(out.contains("compile_error !"));
    assert!(out.contains("struct S ;"));
}

#[test]
fn cfg_docs_and_lints_carry_over_to_the_module() {
    let out = norm(
        pgas_codegen::expand_kernel(
            quote!(),
            quote! {
                /// Doc.
                #[cfg(feature = "gpu")]
                #[allow(unused)]
                #[inline]
                fn k(x: &mut SymTensor<f32>) { x[0] = 1.0; }
            },
        )
        .to_string(),
    );
    let module = &out[..out.find("mod k").expect("a module")];
    assert!(module.contains("# [doc = r\" Doc.\"]"), "{module}");
    assert!(module.contains("# [cfg (feature = \"gpu\")]"));
    assert!(module.contains("# [allow (unused)]"));
    assert!(!module.contains("inline"));
}
