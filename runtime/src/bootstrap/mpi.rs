//! The MPI bootstrap (feature `mpi`): rsmpi broadcasts rank 0's unique id.

use mpi::traits::{Communicator, Root};

use super::uid;
use crate::error::Result;
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
