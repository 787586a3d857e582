//! What the JIT costs, on one PE (`jit_costs`, no launcher):
//! - NVSHMEM init: wall time of `pgas::init()`;
//! - toolchain discovery plus a first trivial compile (what the first kernel of a process pays);
//! - cold compile of a typical kernel (the `ring_shift` of the README: `put_signal_block` and
//!   `signal_wait_until`), in a fresh `PGAS_CACHE_DIR`: NVRTC, cache store, module load,
//!   `nvshmemx_cumodule_init`; for the DSL kernel and for the same kernel in CUDA C; link-time
//!   unless `PGAS_JIT_LTO=off` (the first such kernel also builds the NVSHMEM library), then the
//!   median of 5 more new point-to-point kernels (what each next kernel costs);
//! - cold compile of a kernel with a device collective (`reduce_block` in a loop, the full
//!   prelude): the first, which also builds NVSHMEM's reduction as a collective object once per
//!   machine (its quick build, docs/jit.md "Tiers", or under `PGAS_JIT_LTO=all`), then the
//!   median of 5 more new kernels calling it (what each next collective kernel costs); the
//!   reduction's speed on the quick build, the wait for the full builds (`finish_compiles`),
//!   and its speed on the full build; of a kernel with pgas's own in-kernel all-reduce
//!   (`team_all_reduce_block`, point-to-point prelude), the first and the median of 5 more; and
//!   of 16 specializations of one kernel (16 comptime values) in one `prewarm`,
//!   which the JIT compiles as one or two NVRTC programs (two where helper processes compile
//!   beside it, docs/jit.md);
//! - disk-cache load of it: a fresh JIT state (memory cache empty) over the same cache dir;
//! - in-memory hit: the lookup a launch does once the kernel is loaded;
//! - host cost of one cached launch: DSL `launch` (checked variant) and `launch_unchecked`,
//!   `RawKernel` launch, and a bare `cuLaunchKernel` of the very same `CUfunction` (cudarc's
//!   `result` layer), each the median over many launches of an empty kernel.
//!
//! The cache-layer figures use `pgas::launch::Bare` (a JIT state without NVSHMEM; it compiles and
//! loads exactly like a `Pgas` but skips `cumodule_init`), because a process holds one `Pgas`.

mod common;

use common::{median, wall, BenchResult, Figure};
use pgas::cudarc::driver::result;
use pgas::kernel::Variant;
use pgas::launch::{Bare, KernelArgs, Prewarm, RawKernel};
use pgas::prelude::*;
use std::ffi::c_void;
use std::time::Instant;

const BENCH: &str = "jit_costs";
/// Launches timed per launch kind; the stream is drained every `DRAIN` launches, untimed, so the
/// launch queue never fills (a full queue would make launches wait on the GPU).
const LAUNCHES: usize = 20_000;
const DRAIN: usize = 256;
const HITS: usize = 10_000;

#[pgas_kernel]
fn ring_shift(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut SymTensor<u64>) {
    let peer = (my_pe() + 1) % n_pes();
    put_signal_block(dst, src, &mut sig[0], 1, SignalOp::Set, peer);
    signal_wait_until(&sig[0], Cmp::Eq, 1);
}

const CUDA_RING: &str = r#"
extern "C" __global__ void cuda_ring_shift(float* dst, unsigned long long dst_len,
                                           const float* src, unsigned long long src_len,
                                           uint64_t* sig, unsigned long long sig_len) {
    int peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
    unsigned long long n = dst_len < src_len ? dst_len : src_len;
    nvshmemx_float_put_signal_block(dst, src, n, sig, 1, NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
}
"#;

/// `ring_shift` with a comptime scale: each value is a new point-to-point kernel, so the cold
/// compile of a user's next kernel (the JIT experimentation loop) can be timed several times.
#[pgas_kernel]
fn ring_shift_scaled(
    #[comptime] k: u32, dst: &mut SymTensor<f32>, src: &mut SymTensor<f32>,
    sig: &mut SymTensor<u64>,
) {
    let i = global_thread_idx();
    if i < src.len() {
        src[i] = src[i] * k as f32;
    }
    sync_threads();
    let peer = (my_pe() + 1) % n_pes();
    put_signal_block(dst, src, &mut sig[0], 1, SignalOp::Set, peer);
    signal_wait_until(&sig[0], Cmp::Eq, 1);
}

/// A kernel with a device collective: it starts with the full prelude. Bounded to the blocks
/// of 512 threads it is timed with, as a kernel calling a block collective should be (an
/// unbounded one may use more registers than 512 threads can have: `unbounded_reduce_loop`).
#[pgas_kernel(max_threads = 512)]
fn reduce_loop(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, rounds: u32) {
    let n = dst.len();
    for _ in 0..rounds {
        reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
    }
}

/// `reduce_loop` without a launch bound, as a user who declares none writes it: the bench says
/// whether each of its builds runs the blocks of 512 threads its collective object's register
/// cap promises (a line, not a figure).
#[pgas_kernel]
fn unbounded_reduce_loop(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, rounds: u32) {
    let n = dst.len();
    for _ in 0..rounds {
        reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
    }
}

/// The next collective kernels: each comptime value is a new kernel calling the same
/// reduction.
#[pgas_kernel(max_threads = 512)]
fn reduce_loop_scaled(
    #[comptime] k: u32, team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, rounds: u32,
) {
    let n = dst.len();
    for _ in 0..rounds * k {
        reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
    }
}

/// The same loop with pgas's own in-kernel all-reduce (`team_all_reduce_block`: the LL protocol
/// over peer memory, docs/coll.md): the point-to-point prelude, no NVSHMEM collective code.
#[pgas_kernel(max_threads = 512)]
fn ll_reduce_loop(
    team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, scratch: &mut SymTensor<u64>,
    rounds: u32,
) {
    let n = dst.len();
    for _ in 0..rounds {
        team_all_reduce_block(
            team,
            &mut dst[0..n],
            &src[0..n],
            &mut scratch[0],
            ReduceOp::Sum,
        );
    }
}

/// The next kernels of that kind: each comptime value is a new kernel.
#[pgas_kernel(max_threads = 512)]
fn ll_reduce_loop_scaled(
    #[comptime] k: u32, team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>,
    scratch: &mut SymTensor<u64>, rounds: u32,
) {
    let n = dst.len();
    for _ in 0..rounds * k {
        team_all_reduce_block(
            team,
            &mut dst[0..n],
            &src[0..n],
            &mut scratch[0],
            ReduceOp::Sum,
        );
    }
}

/// One kernel, many specializations: each comptime value is its own kernel.
#[pgas_kernel]
fn scaled(#[comptime] k: u32, x: &mut SymTensor<f32>) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = x[i] * k as f32;
    }
}

#[pgas_kernel]
fn empty_dsl(x: &mut SymTensor<u32>) {
    if x.len() == 0 {
        x[0] = 1;
    }
}

const CUDA_EMPTY: &str = r#"
extern "C" __global__ void cuda_empty(unsigned int* x, unsigned long long len) {
    if (len == 0) x[0] = 1;
}
"#;

const CUDA_TRIVIAL: &str = r#"
extern "C" __global__ void cuda_trivial(unsigned int* x, unsigned long long len) { }
"#;

/// Median host time of one call of `launch`, in microseconds.
fn per_launch(
    stream_sync: &dyn Fn() -> BenchResult<()>, mut launch: impl FnMut() -> BenchResult<()>,
) -> BenchResult<f64> {
    let mut us = Vec::with_capacity(LAUNCHES);
    for i in 0..LAUNCHES + DRAIN {
        if i % DRAIN == 0 {
            stream_sync()?;
        }
        let t = Instant::now();
        launch()?;
        let dt = t.elapsed().as_secs_f64() * 1e6;
        if i >= DRAIN {
            us.push(dt);
        }
    }
    stream_sync()?;
    Ok(median(&us))
}

// One long function on purpose: each compile-cost measurement follows the last in the order the
// report prints them, over one cache directory.
/// What each next kernel costs: the median wall time of 5 new specializations of `spec` (one
/// comptime value each, 1 to 5), one prewarm each.
fn next_kernels(p: &Pgas, spec: &'static pgas::kernel::KernelSpec) -> BenchResult<f64> {
    let mut times = Vec::new();
    for k in 1..=5i128 {
        let v = [k];
        let one = [Prewarm {
            spec,
            variant: Variant::Checked,
            comptime: &v,
        }];
        let (r, s) = wall(|| pgas::launch::prewarm(p, &one));
        r?;
        times.push(s);
    }
    Ok(median(&times))
}

/// The wall time of a first compile of `spec` (no comptime values): NVRTC, store, load,
/// `cumodule_init`, one prewarm.
fn cold(p: &Pgas, spec: &'static pgas::kernel::KernelSpec) -> BenchResult<f64> {
    let one = [Prewarm {
        spec,
        variant: Variant::Checked,
        comptime: &[],
    }];
    let (r, s) = wall(|| pgas::launch::prewarm(p, &one));
    r?;
    Ok(s)
}

/// Reductions one timed launch of `reduce_loop` makes.
const ROUNDS: u32 = 1000;

/// Device time of one `reduce_block` of `n` f32 by one block of 512 threads on this PE, in us:
/// `reduce_loop` (compiled by the cold compile above, with this run's `PGAS_JIT_LTO` and
/// `PGAS_JIT_FAST_COMPILE`) making [`ROUNDS`] reductions a launch, median of 5 launches. So each
/// run of the bench shows what its compile settings cost at run time beside what they save.
fn reduce_us(p: &Pgas, n: usize) -> BenchResult<f64> {
    let src = p.alloc_from(&vec![1.0f32; n])?;
    let mut dst = p.alloc::<f32>(n)?;
    let cfg = LaunchConfig::blocks(1, 512);
    reduce_loop::launch(p, cfg, Team::WORLD, &mut dst, &src, 1)?;
    p.stream().synchronize()?;
    let mut us = Vec::new();
    for _ in 0..5 {
        let (r, s) = wall(|| -> BenchResult<()> {
            reduce_loop::launch(p, cfg, Team::WORLD, &mut dst, &src, ROUNDS)?;
            Ok(p.stream().synchronize()?)
        });
        r?;
        us.push(s * 1e6 / f64::from(ROUNDS));
    }
    let got = dst.to_vec()?;
    if got.iter().any(|&x| x != p.n_pes() as f32) {
        return Err(format!(
            "reduce_loop summed to {:?}, not {}",
            &got[..4.min(n)],
            p.n_pes()
        )
        .into());
    }
    Ok(median(&us))
}

/// Launches `unbounded_reduce_loop` once by one block of 512 threads and prints whether its
/// `build` (the quick one on its first launch, the full one after `finish_compiles`) ran it or
/// was refused, with the refusal's reason (its registers).
fn unbounded_fits(p: &Pgas, build: &str) -> BenchResult<()> {
    let src = p.alloc_from(&[1.0f32; 16])?;
    let mut dst = p.alloc::<f32>(16)?;
    let cfg = LaunchConfig::blocks(1, 512);
    let ran = unbounded_reduce_loop::launch(p, cfg, Team::WORLD, &mut dst, &src, 1)
        .and_then(|()| Ok(p.stream().synchronize()?));
    match ran {
        Ok(()) => {
            println!("{BENCH}: unbounded reduce_block kernel, {build} build: ran 512 threads")
        }
        Err(e) => println!("{BENCH}: unbounded reduce_block kernel, {build} build: refused: {e}"),
    }
    Ok(())
}

fn main() -> BenchResult<()> {
    // Before the driver starts (the GPU check below starts it): a fresh cache directory, so the
    // first compile of each kernel is cold; and the CUDA driver's own compute cache off and
    // pointed at an empty folder, so a figure does not depend on what ran on the machine before.
    let cache = std::env::temp_dir().join(format!("pgas-jit-costs-{}", std::process::id()));
    std::fs::create_dir_all(cache.join("driver"))?;
    std::env::set_var("PGAS_CACHE_DIR", &cache);
    std::env::remove_var("PGAS_CACHE");
    std::env::set_var("CUDA_CACHE_DISABLE", "1");
    std::env::set_var("CUDA_CACHE_PATH", cache.join("driver"));
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }

    let (p, init_s) = wall(pgas::init);
    let p = p?;
    let machine = format!("{} x{} PE", p.cuda().name()?, p.n_pes());
    let mut figs: Vec<Figure> = Vec::new();
    let mut fig = |name: &str, value: f64, unit: &'static str, note: &str| {
        figs.push(Figure::new(name, value, unit, note))
    };
    fig(
        "nvshmem_init",
        init_s,
        "s",
        "wall time of pgas::init() with one PE",
    );

    // Toolchain discovery happens once per process, with the first compile.
    let bare1 = Bare::new(p.device_ordinal())?;
    let trivial = RawKernel::from_source(CUDA_TRIVIAL, "cuda_trivial");
    let (r, first_s) = wall(|| bare1.prewarm_raw(&trivial));
    r?;
    fig(
        "first_compile_with_discovery",
        first_s,
        "s",
        "toolchain discovery + NVRTC of an empty kernel",
    );

    // Cold compiles of the typical kernel, DSL (through the Pgas: includes cumodule_init) and raw.
    let dsl_cold = cold(&p, &ring_shift::SPEC)?;
    let tc = pgas::jit::Toolchain::discover()?;
    let linked = tc.linker().is_some();
    // Collective kernels link only under PGAS_JIT_LTO=all (docs/jit.md, "Collective objects").
    let coll_mode = if tc.links_collectives() {
        "link-time with collective objects (PGAS_JIT_LTO=all)"
    } else {
        "inline (NVSHMEM headers)"
    };
    let mode = if linked {
        "link-time (nvJitLink)"
    } else {
        "inline (NVSHMEM headers)"
    };
    fig(
        "cold_compile_dsl_ring_shift",
        dsl_cold,
        "s",
        &format!(
            "{mode}; NVRTC + cache store + load + cumodule_init; the first kernel on a fresh \
             machine{}",
            if linked {
                ", so the NVSHMEM library's build is included"
            } else {
                ""
            }
        ),
    );
    // The user's next kernels: new specializations, one prewarm each, medians.
    fig(
        "cold_compile_dsl_next_p2p_kernel",
        next_kernels(&p, &ring_shift_scaled::SPEC)?,
        "s",
        &format!("{mode}; median of 5 new point-to-point kernels, each compiled, stored, loaded"),
    );
    // A collective kernel starts on its quick build, and its full build compiles in the
    // background (docs/jit.md, "Tiers"), unless tiers are off or the collective is always linked.
    let tiers = tc.quick_tier().is_some();
    let coll_mode = if tiers {
        "quick build (NVSHMEM's collective as an object at --Ofast-compile=max, built once per \
         machine), the full build compiled in the background"
    } else {
        coll_mode
    };
    let coll_cold = cold(&p, &reduce_loop::SPEC)?;
    fig(
        "cold_compile_dsl_collective",
        coll_cold,
        "s",
        &format!(
            "{coll_mode}; reduce_block in a loop (full prelude): NVRTC + store + load + \
             cumodule_init; the first collective kernel{}",
            if tc.links_collectives() || tiers {
                ", so NVSHMEM's reduction is built as a collective object (once per machine)"
            } else {
                ""
            }
        ),
    );
    fig(
        "cold_compile_dsl_next_collective_kernel",
        next_kernels(&p, &reduce_loop_scaled::SPEC)?,
        "s",
        &format!("{coll_mode}; median of 5 new kernels calling the same reduce_block"),
    );
    // What the collective kernel's compile settings cost when it runs: the quick build, then
    // the full one once every background build is in.
    let fast = std::env::var("PGAS_JIT_FAST_COMPILE").unwrap_or_else(|_| "0".to_owned());
    let reductions = [
        (16, "reduce_block_16_f32"),
        (64 << 10, "reduce_block_64ki_f32"),
    ];
    let note = |build: &str| {
        format!(
            "{build}, PGAS_JIT_FAST_COMPILE={fast}; one reduce_block by 1 x 512 threads \
             (reduce_loop, {ROUNDS} a launch), median of 5 launches"
        )
    };
    if tiers {
        for (n, name) in reductions {
            let quick = note("the quick build");
            fig(&format!("{name}_quick"), reduce_us(&p, n)?, "us", &quick);
        }
        unbounded_fits(&p, "quick")?;
        let (swapped, settle_s) = wall(|| pgas::launch::finish_compiles(&p));
        fig(
            "full_builds_settled",
            settle_s,
            "s",
            &format!(
                "finish_compiles after the figures above: the wait for the collective kernels' \
                 full builds ({swapped} swapped in), which helper processes had been compiling \
                 since each quick build loaded"
            ),
        );
    }
    if tiers {
        unbounded_fits(&p, "full")?;
    }
    let full = if tiers { "the full build" } else { coll_mode };
    for (n, name) in reductions {
        fig(name, reduce_us(&p, n)?, "us", &note(full));
    }
    // pgas's own in-kernel collective compiles like any point-to-point kernel.
    let ll_cold = cold(&p, &ll_reduce_loop::SPEC)?;
    fig(
        "cold_compile_dsl_peer_collective",
        ll_cold,
        "s",
        &format!(
            "{mode}; team_all_reduce_block in a loop (pgas's LL protocol over peer memory, no \
             NVSHMEM collective code): the first such kernel"
        ),
    );
    fig(
        "cold_compile_dsl_next_peer_collective_kernel",
        next_kernels(&p, &ll_reduce_loop_scaled::SPEC)?,
        "s",
        &format!("{mode}; median of 5 new kernels calling team_all_reduce_block"),
    );
    let values: Vec<[i128; 1]> = (1..=16).map(|k| [k]).collect();
    let sixteen: Vec<Prewarm<'_>> = values
        .iter()
        .map(|v| Prewarm {
            spec: &scaled::SPEC,
            variant: Variant::Checked,
            comptime: v,
        })
        .collect();
    let (r, batch_cold) = wall(|| pgas::launch::prewarm(&p, &sixteen));
    r?;
    fig(
        "cold_compile_dsl_16_specializations",
        batch_cold,
        "s",
        "16 comptime values of one kernel in one prewarm (programs of at least 8 kernels, shared \
         with the JIT's helper processes where the pgas CLI is beside the bench)",
    );
    let raw_ring = RawKernel::from_source(CUDA_RING, "cuda_ring_shift");
    let (r, raw_cold) = wall(|| bare1.prewarm_raw(&raw_ring));
    r?;
    fig(
        "cold_compile_cuda_ring_shift",
        raw_cold,
        "s",
        "NVRTC + cache store + load (no NVSHMEM module init)",
    );

    // Disk-cache load: a second JIT state with an empty memory cache, same cache directory.
    let bare2 = Bare::new(p.device_ordinal())?;
    let (r, disk_s) = wall(|| bare2.prewarm_raw(&raw_ring));
    r?;
    fig(
        "disk_cache_load",
        disk_s * 1e3,
        "ms",
        "fresh memory cache: read + verify CUBIN + module load",
    );

    // In-memory hits: the kernel is loaded in bare2, so this is the lookup alone.
    let mut hits = Vec::with_capacity(HITS);
    for _ in 0..HITS {
        let t = Instant::now();
        bare2.prewarm_raw(&raw_ring)?;
        hits.push(t.elapsed().as_secs_f64() * 1e6);
    }
    fig(
        "memory_cache_hit",
        median(&hits),
        "us",
        "lookup of a loaded kernel, median",
    );

    // Host cost of one cached launch.
    let mut x = p.alloc::<u32>(1)?;
    let cfg = LaunchConfig::blocks(1, 32);
    let sync_p = || -> BenchResult<()> { Ok(p.stream().synchronize()?) };
    empty_dsl::launch(&p, cfg, &mut x)?;
    let dsl_checked = per_launch(&sync_p, || Ok(empty_dsl::launch(&p, cfg, &mut x)?))?;
    fig(
        "launch_dsl_checked",
        dsl_checked,
        "us",
        "host time of one cached launch, median",
    );
    // SAFETY: the empty kernel reads nothing and writes x[0] only when x is empty, which it is not.
    unsafe { empty_dsl::launch_unchecked(&p, cfg, &mut x)? };
    let dsl_plain = per_launch(&sync_p, || {
        // SAFETY: as the launch above: the same kernel and the same non-empty `x`.
        let _: () = unsafe { empty_dsl::launch_unchecked(&p, cfg, &mut x)? };
        Ok(())
    })?;
    fig(
        "launch_dsl_unchecked",
        dsl_plain,
        "us",
        "host time of one cached launch, median",
    );

    let empty = RawKernel::from_source(CUDA_EMPTY, "cuda_empty");
    let sync_b = || -> BenchResult<()> { Ok(bare2.stream().synchronize()?) };
    let local = bare2.stream().alloc_zeros::<u32>(1)?;
    let raw_launch = |bare: &Bare| -> BenchResult<()> {
        let mut args = KernelArgs::new();
        args.push_local(&local);
        // SAFETY: the arguments match cuda_empty's parameters.
        let _: () = unsafe { bare.launch_raw(&empty, cfg, &mut args)? };
        Ok(())
    };
    raw_launch(&bare2)?;
    let raw = per_launch(&sync_b, || raw_launch(&bare2))?;
    fig(
        "launch_rawkernel",
        raw,
        "us",
        "host time of one cached RawKernel launch, median",
    );

    let f = bare2.function_handle(&empty)?;
    let (ptr, guard) = pgas::cudarc::driver::DevicePtr::device_ptr(&local, bare2.stream());
    let mut ptr_arg = ptr;
    let mut len_arg = 1u64;
    let stream = bare2.stream().cu_stream();
    let bare = per_launch(&sync_b, || {
        let mut params = [
            &mut ptr_arg as *mut _ as *mut c_void,
            &mut len_arg as *mut _ as *mut c_void,
        ];
        // SAFETY: f is cuda_empty, loaded in bare2's context; the parameters are its two.
        unsafe { result::launch_kernel(f, (1, 1, 1), (32, 1, 1), 0, stream, &mut params)? };
        Ok(())
    })?;
    fig(
        "launch_bare_culaunchkernel",
        bare,
        "us",
        "cuLaunchKernel of the same CUfunction, median",
    );
    fig(
        "launch_overhead_rawkernel_vs_bare",
        raw - bare,
        "us",
        "pgas launch path minus the driver call",
    );
    fig(
        "launch_overhead_dsl_checked_vs_bare",
        dsl_checked - bare,
        "us",
        "argument checks, lookup, launch",
    );

    common::report(BENCH, &machine, &figs);
    // The pointer guard borrows bare2's stream: release it first.
    drop(guard);
    drop((bare1, bare2));
    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}
