//! All-gather fused with a GEMM, the column-parallel linear layer of tensor parallelism: every PE
//! holds a row shard `A_p` (M/P x K) and `Bt` (N x K, a linear layer's weight); every PE gets all
//! of `C = allgather_rows(A) · Btᵀ` (M x N), bf16, row-major, accumulated in f32 (PyTorch
//! async-TP's `fused_all_gather_matmul`).
//!
//! ```no_run
//! use pgas::ops::AllGatherMatmul;
//! use pgas::prelude::*;
//!
//! # fn main() -> pgas::Result<()> {
//! let pgas = pgas::init()?;
//! let (mp, n, k) = (2048, 8192, 8192); // this PE's rows of A, N, K
//! let stream = pgas.stream();
//! let shard = stream.alloc_zeros::<bf16>(mp * k)?;
//! let bt = stream.alloc_zeros::<bf16>(n * k)?;
//! let mut c = stream.alloc_zeros::<bf16>(mp * pgas.n_pes() * n)?;
//! let mut op = AllGatherMatmul::new(&pgas, (mp, n, k))?; // collective: allocates, checks shapes
//! op.run(&mut c, &shard, &bt)?; // on the pgas stream; repeat with new inputs
//! # Ok(())
//! # }
//! ```
//!
//! # How
//! The shards travel by copy engine and the PEs synchronize with stream memory operations, so
//! neither takes an SM from cuBLAS's per-shard GEMMs. The protocol, and why the double-buffered
//! gathered buffer is never overwritten while read, are in `docs/ops.md`, "All-gather + GEMM".

use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::{CudaEvent, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;

use super::cublas::Cublas;
use super::gemm_path::{agree_path, GemmPath};
use super::peers::addresses;
use crate::gemm::{self, GemmConfig};
use crate::{Error, Pgas, Result, SymTensor, Team, TensorMap};
use cudarc::driver::CudaSlice;

/// A plan for `C = allgather_rows(A) · Btᵀ` at one shape: the symmetric gathered buffers, the
/// signal words, a copy stream a peer and a cuBLAS handle (see the module documentation).
/// Collective: every PE creates it with the same shape and calls [`AllGatherMatmul::run`] the
/// same number of times.
pub struct AllGatherMatmul {
    pgas: Pgas,
    mp: usize,
    n: usize,
    k: usize,
    /// Double-buffered by call parity.
    gathered: [SymTensor<bf16>; 2],
    /// Each buffer's address on every PE (NVLink-mapped), by buffer then PE.
    peer_ptrs: [Vec<CUdeviceptr>; 2],
    /// Word `q` on PE `p`: the last call whose block PE `q` has put in place for PE `p`.
    flags: SymTensor<u64>,
    /// This PE's word (`me`) on every PE, by PE.
    flag_ptrs: Vec<CUdeviceptr>,
    epoch: u64,
    /// One copy stream a peer, by distance from `me` (`copies[j - 1]` serves PEs `me ± j`), so
    /// the peers' shards travel at once, on several copy engines.
    copies: Vec<Arc<CudaStream>>,
    /// Recorded on the pgas stream at the start of a call: the copy streams start there.
    start: CudaEvent,
    /// Recorded on `copies[j - 1]` after the block of PE `me + j` landed.
    landed: Vec<CudaEvent>,
    blas: Cublas,
    /// The GEMM as one pgas kernel (`pgas::gemm`, gathering) instead of cuBLAS per shard.
    fused: Option<Fused>,
    /// Where a peer is off NVLink: the shard's symmetric copy, which NVSHMEM's `fcollect`
    /// gathers (its proxy carries what no mapping reaches) before one cuBLAS GEMM.
    off_node: Option<SymTensor<bf16>>,
}

/// What the pgas paths add: the specialization and, for one kernel, the words the copy streams
/// sets as each peer's rows land (word `q`: the last call whose rows of PE `q` are in place).
struct Fused {
    one_kernel: bool,
    cfg: GemmConfig,
    /// From `cuMemAlloc`, not a stream-ordered pool: `cuStreamWriteValue64` into the pool's
    /// memory failed with `CUDA_ERROR_INVALID_VALUE` on 2 x H100 (the attempt before run 26 of
    /// docs/gpu-report.md; the pool is the likely cause, not isolated); freed in `drop` the same
    /// way.
    words: Option<CudaSlice<u64>>,
    /// `words`' address, for the copy streams' stream memory operations. Not through
    /// `CudaSlice::device_ptr`: its event tracking would make the kernel's launch wait for the
    /// copy streams' last use, that is for every peer's rows (200 us at 8192^3 on 2 x H100,
    /// run 41 of docs/gpu-report.md).
    words_ptr: CUdeviceptr,
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
        super::agree::agree(
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
        super::stream_sync::require_stream_mem_ops(pgas, "all_gather_matmul")?;
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
        super::agree::agree(
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

    /// `C = allgather_rows(A) · Btᵀ` on the pgas stream: `shard` is this PE's `mp x k` rows of
    /// A, `bt` is `n x k` and `c` is `M x n`, M = `mp` x the number of PEs. Asynchronous like
    /// a kernel launch: when the pgas stream has passed it, `c` is complete and no peer reads
    /// this PE's data any more. Collective: every PE calls it once per call of the others.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when a buffer does not match the plan's shape (checked before
    /// anything is enqueued), or a CUDA, cuBLAS or launch error.
    pub fn run(
        &mut self,
        c: &mut impl DevicePtrMut<bf16>,
        shard: &impl DevicePtr<bf16>,
        bt: &impl DevicePtr<bf16>,
    ) -> Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        let (me, np) = (self.pgas.my_pe(), self.pgas.n_pes());
        let m = mp * np;
        for (what, got, expected) in [
            (
                "the all_gather_matmul shard (shard rows x K)",
                shard.len(),
                mp * k,
            ),
            ("the all_gather_matmul Bt (N x K)", bt.len(), n * k),
            ("the all_gather_matmul C (M x N)", c.len(), m * n),
        ] {
            if got != expected {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected,
                });
            }
        }
        let main = self.pgas.stream().clone();
        if np > 1 {
            super::stream_sync::refuse_capture(&main, "AllGatherMatmul::run")?;
        }
        // cudarc orders the caller's buffers on the pgas stream; the copy streams read the shard
        // after the call's start there, and the pgas stream waits for each copy stream's last
        // event before the call ends, so the guards' ordering holds.
        let (pa, _ra) = shard.device_ptr(&main);
        let (pb, _rb) = bt.device_ptr(&main);
        let (pc, _rc) = c.device_ptr_mut(&main);
        self.epoch += 1;
        let buf = (self.epoch % 2) as usize;
        let gathered = self.gathered[buf].as_device_ptr();
        let block_bytes = mp * k * 2;
        let row_block = |base: CUdeviceptr, pe: usize, bytes: usize| base + (pe * bytes) as u64;
        self.pgas.cuda().bind_to_thread()?;
        if let Some(mine) = &self.off_node {
            // SAFETY: the shard holds `block_bytes` (checked above), as does `mine`; both are
            // ordered on the pgas stream, where NVSHMEM's fcollect and the GEMM follow.
            unsafe {
                cu::cuMemcpyDtoDAsync_v2(mine.as_device_ptr(), pa, block_bytes, main.cu_stream())
                    .result()
                    .map_err(Error::cuda("copying the shard into symmetric memory"))?;
            }
            self.pgas.fcollect(Team::WORLD, &self.gathered[buf], mine)?;
            // SAFETY: the gathered buffer holds m x k, Bt n x k and C m x n (checked above),
            // all ordered on the pgas stream.
            return unsafe {
                self.blas
                    .gemm_bf16_nt_raw(&main, pc, gathered, pb, (m, n, k))
            };
        }
        let one_kernel = self.fused.as_ref().is_some_and(|f| f.one_kernel);
        if np > 1 {
            self.start_copies(&main)?;
        }
        if np > 1 && one_kernel {
            self.push_and_mark(pa, buf, block_bytes)?;
            self.run_fused((pc, pa, pb), gathered)?;
            // The copy streams' reads of the shard are ordered before the call's end.
            return self.join_copies(&main);
        }
        if np > 1 {
            // The stream of distance 1 puts the shard in place for every peer.
            let copy = self.copies[0].cu_stream();
            // SAFETY: the shard holds `block_bytes` (checked above) and this PE's block of the
            // gathered buffer is as large; no peer reads it before the words below, and the
            // last readers of this buffer (call e - 2) are done (module documentation). The
            // words are symmetric u64s mapped here.
            unsafe {
                cu::cuMemcpyDtoDAsync_v2(
                    row_block(gathered, me, block_bytes),
                    pa,
                    block_bytes,
                    copy,
                )
                .result()
                .map_err(Error::cuda("copying the shard into the gathered buffer"))?;
                for (pe, &word) in self.flag_ptrs.iter().enumerate() {
                    if pe != me {
                        super::stream_sync::stream_write(
                            copy,
                            word,
                            self.epoch,
                            "signalling a peer that the shard is in place",
                        )?;
                    }
                }
            }
            let words = self.flags.as_device_ptr();
            for (j, (landed, stream)) in (1..np).zip(self.landed.iter().zip(&self.copies)) {
                let copy = stream.cu_stream();
                let src = (me + j) % np;
                let from = row_block(self.peer_ptrs[buf][src], src, block_bytes);
                // SAFETY: word `src` is this PE's symmetric u64; both block addresses name PE
                // `src`'s block of this call's gathered buffer (the peer's copy, mapped here, and
                // this PE's), which PE `src` filled before writing the word, and nobody writes
                // until the next call of this parity.
                unsafe {
                    super::stream_sync::stream_wait_geq(
                        copy,
                        words + 8 * src as u64,
                        self.epoch,
                        "waiting for a peer's shard",
                    )?;
                    cu::cuMemcpyDtoDAsync_v2(
                        row_block(gathered, src, block_bytes),
                        from,
                        block_bytes,
                        copy,
                    )
                    .result()
                    .map_err(Error::cuda("pulling a peer's shard"))?;
                }
                landed
                    .record(stream)
                    .map_err(Error::cuda("recording a shard's arrival"))?;
            }
        }
        if one_kernel {
            // One PE: nothing to gather.
            return self.run_fused((pc, pa, pb), gathered);
        }
        let c_block = mp * n * 2;
        // SAFETY: the shard, Bt and C's rows of this PE hold mp x k, n x k and mp x n (checked
        // above), ordered on the pgas stream.
        unsafe {
            self.shard_gemm(&main, row_block(pc, me, c_block), pa, pb)?;
        }
        for j in 1..np {
            let src = (me + j) % np;
            main.wait(&self.landed[j - 1])
                .map_err(Error::cuda("waiting for a peer's shard"))?;
            // SAFETY: PE `src`'s block of the gathered buffer has landed (the event above) and
            // holds mp x k; C's rows of PE `src` hold mp x n.
            unsafe {
                self.shard_gemm(
                    &main,
                    row_block(pc, src, c_block),
                    row_block(gathered, src, block_bytes),
                    pb,
                )?;
            }
        }
        Ok(())
    }
}

impl AllGatherMatmul {
    /// Starts every copy stream at this point of the pgas stream (`main`).
    fn start_copies(&self, main: &CudaStream) -> Result<()> {
        self.start
            .record(main)
            .map_err(Error::cuda("recording the all-gather's start"))?;
        for copy in &self.copies {
            copy.wait(&self.start).map_err(Error::cuda(
                "ordering the copy streams after the call's start",
            ))?;
        }
        Ok(())
    }

    /// Orders the rest of the pgas stream (`main`) after every copy stream's work of the call.
    fn join_copies(&self, main: &CudaStream) -> Result<()> {
        for landed in &self.landed {
            main.wait(landed)
                .map_err(Error::cuda("waiting for the all-gather's copies"))?;
        }
        Ok(())
    }

    /// One shard's rows of C (`mp x n` at `c`) from its rows of A (`mp x k` at `a`), by cuBLAS
    /// or by `pgas::gemm`, on the pgas stream (`main`).
    ///
    /// # Safety
    /// `c`, `a` and `b` name `mp x n`, `mp x k` and `n x k` bf16 elements ordered on `main`.
    unsafe fn shard_gemm(
        &mut self,
        main: &CudaStream,
        c: CUdeviceptr,
        a: CUdeviceptr,
        b: CUdeviceptr,
    ) -> Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        match self.fused.as_ref() {
            // SAFETY: the caller's contract: `c`, `a`, `b` have these shapes, ordered on `main`.
            None => unsafe { self.blas.gemm_bf16_nt_raw(main, c, a, b, (mp, n, k)) },
            // SAFETY: the same contract, which is gemm_bf16_raw's for these shapes.
            Some(f) => unsafe {
                gemm::gemm_bf16_raw(&self.pgas, main, (c, a, b), (mp, n, k), f.cfg)
            },
        }
    }

    /// The copy streams of a fused call. No local copy (a same-GPU copy may take SMs, which the
    /// persistent GEMM holds): stream `j` pushes the shard by copy engine into the gathered
    /// buffer of PE `me - j` and sets this PE's word there to the call, then waits for the
    /// word of PE `me + j` here and marks that peer's rows landed in the kernel's word (stream
    /// memory operations, no SMs). A push of call `e` waits for the peer's word of call
    /// `e - 1`, written after that peer's call `e - 1` started, so after its kernel of call
    /// `e - 2`, the last reader of that buffer, ended.
    fn push_and_mark(&mut self, pa: CUdeviceptr, buf: usize, block_bytes: usize) -> Result<()> {
        let (me, np) = (self.pgas.my_pe(), self.pgas.n_pes());
        let words_here = self.flags.as_device_ptr();
        for (j, stream) in (1..np).zip(&self.copies) {
            let copy = stream.cu_stream();
            // Stream j pushes to PE `me - j`, which reads this PE's rows j-th after its own.
            let q = (me + np - j) % np;
            let to = self.peer_ptrs[buf][q] + (me * block_bytes) as u64;
            // SAFETY: word q here and this PE's word on q are symmetric u64s mapped here; the
            // peer's block of this call's buffer holds block_bytes, as does the shard.
            unsafe {
                super::stream_sync::stream_wait_geq(
                    copy,
                    words_here + 8 * q as u64,
                    self.epoch - 1,
                    "waiting until a peer's buffer is free",
                )?;
                cu::cuMemcpyDtoDAsync_v2(to, pa, block_bytes, copy)
                    .result()
                    .map_err(Error::cuda("pushing the shard to a peer"))?;
                super::stream_sync::stream_write(
                    copy,
                    self.flag_ptrs[q],
                    self.epoch,
                    "signalling a peer that the shard is in place",
                )?;
            }
        }
        let landed_words = self
            .fused
            .as_ref()
            .expect("push_and_mark runs on the one-kernel path")
            .words_ptr;
        for (j, (landed, stream)) in (1..np).zip(self.landed.iter().zip(&self.copies)) {
            let copy = stream.cu_stream();
            let q = (me + j) % np;
            // SAFETY: word q here (symmetric) and the kernel's word q (np words).
            unsafe {
                super::stream_sync::stream_wait_geq(
                    copy,
                    words_here + 8 * q as u64,
                    self.epoch,
                    "waiting for a peer's shard",
                )?;
                super::stream_sync::stream_write(
                    copy,
                    landed_words + 8 * q as u64,
                    self.epoch,
                    "marking a peer's rows landed",
                )?;
            }
            landed
                .record(stream)
                .map_err(Error::cuda("recording a shard's arrival"))?;
        }
        Ok(())
    }

    /// The one-kernel GEMM of a call, on the pgas stream: C from the shard (`pa`) and the
    /// gathered buffer, whose peers' rows the kernel waits for word by word.
    fn run_fused(
        &mut self,
        (pc, pa, pb): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
        gathered: CUdeviceptr,
    ) -> Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        let (me, np) = (self.pgas.my_pe(), self.pgas.n_pes());
        let m = mp * np;
        let f = self
            .fused
            .as_mut()
            .expect("run_fused runs on the one-kernel path");
        // SAFETY: run checked C (m x n), the shard (mp x k) and Bt (n x k); the gathered buffer
        // holds m x k. The kernel writes only C through its map and reads the gathered rows
        // only after their word says they landed.
        let (mut c_map, a_map, b_map, g_map) = unsafe {
            (
                TensorMap::from_device_ptr(pc, m * n, gemm::c_tile(m, n))?,
                TensorMap::from_device_ptr(pa, mp * k, gemm::a_tile(mp, k))?,
                TensorMap::from_device_ptr(pb, n * k, gemm::b_tile(n, k, f.cfg))?,
                TensorMap::from_device_ptr(gathered, m * k, gemm::a_tile(m, k))?,
            )
        };
        let maps = gemm::Maps {
            c: &mut c_map,
            a: &a_map,
            b: &b_map,
            gathered: &g_map,
        };
        let words = f
            .words
            .as_mut()
            .expect("the words live as long as the fused path");
        gemm::launch(
            &self.pgas,
            self.pgas.stream(),
            maps,
            (words, self.epoch),
            (m, n, k),
            // One PE has nothing to gather: the plain specialization, the one `set_gemm` sized.
            if np > 1 { (mp, me) } else { (0, 0) },
            f.cfg,
            false,
            false,
        )
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
