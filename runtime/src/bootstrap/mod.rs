//! How the PEs find each other, and which GPU each one uses.
//!
//! [`Bootstrap::Auto`] (the default) picks, in order:
//! 1. `NVSHMEM_BOOTSTRAP` set (PMI, PMI2, PMIX, MPI, ...): NVSHMEM's own bootstrap;
//! 2. `PGAS_RANK` / `PGAS_RENDEZVOUS` set (by `pgas-run`): a unique id handed from rank 0 to the
//!    others through the launcher's loopback rendezvous;
//! 3. an MPI launcher's environment with more than one rank (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`,
//!    `SLURM_NTASKS` under `srun`, ...): the unique id broadcast with MPI (`mpi` feature);
//! 4. otherwise a single PE.

pub mod env;
mod launcher;
mod method;
#[cfg(feature = "mpi")]
mod mpi;
pub mod rendezvous;
mod run;
mod uid;

pub use method::{describe_auto, pick_device, resolve, Bootstrap};
#[cfg(feature = "mpi")]
pub use mpi::unique_id_over as mpi_unique_id;
pub(crate) use run::{check_unique_id, run, Bootstrapped};
pub use uid::{UniqueId, UniqueIdArgs};
