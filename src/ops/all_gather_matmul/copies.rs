//! The copy streams and the GEMMs of a call: starting and joining the copy streams, the
//! one-kernel path's pushes and its launch, and one shard's GEMM.

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::CudaStream;

use super::AllGatherMatmul;
use crate::gemm;
use crate::ops::stream_sync;
use crate::{Error, Result, TensorMap};

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
    pub(super) fn push_and_mark(
        &mut self,
        pa: CUdeviceptr,
        buf: usize,
        block_bytes: usize,
    ) -> Result<()> {
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
                stream_sync::stream_wait_geq(
                    copy,
                    words_here + 8 * q as u64,
                    self.epoch - 1,
                    "waiting until a peer's buffer is free",
                )?;
                cu::cuMemcpyDtoDAsync_v2(to, pa, block_bytes, copy)
                    .result()
                    .map_err(Error::cuda("pushing the shard to a peer"))?;
                stream_sync::stream_write(
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
                stream_sync::stream_wait_geq(
                    copy,
                    words_here + 8 * q as u64,
                    self.epoch,
                    "waiting for a peer's shard",
                )?;
                stream_sync::stream_write(
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
    pub(super) fn run_fused(
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
