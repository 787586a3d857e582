//! How the PEs find each other, and which GPU each one uses.
//!
//! [`Bootstrap::Auto`] (the default) picks, in order:
//! 1. `NVSHMEM_BOOTSTRAP` set (PMI, PMI2, PMIX, MPI, ...): NVSHMEM's own bootstrap;
//! 2. `PGAS_RANK` / `PGAS_RENDEZVOUS` set (by `pgas-run`): a unique id handed from rank 0 to the
//!    others through the launcher's loopback rendezvous;
//! 3. an MPI launcher's environment with more than one rank (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`,
//!    `SLURM_NTASKS` under `srun`, ...): the unique id broadcast with MPI (`mpi` feature);
//! 4. otherwise a single PE.

use std::fmt;

use crate::error::{Error, Result};
use crate::ffi;
use crate::nvshmem::Nvshmem;

pub mod env;
mod launcher;
#[cfg(feature = "mpi")]
mod mpi;
pub mod rendezvous;
mod uid;

#[cfg(feature = "mpi")]
pub use mpi::unique_id_over as mpi_unique_id;
pub use uid::{UniqueId, UniqueIdArgs};

/// Which bootstrap `init` uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bootstrap {
    /// Decide from the environment (see the module documentation).
    #[default]
    Auto,
    /// One PE, no launcher.
    Single,
    /// Under `pgas-run`: unique id through the launcher's rendezvous.
    Launcher,
    /// Under `mpirun` / `srun`: unique id broadcast with MPI (needs the `mpi` feature).
    Mpi,
    /// NVSHMEM's own bootstrap, configured by `NVSHMEM_BOOTSTRAP`.
    Nvshmem,
    /// A unique id that the program made and handed to every rank itself
    /// ([`UniqueId`], set with [`crate::PgasBuilder::unique_id`]).
    UniqueId,
}

impl fmt::Display for Bootstrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bootstrap::Auto => "auto",
            Bootstrap::Single => "single PE (no launcher)",
            Bootstrap::Launcher => "pgas-run (unique id over loopback rendezvous)",
            Bootstrap::Mpi => "MPI (unique id broadcast with rsmpi)",
            Bootstrap::Nvshmem => "NVSHMEM's own (NVSHMEM_BOOTSTRAP)",
            Bootstrap::UniqueId => "unique id handed around by the program",
        })
    }
}

/// Resolves [`Bootstrap::Auto`] against an environment (`get` returns a variable's value).
/// A concrete choice is returned as is.
pub fn resolve(requested: Bootstrap, get: &dyn Fn(&str) -> Option<String>) -> Result<Bootstrap> {
    if requested != Bootstrap::Auto {
        return Ok(requested);
    }
    if get(env::NVSHMEM_BOOTSTRAP).is_some() {
        return Ok(Bootstrap::Nvshmem);
    }
    if get(env::RANK).is_some() || get(env::RENDEZVOUS).is_some() {
        return Ok(Bootstrap::Launcher);
    }
    match env::mpi_world_size(get) {
        Some(n) if n > 1 && cfg!(feature = "mpi") => Ok(Bootstrap::Mpi),
        // Starting each MPI rank as its own one-PE job would silently compute the wrong thing.
        Some(n) if n > 1 => Err(Error::MpiNotEnabled),
        _ => Ok(Bootstrap::Single),
    }
}

/// What `init()` would do in the current process environment, in words (for `pgas doctor`).
pub fn describe_auto() -> String {
    match resolve(Bootstrap::Auto, &env::process) {
        Ok(b) => b.to_string(),
        Err(e) => format!("none: {e}"),
    }
}

/// Picks the GPU of this process, before NVSHMEM init: an explicit ordinal, else `PGAS_DEVICE`
/// (set by `pgas-run`), else the local rank from the launcher's environment, else 0.
pub fn pick_device(
    explicit: Option<usize>,
    get: &dyn Fn(&str) -> Option<String>,
    count: usize,
) -> Result<usize> {
    let (ordinal, why) = match explicit {
        Some(d) => (d, "PgasBuilder::device".to_string()),
        None => match env::parse_usize(get, env::DEVICE)? {
            Some(d) => (d, format!("{}={d}", env::DEVICE)),
            None => match env::local_rank(get)? {
                Some((var, r)) => (r, format!("local rank {var}={r}")),
                None => (0, "default".to_string()),
            },
        },
    };
    if ordinal >= count {
        return Err(Error::NoSuchDevice {
            requested: ordinal,
            why,
            count,
        });
    }
    Ok(ordinal)
}

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
    method: Bootstrap,
    nv: &Nvshmem,
    unique_id: Option<&UniqueIdArgs>,
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

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn auto_picks_in_the_documented_order() {
        let r = |p: &'static [(&'static str, &'static str)]| resolve(Bootstrap::Auto, &env_of(p));
        assert_eq!(r(&[]).unwrap(), Bootstrap::Single);
        assert_eq!(
            r(&[("NVSHMEM_BOOTSTRAP", "PMI"), ("PGAS_RANK", "0")]).unwrap(),
            Bootstrap::Nvshmem
        );
        assert_eq!(
            r(&[("PGAS_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]).unwrap(),
            Bootstrap::Launcher
        );
        assert_eq!(
            r(&[("OMPI_COMM_WORLD_SIZE", "1")]).unwrap(),
            Bootstrap::Single
        );
        let mpi = r(&[("OMPI_COMM_WORLD_SIZE", "2")]);
        if cfg!(feature = "mpi") {
            assert_eq!(mpi.unwrap(), Bootstrap::Mpi);
        } else {
            assert!(matches!(mpi, Err(Error::MpiNotEnabled)));
        }
        assert_eq!(
            resolve(Bootstrap::Single, &env_of(&[("PGAS_RANK", "1")])).unwrap(),
            Bootstrap::Single
        );
    }

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

    #[test]
    fn device_comes_from_builder_then_pgas_device_then_local_rank() {
        assert_eq!(
            pick_device(Some(1), &env_of(&[("PGAS_DEVICE", "0")]), 2).unwrap(),
            1
        );
        assert_eq!(
            pick_device(
                None,
                &env_of(&[("PGAS_DEVICE", "1"), ("PGAS_LOCAL_RANK", "0")]),
                2
            )
            .unwrap(),
            1
        );
        assert_eq!(
            pick_device(None, &env_of(&[("SLURM_LOCALID", "1")]), 2).unwrap(),
            1
        );
        assert_eq!(pick_device(None, &env_of(&[]), 1).unwrap(), 0);
        let e = pick_device(None, &env_of(&[("OMPI_COMM_WORLD_LOCAL_RANK", "2")]), 2)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GPU 2")
                && e.contains("OMPI_COMM_WORLD_LOCAL_RANK=2")
                && e.contains("2 GPU"),
            "{e}"
        );
        let e = pick_device(None, &env_of(&[("PGAS_DEVICE", "x")]), 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("PGAS_DEVICE"), "{e}");
    }
}
