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

/// A kernel may take a group whole, `peers: Peers`: it reads a field as `peers.n` and passes
/// the group on to a device function that takes one (whole or destructured). Each is the
/// group's fields where it stands, `peers_pes, peers_n, ..` in the kernel.
#[test]
fn a_group_passes_whole_to_device_functions() {
    let src = r#"
        #[pgas_params]
        struct Peers { pes: &SymTensor<i32>, n: u32, me: u32 }
        #[pgas_device]
        fn next(peers: Peers) -> u32 {
            (peers.me + 1) % peers.n
        }
        #[pgas_device]
        fn pe_of(Peers { pes, n, me }: Peers, k: u32) -> i32 {
            pes[((me + k) % n) as usize]
        }
        #[pgas_kernel]
        fn k(x: &mut SymTensor<u32>, peers: Peers) {
            x.peer(pe_of(peers, 1))[0] = next(peers) + peers.n;
        }
    "#;
    let k = &compile_file(src, "k.rs").unwrap()[0];
    let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "peers_pes", "peers_n", "peers_me"]);
    let plain = &k.plain;
    for text in [
        "pgas_fn_next(int32_t *peers_pes, unsigned long long peers_pes_len, uint32_t peers_n, uint32_t peers_me)",
        "return (peers_me + 1u) % peers_n;",
        "pgas_fn_pe_of(peers_pes, peers_pes_len, peers_n, peers_me, 1u)",
        "pgas_fn_next(peers_pes, peers_pes_len, peers_n, peers_me) + peers_n",
    ] {
        assert!(plain.contains(text), "{text}\n{plain}");
    }
}

/// A group taken whole is used by its fields or passed on whole; anything else is an error
/// at the use.
#[test]
fn a_group_taken_whole_is_not_a_value() {
    let src = r#"
        #[pgas_params]
        struct Peers { n: u32, me: u32 }
        #[pgas_kernel]
        fn k(x: &mut SymTensor<u32>, peers: Peers) {
            x[0] = peers.rank + peers;
        }
    "#;
    let errors = compile_file(src, "k.rs").unwrap_err();
    let found: Vec<(usize, usize, &str)> = errors
        .iter()
        .map(|e| (e.line(), e.column(), e.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (6, 25, "`Peers` has no field `rank`; its fields: n, me"),
            (6, 32, "`peers` is a parameter group: read a field (`peers.n`) or pass it whole as a call's argument to a device function that takes a `Peers`"),
        ]
    );
}
