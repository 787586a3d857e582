//! The MPI bootstrap (feature `mpi`): rsmpi broadcasts rank 0's unique id.

use mpi::traits::{Communicator, Root};

use super::{uid_bytes, uid_from_bytes, uid_init, Bootstrap, Bootstrapped};
use crate::error::Result;
use crate::nvshmem::Nvshmem;

/// Initializes MPI (unless the program already did) and NVSHMEM over `MPI_COMM_WORLD`.
pub(crate) fn init(nv: &Nvshmem) -> Result<Bootstrapped> {
    // `initialize` is None when the program initialized MPI itself; then it also finalizes it.
    let universe = mpi::initialize();
    let world = mpi::topology::SimpleCommunicator::world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let mut done = uid_init(nv, rank, size, |id| {
        let mut bytes = uid_bytes(id);
        world.process_at_rank(0).broadcast_into(&mut bytes[..]);
        *id = uid_from_bytes(&bytes);
        Ok(())
    })?;
    done.method = Bootstrap::Mpi;
    done._mpi = universe;
    Ok(done)
}
