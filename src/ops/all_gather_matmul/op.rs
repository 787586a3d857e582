//! A call of [`AllGatherMatmul`]: `run` checks the buffers and picks the path: one cuBLAS GEMM
//! after NVSHMEM's `fcollect` (a peer off NVLink), the one-kernel GEMM fed by pushes, or a GEMM a
//! shard as the copy streams pull the peers' blocks.

use cudarc::driver::sys as cu;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;

use super::copies::{row_block, CallPtrs};
use super::plan::copy_groups;
use super::AllGatherMatmul;
use crate::ops::stream_sync;
use crate::{Error, Result, Team};

impl AllGatherMatmul {
    /// `C = allgather_rows(A) · Btᵀ` on the pgas stream: `shard` is this PE's `mp x k` rows of
    /// A, `bt` is `n x k` and `c` is `M x n`, M = `mp` x the number of PEs. Asynchronous like
    /// a kernel launch: when the pgas stream has passed it, `c` is complete and no peer reads
    /// this PE's data any more. Collective: every PE calls it once per call of the others.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when a buffer does not match the plan's shape (checked before
    /// anything is enqueued), or a CUDA, cuBLAS or launch error.
    pub fn run(
        &mut self, c: &mut impl DevicePtrMut<bf16>, shard: &impl DevicePtr<bf16>,
        bt: &impl DevicePtr<bf16>,
    ) -> Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        let np = self.pgas.n_pes();
        let m = mp * np;
        crate::ops::lengths::exactly(&[
            (
                "the all_gather_matmul shard (shard rows x K)",
                shard.len(),
                mp * k,
            ),
            ("the all_gather_matmul Bt (N x K)", bt.len(), n * k),
            ("the all_gather_matmul C (M x N)", c.len(), m * n),
        ])?;
        let main = self.pgas.stream().clone();
        if np > 1 {
            stream_sync::refuse_capture(&main, "AllGatherMatmul::run")?;
        }
        // cudarc orders the caller's buffers on the pgas stream; the copy streams read the shard
        // after the call's start there, and the pgas stream waits for each copy stream's last
        // event before the call ends, so the guards' ordering holds.
        let (pa, _ra) = shard.device_ptr(&main);
        let (pb, _rb) = bt.device_ptr(&main);
        let (pc, _rc) = c.device_ptr_mut(&main);
        self.epoch += 1;
        let buf = (self.epoch % 2) as usize;
        let call = CallPtrs {
            c: pc,
            a: pa,
            bt: pb,
            buf,
            gathered: self.gathered[buf].as_device_ptr(),
        };
        self.pgas.cuda().bind_to_thread()?;
        if self.off_node.is_some() {
            return self.run_off_node(&main, call);
        }
        let pieces = self.pieces();
        if np > 1 {
            self.start_copies(&main)?;
        }
        if let (true, Some(pieces)) = (np > 1, pieces) {
            // The first piece to every peer before the launch, so the copy engines start at
            // once; the kernel starts on this PE's rows while the host enqueues the rest.
            let groups = copy_groups(pieces);
            self.push_pieces(call, &groups[..1])?;
            let launched = self.run_fused(call);
            // Pushed even if the launch failed: the peers' kernels wait for every piece.
            self.push_pieces(call, &groups[1..])?;
            self.record_pushes()?;
            // The copy streams' reads of the shard are ordered before the call's end.
            self.join_copies(&main)?;
            return launched;
        }
        let one_kernel = pieces.is_some();
        if np > 1 {
            self.pull_shards(call)?;
        }
        if one_kernel {
            // One PE: nothing to gather.
            return self.run_fused(call);
        }
        self.shard_gemms(&main, call)
    }

    /// Bytes of a shard (`mp x k` bf16), which is also one PE's block of a gathered buffer.
    fn shard_bytes(&self) -> usize {
        self.mp * self.k * 2
    }

    /// A call where a peer is off NVLink: this PE's shard into its symmetric copy, NVSHMEM's
    /// `fcollect` of every PE's into the call's gathered buffer, then one cuBLAS GEMM, all on the
    /// pgas stream (`main`). `run` checked the buffers' sizes.
    fn run_off_node(&mut self, main: &CudaStream, call: CallPtrs) -> Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        let m = mp * self.pgas.n_pes();
        let block_bytes = self.shard_bytes();
        let mine = self
            .off_node
            .as_ref()
            .expect("run_off_node runs where a peer is off NVLink");
        // SAFETY: the shard holds `block_bytes` (checked by `run`), as does `mine`; both are
        // ordered on the pgas stream, where NVSHMEM's fcollect and the GEMM follow.
        unsafe {
            cu::cuMemcpyDtoDAsync_v2(mine.as_device_ptr(), call.a, block_bytes, main.cu_stream())
                .result()
                .map_err(Error::cuda("copying the shard into symmetric memory"))?;
        }
        self.pgas
            .fcollect(Team::WORLD, &self.gathered[call.buf], mine)?;
        // SAFETY: the gathered buffer holds m x k, Bt n x k and C m x n (checked by `run`),
        // all ordered on the pgas stream.
        unsafe {
            self.blas
                .gemm_bf16_nt_raw(main, call.c, call.gathered, call.bt, (m, n, k))
        }
    }

    /// The copy streams of a call on the per-shard paths: the stream of distance 1 puts the
    /// shard in place in this PE's block of the call's gathered buffer and signals every peer;
    /// stream `j` waits for PE `me + j`'s signal and pulls its block, then records
    /// `landed[j - 1]`.
    fn pull_shards(&mut self, call: CallPtrs) -> Result<()> {
        let (me, np) = (self.pgas.my_pe(), self.pgas.n_pes());
        let (gathered, block_bytes) = (call.gathered, self.shard_bytes());
        // The stream of distance 1 puts the shard in place for every peer.
        let copy = self.copies[0].cu_stream();
        // SAFETY: the shard holds `block_bytes` (checked by `run`) and this PE's block of the
        // gathered buffer is as large; no peer reads it before the words below, and the
        // last readers of this buffer (call e - 2) are done (module documentation). The
        // words are symmetric u64s mapped here.
        unsafe {
            cu::cuMemcpyDtoDAsync_v2(
                row_block(gathered, me, block_bytes),
                call.a,
                block_bytes,
                copy,
            )
            .result()
            .map_err(Error::cuda("copying the shard into the gathered buffer"))?;
            for (pe, &word) in self.flag_ptrs.iter().enumerate() {
                if pe != me {
                    stream_sync::stream_word(
                        copy,
                        word,
                        stream_sync::Word::Write(self.epoch),
                        "signalling a peer that the shard is in place",
                    )?;
                }
            }
        }
        let words = self.flags.as_device_ptr();
        for (j, (landed, stream)) in (1..np).zip(self.landed.iter().zip(&self.copies)) {
            let copy = stream.cu_stream();
            let src = (me + j) % np;
            let from = row_block(self.peer_ptrs[call.buf][src], src, block_bytes);
            // SAFETY: word `src` is this PE's symmetric u64; both block addresses name PE
            // `src`'s block of this call's gathered buffer (the peer's copy, mapped here, and
            // this PE's), which PE `src` filled before writing the word, and nobody writes
            // until the next call of this parity.
            unsafe {
                stream_sync::stream_word(
                    copy,
                    words + 8 * src as u64,
                    stream_sync::Word::AtLeast(self.epoch),
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
        Ok(())
    }

    /// The per-shard GEMMs of a call on the pgas stream (`main`): this PE's rows of C first,
    /// then each peer's as its block lands (`landed`). `run` checked the buffers' sizes.
    fn shard_gemms(&mut self, main: &CudaStream, call: CallPtrs) -> Result<()> {
        let (me, np) = (self.pgas.my_pe(), self.pgas.n_pes());
        let block_bytes = self.shard_bytes();
        let c_block = self.mp * self.n * 2;
        // SAFETY: the shard, Bt and C's rows of this PE hold mp x k, n x k and mp x n (checked
        // by `run`), ordered on the pgas stream.
        unsafe {
            self.shard_gemm(main, row_block(call.c, me, c_block), call.a, call.bt)?;
        }
        for j in 1..np {
            let src = (me + j) % np;
            main.wait(&self.landed[j - 1])
                .map_err(Error::cuda("waiting for a peer's shard"))?;
            // SAFETY: PE `src`'s block of the gathered buffer has landed (the event above) and
            // holds mp x k; C's rows of PE `src` hold mp x n.
            unsafe {
                self.shard_gemm(
                    main,
                    row_block(call.c, src, c_block),
                    row_block(call.gathered, src, block_bytes),
                    call.bt,
                )?;
            }
        }
        Ok(())
    }
}
