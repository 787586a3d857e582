//! The plan: [`AllGatherMatmul`]'s buffers, streams and events, made collectively (`new`), the
//! GEMM it runs (`set_gemm`), and the one-call form.

use super::AllGatherMatmul;
use std::mem::ManuallyDrop;

use cudarc::driver::sys::{self as cu};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use half::bf16;

use crate::gemm::{self, GemmConfig, BK};
use crate::ops::cublas::Cublas;
use crate::ops::gemm_path::{
    agree_path, agree_prepared, off_nvlink, start_on_fastest, Fused as Op, GemmPath,
};
use crate::ops::peers::{addresses, most_on_one_gpu};
use crate::{Error, Pgas, Result};

/// The most PEs on one GPU the one-kernel path runs with. With 4 PEs sharing an H200 under CUDA
/// MPS, the all-gather + GEMM example's one kernel hung with the GPU idle, and with 8 the suite's
/// pieces case faulted (`unspecified launch failure`, which ends the process's CUDA context);
/// with 2 sharing, and with a GPU a PE, every check passed (`docs/faults.md`). Until the cause is
/// found the path is refused where more PEs share a GPU.
const MAX_SHARING_ONE_KERNEL: usize = 2;

/// Most pieces a shard may be pushed in on the one-kernel path
/// ([`AllGatherMatmul::set_pieces`]): `new` allocates this many words a PE, once, so that a
/// piece's word has the same place whatever the count.
pub const MAX_PIECES: usize = 16;

/// The pieces the one-kernel path pushes a shard in unless [`AllGatherMatmul::set_pieces`]
/// says otherwise: whole shards. Measured on 4 and 2 x H100 (`docs/gemm.md`, "Pieces of K"),
/// every count above 1 was slower at every M from 1024 to 16384, but for 2 pieces at M = 1024
/// and 4096 on 4 PEs (ahead by less than the noise): a piece's 2D copy and word, and the
/// kernel's wait per piece, cost more than the earlier start saves.
pub const DEFAULT_PIECES: usize = 1;

/// The copies a shard in `pieces` pieces goes in, each a range of pieces: the first piece
/// alone, then copies that double (pieces 1, 2-3, 4-7, ...). The first piece lands soon (it is
/// `1 / pieces` of the shard), and each later copy lands before a tile, which takes K in order
/// and more time than the pushes, reaches it; fewer, wider copies keep the copy engines'
/// 2D copies efficient (their rows are a piece's width).
pub(super) fn copy_groups(pieces: usize) -> Vec<std::ops::Range<usize>> {
    // Copy `g` > 0 starts at piece 2^(g - 1).
    let starts = std::iter::once(0).chain(std::iter::successors(Some(1), |lo| Some(lo * 2)));
    let mut starts = starts.take_while(|lo| *lo < pieces.max(1)).peekable();
    let mut groups = Vec::new();
    while let Some(lo) = starts.next() {
        groups.push(lo..starts.peek().copied().unwrap_or(pieces.max(1)));
    }
    groups
}

/// Why a shard with `k` columns cannot be pushed in `pieces` pieces, if it cannot: a piece is
/// whole 64-column steps of the GEMM (a tile's K step never straddles two pieces), and there
/// are at most [`MAX_PIECES`].
pub fn pieces_error(pieces: usize, k: usize) -> Option<String> {
    let steps = k / BK;
    (pieces == 0 || pieces > MAX_PIECES || !k.is_multiple_of(BK) || !steps.is_multiple_of(pieces))
        .then(|| {
            format!(
                "{pieces} pieces of K = {k}: a piece is whole steps of {BK} columns, so the \
                 count divides K / {BK} = {steps}, and is 1 to {MAX_PIECES}. Fix: a divisor of \
                 {steps} up to {MAX_PIECES} (1 pushes whole shards)"
            )
        })
}

/// What the pgas paths add: the specialization and, for one kernel, how its peers' rows land.
pub(super) struct Fused {
    pub(super) cfg: GemmConfig,
    /// The one-kernel path's pushes (`None`: a launch a shard).
    pub(super) one_kernel: Option<Pushes>,
}

/// The one-kernel path's pushes: the pieces a shard is pushed in and the words the kernel polls.
pub(super) struct Pushes {
    /// Pieces of K columns a shard is pushed in, each with its word (1 to [`MAX_PIECES`],
    /// dividing K / 64).
    pub(super) pieces: usize,
    /// The plan's `flags` (this PE's part) as a cudarc buffer for the kernel's `landed`
    /// argument: the kernel polls the words the peers' copy streams write, no copy stream of
    /// this PE in between. The memory is NVSHMEM's (freed with `flags`): never freed through
    /// this slice (see `Drop`). Only the kernel's launches use it through cudarc: the copy
    /// streams name the words by address, since through `CudaSlice::device_ptr` cudarc's event
    /// tracking would make the kernel's launch wait for the copy streams' last use, that is for
    /// the whole all-gather.
    pub(super) words: ManuallyDrop<CudaSlice<u64>>,
}

impl Drop for Pushes {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `leak` gives the pointer back without freeing it (NVSHMEM
        // owns the memory, and frees it with the plan's `flags`).
        unsafe { ManuallyDrop::take(&mut self.words) }.leak();
    }
}

crate::debug::debug_fields!(|s: AllGatherMatmul| shard_rows: s.mp, n: s.n, k: s.k,
    calls: s.epoch, ..);

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
        let flags = pgas.alloc::<u64>(np * MAX_PIECES)?;
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
        let mut op = AllGatherMatmul {
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
            crowd: most_on_one_gpu(pgas)?,
        };
        start_on_fastest((Op::AllGatherMatmul, np, mp), |path| op.set_gemm(path))?;
        Ok(op)
    }

    /// The GEMM calls run ([`GemmPath`]): the one `new` started on (the path measured fastest
    /// where it can run, else cuBLAS), or the last `set_gemm`'s.
    pub fn gemm_path(&self) -> GemmPath {
        match &self.fused {
            None => GemmPath::Cublas,
            Some(Fused {
                one_kernel: Some(_),
                ..
            }) => GemmPath::PgasOneKernel,
            Some(_) => GemmPath::PgasPerShard,
        }
    }

    /// Picks the GEMM of later calls ([`GemmPath`]). Collective: the PEs first agree on the
    /// path (`ops::agree`), so a PE that asks for another, or one where the path cannot run, is
    /// the same `Err` on every PE. A pgas path cannot run where the GPU is not sm_90 or the
    /// shape is not whole tiles of `pgas::gemm` (shard rows a multiple of 128, N and K of 64),
    /// and the one kernel where more than 2 PEs share a GPU (a known fault,
    /// `docs/faults.md`); nothing is changed then. `GemmPath::PgasOneKernel` pushes each shard in
    /// [`DEFAULT_PIECES`] pieces ([`AllGatherMatmul::set_pieces`] changes the count).
    pub fn set_gemm(&mut self, path: GemmPath) -> Result<()> {
        if self.off_node.is_some() && path != GemmPath::Cublas {
            return Err(off_nvlink(
                "all_gather_matmul with the pgas GEMM",
                "the shards travel by NVSHMEM's fcollect before one cuBLAS GEMM",
            ));
        }
        let one_kernel = path == GemmPath::PgasOneKernel;
        if one_kernel && self.crowd > MAX_SHARING_ONE_KERNEL {
            return Err(Error::Unavailable {
                what: "all_gather_matmul with GemmPath::PgasOneKernel",
                reason: format!(
                    "{} PEs share one GPU here, and with more than {MAX_SHARING_ONE_KERNEL} on a \
                     GPU the one kernel hangs or faults (a known fault, docs/faults.md). Fix: \
                     use GemmPath::PgasPerShard or GemmPath::Cublas, or run a PE a GPU",
                    self.crowd
                ),
            });
        }
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
        let clusters = gemm::persistent_clusters(
            &self.pgas,
            cfg,
            (rows, n),
            (
                if one_kernel && np > 1 {
                    gemm::Chunking::Gather
                } else {
                    gemm::Chunking::Whole
                },
                false,
            ),
            false,
        );
        cfg.clusters = Some(agree_prepared(&self.pgas, "all_gather_matmul", clusters)?);
        let pushes = one_kernel.then(|| Pushes {
            pieces: DEFAULT_PIECES,
            // SAFETY: `flags` holds np * MAX_PIECES words this PE may read and lives as long
            // as the plan, so as long as this slice; the slice never frees it (Pushes' Drop).
            words: ManuallyDrop::new(unsafe {
                self.pgas
                    .stream()
                    .upgrade_device_ptr::<u64>(self.flags.as_device_ptr(), np * MAX_PIECES)
            }),
        });
        self.fused = Some(Fused {
            cfg,
            one_kernel: pushes,
        });
        Ok(())
    }

    /// Pushes each shard in `pieces` pieces of K columns on the one-kernel path, from the next
    /// call on: a peer's tiles start once the first piece of its rows landed instead of the
    /// whole shard (1 pushes whole shards). The pieces go in copies that double (the first
    /// alone, then 1, 2, 4, 8 pieces), each piece with its word. Collective: the PEs first
    /// agree on the count (`ops::agree`), so a count that differs between PEs is the same `Err`
    /// on every PE.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`], on every PE, with nothing changed: the counts differ between
    /// PEs; the plan is not on `GemmPath::PgasOneKernel` (`set_gemm` first); the count is 0, more
    /// than [`MAX_PIECES`] or does not divide K / 64 ([`pieces_error`]).
    pub fn set_pieces(&mut self, pieces: usize) -> Result<()> {
        let one_kernel = self.fused.as_ref().is_some_and(|f| f.one_kernel.is_some());
        crate::ops::agree::agree(
            &self.pgas,
            "AllGatherMatmul::set_pieces",
            &[
                ("pieces", pieces as u64),
                ("on GemmPath::PgasOneKernel", one_kernel as u64),
            ],
        )?;
        let refuse = |reason: String| Error::InvalidConfig {
            name: "AllGatherMatmul::set_pieces",
            value: pieces.to_string(),
            reason,
        };
        let Some(pushes) = self.fused.as_mut().and_then(|f| f.one_kernel.as_mut()) else {
            return Err(refuse(
                "only the one-kernel path pushes shards in pieces. Fix: \
                 set_gemm(GemmPath::PgasOneKernel) first"
                    .into(),
            ));
        };
        if let Some(why) = pieces_error(pieces, self.k) {
            return Err(refuse(why));
        }
        pushes.pieces = pieces;
        Ok(())
    }

    /// The pieces each shard is pushed in on the one-kernel path (`None` on the other paths).
    pub fn pieces(&self) -> Option<usize> {
        self.fused
            .as_ref()
            .and_then(|f| f.one_kernel.as_ref())
            .map(|p| p.pieces)
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
    pgas: &Pgas, c: &mut impl DevicePtrMut<bf16>, shard: &impl DevicePtr<bf16>,
    bt: &impl DevicePtr<bf16>, (mp, n, k): (usize, usize, usize),
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
    fn pieces_must_divide_k_steps() {
        assert_eq!(pieces_error(4, 8192), None);
        assert_eq!(pieces_error(3, 192), None);
        assert_eq!(pieces_error(16, 1024), None);
        let e = pieces_error(3, 128).unwrap();
        assert!(e.contains("divides K / 64 = 2"), "{e}");
        assert!(e.contains("Fix: a divisor of 2 up to 16"), "{e}");
        assert!(pieces_error(0, 128).is_some());
        assert!(pieces_error(32, 4096).is_some(), "more than MAX_PIECES");
    }

    #[test]
    fn copies_take_the_first_piece_alone_then_double() {
        assert_eq!(copy_groups(1), vec![0..1]);
        assert_eq!(copy_groups(2), vec![0..1, 1..2]);
        assert_eq!(copy_groups(4), vec![0..1, 1..2, 2..4]);
        assert_eq!(copy_groups(8), vec![0..1, 1..2, 2..4, 4..8]);
        // Not a power of two: the last copy takes what is left.
        assert_eq!(copy_groups(6), vec![0..1, 1..2, 2..4, 4..6]);
        assert_eq!(copy_groups(16).len(), 5);
    }

    #[test]
    fn shapes_need_positive_dimensions_that_fit_cublas() {
        assert_eq!(shape_error((2048, 8192, 8192), 4), None);
        let e = shape_error((0, 8192, 8192), 2).unwrap();
        assert!(e.contains("shard rows (M / P) is 0"), "{e}");
        let e = shape_error((1 << 30, 64, 64), 2).unwrap();
        assert!(e.contains("M = 2147483648 is not below 2^31"), "{e}");
    }
}
