//! The 2-D Jacobi smoother of `examples/jacobi2d.rs` with its halo exchange, per-GPU domains
//! of N x N `f32` (N = 1024 to 16384; each PE one slab, periodic over the ring of PEs), eight
//! ways in the same run:
//!
//! - the fused kernel's forms (`jacobi::FORMS`), all iterations in one launch (edge rows sent
//!   with `put_signal` while the interior is computed; neighbour flags, no grid barrier):
//!   `fused_rolled` (the kernel of the first measurements: one row's loads ahead,
//!   1024-thread blocks), `fused_b2` and `fused_b4` (batches of 2 and 4 rows loaded at once,
//!   1024-thread blocks, 64 registers a thread), `fused_512_b4` and `fused_512_b8` (batches of
//!   4 and 8 rows in 512-thread blocks, up to 128 registers a thread: no spill);
//! - `pgas`: per iteration `Halo2d::exchange_on` (a put-with-signal kernel) and one stencil
//!   launch (the example's `jacobi_step`, batched sweep);
//! - `nccl`: per iteration NCCL send/recv of the two edge rows (grouped) and the same stencil
//!   launch as `pgas`: what a user writes today;
//! - `nccl_graph`: the same captured into one CUDA graph per timed run.
//!
//! `fused` is not a run of its own: at each N it is the form `jacobi::Method::Fused` picks
//! (`Fused::for_size`), whose time the table and the `fused` FIGURE lines repeat.
//!
//! Each (size, way) runs one warm-up and `REPS` timed runs of `iters` iterations (CUDA events
//! on one stream; the median is reported as microseconds per iteration). Every way starts from
//! the same field and runs the same number of iterations, and its final field must equal the
//! first one bit for bit (the stencil is exact in `f32`); `Method::Fused` (the default form) also
//! matches the host's smoother exactly over a short run at N <= 2048. A mismatch fails the run
//! (exit 1). PE 0 prints a table (every way's time, the default form and its time, `fused`
//! against each baseline and against `fused_rolled`) and `FIGURE` lines: every way's time,
//! `fused`'s time and speedup over each baseline, and each fused form's speedup over the
//! fastest baseline of that size (`pgas`, `nccl` or `nccl_graph`: the one to beat); given an
//! OUTDIR, it writes `halo.md`, `halo_time.png` and `halo_speedup.png` there.
//!
//! ```text
//! NVSHMEM_DISABLE_CUDA_VMM=1 pgas-run -n 2 -- target/release/deps/halo-<hash> [OUTDIR]
//!     [--sizes 1024,4096] [--blocks N] [--no-nccl]
//! ```
//!
//! `--blocks N` caps the fused kernels' grid (PEs sharing a GPU under MPS get part of its SMs);
//! `--no-nccl` leaves NCCL out (it refuses two ranks on one GPU).
//!
//! `NVSHMEM_DISABLE_CUDA_VMM=1`: at N = 16384 a field is 2 GiB, and NVSHMEM 3.4.5's default
//! (VMM) heap refuses single allocations of 1 GiB and more. NCCL is loaded as in
//! `benches/common/nccl.rs`; without it the NCCL columns stay empty.

mod common;

use common::nccl::{nccl_comm, Nccl};
use common::plot::{self, human, Series};
use common::{emit, median, show, spread, time_on_stream, BenchResult, Figure};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::CudaStream;
use pgas::cudarc::nccl::{result as nccl, sys as nccl_sys};
use pgas::ops::halo::Halo2d;
use pgas::ops::jacobi::{self, Fused, Method, Sweep};
use pgas::prelude::*;
use std::fmt::Write as _;
use std::sync::Arc;

const BENCH: &str = "halo";
const REPS: usize = 5;
const SIZES: &[usize] = &[1024, 2048, 4096, 8192, 16384];
/// Iterations of the short run checked against the host.
const CHECK_ITERS: u32 = 6;
/// Largest N whose short run is checked against the host (the host smoother is slow).
const HOST_CHECK_MAX: usize = 2048;

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Fused(Fused),
    Pgas,
    Nccl,
    NcclGraph,
}

/// Every fused form, then the baselines.
fn ways() -> Vec<Way> {
    let mut w: Vec<Way> = jacobi::FORMS.iter().map(|&f| Way::Fused(f)).collect();
    w.extend([Way::Pgas, Way::Nccl, Way::NcclGraph]);
    w
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::Fused(f) => format!("fused{}", form_suffix(f)),
            Way::Pgas => "pgas".to_owned(),
            Way::Nccl => "nccl".to_owned(),
            Way::NcclGraph => "nccl_graph".to_owned(),
        }
    }

    fn is_baseline(self) -> bool {
        !matches!(self, Way::Fused(_))
    }
}

/// `_rolled`, `_b4`, `_512_b8`: a fused form's name after `fused`.
fn form_suffix(f: Fused) -> String {
    let threads = if f.threads == jacobi::THREADS {
        String::new()
    } else {
        format!("_{}", f.threads)
    };
    match f.sweep {
        Sweep::Rolled => format!("{threads}_rolled"),
        Sweep::Batched { depth } => format!("{threads}_b{depth}"),
    }
}

/// Iterations per timed run: about 2^31 cell updates (a few milliseconds), even (a captured
/// run must end on the plane it started from), between 20 and 1000.
fn iters_for(n: usize) -> u32 {
    (((1usize << 31) / (n * n)).clamp(20, 1000) & !1) as u32
}

/// Blocks of the per-iteration stencil launch: two per SM (blocks of 1024 threads), at most one
/// per row.
fn step_blocks(p: &Pgas) -> BenchResult<usize> {
    Ok(2 * p.sm_count()?)
}

/// Enqueues one NCCL halo exchange of the current plane on `stream`: the first row up and the
/// last row down, the bottom halo from below and the top halo from above (per peer, NCCL
/// matches sends and receives in order: with two PEs both neighbours are one PE, whose first
/// send is its first row, which lands in this PE's bottom halo).
fn nccl_exchange(h: &mut Halo2d, c: &Nccl, stream: &CudaStream) -> BenchResult<()> {
    let (nx, rows, cur) = (h.nx(), h.rows(), h.current());
    let (up, down) = (h.up() as i32, h.down() as i32);
    let base = h.parts_mut().field.as_device_ptr();
    let at = |row: usize| (base + ((cur + row * nx) * 4) as u64) as *mut std::ffi::c_void;
    let f32t = nccl_sys::ncclDataType_t::ncclFloat32;
    let s = stream.cu_stream() as nccl_sys::cudaStream_t;
    nccl::group_start().map_err(|e| format!("ncclGroupStart: {e:?}"))?;
    // SAFETY: rows 0..=rows + 1 of the current plane are device memory of this PE's field.
    let r = unsafe {
        nccl::send(at(1), nx, f32t, up, c.0, s)
            .and_then(|_| nccl::send(at(rows), nx, f32t, down, c.0, s))
            .and_then(|_| nccl::recv(at(rows + 1), nx, f32t, down, c.0, s))
            .and_then(|_| nccl::recv(at(0), nx, f32t, up, c.0, s))
    };
    let end = nccl::group_end();
    r.map_err(|e| format!("ncclSend/ncclRecv: {e:?}"))?;
    end.map_err(|e| format!("ncclGroupEnd: {e:?}"))?;
    Ok(())
}

/// `iters` NCCL-exchanged iterations on `stream`.
fn run_nccl(
    p: &Pgas, h: &mut Halo2d, c: &Nccl, stream: &CudaStream, iters: u32, blocks: usize,
) -> BenchResult<()> {
    let (nx, rows) = (h.nx(), h.rows());
    for _ in 0..iters {
        nccl_exchange(h, c, stream)?;
        let planes = (h.current(), h.next());
        jacobi::launch_step(
            p,
            stream,
            h.parts_mut().field,
            planes,
            (nx, rows),
            blocks,
            Sweep::default(),
            false,
        )?;
        h.advance(1);
    }
    Ok(())
}

/// A fresh field holding this PE's slab of the initial condition.
fn fresh(p: &Pgas, n: usize) -> BenchResult<Halo2d> {
    let mut h = Halo2d::new(p, n, n)?;
    let first = p.my_pe() * n;
    let rows: Vec<f32> = (0..n * n)
        .map(|i| jacobi::initial(first + i / n, i % n))
        .collect();
    h.write_interior(&rows)?;
    Ok(h)
}

/// Times `iters` iterations of `way` from the initial field: one warm-up and `REPS` timed runs.
/// Returns microseconds per iteration of each run and the final field.
#[allow(clippy::too_many_arguments)]
fn measure(
    p: &Pgas, way: Way, n: usize, iters: u32, comm: Option<&Nccl>, stream: &Arc<CudaStream>,
    (step, max_blocks): (usize, usize),
) -> BenchResult<(Vec<f64>, Vec<f32>)> {
    let mut h = fresh(p, n)?;
    let fused_blocks = h.resident_blocks().min(max_blocks);
    let mut graph = None;
    if way == Way::NcclGraph {
        // The stencil kernel is compiled and NCCL warmed up by the eager ways before this one.
        let c = comm.ok_or("NCCL is not loaded")?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let r = run_nccl(p, &mut h, c, stream, iters, step);
        let g = stream.end_capture(CUgraphInstantiate_flags(0))?;
        r?;
        let g = g.ok_or("empty capture")?;
        g.upload()?;
        graph = Some(g);
        // The capture ran nothing: the field is still the initial one, and `h` counted `iters`
        // (even) iterations, so it names the same planes as the replays will.
    }
    let run = |h: &mut Halo2d| -> BenchResult<()> {
        match way {
            Way::Fused(form) => {
                jacobi::run(h, stream, Method::FusedAs(form), iters, fused_blocks, false)?
            }
            Way::Pgas => jacobi::run(
                h,
                stream,
                Method::Unfused(Sweep::default()),
                iters,
                step,
                false,
            )?,
            Way::Nccl => run_nccl(p, h, comm.ok_or("NCCL is not loaded")?, stream, iters, step)?,
            Way::NcclGraph => {
                graph.as_ref().ok_or("no graph")?.launch()?;
                h.advance(iters as u64);
            }
        }
        Ok(())
    };
    p.barrier_all()?;
    run(&mut h)?;
    stream.synchronize()?;
    let mut us = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        p.barrier_all()?;
        let ms = time_on_stream(stream, || run(&mut h))?;
        us.push(ms * 1000.0 / iters as f64);
    }
    stream.synchronize()?;
    let field = h.read_interior()?;
    drop(graph);
    p.barrier_all()?;
    Ok((us, field))
}

/// A speedup for the table: `1.23x`, or `-` where a way did not run.
fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{}x", show(x))
    } else {
        "-".to_owned()
    }
}

/// `Method::Fused` (the form `Fused::for_size` picks) over `CHECK_ITERS` iterations against the
/// host's smoother, exactly.
fn host_check(p: &Pgas, n: usize, stream: &Arc<CudaStream>, max_blocks: usize) -> BenchResult<()> {
    let (me, pes) = (p.my_pe(), p.n_pes());
    let mut h = fresh(p, n)?;
    let blocks = h.resident_blocks().min(max_blocks);
    jacobi::run(&mut h, stream, Method::Fused, CHECK_ITERS, blocks, false)?;
    stream.synchronize()?;
    let got = h.read_interior()?;
    drop(h);
    p.barrier_all()?;
    let whole: Vec<f32> = (0..pes * n * n)
        .map(|i| jacobi::initial(i / n, i % n))
        .collect();
    let want = jacobi::host_jacobi(&whole, n, CHECK_ITERS as usize);
    let want = &want[me * n * n..(me + 1) * n * n];
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        return Err(format!(
            "N = {n}: fused differs from the host after {CHECK_ITERS} iterations at row {}, \
             column {}: {} != {}",
            i / n,
            i % n,
            got[i],
            want[i]
        )
        .into());
    }
    Ok(())
}

// One long function on purpose: a benchmark reads top to bottom as the run it makes; the methods
// share the field and its buffers.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).map(|i| args.get(i + 1));
    let out_dir = args
        .iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with("--")
                && (*i == 0 || !matches!(args[i - 1].as_str(), "--sizes" | "--blocks"))
        })
        .map(|(_, a)| a.clone());
    let sizes: Vec<usize> = match opt("--sizes") {
        Some(v) => v
            .ok_or("--sizes needs a list such as 1024,4096")?
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()?,
        None => SIZES.to_vec(),
    };
    let max_blocks: usize = match opt("--blocks") {
        Some(v) => v.ok_or("--blocks needs a number")?.parse()?,
        None => usize::MAX,
    };
    let max = *sizes.iter().max().ok_or("no sizes")?;
    let field_bytes = |n: usize| 2 * (n + 2) * n * 4;
    let p = pgas::builder()
        .heap_size(field_bytes(max) + (256 << 20))
        .init()?;
    let (me, pes) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{pes} PE", p.cuda().name()?);
    // NCCL refuses two ranks on one GPU (PEs sharing a GPU under MPS): --no-nccl leaves it out.
    let comm = if args.iter().any(|a| a == "--no-nccl") {
        None
    } else {
        nccl_comm(&p)?
    };
    let stream: Arc<CudaStream> = p.cuda().new_stream()?;
    let step = step_blocks(&p)?;
    if me == 0 {
        println!(
            "{BENCH}: 2-D Jacobi, N x N f32 per GPU, periodic ring of {pes} PE(s) on {machine}; NCCL {}",
            if comm.is_some() {
                "loaded"
            } else if args.iter().any(|a| a == "--no-nccl") {
                "left out (--no-nccl): NCCL columns empty"
            } else {
                "not found (no libnccl.so on the loader's path): NCCL columns empty"
            }
        );
    }
    let ways = ways();
    let names: Vec<String> = ways.iter().map(|w| w.name()).collect();
    // The baselines the fused kernel must beat (`pgas`, `nccl`, `nccl_graph`) and the kernel
    // first measured, as indices into `ways`.
    let baselines: Vec<usize> = (0..ways.len()).filter(|&i| ways[i].is_baseline()).collect();
    let first = ways
        .iter()
        .position(|&w| w == Way::Fused(Fused::FIRST))
        .ok_or("jacobi::FORMS lacks Fused::FIRST")?;
    // results[size][way] = microseconds per iteration (runs), empty where not run.
    let mut results: Vec<Vec<Vec<f64>>> = Vec::new();
    let mut iters_of = Vec::new();
    for &n in &sizes {
        let iters = iters_for(n);
        iters_of.push(iters);
        if n <= HOST_CHECK_MAX {
            host_check(&p, n, &stream, max_blocks)?;
        }
        let mut row: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
        let mut reference: Option<Vec<f32>> = None;
        for (wi, &way) in ways.iter().enumerate() {
            if matches!(way, Way::Nccl | Way::NcclGraph) && comm.is_none() {
                continue;
            }
            let (us, field) = measure(
                &p,
                way,
                n,
                iters,
                comm.as_ref(),
                &stream,
                (step, max_blocks),
            )?;
            match &reference {
                None => reference = Some(field),
                Some(r) => {
                    if let Some(i) = (0..r.len()).find(|&i| r[i].to_bits() != field[i].to_bits()) {
                        return Err(format!(
                            "N = {n}: {} differs from {} after {} iterations at row {}, \
                             column {}: {} != {}",
                            way.name(),
                            names[0],
                            (1 + REPS) * iters as usize,
                            i / n,
                            i % n,
                            field[i],
                            r[i]
                        )
                        .into());
                    }
                }
            }
            row[wi] = us;
        }
        if me == 0 {
            let times: Vec<String> = names
                .iter()
                .zip(&row)
                .map(|(name, us)| format!("{name} {}", show(median(us))))
                .collect();
            println!(
                "{BENCH}: N = {n}: {iters} iterations a run; us/iteration {}; fields equal",
                times.join(" ")
            );
        }
        results.push(row);
    }
    if me != 0 {
        return Ok(());
    }
    let mut table = format!(
        "# 2-D Jacobi with halo exchange on {machine}\n\n\
         Per GPU an N x N f32 slab (periodic ring of {pes} PE(s)); median microseconds per \
         iteration over {REPS} timed runs (min-max in the FIGURE notes); speedup = other / fused. \
         `fused` is the form `Method::Fused` picks at that N (`Fused::for_size`); `fused_rolled` the \
         kernel first measured.\n\n\
         | N (field per GPU) | iterations a run | {} | fused (form) | fused | fused vs pgas | fused vs NCCL | fused vs NCCL graph | fused vs fused_rolled |\n\
         |{}\n",
        names.join(" | "),
        " --- |".repeat(ways.len() + 8)
    );
    let mut time_series: Vec<Series> = names
        .iter()
        .map(|name| Series {
            name: name.clone(),
            points: Vec::new(),
        })
        .collect();
    let mut speed_series: Vec<Series> = baselines
        .iter()
        .map(|&b| Series {
            name: format!("fused vs {}", names[b]),
            points: Vec::new(),
        })
        .collect();
    for (si, &n) in sizes.iter().enumerate() {
        let r = &results[si];
        let m: Vec<f64> = r.iter().map(|v| median(v)).collect();
        // The default form at this N: one of the ways, so its time is already measured.
        let chosen = Way::Fused(Fused::for_size(n, n));
        let d = ways
            .iter()
            .position(|&w| w == chosen)
            .ok_or("Fused::for_size picked a form outside jacobi::FORMS")?;
        let bytes = n * n * 4;
        let cells: Vec<String> = m.iter().map(|&x| show(x)).collect();
        let _ = writeln!(
            table,
            "| {n} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |",
            human(bytes),
            iters_of[si],
            cells.join(" | "),
            names[d],
            show(m[d]),
            times(m[baselines[0]] / m[d]),
            times(m[baselines[1]] / m[d]),
            times(m[baselines[2]] / m[d]),
            times(m[first] / m[d]),
        );
        for (wi, name) in names.iter().enumerate() {
            time_series[wi].points.push((bytes as f64, m[wi]));
            if m[wi].is_finite() {
                let (lo, hi) = spread(&r[wi]);
                emit(
                    BENCH,
                    &machine,
                    &Figure {
                        name: format!("jacobi2d_{n}_{name}_us_per_iter"),
                        value: m[wi],
                        unit: "us",
                        note: format!(
                            "median of {REPS} runs of {} iterations, min {} max {}",
                            iters_of[si],
                            show(lo),
                            show(hi)
                        ),
                    },
                );
            }
        }
        if m[d].is_finite() {
            emit(
                BENCH,
                &machine,
                &Figure {
                    name: format!("jacobi2d_{n}_fused_us_per_iter"),
                    value: m[d],
                    unit: "us",
                    note: format!("the default form at this N: {}", names[d]),
                },
            );
        }
        for (bi, &b) in baselines.iter().enumerate() {
            speed_series[bi].points.push((bytes as f64, m[b] / m[d]));
            if m[b].is_finite() {
                emit(
                    BENCH,
                    &machine,
                    &Figure {
                        name: format!("jacobi2d_{n}_fused_speedup_vs_{}", names[b]),
                        value: m[b] / m[d],
                        unit: "x",
                        note: format!("medians; fused is {} here", names[d]),
                    },
                );
            }
        }
        // The issue's bar: each fused form against the fastest baseline that ran at this size.
        let best = baselines
            .iter()
            .filter(|&&b| m[b].is_finite())
            .min_by(|&&a, &&b| m[a].total_cmp(&m[b]));
        if let Some(&b) = best {
            for (wi, w) in ways.iter().enumerate() {
                if !w.is_baseline() && m[wi].is_finite() {
                    emit(
                        BENCH,
                        &machine,
                        &Figure {
                            name: format!("jacobi2d_{n}_{}_speedup_vs_best_baseline", names[wi]),
                            value: m[b] / m[wi],
                            unit: "x",
                            note: format!("medians; the fastest baseline here is {}", names[b]),
                        },
                    );
                }
            }
        }
    }
    println!("{table}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir)?;
        let dir = std::path::Path::new(&dir);
        std::fs::write(dir.join("halo.md"), &table)?;
        let keep = |s: Vec<Series>| -> Vec<Series> {
            s.into_iter()
                .filter(|s| s.points.iter().any(|(_, y)| y.is_finite()))
                .collect()
        };
        plot::log_log_by_bytes(
            &dir.join("halo_time.png"),
            &format!("2-D Jacobi + halo exchange, time per iteration ({machine})"),
            "f32 field per GPU (N x N)",
            "microseconds per iteration",
            &keep(time_series),
        )?;
        plot::log_log_by_bytes(
            &dir.join("halo_speedup.png"),
            &format!("fused kernel's speedup over each baseline ({machine})"),
            "f32 field per GPU (N x N)",
            "speedup (baseline time / fused time)",
            &keep(speed_series),
        )?;
    }
    Ok(())
}
