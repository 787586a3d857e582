//! The same kernels written in the DSL (`#[pgas_kernel]`) and by hand in CUDA C
//! (`RawKernel`: same prelude, same NVRTC options, same caches, same launch path), timed side by
//! side in one run, plus the host-side `nvshmemx_putmem_on_stream` for reference.
//!
//! Run with two PEs: `pgas-run -n 2 dsl_vs_cuda` (PE 0 sends to PE 1; with one PE it sends to
//! itself and the ping-pong is skipped). Figures (medians over repetitions, after warm-up, timed
//! with CUDA events on the pgas stream):
//! - `put_nbi_block` of 1 GiB with 8/16/32/64 blocks of 1024 threads, one PE sending: GB/s;
//! - signal ping-pong, one thread each on PE 0 and 1 (`signal_op` + `signal_wait_until`):
//!   one-way latency in us;
//! - `barrier_all_block`, one block of 128 threads: us per barrier;
//! - `reduce_block` (sum of 16 and of 64 Ki f32 over every PE), one block of 512 threads: us per
//!   reduction. Under `PGAS_JIT_LTO=all` the DSL kernel links NVSHMEM's reduction as a
//!   collective object compiled once per machine (docs/jit.md, "Collective objects"); by
//!   default, and always for the CUDA C one, it compiles inline;
//! - host `put` (`nvshmemx_putmem_on_stream`) of 1 GiB: GB/s;
//! - NVSHMEM init (this process's `pgas::init`): s.
//!
//! The CUDA baselines measured earlier on the same machines are in shared/notes/nvshmem-jit.md.

mod common;

use common::{emit, median, show, spread, time_on_stream, wall, BenchResult, Figure};
use pgas::kernel::Variant;
use pgas::launch::{KernelArgs, Prewarm, RawKernel};
use pgas::prelude::*;

const BENCH: &str = "dsl_vs_cuda";
const GIB: usize = 1 << 30;
const ELEMS: usize = GIB / 4;
const WARMUP: usize = 2;
const REPS: usize = 10;
const PING_ITERS: u64 = 20_000;
const BARRIER_ITERS: u32 = 20_000;
const REDUCE_ELEMS: usize = 64 * 1024;
const REDUCE_ITERS: u32 = 200;

#[pgas_kernel]
fn bw_put_nbi_block(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, pe: i32) {
    let chunk = dst.len() / grid_dim_x() as usize;
    let a = block_idx_x() as usize * chunk;
    put_nbi_block(&mut dst[a..a + chunk], &src[a..a + chunk], pe);
    sync_threads();
    if thread_idx_x() == 0 {
        quiet();
    }
}

const CUDA_PUT: &str = r#"
extern "C" __global__ void cuda_put_nbi_block(float* dst, unsigned long long dst_len,
                                              const float* src, unsigned long long src_len, int pe) {
    unsigned long long chunk = dst_len / gridDim.x;
    unsigned long long a = (unsigned long long)blockIdx.x * chunk;
    nvshmemx_float_put_nbi_block(dst + a, src + a, chunk, pe);
    __syncthreads();
    if (threadIdx.x == 0) nvshmem_quiet();
}
"#;

#[pgas_kernel]
fn ping_pong(sig: &mut SymTensor<u64>, iters: u64) {
    let me = my_pe();
    let other = 1 - me;
    for i in 1..iters + 1 {
        if me == 0 {
            signal_op(&mut sig[0], i, SignalOp::Set, other);
            signal_wait_until(&sig[0], Cmp::Ge, i);
        } else {
            signal_wait_until(&sig[0], Cmp::Ge, i);
            signal_op(&mut sig[0], i, SignalOp::Set, other);
        }
    }
}

const CUDA_PING: &str = r#"
extern "C" __global__ void cuda_ping_pong(uint64_t* sig, unsigned long long sig_len,
                                          unsigned long long iters) {
    int me = nvshmem_my_pe();
    int other = 1 - me;
    for (unsigned long long i = 1; i < iters + 1; i++) {
        if (me == 0) {
            nvshmemx_signal_op(sig, i, NVSHMEM_SIGNAL_SET, other);
            nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, i);
        } else {
            nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, i);
            nvshmemx_signal_op(sig, i, NVSHMEM_SIGNAL_SET, other);
        }
    }
}
"#;

#[pgas_kernel]
fn barrier_loop(iters: u32) {
    let mut k = 0u32;
    while k < iters {
        barrier_all_block();
        k += 1;
    }
}

const CUDA_BARRIER: &str = r#"
extern "C" __global__ void cuda_barrier_loop(unsigned int iters) {
    for (unsigned int k = 0; k < iters; k++) nvshmemx_barrier_all_block();
}
"#;

#[pgas_kernel(max_threads = 512)]
fn reduce_loop(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, iters: u32) {
    let n = dst.len();
    let mut k = 0u32;
    while k < iters {
        reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
        k += 1;
    }
}

const CUDA_REDUCE: &str = r#"
extern "C" __global__ void __launch_bounds__(512) cuda_reduce_loop(nvshmem_team_t team, float *dst, unsigned long long n,
                                            const float *src, unsigned long long src_len,
                                            unsigned int iters) {
    for (unsigned int k = 0; k < iters; k++) nvshmemx_float_sum_reduce_block(team, dst, src, n);
}
"#;

/// Median and spread of `REPS` timed runs after `WARMUP` untimed ones; every PE takes part in
/// each run (so collective kernels and host barriers line up), `run` returns milliseconds.
fn repeat(p: &Pgas, mut run: impl FnMut() -> BenchResult<f64>) -> BenchResult<(f64, f64, f64)> {
    let mut ms = Vec::with_capacity(REPS);
    for i in 0..WARMUP + REPS {
        p.barrier_all()?;
        let t = run()?;
        if i >= WARMUP {
            ms.push(t);
        }
    }
    p.barrier_all()?;
    let (lo, hi) = spread(&ms);
    Ok((median(&ms), lo, hi))
}

struct Row {
    what: String,
    unit: &'static str,
    dsl: f64,
    cuda: f64,
    note: String,
}

// One long function on purpose: each pair (DSL kernel, same kernel in CUDA C) is timed in turn on
// the same buffers, in the order of the report.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    // Two 1 GiB buffers plus small ones. With CUDA VMM (its default) NVSHMEM 3.4.5 refuses a
    // single 1 GiB allocation even from a 4 GiB heap (seen on H200s); a static heap takes it.
    // Set before init, which reads NVSHMEM's environment.
    std::env::set_var("NVSHMEM_DISABLE_CUDA_VMM", "1");
    let (pgas, init_s) = wall(|| pgas::builder().heap_size(4 * GIB).init());
    let p = pgas?;
    let (me, n) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{n} PE", p.cuda().name()?);
    let target = if n > 1 { 1 } else { 0 };
    let mut rows: Vec<Row> = Vec::new();
    // Compile everything up front (in parallel), so no first launch inside a timing waits on NVRTC.
    // The DSL side runs the plain variant (`launch_unchecked`), the same kernel as the CUDA C
    // side; the checked variant adds a bounds and PE check per access and is a debugging aid.
    let plain = |spec| Prewarm {
        spec,
        variant: Variant::Plain,
        comptime: &[],
    };
    let specs = [
        &bw_put_nbi_block::SPEC,
        &ping_pong::SPEC,
        &barrier_loop::SPEC,
        &reduce_loop::SPEC,
    ];
    pgas::launch::prewarm(&p, &specs.map(plain))?;
    // The reduction kernel starts on its quick build (docs/jit.md, "Tiers"): compare its full
    // build, which the CUDA C side (a raw kernel, always compiled in full) matches.
    pgas::launch::finish_compiles(&p);

    // 1 GiB put_nbi_block, PE 0 sending.
    let src = p.alloc_from(&vec![1.5f32; ELEMS])?;
    let mut dst = p.alloc::<f32>(ELEMS)?;
    dst.fill(0.0)?;
    let raw_put = RawKernel::from_source(CUDA_PUT, "cuda_put_nbi_block");
    for blocks in [8u32, 16, 32, 64] {
        let cfg = LaunchConfig::blocks(blocks, 1024);
        let s = p.stream().clone();
        let (dsl, _, dsl_hi) = repeat(&p, || {
            if me != 0 {
                return Ok(f64::NAN);
            }
            let pe = target as i32;
            time_on_stream(&s, || {
                // SAFETY: every block's range lies inside both 1 GiB buffers and pe < n_pes.
                let _: () =
                    unsafe { bw_put_nbi_block::launch_unchecked(&p, cfg, &mut dst, &src, pe)? };
                Ok(())
            })
        })?;
        let (cuda, _, cuda_hi) = repeat(&p, || {
            if me != 0 {
                return Ok(f64::NAN);
            }
            let mut args = KernelArgs::new();
            args.push_sym(&dst)
                .push_sym(&src)
                .push_scalar(target as i32);
            time_on_stream(&s, || {
                // SAFETY: the arguments match cuda_put_nbi_block's parameters, and the 1 GiB
                // buffers split exactly into `blocks` pieces.
                let _: () = unsafe { raw_put.launch(&p, cfg, &mut args)? };
                Ok(())
            })
        })?;
        let gbs = |ms: f64| GIB as f64 / (ms * 1e-3) / 1e9;
        rows.push(Row {
            what: format!("put_nbi_block 1 GiB, {blocks}x1024"),
            unit: "GB/s",
            dsl: gbs(dsl),
            cuda: gbs(cuda),
            note: format!(
                "median of {REPS}; slowest run {} / {} GB/s",
                show(gbs(dsl_hi)),
                show(gbs(cuda_hi))
            ),
        });
    }
    // The data must have arrived: every element of the target's copy is 1.5.
    p.barrier_all()?;
    if me == target {
        let got = dst.to_vec()?;
        if let Some(i) = got.iter().position(|&v| v != 1.5) {
            return Err(format!("put_nbi_block left dst[{i}] = {} (expected 1.5)", got[i]).into());
        }
    }

    // Host put through the copy engine.
    let s = p.stream().clone();
    let (host, _, _) = repeat(&p, || {
        if me != 0 {
            return Ok(f64::NAN);
        }
        time_on_stream(&s, || {
            p.put(&dst, &src, target)?;
            Ok(())
        })
    })?;
    drop((src, dst));

    // Signal ping-pong between PE 0 and PE 1.
    let raw_ping = RawKernel::from_source(CUDA_PING, "cuda_ping_pong");
    let mut sig = p.alloc::<u64>(1)?;
    let mut ping = |dsl: bool| -> BenchResult<f64> {
        if n < 2 {
            return Ok(f64::NAN);
        }
        let (ms, _, _) = repeat(&p, || {
            sig.fill(0)?;
            p.barrier_all()?;
            if me > 1 {
                return Ok(f64::NAN);
            }
            time_on_stream(&s, || {
                if dsl {
                    // SAFETY: sig has one element and PEs 0 and 1 exist (this runs on 2+ PEs).
                    unsafe {
                        ping_pong::launch_unchecked(
                            &p,
                            LaunchConfig::blocks(1, 1),
                            &mut sig,
                            PING_ITERS,
                        )?
                    };
                } else {
                    let mut args = KernelArgs::new();
                    args.push_sym(&sig).push_scalar(PING_ITERS);
                    // SAFETY: the arguments match cuda_ping_pong's parameters.
                    unsafe { raw_ping.launch(&p, LaunchConfig::blocks(1, 1), &mut args)? };
                }
                Ok(())
            })
        })?;
        Ok(ms * 1e3 / (2 * PING_ITERS) as f64)
    };
    let (ping_dsl, ping_cuda) = (ping(true)?, ping(false)?);
    rows.push(Row {
        what: "signal ping-pong, one way".into(),
        unit: "us",
        dsl: ping_dsl,
        cuda: ping_cuda,
        note: format!("{PING_ITERS} round trips per launch, median of {REPS} launches"),
    });

    // Device barrier, one block of 128 threads on every PE.
    let raw_barrier = RawKernel::from_source(CUDA_BARRIER, "cuda_barrier_loop").collective(true);
    let cfg = LaunchConfig::blocks(1, 128);
    let (bar_dsl, _, _) = repeat(&p, || {
        time_on_stream(&s, || {
            // SAFETY: the kernel indexes no buffer and names no PE.
            let _: () = unsafe { barrier_loop::launch_unchecked(&p, cfg, BARRIER_ITERS)? };
            Ok(())
        })
    })?;
    let (bar_cuda, _, _) = repeat(&p, || {
        let mut args = KernelArgs::new();
        args.push_scalar(BARRIER_ITERS);
        time_on_stream(&s, || {
            // SAFETY: the argument matches cuda_barrier_loop's parameter.
            let _: () = unsafe { raw_barrier.launch(&p, cfg, &mut args)? };
            Ok(())
        })
    })?;
    let per = |ms: f64| ms * 1e3 / BARRIER_ITERS as f64;
    rows.push(Row {
        what: "barrier_all_block, 1x128".into(),
        unit: "us",
        dsl: per(bar_dsl),
        cuda: per(bar_cuda),
        note: format!("{BARRIER_ITERS} barriers per launch, median of {REPS} launches"),
    });

    // Device reduction, one block of 512 threads on every PE, of a few elements (latency) and
    // of 64 Ki (bandwidth); then the sums must be right.
    let raw_reduce = RawKernel::from_source(CUDA_REDUCE, "cuda_reduce_loop").collective(true);
    let cfg = LaunchConfig::blocks(1, 512);
    for elems in [16, REDUCE_ELEMS] {
        let src = p.alloc_from(&vec![(me + 1) as f32; elems])?;
        let mut dst = p.alloc::<f32>(elems)?;
        let mut reduce = |dsl: bool| -> BenchResult<f64> {
            let (ms, _, _) = repeat(&p, || {
                time_on_stream(&s, || {
                    if dsl {
                        // SAFETY: dst and src hold `elems` elements on every PE.
                        let _: () = unsafe {
                            reduce_loop::launch_unchecked(
                                &p,
                                cfg,
                                Team::WORLD,
                                &mut dst,
                                &src,
                                REDUCE_ITERS,
                            )?
                        };
                    } else {
                        let mut args = KernelArgs::new();
                        args.push_team(Team::WORLD)
                            .push_sym_mut(&mut dst)
                            .push_sym(&src)
                            .push_scalar(REDUCE_ITERS);
                        // SAFETY: the arguments match cuda_reduce_loop's parameters.
                        let _: () = unsafe { raw_reduce.launch(&p, cfg, &mut args)? };
                    }
                    Ok(())
                })
            })?;
            let want = (n * (n + 1) / 2) as f32;
            let got = dst.to_vec()?;
            if let Some(i) = got.iter().position(|&v| v != want) {
                return Err(
                    format!("reduce_block left dst[{i}] = {} (expected {want})", got[i]).into(),
                );
            }
            dst.fill(0.0)?;
            Ok(ms * 1e3 / REDUCE_ITERS as f64)
        };
        let (red_dsl, red_cuda) = (reduce(true)?, reduce(false)?);
        rows.push(Row {
            what: format!("reduce_block {elems} f32, 1x512"),
            unit: "us",
            dsl: red_dsl,
            cuda: red_cuda,
            note: format!(
                "{REDUCE_ITERS} reductions per launch, median of {REPS} launches; under \
                 PGAS_JIT_LTO=all the DSL kernel links NVSHMEM's reduction as a collective object"
            ),
        });
    }

    if me == 0 {
        print_report(&machine, &rows, GIB as f64 / (host * 1e-3) / 1e9, init_s, n);
    }
    p.barrier_all()?;
    Ok(())
}

fn print_report(machine: &str, rows: &[Row], host_gbs: f64, init_s: f64, n: usize) {
    println!(
        "\n{BENCH} on {machine} (PE 0 -> PE {})",
        if n > 1 { 1 } else { 0 }
    );
    println!(
        "{:<34} {:>10} {:>10} {:>9}  unit",
        "figure", "DSL", "CUDA C", "DSL/CUDA"
    );
    for r in rows {
        let ratio = r.dsl / r.cuda;
        println!(
            "{:<34} {:>10} {:>10} {:>9}  {}",
            r.what,
            show(r.dsl),
            show(r.cuda),
            show(ratio),
            r.unit
        );
        let key = r.what.replace([' ', ','], "_").replace("__", "_");
        for (which, v) in [("dsl", r.dsl), ("cuda", r.cuda), ("ratio", ratio)] {
            let unit = if which == "ratio" { "x" } else { r.unit };
            let f = Figure {
                name: format!("{key}/{which}"),
                value: v,
                unit,
                note: r.note.clone(),
            };
            emit(BENCH, machine, &f);
        }
    }
    println!(
        "{:<34} {:>10}  GB/s",
        "host putmem_on_stream 1 GiB",
        show(host_gbs)
    );
    println!(
        "{:<34} {:>10}  s",
        "pgas::init (NVSHMEM init)",
        show(init_s)
    );
    let host = Figure {
        name: "host_putmem_on_stream_1GiB".into(),
        value: host_gbs,
        unit: "GB/s",
        note: format!("median of {REPS}"),
    };
    emit(BENCH, machine, &host);
    let init = Figure {
        name: format!("init_{n}pe"),
        value: init_s,
        unit: "s",
        note: "wall time of pgas::builder().init() on PE 0".into(),
    };
    emit(BENCH, machine, &init);
}
