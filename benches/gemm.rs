//! The bf16 GEMMs written in pgas: the teaching GEMM `pgas::gemm::mma_sync` (`mma.sync`,
//! `ldmatrix`, `cp.async`; sm_80 and up; `examples/gemm_bf16.rs` runs it) and `pgas::gemm` (TMA, mbarriers, `wgmma`, clusters with multicast,
//! a persistent grid; sm_90a, timed where the GPU has it, given B transposed), against cuBLAS
//! (`cublasGemmEx`, bf16 in and out, f32 compute) in the same run, on one GPU:
//! the shapes of `SHAPES` (square, N = K = 8192 from M = 128, LLM layers). For each shape: median
//! time over repetitions (CUDA events on the same stream, after warm-up), TFLOP/s, pgas/cuBLAS,
//! and the largest difference between the two results relative to the largest |C| (pgas is also
//! spot-checked against the host, so a wrong result fails even without cuBLAS). Also the cold
//! JIT compile of each variant of the kernel, in a fresh `PGAS_CACHE_DIR`.
//!
//! cuBLAS is loaded at run time by `pgas::ops::cublas` (from the loader's path, else
//! `PGAS_CUBLAS_DIR`, the CUDA toolkit or the `nvidia-cublas` wheel of the `python3` on `PATH`).
//! Without it the cuBLAS columns say so and pgas runs alone.
//!
//! Writes `gemm.png` (TFLOP/s against M at N = K = 8192, each kernel and cuBLAS) into the
//! directory given as the first argument (default: the current one).
//!
//! Run: `gemm [OUTDIR]` (1 PE) or `pgas-run -n 1 -- gemm OUTDIR`. Exit status 1 when a result is
//! wrong.

mod common;

use common::{
    bf16_rel_diff, emit, median_ms, show, spot_diff, spot_points, wall, BenchResult, Figure,
    GEMM_MAX_REL_DIFF, GEMM_REPS, GEMM_WARMUP,
};
use pgas::gemm::mma_sync::{self, gemm, gemm_bf16, gemm_tiled, STAGES};
use pgas::gemm::reference::value;
use pgas::gemm::{gemm_bf16_with, Chunking, GemmConfig};
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::ops::cublas::{self, BLayout, Cublas, CublasLt};
use pgas::prelude::*;

const BENCH: &str = "gemm";
/// The square and N = K = 8192 shapes, then LLM layers issue 46 names: decode-sized M against an
/// MLP's up and down projections (N or K of 28,672), and a long K at moderate M.
const SHAPES: [(usize, usize, usize); 9] = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (128, 8192, 8192),
    (1024, 8192, 8192),
    (2048, 8192, 8192),
    (4096, 8192, 8192),
    (256, 28672, 8192),
    (512, 8192, 28672),
    (2048, 8192, 18432),
];

/// Median milliseconds of `GEMM_REPS` runs of `run` after `GEMM_WARMUP`, each timed on `stream`.
fn timed(
    stream: &pgas::cudarc::driver::CudaStream, run: impl FnMut() -> BenchResult<()>,
) -> BenchResult<f64> {
    median_ms(stream, (GEMM_WARMUP, GEMM_REPS), || Ok(()), run)
}

/// pgas's C at 64 points against the host (f64), relative to the same scale as [`bf16_rel_diff`].
fn host_spot_check(got: &[bf16], a: &[bf16], b: &[bf16], (m, n, k): (usize, usize, usize)) -> f64 {
    let want = |row: usize, col: usize| -> f64 {
        (0..k)
            .map(|x| a[row * k + x].to_f64() * b[x * n + col].to_f64())
            .sum()
    };
    spot_diff(got, n, &spot_points(n, |i| (i * 977 + 13) % m), want)
}

struct Row {
    shape: (usize, usize, usize),
    pgas_ms: f64,
    /// The wgmma kernel (NaN below sm_90).
    sm90_ms: f64,
    cublas_ms: f64,
    diff: f64,
    sm90_diff: f64,
}

/// `B` (k x n, row-major) transposed: the wgmma kernel's `Bt` (n x k).
fn transpose(b: &[bf16], k: usize, n: usize) -> Vec<bf16> {
    let mut t = vec![bf16::ZERO; k * n];
    for (x, row) in b.chunks_exact(n).enumerate() {
        for (col, v) in row.iter().enumerate() {
            t[col * k + x] = *v;
        }
    }
    t
}

// One long function on purpose: a benchmark reads top to bottom as the run it makes; the shapes
// share the handles and buffers.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    // A fresh kernel cache, so the first compile is cold (read by init).
    let cache = std::env::temp_dir().join(format!("pgas-gemm-bench-{}", std::process::id()));
    std::env::set_var("PGAS_CACHE_DIR", &cache);
    let p = pgas::init()?;
    let machine = format!("{} x1 PE", p.cuda().name()?);
    let stream = p.stream().clone();

    // Cold JIT compile of each variant (NVRTC, cache store, module load).
    let hopper = p.compute_capability()?.0 == 9;
    let mut compile = Vec::new();
    // Each kernel's comptime values are its ring depth and tile width (the wide tile of big
    // shapes).
    let mma_ct = [STAGES as i128, mma_sync::BN as i128];
    let sm90_ct =
        GemmConfig::for_shape(8192, 8192, 8192, p.sm_count()?).comptime(Chunking::Whole, false);
    let kernels: [(&'static pgas::kernel::KernelSpec, &[i128]); 2] = [
        (&gemm_bf16::SPEC, &mma_ct),
        (&pgas::gemm::gemm_bf16_sm90::SPEC, &sm90_ct),
    ];
    for (spec, comptime) in kernels.into_iter().take(if hopper { 2 } else { 1 }) {
        for variant in [Variant::Plain, Variant::Checked] {
            let one = [Prewarm {
                spec,
                variant,
                comptime,
            }];
            let (r, s) = wall(|| pgas::launch::prewarm(&p, &one));
            r?;
            compile.push((spec.rust_name, variant, s));
        }
    }
    let _ = std::fs::remove_dir_all(&cache);

    let blas = match cublas::load() {
        Ok(from) => {
            println!("{BENCH}: cuBLAS from {from}");
            Some(Cublas::new(p.cuda())?)
        }
        Err(why) => {
            println!("{BENCH}: cuBLAS skipped: {why}; pgas runs alone");
            None
        }
    };

    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let big_b: Vec<bf16> = (0..8192 * 8192).map(|i| value(i, 2)).collect();
    let big_a: Vec<bf16> = (0..8192 * 8192).map(|i| value(i, 1)).collect();
    for (m, n, k) in SHAPES {
        let (a_host, b_host) = if (m, n, k) == (4096, 4096, 4096) {
            (
                (0..m * k).map(|i| value(i, 3)).collect::<Vec<_>>(),
                (0..k * n).map(|i| value(i, 4)).collect::<Vec<_>>(),
            )
        } else {
            // The same values as the 8192 x 8192 operands, generated where a shape needs more.
            let take = |big: &[bf16], len: usize, seed| {
                big.get(..len).map_or_else(
                    || (0..len).map(|i| value(i, seed)).collect(),
                    <[bf16]>::to_vec,
                )
            };
            (take(&big_a, m * k, 1), take(&big_b, k * n, 2))
        };
        let a = stream.clone_htod(&a_host)?;
        let b = stream.clone_htod(&b_host)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let pgas_ms = timed(&stream, || {
            gemm(&p, &mut c, &a, &b, (m, n, k), STAGES, false)?;
            Ok(())
        })?;
        // The ring depth and the tile width are tuning knobs: the other choices at 8192^3, for
        // the record (a ring that does not fit this GPU's shared memory is a launch Err, printed).
        if (m, n, k) == (8192, 8192, 8192) {
            let others = [2, 3, 4]
                .into_iter()
                .filter(|s| *s != STAGES)
                .map(|s| (s, mma_sync::BN))
                .chain([(STAGES, 128)]);
            for (stages, bn) in others {
                let ms = timed(&stream, || {
                    gemm_tiled(&p, &mut c, &a, &b, (m, n, k), (stages, bn), false)?;
                    Ok(())
                });
                let what =
                    format!("mma.sync kernel at 8192^3 with {stages} stages, {bn}-wide tiles");
                match ms {
                    Ok(ms) => {
                        let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
                        println!("{BENCH}: {what}: {tflops:.1} TFLOP/s");
                    }
                    Err(e) => println!("{BENCH}: {what}: not run: {e}"),
                }
            }
            gemm(&p, &mut c, &a, &b, (m, n, k), STAGES, false)?;
        }
        let got = stream.clone_dtoh(&c)?;
        let spot = host_spot_check(&got, &a_host, &b_host, (m, n, k));
        if spot.is_nan() || spot > GEMM_MAX_REL_DIFF {
            failures.push(format!(
                "{m}x{n}x{k}: pgas differs from the host by {spot:.3e} (relative)"
            ));
        }
        let (sm90_ms, got90) = if hopper {
            let bt = stream.clone_htod(&transpose(&b_host, k, n))?;
            let mut c90 = stream.alloc_zeros::<bf16>(m * n)?;
            let cfg = GemmConfig::for_shape(m, n, k, p.sm_count()?);
            let ms = timed(&stream, || {
                gemm_bf16_with(&p, &mut c90, &a, &bt, (m, n, k), cfg, false)?;
                Ok(())
            })?;
            // What each of the kernel's choices is worth here (printed, for docs/gemm.md): no
            // clusters, then also one block per tile as a non-persistent kernel would launch.
            let tiles = ((m / 128) * (n / cfg.bn as usize)) as u32;
            for (what, alt) in [
                ("clusters of 1", GemmConfig { cluster: 1, ..cfg }),
                (
                    "clusters of 1, a block per tile",
                    GemmConfig {
                        cluster: 1,
                        clusters: Some(tiles),
                        ..cfg
                    },
                ),
                (
                    "128-wide tiles",
                    GemmConfig {
                        bn: 128,
                        stages: 6,
                        ..cfg
                    },
                ),
                ("a 3-slot ring", GemmConfig { stages: 3, ..cfg }),
            ] {
                if alt == cfg || (m / 128) % alt.cluster as usize != 0 {
                    continue;
                }
                let run = timed(&stream, || {
                    Ok(gemm_bf16_with(
                        &p,
                        &mut c90,
                        &a,
                        &bt,
                        (m, n, k),
                        alt,
                        false,
                    )?)
                });
                match run {
                    Ok(t) => {
                        // Every variant timed is also checked.
                        let got = stream.clone_dtoh(&c90)?;
                        let spot = host_spot_check(&got, &a_host, &b_host, (m, n, k));
                        let verdict = if spot.is_nan() || spot > GEMM_MAX_REL_DIFF {
                            failures.push(format!(
                                "{m}x{n}x{k}: the wgmma kernel with {alt:?} differs from the host by {spot:.3e}"
                            ));
                            "WRONG"
                        } else {
                            "ok"
                        };
                        println!(
                            "{BENCH}: {m}x{n}x{k} wgmma {cfg:?} {ms:.4} ms; with {what} {t:.4} ms ({:.3}x), {verdict}",
                            ms / t
                        )
                    }
                    Err(e) => println!("{BENCH}: {m}x{n}x{k} wgmma with {what}: not run: {e}"),
                }
            }
            gemm_bf16_with(&p, &mut c90, &a, &bt, (m, n, k), cfg, false)?;
            let got90 = stream.clone_dtoh(&c90)?;
            let spot = host_spot_check(&got90, &a_host, &b_host, (m, n, k));
            if spot.is_nan() || spot > GEMM_MAX_REL_DIFF {
                failures.push(format!(
                    "{m}x{n}x{k}: the wgmma kernel differs from the host by {spot:.3e} (relative)"
                ));
            }
            (ms, Some(got90))
        } else {
            (f64::NAN, None)
        };
        let (cublas_ms, diff, sm90_diff) = match &blas {
            Some(blas) => {
                let mut cb = stream.alloc_zeros::<bf16>(m * n)?;
                let ms = timed(&stream, || {
                    Ok(blas.gemm_bf16(&stream, &mut cb, &a, &b, (m, n, k), BLayout::Plain)?)
                })?;
                let want = stream.clone_dtoh(&cb)?;
                let diff = bf16_rel_diff(&got, &want);
                let sm90_diff = got90
                    .as_deref()
                    .map_or(f64::NAN, |g| bf16_rel_diff(g, &want));
                for (what, d) in [("pgas", diff), ("the wgmma kernel", sm90_diff)] {
                    if d.is_nan() && what == "the wgmma kernel" && got90.is_none() {
                        continue;
                    }
                    if d.is_nan() || d > GEMM_MAX_REL_DIFF {
                        failures.push(format!(
                            "{m}x{n}x{k}: {what} differs from cuBLAS by {d:.3e} (relative)"
                        ));
                    }
                }
                (ms, diff, sm90_diff)
            }
            None => (f64::NAN, f64::NAN, f64::NAN),
        };
        rows.push(Row {
            shape: (m, n, k),
            pgas_ms,
            sm90_ms,
            cublas_ms,
            diff,
            sm90_diff,
        });
    }

    print_report(&machine, &rows, &compile);
    if hopper {
        fp8(&p, &stream, &machine, &mut failures)?;
    }
    let out_dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    plot_rates(&machine, &rows, &out_dir)?;
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("{BENCH}: FAIL {f}");
        }
        std::process::exit(1)
    }
}

/// FP8 (e4m3 in, bf16 out, f32 accumulate): `pgas::gemm::gemm_fp8` against cuBLASLt (fast
/// accumulation, unit scales) at 8192^3, 4096^3 and LLM layers, both checked against the host.
fn fp8(
    p: &Pgas, stream: &std::sync::Arc<pgas::cudarc::driver::CudaStream>, machine: &str,
    failures: &mut Vec<String>,
) -> BenchResult<()> {
    let mut lt = match CublasLt::new(stream) {
        Ok(lt) => Some(lt),
        Err(e) => {
            println!("{BENCH}: cuBLASLt skipped: {e}");
            None
        }
    };
    // The square shapes, then issue 46's LLM layers (decode-sized M, a long K).
    let shapes = [
        (8192, 8192, 8192),
        (4096, 4096, 4096),
        (64, 8192, 8192),
        (256, 28672, 8192),
        (512, 8192, 28672),
        (2048, 8192, 18432),
    ];
    for (m, n, k) in shapes {
        let q = |i: usize, salt: u64| pgas::e4m3::from_f32(value(i, salt).to_f32());
        let a_host: Vec<pgas::e4m3> = (0..m * k).map(|i| q(i, 21)).collect();
        let b_host: Vec<pgas::e4m3> = (0..n * k).map(|i| q(i, 22)).collect();
        let a = stream.clone_htod(&a_host)?;
        let bt = stream.clone_htod(&b_host)?;
        // Against the host at 64 points: the products of e4m3 values are exact in f64.
        let points = spot_points(n, |i| (i * 977 + 13) % m);
        let spot = |got: &[bf16]| {
            let want = |row: usize, col: usize| -> f64 {
                (0..k)
                    .map(|x| a_host[row * k + x].to_f64() * b_host[col * k + x].to_f64())
                    .sum()
            };
            spot_diff(got, n, &points, want)
        };
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let pgas_ms = timed(stream, || {
            Ok(pgas::gemm::gemm_fp8(p, &mut c, &a, &bt, (m, n, k), false)?)
        })?;
        let d = spot(&stream.clone_dtoh(&c)?);
        if d.is_nan() || d > GEMM_MAX_REL_DIFF {
            failures.push(format!(
                "{m}x{n}x{k} FP8: pgas differs from the host by {d:.3e}"
            ));
        }
        let lt_ms = match lt.as_mut() {
            Some(lt) => {
                let mut cl = stream.alloc_zeros::<bf16>(m * n)?;
                let ms = timed(stream, || {
                    Ok(lt.gemm_fp8_e4m3_nt(stream, &mut cl, &a, &bt, (m, n, k))?)
                })?;
                let dl = spot(&stream.clone_dtoh(&cl)?);
                if dl.is_nan() || dl > GEMM_MAX_REL_DIFF {
                    failures.push(format!(
                        "{m}x{n}x{k} FP8: cuBLASLt differs from the host by {dl:.3e}"
                    ));
                }
                ms
            }
            None => f64::NAN,
        };
        let tf = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
        println!(
            "{BENCH}: FP8 e4m3 {m}x{n}x{k}: pgas::gemm {pgas_ms:.4} ms {:.1} TFLOP/s, cuBLASLt {lt_ms:.4} ms {:.1} TFLOP/s, pgas/cuBLASLt {:.3}, diff {d:.2e}",
            tf(pgas_ms),
            tf(lt_ms),
            lt_ms / pgas_ms
        );
        let note = format!("median of {GEMM_REPS}; e4m3 in, bf16 out, f32 accumulate; cuBLASLt with fast accumulation");
        for (name, value, unit) in [
            ("pgas_tflops", tf(pgas_ms), "TFLOP/s"),
            ("cublaslt_tflops", tf(lt_ms), "TFLOP/s"),
            ("ratio", lt_ms / pgas_ms, "x"),
        ] {
            let f = Figure {
                name: format!("gemm_fp8_{m}x{n}x{k}/{name}"),
                value,
                unit,
                note: note.clone(),
            };
            emit(BENCH, machine, &f);
        }
    }
    Ok(())
}

/// TFLOP/s against M for the shapes with N = K = 8192, one series a kernel.
fn plot_rates(machine: &str, rows: &[Row], out_dir: &std::path::Path) -> BenchResult<()> {
    let rate = |ms: f64, (m, n, k): (usize, usize, usize)| 2.0 * (m * n * k) as f64 / ms / 1e9;
    let series: Vec<common::plot::Series> = [
        ("mma.sync kernel", 0),
        ("pgas::gemm (wgmma)", 1),
        ("cuBLAS", 2),
    ]
    .into_iter()
    .map(|(name, which)| {
        let mut points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| (r.shape.1, r.shape.2) == (8192, 8192))
            .map(|r| {
                let ms = [r.pgas_ms, r.sm90_ms, r.cublas_ms][which];
                (r.shape.0 as f64, rate(ms, r.shape))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        common::plot::Series {
            name: name.into(),
            points,
        }
    })
    .collect();
    std::fs::create_dir_all(out_dir)?;
    let png = out_dir.join("gemm.png");
    common::plot::by_count(
        &png,
        &format!("bf16 GEMM, N = K = 8192, {machine}"),
        ("M (rows of C)", "TFLOP/s (higher is better)"),
        &series,
    )?;
    println!("{BENCH}: wrote {}", png.display());
    Ok(())
}

fn print_report(machine: &str, rows: &[Row], compile: &[(&str, Variant, f64)]) {
    println!("\n{BENCH} on {machine}: bf16 in, f32 accumulate, bf16 out; median of {GEMM_REPS}");
    println!(
        "{:<18} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10}",
        "M x N x K",
        "mma ms",
        "wgmma ms",
        "cuBLAS ms",
        "mma TF/s",
        "wgmma TF/s",
        "cuBLAS TF/s",
        "mma/cB",
        "wgmma/cB",
        "max diff"
    );
    for r in rows {
        let (m, n, k) = r.shape;
        let flop = 2.0 * (m * n * k) as f64;
        let tf = |ms: f64| flop / (ms * 1e-3) / 1e12;
        let ratio = r.cublas_ms / r.pgas_ms;
        let ratio90 = r.cublas_ms / r.sm90_ms;
        println!(
            "{:<18} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10}",
            format!("{m}x{n}x{k}"),
            show(r.pgas_ms),
            show(r.sm90_ms),
            show(r.cublas_ms),
            show(tf(r.pgas_ms)),
            show(tf(r.sm90_ms)),
            show(tf(r.cublas_ms)),
            show(ratio),
            show(ratio90),
            if r.diff.is_finite() {
                format!(
                    "{:.2e}",
                    r.diff.max(if r.sm90_diff.is_finite() {
                        r.sm90_diff
                    } else {
                        0.0
                    })
                )
            } else {
                "-".into()
            }
        );
        let note = format!(
            "median of {GEMM_REPS}, plain variants ({STAGES}-stage mma.sync, pgas::gemm's choice for the shape)"
        );
        let key = format!("gemm_{m}x{n}x{k}");
        for (name, value, unit) in [
            ("pgas_tflops", tf(r.pgas_ms), "TFLOP/s"),
            ("wgmma_tflops", tf(r.sm90_ms), "TFLOP/s"),
            ("cublas_tflops", tf(r.cublas_ms), "TFLOP/s"),
            ("ratio", ratio, "x"),
            ("wgmma_ratio", ratio90, "x"),
            ("max_rel_diff", r.diff, "rel"),
            ("wgmma_max_rel_diff", r.sm90_diff, "rel"),
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
    for (kernel, variant, s) in compile {
        println!(
            "cold JIT compile of {kernel}, {} variant: {} s",
            variant.as_str(),
            show(*s)
        );
        let f = Figure {
            name: format!("cold_compile_{kernel}_{}", variant.as_str()),
            value: *s,
            unit: "s",
            note: "NVRTC + cache store + module load, fresh PGAS_CACHE_DIR".into(),
        };
        emit(BENCH, machine, &f);
    }
}
