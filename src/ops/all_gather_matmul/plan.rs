//! The plan: [`AllGatherMatmul`]'s buffers, streams and events, made collectively (`new`), the
//! GEMM it runs (`set_gemm`), and the one-call form.

use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;

use crate::gemm::{self, GemmConfig};
use crate::ops::cublas::Cublas;
use crate::ops::gemm_path::{agree_path, GemmPath};
use crate::ops::peers::addresses;
use crate::{Error, Pgas, Result, SymTensor};

/// A plan for `C = allgather_rows(A) · Btᵀ` at one shape: the symmetric gathered buffers, the
/// signal words, a copy stream a peer and a cuBLAS handle (see the module documentation).
/// Collective: every PE creates it with the same shape and calls [`AllGatherMatmul::run`] the
/// same number of times.
pub struct AllGatherMatmul {
    pub(super) pgas: Pgas,
    pub(super) mp: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    /// Double-buffered by call parity.
    pub(super) gathered: [SymTensor<bf16>; 2],
    /// Each buffer's address on every PE (NVLink-mapped), by buffer then PE.
    pub(super) peer_ptrs: [Vec<CUdeviceptr>; 2],
    /// Word `q` on PE `p`: the last call whose block PE `q` has put in place for PE `p`.
    pub(super) flags: SymTensor<u64>,
    /// This PE's word (`me`) on every PE, by PE.
    pub(super) flag_ptrs: Vec<CUdeviceptr>,
    pub(super) epoch: u64,
    /// One copy stream a peer, by distance from `me` (`copies[j - 1]` serves PEs `me ± j`), so
    /// the peers' shards travel at once, on several copy engines.
    pub(super) copies: Vec<Arc<CudaStream>>,
    /// Recorded on the pgas stream at the start of a call: the copy streams start there.
    pub(super) start: CudaEvent,
    /// Recorded on `copies[j - 1]` after the block of PE `me + j` landed.
    pub(super) landed: Vec<CudaEvent>,
    pub(super) blas: Cublas,
    /// The GEMM as one pgas kernel (`pgas::gemm`, gathering) instead of cuBLAS per shard.
    pub(super) fused: Option<Fused>,
    /// Where a peer is off NVLink: the shard's symmetric copy, which NVSHMEM's `fcollect`
    /// gathers (its proxy carries what no mapping reaches) before one cuBLAS GEMM.
    pub(super) off_node: Option<SymTensor<bf16>>,
}

/// What the pgas paths add: the specialization and, for one kernel, the words the copy streams
/// sets as each peer's rows land (word `q`: the last call whose rows of PE `q` are in place).
pub(super) struct Fused {
    pub(super) one_kernel: bool,
    pub(super) cfg: GemmConfig,
    /// From `cuMemAlloc`, not a stream-ordered pool: `cuStreamWriteValue64` into the pool's
    /// memory failed with `CUDA_ERROR_INVALID_VALUE` on 2 x H100 (the attempt before run 26 of
    /// docs/gpu-report.md; the pool is the likely cause, not isolated); freed in `drop` the same
    /// way.
    pub(super) words: Option<CudaSlice<u64>>,
    /// `words`' address, for the copy streams' stream memory operations. Not through
    /// `CudaSlice::device_ptr`: its event tracking would make the kernel's launch wait for the
    /// copy streams' last use, that is for every peer's rows (200 us at 8192^3 on 2 x H100,
    /// run 41 of docs/gpu-report.md).
    pub(super) words_ptr: CUdeviceptr,
}

impl Drop for Fused {
    fn drop(&mut self) {
        if let Some(words) = self.words.take() {
            // SAFETY: allocated by cuMemAlloc in `use_pgas_gemm`; the plan's calls are over
            // when the plan drops (their work is on the pgas stream, which a free syncs with).
            unsafe {
                let _ = cudarc::driver::result::free_sync(words.leak());
            }
        }
    }
}

impl std::fmt::Debug for AllGatherMatmul {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllGatherMatmul")
            .field("shard_rows", &self.mp)
            .field("n", &self.n)
            .field("k", &self.k)
            .field("calls", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// Why a shard of `mp` rows with `n` and `k` cannot run, if it cannot.
pub fn shape_error((mp, n, k): (usize, usize, usize), n_pes: usize) -> Option<String> {
    let bad: Vec<String> = [("shard rows (M / P)", mp), ("N", n), ("K", k)]
        .iter()
        .filter(|(_, v)| *v == 0)
        .map(|(name, _)| format!("{name} is 0"))
        .chain(
            [("M", mp * n_pes), ("N", n), ("K", k)]
                .iter()
                .filter(|(_, v)| *v >= 1 << 31)
                .map(|(name, v)| format!("{name} = {v} is not below 2^31 (cuBLAS's int)")),
        )
        .collect();
    (!bad.is_empty()).then(|| bad.join(", "))
}

impl AllGatherMatmul {
    /// A plan for shards of `mp` rows (M = `mp` x the number of PEs), `n` and `k`. Collective
    /// over all PEs: they first compare their shapes (`super::agree`), so a mismatch or a zero
    /// dimension is the same `Err` on every PE and nothing launches. Where a PE cannot reach
    /// another by NVLink (or `PGAS_PEER_ACCESS` says so), calls gather with NVSHMEM's
    /// `fcollect` and then run one cuBLAS GEMM, without overlap. It allocates 2 x M x K bf16 of
    /// symmetric heap (too small a heap is
    /// [`Error::HeapExhausted`] on every PE) and loads cuBLAS ([`Error::Unavailable`] without
    /// it, or without 64-bit stream memory operations on some PE's GPU, on every PE).
    pub fn new(pgas: &Pgas, (mp, n, k): (usize, usize, usize)) -> Result<AllGatherMatmul> {
        let np = pgas.n_pes();
        // cuBLAS first: a PE without it fails here alone, before any collective step, so the
        // agreement below carries the outcome to every PE.
        let blas = Cublas::new(pgas.cuda());
        crate::ops::agree::agree(
            pgas,
            "all_gather_matmul shapes",
            &[
                ("shard rows (M / P)", mp as u64),
                ("N", n as u64),
                ("K", k as u64),
                ("cuBLAS loaded", blas.is_ok() as u64),
            ],
        )?;
        let blas = blas?;
        crate::ops::stream_sync::require_stream_mem_ops(pgas, "all_gather_matmul")?;
        if let Some(why) = shape_error((mp, n, k), np) {
            return Err(Error::InvalidConfig {
                name: "all_gather_matmul shape",
                value: format!("{mp} x {n} x {k} (shard rows x N x K) on {np} PEs"),
                reason: format!("{why}. Fix: pass positive dimensions"),
            });
        }
        let m = mp * np;
        let gathered = [pgas.alloc::<bf16>(m * k)?, pgas.alloc::<bf16>(m * k)?];
        let flags = pgas.alloc::<u64>(np)?;
        let reach = pgas.first_unreachable(&flags, 0..np)?.is_none() as u64;
        let peer_ptrs = [addresses(&gathered[0], np)?, addresses(&gathered[1], np)?];
        let mut flag_ptrs = addresses(&flags, np)?;
        // This PE's word on each PE.
        for p in &mut flag_ptrs {
            *p += 8 * pgas.my_pe() as u64;
        }
        crate::ops::agree::agree(
            pgas,
            "all_gather_matmul peer access",
            &[("every peer NVLink/P2P-mapped", reach)],
        )?;
        // Every PE agreed on `reach`, so all allocate (a collective step) or none.
        let off_node = if reach == 0 {
            Some(pgas.alloc::<bf16>(mp * k)?)
        } else {
            None
        };
        let ctx = pgas.cuda();
        let copies = (1..np)
            .map(|_| {
                ctx.new_stream()
                    .map_err(Error::cuda("creating the all-gather's copy streams"))
            })
            .collect::<Result<Vec<_>>>()?;
        let event = || {
            ctx.new_event(Some(cu::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(Error::cuda("creating the all-gather's events"))
        };
        let start = event()?;
        let landed = (1..np).map(|_| event()).collect::<Result<Vec<_>>>()?;
        Ok(AllGatherMatmul {
            pgas: pgas.clone(),
            mp,
            n,
            k,
            gathered,
            peer_ptrs,
            flags,
            flag_ptrs,
            epoch: 0,
            copies,
            start,
            landed,
            blas,
            fused: None,
            off_node,
        })
    }

    /// Picks the GEMM of later calls ([`GemmPath`]). Collective: the PEs first agree on the
    /// path (`ops::agree`), so a PE that asks for another, or one where the path cannot run, is
    /// the same `Err` on every PE. A pgas path cannot run where the GPU is not sm_90 or the
    /// shape is not whole tiles of `pgas::gemm` (shard rows a multiple of 128, N and K of 64);
    /// nothing is changed then.
    pub fn set_gemm(&mut self, path: GemmPath) -> Result<()> {
        if self.off_node.is_some() && path != GemmPath::Cublas {
            return Err(Error::Unavailable {
                what: "all_gather_matmul with the pgas GEMM",
                reason: "a peer is off NVLink, so the shards travel by NVSHMEM's fcollect before \
                         one cuBLAS GEMM; the pgas paths overlap copy-engine copies between \
                         mapped buffers. Fix: keep GemmPath::Cublas, or run the PEs in one \
                         NVLink domain"
                    .into(),
            });
        }
        let one_kernel = path == GemmPath::PgasOneKernel;
        let (mp, n, k) = (self.mp, self.n, self.k);
        let np = self.pgas.n_pes();
        // The rows one GEMM covers: all of C, or a shard. The one-kernel path pushes where the
        // others pull: every PE must take the same path (the agreement sees to it).
        let rows = if one_kernel { mp * np } else { mp };
        let all = [
            GemmPath::Cublas,
            GemmPath::PgasPerShard,
            GemmPath::PgasOneKernel,
        ];
        let chosen = agree_path(
            &self.pgas,
            "all_gather_matmul with the pgas GEMM",
            path,
            &all,
            (rows, n, k),
            mp,
        )?;
        let Some(mut cfg) = chosen else {
            self.fused = None;
            return Ok(());
        };
        // Asked once here (it compiles the kernel if need be), not at every call.
        cfg.clusters = Some(gemm::persistent_clusters(
            &self.pgas,
            cfg,
            (rows, n),
            (one_kernel && np > 1, false),
            false,
        )?);
        let context = "allocating the landed words (cuMemAlloc)";
        self.pgas.cuda().bind_to_thread()?;
        // SAFETY: a fresh allocation of np words, zeroed before use, owned by `Fused`.
        let words = unsafe {
            let ptr = cudarc::driver::result::malloc_sync(8 * np).map_err(Error::cuda(context))?;
            cudarc::driver::result::memset_d8_sync(ptr, 0, 8 * np).map_err(Error::cuda(context))?;
            self.pgas.stream().upgrade_device_ptr::<u64>(ptr, np)
        };
        let (words_ptr, _) = words.device_ptr(self.pgas.stream());
        self.fused = Some(Fused {
            one_kernel,
            cfg,
            words_ptr,
            words: Some(words),
        });
        Ok(())
    }

    /// `(shard rows, N, K)` of the plan.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.mp, self.n, self.k)
    }
}

/// `C = allgather_rows(A) · Btᵀ` once: an [`AllGatherMatmul`] for this shape, run once. Each
/// call allocates and agrees on the shape anew (collective steps with host waits); keep an
/// [`AllGatherMatmul`] for repeated calls.
pub fn all_gather_matmul(
    pgas: &Pgas,
    c: &mut impl DevicePtrMut<bf16>,
    shard: &impl DevicePtr<bf16>,
    bt: &impl DevicePtr<bf16>,
    (mp, n, k): (usize, usize, usize),
) -> Result<()> {
    let mut op = AllGatherMatmul::new(pgas, (mp, n, k))?;
    op.run(c, shard, bt)?;
    // The plan's buffers are freed when it drops: wait until the streams are done with them.
    pgas.stream()
        .synchronize()
        .map_err(Error::cuda("waiting for all_gather_matmul"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_need_positive_dimensions_that_fit_cublas() {
        assert_eq!(shape_error((2048, 8192, 8192), 4), None);
        let e = shape_error((0, 8192, 8192), 2).unwrap();
        assert!(e.contains("shard rows (M / P) is 0"), "{e}");
        let e = shape_error((1 << 30, 64, 64), 2).unwrap();
        assert!(e.contains("M = 2147483648 is not below 2^31"), "{e}");
    }
}
