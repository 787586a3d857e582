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
use pgas::cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use pgas::gemm::reference::value;
use pgas::gemm::{
    gemm_bf16, gemm_bf16_with, gemm_grouped, GemmConfig, GroupedRows, Operand, STREAM_K,
};
use pgas::ops::cublas::{self, BLayout, Cublas, CublasLt};
use pgas::prelude::*;

const BENCH: &str = "gemm_shapes";

/// Decode-sized GEMMs: 64 rows against an MLP's projections, and 128; then 64, 128 and 256
/// rows against a 4096-wide layer (issue 46 names N and K from 4096 on), whose C is few tiles.
const SKINNY: [(usize, usize, usize); 7] = [
    (64, 8192, 8192),
    (64, 28672, 8192),
    (64, 8192, 28672),
    (128, 8192, 8192),
    (64, 4096, 4096),
    (128, 4096, 4096),
    (256, 4096, 4096),
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
    machine: &str, (key, label): (&str, &str), flop: f64, pgas_ms: f64, baselines: &[(&str, f64)],
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

/// One mixture's grouped GEMM in `T`: the layout, the operands (padding rows hold values too:
/// what a caller's buffer holds there is not read back), pgas's time and its difference from
/// the host at 64 points.
struct Mixture<'c, T: pgas::cudarc::driver::DeviceRepr> {
    counts: &'c [usize],
    layout: GroupedRows,
    n: usize,
    k: usize,
    a_host: Vec<T>,
    b_host: Vec<T>,
    a: CudaSlice<T>,
    bt: CudaSlice<T>,
    to_f64: fn(T) -> f64,
    ms: f64,
    diff: f64,
}

impl<'c, T: Operand + Copy> Mixture<'c, T> {
    /// Makes the operands (`value(i, salt)` of A's and Bt's elements), then times and checks
    /// `gemm_grouped` over them.
    fn run(
        p: &Pgas, (counts, n, k): (&'c [usize], usize, usize), value: impl Fn(usize, u64) -> T,
        to_f64: fn(T) -> f64,
    ) -> BenchResult<Mixture<'c, T>> {
        let stream = p.stream();
        let layout = GroupedRows::new(counts);
        let (m, groups) = (layout.m, counts.len());
        let a_host: Vec<T> = (0..m * k).map(|i| value(i, 3)).collect();
        let b_host: Vec<T> = (0..groups * n * k).map(|i| value(i, 4)).collect();
        let (a, bt) = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
        let table = stream.clone_htod(&layout.group_of)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let ms = timed(stream, || {
            Ok(gemm_grouped(
                p,
                &mut c,
                &a,
                &bt,
                &table,
                (m, n, k),
                groups,
                false,
            )?)
        })?;
        let mut mix = Mixture {
            counts,
            layout,
            n,
            k,
            a_host,
            b_host,
            a,
            bt,
            to_f64,
            ms,
            diff: f64::NAN,
        };
        let got = stream.clone_dtoh(&c)?;
        mix.diff = spot_diff(
            &got,
            n,
            &spot_points(n, |i| (i * 977 + 13) % m),
            |r, col| mix.want(r, col),
        );
        Ok(mix)
    }

    /// C's element at row `r` and column `col` on the host, in f64.
    fn want(&self, r: usize, col: usize) -> f64 {
        let (n, k) = (self.n, self.k);
        let g = self.layout.group_of[r / 128] as usize;
        let b = &self.b_host[(g * n + col) * k..];
        dot(&self.a_host[r * k..], b, k, self.to_f64)
    }

    /// The experts' rows, not the padding.
    fn useful(&self) -> usize {
        self.counts.iter().sum()
    }

    /// The printed line's name of the mixture: `what`, the experts and their rows, N and K.
    fn label(&self, what: &str) -> String {
        let (lo, hi) = (self.counts.iter().min(), self.counts.iter().max());
        format!(
            "{what}: {} x {}..{} rows, N {}, K {}",
            self.counts.len(),
            lo.unwrap_or(&0),
            hi.unwrap_or(&0),
            self.n,
            self.k
        )
    }

    /// 2 M N K over the experts' rows.
    fn flop(&self) -> f64 {
        2.0 * (self.useful() * self.n * self.k) as f64
    }

    /// A baseline that runs one GEMM an expert, `gemm(C's rows, (A's rows, Bt's block),
    /// rows)`, timed, and its difference from the host at 64 points of the experts' rows (the
    /// loop leaves the padding rows at zero).
    fn expert_loop(
        &self, stream: &std::sync::Arc<CudaStream>,
        mut gemm: impl FnMut(
            &mut CudaViewMut<'_, bf16>,
            (&CudaView<'_, T>, &CudaView<'_, T>),
            usize,
        ) -> BenchResult<()>,
    ) -> BenchResult<(f64, f64)> {
        let (n, k, starts) = (self.n, self.k, &self.layout.starts);
        let mut c = stream.alloc_zeros::<bf16>(self.layout.m * n)?;
        let ms = timed(stream, || {
            for (g, &rows) in self.counts.iter().enumerate().filter(|(_, &r)| r > 0) {
                let s0 = starts[g];
                gemm(
                    &mut c.slice_mut(s0 * n..(s0 + rows) * n),
                    (
                        &self.a.slice(s0 * k..(s0 + rows) * k),
                        &self.bt.slice(g * n * k..(g + 1) * n * k),
                    ),
                    rows,
                )?;
            }
            Ok(())
        })?;
        let real: Vec<usize> = (0..self.counts.len())
            .filter(|&g| self.counts[g] > 0)
            .collect();
        let row = |i: usize| {
            let g = real[i % real.len()];
            starts[g] + (i * 977 + 13) % self.counts[g]
        };
        let got = stream.clone_dtoh(&c)?;
        let diff = spot_diff(&got, n, &spot_points(n, row), |r, col| self.want(r, col));
        Ok((ms, diff))
    }
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
                Ok(blas.gemm_bf16(&stream, &mut cb, &a, &bt, (m, n, k), BLayout::Transposed)?)
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
            (256, STREAM_K),
            (128, STREAM_K),
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
        let mix = Mixture::run(&p, (&counts, n, k), value, bf16::to_f64)?;
        check(format!("grouped {name}"), mix.diff);
        let mut base = Vec::new();
        if let Some(blas) = &blas {
            // One cuBLAS call an expert, over its own rows (no padding), into its rows of C.
            let (lms, d) = mix.expert_loop(&stream, |cb, (a, bt), rows| {
                Ok(blas.gemm_bf16(&stream, cb, a, bt, (rows, n, k), BLayout::Transposed)?)
            })?;
            check(format!("cuBLAS loop {name}"), d);
            base.push(("cublas_loop", lms));
            let useful = mix.useful();
            let mut cd = stream.alloc_zeros::<bf16>(useful * n)?;
            let dense_a = stream.alloc_zeros::<bf16>(useful * k)?;
            let bt0 = stream.clone_htod(&mix.b_host[..n * k])?;
            let dms = timed(&stream, || {
                Ok(blas.gemm_bf16(
                    &stream,
                    &mut cd,
                    &dense_a,
                    &bt0,
                    (useful, n, k),
                    BLayout::Transposed,
                )?)
            })?;
            base.push(("cublas_dense", dms));
        }
        let label = mix.label(&format!("grouped, {name}"));
        report(&machine, (key, &label), mix.flop(), mix.ms, &base);
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
        let q = |i: usize, salt: u64| e4m3::from_f32(value(i, salt).to_f32());
        let mix = Mixture::run(&p, (&counts, n, k), q, e4m3::to_f64)?;
        check(format!("grouped FP8 {name}"), mix.diff);
        let mut base = Vec::new();
        if let Some(lt) = lt.as_mut() {
            let (lms, d) = mix.expert_loop(&stream, |cb, (a, bt), rows| {
                Ok(lt.gemm_fp8_e4m3_nt(&stream, cb, a, bt, (rows, n, k))?)
            })?;
            check(format!("cuBLASLt loop {name}"), d);
            base.push(("cublaslt_loop", lms));
        }
        let label = mix.label(&format!("grouped FP8 e4m3, {name}"));
        report(
            &machine,
            (&format!("{key}_fp8"), &label),
            mix.flop(),
            mix.ms,
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
