//! NVSHMEM started on MPI sub-communicators (`pgas::bootstrap::mpi_unique_id`): `MPI_COMM_WORLD`
//! is split into its even and its odd ranks, and each half starts an NVSHMEM job of its own from
//! a unique id broadcast over its communicator. Every PE then checks that its job is exactly its
//! half (its PE number and count are its rank and size in the communicator, and an fcollect over
//! the job gathers the world ranks of that half, in order) and exits non-zero otherwise.
//!
//! ```text
//! cargo build --release --features mpi --example mpi_subcomm
//! mpirun -np 2 --bind-to none target/release/examples/mpi_subcomm   # two one-PE jobs
//! mpirun -np 4 --bind-to none target/release/examples/mpi_subcomm   # two two-PE jobs
//! ```
//!
//! Each rank takes the GPU of its local rank (`OMPI_COMM_WORLD_LOCAL_RANK`), so ranks of both
//! jobs never share one; run at most as many ranks per node as GPUs.

use pgas::mpi::topology::Color;
use pgas::mpi::traits::Communicator;
use pgas::prelude::*;

fn main() -> pgas::Result<()> {
    // The program owns MPI: it initializes it, and finalizes it when `universe` drops, after the
    // last pgas handle.
    let universe = pgas::mpi::initialize().expect("MPI was not initialized before");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let half = rank % 2;
    let comm = world
        .split_by_color(Color::with_value(half as i32))
        .expect("every rank has a color");
    let args = pgas::bootstrap::mpi_unique_id(&comm)?;
    let pgas = pgas::builder()
        .unique_id(args.id, args.rank, args.n_pes)
        .init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let mine: Vec<u64> = (half..size).step_by(2).map(|r| r as u64).collect();
    let src = pgas.alloc_from(&[rank as u64])?;
    let dst = pgas.alloc::<u64>(n)?;
    pgas.fcollect(Team::WORLD, &dst, &src)?;
    pgas.barrier_all()?;
    let got = dst.to_vec()?;
    let ok = me == comm.rank() as usize
        && n == comm.size() as usize
        && got == mine
        && pgas.bootstrap() == Bootstrap::UniqueId;
    println!(
        "world rank {rank}: PE {me}/{n} of the {} job, world ranks {got:?} (expected PE {} of {} \
         and {mine:?}): {}",
        if half == 0 { "even" } else { "odd" },
        comm.rank(),
        comm.size(),
        if ok { "ok" } else { "WRONG" }
    );
    drop((src, dst, pgas));
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
