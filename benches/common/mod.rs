//! What the benchmarks share: the GPU check, medians, CUDA-event timing, result comparison and
//! the output format.
//!
//! Every figure is printed twice: in a table for people, and as one machine-readable line
//! `FIGURE {"bench":..,"name":..,"value":..,"unit":..,"machine":..}` that scripts/gpu-suite.sh
//! copies into its summary. Nothing here asserts on a time.

#![allow(dead_code)]

pub mod nccl;
pub mod plot;

use pgas::bf16;
use pgas::cudarc::driver::sys::CUevent_flags;
use pgas::cudarc::driver::CudaStream;
use std::time::Instant;

pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Unrecorded and recorded runs of each timing in the GEMM benchmarks (`gemm`, `ag_gemm`,
/// `gemm_rs`), for [`median_ms`].
pub const GEMM_WARMUP: usize = 3;
/// See [`GEMM_WARMUP`].
pub const GEMM_REPS: usize = 10;
/// The largest [`bf16_rel_diff`] a GEMM result may have against its reference: both round to
/// bf16 (2^-8 relative) on their way, in different orders, so a few units of that; a wrong tile
/// is off by the size of C itself.
pub const GEMM_MAX_REL_DIFF: f64 = 2e-2;

/// Whether a CUDA driver and at least one GPU are there.
pub fn gpu_present() -> bool {
    pgas::gpu_count().is_ok_and(|n| n > 0)
}

/// Median of a sample (upper median for an even count); NaN for none.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Smallest and largest value: the spread printed beside each median.
pub fn spread(xs: &[f64]) -> (f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// Milliseconds between two CUDA events recorded around `work` on `stream`, after the stream
/// finished. `work` only enqueues.
pub fn time_on_stream(
    stream: &CudaStream, work: impl FnOnce() -> BenchResult<()>,
) -> BenchResult<f64> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.record_event(flags)?;
    work()?;
    let end = stream.record_event(flags)?;
    end.synchronize()?;
    Ok(start.elapsed_ms(&end)? as f64)
}

/// Median milliseconds of `reps` runs of `run` after `warmup` unrecorded ones, each timed on
/// `stream` with CUDA events; `before` runs ahead of each run, outside the timing (a barrier, so
/// that every PE starts together).
pub fn median_ms(
    stream: &CudaStream, (warmup, reps): (usize, usize),
    mut before: impl FnMut() -> BenchResult<()>, mut run: impl FnMut() -> BenchResult<()>,
) -> BenchResult<f64> {
    let mut ms = Vec::with_capacity(reps);
    for i in 0..warmup + reps {
        before()?;
        let t = time_on_stream(stream, &mut run)?;
        if i >= warmup {
            ms.push(t);
        }
    }
    Ok(median(&ms))
}

/// The largest |got - want| over the largest |want|: how far a bf16 result is from its
/// reference, relative to its size. NaN when a difference is NaN (f64::max would drop it).
pub fn bf16_rel_diff(got: &[bf16], want: &[bf16]) -> f64 {
    let scale = want.iter().map(|v| v.to_f64().abs()).fold(0.0, f64::max);
    let diff = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g.to_f64() - w.to_f64()).abs())
        .fold(0.0, |acc: f64, d| {
            if acc.is_nan() || d.is_nan() {
                f64::NAN
            } else {
                acc.max(d)
            }
        });
    diff / scale.max(f64::MIN_POSITIVE)
}

/// 64 points of a C of `n` columns, their rows from `row(i)` (the GEMM benchmarks' spot checks
/// against the host).
pub fn spot_points(n: usize, row: impl Fn(usize) -> usize) -> Vec<(usize, usize)> {
    (0..64).map(|i| (row(i), (i * 613 + 101) % n)).collect()
}

/// The largest difference at `points` of `got` (n columns, row-major) from `want(row, col)`,
/// over the largest |want| there (at least 1); NaN when a difference is NaN.
pub fn spot_diff(
    got: &[bf16], n: usize, points: &[(usize, usize)], want: impl Fn(usize, usize) -> f64,
) -> f64 {
    let (mut worst, mut scale) = (0.0f64, 0.0f64);
    for &(row, col) in points {
        let w = want(row, col);
        let d = (got[row * n + col].to_f64() - w).abs();
        worst = if d.is_nan() { f64::NAN } else { worst.max(d) };
        scale = scale.max(w.abs());
    }
    worst / scale.max(1.0)
}

/// Wall-clock seconds of `work`.
pub fn wall<T>(work: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let out = work();
    (out, t.elapsed().as_secs_f64())
}

/// One measured figure.
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    /// Free-form detail for people (spread, repetitions, configuration).
    pub note: String,
}

impl Figure {
    /// A figure of `value` `unit` named `name`, with `note` for people.
    pub fn new(name: &str, value: f64, unit: &'static str, note: &str) -> Figure {
        Figure {
            name: name.into(),
            value,
            unit,
            note: note.into(),
        }
    }
}

/// Prints the machine-readable line of a figure.
pub fn emit(bench: &str, machine: &str, f: &Figure) {
    println!(
        "FIGURE {{\"bench\":\"{bench}\",\"name\":\"{}\",\"value\":{},\"unit\":\"{}\",\"machine\":\"{}\",\"note\":\"{}\"}}",
        f.name,
        if f.value.is_finite() { format!("{:.4}", f.value) } else { "null".into() },
        f.unit,
        machine,
        f.note.replace('"', "'")
    );
}

/// Prints `figs` as a table for people under a `BENCH on MACHINE` title, then each as its
/// machine-readable `FIGURE` line.
pub fn report(bench: &str, machine: &str, figs: &[Figure]) {
    println!("\n{bench} on {machine}");
    for f in figs {
        println!(
            "{:<40} {:>10} {:<3} {}",
            f.name,
            show(f.value),
            f.unit,
            f.note
        );
    }
    for f in figs {
        emit(bench, machine, f);
    }
}

/// Formats a value with a sensible number of digits for the table.
pub fn show(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}
