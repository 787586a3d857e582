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
//!     op.run(&pgas, stream, &mut out, &a, &bt)?; // no host sync
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How
//! The rows of `A` go in chunks ordered by owner; the copy engine moves each finished chunk to its
//! owner and a small pgas kernel adds the parts there (`docs/ops.md`, "GEMM + reduce-scatter").
//!
//! Files: `sizes.rs` (shapes, chunks, heap), `plan.rs` (the plan, `set_gemm`, the one-call
//! form), `op.rs` (a call), `kernels.rs` (the owner's reduction).

mod kernels;
mod op;
mod plan;
mod sizes;

pub use kernels::add_parts;
pub use plan::matmul_reduce_scatter;
pub use sizes::{heap_bytes, shape_error, splits_for, CHUNK_ROWS, MAX_SPLITS};

use self::plan::{Finished, PeerAddrs};
use crate::gemm::GemmConfig;
use crate::ops::cublas::Cublas;
use crate::prelude::*;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use half::bf16;
use std::sync::Arc;

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
    /// The reduction stream: waits for the peers' parts of this PE's rows and adds them.
    comm: Arc<CudaStream>,
    /// `P - 1` copy streams, stream `d - 1` serving PE `me + d`, so the copies to different
    /// owners overlap (one stream would run them one after the other).
    sends: Vec<Arc<CudaStream>>,
    /// The whole M x N partial product of this PE (the chunks the copies read).
    partial: CudaSlice<bf16>,
    /// `P - 1` slots of M / P x N: slot `(src - me - 1) mod P` holds PE `src`'s part.
    staging: SymTensor<bf16>,
    /// On the owner, word `src * splits + j`: the call whose chunk `j` PE `src` delivered.
    arrive: SymTensor<u64>,
    /// On the source, word `owner * splits + j`: the call whose chunk `j` the owner has read.
    ack: SymTensor<u64>,
    peers: Vec<PeerAddrs>,
    /// One event per chunk (compute stream to its copy or reduction stream) and the two joins.
    events: Vec<CudaEvent>,
    /// One join a copy stream (`sends`), the caller's stream waiting for each at a call's end.
    sent: Vec<CudaEvent>,
    epoch: u64,
    /// The reduction's launch (the same for every chunk: `M/P/splits x N` elements).
    reduce_cfg: LaunchConfig,
    /// The `pgas::gemm` specialization of the chunks' GEMMs, or of the one kernel; `None`:
    /// cuBLAS.
    gemm: Option<GemmConfig>,
    /// The one kernel's words, and what a call adds to each (`GemmPath::PgasOneKernel` on
    /// more than one PE; `None` on the other paths).
    finished: Finished,
    per_call: Option<u64>,
    /// Where a peer is off NVLink: the whole product (M x N) and this PE's rows (M/P x N),
    /// symmetric, for NVSHMEM's reduce-scatter (its proxy carries what no mapping reaches).
    off_node: Option<(SymTensor<bf16>, SymTensor<bf16>)>,
}

crate::debug::debug_fields!(|s: MatmulReduceScatter| shape: (s.m, s.n, s.k), pes: s.pes,
    splits: s.splits, epoch: s.epoch, ..);
