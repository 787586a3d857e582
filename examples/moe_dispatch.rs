//! MoE token dispatch, the all-to-all of a mixture-of-experts layer with data-dependent sizes. Each
//! PE holds tokens routed to experts that live on various PEs. One warp per token reserves a row
//! in the destination PE's receive buffer with a remote `atomic_fetch_add`, then the whole warp
//! puts the token there and records its id with a remote `p`. No PE needs to know in advance how
//! many tokens it will receive.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/moe_dispatch
//! ```

use pgas::prelude::*;

const WARPS_PER_BLOCK: u32 = 4;

#[pgas_kernel]
fn moe_dispatch(
    tokens: &CudaSlice<f32>,
    dest: &CudaSlice<i32>,
    recv: &mut SymTensor<f32>,
    recv_ids: &mut SymTensor<i32>,
    count: &mut SymTensor<i32>,
    dim: u32,
) {
    let slots = shared_array::<i32, 4>();
    let token = global_thread_idx() / 32;
    let w = warp_id() as usize;
    let d = dim as usize;
    if token < dest.len() {
        let pe = dest[token];
        if lane_id() == 0 {
            slots[w] = atomic_fetch_add(&mut count[0], 1, pe);
        }
        sync_warp();
        let row = slots[w] as usize;
        put_warp(
            &mut recv[row * d..(row + 1) * d],
            &tokens[token * d..(token + 1) * d],
            pe,
        );
        if lane_id() == 0 {
            p(
                &mut recv_ids[row],
                (my_pe() as usize * dest.len() + token) as i32,
                pe,
            );
        }
    }
}

const TOKENS_PER_PE: usize = 1000;
const DIM: usize = 256;

fn route(id: usize, n: usize) -> usize {
    (id.wrapping_mul(2654435761) >> 7) % n
}

fn value(id: usize, j: usize) -> f32 {
    (id * 131 + j) as f32
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let ids: Vec<usize> = (0..TOKENS_PER_PE).map(|t| me * TOKENS_PER_PE + t).collect();
    let tokens_host: Vec<f32> = ids
        .iter()
        .flat_map(|&id| (0..DIM).map(move |j| value(id, j)))
        .collect();
    let dest_host: Vec<i32> = ids.iter().map(|&id| route(id, n) as i32).collect();

    let stream = pgas.stream();
    let tokens = stream.clone_htod(&tokens_host)?;
    let dest = stream.clone_htod(&dest_host)?;
    // Worst case: every token of every PE comes here.
    let mut recv = pgas.alloc::<f32>(TOKENS_PER_PE * n * DIM)?;
    let mut recv_ids = pgas.alloc::<i32>(TOKENS_PER_PE * n)?;
    let mut count = pgas.alloc::<i32>(1)?;
    pgas.barrier_all()?;

    let threads = WARPS_PER_BLOCK * 32;
    let blocks = (TOKENS_PER_PE as u32).div_ceil(WARPS_PER_BLOCK);
    moe_dispatch::launch(
        &pgas,
        LaunchConfig::blocks(blocks, threads),
        &tokens,
        &dest,
        &mut recv,
        &mut recv_ids,
        &mut count,
        DIM as u32,
    )?;
    // The host barrier completes every PE's puts before anyone reads.
    pgas.barrier_all()?;

    let got = count.to_vec()?[0] as usize;
    let mut want: Vec<usize> = (0..TOKENS_PER_PE * n)
        .filter(|&id| route(id, n) == me)
        .collect();
    let rows = recv.to_vec()?;
    let mut got_ids: Vec<usize> = recv_ids.to_vec()?[..got.min(TOKENS_PER_PE * n)]
        .iter()
        .map(|&id| id as usize)
        .collect();
    for (row, &id) in got_ids.iter().enumerate() {
        if (0..DIM).any(|j| rows[row * DIM + j] != value(id, j)) {
            eprintln!("PE {me}: row {row} does not hold token {id}");
            std::process::exit(1);
        }
    }
    got_ids.sort_unstable();
    want.sort_unstable();
    if got_ids != want {
        eprintln!("PE {me}: received {got} tokens, expected {}", want.len());
        std::process::exit(1);
    }
    println!("PE {me}/{n}: received exactly the {got} tokens routed here, each intact, ok");
    Ok(())
}
