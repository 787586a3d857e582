//! A call of [`MatmulReduceScatter`]: `run` checks the buffers and picks the path (one GEMM
//! on one PE, the whole product and NVSHMEM's reduce-scatter where a peer is off NVLink, or the
//! chunks); for each chunk the owner's rows are sent to it (`send_chunk`) or, on the owner,
//! added to the staged parts (`reduce_chunk`).

use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;

use super::kernels::add_parts;
use super::MatmulReduceScatter;
use crate::gemm;
use crate::ops::stream_sync;
use crate::prelude::*;
use crate::{Error, Result, TensorMap};

impl MatmulReduceScatter {
    /// `out` (M/P x N) = this PE's rows of `sum over PEs of A Btᵀ`, with `a` (M x K/P) and `bt`
    /// (N x K/P) this PE's slices, enqueued on `stream` (no host sync). Collective: every PE
    /// calls it, its calls in the same order on every PE. Buffers whose lengths do not match
    /// the shape given to [`MatmulReduceScatter::new`] are refused before anything is enqueued,
    /// and so is, on more than one PE, a `stream` being captured into a CUDA graph (the call's
    /// number is on the host: a replay would not wait for the peers).
    pub fn run(
        &mut self, pgas: &Pgas, stream: &Arc<CudaStream>, out: &mut CudaSlice<bf16>,
        a: &CudaSlice<bf16>, bt: &CudaSlice<bf16>,
    ) -> Result<()> {
        let (m, n, k, pes) = (self.m, self.n, self.k, self.pes);
        let mp = m / pes;
        crate::ops::lengths::exactly(&[
            ("matmul_reduce_scatter's A (M x K/P)", a.len(), m * k),
            ("matmul_reduce_scatter's Bt (N x K/P)", bt.len(), n * k),
            ("matmul_reduce_scatter's out (M/P x N)", out.len(), mp * n),
        ])?;
        if pes > 1 {
            stream_sync::refuse_capture(stream, "matmul_reduce_scatter")?;
        }
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = bt.device_ptr(stream);
        if self.off_node.is_some() {
            return self.run_off_node(pgas, stream, out, (pa, pb));
        }
        if pes == 1 {
            let (po, _wo) = out.device_ptr_mut(stream);
            // SAFETY: out is m x n, a m x k, bt n x k (checked above).
            return unsafe { self.gemm(pgas, stream, (po, pa, pb), m) };
        }
        self.run_chunks(pgas, stream, out, (pa, pb))
    }

    /// A call where a peer is off NVLink: the whole product, NVSHMEM's reduce-scatter (bf16
    /// sums), this PE's rows out, on `stream`. No overlap. `run` checked the buffers' sizes.
    fn run_off_node(
        &self, pgas: &Pgas, stream: &Arc<CudaStream>, out: &mut CudaSlice<bf16>,
        (pa, pb): (CUdeviceptr, CUdeviceptr),
    ) -> Result<()> {
        let (m, n) = (self.m, self.n);
        let mp = m / self.pes;
        let (full, mine) = self
            .off_node
            .as_ref()
            .expect("run_off_node runs where a peer is off NVLink");
        // SAFETY: `full` holds m x n, a m x k, bt n x k (checked by `run`), on `stream`.
        unsafe { self.gemm(pgas, stream, (full.as_device_ptr(), pa, pb), m)? };
        pgas.reduce_scatter_on(stream, Team::WORLD, ReduceOp::Sum, mine, full)?;
        let (po, _wo) = out.device_ptr_mut(stream);
        // SAFETY: `mine` and `out` hold mp x n bf16 (checked by `run`), ordered on `stream`.
        unsafe {
            cu::cuMemcpyDtoDAsync_v2(po, mine.as_device_ptr(), mp * n * 2, stream.cu_stream())
                .result()
                .map_err(Error::cuda("copying the reduced rows out"))
        }
    }

    /// The chunked call on more than one PE: each chunk's GEMM on `stream` (or the one kernel
    /// for all of them), then its copy to the owner on that owner's copy stream or, for this
    /// PE's own rows, the reduction into `out` on the reduction stream. `run` checked the
    /// buffers' sizes.
    fn run_chunks(
        &mut self, pgas: &Pgas, stream: &Arc<CudaStream>, out: &mut CudaSlice<bf16>,
        (pa, pb): (CUdeviceptr, CUdeviceptr),
    ) -> Result<()> {
        let (m, n, k, pes, me) = (self.m, self.n, self.k, self.pes, self.me);
        let mp = m / pes;
        self.epoch += 1;
        let (splits, rows) = (self.splits, mp / self.splits);
        let comm = self.comm.clone();
        // The reduction stream starts after the caller's earlier work (it writes `out`). The
        // copy streams need no start: they read this call's chunks (ordered by the chunk
        // events or words) into slots the owner has acknowledged.
        self.events[0].record(stream)?;
        comm.wait(&self.events[0])?;
        // The raw address: the copies read chunks of it on the other streams, ordered by the
        // chunk events or words below.
        let pp = self.partial.device_ptr_mut(stream).0;
        if let Some(per_call) = self.per_call {
            self.launch_one_kernel(pgas, stream, (pp, pa, pb), per_call)?;
        }
        let (chunk_events, end) = self.events[1..].split_at(pes * splits);
        for (c, event) in chunk_events.iter().enumerate() {
            let d = 1 + c / splits;
            let owner = (me + d) % pes;
            let j = c % splits;
            let row0 = owner * mp + j * rows;
            let chunk = pp + (row0 * n * 2) as CUdeviceptr;
            // The stream that moves the chunk (its owner's copy stream) or reduces it (this
            // PE's own rows) starts once the chunk is computed.
            let next = if owner != me {
                &self.sends[d - 1]
            } else {
                &comm
            };
            match self.per_call {
                // SAFETY: a word of the plan's `finished` words (P x splits of them).
                Some(_) => unsafe {
                    stream_sync::stream_word(
                        next.cu_stream(),
                        self.finished.words.as_device_ptr()
                            + ((owner * splits + j) * 8) as CUdeviceptr,
                        stream_sync::Word::AtLeast(self.finished.target),
                        "waiting for the kernel to finish a chunk",
                    )?
                },
                None => {
                    // SAFETY: rows row0.. of A (k wide) and of the M x N partial exist
                    // (row0 + rows <= m).
                    unsafe {
                        let a_rows = pa + (row0 * k * 2) as CUdeviceptr;
                        self.gemm(pgas, stream, (chunk, a_rows, pb), rows)?;
                    }
                    event.record(stream)?;
                    next.wait(event)?;
                }
            }
            if owner != me {
                self.send_chunk(next.cu_stream(), owner, j, chunk)?;
            } else {
                self.reduce_chunk(pgas, &comm, out, j)?;
            }
        }
        // The call ends on the caller's stream, after every copy and the reduction.
        for (send, sent) in self.sends.iter().zip(&self.sent) {
            sent.record(send)?;
            stream.wait(sent)?;
        }
        end[0].record(&comm)?;
        stream.wait(&end[0])?;
        Ok(())
    }

    /// The one kernel of a call on `stream`: the whole partial product (`pp`) from A and Bt,
    /// chunks in the loop's order (the next PE's first, this PE's last), each chunk's word
    /// raised as it is finished (by `per_call` in all).
    fn launch_one_kernel(
        &mut self, pgas: &Pgas, stream: &Arc<CudaStream>,
        (pp, pa, pb): (CUdeviceptr, CUdeviceptr, CUdeviceptr), per_call: u64,
    ) -> Result<()> {
        let (m, n, k, pes, me, splits) = (self.m, self.n, self.k, self.pes, self.me, self.splits);
        let cfg = self.gemm.expect("the one-kernel path has a pgas GEMM");
        // SAFETY: the partial product holds m x n, A m x k and Bt n x k (run checked A and
        // Bt); the kernel writes only the partial product, through its map.
        let (mut c_map, a_map, b_map) = unsafe {
            (
                TensorMap::from_device_ptr(pp, m * n, gemm::c_tile(m, n))?,
                TensorMap::from_device_ptr(pa, m * k, gemm::a_tile(m, k))?,
                TensorMap::from_device_ptr(pb, n * k, gemm::b_tile(n, k, cfg))?,
            )
        };
        let maps = gemm::Maps {
            c: &mut c_map,
            a: &a_map,
            b: &b_map,
            gathered: &a_map,
            w: None,
        };
        let chunk = m / pes / splits;
        let f = &mut self.finished;
        gemm::launch(
            pgas,
            stream,
            maps,
            gemm::Words {
                landed: Some((&mut f.view, 0)),
                group_of: None,
            },
            (m, n, k),
            (gemm::Chunking::Scatter, (chunk, (me + 1) % pes * splits, 1)),
            cfg,
            false,
            false,
        )?;
        // Counted once launched: the words grow by this much only if the kernel runs.
        f.target += per_call;
        Ok(())
    }

    /// On the copy stream `cs`: chunk `j` of `owner`'s rows (at `chunk` in the partial product)
    /// into this PE's slot of the owner's staging buffer, once the owner has read the slot's
    /// previous contents, then the owner's arrival word.
    fn send_chunk(
        &self, cs: cu::CUstream, owner: usize, j: usize, chunk: CUdeviceptr,
    ) -> Result<()> {
        let (n, pes, me, splits, epoch) = (self.n, self.pes, self.me, self.splits, self.epoch);
        let rows = self.m / pes / splits;
        let part = self.m / pes * n;
        let peer = self.peers[owner];
        let slot = (me + pes - owner - 1) % pes;
        let dst = peer.staging + ((slot * part + j * rows * n) * 2) as CUdeviceptr;
        let local_ack = self.ack.as_device_ptr();
        // SAFETY: the words are this plan's symmetric signals (P x splits each), the copy stays
        // within the owner's slot (chunk j of M/P x N) and the chunk.
        unsafe {
            if epoch > 1 {
                // The owner has read this slot's chunk of the previous call.
                stream_sync::stream_word(
                    cs,
                    local_ack + ((owner * splits + j) * 8) as CUdeviceptr,
                    stream_sync::Word::AtLeast(epoch - 1),
                    "waiting for a chunk's acknowledgement",
                )?;
            }
            cu::cuMemcpyDtoDAsync_v2(dst, chunk, rows * n * 2, cs)
                .result()
                .map_err(Error::cuda("copying a chunk to its owner"))?;
            stream_sync::stream_word(
                cs,
                peer.arrive + ((me * splits + j) * 8) as CUdeviceptr,
                stream_sync::Word::Write(epoch),
                "signalling a chunk to its owner",
            )
        }
    }

    /// On the reduction stream `comm`: once every peer's part of this PE's chunk `j` has arrived,
    /// adds them and this PE's own part into `out`, then acknowledges each peer's slot.
    fn reduce_chunk(
        &self, pgas: &Pgas, comm: &Arc<CudaStream>, out: &mut CudaSlice<bf16>, j: usize,
    ) -> Result<()> {
        let (n, pes, me, splits, epoch) = (self.n, self.pes, self.me, self.splits, self.epoch);
        let rows = self.m / pes / splits;
        let part = self.m / pes * n;
        let cs = comm.cu_stream();
        let local_arrive = self.arrive.as_device_ptr();
        for d in 1..pes {
            let src = (me + d) % pes;
            // SAFETY: a word of this plan's symmetric signals.
            unsafe {
                stream_sync::stream_word(
                    cs,
                    local_arrive + ((src * splits + j) * 8) as CUdeviceptr,
                    stream_sync::Word::AtLeast(epoch),
                    "waiting for a chunk from another PE",
                )?;
            }
        }
        let len = rows * n;
        // SAFETY: own0 + base + len <= m * n (the partial), base + len <= M/P x N (out),
        // (P - 1) * part is the staging length, and N % 8 == 0 keeps every vector within
        // a row and 16-byte aligned.
        unsafe {
            add_parts::launch_unchecked_on(
                pgas,
                comm,
                self.reduce_cfg,
                out,
                &self.partial,
                &self.staging,
                me * part,
                j * rows * n,
                len,
                part,
                pes - 1,
            )?;
        }
        for d in 1..pes {
            let src = (me + d) % pes;
            // SAFETY: a word of the source's copy of this plan's signals.
            unsafe {
                stream_sync::stream_word(
                    cs,
                    self.peers[src].ack + ((me * splits + j) * 8) as CUdeviceptr,
                    stream_sync::Word::Write(epoch),
                    "acknowledging a chunk",
                )?;
            }
        }
        Ok(())
    }
}
