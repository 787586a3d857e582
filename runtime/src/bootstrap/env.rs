//! Environment variables pgas reads, and the launchers' variables it understands.

use crate::error::{Error, Result};

/// This process's rank (set by `pgas-run`).
pub const RANK: &str = "PGAS_RANK";
/// Number of ranks (set by `pgas-run`).
pub const WORLD_SIZE: &str = "PGAS_WORLD_SIZE";
/// Rank on this node (set by `pgas-run`).
pub const LOCAL_RANK: &str = "PGAS_LOCAL_RANK";
/// Ranks on this node (set by `pgas-run`).
pub const LOCAL_WORLD_SIZE: &str = "PGAS_LOCAL_WORLD_SIZE";
/// GPU ordinal of this process (set by `pgas-run`, honoured everywhere).
pub const DEVICE: &str = "PGAS_DEVICE";
/// `127.0.0.1:PORT` of `pgas-run`'s rendezvous.
pub const RENDEZVOUS: &str = "PGAS_RENDEZVOUS";
/// Job token that the rendezvous checks, so a stray process cannot join another job.
pub const RUN_ID: &str = "PGAS_RUN_ID";
/// Seconds a rank waits for rank 0's unique id (default 120).
pub const RENDEZVOUS_TIMEOUT: &str = "PGAS_RENDEZVOUS_TIMEOUT";
/// NVSHMEM's own bootstrap selector.
pub const NVSHMEM_BOOTSTRAP: &str = "NVSHMEM_BOOTSTRAP";

/// Local-rank variables of MPI and Slurm launchers, in the order they are tried.
pub const LOCAL_RANK_VARS: &[&str] = &[
    LOCAL_RANK,
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "PMI_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
];

/// World-size variables of MPI launchers (and Slurm's `srun`, which sets `SLURM_PROCID`).
const MPI_SIZE_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "PMIX_SIZE",
];

/// Reads the real process environment (empty values count as unset).
pub fn process(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Parses a non-negative integer variable; unset is `None`, garbage is an error.
pub fn parse_usize(
    get: &dyn Fn(&str) -> Option<String>, name: &'static str,
) -> Result<Option<usize>> {
    get(name)
        .map(|v| {
            v.trim().parse().map_err(|_| Error::InvalidConfig {
                name,
                value: v.clone(),
                reason: "expected a non-negative integer. Fix: set it to a number such as 0, or \
                         unset it"
                    .to_string(),
            })
        })
        .transpose()
}

/// The first local-rank variable that is set, with its name.
pub fn local_rank(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<(&'static str, usize)>> {
    for var in LOCAL_RANK_VARS {
        if let Some(r) = parse_usize(get, var)? {
            return Ok(Some((var, r)));
        }
    }
    Ok(None)
}

/// The world size an MPI or Slurm launcher announces, if any.
pub fn mpi_world_size(get: &dyn Fn(&str) -> Option<String>) -> Option<usize> {
    let from = |v: &str| get(v).and_then(|s| s.trim().parse().ok());
    MPI_SIZE_VARS
        .iter()
        .find_map(|v| from(v))
        // SLURM_NTASKS is also set in a batch script outside srun; SLURM_PROCID only under srun.
        .or_else(|| get("SLURM_PROCID").and_then(|_| from("SLURM_NTASKS")))
}
