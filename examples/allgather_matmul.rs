//! All-gather fused with a matmul. `A` (M x K) is split by rows across the PEs; every PE holds all
//! of `B` (K x N) and computes all of `C = A B`. Instead of an all-gather followed by a matmul, each
//! block fetches the rows it needs from the PE that owns them (`get_block`) into a local staging
//! buffer and multiplies them at once, so communication for one block overlaps the arithmetic of
//! the others. This is the small introduction (scalar, 256 x 96 x 64); the production-size form
//! on tensor cores is `examples/allgather_gemm_sm90.rs`, and the library one
//! `pgas::ops::AllGatherMatmul`.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/allgather_matmul
//! ```

use pgas::prelude::*;

/// Rows of `A` each block handles; a comptime parameter, so each value is its own specialization.
#[pgas_kernel]
fn allgather_matmul(
    c: &mut CudaSlice<f32>, a_stage: &mut CudaSlice<f32>, a_shard: &SymTensor<f32>,
    b: &CudaSlice<f32>, rows_per_pe: u32, k: u32, n: u32, #[comptime] rows_per_block: u32,
) {
    let first = block_idx_x() * rows_per_block;
    let owner = (first / rows_per_pe) as i32;
    let local_first = (first % rows_per_pe) as usize;
    let kk = k as usize;
    let nn = n as usize;
    let rows = rows_per_block as usize;
    // Stage this block's rows of A, from whichever PE owns them.
    let stage_at = first as usize * kk;
    get_block(
        &mut a_stage[stage_at..stage_at + rows * kk],
        &a_shard[local_first * kk..(local_first + rows) * kk],
        owner,
    );
    sync_threads();
    let mut idx = thread_idx_x() as usize;
    while idx < rows * nn {
        let r = idx / nn;
        let j = idx % nn;
        let mut acc = 0.0f32;
        for x in 0..kk {
            acc = a_stage[stage_at + r * kk + x].mul_add(b[x * nn + j], acc);
        }
        c[(first as usize + r) * nn + j] = acc;
        idx += block_dim_x() as usize;
    }
}

const ROWS_PER_PE: usize = 128;
const K: usize = 96;
const N: usize = 64;
const ROWS_PER_BLOCK: u32 = 8;

fn a_value(row: usize, col: usize) -> f32 {
    ((row * 7 + col * 3) % 17) as f32 * 0.25 - 2.0
}

fn b_value(row: usize, col: usize) -> f32 {
    ((row * 5 + col * 11) % 13) as f32 * 0.5 - 3.0
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, npes) = (pgas.my_pe(), pgas.n_pes());
    let m = ROWS_PER_PE * npes;

    let shard: Vec<f32> = (0..ROWS_PER_PE * K)
        .map(|i| a_value(me * ROWS_PER_PE + i / K, i % K))
        .collect();
    let a_shard = pgas.alloc_from(&shard)?;
    let b_host: Vec<f32> = (0..K * N).map(|i| b_value(i / N, i % N)).collect();
    let stream = pgas.stream();
    let b = stream.clone_htod(&b_host)?;
    let mut a_stage = stream.alloc_zeros::<f32>(m * K)?;
    let mut c = stream.alloc_zeros::<f32>(m * N)?;
    pgas.barrier_all()?;

    let blocks = (m / ROWS_PER_BLOCK as usize) as u32;
    allgather_matmul::launch(
        &pgas,
        LaunchConfig::blocks(blocks, 256),
        &mut c,
        &mut a_stage,
        &a_shard,
        &b,
        ROWS_PER_PE as u32,
        K as u32,
        N as u32,
        ROWS_PER_BLOCK,
    )?;
    let got = stream.clone_dtoh(&c)?;
    pgas.barrier_all()?;

    let mut worst = 0.0f32;
    for row in 0..m {
        for col in 0..N {
            let want: f32 = (0..K).map(|x| a_value(row, x) * b_value(x, col)).sum();
            worst = worst.max((got[row * N + col] - want).abs());
        }
    }
    if worst > 1e-3 {
        eprintln!("PE {me}: C differs from the host product by up to {worst}");
        std::process::exit(1);
    }
    println!("PE {me}/{npes}: C ({m} x {N}) = all-gathered A ({m} x {K}) x B matches the host, ok");
    Ok(())
}
