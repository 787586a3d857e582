//! Which GEMM a fused operation runs ([`GemmPath`]), and the choice every PE agrees on.

use cudarc::driver::sys as cu;

use crate::gemm::{self, GemmConfig, BM};
use crate::{Error, Pgas, Result};

/// Which GEMM [`super::AllGatherMatmul`] and [`super::matmul_reduce_scatter`] run
/// (`set_gemm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPath {
    /// One cuBLAS call per shard or chunk (the default).
    Cublas,
    /// One `pgas::gemm` launch per shard or chunk (sm_90a).
    PgasPerShard,
    /// One persistent `pgas::gemm` kernel for all of C (sm_90a, more than one PE). In the
    /// all-gather + GEMM it starts on this PE's rows and takes each peer's rows as a word the
    /// copy stream writes says they landed; in the GEMM + reduce-scatter it raises a word as it
    /// finishes each chunk, which starts that chunk's copy.
    PgasOneKernel,
}

/// The `pgas::gemm` specialization for `path` (`None`: cuBLAS), agreed by every PE: `gemm`
/// GEMMs of `rows x n x k` each, with `unit` rows per PE's block of rows (a shard, a chunk),
/// which a cluster of tiles must not straddle. A path some PE cannot run (not sm_90, not whole
/// tiles, not offered by `what`) is the same `Err` on every PE, naming the reason.
pub(crate) fn agree_path(
    pgas: &Pgas,
    what: &'static str,
    path: GemmPath,
    offered: &[GemmPath],
    (rows, n, k): (usize, usize, usize),
    unit: usize,
) -> Result<Option<GemmConfig>> {
    let major = pgas
        .cuda()
        .attribute(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        .map_err(Error::cuda("reading the compute capability"))?;
    let mut cfg = GemmConfig::for_shape(rows, n, pgas.sm_count()?);
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
