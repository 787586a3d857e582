//! Device-side collectives on a team: every PE contributes a vector, one block reduces it across
//! the world team (`reduce_block`), and PE 0's copy of a second vector is broadcast to all
//! (`broadcast_block`). Kernels that call device collectives must have all their blocks resident
//! at once; pgas sees that in the kernel and launches it cooperatively.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/team_allreduce
//! ```

use pgas::prelude::*;

#[pgas_kernel]
fn sum_and_broadcast(
    team: Team, sum: &mut SymTensor<f32>, contrib: &SymTensor<f32>, bcast: &mut SymTensor<i64>,
    root_data: &SymTensor<i64>,
) {
    reduce_block(team, sum, contrib, ReduceOp::Sum);
    broadcast_block(team, bcast, root_data, 0);
}

const LEN: usize = 4096;

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let contrib: Vec<f32> = (0..LEN).map(|i| (me * LEN + i) as f32).collect();
    let root_data: Vec<i64> = (0..LEN as i64).map(|i| i * 1000 + me as i64).collect();

    let mut sum = pgas.alloc::<f32>(LEN)?;
    let contrib = pgas.alloc_from(&contrib)?;
    let mut bcast = pgas.alloc::<i64>(LEN)?;
    let root_data = pgas.alloc_from(&root_data)?;
    pgas.barrier_all()?;
    sum_and_broadcast::launch(
        &pgas,
        LaunchConfig::blocks(1, 256),
        Team::WORLD,
        &mut sum,
        &contrib,
        &mut bcast,
        &root_data,
    )?;
    pgas.barrier_all()?;

    let got = sum.to_vec()?;
    for (i, &g) in got.iter().enumerate() {
        let want: f32 = (0..n).map(|pe| (pe * LEN + i) as f32).sum();
        if g != want {
            eprintln!("PE {me}: sum[{i}] = {g}, expected {want}");
            std::process::exit(1);
        }
    }
    let b = bcast.to_vec()?;
    if let Some(i) = (0..LEN).find(|&i| b[i] != i as i64 * 1000) {
        eprintln!(
            "PE {me}: bcast[{i}] = {}, expected {}",
            b[i],
            i as i64 * 1000
        );
        std::process::exit(1);
    }
    println!("PE {me}/{n}: device all-reduce of {LEN} floats and broadcast from PE 0 match, ok");
    Ok(())
}
