//! The tensor-parallel decoder's step between two layers, tokens x hidden 8192 bf16 (tokens 1,
//! 2, 4, .. 8192), three ways in the same run, each eager and captured into a CUDA graph:
//!
//! - `fused`: `pgas::ops::AllReduceRmsNorm::run`, all-reduce + residual add + RMSNorm in one
//!   kernel (its automatic low-latency / one-shot / two-shot choice);
//! - `fused_ll`: the same by `Algorithm::LowLatency` (LL lines, no handshake), up to
//!   `LL_TOKENS` tokens;
//! - `pgas`: `pgas::coll` all-reduce (`Algorithm::Auto`) into a buffer, then the residual add
//!   and RMSNorm alone (`AllReduceRmsNorm::add_rms_norm_on`: the same kernel without its
//!   exchange);
//! - `nccl`: `ncclAllReduce` into the same buffer, then the same norm kernel: what a user writes
//!   today.
//!
//! Each (tokens, way, mode) runs 3 warm-up calls, then `REPS` timed runs of `K` back-to-back
//! calls (CUDA events; `K` shrinks with the size), and the median per call is reported. Before
//! timing, each way runs once from the same residual: its residual and output must agree with
//! the fused one (within two bf16 steps: the unfused ways round the all-reduce's sum to bf16
//! before the residual add), and up to 1024 tokens the fused one must equal the host's
//! (`ops::allreduce_rmsnorm::reference`: the residual bit for bit, the norm within two bf16
//! steps). A mismatch fails the run (exit 1). PE 0 prints a table and `FIGURE` lines
//! (`allreduce_rmsnorm_{tokens}tok_{way}_{eager,graph}` in us,
//! `allreduce_rmsnorm_{tokens}tok_{fused,fused_ll}_speedup_vs_{nccl,pgas}`: best of eager and
//! graph each side) and, given an OUTDIR, writes `allreduce_rmsnorm.md`, `allreduce_rmsnorm_time.png` and
//! `allreduce_rmsnorm_speedup.png` there.
//!
//! ```text
//! pgas-run -n 2 -- target/release/deps/allreduce_rmsnorm_bench-<hash> [OUTDIR] [--tokens 1,64] [--hidden 8192] [--fused one-shot] [--no-nccl]
//! ```
//!
//! `--fused one-shot` or `two-shot` times that form in the `fused` column instead of `Auto`'s
//! choice (to measure where the choice should change).
//!
//! NCCL is loaded as in `benches/common/nccl.rs`; without it (or with `--no-nccl`: NCCL refuses
//! two ranks on one GPU) the NCCL rows stay empty.

#[path = "common/mod.rs"]
mod common;

use common::nccl::{nccl_comm, Nccl};
use common::plot::{self, Series};
use common::{emit, median, show, time_on_stream, BenchResult, Figure};
use pgas::coll::{Algorithm, Comm};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::CudaStream;
use pgas::cudarc::nccl::{result as nccl, sys as nccl_sys};
use pgas::ops::allreduce_rmsnorm::{reference, within_tolerance};
use pgas::ops::AllReduceRmsNorm;
use pgas::prelude::*;
use std::fmt::Write as _;
use std::sync::Arc;

const BENCH: &str = "allreduce_rmsnorm";
const REPS: usize = 7;
const EPS: f32 = 1e-5;
/// Largest token count checked against the host.
const HOST_CHECK_MAX: usize = 1024;
/// Largest token count the low-latency form runs at (its grid is at most 32 blocks).
const LL_TOKENS: usize = 64;

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Fused,
    FusedLl,
    Pgas,
    Nccl,
}

const WAYS: [Way; 4] = [Way::Fused, Way::FusedLl, Way::Pgas, Way::Nccl];
const NAMES: [&str; 4] = ["fused", "fused_ll", "pgas", "nccl"];

impl Way {
    fn name(self) -> &'static str {
        NAMES[self as usize]
    }
}

/// A small value exact in bf16, different per element and PE.
fn val(i: usize, pe: usize, salt: usize) -> bf16 {
    bf16::from_f32(((i * 7 + pe * 13 + salt * 5) % 17) as f32 / 8.0 - 1.0)
}

/// The buffers of one token count (views of the largest).
struct Bufs {
    x: SymTensor<bf16>,
    reduced: SymTensor<bf16>,
    residual: SymTensor<bf16>,
    out: SymTensor<bf16>,
    weight: SymTensor<bf16>,
}

/// Enqueues one call of `way` on `len` elements; `fused` is the algorithm of `Way::Fused`
/// (`Auto` unless `--fused` names another).
fn call(
    (way, fused): (Way, Algorithm), op: &mut AllReduceRmsNorm, comm: &mut Comm,
    nccl: Option<&Nccl>, stream: &CudaStream, b: &mut Bufs, len: usize,
) -> BenchResult<()> {
    let x = b.x.view(0..len)?;
    let mut residual = b.residual.view_mut(0..len)?;
    let mut out = b.out.view_mut(0..len)?;
    let mut reduced = b.reduced.view_mut(0..len)?;
    match way {
        Way::Fused => {
            op.run(&x, &mut residual, &b.weight, &mut out, fused.on(stream))?;
            return Ok(());
        }
        Way::FusedLl => {
            let ll = Algorithm::LowLatency;
            op.run(&x, &mut residual, &b.weight, &mut out, ll.on(stream))?;
            return Ok(());
        }
        Way::Pgas => {
            comm.all_reduce(&mut reduced, &x, ReduceOp::Sum, Algorithm::Auto.on(stream))?;
        }
        Way::Nccl => {
            let c = nccl.ok_or("NCCL is not loaded")?.0;
            let (sp, dp) = (x.as_device_ptr(), reduced.as_device_ptr());
            let bf = nccl_sys::ncclDataType_t::ncclBfloat16;
            let sum = nccl_sys::ncclRedOp_t::ncclSum;
            // SAFETY: both are device buffers of this GPU, `len` elements each.
            unsafe { nccl::all_reduce(sp as _, dp as _, len, bf, sum, c, stream.cu_stream() as _) }
                .map_err(|e| format!("ncclAllReduce: {e:?}"))?;
        }
    }
    op.add_rms_norm_on(stream, &reduced, &mut residual, &b.weight, &mut out)?;
    Ok(())
}

// One long function on purpose: a benchmark reads top to bottom as the run it makes; the token
// counts share the buffers and communicators.
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
                && (*i == 0 || !matches!(args[i - 1].as_str(), "--tokens" | "--hidden" | "--fused"))
        })
        .map(|(_, a)| a.clone());
    let tokens_list: Vec<usize> = match opt("--tokens") {
        Some(v) => v
            .ok_or("--tokens needs a list such as 1,64")?
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()?,
        None => (0..14).map(|k| 1usize << k).collect(),
    };
    let hidden: usize = match opt("--hidden") {
        Some(v) => v.ok_or("--hidden needs a number")?.parse()?,
        None => 8192,
    };
    let fused = match opt("--fused") {
        None => Algorithm::Auto,
        Some(v) => match v.map(String::as_str) {
            Some("auto") => Algorithm::Auto,
            Some("one-shot") => Algorithm::OneShot,
            Some("two-shot") => Algorithm::TwoShot,
            _ => return Err("--fused takes auto, one-shot or two-shot".into()),
        },
    };
    let max_tokens = *tokens_list.iter().max().ok_or("no token counts")?;
    let max_len = max_tokens * hidden;
    let p = pgas::builder()
        .heap_size(4 * max_len * 2 + hidden * 2 + (256 << 20))
        .init()?;
    let (me, n) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{n} PE", p.cuda().name()?);
    let nccl_owned = if args.iter().any(|a| a == "--no-nccl") {
        None
    } else {
        nccl_comm(&p)?
    };
    let nccl = nccl_owned.as_ref();
    let mut op = AllReduceRmsNorm::new(&p, hidden, max_tokens, EPS)?;
    op.prewarm()?;
    let mut comm = Comm::new(&p, Team::WORLD)?;
    pgas::coll::prewarm::<bf16>(&p)?;
    let x_h: Vec<bf16> = (0..max_len).map(|i| val(i, me, 1)).collect();
    let res_h: Vec<bf16> = (0..max_len).map(|i| val(i, 0, 9)).collect();
    let w_h: Vec<bf16> = (0..hidden)
        .map(|i| bf16::from_f32(1.0 + (i % 5) as f32 / 8.0))
        .collect();
    let mut b = Bufs {
        x: p.alloc_from(&x_h)?,
        reduced: p.alloc::<bf16>(max_len)?,
        residual: p.alloc::<bf16>(max_len)?,
        out: p.alloc::<bf16>(max_len)?,
        weight: p.alloc_from(&w_h)?,
    };
    let stream: Arc<CudaStream> = p.cuda().new_stream()?;
    if me == 0 {
        println!(
            "{BENCH}: all-reduce + residual add + RMSNorm, tokens x {hidden} bf16 on {machine}; NCCL {}",
            if nccl.is_some() { "loaded" } else { "not loaded: NCCL rows empty" }
        );
    }
    // results[tokens][way][mode] = microseconds per call (NaN: not run).
    let mut results = vec![[[f64::NAN; 2]; 4]; tokens_list.len()];
    for (ti, &tokens) in tokens_list.iter().enumerate() {
        let len = tokens * hidden;
        let k = ((64usize << 20) / (len * 2).max(1 << 20)).clamp(2, 20);
        // Correctness: every way once from the same residual.
        let mut fused_result: Option<(Vec<bf16>, Vec<bf16>)> = None;
        let ll = op.low_latency_available() && tokens <= LL_TOKENS;
        let runs = |w: Way| match w {
            Way::Nccl => nccl.is_some(),
            Way::FusedLl => ll,
            _ => true,
        };
        for way in WAYS {
            if !runs(way) {
                continue;
            }
            b.residual.view_mut(0..len)?.copy_from(&res_h[..len])?;
            p.barrier_all()?;
            call((way, fused), &mut op, &mut comm, nccl, &stream, &mut b, len)?;
            stream.synchronize()?;
            let got = (
                b.residual.view(0..len)?.to_vec()?,
                b.out.view(0..len)?.to_vec()?,
            );
            match &fused_result {
                None => {
                    if tokens <= HOST_CHECK_MAX {
                        let parts: Vec<Vec<bf16>> = (0..n)
                            .map(|pe| (0..len).map(|i| val(i, pe, 1)).collect())
                            .collect();
                        let refs: Vec<&[bf16]> = parts.iter().map(Vec::as_slice).collect();
                        let (r, y) = reference(&refs, &res_h[..len], &w_h, hidden, EPS);
                        if let Some(i) = (0..len)
                            .find(|&i| got.0[i] != r[i] || !within_tolerance(got.1[i], y[i]))
                        {
                            return Err(format!(
                                "{tokens} tokens: fused differs from the host at element {i}: residual {} (host {}), out {} (host {})",
                                got.0[i], r[i], got.1[i], y[i]
                            )
                            .into());
                        }
                    }
                    fused_result = Some(got);
                }
                Some((r, y)) => {
                    let bad = (0..len).find(|&i| {
                        !within_tolerance(got.0[i], r[i]) || !within_tolerance(got.1[i], y[i])
                    });
                    if let Some(i) = bad {
                        return Err(format!(
                            "{tokens} tokens: {} differs from fused at element {i}: residual {} (fused {}), out {} (fused {})",
                            way.name(), got.0[i], r[i], got.1[i], y[i]
                        )
                        .into());
                    }
                }
            }
        }
        for (wi, way) in WAYS.into_iter().enumerate() {
            if !runs(way) {
                continue;
            }
            for (gi, graph) in [false, true].into_iter().enumerate() {
                p.barrier_all()?;
                for _ in 0..3 {
                    call((way, fused), &mut op, &mut comm, nccl, &stream, &mut b, len)?;
                }
                stream.synchronize()?;
                let exec = if graph {
                    p.barrier_all()?;
                    stream
                        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
                    let mut r = Ok(());
                    for _ in 0..k {
                        r = r.and(call(
                            (way, fused),
                            &mut op,
                            &mut comm,
                            nccl,
                            &stream,
                            &mut b,
                            len,
                        ));
                    }
                    let g = stream.end_capture(CUgraphInstantiate_flags(0))?;
                    r?;
                    let g = g.ok_or("empty capture")?;
                    g.upload()?;
                    Some(g)
                } else {
                    None
                };
                let mut times = Vec::with_capacity(REPS);
                for _ in 0..REPS {
                    p.barrier_all()?;
                    let ms = time_on_stream(&stream, || {
                        match &exec {
                            Some(g) => g.launch()?,
                            None => {
                                for _ in 0..k {
                                    call(
                                        (way, fused),
                                        &mut op,
                                        &mut comm,
                                        nccl,
                                        &stream,
                                        &mut b,
                                        len,
                                    )?;
                                }
                            }
                        }
                        Ok(())
                    })?;
                    times.push(ms * 1000.0 / k as f64);
                }
                stream.synchronize()?;
                drop(exec);
                results[ti][wi][gi] = median(&times);
            }
        }
        p.barrier_all()?;
        if me == 0 {
            let cells: Vec<String> = results[ti]
                .iter()
                .zip(NAMES)
                .map(|(c, n)| format!("{n} {} / {}", show(c[0]), show(c[1])))
                .collect();
            println!(
                "{BENCH}: {tokens} tokens (fused: {:?}): us/call {} (eager / graph); results agree",
                if fused == Algorithm::Auto {
                    op.algorithm_for(tokens)
                } else {
                    fused
                },
                cells.join(", ")
            );
        }
    }
    if me != 0 {
        return Ok(());
    }
    report(&machine, hidden, &tokens_list, &results, out_dir.as_deref())
}

/// The table, FIGURE lines and plots (PE 0).
fn report(
    machine: &str, hidden: usize, tokens_list: &[usize], results: &[[[f64; 2]; 4]],
    out_dir: Option<&str>,
) -> BenchResult<()> {
    let mut table = format!(
        "# All-reduce + residual add + RMSNorm, tokens x {hidden} bf16, on {machine}\n\n\
         Median microseconds per call ({REPS} runs of K back-to-back calls), `eager / graph`; \
         speedup = the baseline's best / the fused form's best. `fused`: the automatic choice \
         (low latency / one-shot / two-shot); `fused_ll`: low latency (up to {LL_TOKENS} tokens).\n\n\
         | tokens | fused | fused_ll | pgas all-reduce + norm | NCCL + norm | fused vs pgas | \
         fused vs NCCL | fused_ll vs NCCL |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    // (fused form, baseline) pairs of the speedups.
    let pairs = [(0, 2), (0, 3), (1, 3)];
    let mut time_series: Vec<Series> = NAMES
        .iter()
        .map(|n| Series {
            name: format!("{n} (best of eager, graph)"),
            points: Vec::new(),
        })
        .collect();
    let mut speed_series: Vec<Series> = pairs
        .iter()
        .map(|&(f, b)| Series {
            name: format!("{} vs {}", NAMES[f], NAMES[b]),
            points: Vec::new(),
        })
        .collect();
    for (ti, &tokens) in tokens_list.iter().enumerate() {
        let r = &results[ti];
        let best = |w: usize| r[w][0].min(r[w][1]);
        let x = |s: f64| {
            if s.is_finite() {
                format!("{}x", show(s))
            } else {
                "-".into()
            }
        };
        let _ = write!(table, "| {tokens} |");
        for cell in r {
            let _ = write!(table, " {} / {} |", show(cell[0]), show(cell[1]));
        }
        for &(f, b) in &pairs {
            let _ = write!(table, " {} |", x(best(b) / best(f)));
        }
        table.push('\n');
        for (wi, name) in NAMES.iter().enumerate() {
            time_series[wi].points.push((tokens as f64, best(wi)));
            for (gi, mode) in ["eager", "graph"].iter().enumerate() {
                if r[wi][gi].is_finite() {
                    emit(
                        BENCH,
                        machine,
                        &Figure {
                            name: format!("{BENCH}_{tokens}tok_{name}_{mode}"),
                            value: r[wi][gi],
                            unit: "us",
                            note: format!("median of {REPS}, hidden {hidden}"),
                        },
                    );
                }
            }
        }
        for (pi, &(f, b)) in pairs.iter().enumerate() {
            let speed = best(b) / best(f);
            speed_series[pi].points.push((tokens as f64, speed));
            if speed.is_finite() {
                emit(
                    BENCH,
                    machine,
                    &Figure {
                        name: format!("{BENCH}_{tokens}tok_{}_speedup_vs_{}", NAMES[f], NAMES[b]),
                        value: speed,
                        unit: "x",
                        note: "best of eager and graph, each side".into(),
                    },
                );
            }
        }
    }
    println!("{table}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(dir)?;
        let dir = std::path::Path::new(dir);
        std::fs::write(dir.join("allreduce_rmsnorm.md"), &table)?;
        let keep = |s: Vec<Series>| -> Vec<Series> {
            s.into_iter()
                .filter(|s| s.points.iter().any(|(_, y)| y.is_finite()))
                .collect()
        };
        plot::by_count(
            &dir.join("allreduce_rmsnorm_time.png"),
            &format!("all-reduce + residual + RMSNorm, x {hidden} bf16 ({machine})"),
            ("tokens", "microseconds per call"),
            &keep(time_series),
        )?;
        plot::by_count(
            &dir.join("allreduce_rmsnorm_speedup.png"),
            &format!("fused kernel's speedup ({machine})"),
            ("tokens", "speedup (baseline's best / fused form's best)"),
            &keep(speed_series),
        )?;
    }
    Ok(())
}
