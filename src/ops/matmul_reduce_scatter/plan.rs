//! The plan: [`MatmulReduceScatter`]'s staging buffers, signals, streams and events, made
//! collectively (`new`, `with_splits`), the GEMM it runs (`set_gemm`), and the one-call form.

use super::MatmulReduceScatter;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;

use super::kernels::THREADS;
use super::sizes::{heap_need, shape_error, splits_for};
use crate::gemm::{self};
use crate::ops::cublas::Cublas;
use crate::ops::gemm_path::{
    agree_path, agree_prepared, off_nvlink, start_on_fastest, Fused, GemmPath,
};
use crate::ops::peers::addresses;
use crate::prelude::*;
use crate::{Error, Result};

/// Where one peer's staging buffer and signal words are in this process (`nvshmem_ptr`).
#[derive(Clone, Copy, Debug)]
pub(super) struct PeerAddrs {
    pub(super) staging: CUdeviceptr,
    pub(super) arrive: CUdeviceptr,
    pub(super) ack: CUdeviceptr,
}

/// How the one kernel tells the copy and reduction streams that a chunk of the partial product
/// is written: word `owner * splits + j` grows as the kernel finishes chunk `j` of `owner`'s
/// rows, by one for each multiplying warpgroup's part of each of its tiles.
pub(super) struct Finished {
    /// A word a chunk, this PE's only. In the symmetric heap because stream memory operations
    /// refuse memory of the stream-ordered allocator that cudarc allocates from.
    pub(super) words: SymTensor<u64>,
    /// `words` as a cudarc buffer for the kernel's `landed` argument; never freed through it
    /// (NVSHMEM owns the memory). The streams that wait on the words name them by address.
    pub(super) view: ManuallyDrop<CudaSlice<u64>>,
    /// What every word holds once the one kernel's last call has finished it.
    pub(super) target: u64,
}

impl Drop for Finished {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `leak` gives the pointer back without freeing it.
        unsafe { ManuallyDrop::take(&mut self.view) }.leak();
    }
}

/// The refusal of a bad argument.
fn refuse<T>(value: String, reason: String) -> Result<T> {
    Err(Error::InvalidConfig {
        name: "matmul_reduce_scatter",
        value,
        reason,
    })
}

impl MatmulReduceScatter {
    /// Sets up `out (M/P x N) = this PE's rows of sum over PEs of A Btᵀ` for `a` (M x K/P) and
    /// `bt` (N x K/P), `(m, n, k_local)` being M, N and K/P. Collective: every PE calls it at the
    /// same point. Shapes that differ between PEs ([`crate::ops::agree::agree`]), that do not
    /// divide (see [`shape_error`]), a symmetric heap smaller than
    /// [`heap_bytes`](super::heap_bytes), no cuBLAS, or a GPU without 64-bit stream memory
    /// operations are the same `Err` on every PE, before anything launches. Where a peer is off NVLink (or `PGAS_PEER_ACCESS` says so), every PE agrees on
    /// it and calls take the off-node path instead: the whole product by one GEMM, NVSHMEM's
    /// reduce-scatter (its proxy carries what no mapping reaches; it adds in bf16), this PE's rows
    /// copied out; it takes M x N + M/P x N more bf16 of symmetric heap (a heap too small for it
    /// is `HeapExhausted` on every PE).
    pub fn new(pgas: &Pgas, shape: (usize, usize, usize)) -> Result<Self> {
        Self::with_splits(pgas, shape, None)
    }

    /// [`MatmulReduceScatter::new`] with `splits` chunks per owner (`None`: [`splits_for`]), a
    /// tuning knob: more chunks start the first copy and the last reduction sooner, fewer keep
    /// cuBLAS's GEMMs larger. It must divide M / P, and be the same on every PE.
    pub fn with_splits(
        pgas: &Pgas, (m, n, k_local): (usize, usize, usize), splits: Option<usize>,
    ) -> Result<Self> {
        let pes = pgas.n_pes();
        let splits = checked_splits(pgas, (m, n, k_local), splits)?;
        // cuBLAS on every PE or on none: a PE without it must not leave the others waiting.
        let blas = Cublas::new(pgas.cuda());
        crate::ops::agree::agree(
            pgas,
            "matmul_reduce_scatter",
            &[("cuBLAS loaded", blas.is_ok() as u64)],
        )?;
        let blas = blas?;
        let mp = m / pes;
        let stream = pgas.stream();
        // One PE multiplies straight into `out`: no partial product.
        let partial = stream.alloc_zeros::<bf16>(if pes > 1 { m * n } else { 8 })?;
        let staging = pgas.alloc::<bf16>((pes.max(2) - 1) * mp * n)?;
        let arrive = pgas.alloc::<u64>(pes * splits)?;
        let ack = pgas.alloc::<u64>(pes * splits)?;
        let finished = Finished::new(pgas, pes * splits)?;
        let off_node = off_node_buffers(pgas, &staging, (m, n))?;
        let peers = peer_addrs(&staging, &arrive, &ack, pes)?;
        // The reduction stream and one copy stream a peer.
        let mut streams = priority_streams(pgas, pes)?;
        let comm = streams.remove(0);
        let sends = streams;
        let new_events = |count| {
            (0..count)
                .map(|_| pgas.cuda().new_event(None))
                .collect::<std::result::Result<Vec<_>, _>>()
        };
        let events = new_events(pes * splits + 2)?;
        let sent = new_events(sends.len())?;
        let reduce_cfg = reduce_config(pgas, mp / splits * n)?;
        let mut op = MatmulReduceScatter {
            m,
            n,
            k: k_local,
            me: pgas.my_pe(),
            pes,
            splits,
            blas,
            comm,
            sends,
            partial,
            staging,
            arrive,
            ack,
            peers,
            events,
            sent,
            epoch: 0,
            reduce_cfg,
            gemm: None,
            finished,
            per_call: None,
            off_node,
        };
        let fastest = (Fused::MatmulReduceScatter, pes, mp);
        start_on_fastest(fastest, |path| op.set_gemm(pgas, path))?;
        Ok(op)
    }

    /// The GEMM calls run ([`GemmPath`]): the one `new` started on (the path measured fastest
    /// where it can run, else cuBLAS), or the last `set_gemm`'s. On one PE both pgas paths are
    /// one launch over all of M, reported as [`GemmPath::PgasPerShard`].
    pub fn gemm_path(&self) -> GemmPath {
        match (self.gemm, self.per_call) {
            (None, _) => GemmPath::Cublas,
            (Some(_), Some(_)) => GemmPath::PgasOneKernel,
            (Some(_), None) => GemmPath::PgasPerShard,
        }
    }

    /// Picks the GEMM of later calls: [`GemmPath::Cublas`],
    /// [`GemmPath::PgasPerShard`], one `pgas::gemm` launch per chunk, or
    /// [`GemmPath::PgasOneKernel`], one persistent `pgas::gemm` kernel for the whole partial
    /// product that takes the chunks in the same order and announces each as it finishes it,
    /// so its copy starts while the kernel computes the next (sm_90a; chunk rows a multiple of
    /// 128, N and K / P whole tiles, every peer on NVLink). Collective: the PEs agree on the
    /// path first, so a PE that asks for another, or where it cannot run, is the same `Err` on
    /// every PE and nothing changes.
    pub fn set_gemm(&mut self, pgas: &Pgas, path: GemmPath) -> Result<()> {
        if self.off_node.is_some() && path != GemmPath::Cublas {
            // Every PE agreed on `off_node` in `new`, so every PE refuses.
            return Err(off_nvlink(
                "matmul_reduce_scatter with the pgas GEMM",
                "a call is one GEMM of all of M and NVSHMEM's reduce-scatter",
            ));
        }
        let chunk = self.m / self.pes / self.splits;
        let one_kernel = path == GemmPath::PgasOneKernel && self.pes > 1;
        // One PE, or one kernel, multiplies all of A at once; else a chunk at a time.
        let rows = if self.pes == 1 || one_kernel {
            self.m
        } else {
            chunk
        };
        let offered = [
            GemmPath::Cublas,
            GemmPath::PgasPerShard,
            GemmPath::PgasOneKernel,
        ];
        let what = "matmul_reduce_scatter with the pgas GEMM";
        let shape = (rows, self.n, self.k);
        // A cluster of tiles must not straddle a chunk (on one PE there is one block of rows).
        let unit = if self.pes == 1 { self.m } else { chunk };
        let Some(mut cfg) = agree_path(pgas, what, path, &offered, shape, unit)? else {
            self.gemm = None;
            self.per_call = None;
            return Ok(());
        };
        let rows_order = if one_kernel {
            gemm::Chunking::Scatter
        } else {
            gemm::Chunking::Whole
        };
        // Asked once here (it compiles the kernel if need be), not at every call.
        let clusters =
            gemm::persistent_clusters(pgas, cfg, (rows, self.n), (rows_order, false), false);
        cfg.clusters = Some(agree_prepared(pgas, "matmul_reduce_scatter", clusters)?);
        self.per_call =
            one_kernel.then_some((2 * (chunk / gemm::BM) * (self.n / cfg.bn as usize)) as u64);
        self.gemm = Some(cfg);
        Ok(())
    }

    /// `C = A Btᵀ` for `rows` rows on `stream`, by cuBLAS or by `pgas::gemm`.
    ///
    /// # Safety
    /// `c`, `a` and `b` name `rows x n`, `rows x k` and `n x k` bf16 elements ordered on
    /// `stream`.
    pub(super) unsafe fn gemm(
        &self, pgas: &Pgas, stream: &CudaStream,
        (c, a, b): (CUdeviceptr, CUdeviceptr, CUdeviceptr), rows: usize,
    ) -> Result<()> {
        let shape = (rows, self.n, self.k);
        match self.gemm {
            // SAFETY: the caller's contract: `c`, `a`, `b` have these shapes, ordered on `stream`.
            None => unsafe { self.blas.gemm_bf16_nt_raw(stream, c, a, b, shape) },
            // SAFETY: the same contract, which is gemm_raw_with's for these shapes.
            Some(cfg) => unsafe { gemm::gemm_raw_with(pgas, stream, (c, a, b), shape, cfg, false) },
        }
    }

    /// Chunks per owner (see the module documentation).
    pub fn splits(&self) -> usize {
        self.splits
    }
}

impl Finished {
    /// `count` words, zero, in the symmetric heap (a collective allocation).
    fn new(pgas: &Pgas, count: usize) -> Result<Finished> {
        let words = pgas.alloc::<u64>(count)?;
        // SAFETY: `words` holds `count` words and lives in the plan as long as the view,
        // which never frees it (Finished's Drop).
        let view = ManuallyDrop::new(unsafe {
            pgas.stream()
                .upgrade_device_ptr::<u64>(words.as_device_ptr(), count)
        });
        Ok(Finished {
            words,
            view,
            target: 0,
        })
    }
}

/// The off-node path's buffers (`MatmulReduceScatter::off_node`) for an `(m, n)` product,
/// where some PE cannot reach a peer's `staging`; `None` where every PE reaches every peer.
/// Collective: the PEs agree on it first, so all allocate or none.
fn off_node_buffers(
    pgas: &Pgas, staging: &SymTensor<bf16>, (m, n): (usize, usize),
) -> Result<Option<(SymTensor<bf16>, SymTensor<bf16>)>> {
    let pes = pgas.n_pes();
    let unreachable = pgas.first_unreachable(staging, 0..pes)?;
    crate::ops::agree::agree(
        pgas,
        "matmul_reduce_scatter",
        &[(
            "every peer reachable by NVLink",
            unreachable.is_none() as u64,
        )],
    )?;
    Ok(match unreachable {
        Some(_) => Some((pgas.alloc::<bf16>(m * n)?, pgas.alloc::<bf16>(m / pes * n)?)),
        None => None,
    })
}

/// Where each of the `pes` PEs' `staging`, `arrive` and `ack` are in this process.
fn peer_addrs(
    staging: &SymTensor<bf16>, arrive: &SymTensor<u64>, ack: &SymTensor<u64>, pes: usize,
) -> Result<Vec<PeerAddrs>> {
    let (s, a, k) = (
        addresses(staging, pes)?,
        addresses(arrive, pes)?,
        addresses(ack, pes)?,
    );
    Ok((0..pes)
        .map(|pe| PeerAddrs {
            staging: s[pe],
            arrive: a[pe],
            ack: k[pe],
        })
        .collect())
}

/// `count` new streams at the highest priority: the reduction stream's kernels take SMs as
/// soon as cuBLAS's blocks free them, and the copy streams' stream memory operations are not
/// queued behind cuBLAS's blocks.
fn priority_streams(pgas: &Pgas, count: usize) -> Result<Vec<Arc<CudaStream>>> {
    let (_, greatest) = cudarc::driver::result::stream::get_priority_range()?;
    Ok((0..count)
        .map(|_| pgas.cuda().new_stream_with_priority(greatest))
        .collect::<std::result::Result<Vec<_>, _>>()?)
}

/// The reduction kernel's launch for chunks of `elements`: 4 vectors of 8 elements a thread,
/// at most a block per SM.
fn reduce_config(pgas: &Pgas, elements: usize) -> Result<LaunchConfig> {
    let chunk_vectors = elements / 8;
    let blocks = chunk_vectors.div_ceil(THREADS as usize * 4).max(1) as u32;
    Ok(LaunchConfig::blocks(
        blocks.min(pgas.sm_count()? as u32),
        THREADS,
    ))
}

/// The chunks per owner of a plan of `(m, n, k_local)` (`splits`, or [`splits_for`]'s choice),
/// after the checks every PE makes alike: the shape and chunk count agreed across PEs, 64-bit
/// stream memory operations, a shape that divides, chunks that divide M / P, a heap that holds
/// the staging buffers.
fn checked_splits(
    pgas: &Pgas, (m, n, k_local): (usize, usize, usize), splits: Option<usize>,
) -> Result<usize> {
    let pes = pgas.n_pes();
    let splits = splits.unwrap_or_else(|| splits_for(m / pes));
    crate::ops::agree::agree(
        pgas,
        "matmul_reduce_scatter",
        &[
            ("M", m as u64),
            ("N", n as u64),
            ("K / P", k_local as u64),
            ("chunks per owner", splits as u64),
            ("symmetric heap bytes", pgas.heap_size() as u64),
        ],
    )?;
    crate::ops::stream_sync::require_stream_mem_ops(pgas, "matmul_reduce_scatter")?;
    let shape = format!("{m} x {n} x {k_local} (M x N x K / P) on {pes} PEs");
    if let Some(why) = shape_error(m, n, k_local, pes) {
        return refuse(shape, why);
    }
    if splits == 0 || !(m / pes).is_multiple_of(splits) {
        return refuse(
            shape,
            format!(
                "{splits} chunks per owner do not divide its M / P = {} rows. Fix: a divisor \
                     of M / P, or None",
                m / pes
            ),
        );
    }
    let need = heap_need(m, n, pes, splits);
    if need > pgas.heap_size() {
        return refuse(
            shape,
            format!(
                "the staging buffers need {need} bytes of symmetric heap per PE, the heap has \
                     {}. Fix: a larger heap (pgas::builder().heap_size(..) or \
                     NVSHMEM_SYMMETRIC_SIZE)",
                pgas.heap_size()
            ),
        );
    }
    Ok(splits)
}

impl Drop for MatmulReduceScatter {
    fn drop(&mut self) {
        // Copies and reductions may still be in flight on the other streams; the buffers they
        // use are freed after this.
        for stream in std::iter::once(&self.comm).chain(&self.sends) {
            let _ = stream.synchronize();
        }
    }
}

/// One GEMM + reduce-scatter with a plan made for it and dropped after: [`MatmulReduceScatter`]
/// (`new`, then `run`), for a single call. Collective; allocates and checks the shape across
/// PEs every time (milliseconds), so keep a [`MatmulReduceScatter`] for repeated calls.
pub fn matmul_reduce_scatter(
    pgas: &Pgas, out: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>, bt: &CudaSlice<bf16>,
    shape: (usize, usize, usize),
) -> Result<()> {
    let mut op = MatmulReduceScatter::new(pgas, shape)?;
    op.run(pgas, pgas.stream(), out, a, bt)?;
    pgas.stream()
        .synchronize()
        .map_err(Error::cuda("finishing matmul_reduce_scatter"))
}
