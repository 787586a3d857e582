//! Running the chosen bootstrap: NVSHMEM initialized through a unique id (alone, from the
//! launcher's rendezvous, or broadcast with MPI) or through NVSHMEM's own bootstrap.

use super::env;
use super::method::Bootstrap;
#[cfg(feature = "mpi")]
use super::mpi;
use super::{launcher, uid};
use crate::error::Result;
use crate::ffi;
use crate::nvshmem::Nvshmem;

/// What the bootstrap leaves behind that must outlive NVSHMEM (MPI must finalize after it).
pub(crate) struct Bootstrapped {
    /// The bootstrap that ran.
    pub(crate) method: Bootstrap,
    #[cfg(feature = "mpi")]
    pub(crate) _mpi: Option<::mpi::environment::Universe>,
}

/// Initializes NVSHMEM with a resolved (non-`Auto`) bootstrap. The GPU must already be current.
pub(crate) fn run(method: Bootstrap, nv: &Nvshmem) -> Result<Bootstrapped> {
    Ok(match method {
        Bootstrap::Auto => unreachable!("resolve() never returns Auto"),
        Bootstrap::Single => {
            uid::init(nv, 0, 1, |_| Ok(()))?;
            Bootstrapped::new(method)
        }
        Bootstrap::Launcher => {
            let peer = launcher::Peer::from_env(&env::process)?;
            uid::init(nv, peer.rank, peer.size, |id| peer.exchange(id))?;
            Bootstrapped::new(method)
        }
        Bootstrap::Mpi => mpi_init(nv)?,
        Bootstrap::Nvshmem => {
            let mut attr = ffi::init_attr();
            // SAFETY: `attr` carries the version words NVSHMEM checks (init_attr) and lives
            // across the call; pgas initializes NVSHMEM once per process (the init phase lock).
            let status = unsafe { nv.raw().nvshmemx_hostlib_init_attr(0, &mut attr) };
            Nvshmem::check(
                status,
                "nvshmemx_hostlib_init_attr (NVSHMEM_BOOTSTRAP)",
                "Check NVSHMEM_BOOTSTRAP and that the matching launcher (mpirun, srun) started this process; \
                 NVSHMEM_DEBUG=INFO shows NVSHMEM's own log",
            )?;
            Bootstrapped::new(method)
        }
    })
}

#[cfg(feature = "mpi")]
fn mpi_init(nv: &Nvshmem) -> Result<Bootstrapped> {
    Ok(Bootstrapped {
        method: Bootstrap::Mpi,
        _mpi: mpi::init(nv)?,
    })
}

#[cfg(not(feature = "mpi"))]
fn mpi_init(_nv: &Nvshmem) -> Result<Bootstrapped> {
    Err(crate::error::Error::MpiNotEnabled)
}

impl Bootstrapped {
    fn new(method: Bootstrap) -> Self {
        Bootstrapped {
            method,
            #[cfg(feature = "mpi")]
            _mpi: None,
        }
    }
}
