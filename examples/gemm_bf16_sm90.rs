//! The Hopper GEMM of `pgas::gemm` (sm_90a: H100, H200) from a program: `C = A Btᵀ` with `A`
//! (M x K), `Bt` (N x K, a linear layer's weight layout) and `C` (M x N), row-major `bf16`, f32
//! accumulate. The kernel itself (warp-specialized, persistent, clusters sharing B through
//! multicast copies) is `src/gemm/kernel.rs`; `docs/gemm.md` walks through it, and
//! `examples/gemm_bf16.rs` writes a GEMM from scratch.
//!
//! Every PE runs its own GEMMs (one process per GPU): the checked variant at small shapes
//! compared with the host at every element, a shape the kernel refuses, then the plain variant
//! timed at 4096^3 and spot-checked.
//!
//! ```text
//! pgas-run -n 1 -- target/release/examples/gemm_bf16_sm90
//! ```

use pgas::cudarc::driver::sys::CUevent_flags;
use pgas::gemm::reference::value;
use pgas::gemm::{gemm_bf16, gemm_bf16_with, GemmConfig};
use pgas::prelude::*;

/// The worst error of `got` against the host product at `points`, relative to the tolerance
/// (bf16 rounding of the output plus f32 order; > 1 fails), and where.
fn worst(
    got: &[bf16], a: &[bf16], bt: &[bf16], (n, k): (usize, usize), points: &[(usize, usize)],
) -> (f64, usize, usize) {
    let mut w = (0.0, 0, 0);
    for &(row, col) in points {
        let want: f64 = (0..k)
            .map(|x| a[row * k + x].to_f64() * bt[col * k + x].to_f64())
            .sum();
        let r = (got[row * n + col].to_f64() - want).abs() / (want.abs() / 128.0 + 1e-2);
        if r.is_nan() || r > w.0 {
            w = (r, row, col);
        }
    }
    w
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let me = pgas.my_pe();
    let stream = pgas.stream().clone();
    let (major, _) = pgas.compute_capability()?;
    if major != 9 {
        println!(
            "PE {me}: skipped: needs compute capability 9.0 (sm_90a), this GPU is {major}.x, ok"
        );
        return Ok(());
    }
    let fail = |what: String| -> ! {
        eprintln!("PE {me}: {what}");
        std::process::exit(1)
    };

    // N that is not whole 64-column tiles is an Err before anything launches (M may be any
    // size).
    let mut tiny = stream.alloc_zeros::<bf16>(512 * 500)?;
    let ta = stream.alloc_zeros::<bf16>(512 * 512)?;
    let tb = stream.alloc_zeros::<bf16>(500 * 512)?;
    match gemm_bf16(&pgas, &mut tiny, &ta, &tb, (512, 500, 512), true) {
        Err(e)
            if e.to_string()
                .contains("N = 500 is not a positive multiple of 64") => {}
        other => fail(format!(
            "a 512 x 500 x 512 GEMM was not refused as expected: {other:?}"
        )),
    }

    // Every tile width, with and without clusters, checked, against the host at every element
    // (K = 1024 wraps every ring; 4 tiles of M so clusters of 2 hold 2).
    let (m, n, k) = (512, 512, 1024);
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 1 + me as u64)).collect();
    let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 100 + me as u64)).collect();
    let (a, bt) = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
    let all: Vec<(usize, usize)> = (0..m).flat_map(|r| (0..n).map(move |c| (r, c))).collect();
    // The last one with K split in 4 parts, their sums added in a workspace (split-K).
    for (bn, cluster, splits) in [(256, 2, 1), (128, 2, 1), (64, 1, 1), (256, 1, 4)] {
        let cfg = GemmConfig {
            stages: 3,
            bn,
            cluster,
            clusters: None,
            splits,
        };
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        gemm_bf16_with(&pgas, &mut c, &a, &bt, (m, n, k), cfg, true)?;
        let (r, row, col) = worst(&stream.clone_dtoh(&c)?, &a_host, &b_host, (n, k), &all);
        if r.is_nan() || r > 1.0 {
            fail(format!("C[{row}][{col}] is off by {r:.2} tolerances ({bn}-wide tiles, clusters of {cluster}, checked)"));
        }
    }

    // Speed: the plain variant at 4096^3, spot-checked.
    let (m, n, k) = (4096, 4096, 4096);
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 7)).collect();
    let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 8)).collect();
    let (a, bt) = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let mut ms = Vec::new();
    for rep in 0..12 {
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        gemm_bf16(&pgas, &mut c, &a, &bt, (m, n, k), false)?;
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let points: Vec<(usize, usize)> = (0..512)
        .map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n))
        .collect();
    let (r, row, col) = worst(&stream.clone_dtoh(&c)?, &a_host, &b_host, (n, k), &points);
    if r.is_nan() || r > 1.0 {
        fail(format!(
            "C[{row}][{col}] is off by {r:.2} tolerances (4096^3, plain)"
        ));
    }
    let tflops = 2.0 * (m * n * k) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}: pgas::gemm matches the host (512 x 512 x 1024 in 4 specializations, every element; 4096^3 at 512 points); \
         4096^3 in {median:.3} ms = {tflops:.1} TFLOP/s (median of 10, plain), ok"
    );
    Ok(())
}
