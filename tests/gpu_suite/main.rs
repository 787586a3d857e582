//! The GPU test suite: every row of the kernel language (`shared/spec/dsl.md`) run on real GPUs,
//! each result checked against an expectation computed on the host.
//!
//! It is one program that every PE runs: `gpu_suite` alone is one PE, `pgas-run -n N gpu_suite`
//! is N. With one PE every "remote" target is the PE itself, so the same cases run everywhere.
//! Each case returns `Err` with what differed; the runner prints one line per case and PE, then
//! PE 0 prints the verdict over all PEs, ending with exactly `gpu_suite: N passed, M failed`, and
//! every PE exits non-zero when any case failed on any PE.
//!
//! A checked launch that catches a bad index or `pe` traps, and a trap kills the CUDA context, so
//! those two run as separate invocations: `gpu_suite --expect-trap oob|local-oob|bad-pe` (see `traps.rs`).
//! `pgas-run -n 2 gpu_suite --rank-death panic|abort|kill|kill-in-kernel` kills one PE while the
//! others wait for it (see `faults.rs`).
//! `gpu_suite --heap-exhaustion` fills the symmetric heap and runs set-ups into its end, in a
//! process of its own (`misuse.rs`).
//! `gpu_suite --expect-hang` checks that the watchdog ends a hung case cleanly (`faults.rs`).
//! `pgas-run -n N gpu_suite --differential SEED CALLS [SECONDS]` is randomized differential
//! testing: up to CALLS calls of `pgas::coll` (every collective, type, op, algorithm, size from 0
//! to 32 MiB, offset, in place or not, stream, graph capture) and some of `pgas::ops` at random
//! shapes, drawn from SEED alike on every PE, each checked against a host reference; it stops
//! drawing after SECONDS, and PE 0 ends with one line `differential: seed S, N calls (...), M
//! mismatches, T s` (see `differential.rs`; the same SEED reproduces the same calls).
//! `pgas-run -n N gpu_suite --uid-bootstrap DIR [CASE...]` starts from a unique id that rank 0
//! writes to a file in DIR, not through pgas's bootstraps (see `uid_start.rs`).
//! `gpu_suite CASE...` runs only the cases whose names contain one of the given words.
//!
//! Without a GPU it prints `gpu_suite: skipped: no GPU` and exits 0 (`cargo test
//! --all-features` on a CPU machine runs it so; CI's test step leaves out the `gpu` feature and
//! with it this binary, which clippy still checks).

mod amo;
mod arrays;
mod attention;
mod cluster;
mod coll;
mod collectives;
mod differential;
mod faults;
mod gemm_shapes;
mod halo;
mod hopper;
mod host_api;
mod host_collectives;
mod intrinsics;
/// Kernels the suite launches that are also the compiler's corpus: `codegen/tests/corpus.rs`
/// snapshots their CUDA and `tests/nvrtc/corpus.rs` compiles it, so one text serves all three.
mod kernels {
    // Each file also holds kernels that only the snapshot and NVRTC tests compile.
    #![allow(dead_code)]
    // The snapshots hold the files' line numbers (`#line`), so rustfmt leaves their layout.
    #[rustfmt::skip]
    pub mod arrays;
    #[rustfmt::skip]
    pub mod cluster;
    #[rustfmt::skip]
    pub mod fp8;
    #[rustfmt::skip]
    pub mod hopper;
    #[rustfmt::skip]
    pub mod multimem;
    #[rustfmt::skip]
    pub mod tensor;
}
mod generic;
mod launch;
mod math;
mod misuse;
mod moe;
mod moe_ll;
mod ops;
mod ops_rmsnorm;
mod ops_rs;
mod parity;
mod peer;
mod reach;
mod rma;
mod runner;
mod signals;
mod subset;
mod sync;
mod tensor;
mod traps;
mod types;
mod uid_start;
mod util;
mod versions;

use std::process::ExitCode;

fn main() -> ExitCode {
    // `cargo test` passes harness flags such as `--nocapture`; they mean nothing here.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| {
            !a.starts_with("--")
                || [
                    "--expect-trap",
                    "--rank-death",
                    "--expect-hang",
                    "--differential",
                    "--heap-exhaustion",
                    "--uid-bootstrap",
                ]
                .contains(&a.as_str())
        })
        .collect();
    if !util::gpu_present() {
        println!("gpu_suite: skipped: no GPU (no CUDA driver or no device on this machine)");
        return ExitCode::SUCCESS;
    }
    if let Some(pos) = args.iter().position(|a| a == "--expect-trap") {
        let which = args.get(pos + 1).map(String::as_str).unwrap_or("");
        return traps::run(which);
    }
    if args.iter().any(|a| a == "--heap-exhaustion") {
        return runner::run(&[misuse::HEAP_EXHAUSTION], &[], &[]);
    }
    if args.iter().any(|a| a == "--expect-hang") {
        return faults::expect_hang();
    }
    if let Some(pos) = args.iter().position(|a| a == "--rank-death") {
        return faults::run(args.get(pos + 1).map(String::as_str).unwrap_or(""));
    }
    if let Some(pos) = args.iter().position(|a| a == "--uid-bootstrap") {
        let Some(dir) = args.get(pos + 1) else {
            println!(
                "gpu_suite: FAIL arguments: --uid-bootstrap DIR (a folder every rank can read)"
            );
            return ExitCode::FAILURE;
        };
        let filters: Vec<String> = args[pos + 2..].to_vec();
        return uid_start::run(dir, &filters);
    }
    if args.iter().any(|a| a == "--differential") {
        return differential::run(&args);
    }
    let cases: Vec<runner::Case> = [
        subset::CASES,
        types::CASES,
        math::CASES,
        generic::CASES,
        intrinsics::CASES,
        rma::CASES,
        signals::CASES,
        amo::CASES,
        sync::CASES,
        collectives::CASES,
        host_collectives::CASES,
        coll::CASES,
        moe::CASES,
        moe_ll::CASES,
        halo::CASES,
        ops::CASES,
        ops_rmsnorm::CASES,
        versions::CASES,
        peer::CASES,
        launch::CASES,
        tensor::CASES,
        arrays::CASES,
        hopper::CASES,
        attention::CASES,
        cluster::CASES,
        gemm_shapes::CASES,
        ops_rs::CASES,
        reach::CASES,
        misuse::CASES,
        // Last: the newest calls into NVSHMEM, so that if one of them took the process down, every
        // older case would still have reported.
        host_api::CASES,
        parity::CASES,
    ]
    .concat();
    let kernels: Vec<&'static pgas::kernel::KernelSpec> = [
        subset::KERNELS,
        types::KERNELS,
        math::KERNELS,
        generic::KERNELS,
        intrinsics::KERNELS,
        rma::KERNELS,
        signals::KERNELS,
        amo::KERNELS,
        sync::KERNELS,
        collectives::KERNELS,
        coll::KERNELS,
        halo::KERNELS,
        peer::KERNELS,
        launch::KERNELS,
        tensor::KERNELS,
        arrays::KERNELS,
        misuse::KERNELS,
        hopper::KERNELS,
        cluster::KERNELS,
        parity::KERNELS,
    ]
    .concat();
    runner::run(&cases, &kernels, &args)
}
