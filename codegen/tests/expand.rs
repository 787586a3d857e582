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
        out.starts_with("__pgas_device_helper ! { { } fn k"),
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
fn device_function_becomes_a_macro() {
    let out = norm(
        pgas_codegen::expand_device(quote!(), quote! { fn helper(v: f32) -> f32 { v * 2.0 } })
            .to_string(),
    );
    assert!(out.contains("macro_rules ! __pgas_device_helper"), "{out}");
    assert!(out.contains("# [:: pgas :: pgas_kernel (__helpers { $ ($ helpers) * fn helper"));
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
