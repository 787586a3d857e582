//! All-gather + GEMM (the column-parallel linear layer: `C = allgather_rows(A) · Btᵀ`, bf16 in and
//! out, f32 accumulate; A sharded by rows over the PEs, every PE computes all of C) in one run,
//! per shape (M x N x K with N = K = 8192 and M from 1024 to 16384):
//!
//! - **cuBLAS + NCCL**, sequential: `ncclAllGather` of the shards, then one `cublasGemmEx`
//!   (also timed alone: the all-gather and the GEMM);
//! - **pgas one kernel**: `AllGatherMatmul` with `GemmPath::PgasOneKernel`: copy-engine pushes
//!   while one persistent `pgas::gemm` kernel (sm_90a only) starts on the local rows and takes
//!   each peer's rows as their words say they landed; timed with each shard pushed whole
//!   (`set_pieces(1)`, "whole shards"), in the plan's default pieces of K
//!   (`pgas::ops::all_gather_matmul::DEFAULT_PIECES`, "pieces"), and, in a second table, at
//!   every piece count of 1, 2, 4, 8 and 16 that divides K / 64;
//! - **pgas per shard**: `AllGatherMatmul` with `GemmPath::PgasPerShard`: the copy-engine pulls of
//!   pgas::ops, one `pgas::gemm` launch per shard;
//! - **pgas::ops**: `AllGatherMatmul` with `GemmPath::Cublas`, copy-engine pulls overlapped with
//!   one cuBLAS GEMM per shard.
//!
//! A new `AllGatherMatmul` of up to 512 rows a PE starts on the one kernel with whole shards
//! where it can run (sm_90a, more than one PE, whole tiles), on cuBLAS elsewhere (printed per
//! shape as "new() starts on"): its default is the "1k whole" or the "pgas::ops" column.
//!
//! Each result (every piece count's too) is compared with the baseline's C (and the baseline
//! with the host at 64 points);
//! a wrong result fails the run (exit status 1) and its figures do not count. Times are medians
//! of CUDA events on PE 0 (each repetition starts after a barrier), in microseconds. Writes
//! `ag_gemm.png` (time against M), `ag_gemm_speedup.png` (each pgas path's speed-up over cuBLAS +
//! NCCL against M) and `ag_gemm.md` (the table) into the directory given as the
//! first argument (default: the current one).
//!
//! Run: `pgas-run -n 2 -- ag_gemm OUTDIR` (needs cuBLAS and NCCL: see `pgas::ops::cublas` and
//! benches/common/nccl.rs).

mod common;

use common::nccl::{all_gather_bf16, nccl_comm};
use common::plot::{by_count, Series};
use common::{
    bf16_rel_diff, emit, median_ms, show, BenchResult, Figure, GEMM_MAX_REL_DIFF, GEMM_REPS,
    GEMM_WARMUP,
};
use pgas::gemm::reference::{gathered_a, gathered_check, gathered_inputs};
use pgas::ops::all_gather_matmul::{pieces_error, DEFAULT_PIECES};
use pgas::ops::cublas::{BLayout, Cublas};
use pgas::ops::{AllGatherMatmul, GemmPath};
use pgas::prelude::*;
use std::path::PathBuf;

const BENCH: &str = "ag_gemm";
/// M x N x K: the two production shapes of issue 10 first, then smaller M for the plot.
const SHAPES: [(usize, usize, usize); 5] = [
    (8192, 8192, 8192),
    (16384, 8192, 8192),
    (1024, 8192, 8192),
    (2048, 8192, 8192),
    (4096, 8192, 8192),
];

/// The methods, in table order.
const METHODS: [&str; 5] = [
    "cuBLAS+NCCL",
    "pgas one kernel (whole shards)",
    "pgas one kernel (pieces)",
    "pgas::ops (cuBLAS)",
    "pgas per shard",
];

/// The piece counts of the one kernel's second table (those that divide K / 64), beside the
/// plan's default.
const SWEEP: [usize; 5] = [1, 2, 4, 8, 16];

struct Row {
    shape: (usize, usize, usize),
    /// Median microseconds per method (NaN where not run).
    us: [f64; 5],
    allgather_us: f64,
    gemm_us: f64,
    /// Largest relative difference of each pgas method from the baseline.
    diff: [f64; 4],
    /// The plan's default pieces (the "pieces" method).
    pieces: usize,
    /// The one kernel at each piece count: (pieces, median us); every one checked.
    sweep: Vec<(usize, f64)>,
}

/// Median microseconds of `GEMM_REPS` runs of `run` on the pgas stream after `GEMM_WARMUP`;
/// every PE starts each one after a barrier, so PE 0's events time the operation, not another
/// PE's lateness.
fn timed(p: &Pgas, run: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    Ok(median_ms(
        p.stream(),
        (GEMM_WARMUP, GEMM_REPS),
        || Ok(p.barrier_all()?),
        run,
    )? * 1e3)
}

// One long function on purpose: a benchmark reads top to bottom as the run it makes; the shapes
// share the handles and buffers.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let out_dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    // The largest shape's gathered A is 256 MiB; the kernel's plan holds one, pgas::ops two.
    let p = pgas::builder().heap_size(3 << 30).init()?;
    let (me, np) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{np} PE", p.cuda().name()?);
    let stream = p.stream().clone();
    let hopper = p.compute_capability()?.0 == 9;
    let blas = Cublas::new(p.cuda())?;
    // Without NCCL (not found, or refusing to start, as with two PEs on one GPU) the baseline's
    // all-gather is skipped; its GEMM still runs, on A built on the host.
    let comm = match nccl_comm(&p) {
        Ok(Some(c)) => Some(c),
        Ok(None) => {
            println!("{BENCH}: NCCL not found (libnccl.so): the baseline's all-gather is skipped");
            None
        }
        Err(e) => {
            println!("{BENCH}: NCCL did not start ({e}): the baseline's all-gather is skipped");
            None
        }
    };

    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (m, n, k) in SHAPES {
        if m % (np * pgas::gemm::BM) != 0 {
            println!("{BENCH}: {m}x{n}x{k}: M does not split into 128-row shards on {np} PEs");
            continue;
        }
        let mp = m / np;
        let (shard, bt) = gathered_inputs(&p, (mp, n, k))?;
        let mut want = stream.alloc_zeros::<bf16>(m * n)?;
        let mut gathered = stream.alloc_zeros::<bf16>(m * k)?;

        // The baseline: NCCL all-gather, then cuBLAS; and each part alone.
        let cublas = |c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>| {
            blas.gemm_bf16(&stream, c, a, &bt, (m, n, k), BLayout::Transposed)
        };
        let (base_us, allgather_us) = match &comm {
            Some(c) => {
                let ag = timed(&p, || all_gather_bf16(&p, c, &mut gathered, &shard))?;
                let both = timed(&p, || {
                    all_gather_bf16(&p, c, &mut gathered, &shard)?;
                    Ok(cublas(&mut want, &gathered)?)
                })?;
                (both, ag)
            }
            None => (f64::NAN, f64::NAN),
        };
        if comm.is_none() {
            // Without NCCL the reference still needs all of A: built on the host.
            let all: Vec<bf16> = (0..m * k).map(gathered_a).collect();
            gathered = stream.clone_htod(&all)?;
        }
        let gemm_us = timed(&p, || Ok(cublas(&mut want, &gathered)?))?;
        let want = stream.clone_dtoh(&want)?;
        let points = (0..64).map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n));
        let (ratio, row, col, g, w) = gathered_check(&want, (n, k), points);
        if ratio.is_nan() || ratio > 1.0 {
            failures.push(format!(
                "{m}x{n}x{k}: the baseline's C[{row}][{col}] = {g}, the host says {w}"
            ));
        }
        drop(gathered);

        // The one kernel fed by copy-engine pushes, on one plan, at each piece count (the
        // plan's default among them): (pieces, us, largest relative difference).
        let pieces = DEFAULT_PIECES;
        let mut counts: Vec<usize> = SWEEP
            .into_iter()
            .chain([pieces])
            .filter(|&c| pieces_error(c, k).is_none())
            .collect();
        counts.sort_unstable();
        counts.dedup();
        let mut sweep = Vec::new();
        if hopper {
            let mut op = AllGatherMatmul::new(&p, (mp, n, k))?;
            op.set_gemm(GemmPath::PgasOneKernel)?;
            let mut c = stream.alloc_zeros::<bf16>(m * n)?;
            for &count in &counts {
                op.set_pieces(count)?;
                // Each count's C checked from zeros, not over the last count's.
                stream.memset_zeros(&mut c)?;
                let us = timed(&p, || Ok(op.run(&mut c, &shard, &bt)?))?;
                sweep.push((count, us, bf16_rel_diff(&stream.clone_dtoh(&c)?, &want)));
            }
        }
        let at = |count: usize| {
            sweep
                .iter()
                .find(|s| s.0 == count)
                .map_or((f64::NAN, f64::NAN), |s| (s.1, s.2))
        };
        let (kernel_us, kernel_diff) = at(1);
        let (pieces_us, pieces_diff) = at(pieces);

        // One pgas::gemm launch a shard.
        let (shard_us, shard_diff) = if hopper {
            let mut op = AllGatherMatmul::new(&p, (mp, n, k))?;
            op.set_gemm(GemmPath::PgasPerShard)?;
            let mut c = stream.alloc_zeros::<bf16>(m * n)?;
            let us = timed(&p, || Ok(op.run(&mut c, &shard, &bt)?))?;
            (us, bf16_rel_diff(&stream.clone_dtoh(&c)?, &want))
        } else {
            (f64::NAN, f64::NAN)
        };

        // The library form on cuBLAS.
        let mut op = AllGatherMatmul::new(&p, (mp, n, k))?;
        if me == 0 {
            println!("{BENCH}: {m}x{n}x{k}: new() starts on {:?}", op.gemm_path());
        }
        op.set_gemm(GemmPath::Cublas)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let ops_us = timed(&p, || Ok(op.run(&mut c, &shard, &bt)?))?;
        let ops_diff = bf16_rel_diff(&stream.clone_dtoh(&c)?, &want);
        drop(op);

        // The kernel's NaN below sm_90 means "not run"; any other NaN is a wrong result.
        let kernels = sweep
            .iter()
            .map(|&(count, _, d)| (format!("the pgas kernel in {count} pieces"), d, hopper));
        for (what, d, ran) in kernels.chain([
            ("pgas::ops".to_string(), ops_diff, true),
            ("the pgas GEMM per shard".to_string(), shard_diff, hopper),
        ]) {
            if ran && (d.is_nan() || d > GEMM_MAX_REL_DIFF) {
                failures.push(format!(
                    "{m}x{n}x{k}: {what} differs from cuBLAS by {d:.3e} (relative)"
                ));
            }
        }
        rows.push(Row {
            shape: (m, n, k),
            us: [base_us, kernel_us, pieces_us, ops_us, shard_us],
            allgather_us,
            gemm_us,
            diff: [kernel_diff, pieces_diff, ops_diff, shard_diff],
            pieces,
            sweep: sweep.iter().map(|&(count, us, _)| (count, us)).collect(),
        });
    }

    if me == 0 {
        report(&machine, np, &rows, &out_dir)?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("{BENCH}: PE {me}: FAIL {f}");
        }
        std::process::exit(1)
    }
}

/// The table, the FIGURE lines, the markdown table and the plot (PE 0).
// Long on purpose: the table, the FIGURE lines and the plot are written from the same rows in one
// pass.
fn report(machine: &str, np: usize, rows: &[Row], out_dir: &std::path::Path) -> BenchResult<()> {
    println!(
        "\n{BENCH} on {machine}: C = allgather(A) Bt^T, bf16, f32 accumulate; us per call, \
         median of {GEMM_REPS} on PE 0"
    );
    let header = format!(
        "| {:<18} | {:>11} | {:>9} | {:>9} | {:>10} | {:>10} | {:>6} | {:>10} | {:>10} | {:>8} | {:>8} | {:>11} | {:>8} | {:>9} |",
        "M x N x K",
        "cuBLAS+NCCL",
        "all-gather",
        "GEMM",
        "1k whole",
        "1k pieces",
        "pieces",
        "per shard",
        "pgas::ops",
        "whole x",
        "pieces x",
        "per-shard x",
        "ops x",
        "max diff"
    );
    let mut md = vec![
        format!(
            "{BENCH} on {machine}: C = allgather_rows(A) · Btᵀ, bf16 in and out, f32 accumulate; \
             microseconds per call (median of {GEMM_REPS} on PE 0); x = cuBLAS+NCCL time / \
             pgas time. 1k = one pgas::gemm kernel fed by pushes, each shard pushed whole or in \
             the plan's default pieces of K (the pieces column); per shard runs pgas::gemm a \
             shard; pgas::ops runs cuBLAS a shard.\n"
        ),
        header.clone(),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
            .into(),
    ];
    println!("{header}");
    for r in rows {
        let (m, n, k) = r.shape;
        let [base, kernel, pieces, ops, shard] = r.us;
        let diff = r.diff.iter().copied().fold(0.0, f64::max);
        let line = format!(
            "| {:<18} | {:>11} | {:>9} | {:>9} | {:>10} | {:>10} | {:>6} | {:>10} | {:>10} | {:>8} | {:>8} | {:>11} | {:>8} | {:>9} |",
            format!("{m}x{n}x{k}"),
            show(base),
            show(r.allgather_us),
            show(r.gemm_us),
            show(kernel),
            show(pieces),
            r.pieces,
            show(shard),
            show(ops),
            show(base / kernel),
            show(base / pieces),
            show(base / shard),
            show(base / ops),
            if diff.is_finite() {
                format!("{diff:.2e}")
            } else {
                "-".into()
            }
        );
        println!("{line}");
        md.push(line);
        let key = format!("ag_gemm_{m}x{n}x{k}");
        let note = format!("median of {GEMM_REPS} on PE 0 of {np}, us per call");
        let sweep = r.sweep.iter().flat_map(|&(count, us)| {
            [
                (format!("pgas_kernel_p{count}_us"), us, "us"),
                (format!("pgas_kernel_p{count}_speedup"), base / us, "x"),
            ]
        });
        for (name, value, unit) in [
            ("cublas_nccl_us", base, "us"),
            ("nccl_allgather_us", r.allgather_us, "us"),
            ("cublas_gemm_us", r.gemm_us, "us"),
            ("pgas_kernel_us", kernel, "us"),
            ("pgas_ops_us", ops, "us"),
            ("pgas_kernel_speedup", base / kernel, "x"),
            ("pgas_ops_speedup", base / ops, "x"),
            ("pgas_kernel_max_rel_diff", r.diff[0], "rel"),
            ("pgas_ops_max_rel_diff", r.diff[2], "rel"),
            ("pgas_per_shard_us", shard, "us"),
            ("pgas_per_shard_speedup", base / shard, "x"),
            ("pgas_per_shard_max_rel_diff", r.diff[3], "rel"),
            ("pgas_kernel_pieces_us", pieces, "us"),
            ("pgas_kernel_pieces_speedup", base / pieces, "x"),
            ("pgas_kernel_pieces_max_rel_diff", r.diff[1], "rel"),
            ("pgas_kernel_pieces", r.pieces as f64, "pieces"),
        ]
        .map(|(name, value, unit)| (name.to_string(), value, unit))
        .into_iter()
        .chain(sweep)
        {
            let f = Figure {
                name: format!("{key}/{name}"),
                value,
                unit,
                note: note.clone(),
            };
            emit(BENCH, machine, &f);
        }
    }
    // The one kernel at every piece count measured: microseconds and speed-up over cuBLAS + NCCL.
    let mut counts: Vec<usize> = rows
        .iter()
        .flat_map(|r| r.sweep.iter().map(|s| s.0))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    if !counts.is_empty() {
        let cells: Vec<String> = counts.iter().map(|c| format!("{c} pieces")).collect();
        let title = format!(
            "\nThe one kernel by pieces of K a shard is pushed in: us (x over cuBLAS+NCCL)\n\n| M x N x K | {} |",
            cells.join(" | ")
        );
        println!("{title}");
        md.push(title);
        md.push(format!("| --- |{}", " ---: |".repeat(counts.len())));
        for r in rows {
            let (m, n, k) = r.shape;
            let cells: Vec<String> = counts
                .iter()
                .map(|c| match r.sweep.iter().find(|s| s.0 == *c) {
                    Some(&(_, us)) => format!("{} ({})", show(us), show(r.us[0] / us)),
                    None => "-".into(),
                })
                .collect();
            let line = format!("| {m}x{n}x{k} | {} |", cells.join(" | "));
            println!("{line}");
            md.push(line);
        }
    }
    std::fs::create_dir_all(out_dir)?;
    std::fs::write(out_dir.join("ag_gemm.md"), md.join("\n") + "\n")?;
    let series: Vec<Series> = METHODS
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: (*name).into(),
            points: {
                // By M: the table keeps the run's order (production shapes first).
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .map(|r| (r.shape.0 as f64, r.us[i] / 1e3))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                pts
            },
        })
        .collect();
    let png = out_dir.join("ag_gemm.png");
    by_count(
        &png,
        &format!("all-gather + GEMM, N = K = 8192, bf16, {machine}"),
        ("M (rows of C)", "ms per call (lower is better)"),
        &series,
    )?;
    // The speed-ups over cuBLAS + NCCL, one line a pgas path.
    let speedups: Vec<Series> = METHODS
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, name)| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .map(|r| (r.shape.0 as f64, r.us[0] / r.us[i]))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: (*name).into(),
                points,
            }
        })
        .collect();
    let png_x = out_dir.join("ag_gemm_speedup.png");
    by_count(
        &png_x,
        &format!("all-gather + GEMM over cuBLAS + NCCL, N = K = 8192, {machine}"),
        ("M (rows of C)", "speed-up (higher is better)"),
        &speedups,
    )?;
    println!(
        "{BENCH}: wrote {}, {} and ag_gemm.md",
        png.display(),
        png_x.display()
    );
    Ok(())
}
