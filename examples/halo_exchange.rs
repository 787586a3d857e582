//! Halo exchange: a 1D Jacobi smoother on a periodic ring of cells split across the PEs. Each
//! iteration, every PE sends its edge cells to its neighbours with signalled puts and waits for
//! theirs before updating. The halo slots are double-buffered by iteration parity, so a neighbour
//! one iteration ahead never overwrites a halo still being read. The whole iteration loop runs in
//! one kernel launch. `jacobi2d.rs` is the production form: a 2-D stencil at sizes where the
//! exchange matters, on `pgas::ops::halo`.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/halo_exchange
//! ```

use pgas::prelude::*;

#[pgas_kernel]
fn jacobi_ring(
    u: &mut CudaSlice<f32>, scratch: &mut CudaSlice<f32>, halo: &mut SymTensor<f32>,
    sig: &mut SymTensor<u64>, iters: u32,
) {
    let len = u.len();
    let next = (my_pe() + 1) % n_pes();
    let prev = (my_pe() + n_pes() - 1) % n_pes();
    let tid = thread_idx_x() as usize;
    let step = block_dim_x() as usize;
    for it in 0..iters {
        // halo[2 * parity] holds the left neighbour's last cell, halo[2 * parity + 1] the right
        // neighbour's first cell; sig[0] and sig[1] count the iterations they arrived for.
        let slot = 2 * (it % 2) as usize;
        let arrived = (it + 1) as u64;
        if tid == 0 {
            put_signal(
                &mut halo[slot..slot + 1],
                &u[len - 1..len],
                &mut sig[0],
                arrived,
                SignalOp::Set,
                next,
            );
            put_signal(
                &mut halo[slot + 1..slot + 2],
                &u[0..1],
                &mut sig[1],
                arrived,
                SignalOp::Set,
                prev,
            );
            signal_wait_until(&sig[0], Cmp::Ge, arrived);
            signal_wait_until(&sig[1], Cmp::Ge, arrived);
        }
        sync_threads();
        for i in (tid..len).step_by(step) {
            let left = if i == 0 { halo[slot] } else { u[i - 1] };
            let right = if i == len - 1 {
                halo[slot + 1]
            } else {
                u[i + 1]
            };
            scratch[i] = 0.5 * u[i] + 0.25 * (left + right);
        }
        sync_threads();
        for i in (tid..len).step_by(step) {
            u[i] = scratch[i];
        }
        sync_threads();
    }
}

const CELLS_PER_PE: usize = 4096;
const ITERS: u32 = 200;

fn initial(cell: usize) -> f32 {
    ((cell * 37) % 101) as f32 / 101.0
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let total = CELLS_PER_PE * n;
    let mine: Vec<f32> = (0..CELLS_PER_PE)
        .map(|i| initial(me * CELLS_PER_PE + i))
        .collect();

    let stream = pgas.stream();
    let mut u = stream.clone_htod(&mine)?;
    let mut scratch = stream.alloc_zeros::<f32>(CELLS_PER_PE)?;
    let mut halo = pgas.alloc::<f32>(4)?;
    let mut sig = pgas.alloc::<u64>(2)?;
    pgas.barrier_all()?;
    jacobi_ring::launch(
        &pgas,
        LaunchConfig::blocks(1, 256),
        &mut u,
        &mut scratch,
        &mut halo,
        &mut sig,
        ITERS,
    )?;
    let got = stream.clone_dtoh(&u)?;
    pgas.barrier_all()?;

    // The same smoother on the whole ring, on the host, in the same f32 arithmetic.
    let mut ring: Vec<f32> = (0..total).map(initial).collect();
    for _ in 0..ITERS {
        ring = (0..total)
            .map(|i| {
                let (l, r) = (ring[(i + total - 1) % total], ring[(i + 1) % total]);
                0.5 * ring[i] + 0.25 * (l + r)
            })
            .collect();
    }
    let want = &ring[me * CELLS_PER_PE..(me + 1) * CELLS_PER_PE];
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    if worst > 1e-5 {
        eprintln!("PE {me}: differs from the host smoother by up to {worst}");
        std::process::exit(1);
    }
    println!("PE {me}/{n}: {ITERS} Jacobi iterations with halo exchange match the host, ok");
    Ok(())
}
