//! The teaching GEMM, run: the from-scratch bf16 GEMM on the tensor cores written in pgas
//! (`mma.sync`, `ldmatrix`, `cp.async`; Ampere and Hopper alike), `C = A B` with `A` (M x K),
//! `B` (K x N) and `C` (M x N) row-major `bf16`, accumulated in `f32`. The kernel and its host
//! side are [`pgas::gemm::mma_sync`] (`src/gemm/mma_sync.rs`, to read top to bottom: the tiles,
//! the `cp.async` ring, the swizzle, the double-buffered fragments, the epilogue); programs call
//! [`pgas::gemm`]'s Hopper GEMM instead.
//!
//! Every PE runs its own GEMMs (one process per GPU): a shape that does not divide into tiles
//! refused, checked launches with both tile widths compared with the host (512^3, and a K shorter
//! than the ring), then the plain variant timed at 4096^3 (spot-checked against the host).
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/gemm_bf16
//! ```
//!
//! `benches/gemm.rs` times the same kernel against cuBLAS.

use pgas::cudarc::driver::sys::CUevent_flags;
use pgas::gemm::mma_sync::{gemm, gemm_bf16, gemm_tiled, BN, STAGES};
use pgas::gemm::reference::value;
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;
use std::time::Instant;

/// One element of `A B` on the host, in f64.
fn host_dot(a: &[bf16], b: &[bf16], n: usize, k: usize, row: usize, col: usize) -> f64 {
    (0..k)
        .map(|x| a[row * k + x].to_f64() * b[x * n + col].to_f64())
        .sum()
}

/// The bound on |got - want| for a bf16 result: the output's rounding (2^-8 relative) plus a
/// little for f32 accumulation order.
fn tolerance(want: f64) -> f64 {
    want.abs() / 128.0 + 1e-2
}

/// Compares `got` with the host product at `points` (row, col); returns the worst error
/// relative to the tolerance (> 1 fails) and where.
fn compare(
    got: &[bf16], a: &[bf16], b: &[bf16], (n, k): (usize, usize),
    points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    for (row, col) in points {
        let want = host_dot(a, b, n, k, row, col);
        let g = got[row * n + col].to_f64();
        let r = (g - want).abs() / tolerance(want);
        if r.is_nan() || r > worst.0 {
            worst = (r, row, col, g, want);
        }
    }
    worst
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let me = pgas.my_pe();
    let stream = pgas.stream().clone();

    // The JIT compiles each variant once per machine (then the disk cache serves it): record
    // what it costs for a kernel of this size. Both widths are checked below; the wide tile is
    // the one timed.
    let t = Instant::now();
    let wide = [STAGES as i128, BN as i128];
    let narrow = [STAGES as i128, 128];
    pgas::launch::prewarm(
        &pgas,
        &[
            (Variant::Checked, &wide),
            (Variant::Checked, &narrow),
            (Variant::Plain, &wide),
        ]
        .map(|(variant, comptime)| Prewarm {
            spec: &gemm_bf16::SPEC,
            variant,
            comptime,
        }),
    )?;
    let compile_s = t.elapsed().as_secs_f64();

    // A shape that does not divide into tiles is an Err before anything launches.
    let mut tiny = stream.alloc_zeros::<bf16>(500 * 512)?;
    let ta = stream.alloc_zeros::<bf16>(500 * 512)?;
    let tb = stream.alloc_zeros::<bf16>(512 * 512)?;
    match gemm(&pgas, &mut tiny, &ta, &tb, (500, 512, 512), STAGES, true) {
        Err(e)
            if e.to_string()
                .contains("M = 500 is not a positive multiple of 128") => {}
        other => {
            eprintln!("PE {me}: a 500 x 512 x 512 GEMM was not refused as expected: {other:?}");
            std::process::exit(1);
        }
    }

    // Correctness: the checked variant against the host, every element, with both tile widths:
    // at 512^3 (the ring wraps) and with a single k-tile (fewer tiles than the ring's depth).
    for ((m, n, k), bn) in [
        ((512, 512, 512), BN),
        ((512, 512, 512), 128),
        ((128, 256, 64), BN),
        ((128, 256, 64), 128),
    ] {
        let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 1 + me as u64)).collect();
        let b_host: Vec<bf16> = (0..k * n).map(|i| value(i, 100 + me as u64)).collect();
        let a = stream.clone_htod(&a_host)?;
        let b = stream.clone_htod(&b_host)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        gemm_tiled(&pgas, &mut c, &a, &b, (m, n, k), (STAGES, bn), true)?;
        let got = stream.clone_dtoh(&c)?;
        let all = (0..m).flat_map(|r| (0..n).map(move |col| (r, col)));
        let (ratio, row, col, g, want) = compare(&got, &a_host, &b_host, (n, k), all);
        if ratio.is_nan() || ratio > 1.0 {
            eprintln!(
                "PE {me}: C[{row}][{col}] = {g} but the host says {want} \
                 ({m} x {n} x {k}, {bn}-wide tiles, checked variant)"
            );
            std::process::exit(1);
        }
    }

    // Speed: the plain variant at 4096^3, spot-checked.
    let (m, n, k) = (4096, 4096, 4096);
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 7)).collect();
    let b_host: Vec<bf16> = (0..k * n).map(|i| value(i, 8)).collect();
    let a = stream.clone_htod(&a_host)?;
    let b = stream.clone_htod(&b_host)?;
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut ms = Vec::new();
    for rep in 0..12 {
        let start = stream.record_event(flags)?;
        gemm(&pgas, &mut c, &a, &b, (m, n, k), STAGES, false)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let got = stream.clone_dtoh(&c)?;
    // 512 points spread over every tile row and column.
    let points = (0..512).map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n));
    let (ratio, row, col, g, want) = compare(&got, &a_host, &b_host, (n, k), points);
    if ratio.is_nan() || ratio > 1.0 {
        eprintln!("PE {me}: C[{row}][{col}] = {g} but the host says {want} (4096^3, plain)");
        std::process::exit(1);
    }
    let tflops = 2.0 * (m * n * k) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}: bf16 GEMM matches the host (512^3 and 128 x 256 x 64 with 256- and 128-wide \
         tiles, every element; 4096^3 at 512 points); 4096^3 in {median:.3} ms = {tflops:.1} \
         TFLOP/s (median of 10, plain, {STAGES} stages); JIT compile of three specializations \
         {compile_s:.1} s, ok"
    );
    Ok(())
}
