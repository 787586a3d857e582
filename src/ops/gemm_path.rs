//! Which GEMM a fused operation runs ([`GemmPath`]), and the choice every PE agrees on.

use crate::gemm::{self, GemmConfig, BM};
use crate::{Error, Pgas, Result};

/// Which GEMM [`super::AllGatherMatmul`] and [`super::matmul_reduce_scatter`] run
/// (`set_gemm`). A new plan starts on the path measured fastest for its rows a PE where that
/// path can run, on cuBLAS elsewhere (the table is in `docs/ops.md`); `gemm_path()` says which
/// it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPath {
    /// One cuBLAS call per shard or chunk (also runs off Hopper).
    Cublas,
    /// One `pgas::gemm` launch per shard or chunk (sm_90a).
    PgasPerShard,
    /// One persistent `pgas::gemm` kernel for all of C (sm_90a, more than one PE). In the
    /// all-gather + GEMM it starts on this PE's rows and takes each peer's rows as a word the
    /// copy stream writes says they landed; in the GEMM + reduce-scatter it raises a word as it
    /// finishes each chunk, which starts that chunk's copy.
    PgasOneKernel,
}

/// The fused operations that pick a [`GemmPath`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fused {
    AllGatherMatmul,
    MatmulReduceScatter,
}

/// The path measured fastest, by fused operation and rows a PE (M / P): the first row of an
/// operation whose bound is at least the plan's rows a PE. Measured on 4 and 2 GPUs at
/// N = K = 8192, M = 1024 to 16384, with cuBLAS + NCCL and every path in the same job
/// (`docs/ops.md` has the tables and how often each path led):
/// - all-gather + GEMM: the one kernel up to 512 rows a PE, cuBLAS per shard above (where
///   the two trade places from one job to the next);
/// - GEMM + reduce-scatter: per chunk up to 1024 rows a PE, the one kernel at 2048, cuBLAS
///   above.
const FASTEST: &[(Fused, usize, GemmPath)] = &[
    (Fused::AllGatherMatmul, 512, GemmPath::PgasOneKernel),
    (Fused::AllGatherMatmul, usize::MAX, GemmPath::Cublas),
    (Fused::MatmulReduceScatter, 1024, GemmPath::PgasPerShard),
    (Fused::MatmulReduceScatter, 2048, GemmPath::PgasOneKernel),
    (Fused::MatmulReduceScatter, usize::MAX, GemmPath::Cublas),
];

/// The path a new plan of `op` on `pes` PEs with `rows` rows a PE starts on ([`FASTEST`]);
/// cuBLAS on one PE, where there is no communication to overlap and cuBLAS's GEMM is as fast.
pub(crate) fn fastest(op: Fused, pes: usize, rows: usize) -> GemmPath {
    if pes < 2 {
        return GemmPath::Cublas;
    }
    FASTEST
        .iter()
        .find(|&&(o, bound, _)| o == op && rows <= bound)
        .map_or(GemmPath::Cublas, |&(_, _, path)| path)
}

/// Starts a new plan on [`fastest`]`(op, pes, rows)` through its `set_gemm`, collectively; where
/// that path cannot run (not sm_90a, not whole tiles, a peer off NVLink: the same
/// [`Error::Unavailable`] on every PE) the plan stays on cuBLAS. Any other error is returned.
pub(crate) fn start_on_fastest(
    (op, pes, rows): (Fused, usize, usize), set_gemm: impl FnOnce(GemmPath) -> Result<()>,
) -> Result<()> {
    let path = fastest(op, pes, rows);
    if path == GemmPath::Cublas {
        return Ok(());
    }
    match set_gemm(path) {
        Err(Error::Unavailable { .. }) => Ok(()),
        other => other,
    }
}

/// `prepared` (a pgas path's kernel compiled and its grid sized on this PE) checked on every
/// PE: where it failed on some PE only, every PE returns an `Err` naming them, so no PE
/// launches a path another cannot join. Collective.
pub(crate) fn agree_prepared<T>(pgas: &Pgas, what: &'static str, prepared: Result<T>) -> Result<T> {
    super::agree::agree(
        pgas,
        what,
        &[(
            "the pgas GEMM prepared on this PE (0: the PE's own error says why)",
            prepared.is_ok() as u64,
        )],
    )?;
    prepared
}

/// The `pgas::gemm` specialization for `path` (`None`: cuBLAS), agreed by every PE: `gemm`
/// GEMMs of `rows x n x k` each, with `unit` rows per PE's block of rows (a shard, a chunk),
/// which a cluster of tiles must not straddle. A path some PE cannot run (not sm_90, not whole
/// tiles, not offered by `what`) is the same `Err` on every PE, naming the reason.
pub(crate) fn agree_path(
    pgas: &Pgas, what: &'static str, path: GemmPath, offered: &[GemmPath],
    (rows, n, k): (usize, usize, usize), unit: usize,
) -> Result<Option<GemmConfig>> {
    let (major, _) = pgas.compute_capability()?;
    // Every K step in one unit: the fused paths store C's tiles themselves, chunk by chunk,
    // with no split-K workspace.
    let mut cfg = GemmConfig::whole_k(rows, n, pgas.sm_count()?);
    if !unit.is_multiple_of(BM * cfg.cluster as usize) {
        cfg.cluster = 1;
    }
    let fits = if path == GemmPath::Cublas {
        Ok(())
    } else if !offered.contains(&path) {
        Err(format!("{what} offers {offered:?}, not {path:?}"))
    } else if major != 9 {
        Err(format!("the GPU is sm_{major}x, the kernel sm_90a"))
    } else if !unit.is_multiple_of(BM) {
        Err(format!("{unit} rows a block are not a multiple of {BM}"))
    } else {
        gemm::check(cfg, (rows, n, k)).map_err(|e| e.to_string())
    };
    super::agree::agree(
        pgas,
        what,
        &[
            (
                "GemmPath (0 cuBLAS, 1 per shard, 2 one kernel)",
                path as u64,
            ),
            ("the path can run on this PE", fits.is_ok() as u64),
        ],
    )?;
    if let Err(why) = fits {
        return Err(Error::Unavailable {
            what,
            reason: format!("{why}. Fix: keep the cuBLAS path (GemmPath::Cublas)"),
        });
    }
    Ok((path != GemmPath::Cublas).then_some(cfg))
}

/// The refusal of a pgas path where a peer is off NVLink, the same on every PE (every PE agreed
/// on the peers' reach when the plan was made). `instead` says what a call does there.
pub(crate) fn off_nvlink(what: &'static str, instead: &str) -> Error {
    Error::Unavailable {
        what,
        reason: format!(
            "a peer is off NVLink, so {instead}; the pgas paths overlap copy-engine copies \
             between mapped buffers. Fix: keep GemmPath::Cublas, or run the PEs in one NVLink \
             domain"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{fastest, start_on_fastest, Fused, GemmPath};
    use crate::Error;

    #[test]
    fn each_shape_gets_the_path_measured_fastest() {
        use Fused::*;
        use GemmPath::*;
        for (op, pes, rows, want) in [
            (AllGatherMatmul, 4, 256, PgasOneKernel),
            (AllGatherMatmul, 2, 512, PgasOneKernel),
            (AllGatherMatmul, 2, 1024, Cublas),
            (AllGatherMatmul, 1, 256, Cublas),
            (MatmulReduceScatter, 4, 256, PgasPerShard),
            (MatmulReduceScatter, 2, 1024, PgasPerShard),
            (MatmulReduceScatter, 4, 1025, PgasOneKernel),
            (MatmulReduceScatter, 4, 2048, PgasOneKernel),
            (MatmulReduceScatter, 2, 4096, Cublas),
            (MatmulReduceScatter, 1, 256, Cublas),
        ] {
            assert_eq!(
                fastest(op, pes, rows),
                want,
                "{op:?} on {pes} PEs, {rows} rows"
            );
        }
    }

    #[test]
    fn a_path_that_cannot_run_leaves_cublas_and_other_errors_pass() {
        let shape = (Fused::AllGatherMatmul, 4, 256);
        let mut asked = None;
        start_on_fastest(shape, |p| {
            asked = Some(p);
            Ok(())
        })
        .unwrap();
        assert_eq!(asked, Some(GemmPath::PgasOneKernel));
        let unavailable = start_on_fastest(shape, |_| {
            Err(Error::Unavailable {
                what: "w",
                reason: "not sm_90a".into(),
            })
        });
        assert!(unavailable.is_ok(), "{unavailable:?}");
        let other = start_on_fastest(shape, |_| {
            Err(Error::InvalidConfig {
                name: "n",
                value: "v".into(),
                reason: "r".into(),
            })
        });
        assert!(matches!(other, Err(Error::InvalidConfig { .. })));
        let cublas = start_on_fastest((Fused::MatmulReduceScatter, 4, 8192), |_| {
            panic!("cuBLAS needs no set_gemm")
        });
        assert!(cublas.is_ok());
    }
}
