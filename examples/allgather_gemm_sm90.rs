//! All-gather fused with a bf16 GEMM on Hopper, the column-parallel linear layer of tensor
//! parallelism (PyTorch async-TP's `fused_all_gather_matmul`): every PE holds a row shard `A_p`
//! (M/P x K) and `Bt` (N x K), and computes all of `C = allgather_rows(A) · Btᵀ` (M x N), bf16,
//! f32 accumulate. `pgas::ops::AllGatherMatmul` with `GemmPath::PgasOneKernel`: the copy engine
//! pushes each shard to the peers in pieces of K while one persistent `pgas::gemm` kernel
//! (src/gemm/kernel.rs) starts on the local rows and takes each peer's rows piece by piece as
//! they land (docs/ops.md, docs/gemm.md).
//!
//! Checked at small shapes against the host at every element over three calls (the epochs),
//! with whole shards and in 4 pieces, then timed at 8192^3 split over the PEs (the default
//! pieces) and spot-checked.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/allgather_gemm_sm90
//! ```
//!
//! `benches/ag_gemm.rs` times it against cuBLAS + NCCL and the cuBLAS path.

use pgas::cudarc::driver::sys::CUevent_flags;
use pgas::gemm::reference::{gathered_check, gathered_inputs};
use pgas::ops::{AllGatherMatmul, GemmPath};
use pgas::prelude::*;

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
    // The one kernel is unavailable where PEs cannot map each other's memory, and where more
    // than 2 PEs share a GPU (a known fault, docs/faults.md): the error says which.
    let mut probe = AllGatherMatmul::new(&pgas, (256, 512, 1024))?;
    if let Err(e @ pgas::Error::Unavailable { .. }) = probe.set_gemm(GemmPath::PgasOneKernel) {
        println!("PE {me}: skipped: {e}, ok");
        return Ok(());
    }
    drop(probe);
    let fail = |what: String| -> ! {
        eprintln!("PE {me}: {what}");
        std::process::exit(1)
    };

    // A shard that is not whole tiles of the kernel: the path is an Err, the plan stays usable.
    let mut odd = AllGatherMatmul::new(&pgas, (100, 256, 256))?;
    match odd.set_gemm(GemmPath::PgasOneKernel) {
        Err(e)
            if e.to_string()
                .contains("100 rows a block are not a multiple of 128") => {}
        other => fail(format!(
            "a shard of 100 rows was not refused as expected: {other:?}"
        )),
    }

    // Every element against the host, three calls in a row on one plan, for whole shards and
    // for shards pushed in 4 pieces of K.
    for ((mp, n, k), pieces) in [(256, 512, 1024), (384, 256, 512)]
        .into_iter()
        .flat_map(|shape| [(shape, 1), (shape, 4)])
    {
        let (shard, bt) = gathered_inputs(&pgas, (mp, n, k))?;
        let mut op = AllGatherMatmul::new(&pgas, (mp, n, k))?;
        op.set_gemm(GemmPath::PgasOneKernel)?;
        op.set_pieces(pieces)?;
        let m = mp * np;
        for call in 0..3 {
            let mut c = stream.alloc_zeros::<bf16>(m * n)?;
            op.run(&mut c, &shard, &bt)?;
            let all = (0..m).flat_map(|r| (0..n).map(move |col| (r, col)));
            let (ratio, row, col, g, want) = gathered_check(&stream.clone_dtoh(&c)?, (n, k), all);
            if ratio.is_nan() || ratio > 1.0 {
                fail(format!(
                    "C[{row}][{col}] = {g} but the host says {want} ({m} x {n} x {k}, \
                     {pieces} pieces, call {call})"
                ));
            }
        }
    }

    // Speed: 8192^3, a shard of 8192 / P rows, spot-checked.
    let (m, n, k) = (8192, 8192, 8192);
    let mp = m / np;
    let (shard, bt) = gathered_inputs(&pgas, (mp, n, k))?;
    let mut op = AllGatherMatmul::new(&pgas, (mp, n, k))?;
    op.set_gemm(GemmPath::PgasOneKernel)?;
    let pieces = op.pieces().unwrap_or(1);
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut ms = Vec::new();
    for rep in 0..12 {
        pgas.barrier_all()?;
        let start = stream.record_event(flags)?;
        op.run(&mut c, &shard, &bt)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let points = (0..256).map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n));
    let (ratio, row, col, g, want) = gathered_check(&stream.clone_dtoh(&c)?, (n, k), points);
    if ratio.is_nan() || ratio > 1.0 {
        fail(format!(
            "C[{row}][{col}] = {g} but the host says {want} (8192^3, plain)"
        ));
    }
    let tflops = 2.0 * (m * n * k) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}: all-gather + pgas::gemm matches the host (2 shapes x 2 piece counts x 3 calls, \
         every element; 8192^3 at 256 points); 8192^3 on {np} PE(s) in {pieces} pieces in \
         {median:.3} ms = {tflops:.1} TFLOP/s per GPU-set (median of 10), ok"
    );
    Ok(())
}
