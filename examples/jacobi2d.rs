//! A 2-D Jacobi smoother with its halo exchange fused in ([`pgas::ops::jacobi`], whose header
//! explains the kernel): each PE owns a slab of rows of a periodic domain, and one persistent
//! kernel runs every iteration, the halo rows sent to the neighbouring PEs by the blocks that
//! compute them.
//!
//! Self-check: uneven slabs (48 and 64 rows alternating over the PEs) of 256 columns, 40
//! iterations split over fused launches, unfused iterations in between, and a fused run on a
//! single block, all equal to the host's smoother exactly.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/jacobi2d
//! ```

use pgas::ops::halo::Halo2d;
use pgas::ops::jacobi::{self, host_jacobi, initial, row_starts, Method, Sweep};

/// The self-check's slab height of PE `pe`: uneven, so that halo rows land at different
/// offsets on different PEs.
fn rows_of(pe: usize) -> usize {
    48 + 16 * (pe % 2)
}

const NX: usize = 256;

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let rows: Vec<usize> = (0..n).map(rows_of).collect();
    let starts = row_starts(&rows);
    let total: usize = rows.iter().sum();
    let whole: Vec<f32> = (0..total * NX).map(|i| initial(i / NX, i % NX)).collect();
    let mine = &whole[starts[me] * NX..(starts[me] + rows[me]) * NX];
    let stream = pgas.stream().clone();

    // 40 iterations: fused launches of 7 and 18, 5 unfused, fused 10; all blocks resident.
    let mut halo = Halo2d::new(&pgas, NX, rows[me])?;
    halo.write_interior(mine)?;
    let blocks = halo.resident_blocks();
    jacobi::run(&mut halo, &stream, Method::Fused, 7, blocks, true)?;
    jacobi::run(&mut halo, &stream, Method::Fused, 18, blocks, true)?;
    jacobi::run(
        &mut halo,
        &stream,
        Method::Unfused(Sweep::default()),
        5,
        blocks,
        true,
    )?;
    jacobi::run(&mut halo, &stream, Method::Fused, 10, blocks, true)?;
    let mixed = halo.read_interior()?;
    // 40 fused iterations on one block per PE (both edge rows in one block).
    let mut single = Halo2d::new(&pgas, NX, rows[me])?;
    single.write_interior(mine)?;
    jacobi::run(&mut single, &stream, Method::Fused, 40, 1, true)?;
    let one_block = single.read_interior()?;
    pgas.barrier_all()?;

    let want = host_jacobi(&whole, NX, 40);
    let want = &want[starts[me] * NX..(starts[me] + rows[me]) * NX];
    for (what, got) in [("mixed", &mixed), ("one-block", &one_block)] {
        if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
            eprintln!(
                "PE {me}: {what} run differs from the host at row {}, column {}: {} != {}",
                i / NX,
                i % NX,
                got[i],
                want[i]
            );
            std::process::exit(1);
        }
    }
    println!(
        "PE {me}/{n}: {} x {NX} rows, 40 Jacobi iterations with fused halo exchange \
         ({blocks} blocks and 1 block) match the host exactly, ok",
        rows[me]
    );
    Ok(())
}
