//! GEMM + reduce-scatter (a row-parallel linear layer: every PE holds A_p, M x K/P, and Bt_p,
//! N x K/P; PE p gets rows [p M/P, (p + 1) M/P) of sum_q A_q Bt_qᵀ), in one run, per shape:
//!
//! - **baseline**: cuBLAS (`cublasGemmEx`, bf16, f32 compute) of the whole M x N partial, then
//!   NCCL's bf16 reduce-scatter, one after the other on one stream (also each alone);
//! - **pgas**: `pgas::ops::matmul_reduce_scatter::MatmulReduceScatter` with
//!   `GemmPath::PgasPerShard`: the chunks' GEMMs by `pgas::gemm` (the language's Hopper GEMM,
//!   sm_90a only), the rest as the library form;
//! - **pgas one kernel**: the same with `GemmPath::PgasOneKernel`: one persistent `pgas::gemm`
//!   kernel for the whole partial product, chunks in owner order, each chunk's copy started by
//!   the word the kernel raises when it has stored the chunk's tiles;
//! - **library (cuBLAS)**: the same with `GemmPath::Cublas` (chunks in owner order, copy-engine
//!   pushes, one stream per owner, and the owner's f32 reduction overlapped on another stream);
//! - **default**: the path `MatmulReduceScatter::new` starts on for the shape (the one measured
//!   fastest there, `GemmPath`), and its speed-up, taken from the column of that path.
//!
//! N = K = 8192 and M from 1024 to 16384 (K split over the PEs); at M = 1024 and 8192^3 also the
//! other chunk counts per owner of both, and at M = 1024 the pgas GEMMs alone (the chunks' and
//! the whole product's, no communication). Median of `GEMM_REPS` after
//! `GEMM_WARMUP` (CUDA events on the pgas stream, every PE released together by a barrier before
//! each repetition). Every result is checked before its figures count: at 64 points against the
//! host (f64), and element by element against the baseline where NCCL is there. Prints a table and
//! `FIGURE` lines; with an output folder argument, writes `gemm_rs.md`, `gemm_rs.png` and
//! `gemm_rs_speedup.png` (the speed-ups against M) there.
//!
//! Run: `pgas-run -n 2 -- gemm_rs OUTDIR` (NCCL: `libnccl.so` on `LD_LIBRARY_PATH`, see
//! benches/common/nccl.rs; cuBLAS: see `pgas::ops::cublas`). Exit status 1 when a result is wrong.

mod common;

use common::nccl::{nccl_comm, Nccl};
use common::plot::{by_count, log_log_by_bytes, Series};
use common::{
    bf16_rel_diff, emit, median_ms, show, BenchResult, Figure, GEMM_MAX_REL_DIFF, GEMM_REPS,
    GEMM_WARMUP,
};
use pgas::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use pgas::cudarc::nccl::{result as nccl, sys as nccl_sys};
use pgas::gemm::{gemm_bf16_with, GemmConfig};
use pgas::ops::cublas::{BLayout, Cublas};
use pgas::ops::matmul_reduce_scatter::MatmulReduceScatter;
use pgas::ops::GemmPath;
use pgas::prelude::*;
use std::fmt::Write as _;

const BENCH: &str = "gemm_rs";
/// (M, N, K): K is the whole inner dimension, split over the PEs.
const SHAPES: [(usize, usize, usize); 5] = [
    (1024, 8192, 8192),
    (2048, 8192, 8192),
    (4096, 8192, 8192),
    (8192, 8192, 8192),
    (16384, 8192, 8192),
];

/// Median milliseconds of `GEMM_REPS` runs of `run` on `stream` after `GEMM_WARMUP`, each after a
/// barrier.
fn timed(p: &Pgas, stream: &CudaStream, run: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    median_ms(
        stream,
        (GEMM_WARMUP, GEMM_REPS),
        || Ok(p.barrier_all()?),
        run,
    )
}

/// Element `i` of PE `pe`'s A (`which` 1) or Bt (`which` 2).
fn input(pe: usize, which: u64, i: usize) -> bf16 {
    pgas::gemm::reference::value(i, 2 * pe as u64 + which)
}

/// The largest |got - want| at 64 points of this PE's rows against the host (f64), over the
/// largest |want| there.
fn host_check(got: &[bf16], (me, pes): (usize, usize), (m, n, k): (usize, usize, usize)) -> f64 {
    let mp = m / pes;
    let (mut worst, mut scale) = (0.0f64, 0.0f64);
    for i in 0..64 {
        let (r, col) = ((i * 977 + 13) % mp, (i * 613 + 101) % n);
        let row = me * mp + r;
        let want: f64 = (0..pes)
            .map(|q| {
                (0..k)
                    .map(|x| input(q, 1, row * k + x).to_f64() * input(q, 2, col * k + x).to_f64())
                    .sum::<f64>()
            })
            .sum();
        let d = (got[r * n + col].to_f64() - want).abs();
        worst = if d.is_nan() { f64::NAN } else { worst.max(d) };
        scale = scale.max(want.abs());
    }
    worst / scale.max(1.0)
}

/// cuBLAS of the whole partial product, then NCCL's reduce-scatter of it into `out`.
#[allow(clippy::too_many_arguments)]
fn baseline(
    blas: &Cublas, comm: &Nccl, stream: &CudaStream,
    (partial, out): (&mut CudaSlice<bf16>, &mut CudaSlice<bf16>),
    (a, bt): (&CudaSlice<bf16>, &CudaSlice<bf16>), (m, n, k): (usize, usize, usize),
    (gemm, rs): (bool, bool),
) -> BenchResult<()> {
    if gemm {
        blas.gemm_bf16(stream, partial, a, bt, (m, n, k), BLayout::Transposed)?;
    }
    if rs {
        let len = out.len();
        let (s, _rs) = partial.device_ptr(stream);
        let (d, _wd) = out.device_ptr_mut(stream);
        // SAFETY: `partial` holds M x N and `out` M/P x N elements of device memory.
        unsafe {
            nccl::reduce_scatter(
                s as *const _,
                d as *mut _,
                len,
                nccl_sys::ncclDataType_t::ncclBfloat16,
                nccl_sys::ncclRedOp_t::ncclSum,
                comm.0,
                stream.cu_stream() as _,
            )
        }
        .map_err(|e| format!("ncclReduceScatter: {e:?}"))?;
    }
    Ok(())
}

/// One shape's medians (microseconds; NaN where not run) and checks.
struct Row {
    shape: (usize, usize, usize),
    gemm: f64,
    rs: f64,
    baseline: f64,
    pgas: f64,
    one: f64,
    library: f64,
    /// The path `new` started on.
    default: GemmPath,
}

impl Row {
    /// The time of the path `new` starts on.
    fn default_us(&self) -> f64 {
        match self.default {
            GemmPath::Cublas => self.library,
            GemmPath::PgasPerShard => self.pgas,
            GemmPath::PgasOneKernel => self.one,
        }
    }
}

// One long function on purpose: a benchmark reads top to bottom as the run it makes; the shapes
// share the handles and buffers.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let out_dir = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let p = pgas::builder().heap_size(3 << 29).init()?;
    let (me, pes) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{pes} PE", p.cuda().name()?);
    let stream = p.stream().clone();
    let hopper = p.compute_capability()?.0 == 9;
    let blas = Cublas::new(p.cuda())?;
    // NCCL refuses two ranks on one GPU (as under MPS); then pgas runs alone, still checked.
    let comm = nccl_comm(&p).unwrap_or_else(|e| {
        println!("{BENCH}: PE {me}: NCCL did not start ({e}): baseline skipped");
        None
    });
    if me == 0 && comm.is_none() {
        println!("{BENCH}: no NCCL communicator (no libnccl.so on the loader's path, or it failed): baseline skipped");
    }
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (m, n, kk) in SHAPES {
        let k = kk / pes;
        let mp = m / pes;
        let a = stream.clone_htod(&(0..m * k).map(|i| input(me, 1, i)).collect::<Vec<_>>())?;
        let bt = stream.clone_htod(&(0..n * k).map(|i| input(me, 2, i)).collect::<Vec<_>>())?;
        let mut out = stream.alloc_zeros::<bf16>(mp * n)?;
        let mut check = |what: &str, out: &CudaSlice<bf16>, want: Option<&[bf16]>| {
            let got = stream.clone_dtoh(out)?;
            let spot = host_check(&got, (me, pes), (m, n, k));
            let diff = want.map_or(0.0, |w| bf16_rel_diff(&got, w));
            for (against, d) in [("the host", spot), ("cuBLAS + NCCL", diff)] {
                if d.is_nan() || d > GEMM_MAX_REL_DIFF {
                    failures.push(format!(
                        "PE {me}: {m}x{n}x{kk}: {what} differs from {against} by {d:.3e} (relative)"
                    ));
                }
            }
            BenchResult::Ok(got)
        };

        let (mut gemm, mut rs, mut base) = (f64::NAN, f64::NAN, f64::NAN);
        let mut want = None;
        if let Some(c) = &comm {
            let mut partial = stream.alloc_zeros::<bf16>(m * n)?;
            let go =
                |g: bool, r: bool, partial: &mut CudaSlice<bf16>, out: &mut CudaSlice<bf16>| {
                    baseline(
                        &blas,
                        c,
                        &stream,
                        (partial, out),
                        (&a, &bt),
                        (m, n, k),
                        (g, r),
                    )
                };
            gemm = timed(&p, &stream, || go(true, false, &mut partial, &mut out))? * 1e3;
            rs = timed(&p, &stream, || go(false, true, &mut partial, &mut out))? * 1e3;
            base = timed(&p, &stream, || go(true, true, &mut partial, &mut out))? * 1e3;
            want = Some(check("cuBLAS + NCCL", &out, None)?);
        }

        let mut pgas_path = |path: GemmPath, what: &str| -> BenchResult<f64> {
            if !hopper {
                return Ok(f64::NAN);
            }
            let mut op = MatmulReduceScatter::new(&p, (m, n, k))?;
            op.set_gemm(&p, path)?;
            let mut fresh = stream.alloc_zeros::<bf16>(mp * n)?;
            let us = timed(&p, &stream, || {
                op.run(&p, p.stream(), &mut fresh, &a, &bt)?;
                Ok(())
            })? * 1e3;
            check(what, &fresh, want.as_deref())?;
            Ok(us)
        };
        let pgas = pgas_path(GemmPath::PgasPerShard, "the pgas GEMM per chunk")?;
        let one = pgas_path(GemmPath::PgasOneKernel, "the one pgas kernel")?;

        let mut op = MatmulReduceScatter::new(&p, (m, n, k))?;
        let default = op.gemm_path();
        op.set_gemm(&p, GemmPath::Cublas)?;
        let mut fresh = stream.alloc_zeros::<bf16>(mp * n)?;
        let library = timed(&p, &stream, || {
            op.run(&p, p.stream(), &mut fresh, &a, &bt)?;
            Ok(())
        })? * 1e3;
        check("the library form", &fresh, want.as_deref())?;
        let splits = op.splits();
        drop(op);
        // The tuning knob at the smallest M (where the chunks' pipeline is shortest) and at
        // 8192^3, for the record (each result checked too): chunks per owner other than the
        // default, for both GEMMs.
        if m == 1024 || (m, n, kk) == (8192, 8192, 8192) {
            let mut knobs: Vec<(String, f64)> = Vec::new();
            for s in [1, 2, 4]
                .into_iter()
                .filter(|s| *s != splits && mp % s == 0)
            {
                let paths = [
                    ("library", GemmPath::Cublas),
                    ("pgas", GemmPath::PgasPerShard),
                    ("one_kernel", GemmPath::PgasOneKernel),
                ];
                // The pgas GEMM takes chunks of whole 128-row tiles only.
                let runs = |n: &str| n == "library" || (hopper && (mp / s).is_multiple_of(128));
                for (name, path) in paths.into_iter().filter(|(n, _)| runs(n)) {
                    let mut op = MatmulReduceScatter::with_splits(&p, (m, n, k), Some(s))?;
                    op.set_gemm(&p, path)?;
                    let us = timed(&p, &stream, || {
                        op.run(&p, p.stream(), &mut fresh, &a, &bt)?;
                        Ok(())
                    })? * 1e3;
                    check(&format!("{name}, {s} chunks"), &fresh, want.as_deref())?;
                    knobs.push((format!("{name}_{s}_chunks_us"), us));
                }
            }
            // The GEMMs alone, without communication, for the record: the pgas path's chunk
            // GEMMs back to back and the whole partial product in one launch (what the one
            // kernel computes), each with the specialization its plan gives it: how much of a
            // fused call is GEMM.
            let mut alone: Vec<(String, f64)> = Vec::new();
            if m == 1024 && hopper {
                let sms = p.sm_count()?;
                let rows = mp / splits;
                let a_rows = stream.alloc_zeros::<bf16>(rows * k)?;
                let mut c_rows = stream.alloc_zeros::<bf16>(rows * n)?;
                let mut c_all = stream.alloc_zeros::<bf16>(m * n)?;
                let per_chunk = GemmConfig::whole_k(rows, n, sms);
                let whole = GemmConfig::whole_k(m, n, sms);
                let chunk_shape = (rows, n, k);
                let chunks = timed(&p, &stream, || {
                    for _ in 0..pes * splits {
                        gemm_bf16_with(
                            &p,
                            &mut c_rows,
                            &a_rows,
                            &bt,
                            chunk_shape,
                            per_chunk,
                            false,
                        )?;
                    }
                    Ok(())
                })? * 1e3;
                let all = timed(&p, &stream, || {
                    gemm_bf16_with(&p, &mut c_all, &a, &bt, (m, n, k), whole, false)?;
                    Ok(())
                })? * 1e3;
                alone.push(("pgas_chunk_gemms_alone_us".into(), chunks));
                alone.push(("pgas_whole_gemm_alone_us".into(), all));
            }
            let knob_tail = format!(" (default: {splits} chunks)");
            let lines = [
                (&alone, "", "no communication"),
                (
                    &knobs,
                    knob_tail.as_str(),
                    "a tuning knob other than the default",
                ),
            ];
            for (list, tail, what) in lines.iter().filter(|_| me == 0) {
                for (name, us) in list.iter() {
                    println!("{BENCH}: {m}x{n}x{kk}, {name}: {} us{tail}", show(*us));
                    let f = Figure {
                        name: format!("gemm_rs_{m}x{n}x{kk}_{pes}pe/{name}"),
                        value: *us,
                        unit: "us",
                        note: format!("median of {GEMM_REPS}; {what}"),
                    };
                    emit(BENCH, &machine, &f);
                }
            }
        }
        rows.push(Row {
            shape: (m, n, kk),
            gemm,
            rs,
            baseline: base,
            pgas,
            one,
            library,
            default,
        });
    }

    if me == 0 {
        report(&machine, pes, &rows, out_dir.as_deref())?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("{BENCH}: FAIL {f}");
        }
        std::process::exit(1)
    }
}

/// The table (stdout and `gemm_rs.md`), the `FIGURE` lines and the plot.
fn report(machine: &str, pes: usize, rows: &[Row], out_dir: Option<&str>) -> BenchResult<()> {
    let mut table = String::new();
    writeln!(
        table,
        "GEMM + reduce-scatter on {machine}: bf16, f32 accumulate, K split over {pes} PE(s); \
         median of {GEMM_REPS} microseconds\n"
    )?;
    writeln!(
        table,
        "| M x N x K | cuBLAS GEMM | NCCL RS | cuBLAS + NCCL | pgas GEMM per chunk | one pgas kernel | library (cuBLAS) | pgas speedup | one kernel speedup | library speedup | default path | default speedup |"
    )?;
    writeln!(
        table,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )?;
    for r in rows {
        let (m, n, k) = r.shape;
        writeln!(
            table,
            "| {m}x{n}x{k} | {} | {} | {} | {} | {} | {} | {}x | {}x | {}x | {:?} | {}x |",
            show(r.gemm),
            show(r.rs),
            show(r.baseline),
            show(r.pgas),
            show(r.one),
            show(r.library),
            show(r.baseline / r.pgas),
            show(r.baseline / r.one),
            show(r.baseline / r.library),
            r.default,
            show(r.baseline / r.default_us())
        )?;
        let key = format!("gemm_rs_{m}x{n}x{k}_{pes}pe");
        let note = format!("median of {GEMM_REPS}, every PE released by a barrier before each");
        for (name, value, unit) in [
            ("cublas_gemm_us", r.gemm, "us"),
            ("nccl_reduce_scatter_us", r.rs, "us"),
            ("cublas_nccl_us", r.baseline, "us"),
            ("pgas_per_chunk_us", r.pgas, "us"),
            ("pgas_one_kernel_us", r.one, "us"),
            ("pgas_one_kernel_speedup", r.baseline / r.one, "x"),
            ("library_us", r.library, "us"),
            ("pgas_speedup", r.baseline / r.pgas, "x"),
            ("library_speedup", r.baseline / r.library, "x"),
            ("default_speedup", r.baseline / r.default_us(), "x"),
        ] {
            let f = Figure {
                name: format!("{key}/{name}"),
                value,
                unit,
                note: note.clone(),
            };
            emit(BENCH, machine, &f);
        }
    }
    println!("\n{table}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(dir)?;
        let dir = std::path::Path::new(dir);
        std::fs::write(dir.join("gemm_rs.md"), &table)?;
        // x: the bytes of the M x N result that is reduce-scattered.
        let series = |name: &str, pick: fn(&Row) -> f64| Series {
            name: name.to_string(),
            points: rows
                .iter()
                .map(|r| ((r.shape.0 * r.shape.1 * 2) as f64, pick(r)))
                .collect(),
        };
        let all = [
            series("cuBLAS + NCCL", |r| r.baseline),
            series("pgas::ops, pgas::gemm per chunk", |r| r.pgas),
            series("pgas::ops, one pgas::gemm kernel", |r| r.one),
            series("pgas::ops library (cuBLAS + copy engine)", |r| r.library),
            series("cuBLAS GEMM alone", |r| r.gemm),
        ];
        let all: Vec<Series> = all
            .into_iter()
            .filter(|s| s.points.iter().any(|(_, y)| y.is_finite()))
            .collect();
        if !all.is_empty() {
            log_log_by_bytes(
                &dir.join("gemm_rs.png"),
                &format!("GEMM + reduce-scatter, N = K = 8192 ({machine})"),
                "bytes of the M x N bf16 result",
                "microseconds",
                &all,
            )?;
        }
        // The speed-ups over cuBLAS + NCCL against M.
        let speedup = |name: &str, pick: fn(&Row) -> f64| Series {
            name: name.to_string(),
            points: rows
                .iter()
                .map(|r| (r.shape.0 as f64, r.baseline / pick(r)))
                .collect(),
        };
        let speedups: Vec<Series> = [
            speedup("pgas::gemm per chunk", |r| r.pgas),
            speedup("one pgas::gemm kernel", |r| r.one),
            speedup("library (cuBLAS chunks)", |r| r.library),
        ]
        .into_iter()
        .filter(|s| s.points.iter().any(|(_, y)| y.is_finite()))
        .collect();
        if !speedups.is_empty() {
            by_count(
                &dir.join("gemm_rs_speedup.png"),
                &format!("GEMM + reduce-scatter over cuBLAS + NCCL, N = K = 8192 ({machine})"),
                ("M (rows of C)", "speed-up (higher is better)"),
                &speedups,
            )?;
        }
    }
    Ok(())
}
