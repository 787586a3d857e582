//! The copy streams and the GEMMs of a call: starting and joining the copy streams, the
//! one-kernel path's pushes (piece by piece) and its launch, and one shard's GEMM.

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::CudaStream;

use super::AllGatherMatmul;
use crate::gemm;
use crate::ops::stream_sync;
use crate::{Error, Result, TensorMap};

/// The device addresses of one call (made by `op.rs`'s `run`): the caller's C, shard (A) and
/// Bt, and the gathered buffer of the call's parity (`buf`, at `gathered`).
#[derive(Clone, Copy)]
pub(super) struct CallPtrs {
    pub(super) c: CUdeviceptr,
    pub(super) a: CUdeviceptr,
    pub(super) bt: CUdeviceptr,
    pub(super) buf: usize,
    pub(super) gathered: CUdeviceptr,
}

/// The address of PE `pe`'s block of `bytes` in a buffer of one block a PE at `base`.
pub(super) fn row_block(base: CUdeviceptr, pe: usize, bytes: usize) -> CUdeviceptr {
    base + (pe * bytes) as u64
}

impl AllGatherMatmul {
    /// Starts every copy stream at this point of the pgas stream (`main`).
    pub(super) fn start_copies(&self, main: &CudaStream) -> Result<()> {
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
    pub(super) fn join_copies(&self, main: &CudaStream) -> Result<()> {
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
    pub(super) unsafe fn shard_gemm(
        &mut self, main: &CudaStream, c: CUdeviceptr, a: CUdeviceptr, b: CUdeviceptr,
    ) -> Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        match self.fused.as_ref() {
            // SAFETY: the caller's contract: `c`, `a`, `b` have these shapes, ordered on `main`.
            None => unsafe { self.blas.gemm_bf16_nt_raw(main, c, a, b, (mp, n, k)) },
            // SAFETY: the same contract, which is gemm_raw_with's for these shapes.
            Some(f) => unsafe {
                gemm::gemm_raw_with(&self.pgas, main, (c, a, b), (mp, n, k), f.cfg, false)
            },
        }
    }

    /// The pushes of a fused call, copies `groups` (ranges of the pieces, `copy_groups`) of the
    /// call's shard to every peer, into the call's gathered buffer. No local copy (a same-GPU copy
    /// may take SMs, which the persistent GEMM holds). Stream `j` serves PE `me - j`, which
    /// reads this PE's rows j-th after its own: before its first piece of the call it waits for
    /// that peer's piece-0 word of call `e - 1` here, written after that peer's call `e - 1`
    /// started, so after its kernel of call `e - 2`, the last reader of that buffer, ended. Then
    /// for each copy it pushes its pieces (K columns `lo k / n .. hi k / n` of every row, `n`
    /// pieces: one copy-engine copy) into this PE's block there and writes this PE's word of
    /// each of those pieces there (`cuStreamWriteValue64`, whose default fences first, so the
    /// pieces are visible before the words), which that peer's kernel polls. The copies go
    /// round the streams in order, and the streams run at once, but for the first piece: stream
    /// `j + 1` starts it once stream `j` has pushed its own (`landed[j - 1]`, recorded again at
    /// the call's end), so the peer that needs this PE's rows first gets them at the copy
    /// engine's whole speed, not a third of it: at M = 1024 on 4 PEs, where a PE's own rows
    /// fill half the GPU, the other half waits for that piece (`docs/ops.md`).
    pub(super) fn push_pieces(
        &mut self, call: CallPtrs, groups: &[std::ops::Range<usize>],
    ) -> Result<()> {
        let (pa, buf) = (call.a, call.buf);
        let (me, np) = (self.pgas.my_pe(), self.pgas.n_pes());
        let (mp, k) = (self.mp, self.k);
        let n = self
            .fused
            .as_ref()
            .and_then(|f| f.one_kernel.as_ref())
            .expect("push_pieces runs on the one-kernel path")
            .pieces;
        let row_bytes = k * 2;
        let piece_bytes = row_bytes / n;
        let words_here = self.flags.as_device_ptr();
        for group in groups {
            for (j, stream) in (1..np).zip(&self.copies) {
                let copy = stream.cu_stream();
                let q = (me + np - j) % np;
                let block = self.peer_ptrs[buf][q] + (me * mp * row_bytes) as u64;
                let off = (group.start * piece_bytes) as u64;
                let width = group.len() * piece_bytes;
                // SAFETY: word q here and this PE's words on q are symmetric u64s mapped here
                // (MAX_PIECES >= n a PE); the peer's block of this call's buffer and the shard
                // both hold mp rows of row_bytes, and the group is columns off.. off + width
                // of each row (group.end <= n).
                unsafe {
                    if group.start == 0 {
                        stream_sync::stream_word(
                            copy,
                            words_here + 8 * q as u64,
                            stream_sync::Word::AtLeast(self.epoch - 1),
                            "waiting until a peer's buffer is free",
                        )?;
                    }
                    if width == row_bytes {
                        cu::cuMemcpyDtoDAsync_v2(block, pa, mp * row_bytes, copy)
                            .result()
                            .map_err(Error::cuda("pushing the shard to a peer"))?;
                    } else {
                        let piece = cu::CUDA_MEMCPY2D {
                            srcXInBytes: 0,
                            srcY: 0,
                            srcMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                            srcHost: std::ptr::null(),
                            srcDevice: pa + off,
                            srcArray: std::ptr::null_mut(),
                            srcPitch: row_bytes,
                            dstXInBytes: 0,
                            dstY: 0,
                            dstMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                            dstHost: std::ptr::null_mut(),
                            dstDevice: block + off,
                            dstArray: std::ptr::null_mut(),
                            dstPitch: row_bytes,
                            WidthInBytes: width,
                            Height: mp,
                        };
                        cu::cuMemcpy2DAsync_v2(&piece, copy)
                            .result()
                            .map_err(Error::cuda("pushing pieces of the shard to a peer"))?;
                    }
                    for i in group.clone() {
                        stream_sync::stream_word(
                            copy,
                            self.flag_ptrs[q] + (8 * i * np) as u64,
                            stream_sync::Word::Write(self.epoch),
                            "signalling a peer that a piece of the shard is in place",
                        )?;
                    }
                }
                if group.start == 0 && j + 1 < np {
                    // The next peer's first piece goes after this one.
                    let pushed = &self.landed[j - 1];
                    pushed
                        .record(stream)
                        .map_err(Error::cuda("recording a first piece's push"))?;
                    self.copies[j]
                        .wait(pushed)
                        .map_err(Error::cuda("ordering the first pieces' pushes"))?;
                }
            }
        }
        Ok(())
    }

    /// Records the end of every copy stream's pushes of a one-kernel call (`landed`), which
    /// [`Self::join_copies`] orders the call's end after: the shard is read until then.
    pub(super) fn record_pushes(&self) -> Result<()> {
        for (landed, stream) in self.landed.iter().zip(&self.copies) {
            landed
                .record(stream)
                .map_err(Error::cuda("recording the end of the pushes"))?;
        }
        Ok(())
    }

    /// The one-kernel GEMM of a call, on the pgas stream: C from the shard and the gathered
    /// buffer, whose peers' rows the kernel waits for piece by piece (`flags`, which
    /// the peers' copy streams write).
    pub(super) fn run_fused(&mut self, call: CallPtrs) -> Result<()> {
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
                TensorMap::from_device_ptr(call.c, m * n, gemm::c_tile(m, n))?,
                TensorMap::from_device_ptr(call.a, mp * k, gemm::a_tile(mp, k))?,
                TensorMap::from_device_ptr(call.bt, n * k, gemm::b_tile(n, k, f.cfg))?,
                TensorMap::from_device_ptr(call.gathered, m * k, gemm::a_tile(m, k))?,
            )
        };
        let maps = gemm::Maps {
            c: &mut c_map,
            a: &a_map,
            b: &b_map,
            gathered: &g_map,
            w: None,
        };
        let pushes = f
            .one_kernel
            .as_mut()
            .expect("run_fused runs on the one-kernel path");
        gemm::launch(
            &self.pgas,
            self.pgas.stream(),
            maps,
            gemm::Words {
                landed: Some((&mut pushes.words, self.epoch)),
                group_of: None,
            },
            (m, n, k),
            // One PE has nothing to gather: the plain specialization, the one `set_gemm` sized.
            if np > 1 {
                (gemm::Chunking::Gather, (mp, me, pushes.pieces))
            } else {
                (gemm::Chunking::Whole, (0, 0, 1))
            },
            f.cfg,
            false,
            false,
        )
    }
}
