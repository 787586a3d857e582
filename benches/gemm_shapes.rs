//! `pgas::gemm` where the layer is not one big GEMM, against cuBLAS in the same run, one GPU
//! (sm_90a): decode-sized M of 64 rows (a partial tile: the copy engine reads zeros past M),
//! and the grouped GEMM of a mixture of experts (`pgas::gemm::gemm_grouped`: every expert's
//! rows in one launch) against a loop of cuBLAS calls, one an expert at its own row count, and
//! against one cuBLAS GEMM over all the rows as if they were one expert (the dense ceiling);
//! then the same mixtures in FP8 (e4m3) against a loop of cuBLASLt calls.
//! Each result is checked against the host at 64 points; TFLOP/s count the useful rows only
//! (not the grouped layout's padding). Medians of `GEMM_REPS` after `GEMM_WARMUP`.
//!
//! Run: `gemm_shapes` (1 PE). Exit status 1 when a result is wrong; without cuBLAS, pgas runs
//! alone and the ratios are NaN.

mod common;

use common::{
    emit, median_ms, spot_diff, spot_points, BenchResult, Figure, GEMM_MAX_REL_DIFF, GEMM_REPS,
    GEMM_WARMUP,
};
use pgas::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use pgas::gemm::reference::value;
use pgas::gemm::{gemm_bf16, gemm_bf16_with, gemm_grouped, GemmConfig, GroupedRows};
use pgas::ops::cublas::{self, Cublas, CublasLt};
use pgas::prelude::*;

const BENCH: &str = "gemm_shapes";

/// Decode-sized GEMMs: 64 rows against an MLP's projections, and 128.
const SKINNY: [(usize, usize, usize); 4] = [
    (64, 8192, 8192),
    (64, 28672, 8192),
    (64, 8192, 28672),
    (128, 8192, 8192),
];

/// Mixtures of experts: (name, rows of each expert, N, K). Prefill-sized experts (8 of 457 to
/// 1,811 rows) on a DeepSeek-V3-sized up projection (N 4096, K 7168) and down projection (N
/// 7168, K 2048), and decode-sized ones (32 experts of 9 to 250 rows).
fn mixtures() -> Vec<(&'static str, &'static str, Vec<usize>, usize, usize)> {
    let prefill = vec![1024, 457, 1811, 768, 1290, 600, 1500, 998];
    let decode: Vec<usize> = (0..32).map(|e| 9 + (e * 97) % 242).collect();
    vec![
        ("grouped_8_up", "8 experts, up", prefill.clone(), 4096, 7168),
        ("grouped_8_down", "8 experts, down", prefill, 7168, 2048),
        (
            "grouped_32_decode",
            "32 experts, decode",
            decode,
            4096,
            7168,
        ),
    ]
}

fn timed(stream: &CudaStream, run: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    median_ms(stream, (GEMM_WARMUP, GEMM_REPS), || Ok(()), run)
}

/// The dot product of `k` values of `a` and `b` from their starts, in f64 (`f` reads a value).
fn dot<T: Copy>(a: &[T], b: &[T], k: usize, f: impl Fn(T) -> f64) -> f64 {
    a[..k].iter().zip(&b[..k]).map(|(&x, &y)| f(x) * f(y)).sum()
}

/// Prints and emits one comparison: pgas's time and TFLOP/s against each baseline's. `key`
/// names the figures, `label` the printed line.
fn report(
    machine: &str,
    (key, label): (&str, &str),
    flop: f64,
    pgas_ms: f64,
    baselines: &[(&str, f64)],
) {
    let rate = |ms: f64| flop / (ms * 1e9);
    let note = format!("median of {GEMM_REPS}; bf16 out, f32 accumulate; {label}");
    let mut line = format!(
        "{BENCH}: {label}: pgas {pgas_ms:.4} ms {:.1} TFLOP/s",
        rate(pgas_ms)
    );
    emit(
        BENCH,
        machine,
        &Figure::new(
            &format!("{key}/pgas_tflops"),
            rate(pgas_ms),
            "TFLOP/s",
            &note,
        ),
    );
    for (what, ms) in baselines {
        line += &format!(
            ", {what} {ms:.4} ms {:.1} TFLOP/s (pgas/{what} {:.3})",
            rate(*ms),
            ms / pgas_ms
        );
        emit(
            BENCH,
            machine,
            &Figure::new(&format!("{key}/ratio_{what}"), ms / pgas_ms, "x", &note),
        );
    }
    println!("{line}");
}

fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let p = pgas::init()?;
    if p.compute_capability()?.0 != 9 {
        println!("{BENCH}: skipped: pgas::gemm needs sm_90a");
        return Ok(());
    }
    let machine = format!("{} x1 PE", p.cuda().name()?);
    let stream = p.stream().clone();
    let blas = match cublas::load() {
        Ok(_) => Some(Cublas::new(p.cuda())?),
        Err(why) => {
            println!("{BENCH}: cuBLAS skipped: {why}; pgas runs alone");
            None
        }
    };
    let mut failures = Vec::new();
    let mut check = |what: String, d: f64| {
        if d.is_nan() || d > GEMM_MAX_REL_DIFF {
            failures.push(format!("{what} differs from the host by {d:.3e}"));
        }
    };

    for (m, n, k) in SKINNY {
        let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 1)).collect();
        let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 2)).collect();
        let (a, bt) = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let ms = timed(&stream, || {
            Ok(gemm_bf16(&p, &mut c, &a, &bt, (m, n, k), false)?)
        })?;
        let got = stream.clone_dtoh(&c)?;
        let at = spot_points(n, |i| (i * 977 + 13) % m);
        let want =
            |r: usize, col: usize| dot(&a_host[r * k..], &b_host[col * k..], k, bf16::to_f64);
        check(format!("{m}x{n}x{k}"), spot_diff(&got, n, &at, want));
        let mut base = Vec::new();
        if let Some(blas) = &blas {
            let mut cb = stream.alloc_zeros::<bf16>(m * n)?;
            let cms = timed(&stream, || {
                Ok(blas.gemm_bf16_nt(&stream, &mut cb, &a, &bt, (m, n, k))?)
            })?;
            base.push(("cublas", cms));
        }
        let key = format!("{m}x{n}x{k}");
        report(&machine, (&key, &key), 2.0 * (m * n * k) as f64, ms, &base);
        // The other tile widths and K splits, each checked, for the record (the choice
        // `GemmConfig::for_shape` makes is measured from these).
        let picked = GemmConfig::for_shape(m, n, k, p.sm_count()?);
        for (bn, splits) in [
            (64, 1),
            (128, 1),
            (128, 2),
            (128, 4),
            (256, 2),
            (256, 4),
            (256, 8),
        ] {
            let cfg = GemmConfig {
                stages: if bn == 256 {
                    4
                } else if bn == 128 {
                    6
                } else {
                    8
                },
                bn,
                cluster: 1,
                clusters: None,
                splits,
            };
            if cfg == picked {
                continue;
            }
            let t = timed(&stream, || {
                Ok(gemm_bf16_with(&p, &mut c, &a, &bt, (m, n, k), cfg, false)?)
            })?;
            let got = stream.clone_dtoh(&c)?;
            let d = spot_diff(&got, n, &at, want);
            check(format!("{m}x{n}x{k} {bn}-wide, {splits} splits"), d);
            println!(
                "{BENCH}: {m}x{n}x{k} {bn}-wide tiles, K in {splits}: {t:.4} ms ({:.3}x {picked:?}), diff {d:.2e}",
                ms / t
            );
        }
    }

    for (key, name, counts, n, k) in mixtures() {
        let layout = GroupedRows::new(&counts);
        let (m, groups) = (layout.m, counts.len());
        let useful: usize = counts.iter().sum();
        // Padding rows hold values too (what a caller's buffer holds there is not read back).
        let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 3)).collect();
        let b_host: Vec<bf16> = (0..groups * n * k).map(|i| value(i, 4)).collect();
        let (a, bt) = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
        let table = stream.clone_htod(&layout.group_of)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let ms = timed(&stream, || {
            Ok(gemm_grouped(
                &p,
                &mut c,
                &a,
                &bt,
                &table,
                (m, n, k),
                groups,
                false,
            )?)
        })?;
        let got = stream.clone_dtoh(&c)?;
        let group = |r: usize| layout.group_of[r / 128] as usize;
        let want = |r: usize, col: usize| {
            dot(
                &a_host[r * k..],
                &b_host[(group(r) * n + col) * k..],
                k,
                bf16::to_f64,
            )
        };
        check(
            format!("grouped {name}"),
            spot_diff(&got, n, &spot_points(n, |i| (i * 977 + 13) % m), want),
        );
        let mut base = Vec::new();
        if let Some(blas) = &blas {
            // One cuBLAS call an expert, over its own rows (no padding), into its rows of C.
            let mut cb = stream.alloc_zeros::<bf16>(m * n)?;
            let lms = {
                let (pa, _ga) = a.device_ptr(&stream);
                let (pb, _gb) = bt.device_ptr(&stream);
                let (pc, _gc) = cb.device_ptr_mut(&stream);
                let esz = std::mem::size_of::<bf16>();
                let at = |rows: usize, cols: usize| (rows * cols * esz) as u64;
                timed(&stream, || {
                    for (g, &rows) in counts.iter().enumerate().filter(|(_, &r)| r > 0) {
                        let start = layout.starts[g];
                        // SAFETY: expert g's rows start..start + rows of A (m x k) and C
                        // (m x n) and its n x k block of Bt are inside their buffers, which
                        // outlive the timing (their guards are held); only this stream
                        // touches them.
                        unsafe {
                            blas.gemm_bf16_nt_raw(
                                &stream,
                                pc + at(start, n),
                                pa + at(start, k),
                                pb + at(g * n, k),
                                (rows, n, k),
                            )?
                        };
                    }
                    Ok(())
                })?
            };
            // Checked at experts' rows only: the loop leaves the padding rows at zero.
            let real: Vec<usize> = (0..groups).filter(|&g| counts[g] > 0).collect();
            let row = |i: usize| {
                let g = real[i % real.len()];
                layout.starts[g] + (i * 977 + 13) % counts[g]
            };
            let got = stream.clone_dtoh(&cb)?;
            check(
                format!("cuBLAS loop {name}"),
                spot_diff(&got, n, &spot_points(n, row), want),
            );
            base.push(("cublas_loop", lms));
            let mut cd = stream.alloc_zeros::<bf16>(useful * n)?;
            let dense_a = stream.alloc_zeros::<bf16>(useful * k)?;
            let bt0 = stream.clone_htod(&b_host[..n * k])?;
            let dms = timed(&stream, || {
                Ok(blas.gemm_bf16_nt(&stream, &mut cd, &dense_a, &bt0, (useful, n, k))?)
            })?;
            base.push(("cublas_dense", dms));
        }
        let (lo, hi) = (counts.iter().min(), counts.iter().max());
        let label = format!(
            "grouped, {name}: {groups} x {}..{} rows, N {n}, K {k}",
            lo.unwrap_or(&0),
            hi.unwrap_or(&0)
        );
        report(
            &machine,
            (key, &label),
            2.0 * (useful * n * k) as f64,
            ms,
            &base,
        );
    }

    // The mixtures in FP8 (e4m3 in, unscaled), against a loop of cuBLASLt calls (fast
    // accumulation), one an expert at its own row count.
    let mut lt = match CublasLt::new(&stream) {
        Ok(lt) => Some(lt),
        Err(e) => {
            println!("{BENCH}: cuBLASLt skipped: {e}");
            None
        }
    };
    for (key, name, counts, n, k) in mixtures() {
        let layout = GroupedRows::new(&counts);
        let (m, groups) = (layout.m, counts.len());
        let useful: usize = counts.iter().sum();
        let q = |i: usize, salt: u64| e4m3::from_f32(value(i, salt).to_f32());
        let a_host: Vec<e4m3> = (0..m * k).map(|i| q(i, 3)).collect();
        let b_host: Vec<e4m3> = (0..groups * n * k).map(|i| q(i, 4)).collect();
        let (a, bt) = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
        let table = stream.clone_htod(&layout.group_of)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let ms = timed(&stream, || {
            Ok(gemm_grouped(
                &p,
                &mut c,
                &a,
                &bt,
                &table,
                (m, n, k),
                groups,
                false,
            )?)
        })?;
        let group = |r: usize| layout.group_of[r / 128] as usize;
        let want = |r: usize, col: usize| {
            dot(
                &a_host[r * k..],
                &b_host[(group(r) * n + col) * k..],
                k,
                e4m3::to_f64,
            )
        };
        let got = stream.clone_dtoh(&c)?;
        check(
            format!("grouped FP8 {name}"),
            spot_diff(&got, n, &spot_points(n, |i| (i * 977 + 13) % m), want),
        );
        let mut base = Vec::new();
        if let Some(lt) = lt.as_mut() {
            let mut cb = stream.alloc_zeros::<bf16>(m * n)?;
            let lms = timed(&stream, || {
                for (g, &rows) in counts.iter().enumerate().filter(|(_, &r)| r > 0) {
                    let s0 = layout.starts[g];
                    lt.gemm_fp8_e4m3_nt(
                        &stream,
                        &mut cb.slice_mut(s0 * n..(s0 + rows) * n),
                        &a.slice(s0 * k..(s0 + rows) * k),
                        &bt.slice(g * n * k..(g + 1) * n * k),
                        (rows, n, k),
                    )?;
                }
                Ok(())
            })?;
            let real: Vec<usize> = (0..groups).filter(|&g| counts[g] > 0).collect();
            let row = |i: usize| {
                let g = real[i % real.len()];
                layout.starts[g] + (i * 977 + 13) % counts[g]
            };
            let got = stream.clone_dtoh(&cb)?;
            check(
                format!("cuBLASLt loop {name}"),
                spot_diff(&got, n, &spot_points(n, row), want),
            );
            base.push(("cublaslt_loop", lms));
        }
        report(
            &machine,
            (
                &format!("{key}_fp8"),
                &format!("grouped FP8 e4m3, {name}: {groups} experts, N {n}, K {k}"),
            ),
            2.0 * (useful * n * k) as f64,
            ms,
            &base,
        );
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
