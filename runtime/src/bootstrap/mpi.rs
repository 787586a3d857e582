//! The MPI bootstrap (feature `mpi`): rsmpi broadcasts rank 0's unique id.

use mpi::traits::{Communicator, Root};

use super::uid::{self, UniqueId, UniqueIdArgs};
use crate::error::{Error, Result};
use crate::nvshmem::Nvshmem;

/// Initializes MPI (unless the program already did) and NVSHMEM over `MPI_COMM_WORLD`. Returns
/// MPI's universe, which must outlive NVSHMEM.
pub(crate) fn init(nv: &Nvshmem) -> Result<Option<mpi::environment::Universe>> {
    // `initialize` is None when the program initialized MPI itself; then it also finalizes it.
    let universe = mpi::initialize();
    let world = mpi::topology::SimpleCommunicator::world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    uid::init(nv, rank, size, |id| {
        let mut bytes = uid::to_bytes(id);
        world.process_at_rank(0).broadcast_into(&mut bytes[..]);
        *id = uid::from_bytes(&bytes);
        Ok(())
    })?;
    Ok(universe)
}

/// A start-up over an MPI communicator of the program's (a sub-communicator, say, from
/// `MPI_Comm_split`), not `MPI_COMM_WORLD`: rank 0 of `comm` makes a [`UniqueId`] and broadcasts
/// it over `comm`; returns the id with this process's rank and size in `comm`, for
/// `pgas::builder().unique_id(a.id, a.rank, a.n_pes).init()` on every rank of `comm`.
/// Collective over `comm`. The program initializes MPI itself (and finalizes it after the last
/// `Pgas` is gone); the NVSHMEM job is then exactly `comm`'s ranks, so another communicator can
/// start a job of its own in other processes.
pub fn unique_id_over<C: Communicator>(comm: &C) -> Result<UniqueIdArgs> {
    let (rank, n_pes) = (comm.rank() as usize, comm.size() as usize);
    let root = comm.process_at_rank(0);
    // Rank 0 says whether it made an id, so that a failure there is an Err on every rank
    // instead of the others waiting for bytes that never come.
    let made = if rank == 0 {
        Some(UniqueId::new())
    } else {
        None
    };
    let mut ok = u8::from(matches!(made, Some(Ok(_))));
    root.broadcast_into(&mut ok);
    let mut bytes = [0u8; UniqueId::LEN];
    match made {
        Some(Ok(id)) => bytes = *id.as_bytes(),
        Some(Err(e)) => return Err(e),
        None if ok == 0 => {
            return Err(Error::Bootstrap {
                method: "MPI communicator",
                reason: "rank 0 of the communicator could not make a unique id (its error says \
                         why). Fix: see rank 0's output"
                    .to_string(),
            })
        }
        None => {}
    }
    root.broadcast_into(&mut bytes[..]);
    Ok(UniqueIdArgs {
        id: UniqueId::from_bytes(&bytes)?,
        rank,
        n_pes,
    })
}
