//! GEMM + reduce-scatter on Hopper, the row-parallel linear layer of tensor parallelism (PyTorch
//! async-TP's `fused_matmul_reduce_scatter`): every PE `p` holds `A_p` (M x K/P, its slice of
//! the inner dimension) and `Bt_p` (N x K/P), row-major bf16, and ends with rows
//! `[p M/P, (p + 1) M/P)` of `sum_q A_q Bt_qᵀ` (bf16, f32 accumulate).
//! `pgas::ops::matmul_reduce_scatter::MatmulReduceScatter` with `GemmPath::PgasPerShard`: the
//! rows go in chunks ordered by owner, each chunk's GEMM is `pgas::gemm` (src/gemm/kernel.rs),
//! the copy engine pushes each finished chunk to its owner while the next one computes, and the
//! owner adds the parts in f32 (docs/ops.md, docs/gemm.md).
//!
//! Checked at small shapes against the host at every element over three calls (the epochs),
//! then timed at 8192^3 (K split over the PEs) and spot-checked.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/gemm_reduce_scatter_sm90
//! ```
//!
//! `benches/gemm_rs.rs` times it against cuBLAS + NCCL and the cuBLAS path.

use pgas::cudarc::driver::sys::CUevent_flags;
use pgas::gemm::reference::value;
use pgas::ops::matmul_reduce_scatter::MatmulReduceScatter;
use pgas::ops::GemmPath;
use pgas::prelude::*;

/// This PE's A_p (m x k) and Bt_p (n x k), `k` being K / P.
fn inputs(
    pgas: &Pgas, (m, n, k): (usize, usize, usize),
) -> pgas::Result<(CudaSlice<bf16>, CudaSlice<bf16>)> {
    let me = pgas.my_pe() as u64;
    let a: Vec<bf16> = (0..m * k).map(|i| value(i, 2 * me + 1)).collect();
    let bt: Vec<bf16> = (0..n * k).map(|i| value(i, 2 * me + 2)).collect();
    let stream = pgas.stream();
    Ok((stream.clone_htod(&a)?, stream.clone_htod(&bt)?))
}

/// The worst error of `got` (this PE's M/P x n rows) against the host at `points`, relative to
/// the tolerance (> 1 fails), with where and both values. Each PE's part is rounded to bf16
/// before the parts are added (as NCCL's bf16 reduce-scatter of cuBLAS's bf16 output does), so
/// the tolerance scales with the parts, not with their sum, which may cancel.
fn check(
    pgas: &Pgas, got: &[bf16], (m, n, k): (usize, usize, usize),
    points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let (me, np) = (pgas.my_pe(), pgas.n_pes());
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    for (r, col) in points {
        let row = me * (m / np) + r;
        let parts: Vec<f64> = (0..np as u64)
            .map(|q| {
                let (a, b) = (2 * q + 1, 2 * q + 2);
                (0..k)
                    .map(|x| value(row * k + x, a).to_f64() * value(col * k + x, b).to_f64())
                    .sum()
            })
            .collect();
        let want: f64 = parts.iter().sum();
        let scale: f64 = parts.iter().map(|p| p.abs()).sum::<f64>() + want.abs();
        let g = got[r * n + col].to_f64();
        let e = (g - want).abs() / (scale / 128.0 + 1e-2);
        if e.is_nan() || e > worst.0 {
            worst = (e, row, col, g, want);
        }
    }
    worst
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, np) = (pgas.my_pe(), pgas.n_pes());
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

    // Chunks that are not whole tiles of the kernel: the path is an Err, the plan stays usable.
    let mut odd = MatmulReduceScatter::with_splits(&pgas, (200 * np, 256, 256), Some(2))?;
    match odd.set_gemm(&pgas, GemmPath::PgasPerShard) {
        Err(e) if e.to_string().contains("are not a multiple of 128") => {}
        other => fail(format!(
            "chunks of 100 rows were not refused as expected: {other:?}"
        )),
    }

    // Every element against the host, three calls in a row on one plan.
    for (m, n, k, splits) in [(256 * np, 512, 512, 2), (384 * np, 256, 1024, 3)] {
        let (a, bt) = inputs(&pgas, (m, n, k))?;
        let mut op = MatmulReduceScatter::with_splits(&pgas, (m, n, k), Some(splits))?;
        op.set_gemm(&pgas, GemmPath::PgasPerShard)?;
        let rows = m / np;
        for call in 0..3 {
            let mut out = stream.alloc_zeros::<bf16>(rows * n)?;
            op.run(&pgas, pgas.stream(), &mut out, &a, &bt)?;
            let all = (0..rows).flat_map(|r| (0..n).map(move |c| (r, c)));
            let (e, row, col, g, want) = check(&pgas, &stream.clone_dtoh(&out)?, (m, n, k), all);
            if e.is_nan() || e > 1.0 {
                fail(format!(
                    "C[{row}][{col}] = {g} but the host says {want} ({m} x {n} x {k}, call {call})"
                ));
            }
        }
    }

    // Speed: 8192^3, K split over the PEs, spot-checked.
    let (m, n, k) = (8192, 8192, 8192 / np);
    let (a, bt) = inputs(&pgas, (m, n, k))?;
    let mut op = MatmulReduceScatter::new(&pgas, (m, n, k))?;
    op.set_gemm(&pgas, GemmPath::PgasPerShard)?;
    let mut out = stream.alloc_zeros::<bf16>(m / np * n)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut ms = Vec::new();
    for rep in 0..12 {
        pgas.barrier_all()?;
        let start = stream.record_event(flags)?;
        op.run(&pgas, pgas.stream(), &mut out, &a, &bt)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let points = (0..64).map(|i| ((i * 977 + 13) % (m / np), (i * 613 + 101) % n));
    let (e, row, col, g, want) = check(&pgas, &stream.clone_dtoh(&out)?, (m, n, k), points);
    if e.is_nan() || e > 1.0 {
        fail(format!(
            "C[{row}][{col}] = {g} but the host says {want} (8192^3)"
        ));
    }
    let tflops = 2.0 * (m * n * 8192) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}: pgas::gemm + reduce-scatter matches the host (2 shapes x 3 calls, every element; \
         8192^3 at 64 points); 8192^3 on {np} PE(s) in {median:.3} ms = {tflops:.1} TFLOP/s \
         (median of 10), ok"
    );
    Ok(())
}
