//! Collective launch: a kernel that calls a device barrier must have all its blocks resident at
//! once. Too large a grid must come back as the runtime's error naming the largest grid that
//! fits; that largest grid must then launch and run.
//!
//! Block size (issue 13): a block the kernel cannot run at all (registers, its `max_threads`,
//! shared memory) must come back as `Error::BlockDoesNotFit`, naming the cause and the largest
//! block that fits, on collective and plain launches; a kernel that declares
//! `max_threads = 1024` must run collectively at 1024 threads.

use crate::runner::{case, Case};
use crate::util::{self, ensure, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("launch/collective_grid_too_large", too_large),
    case("launch/collective_1024_unbounded", unbounded_1024),
    case("launch/collective_1024_bounded", bounded_1024),
    case("launch/plain_block_over_bound", plain_over_bound),
    case(
        "launch/plain_shared_memory_too_large",
        plain_shared_too_large,
    ),
    case("launch/tiers_swap_in_the_full_build", tiers_swap),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &grid_barrier::SPEC,
    &looped_all_reduce::SPEC,
    &bounded_all_reduce::SPEC,
    &bounded_fill::SPEC,
];

/// More blocks than any GPU holds at once (an H200 holds at most 8 blocks of 256 threads on each
/// of its 132 SMs). 256 threads, not 1024, so that even a register-hungry build of the kernel
/// fits at least one block per SM.
const TOO_MANY: u32 = 100_000;
const THREADS: u32 = 256;

#[pgas_kernel]
fn grid_barrier(out: &mut SymTensor<u32>) {
    if block_idx_x() == 0 && thread_idx_x() == 0 {
        barrier_all();
    }
    if thread_idx_x() == 0 {
        out[block_idx_x() as usize] = block_idx_x() + 1;
    }
}

fn too_large(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u32>(TOO_MANY as usize)?;
    out.fill(0)?;
    p.barrier_all()?;
    let err = match grid_barrier::launch(p, LaunchConfig::blocks(TOO_MANY, THREADS), &mut out) {
        Ok(()) => {
            util::settle(p)?;
            return Err(format!(
                "a collective launch of {TOO_MANY} x {THREADS} threads was accepted"
            )
            .into());
        }
        Err(e) => e,
    };
    let msg = err.to_string();
    let (max, per_sm) = match &err {
        pgas::Error::CollectiveGrid { max, per_sm, .. } => (*max, *per_sm),
        other => return Err(format!("expected the collective-grid error, got: {other}").into()),
    };
    ensure(
        max > 0 && max < TOO_MANY as u64 && msg.contains(&max.to_string()),
        || format!("the error does not name a usable largest grid: {msg}"),
    )?;
    // PEs sharing a GPU under CUDA MPS (`pgas-run --share-gpus` gives each its
    // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) count a block an SM of their share: fuller grids hung
    // there (docs/runtime.md).
    let share = std::env::var("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE").ok();
    if share
        .and_then(|v| v.trim().parse::<f64>().ok())
        .is_some_and(|s| s < 100.0)
    {
        ensure(per_sm == 1 && msg.contains("CUDA MPS"), || {
            format!("under CUDA MPS the error should count a block an SM and say why: {msg}")
        })?;
    }
    println!(
        "gpu_suite[pe {}]: collective grid error as expected: {msg}",
        util::me(p)
    );
    // The largest grid it names must fit and run; every block leaves its mark.
    grid_barrier::launch(p, LaunchConfig::blocks(max as u32, THREADS), &mut out)?;
    util::settle(p)?;
    let v = out.to_vec()?;
    let want: Vec<u32> = (1..=max as u32).collect();
    util::check_eq(
        &format!("largest grid ({max} blocks) ran"),
        &v[..max as usize],
        &want,
    )?;
    ensure(v[max as usize..].iter().all(|&x| x == 0), || {
        "blocks past the grid wrote".into()
    })
}

/// Elements each all-reduce sums, and how many times the kernels repeat it.
const NN: usize = 4096;
const ITERS: u32 = 3;

/// Issue 13's kernel: a loop around `reduce_block`. Its inlined NVSHMEM reduction takes more
/// registers than blocks of 1024 threads can have (more than 64 per thread) unless bounded.
#[pgas_kernel]
fn looped_all_reduce(
    team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, nn: usize, iters: u32,
) {
    for _ in 0..iters {
        reduce_block(team, &mut dst[0..nn], &src[0..nn], ReduceOp::Sum);
    }
}

/// The same kernel with the bound: NVRTC keeps it within 64 registers per thread.
#[pgas_kernel(max_threads = 1024)]
fn bounded_all_reduce(
    team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, nn: usize, iters: u32,
) {
    for _ in 0..iters {
        reduce_block(team, &mut dst[0..nn], &src[0..nn], ReduceOp::Sum);
    }
}

/// The kernel of the tiers case: an all-reduce whose comptime `salt`, new in every run, makes
/// it a kernel no cache holds. (It also picks one or two reductions: both leave the same sums.)
#[pgas_kernel(max_threads = 512)]
fn salted_all_reduce(
    team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, nn: usize, #[comptime] salt: u32,
) {
    for _ in 0..(salt % 2 + 1) {
        reduce_block(team, &mut dst[0..nn], &src[0..nn], ReduceOp::Sum);
    }
}

/// A plain kernel bounded below the largest block.
#[pgas_kernel(max_threads = 256)]
fn bounded_fill(out: &mut SymTensor<u32>) {
    let i = global_thread_idx();
    if i < out.len() {
        out[i] = i as u32 + 1;
    }
}

/// Element `i` of PE `pe`'s input: small integers, so every sum is exact in any order.
fn reduce_input(pe: usize, i: usize) -> f32 {
    ((pe + 1) * (i % 7)) as f32
}

/// Inputs of this PE and a `dst` of NaNs, ready on every PE.
fn reduce_buffers(p: &Pgas) -> Result<(SymTensor<f32>, SymTensor<f32>), pgas::Error> {
    let me = util::me(p);
    let src = p.alloc_from(&(0..NN).map(|i| reduce_input(me, i)).collect::<Vec<_>>())?;
    let mut dst = p.alloc::<f32>(NN)?;
    dst.fill(f32::NAN)?;
    p.barrier_all()?;
    Ok((src, dst))
}

/// After a launch on every PE: `dst` must hold the sum over the PEs.
fn check_reduced(p: &Pgas, dst: &SymTensor<f32>, what: &str) -> CaseResult {
    util::settle(p)?;
    let n = util::npes(p);
    let want: Vec<f32> = (0..NN)
        .map(|i| (0..n).map(|pe| reduce_input(pe, i)).sum())
        .collect();
    util::check_eq(what, &dst.to_vec()?, &want)
}

/// Without the bound, at 1024 threads: on the GPUs we run (H100, H200) the kernel does not fit,
/// and the error must name the block size as the cause, with the largest block that fits, which
/// must then run. Where the kernel does fit at 1024 threads, it must have run correctly; any
/// other error (the old "launch at most 0 blocks" included) fails.
fn unbounded_1024(p: &Pgas) -> CaseResult {
    let (src, mut dst) = reduce_buffers(p)?;
    let cfg = LaunchConfig::blocks(1, 1024);
    let outcome = looped_all_reduce::launch(p, cfg, Team::WORLD, &mut dst, &src, NN, ITERS);
    let err = match outcome {
        Ok(()) => {
            println!(
                "gpu_suite[pe {}]: the unbounded kernel fits 1024 threads on this GPU; checking \
                 its result only",
                util::me(p)
            );
            return check_reduced(p, &dst, "unbounded all-reduce at 1024 threads");
        }
        Err(e) => e,
    };
    let msg = err.to_string();
    let pgas::Error::BlockDoesNotFit {
        threads,
        collective,
        max_threads,
        ..
    } = err
    else {
        return Err(format!("expected Error::BlockDoesNotFit, got: {msg}").into());
    };
    println!(
        "gpu_suite[pe {}]: block error as expected: {msg}",
        util::me(p)
    );
    ensure(threads == 1024 && collective, || {
        format!("the error names the wrong launch: {msg}")
    })?;
    ensure(
        (1..1024).contains(&max_threads)
            && msg.contains(&format!(
                "The largest block that fits is {max_threads} threads"
            )),
        || format!("the error does not name a usable largest block: {msg}"),
    )?;
    for part in [
        "registers per thread",
        "max_threads = 1024",
        "Fix: launch at most",
    ] {
        ensure(msg.contains(part), || {
            format!("the error lacks {part:?}: {msg}")
        })?;
    }
    ensure(!msg.contains("at most 0"), || {
        format!("the error gives impossible advice: {msg}")
    })?;
    // The largest block it names must launch and compute the right sums.
    let cfg = LaunchConfig::blocks(1, max_threads);
    looped_all_reduce::launch(p, cfg, Team::WORLD, &mut dst, &src, NN, ITERS)?;
    check_reduced(
        p,
        &dst,
        &format!("unbounded all-reduce at the largest block, {max_threads} threads"),
    )
}

/// With `max_threads = 1024` the same kernel runs collectively at 1024 threads.
fn bounded_1024(p: &Pgas) -> CaseResult {
    let (src, mut dst) = reduce_buffers(p)?;
    let cfg = LaunchConfig::blocks(1, 1024);
    bounded_all_reduce::launch(p, cfg, Team::WORLD, &mut dst, &src, NN, ITERS)?;
    check_reduced(p, &dst, "bounded all-reduce at 1024 threads")
}

/// A plain launch past the kernel's `max_threads` is refused, naming the bound; at the bound it
/// runs.
fn plain_over_bound(p: &Pgas) -> CaseResult {
    const N: usize = 512;
    let mut out = p.alloc::<u32>(N)?;
    out.fill(0)?;
    let msg = match bounded_fill::launch(p, LaunchConfig::blocks(1, 512), &mut out) {
        Ok(()) => return Err("a block of 512 threads past max_threads = 256 was accepted".into()),
        Err(
            e @ pgas::Error::BlockDoesNotFit {
                threads: 512,
                collective: false,
                max_threads: 256,
                ..
            },
        ) => e.to_string(),
        Err(e) => return Err(format!("expected the max_threads error, got: {e}").into()),
    };
    for part in [
        "max_threads = 256",
        "Fix: launch at most 256 threads per block",
    ] {
        ensure(msg.contains(part), || {
            format!("the error lacks {part:?}: {msg}")
        })?;
    }
    bounded_fill::launch(p, LaunchConfig::blocks(2, 256), &mut out)?;
    p.stream().synchronize()?;
    let want: Vec<u32> = (1..=N as u32).collect();
    util::check_eq("fill at the bound", &out.to_vec()?, &want)
}

/// More dynamic shared memory than any GPU gives a block is refused before the driver sees it,
/// naming shared memory as the cause.
fn plain_shared_too_large(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u32>(256)?;
    let cfg = LaunchConfig::blocks(1, 256).with_shared_mem(1 << 20);
    let msg = match bounded_fill::launch(p, cfg, &mut out) {
        Ok(()) => return Err("1 MiB of shared memory per block was accepted".into()),
        Err(e @ pgas::Error::BlockDoesNotFit { max_threads: 0, .. }) => e.to_string(),
        Err(e) => return Err(format!("expected the shared-memory error, got: {e}").into()),
    };
    ensure(
        msg.contains("1048576 bytes of dynamic shared memory")
            && msg.contains("No block size fits with this much shared memory"),
        || format!("the error does not name the shared memory: {msg}"),
    )
}

/// Tiers (docs/jit.md): a kernel calling an NVSHMEM device collective that no cache holds first
/// runs its quick build, and `finish_compiles` puts its full build in place on every PE; both
/// leave the right sums. The salt is PE 0's clock, broadcast, so every PE builds the same new
/// kernel. Under `PGAS_JIT_TIERS=off` the full build loads at once and nothing is swapped in.
fn tiers_swap(p: &Pgas) -> CaseResult {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.subsec_nanos());
    let mine = p.alloc_from(&[nanos])?;
    let salt = p.alloc::<u32>(1)?;
    p.broadcast(Team::WORLD, &salt, &mine, 0)?;
    let salt = salt.to_vec()?[0];
    let (src, mut dst) = reduce_buffers(p)?;
    let cfg = LaunchConfig::blocks(1, 256);
    salted_all_reduce::launch(p, cfg, Team::WORLD, &mut dst, &src, NN, salt)?;
    check_reduced(p, &dst, "the first launch (quick build)")?;
    let swapped = pgas::launch::finish_compiles(p);
    let tiers_off = std::env::var("PGAS_JIT_TIERS").is_ok_and(|v| v.trim() == "off");
    ensure(tiers_off || swapped >= 1, || {
        format!("finish_compiles swapped in {swapped} full builds after a cold collective kernel")
    })?;
    ensure(pgas::launch::finish_compiles(p) == 0, || {
        "a second finish_compiles found more to swap in".into()
    })?;
    dst.fill(f32::NAN)?;
    p.barrier_all()?;
    salted_all_reduce::launch(p, cfg, Team::WORLD, &mut dst, &src, NN, salt)?;
    check_reduced(p, &dst, "the launch after finish_compiles (full build)")?;
    println!(
        "gpu_suite[pe {}]: tiers: {swapped} full build(s) swapped in (salt {salt})",
        util::me(p)
    );
    Ok(())
}
