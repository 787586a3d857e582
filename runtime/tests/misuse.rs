//! Runtime misuse that needs no GPU: each case returns its `Err` variant (never a panic or an
//! abort) with a message that names the fix. One test per row of `docs/faults.md` that can run
//! on a CPU; the rows that need a GPU are in tests/gpu_suite/misuse.rs, the ones that only a
//! private function reaches are unit tests next to it (the table names each).

use pgas_runtime::bootstrap::{self, env, Bootstrap};
use pgas_runtime::heap;
use pgas_runtime::kernel::{KernelSpec, ParamKind, ParamSpec};
use pgas_runtime::launch::{KernelArgs, LaunchConfig, MAX_PARAMS};
use pgas_runtime::{Error, LaunchCause, Result, SymRegion};

/// `Err` whose message contains every one of `fix`.
fn fails_with<T: std::fmt::Debug>(r: Result<T>, fix: &[&str]) -> Error {
    let e = r.expect_err("expected an error");
    let msg = e.to_string();
    for part in fix {
        assert!(msg.contains(part), "the message lacks {part:?}: {msg}");
    }
    e
}

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn heap_size_zero() {
    // Refused before the driver, NVSHMEM or the phase change, so this runs anywhere.
    let e = fails_with(
        pgas_runtime::builder().heap_size(0).init(),
        &["at least one byte", "Fix: pass its size in bytes"],
    );
    assert!(matches!(
        e,
        Error::InvalidConfig {
            name: "PgasBuilder::heap_size",
            ..
        }
    ));
}

#[test]
fn heap_size_variable_unparsable() {
    let e = fails_with(
        heap::parse_size("4 gigs"),
        &["NVSHMEM_SYMMETRIC_SIZE", "e.g. 4G"],
    );
    assert!(matches!(e, Error::InvalidConfig { .. }));
}

#[test]
fn zero_length_allocation() {
    let e = fails_with(
        heap::check_alloc(0, 4, 1 << 20),
        &["Fix: allocate at least one element"],
    );
    assert!(matches!(e, Error::EmptyAllocation));
}

#[test]
fn allocation_over_the_heap() {
    let e = fails_with(
        heap::check_alloc(1 << 20, 8, 1 << 20),
        &[
            "8388608 bytes",
            "PgasBuilder::heap_size",
            "NVSHMEM_SYMMETRIC_SIZE",
        ],
    );
    assert!(matches!(
        e,
        Error::HeapExhausted {
            requested: 8388608,
            ..
        }
    ));
}

#[test]
fn allocation_size_overflows() {
    let e = fails_with(
        heap::check_alloc(usize::MAX / 2, 16, 1 << 30),
        &["Fix: raise it"],
    );
    assert!(matches!(
        e,
        Error::HeapExhausted {
            requested: usize::MAX,
            ..
        }
    ));
}

#[test]
fn gpu_ordinal_beyond_the_visible_gpus() {
    let e = fails_with(
        bootstrap::pick_device(Some(3), &env_of(&[]), 2),
        &["GPU 3", "only 2 GPU", "Fix:"],
    );
    assert!(matches!(
        e,
        Error::NoSuchDevice {
            requested: 3,
            count: 2,
            ..
        }
    ));
}

#[test]
fn device_variable_unparsable() {
    let e = fails_with(
        bootstrap::pick_device(None, &env_of(&[("PGAS_DEVICE", "gpu1")]), 2),
        &["PGAS_DEVICE", "Fix: set it to a number"],
    );
    assert!(matches!(e, Error::InvalidConfig { .. }));
    let e = fails_with(
        env::local_rank(&env_of(&[("SLURM_LOCALID", "-1")])),
        &["SLURM_LOCALID", "Fix:"],
    );
    assert!(matches!(e, Error::InvalidConfig { .. }));
}

#[test]
fn mpi_launch_without_the_mpi_feature() {
    let r = bootstrap::resolve(Bootstrap::Auto, &env_of(&[("OMPI_COMM_WORLD_SIZE", "4")]));
    if cfg!(feature = "mpi") {
        assert_eq!(r.unwrap(), Bootstrap::Mpi);
        return;
    }
    let e = fails_with(
        r,
        &["Fix: build with `--features mpi`", "NVSHMEM_BOOTSTRAP=MPI"],
    );
    assert!(matches!(e, Error::MpiNotEnabled));
}

/// The cause of the refused launch, after its message was checked.
fn launch_err(cfg: LaunchConfig, fix: &str) -> LaunchCause {
    match fails_with(cfg.validate("k"), &["cannot launch kernel `k`", fix]) {
        Error::Launch { cause, .. } => cause,
        other => panic!("expected a launch error, got {other}"),
    }
}

#[test]
fn launch_with_a_zero_dimension() {
    let cause = launch_err(
        LaunchConfig::blocks(0, 128),
        "Fix: make every dimension at least 1",
    );
    assert!(matches!(cause, LaunchCause::ZeroDimension { .. }));
    let cause = launch_err(LaunchConfig::dims((1, 1, 1), (32, 0, 1)), "at least 1");
    assert_eq!(
        cause,
        LaunchCause::ZeroDimension {
            grid: (1, 1, 1),
            block: (32, 0, 1)
        }
    );
}

#[test]
fn launch_with_more_than_1024_threads_per_block() {
    let cause = launch_err(
        LaunchConfig::blocks(1, 2048),
        "Fix: use at most 1024 threads per block",
    );
    assert!(matches!(
        cause,
        LaunchCause::BlockTooLarge { threads: 2048, .. }
    ));
    let cause = launch_err(LaunchConfig::dims((1, 1, 1), (1, 1, 128)), "z at most 64");
    assert!(matches!(
        cause,
        LaunchCause::BlockTooLarge { threads: 128, .. }
    ));
}

#[test]
fn launch_grid_beyond_cuda_limits() {
    let cause = launch_err(
        LaunchConfig::dims((1, 70_000, 1), (32, 1, 1)),
        "Fix: loop inside the kernel",
    );
    assert!(matches!(cause, LaunchCause::GridTooLarge { .. }));
}

struct Fake(u64, usize);
// SAFETY: these tests only pack and check arguments; nothing launches with them.
unsafe impl SymRegion<f32> for Fake {
    fn as_device_ptr(&self) -> u64 {
        self.0
    }
    fn len(&self) -> usize {
        self.1
    }
}

static SPEC: KernelSpec = KernelSpec {
    rust_name: "scale",
    cuda_name: "scale_c",
    file: "src/x.rs",
    line: 1,
    plain_source: "",
    checked_source: "",
    params: &[
        ParamSpec {
            name: "x",
            kind: ParamKind::Sym {
                elem: "f32",
                mutable: true,
            },
        },
        ParamSpec {
            name: "factor",
            kind: ParamKind::Scalar("f32"),
        },
    ],
    collective: false,
    max_threads: None,
};

#[test]
fn hand_built_arguments_that_do_not_match_the_kernel() {
    let x = Fake(0x1000, 8);
    let fix = "Fix: call the kernel's generated `launch`";
    let mut a = KernelArgs::new();
    a.push_sym(&x);
    let e = fails_with(a.check(&SPEC, &[]), &["expected 2 arguments, got 1", fix]);
    let count = LaunchCause::ArgumentCount {
        expected: 2,
        got: 1,
    };
    assert!(matches!(e, Error::Launch { cause, .. } if cause == count));
    let mut a = KernelArgs::new();
    a.push_sym(&x).push_scalar(2.0f64);
    let e = fails_with(a.check(&SPEC, &[]), &["`factor`", "f64", fix]);
    assert!(matches!(
        e,
        Error::Launch {
            cause: LaunchCause::ArgumentKind { index: 1, .. },
            ..
        }
    ));
    let mut a = KernelArgs::new();
    a.push_sym(&x).push_scalar(2.0f32);
    a.check(&SPEC, &[]).unwrap();
    let e = fails_with(a.check(&SPEC, &[3]), &["expected 0 comptime values", fix]);
    assert!(matches!(
        e,
        Error::Launch {
            cause: LaunchCause::ComptimeCount {
                expected: 0,
                got: 1,
                ..
            },
            ..
        }
    ));
}

#[test]
fn too_many_kernel_parameters() {
    let x = Fake(0x1000, 8);
    let mut a = KernelArgs::new();
    for _ in 0..MAX_PARAMS {
        a.push_sym(&x);
    }
    let e = fails_with(
        a.check(&SPEC, &[]),
        &["too many parameters", "Fix: pass fewer"],
    );
    assert!(matches!(
        e,
        Error::Launch {
            cause: LaunchCause::TooManyParams { .. },
            ..
        }
    ));
}

#[test]
fn pgas_run_with_more_ranks_than_gpus() {
    use pgas_runtime::launcher::{launch, RunArgs};
    let args = RunArgs {
        nproc: 3,
        gpus: None,
        share_gpus: false,
        nodes: None,
        program: "/bin/true".into(),
        args: vec![],
    };
    let e = fails_with(launch(&args, 2), &["3 ranks", "Use -n 2 or fewer"]);
    assert!(matches!(e, Error::Launcher(_)));
}

#[test]
fn unique_id_start_up_with_a_bad_rank_or_bad_bytes() {
    // Refused before the driver or NVSHMEM is touched (docs/faults.md rows 49 and 50).
    let bytes = {
        // A well-formed empty id: the version word NVSHMEM's initializer writes, then zeroes.
        let mut b = [0u8; bootstrap::UniqueId::LEN];
        b[..4].copy_from_slice(&((1i32 << 16) + 128).to_le_bytes());
        b
    };
    let id = bootstrap::UniqueId::from_bytes(&bytes).expect("a well-formed id");
    let e = fails_with(
        pgas_runtime::builder().unique_id(id, 2, 2).init(),
        &["rank 2 of 2 PEs", "Fix:"],
    );
    assert!(matches!(e, Error::Bootstrap { .. }));
    fails_with(
        pgas_runtime::builder()
            .bootstrap(Bootstrap::UniqueId)
            .init(),
        &["unique_id(id, rank, n_pes)"],
    );
    fails_with(
        bootstrap::UniqueId::from_bytes(&bytes[..100]),
        &["100 bytes", "Fix:"],
    );
}
