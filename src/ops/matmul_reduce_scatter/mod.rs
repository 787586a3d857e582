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
//! owner over NVLink and a small pgas kernel adds the parts there, signalled with stream memory
//! operations. The protocol, and why a slot is never overwritten while read, are in
//! `docs/ops.md`, "GEMM + reduce-scatter".
//!
//! Files: `sizes.rs` (shapes, chunks, heap), `plan.rs` (the plan, `set_gemm`, the one-call
//! form), `op.rs` (a call), `kernels.rs` (the owner's reduction).

mod kernels;
mod op;
mod plan;
mod sizes;

pub use kernels::add_parts;
pub use plan::{matmul_reduce_scatter, MatmulReduceScatter};
pub use sizes::{heap_bytes, shape_error, splits_for, CHUNK_ROWS, MAX_SPLITS};
