//! MoE dispatch and combine: `pgas::ops::moe` against NCCL moving the same rows, in the same job,
//! at DeepSeek-V3 sizes (hidden 7168 `bf16`, top-8 of 8 experts per GPU, uniform routing) from
//! 128 (decoding) to 4096 tokens per GPU.
//!
//! ```text
//! pgas-run -n 2 -- target/release/deps/moe-<hash> [OUTDIR]
//! ```
//!
//! **GB/s per GPU** is DeepEP's: for dispatch, the bytes of the token rows a GPU *receives*
//! (`rows * hidden * 2`, each token counted once per destination GPU, its own included), for
//! combine the bytes of the rows it *sends* back (the same rows), divided by the call's time.
//! The figure reported for a size is the smallest over the GPUs.
//!
//! - **pgas**: [`MoeDispatcher::dispatch`] (layout, count exchange on the GPU, rows by peer
//!   stores, metadata and per-expert lists) and [`MoeDispatcher::combine`] (weighted reduction
//!   of each row's expert outputs, partial rows back by peer stores, sum on the token's GPU),
//!   and [`MoeDispatcher::combine_rows`] (the rows reduced on the experts' GPU already, as the
//!   NCCL baseline moves them: pulled by the token's GPU with peer loads and summed, one
//!   kernel); and dispatch with [`MoeDispatcher::set_fp8_dispatch`] (rows sent as `e4m3` with a
//!   scale per 128 values, expanded to `bf16` on arrival; its GB/s counts the `bf16` bytes
//!   delivered, as the others).
//! - **NCCL**: the same rows as an all-to-all-v of ncclSend/ncclRecv in one group, from a send
//!   buffer already permuted by destination (the permutation is not timed). Dispatch includes
//!   its count exchange (a grouped send/recv of one count per peer, copied to the host, which
//!   must know the sizes to post the receives); combine sends the received rows back (sizes
//!   known). NCCL moves only the rows: no metadata, no weighting, no reduction.
//!
//! Each (size, method) is timed with CUDA events around each call (after a host barrier;
//! combine after an untimed dispatch that completed, as combine follows its dispatch), median
//! of `REPS`, after warm-up. Every result is checked before its figures count: pgas's received rows and combined
//! tokens against `moe::reference`, NCCL's received rows against the same rows and its combine
//! against the rows sent. PE 0 prints a table and `FIGURE` lines, and writes `moe.md` and
//! `moe_gbs.png` (GB/s against tokens) to OUTDIR when given.
//!
//! Then the low-latency mode ([`LowLatencyMoe`]) at 16, 64 and 128 tokens per GPU: dispatch,
//! and combine after an untimed dispatch, each combined token checked; then a decode step
//! (dispatch + combine) captured 10 times into one CUDA graph and replayed, checked again; its
//! 128-token row is set beside the table's NCCL figures at 128 tokens (`moe_ll_*` FIGURE lines).

mod common;

use common::nccl::{nccl_comm, Nccl};
use common::plot::{self, Series};
use common::{emit, median, show, time_on_stream, BenchResult, Figure};
use pgas::cudarc::driver::sys as cu;
use pgas::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use pgas::cudarc::nccl::{result as nccl, sys as nccl_sys};
use pgas::ops::moe::reference::{experts, x_value};
use pgas::ops::moe::{reference, LowLatencyMoe, MoeConfig, MoeDispatcher};
use pgas::prelude::*;
use std::fmt::Write as _;

const BENCH: &str = "moe";
const REPS: usize = 15;
const WARMUP: usize = 3;
const TOKENS: &[usize] = &[128, 256, 512, 1024, 2048, 4096];
const CFG: MoeConfig = MoeConfig {
    max_tokens: 4096,
    hidden: 7168,
    top_k: 8,
    experts_per_pe: 8,
};

/// NCCL's all-to-all-v in one group: `send[d]` elements from `sbuf` at `soff[d]` to PE `d`,
/// `recv[s]` into `rbuf` at `roff[s]` from PE `s`.
#[allow(clippy::too_many_arguments)]
fn all_to_all_v(
    comm: &Nccl, stream: &CudaStream, sbuf: u64, send: &[usize], rbuf: u64, recv: &[usize],
    dtype: nccl_sys::ncclDataType_t, size: usize,
) -> BenchResult<()> {
    nccl::group_start().map_err(|e| format!("ncclGroupStart: {e:?}"))?;
    let (mut so, mut ro) = (0usize, 0usize);
    for d in 0..send.len() {
        // SAFETY: offsets and counts stay inside the buffers the caller sized for them.
        unsafe {
            if send[d] > 0 {
                nccl::send(
                    (sbuf + (so * size) as u64) as *const _,
                    send[d],
                    dtype,
                    d as i32,
                    comm.0,
                    stream.cu_stream() as _,
                )
                .map_err(|e| format!("ncclSend: {e:?}"))?;
            }
            if recv[d] > 0 {
                nccl::recv(
                    (rbuf + (ro * size) as u64) as *mut _,
                    recv[d],
                    dtype,
                    d as i32,
                    comm.0,
                    stream.cu_stream() as _,
                )
                .map_err(|e| format!("ncclRecv: {e:?}"))?;
            }
        }
        so += send[d];
        ro += recv[d];
    }
    nccl::group_end().map_err(|e| format!("ncclGroupEnd: {e:?}"))?;
    Ok(())
}

/// NCCL's dispatch: the count exchange (one count per peer, to the host), then the rows.
#[allow(clippy::too_many_arguments)]
fn nccl_dispatch(
    comm: &Nccl, stream: &CudaStream, counts_out: &CudaSlice<i32>, counts_in: &mut CudaSlice<i32>,
    send_rows: &[usize], sbuf: u64, rbuf: u64, h: usize,
) -> BenchResult<Vec<usize>> {
    let n = send_rows.len();
    let ones = vec![1usize; n];
    let (co, _g1) = counts_out.device_ptr(stream);
    let (ci, _g2) = counts_in.device_ptr_mut(stream);
    all_to_all_v(
        comm,
        stream,
        co,
        &ones,
        ci,
        &ones,
        nccl_sys::ncclDataType_t::ncclInt32,
        4,
    )?;
    let mut got = vec![0i32; n];
    // SAFETY: `got` has n elements and lives until the synchronization below.
    unsafe {
        cu::cuMemcpyDtoHAsync_v2(got.as_mut_ptr().cast(), ci, 4 * n, stream.cu_stream())
            .result()?;
    }
    stream.synchronize()?;
    let recv_rows: Vec<usize> = got.iter().map(|&c| c as usize * h).collect();
    let send: Vec<usize> = send_rows.iter().map(|&r| r * h).collect();
    all_to_all_v(
        comm,
        stream,
        sbuf,
        &send,
        rbuf,
        &recv_rows,
        nccl_sys::ncclDataType_t::ncclBfloat16,
        2,
    )?;
    Ok(got.iter().map(|&c| c as usize).collect())
}

/// The timed methods, in the order of [`Row`]'s columns (`FIGURE` names `moe_{name}_...`).
const NAMES: [&str; METHODS] = [
    "dispatch_pgas",
    "dispatch_nccl",
    "combine_pgas",
    "combine_nccl",
    "combine_rows_pgas",
    "dispatch_fp8_pgas",
];
const METHODS: usize = 6;

/// Per size: microseconds and GB/s of each of [`NAMES`] (the slowest GPU's), and the rows per
/// GPU (average).
struct Row {
    tokens: usize,
    rows: f64,
    us: [f64; METHODS],
    gbs: [f64; METHODS],
}

// One long function on purpose: a benchmark reads top to bottom as the run it makes (set-up, each
// method timed and checked, the table), and its parts share every buffer.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let out_dir = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let p = pgas::builder().heap_size(2 << 30).init()?;
    let (me, n) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{n} PE", p.cuda().name()?);
    let h = CFG.hidden;
    // Two ranks on one GPU (under MPS, for correctness runs) is an NCCL error: run without it.
    let comm = nccl_comm(&p).unwrap_or_else(|e| {
        if me == 0 {
            println!("{BENCH}: NCCL could not start ({e}): NCCL columns empty");
        }
        None
    });
    let mut moe = MoeDispatcher::new(&p, CFG)?;
    moe.prewarm()?;
    let stream = p.stream().clone();
    if me == 0 {
        println!(
            "{BENCH}: hidden {h} bf16, top-{} of {} experts ({} per GPU), uniform routing, on \
             {machine}; NCCL {}",
            CFG.top_k,
            n * CFG.experts_per_pe,
            CFG.experts_per_pe,
            if comm.is_some() {
                "loaded"
            } else {
                "not found (no libnccl.so on the loader's path): NCCL columns empty"
            }
        );
    }
    let cap_rows = CFG.max_recv_rows(n);
    let mut nccl_send = stream.alloc_zeros::<bf16>(cap_rows * h)?;
    let mut nccl_recv = stream.alloc_zeros::<bf16>(cap_rows * h)?;
    let mut nccl_back = stream.alloc_zeros::<bf16>(cap_rows * h)?;
    let mut counts_in = stream.alloc_zeros::<i32>(n)?;
    let mut out = stream.alloc_zeros::<bf16>(CFG.max_tokens * h)?;
    // The protocol alone: every PE routes no token (layout, count exchange and signals of
    // dispatch; the signals of combine).
    let empty = moe.route(&[], &[])?;
    let (mut empty_dispatch, mut empty_combine, mut empty_rows) = (vec![], vec![], vec![]);
    // The host's part of an empty combine_rows: the call itself, which only queues the launch.
    let mut empty_rows_host = vec![];
    let one_row = stream.alloc_zeros::<bf16>(h)?;
    for i in 0..WARMUP + REPS {
        p.barrier_all()?;
        let ms = time_on_stream(&stream, || Ok(moe.dispatch(&one_row, &empty)?))?;
        moe.recv_counts()?;
        p.barrier_all()?;
        let mc = time_on_stream(&stream, || Ok(moe.combine(&one_row, &empty, &mut out)?))?;
        p.barrier_all()?;
        moe.dispatch(&one_row, &empty)?;
        moe.recv_counts()?;
        p.barrier_all()?;
        let mut host = 0.0;
        let mr = time_on_stream(&stream, || {
            let t0 = std::time::Instant::now();
            moe.combine_rows(&empty, &mut out)?;
            host = t0.elapsed().as_secs_f64() * 1e6;
            Ok(())
        })?;
        if i >= WARMUP {
            empty_dispatch.push(ms * 1000.0);
            empty_combine.push(mc * 1000.0);
            empty_rows.push(mr * 1000.0);
            empty_rows_host.push(host);
        }
    }
    let empty_us = [
        median(&empty_dispatch),
        median(&empty_combine),
        median(&empty_rows),
    ];
    let mut rows_out = Vec::new();
    for &tokens in TOKENS {
        let routings: Vec<(Vec<i32>, Vec<f32>)> = (0..n)
            .map(|pe| reference::sample_routing(&CFG, n, tokens, (tokens * 16 + pe) as u64, false))
            .collect();
        let x_host: Vec<bf16> = (0..tokens * h).map(|i| x_value(me, i / h, i % h)).collect();
        let x = stream.clone_htod(&x_host)?;
        let routing = moe.route(&routings[me].0, &routings[me].1)?;
        let idx: Vec<&[i32]> = routings.iter().map(|r| r.0.as_slice()).collect();
        let wts: Vec<&[f32]> = routings.iter().map(|r| r.1.as_slice()).collect();
        let want = reference::dispatch(&CFG, &idx, &wts);
        let rows = want[me].src.len();
        let mut times: [Vec<f64>; METHODS] = Default::default();

        // pgas dispatch (the last one is checked, then the experts run on it for combine).
        for i in 0..WARMUP + REPS {
            p.barrier_all()?;
            let ms = time_on_stream(&stream, || Ok(moe.dispatch(&x, &routing)?))?;
            if i >= WARMUP {
                times[0].push(ms * 1000.0);
            }
        }
        let counts = moe.recv_counts()?;
        let mine = &want[me];
        if counts.rows != rows || counts.expert_offsets != mine.expert_offsets {
            return Err(format!(
                "{tokens} tokens: pgas received {} rows, expected {rows}",
                counts.rows
            )
            .into());
        }
        let got_x = moe.recv_x().view(0..h * rows.max(1))?.to_vec()?;
        let got_rows = moe.expert_rows().view(0..counts.pairs.max(1))?.to_vec()?;
        for (row, &(s, t)) in mine.src.iter().enumerate() {
            if let Some(c) = (0..h).find(|&c| got_x[row * h + c] != x_value(s, t, c)) {
                return Err(format!(
                    "{tokens} tokens: pgas row {row} (PE {s} token {t}) differs at {c}"
                )
                .into());
            }
        }
        if got_rows[..counts.pairs] != mine.expert_rows[..] {
            return Err(format!("{tokens} tokens: pgas per-expert rows differ").into());
        }
        let offsets: Vec<i32> = counts.expert_offsets.iter().map(|&o| o as i32).collect();
        let offsets = stream.clone_htod(&offsets)?;
        let mut expert_out = stream.alloc_zeros::<bf16>(counts.pairs.max(1) * h)?;
        experts::launch(
            &p,
            LaunchConfig::blocks(132, 512),
            &mut expert_out,
            moe.recv_x(),
            moe.expert_rows(),
            &offsets,
            h as u32,
        )?;
        // pgas combine, each after an untimed dispatch of the same routing.
        for i in 0..WARMUP + REPS {
            p.barrier_all()?;
            moe.dispatch(&x, &routing)?;
            // Waits for it, and lets combine check expert_out against this call's pairs.
            moe.recv_counts()?;
            let ms = time_on_stream(&stream, || {
                Ok(moe.combine(&expert_out, &routing, &mut out)?)
            })?;
            if i >= WARMUP {
                times[2].push(ms * 1000.0);
            }
        }
        let got = stream.clone_dtoh(&out.slice(0..tokens * h))?;
        let expert_row = |d: usize, pair: usize| {
            let r = &want[d];
            let e = r
                .expert_offsets
                .iter()
                .rposition(|&o| o <= pair)
                .unwrap_or(0);
            let (s, t) = r.src[r.expert_rows[pair] as usize];
            let scale = (e + 1) as f32 * 0.25;
            (0..h)
                .map(|c| bf16::from_f32(x_value(s, t, c).to_f32() * scale))
                .collect()
        };
        let want_out = reference::combine(&CFG, me, tokens, &want, expert_row);
        if let Some(i) = (0..tokens * h).find(|&i| {
            let (g, w) = (got[i].to_f32(), want_out[i].to_f32());
            (g - w).abs() > w.abs() / 128.0 + 1e-6
        }) {
            return Err(format!(
                "{tokens} tokens: pgas combined token {} column {}: {}, expected {}",
                i / h,
                i % h,
                got[i],
                want_out[i]
            )
            .into());
        }

        // pgas combine_rows: each received row reduced here already (its own x row stands in
        // for the experts' weighted sum), each after an untimed dispatch of the same routing.
        // Written once: after the combines above completed, nothing else writes these rows.
        if rows > 0 {
            moe.combine_input()
                .view_mut(0..rows * h)?
                .copy_from(&got_x[..rows * h])?;
        }
        for i in 0..WARMUP + REPS {
            p.barrier_all()?;
            moe.dispatch(&x, &routing)?;
            moe.recv_counts()?;
            let ms = time_on_stream(&stream, || Ok(moe.combine_rows(&routing, &mut out)?))?;
            if i >= WARMUP {
                times[4].push(ms * 1000.0);
            }
        }
        let got = stream.clone_dtoh(&out.slice(0..tokens * h))?;
        let want_rows = reference::combine_rows(&CFG, me, tokens, &want, |d, row| {
            let (s, t) = want[d].src[row];
            (0..h).map(|c| x_value(s, t, c)).collect()
        });
        if let Some(i) = (0..tokens * h).find(|&i| got[i] != want_rows[i]) {
            return Err(format!(
                "{tokens} tokens: pgas combine_rows token {} column {}: {}, expected {}",
                i / h,
                i % h,
                got[i],
                want_rows[i]
            )
            .into());
        }

        // pgas dispatch with FP8 rows; its received rows against the host's round trip.
        moe.set_fp8_dispatch(true)?;
        for i in 0..WARMUP + REPS {
            p.barrier_all()?;
            let ms = time_on_stream(&stream, || Ok(moe.dispatch(&x, &routing)?))?;
            if i >= WARMUP {
                times[5].push(ms * 1000.0);
            }
        }
        moe.recv_counts()?;
        let got_q = moe.recv_x().view(0..h * rows.max(1))?.to_vec()?;
        for (row, &(s, t)) in mine.src.iter().enumerate() {
            let sent: Vec<bf16> = (0..h).map(|c| x_value(s, t, c)).collect();
            if got_q[row * h..(row + 1) * h] != reference::fp8_round_trip(&sent)[..] {
                return Err(format!(
                    "{tokens} tokens: pgas FP8 row {row} (PE {s} token {t}) differs"
                )
                .into());
            }
        }
        moe.set_fp8_dispatch(false)?;

        if let Some(c) = &comm {
            // The send buffer, permuted by destination (untimed), and the rows each PE sends.
            let k = CFG.top_k;
            let el = CFG.experts_per_pe;
            let mut send_rows = vec![0usize; n];
            let mut perm: Vec<bf16> = Vec::new();
            for (d, count) in send_rows.iter_mut().enumerate() {
                for t in 0..tokens {
                    if routings[me].0[t * k..(t + 1) * k]
                        .iter()
                        .any(|&g| g >= 0 && g as usize / el == d)
                    {
                        perm.extend_from_slice(&x_host[t * h..(t + 1) * h]);
                        *count += 1;
                    }
                }
            }
            if !perm.is_empty() {
                stream.memcpy_htod(&perm, &mut nccl_send.slice_mut(0..perm.len()))?;
            }
            let counts_out: Vec<i32> = send_rows.iter().map(|&r| r as i32).collect();
            let counts_out = stream.clone_htod(&counts_out)?;
            let sbuf = nccl_send.device_ptr(&stream).0;
            let rbuf = nccl_recv.device_ptr_mut(&stream).0;
            let bbuf = nccl_back.device_ptr_mut(&stream).0;
            let mut recv_rows = vec![];
            for i in 0..WARMUP + REPS {
                p.barrier_all()?;
                let ms = time_on_stream(&stream, || {
                    recv_rows = nccl_dispatch(
                        c,
                        &stream,
                        &counts_out,
                        &mut counts_in,
                        &send_rows,
                        sbuf,
                        rbuf,
                        h,
                    )?;
                    Ok(())
                })?;
                if i >= WARMUP {
                    times[1].push(ms * 1000.0);
                }
            }
            let got = stream.clone_dtoh(&nccl_recv.slice(0..rows * h))?;
            if let Some((row, &(s, t))) =
                mine.src.iter().enumerate().find(|(row, &(s, t))| {
                    (0..h).any(|col| got[row * h + col] != x_value(s, t, col))
                })
            {
                return Err(
                    format!("{tokens} tokens: NCCL row {row} (PE {s} token {t}) differs").into(),
                );
            }
            // Combine: the received rows go back to where they came from.
            let back: Vec<usize> = recv_rows.iter().map(|&r| r * h).collect();
            let sent: Vec<usize> = send_rows.iter().map(|&r| r * h).collect();
            for i in 0..WARMUP + REPS {
                p.barrier_all()?;
                let ms = time_on_stream(&stream, || {
                    all_to_all_v(
                        c,
                        &stream,
                        rbuf,
                        &back,
                        bbuf,
                        &sent,
                        nccl_sys::ncclDataType_t::ncclBfloat16,
                        2,
                    )
                })?;
                if i >= WARMUP {
                    times[3].push(ms * 1000.0);
                }
            }
            if !perm.is_empty() && stream.clone_dtoh(&nccl_back.slice(0..perm.len()))? != perm {
                return Err(
                    format!("{tokens} tokens: NCCL's combine did not bring the rows back").into(),
                );
            }
        }
        // Every PE's GB/s; the smallest counts.
        let bytes = (rows * h * 2) as f64;
        let us: Vec<f64> = times.iter().map(|t| median(t)).collect();
        let mine_gbs: Vec<f64> = us.iter().map(|&u| bytes / (u * 1e-6) / 1e9).collect();
        let mut words: Vec<f64> = mine_gbs.clone();
        words.extend(us.iter());
        words.push(rows as f64);
        let send = p.alloc_from(&words)?;
        let all = p.alloc::<f64>(words.len() * n)?;
        p.fcollect(Team::WORLD, &all, &send)?;
        let all = all.to_vec()?;
        let at = |pe: usize, i: usize| all[pe * words.len() + i];
        // NaN (not run) stays NaN.
        let worst = |i: usize| {
            (0..n)
                .map(|pe| at(pe, i))
                .reduce(|a, b| if a < b || a.is_nan() { a } else { b })
        };
        let slowest = |i: usize| {
            (0..n)
                .map(|pe| at(pe, METHODS + i))
                .reduce(|a, b| if a > b || a.is_nan() { a } else { b })
        };
        let (worst, slowest) = (
            |i| worst(i).unwrap_or(f64::NAN),
            |i| slowest(i).unwrap_or(f64::NAN),
        );
        rows_out.push(Row {
            tokens,
            rows: (0..n).map(|pe| at(pe, 2 * METHODS)).sum::<f64>() / n as f64,
            us: std::array::from_fn(slowest),
            gbs: std::array::from_fn(worst),
        });
        p.barrier_all()?;
    }
    // SAFETY: every buffer `low_latency` uses is its own, made and dropped inside it, and all of
    // its work is on `stream` (the context's): untracked, its decode step can be captured.
    unsafe { p.cuda().disable_event_tracking() };
    let ll_rows = low_latency(&p, &stream);
    // SAFETY: the untracked buffers were all dropped inside `low_latency`.
    unsafe { p.cuda().enable_event_tracking() };
    let ll_rows = ll_rows?;
    if me != 0 {
        return Ok(());
    }
    let mut table = format!(
        "# MoE dispatch and combine on {machine}\n\nhidden {h} bf16, top-{} of {} experts ({} per GPU), uniform routing. \
         Median microseconds per call ({REPS} calls after {WARMUP} warm-up), the slowest GPU's; GB/s per GPU \
         (DeepEP's: bytes of token rows received by a GPU in dispatch, sent back in combine, / time), the smallest GPU's.\n\n\
         | tokens/GPU | rows/GPU | pgas dispatch | NCCL dispatch | pgas combine | NCCL combine | pgas combine_rows | pgas dispatch FP8 |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        CFG.top_k,
        n * CFG.experts_per_pe,
        CFG.experts_per_pe
    );
    for r in &rows_out {
        let cell = |i: usize| format!("{} us, {} GB/s", show(r.us[i]), show(r.gbs[i]));
        let _ = writeln!(
            table,
            "| {} | {:.0} | {} | {} | {} | {} | {} | {} |",
            r.tokens,
            r.rows,
            cell(0),
            cell(1),
            cell(2),
            cell(3),
            cell(4),
            cell(5)
        );
        for (i, name) in NAMES.iter().enumerate() {
            if r.us[i].is_finite() {
                for (value, unit) in [(r.us[i], "us"), (r.gbs[i], "GB/s")] {
                    emit(
                        BENCH,
                        &machine,
                        &Figure {
                            name: format!(
                                "moe_{name}_{}tok_{}",
                                r.tokens,
                                if unit == "us" { "us" } else { "gbs" }
                            ),
                            value,
                            unit,
                            note: format!("median of {REPS}, hidden {h}, top-{}", CFG.top_k),
                        },
                    );
                }
            }
        }
        for (what, a, b) in [
            ("dispatch", 0, 1),
            ("combine", 2, 3),
            ("combine_rows", 4, 3),
            ("dispatch_fp8", 5, 1),
        ] {
            if r.us[b].is_finite() {
                emit(
                    BENCH,
                    &machine,
                    &Figure {
                        name: format!("moe_{what}_{}tok_speedup_vs_nccl", r.tokens),
                        value: r.us[b] / r.us[a],
                        unit: "x",
                        note: "NCCL time / pgas time, slowest GPU each".into(),
                    },
                );
            }
        }
    }
    let _ = writeln!(
        table,
        "\nWith no token on any GPU (the protocol alone: layout, count exchange, signals), PE 0: \
         dispatch {} us, combine {} us, combine_rows {} us (of which {} us on the host, queueing it).",
        show(empty_us[0]),
        show(empty_us[1]),
        show(empty_us[2]),
        show(median(&empty_rows_host))
    );
    for (what, us) in [
        ("dispatch", empty_us[0]),
        ("combine", empty_us[1]),
        ("combine_rows", empty_us[2]),
    ] {
        emit(
            BENCH,
            &machine,
            &Figure {
                name: format!("moe_{what}_pgas_0tok_us"),
                value: us,
                unit: "us",
                note: format!("median of {REPS}, PE 0, no token anywhere"),
            },
        );
    }
    let _ = writeln!(
        table,
        "\nThe low-latency mode (`LowLatencyMoe`: routing on the GPU, one kernel each way, every \
         (token, expert) pair its own row, as DeepEP's low-latency kernels), slowest GPU, median \
         of {REPS}; NCCL's columns are the table's (per (token, GPU) rows, count exchange to the \
         host) at the same tokens. The last two columns are a decode step, dispatch then combine: \
         {LL_GRAPH_STEPS} steps captured into one CUDA graph and replayed (per step), against \
         NCCL's dispatch + combine eager (NCCL's needs the counts on the host):\n\n\
         | tokens/GPU | pairs/GPU | LL dispatch | NCCL dispatch | LL combine | NCCL combine | LL step, graph | NCCL step |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in &ll_rows {
        let (tokens, d, c, g) = (r.tokens, r.dispatch, r.combine, r.step_graph);
        let nccl = rows_out.iter().find(|row| row.tokens == tokens);
        let (nd, nc) = nccl.map_or((f64::NAN, f64::NAN), |r| (r.us[1], r.us[3]));
        let _ = writeln!(
            table,
            "| {tokens} | {:.0} | {} us | {} us | {} us | {} us | {} us | {} us |",
            r.pairs,
            show(d),
            show(nd),
            show(c),
            show(nc),
            show(g),
            show(nd + nc)
        );
        for (what, us, base) in [
            ("dispatch", d, nd),
            ("combine", c, nc),
            ("step_graph", g, nd + nc),
        ] {
            emit(
                BENCH,
                &machine,
                &Figure {
                    name: format!("moe_ll_{what}_{tokens}tok_us"),
                    value: us,
                    unit: "us",
                    note: format!("median of {REPS}, slowest GPU, LowLatencyMoe"),
                },
            );
            if base.is_finite() {
                emit(
                    BENCH,
                    &machine,
                    &Figure {
                        name: format!("moe_ll_{what}_{tokens}tok_speedup_vs_nccl"),
                        value: base / us,
                        unit: "x",
                        note: "NCCL time (the main table's) / LowLatencyMoe time".into(),
                    },
                );
            }
        }
    }
    println!("{table}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir)?;
        let dir = std::path::Path::new(&dir);
        std::fs::write(dir.join("moe.md"), &table)?;
        let series: Vec<Series> = [
            "pgas dispatch",
            "NCCL dispatch",
            "pgas combine",
            "NCCL combine",
            "pgas combine_rows",
            "pgas dispatch FP8",
        ]
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.to_string(),
            points: rows_out
                .iter()
                .map(|r| (r.tokens as f64, r.gbs[i]))
                .collect(),
        })
        .filter(|s| s.points.iter().any(|(_, y)| y.is_finite()))
        .collect();
        plot::by_count(
            &dir.join("moe_gbs.png"),
            &format!(
                "MoE dispatch / combine, hidden {h}, top-{} ({machine})",
                CFG.top_k
            ),
            (
                "tokens per GPU",
                "GB/s per GPU (token bytes received / sent)",
            ),
            &series,
        )?;
    }
    Ok(())
}

/// Tokens per GPU the low-latency mode is timed at (decode batches).
const LL_TOKENS: &[usize] = &[16, 64, 128];

/// Decode steps (dispatch + combine) captured into one graph for the graph timing.
const LL_GRAPH_STEPS: usize = 10;

/// One size of the low-latency mode: the slowest GPU's medians, microseconds.
struct LlRow {
    tokens: usize,
    /// (token, expert) pairs a GPU sends, the GPUs' mean.
    pairs: f64,
    dispatch: f64,
    combine: f64,
    /// A decode step (dispatch + combine) replayed from a CUDA graph, per step.
    step_graph: f64,
}

/// The low-latency mode at [`LL_TOKENS`]: dispatch, and combine after an untimed dispatch
/// (experts that write a value of their local expert only, so the combined tokens are checked
/// against the routing without an expert kernel), then [`LL_GRAPH_STEPS`] decode steps captured
/// into a graph and replayed (the result checked again). Collective; run with cudarc's event
/// tracking off (the capture).
fn low_latency(p: &Pgas, stream: &std::sync::Arc<CudaStream>) -> BenchResult<Vec<LlRow>> {
    let (me, n) = (p.my_pe(), p.n_pes());
    let h = CFG.hidden;
    let cfg = MoeConfig {
        max_tokens: 128,
        ..CFG
    };
    let mut ll = LowLatencyMoe::new(p, cfg)?;
    ll.prewarm()?;
    let m = cfg.max_tokens;
    let flat = |le: usize| (le + 1) as f32 * 0.25;
    let y: Vec<bf16> = (0..ll.expert_out_len())
        .map(|i| bf16::from_f32(flat(i / h / (n * m) % cfg.experts_per_pe)))
        .collect();
    let y = stream.clone_htod(&y)?;
    let mut out = stream.alloc_zeros::<bf16>(m * h)?;
    let mut results = Vec::new();
    for &tokens in LL_TOKENS {
        let (ids, wts) =
            reference::sample_routing(&cfg, n, tokens, (tokens * 16 + me) as u64, false);
        let x_host: Vec<bf16> = (0..tokens * h).map(|i| x_value(me, i / h, i % h)).collect();
        let x = stream.clone_htod(&x_host)?;
        let idx = stream.clone_htod(&ids)?;
        let w = stream.clone_htod(&wts)?;
        let (mut td, mut tc) = (Vec::new(), Vec::new());
        for i in 0..WARMUP + REPS {
            p.barrier_all()?;
            let d = time_on_stream(stream, || Ok(ll.dispatch(&x, &idx, &w, tokens)?))?;
            stream.synchronize()?;
            p.barrier_all()?;
            let c = time_on_stream(stream, || Ok(ll.combine(&y, &idx, tokens, &mut out)?))?;
            if i >= WARMUP {
                td.push(d * 1000.0);
                tc.push(c * 1000.0);
            }
        }
        let check = |what: &str, out: &CudaSlice<bf16>| -> BenchResult<()> {
            let got = stream.clone_dtoh(&out.slice(0..tokens * h))?;
            let k = cfg.top_k;
            for t in 0..tokens {
                let want: f32 = (0..k)
                    .filter(|&j| ids[t * k + j] >= 0)
                    .map(|j| wts[t * k + j] * flat(ids[t * k + j] as usize % cfg.experts_per_pe))
                    .sum();
                let g = got[t * h].to_f32();
                if (g - want).abs() > 0.02 * want.abs().max(1.0) {
                    return Err(format!(
                        "low-latency {tokens} tokens ({what}): token {t} combined to {g}, \
                         expected {want}"
                    )
                    .into());
                }
            }
            Ok(())
        };
        check("eager", &out)?;
        p.barrier_all()?;
        stream.begin_capture(cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let mut captured = Ok(());
        for _ in 0..LL_GRAPH_STEPS {
            captured = captured
                .and_then(|_| ll.dispatch(&x, &idx, &w, tokens))
                .and_then(|_| ll.combine(&y, &idx, tokens, &mut out));
        }
        let graph = stream.end_capture(cu::CUgraphInstantiate_flags(0))?;
        captured?;
        let graph = graph.ok_or("the decode steps captured no graph")?;
        graph.upload()?;
        let mut tg = Vec::new();
        for i in 0..WARMUP + REPS {
            p.barrier_all()?;
            stream.memset_zeros(&mut out)?;
            let g = time_on_stream(stream, || Ok(graph.launch()?))?;
            if i >= WARMUP {
                tg.push(g * 1000.0 / LL_GRAPH_STEPS as f64);
            }
        }
        drop(graph);
        check("graph", &out)?;
        let pairs = ids.iter().filter(|&&i| i >= 0).count() as f64;
        let words = [median(&td), median(&tc), median(&tg), pairs];
        let send = p.alloc_from(&words)?;
        let all = p.alloc::<f64>(4 * n)?;
        p.fcollect(Team::WORLD, &all, &send)?;
        let all = all.to_vec()?;
        let max = |i: usize| (0..n).map(|pe| all[pe * 4 + i]).fold(f64::NAN, f64::max);
        results.push(LlRow {
            tokens,
            pairs: (0..n).map(|pe| all[pe * 4 + 3]).sum::<f64>() / n as f64,
            dispatch: max(0),
            combine: max(1),
            step_graph: max(2),
        });
        p.barrier_all()?;
    }
    Ok(results)
}
