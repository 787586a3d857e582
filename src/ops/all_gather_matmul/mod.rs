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
//! neither takes an SM from cuBLAS's per-shard GEMMs (`docs/ops.md`, "All-gather + GEMM").
//!
//! The files: `plan.rs` the plan ([`AllGatherMatmul::new`], `set_gemm`) and the one-call form,
//! `op.rs` a call and its paths, `copies.rs` the copy streams and the GEMMs they feed.

mod copies;
mod op;
mod plan;

pub use plan::{all_gather_matmul, pieces_error, shape_error, DEFAULT_PIECES, MAX_PIECES};

use self::plan::Fused;
use crate::ops::cublas::Cublas;
use crate::{Pgas, SymTensor};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaEvent, CudaStream};
use half::bf16;
use std::sync::Arc;

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
    /// Word `i * P + q` on PE `p` (P PEs, `i` below [`MAX_PIECES`]): the last call whose piece
    /// `i` of PE `q`'s block PE `q` has put in place for PE `p`. The per-shard paths and a
    /// whole-shard push use piece 0 only. The words of a piece do not depend on how many pieces
    /// a call pushes, so a plan may change the count between calls.
    flags: SymTensor<u64>,
    /// This PE's word of piece 0 (`me`) on every PE, by PE; piece `i`'s is `8 i P` bytes on.
    flag_ptrs: Vec<CUdeviceptr>,
    epoch: u64,
    /// One copy stream a peer, by distance from `me` (`copies[j - 1]` serves PEs `me ± j`), so
    /// the peers' shards travel at once, on several copy engines.
    copies: Vec<Arc<CudaStream>>,
    /// Recorded on the pgas stream at the start of a call: the copy streams start there.
    start: CudaEvent,
    /// Recorded on `copies[j - 1]` after its copies of a call: the pull of PE `me + j`'s block
    /// (per-shard paths), or the pushes to PE `me - j` (one kernel; also after the first piece,
    /// which `copies[j]` waits for before its own first piece).
    landed: Vec<CudaEvent>,
    blas: Cublas,
    /// The GEMM as one pgas kernel (`pgas::gemm`, gathering) instead of cuBLAS per shard.
    fused: Option<Fused>,
    /// Where a peer is off NVLink: the shard's symmetric copy, which NVSHMEM's `fcollect`
    /// gathers (its proxy carries what no mapping reaches) before one cuBLAS GEMM.
    off_node: Option<SymTensor<bf16>>,
    /// The most PEs on one GPU ([`most_on_one_gpu`]): the one-kernel path is refused above
    /// [`MAX_SHARING_ONE_KERNEL`].
    crowd: usize,
}
