//! The JIT on a real `Pgas` (one PE): modules go through `nvshmemx_cumodule_init`, kernels call
//! NVSHMEM and write symmetric memory, and the context finalizes the modules before NVSHMEM.
//!
//! Needs a GPU and NVSHMEM: `cargo test -p pgas-runtime --test jit_pgas_gpu -- --ignored`.

use pgas_runtime::jit::PRELUDE;
use pgas_runtime::kernel::{KernelSpec, ParamKind, ParamSpec, Variant};
use pgas_runtime::launch::{launch, prewarm, KernelArgs, LaunchConfig, Prewarm, RawKernel};
use pgas_runtime::{Error, Team};

const PE_SRC: &str = concat!(
    "extern \"C\" __global__ void PGAS_KERNEL_NAME(int* out, unsigned long long n, int team) {\n",
    "    if (threadIdx.x == 0 && n >= 2) {\n",
    "        out[0] = nvshmem_my_pe() + 100 * nvshmem_n_pes() + PGAS_CT_k;\n",
    "        out[1] = nvshmem_team_n_pes(team);\n",
    "    }\n",
    "}\n"
);

/// A spec as the macro would write it: the source starts with the prelude.
fn pe_spec() -> &'static KernelSpec {
    static SPEC: std::sync::OnceLock<KernelSpec> = std::sync::OnceLock::new();
    SPEC.get_or_init(|| {
        let source: &'static str = Box::leak(format!("{PRELUDE}{PE_SRC}").into_boxed_str());
        KernelSpec {
            rust_name: "who_am_i",
            cuda_name: "pgas_who_am_i_test",
            file: file!(),
            line: line!(),
            plain_source: source,
            checked_source: source,
            params: PE_PARAMS,
            collective: false,
            max_threads: None,
        }
    })
}

const PE_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "out",
        kind: ParamKind::Sym {
            elem: "i32",
            mutable: true,
        },
    },
    ParamSpec {
        name: "k",
        kind: ParamKind::Comptime("i32"),
    },
    ParamSpec {
        name: "team",
        kind: ParamKind::Team,
    },
];

#[test]
#[ignore = "needs a GPU and NVSHMEM"]
fn kernels_use_nvshmem_through_the_jit() {
    let pgas = pgas_runtime::init().expect("init");
    let mut out = pgas.alloc::<i32>(2).unwrap();
    let spec = pe_spec();

    prewarm(
        &pgas,
        &[Prewarm {
            spec,
            variant: Variant::Checked,
            comptime: &[7],
        }],
    )
    .unwrap();
    let mut args = KernelArgs::new();
    args.push_sym_mut(&mut out).push_team(Team::WORLD);
    launch(
        &pgas,
        spec,
        Variant::Checked,
        &[7],
        LaunchConfig::blocks(1, 32),
        None,
        &mut args,
    )
    .unwrap();
    let n = pgas.n_pes() as i32;
    assert_eq!(
        out.to_vec().unwrap(),
        vec![pgas.my_pe() as i32 + 100 * n + 7, n]
    );

    // A raw kernel with the NVSHMEM prelude, launched on another stream of the context.
    let raw = RawKernel::from_source(
        r#"extern "C" __global__ void put_me(int* x, unsigned long long n) {
            if (threadIdx.x == 0) nvshmem_int_p(x, 40 + nvshmem_my_pe(), nvshmem_my_pe());
            nvshmem_quiet();
        }"#,
        "put_me",
    );
    let stream = pgas.cuda().new_stream().unwrap();
    let mut args = KernelArgs::new();
    args.push_sym_mut(&mut out);
    // SAFETY: `args` is `out`'s pointer and length, put_me's parameters; it writes out[0] on
    // this PE only, and `stream` is of pgas's context.
    unsafe { raw.launch_on(&pgas, &stream, LaunchConfig::blocks(1, 32), &mut args) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap()[0], 40 + pgas.my_pe() as i32);

    // A compile error is an Err naming the kernel, and the context stays usable.
    let bad = RawKernel::from_source("extern \"C\" __global__ void bad() { nope(); }", "bad");
    // SAFETY: `bad` takes no parameters (and fails to compile before any launch).
    let err = unsafe { bad.launch(&pgas, LaunchConfig::blocks(1, 1), &mut KernelArgs::new()) }
        .unwrap_err();
    assert!(
        matches!(&err, Error::Compile { kernel, .. } if kernel.contains("bad")),
        "{err}"
    );
    drop(out);
    // Dropping the last handle finalizes the modules, then NVSHMEM.
    drop(pgas);
}
