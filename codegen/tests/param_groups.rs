//! Parameter groups (`#[pgas_params]`) in a compiled file: what `pgas.kernel(source)` and the
//! NVRTC corpus compile. The macros' path is tested in `tools/ui` (`param_groups.rs`).

use pgas_codegen::compile_file;

/// A group stands for its fields, in the struct's order, in the kernel's parameters.
#[test]
fn a_file_compiles_with_its_groups() {
    let src = r#"
        #[pgas_params]
        struct Peers { pes: &SymTensor<i32>, n: u32, me: u32 }
        #[pgas_kernel]
        fn k(x: &mut SymTensor<f32>, Peers { me, pes, n }: Peers) {
            x.peer(pes[((me + 1) % n) as usize])[0] = 1.0;
        }
    "#;
    let k = &compile_file(src, "k.rs").unwrap()[0];
    let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "pes", "n", "me"]);
}

/// A pattern that leaves a field out is an error at the pattern.
#[test]
fn a_missing_field_is_an_error_at_the_pattern() {
    let src = r#"
        #[pgas_params]
        struct Peers { pes: &SymTensor<i32>, n: u32, me: u32 }
        #[pgas_kernel]
        fn k(x: &mut SymTensor<f32>, Peers { pes, n }: Peers) {
            x[0] = 1.0;
        }
    "#;
    let errors = compile_file(src, "k.rs").unwrap_err();
    assert_eq!(
        errors[0].message,
        "name every field of `Peers`; missing: me"
    );
    assert_eq!((errors[0].line(), errors[0].column()), (5, 37));
}

/// A field may be a comptime parameter: it stays one where the group stands.
#[test]
fn a_field_keeps_its_comptime_attribute() {
    let src = r#"
        #[pgas_params]
        struct Shape { len: u32, #[comptime] lanes: u32 }
        #[pgas_kernel]
        fn k(x: &mut SymTensor<f32>, Shape { len, lanes }: Shape) {
            let i = global_thread_idx();
            if i < (len * lanes) as usize {
                x[i] = 0.0;
            }
        }
    "#;
    let k = &compile_file(src, "k.rs").unwrap()[0];
    let kinds: Vec<String> = k
        .params
        .iter()
        .map(|p| format!("{} {:?}", p.name, p.kind))
        .collect();
    assert_eq!(kinds[1..], ["len Scalar(U32)", "lanes Comptime(U32)"]);
}

/// A device function takes no group: the error says so at the pattern.
#[test]
fn a_device_function_takes_no_group() {
    let src = r#"
        #[pgas_params]
        struct Peers { n: u32, me: u32 }
        #[pgas_device]
        fn next(Peers { n, me }: Peers) -> u32 {
            (me + 1) % n
        }
        #[pgas_kernel]
        fn k(x: &mut SymTensor<u32>, n: u32, me: u32) {
            x[0] = next(n, me);
        }
    "#;
    let errors = compile_file(src, "k.rs").unwrap_err();
    assert!(
        errors[0]
            .message
            .starts_with("a #[pgas_params] group is a kernel's parameter"),
        "{}",
        errors[0].message
    );
    assert_eq!((errors[0].line(), errors[0].column()), (5, 16));
}
