//! Running the chosen bootstrap: NVSHMEM initialized through a unique id (alone, from the
//! launcher's rendezvous, or broadcast with MPI) or through NVSHMEM's own bootstrap.

use super::env;
use super::method::Bootstrap;
#[cfg(feature = "mpi")]
use super::mpi;
use super::uid::UniqueIdArgs;
use super::{launcher, uid};
use crate::error::{Error, Result};
use crate::ffi;
use crate::nvshmem::Nvshmem;

/// What the bootstrap leaves behind that must outlive NVSHMEM (MPI must finalize after it).
pub(crate) struct Bootstrapped {
    /// The bootstrap that ran.
    pub(crate) method: Bootstrap,
    #[cfg(feature = "mpi")]
    pub(crate) _mpi: Option<::mpi::environment::Universe>,
}

/// Checks, before anything is loaded, that [`Bootstrap::UniqueId`] comes with its id, rank and
/// size (from [`crate::PgasBuilder::unique_id`]) and that the rank lies below the size; and
/// that no id is given for another bootstrap.
pub(crate) fn check_unique_id(method: Bootstrap, args: Option<&UniqueIdArgs>) -> Result<()> {
    let reason = match (method, args) {
        (Bootstrap::UniqueId, None) => "Bootstrap::UniqueId needs the id, this rank and the \
                                        number of ranks. Fix: call \
                                        builder().unique_id(id, rank, n_pes) instead of \
                                        bootstrap(Bootstrap::UniqueId)"
            .to_string(),
        (Bootstrap::UniqueId, Some(a)) if a.n_pes == 0 || a.rank >= a.n_pes => format!(
            "rank {} of {} PEs: the rank must lie in 0..n_pes. Fix: pass each process's own \
             rank, from 0 to n_pes - 1, and the same n_pes everywhere",
            a.rank, a.n_pes
        ),
        (Bootstrap::UniqueId, Some(_)) => return Ok(()),
        (_, Some(_)) => format!(
            "a unique id was given, but the bootstrap is {method}. Fix: call unique_id(..) \
             after bootstrap(..), or drop the bootstrap(..) call"
        ),
        (_, None) => return Ok(()),
    };
    Err(Error::Bootstrap {
        method: "unique id",
        reason,
    })
}

/// Initializes NVSHMEM with a resolved (non-`Auto`) bootstrap (with its unique id for
/// [`Bootstrap::UniqueId`], checked by [`check_unique_id`]). The GPU must already be current.
pub(crate) fn run(
    method: Bootstrap, nv: &Nvshmem, unique_id: Option<&UniqueIdArgs>,
) -> Result<Bootstrapped> {
    Ok(match method {
        Bootstrap::Auto => unreachable!("resolve() never returns Auto"),
        Bootstrap::UniqueId => {
            let a = unique_id.ok_or(Error::Bootstrap {
                method: "unique id",
                reason: "no unique id was given (see PgasBuilder::unique_id)".to_string(),
            })?;
            uid::init_with(nv, a.rank, a.n_pes, &a.id.to_raw())?;
            Bootstrapped::new(method)
        }
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
    Err(Error::MpiNotEnabled)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::UniqueId;

    #[test]
    fn a_unique_id_start_up_is_checked_before_anything_loads() {
        let id = UniqueId::from_bytes(&UniqueId::empty_bytes()).unwrap();
        let args = |rank, n_pes| UniqueIdArgs { id, rank, n_pes };
        check_unique_id(Bootstrap::UniqueId, Some(&args(1, 2))).unwrap();
        check_unique_id(Bootstrap::Launcher, None).unwrap();
        let e = check_unique_id(Bootstrap::UniqueId, Some(&args(2, 2)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 2 of 2 PEs") && e.contains("Fix:"), "{e}");
        let e = check_unique_id(Bootstrap::UniqueId, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unique_id(id, rank, n_pes)"), "{e}");
        let e = check_unique_id(Bootstrap::Mpi, Some(&args(0, 1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("after bootstrap(..)"), "{e}");
    }
}
