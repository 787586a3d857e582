//! Which bootstrap a process uses ([`Bootstrap`], chosen from the environment by [`resolve`])
//! and which GPU it takes ([`pick_device`]).

use std::fmt;

use super::env;
use crate::error::{Error, Result};

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
    /// ([`super::UniqueId`], set with [`crate::PgasBuilder::unique_id`]).
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
    explicit: Option<usize>, get: &dyn Fn(&str) -> Option<String>, count: usize,
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
