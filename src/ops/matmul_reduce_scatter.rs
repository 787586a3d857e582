//! GEMM + reduce-scatter, overlapped: the row-parallel linear layer of tensor parallelism
//! (PyTorch async-TP's `fused_matmul_reduce_scatter`).
//!
//! Every PE `p` holds `A_p` (M x K/P, its slice of the inner dimension) and `Bt_p` (N x K/P, the
//! weights stored transposed), row-major `bf16`; PE `p` gets rows `[p M/P, (p + 1) M/P)` of
//! `sum_q A_q Bt_qᵀ` in `bf16` (products accumulated in `f32`, the parts added in `f32`).
//!
//! ```no_run
//! use pgas::ops::matmul_reduce_scatter::MatmulReduceScatter;
//! use pgas::prelude::*;
//!
//! # fn main() -> pgas::Result<()> {
//! let pgas = pgas::init()?;
//! let (m, n, k_local) = (8192, 8192, 8192 / pgas.n_pes());
//! let stream = pgas.stream();
//! let a = stream.alloc_zeros::<bf16>(m * k_local)?; // this PE's A_p
//! let bt = stream.alloc_zeros::<bf16>(n * k_local)?; // this PE's Bt_p
//! let mut out = stream.alloc_zeros::<bf16>(m / pgas.n_pes() * n)?;
//! // Collective: checks the shape on every PE, allocates the staging buffers once.
//! let mut op = MatmulReduceScatter::new(&pgas, (m, n, k_local))?;
//! for _ in 0..3 {
//!     op.run(&pgas, &mut out, &a, &bt)?; // on pgas.stream(), no host sync
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How
//! The rows of `A` go in chunks ordered by owner; the copy engine moves each finished chunk to its
//! owner over NVLink and a small pgas kernel adds the parts there, signalled with stream memory
//! operations. The protocol, and why a slot is never overwritten while read, are in
//! `docs/ops.md`, "GEMM + reduce-scatter".

use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;

use super::cublas::Cublas;
use super::gemm_path::{agree_path, GemmPath};
use super::peers::addresses;
use crate::gemm::{self, GemmConfig};
use crate::prelude::*;
use crate::{Error, Result};

/// Rows of one chunk the split aims for: big enough for cuBLAS to run near its peak, small
/// enough that the first copy starts early and the last reduction is short.
pub const CHUNK_ROWS: usize = 1024;
/// Most chunks per owner.
pub const MAX_SPLITS: usize = 4;
/// Threads per block of the reduction kernel.
const THREADS: u32 = 512;

/// The sum of this PE's part and the `slots` staged parts of rows `[base, base + len)` (element
/// offsets into an M/P x N matrix), 8 elements a thread step, into `out`. `own` is the local
/// M x N partial product; this PE's rows start at `own0`. Staged part `s` starts at `s * part`.
/// `len` is a multiple of 8 and every offset 16-byte aligned (N is a multiple of 8).
#[pgas_kernel(max_threads = 512)]
#[allow(clippy::too_many_arguments)]
pub fn add_parts(
    out: &mut CudaSlice<bf16>,
    own: &CudaSlice<bf16>,
    staging: &SymTensor<bf16>,
    own0: usize,
    base: usize,
    len: usize,
    part: usize,
    slots: usize,
) {
    let stride = (grid_dim_x() * block_dim_x()) as usize * 8;
    let mut i = base + global_thread_idx() * 8;
    while i < base + len {
        let x = load_vec16(&own[own0 + i]);
        let mut a0 = vec16_get(x, 0) as f32;
        let mut a1 = vec16_get(x, 1) as f32;
        let mut a2 = vec16_get(x, 2) as f32;
        let mut a3 = vec16_get(x, 3) as f32;
        let mut a4 = vec16_get(x, 4) as f32;
        let mut a5 = vec16_get(x, 5) as f32;
        let mut a6 = vec16_get(x, 6) as f32;
        let mut a7 = vec16_get(x, 7) as f32;
        for s in 0..slots {
            let y = load_vec16(&staging[s * part + i]);
            a0 += vec16_get(y, 0) as f32;
            a1 += vec16_get(y, 1) as f32;
            a2 += vec16_get(y, 2) as f32;
            a3 += vec16_get(y, 3) as f32;
            a4 += vec16_get(y, 4) as f32;
            a5 += vec16_get(y, 5) as f32;
            a6 += vec16_get(y, 6) as f32;
            a7 += vec16_get(y, 7) as f32;
        }
        let mut v = x;
        v = vec16_set(v, 0, a0 as bf16);
        v = vec16_set(v, 1, a1 as bf16);
        v = vec16_set(v, 2, a2 as bf16);
        v = vec16_set(v, 3, a3 as bf16);
        v = vec16_set(v, 4, a4 as bf16);
        v = vec16_set(v, 5, a5 as bf16);
        v = vec16_set(v, 6, a6 as bf16);
        v = vec16_set(v, 7, a7 as bf16);
        store_vec16(&mut out[i], v);
        i += stride;
    }
}

/// Why `(m, n, k_local)` cannot run on `pes` PEs, if it cannot: M must split into `pes` equal
/// parts, N and K / P must be multiples of 8 (16-byte rows, for the copies and for cuBLAS).
pub fn shape_error(m: usize, n: usize, k_local: usize, pes: usize) -> Option<String> {
    let mut bad = Vec::new();
    if m == 0 || !m.is_multiple_of(pes) {
        bad.push(format!(
            "M = {m} is not a positive multiple of the {pes} PEs (each PE gets M / P rows)"
        ));
    }
    for (name, v) in [("N", n), ("K / P", k_local)] {
        if v == 0 || !v.is_multiple_of(8) {
            bad.push(format!(
                "{name} = {v} is not a positive multiple of 8 (rows of 16 bytes)"
            ));
        }
    }
    (!bad.is_empty()).then(|| bad.join("; "))
}

/// Chunks per owner for M / P = `rows`: about [`CHUNK_ROWS`] rows each, at most [`MAX_SPLITS`],
/// a divisor of `rows`.
pub fn splits_for(rows: usize) -> usize {
    let want = (rows / CHUNK_ROWS).clamp(1, MAX_SPLITS);
    (1..=want)
        .rev()
        .find(|s| rows.is_multiple_of(*s))
        .unwrap_or(1)
}

/// Symmetric heap bytes a [`MatmulReduceScatter`] of this shape takes on each PE: `P - 1` staging
/// slots of M / P x N `bf16` and two signal words per chunk.
pub fn heap_bytes(m: usize, n: usize, pes: usize) -> usize {
    heap_need(m, n, pes, splits_for(m / pes.max(1)))
}

/// [`heap_bytes`] with `splits` chunks per owner.
fn heap_need(m: usize, n: usize, pes: usize, splits: usize) -> usize {
    (pes.max(2) - 1) * (m / pes.max(1)) * n * 2 + 2 * pes * splits * 8
}

/// Where one peer's staging buffer and signal words are in this process (`nvshmem_ptr`).
#[derive(Clone, Copy, Debug)]
struct PeerAddrs {
    staging: CUdeviceptr,
    arrive: CUdeviceptr,
    ack: CUdeviceptr,
}

/// A GEMM + reduce-scatter of one shape, set up once (collectively) and run many times. See
/// the module documentation for what it computes and how.
pub struct MatmulReduceScatter {
    m: usize,
    n: usize,
    k: usize,
    me: usize,
    pes: usize,
    splits: usize,
    blas: Cublas,
    comm: Arc<CudaStream>,
    /// The whole M x N partial product of this PE (the chunks the copies read).
    partial: CudaSlice<bf16>,
    /// `P - 1` slots of M / P x N: slot `(src - me - 1) mod P` holds PE `src`'s part.
    staging: SymTensor<bf16>,
    /// On the owner, word `src * splits + j`: the call whose chunk `j` PE `src` delivered.
    arrive: SymTensor<u64>,
    /// On the source, word `owner * splits + j`: the call whose chunk `j` the owner has read.
    ack: SymTensor<u64>,
    peers: Vec<PeerAddrs>,
    /// One event per chunk (compute stream to copy stream) and the two joins.
    events: Vec<CudaEvent>,
    epoch: u64,
    /// The reduction's launch (the same for every chunk: `M/P/splits x N` elements).
    reduce_cfg: LaunchConfig,
    /// The `pgas::gemm` specialization of the chunks' GEMMs; `None`: cuBLAS.
    gemm: Option<GemmConfig>,
    /// Where a peer is off NVLink: the whole product (M x N) and this PE's rows (M/P x N),
    /// symmetric, for NVSHMEM's reduce-scatter (its proxy carries what no mapping reaches).
    off_node: Option<(SymTensor<bf16>, SymTensor<bf16>)>,
}

impl std::fmt::Debug for MatmulReduceScatter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatmulReduceScatter")
            .field("shape", &(self.m, self.n, self.k))
            .field("pes", &self.pes)
            .field("splits", &self.splits)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
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
    /// same point. Shapes that differ between PEs ([`super::agree::agree`]), that do not divide (see
    /// [`shape_error`]), a symmetric heap smaller than [`heap_bytes`], no cuBLAS, or a GPU
    /// without 64-bit stream memory operations are the same `Err` on every PE, before anything
    /// launches. Where a peer is off NVLink (or `PGAS_PEER_ACCESS` says so), every PE agrees on
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
        pgas: &Pgas,
        (m, n, k_local): (usize, usize, usize),
        splits: Option<usize>,
    ) -> Result<Self> {
        let pes = pgas.n_pes();
        let splits = splits.unwrap_or_else(|| splits_for(m / pes));
        super::agree::agree(
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
        super::stream_sync::require_stream_mem_ops(pgas, "matmul_reduce_scatter")?;
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
        // cuBLAS on every PE or on none: a PE without it must not leave the others waiting.
        let blas = Cublas::new(pgas.cuda());
        super::agree::agree(
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
        let unreachable = pgas.first_unreachable(&staging, 0..pes)?;
        super::agree::agree(
            pgas,
            "matmul_reduce_scatter",
            &[(
                "every peer reachable by NVLink",
                unreachable.is_none() as u64,
            )],
        )?;
        // Every PE agreed on it, so all allocate (a collective step) or none.
        let off_node = match unreachable {
            Some(_) => Some((pgas.alloc::<bf16>(m * n)?, pgas.alloc::<bf16>(mp * n)?)),
            None => None,
        };
        let (s, a, k) = (
            addresses(&staging, pes)?,
            addresses(&arrive, pes)?,
            addresses(&ack, pes)?,
        );
        let peers = (0..pes)
            .map(|pe| PeerAddrs {
                staging: s[pe],
                arrive: a[pe],
                ack: k[pe],
            })
            .collect();
        let ctx = pgas.cuda();
        // The copy stream at the highest priority: its reduction kernels take SMs as soon as
        // cuBLAS's blocks free them.
        let (_, greatest) = cudarc::driver::result::stream::get_priority_range()?;
        let comm = ctx.new_stream_with_priority(greatest)?;
        let events = (0..pes * splits + 2)
            .map(|_| ctx.new_event(None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // 4 vectors of 8 elements a thread, at most a block per SM.
        let chunk_vectors = mp / splits * n / 8;
        let blocks = chunk_vectors.div_ceil(THREADS as usize * 4).max(1) as u32;
        let reduce_cfg = LaunchConfig::blocks(blocks.min(pgas.sm_count()? as u32), THREADS);
        Ok(MatmulReduceScatter {
            m,
            n,
            k: k_local,
            me: pgas.my_pe(),
            pes,
            splits,
            blas,
            comm,
            partial,
            staging,
            arrive,
            ack,
            peers,
            events,
            epoch: 0,
            reduce_cfg,
            gemm: None,
            off_node,
        })
    }

    /// Picks the GEMM of later calls: [`GemmPath::Cublas`] (the default) or
    /// [`GemmPath::PgasPerShard`], one `pgas::gemm` launch per chunk (sm_90a; chunk rows a
    /// multiple of 128, N and K / P whole tiles). Collective: the PEs agree on the path first,
    /// so a PE that asks for another, or where it cannot run, is the same `Err` on every PE and
    /// nothing changes.
    pub fn set_gemm(&mut self, pgas: &Pgas, path: GemmPath) -> Result<()> {
        // One PE multiplies all of A at once; more, a chunk at a time.
        let rows = if self.pes == 1 {
            self.m
        } else {
            self.m / self.pes / self.splits
        };
        let offered = [GemmPath::Cublas, GemmPath::PgasPerShard];
        let what = "matmul_reduce_scatter with the pgas GEMM";
        let shape = (rows, self.n, self.k);
        let Some(mut cfg) = agree_path(pgas, what, path, &offered, shape, rows)? else {
            self.gemm = None;
            return Ok(());
        };
        // Asked once here (it compiles the kernel if need be), not at every call.
        cfg.clusters = Some(gemm::persistent_clusters(
            pgas,
            cfg,
            (rows, self.n),
            (false, false),
            false,
        )?);
        self.gemm = Some(cfg);
        Ok(())
    }

    /// `C = A Btᵀ` for `rows` rows on `stream`, by cuBLAS or by `pgas::gemm`.
    ///
    /// # Safety
    /// `c`, `a` and `b` name `rows x n`, `rows x k` and `n x k` bf16 elements ordered on
    /// `stream`.
    unsafe fn gemm(
        &self,
        pgas: &Pgas,
        stream: &CudaStream,
        (c, a, b): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
        rows: usize,
    ) -> Result<()> {
        let shape = (rows, self.n, self.k);
        match self.gemm {
            // SAFETY: the caller's contract: `c`, `a`, `b` have these shapes, ordered on `stream`.
            None => unsafe { self.blas.gemm_bf16_nt_raw(stream, c, a, b, shape) },
            // SAFETY: the same contract, which is gemm_bf16_raw's for these shapes.
            Some(cfg) => unsafe { gemm::gemm_bf16_raw(pgas, stream, (c, a, b), shape, cfg) },
        }
    }

    /// Chunks per owner (see the module documentation).
    pub fn splits(&self) -> usize {
        self.splits
    }

    /// Runs it on [`Pgas::stream`]; see [`MatmulReduceScatter::run_on`].
    pub fn run(
        &mut self,
        pgas: &Pgas,
        out: &mut CudaSlice<bf16>,
        a: &CudaSlice<bf16>,
        bt: &CudaSlice<bf16>,
    ) -> Result<()> {
        let stream = pgas.stream().clone();
        self.run_on(pgas, &stream, out, a, bt)
    }

    /// `out` (M/P x N) = this PE's rows of `sum over PEs of A Btᵀ`, with `a` (M x K/P) and `bt`
    /// (N x K/P) this PE's slices, enqueued on `stream` (no host sync). Collective: every PE
    /// calls it, its calls in the same order on every PE. Buffers whose lengths do not match
    /// the shape given to [`MatmulReduceScatter::new`] are refused before anything is enqueued,
    /// and so is, on more than one PE, a `stream` being captured into a CUDA graph (the call's
    /// number is on the host: a replay would not wait for the peers).
    pub fn run_on(
        &mut self,
        pgas: &Pgas,
        stream: &Arc<CudaStream>,
        out: &mut CudaSlice<bf16>,
        a: &CudaSlice<bf16>,
        bt: &CudaSlice<bf16>,
    ) -> Result<()> {
        let (m, n, k, pes, me) = (self.m, self.n, self.k, self.pes, self.me);
        let mp = m / pes;
        for (what, got, expected) in [
            ("matmul_reduce_scatter's A (M x K/P)", a.len(), m * k),
            ("matmul_reduce_scatter's Bt (N x K/P)", bt.len(), n * k),
            ("matmul_reduce_scatter's out (M/P x N)", out.len(), mp * n),
        ] {
            if got != expected {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected,
                });
            }
        }
        if pes > 1 {
            super::stream_sync::refuse_capture(stream, "matmul_reduce_scatter")?;
        }
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = bt.device_ptr(stream);
        if let Some((full, mine)) = &self.off_node {
            // A peer off NVLink: the whole product, NVSHMEM's reduce-scatter (bf16 sums), this
            // PE's rows out. No overlap.
            // SAFETY: `full` holds m x n, a m x k, bt n x k (checked above), on `stream`.
            unsafe { self.gemm(pgas, stream, (full.as_device_ptr(), pa, pb), m)? };
            pgas.reduce_scatter_on(stream, Team::WORLD, ReduceOp::Sum, mine, full)?;
            let (po, _wo) = out.device_ptr_mut(stream);
            // SAFETY: `mine` and `out` hold mp x n bf16 (checked above), ordered on `stream`.
            return unsafe {
                cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
                    po,
                    mine.as_device_ptr(),
                    mp * n * 2,
                    stream.cu_stream(),
                )
                .result()
                .map_err(Error::cuda("copying the reduced rows out"))
            };
        }
        if pes == 1 {
            let (po, _wo) = out.device_ptr_mut(stream);
            // SAFETY: out is m x n, a m x k, bt n x k (checked above).
            return unsafe { self.gemm(pgas, stream, (po, pa, pb), m) };
        }
        self.epoch += 1;
        let epoch = self.epoch;
        let (splits, rows) = (self.splits, mp / self.splits);
        let chunk_bytes = rows * n * 2;
        let part = mp * n;
        let comm = self.comm.clone();
        // The copy stream starts after the caller's earlier work (it writes `out`).
        let (start, chunk_events) = self.events.split_at(1);
        let (chunk_events, end) = chunk_events.split_at(pes * splits);
        start[0].record(stream)?;
        comm.wait(&start[0])?;
        // The raw address: the copies read chunks of it on the other stream, ordered by the
        // chunk events below.
        let pp = self.partial.device_ptr_mut(stream).0;
        let local_arrive = self.arrive.as_device_ptr();
        let local_ack = self.ack.as_device_ptr();
        let cs = comm.cu_stream();
        for (c, event) in chunk_events.iter().enumerate() {
            let owner = (me + 1 + c / splits) % pes;
            let j = c % splits;
            let row0 = owner * mp + j * rows;
            let chunk = pp + (row0 * n * 2) as CUdeviceptr;
            // SAFETY: rows row0.. of A (k wide) and of the M x N partial exist (row0 + rows <= m).
            unsafe {
                let a_rows = pa + (row0 * k * 2) as CUdeviceptr;
                self.gemm(pgas, stream, (chunk, a_rows, pb), rows)?;
            }
            event.record(stream)?;
            comm.wait(event)?;
            if owner != me {
                let peer = self.peers[owner];
                let slot = (me + pes - owner - 1) % pes;
                let dst = peer.staging + ((slot * part + j * rows * n) * 2) as CUdeviceptr;
                // SAFETY: the words are this plan's symmetric signals (P x splits each), the
                // copy stays within the owner's slot (chunk j of M/P x N) and the chunk.
                unsafe {
                    if epoch > 1 {
                        // The owner has read this slot's chunk of the previous call.
                        super::stream_sync::stream_wait_geq(
                            cs,
                            local_ack + ((owner * splits + j) * 8) as CUdeviceptr,
                            epoch - 1,
                            "waiting for a chunk's acknowledgement",
                        )?;
                    }
                    cu::cuMemcpyDtoDAsync_v2(dst, chunk, chunk_bytes, cs)
                        .result()
                        .map_err(Error::cuda("copying a chunk to its owner"))?;
                    super::stream_sync::stream_write(
                        cs,
                        peer.arrive + ((me * splits + j) * 8) as CUdeviceptr,
                        epoch,
                        "signalling a chunk to its owner",
                    )?;
                }
            } else {
                for d in 1..pes {
                    let src = (me + d) % pes;
                    // SAFETY: a word of this plan's symmetric signals.
                    unsafe {
                        super::stream_sync::stream_wait_geq(
                            cs,
                            local_arrive + ((src * splits + j) * 8) as CUdeviceptr,
                            epoch,
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
                        &comm,
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
                        super::stream_sync::stream_write(
                            cs,
                            self.peers[src].ack + ((me * splits + j) * 8) as CUdeviceptr,
                            epoch,
                            "acknowledging a chunk",
                        )?;
                    }
                }
            }
        }
        // The call ends on the caller's stream.
        end[0].record(&comm)?;
        stream.wait(&end[0])?;
        Ok(())
    }
}

impl Drop for MatmulReduceScatter {
    fn drop(&mut self) {
        // Copies and reductions may still be in flight on the copy stream; the buffers they use
        // are freed after this.
        let _ = self.comm.synchronize();
    }
}

/// One GEMM + reduce-scatter with a plan made for it and dropped after: [`MatmulReduceScatter`]
/// (`new`, then `run`), for a single call. Collective; allocates and checks the shape across
/// PEs every time (milliseconds), so keep a [`MatmulReduceScatter`] for repeated calls.
pub fn matmul_reduce_scatter(
    pgas: &Pgas,
    out: &mut CudaSlice<bf16>,
    a: &CudaSlice<bf16>,
    bt: &CudaSlice<bf16>,
    shape: (usize, usize, usize),
) -> Result<()> {
    let mut op = MatmulReduceScatter::new(pgas, shape)?;
    op.run(pgas, out, a, bt)?;
    pgas.stream()
        .synchronize()
        .map_err(Error::cuda("finishing matmul_reduce_scatter"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_that_do_not_divide_are_named() {
        assert!(shape_error(8192, 8192, 2048, 4).is_none());
        let e = shape_error(8190, 8192, 2048, 4).unwrap();
        assert!(e.contains("M = 8190") && e.contains("4 PEs"), "{e}");
        let e = shape_error(8192, 8191, 2044, 4).unwrap();
        assert!(e.contains("N = 8191") && e.contains("K / P = 2044"), "{e}");
        assert!(shape_error(0, 8, 8, 1).unwrap().contains("M = 0"));
    }

    #[test]
    fn chunks_are_about_1024_rows_and_divide_the_rows() {
        assert_eq!(splits_for(2048), 2);
        assert_eq!(splits_for(4096), 4);
        assert_eq!(splits_for(16384), 4);
        assert_eq!(splits_for(512), 1);
        assert_eq!(splits_for(3072), 3);
        // 3000 rows: 2 divides it.
        assert_eq!(splits_for(3000), 2);
    }

    #[test]
    fn the_heap_need_counts_p_minus_1_slots() {
        // 4 PEs at 8192 x 8192: 3 slots of 2048 x 8192 bf16, 2 x 8 words.
        assert_eq!(heap_bytes(8192, 8192, 4), 3 * 2048 * 8192 * 2 + 2 * 8 * 8);
        // One PE keeps one slot (never used; symmetric buffers are never empty).
        assert_eq!(heap_bytes(1024, 1024, 1), 1024 * 1024 * 2 + 2 * 8);
    }
}
