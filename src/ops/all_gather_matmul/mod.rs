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
//!
//! The files: `plan.rs` the plan ([`AllGatherMatmul::new`], `set_gemm`) and the one-call form,
//! `op.rs` a call and its paths, `copies.rs` the copy streams and the GEMMs they feed.

mod copies;
mod op;
mod plan;

pub use plan::{
    all_gather_matmul, pieces_error, shape_error, AllGatherMatmul, DEFAULT_PIECES, MAX_PIECES,
};
