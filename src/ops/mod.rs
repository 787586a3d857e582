//! Operations built on pgas kernels, at production sizes: communication fused with computation,
//! combining a pgas communication kernel or the copy engine with a user's computation or a vendor
//! library's (the halo exchange of a stencil, [`halo`], and a stencil with its exchange fused in,
//! [`jacobi`]; all-gather fused with a GEMM, [`AllGatherMatmul`]; a GEMM fused with a
//! reduce-scatter, [`matmul_reduce_scatter`]; an all-reduce fused with the residual add and
//! RMSNorm, [`AllReduceRmsNorm`]), whole operations a model calls (the token dispatch and combine
//! of a mixture-of-experts layer across PEs, [`moe`]; attention over one sequence split across
//! PEs, [`ring`] and [`ulysses`]), and what they share: cuBLAS loaded at run time ([`cublas`]) and the
//! cross-PE argument check of collective operations ([`agree`]). See `docs/ops.md`.

mod agree;
pub mod all_gather_matmul;
pub mod allreduce_rmsnorm;
pub mod cublas;
mod gemm_path;
pub mod halo;
pub mod jacobi;
mod lengths;
pub mod matmul_reduce_scatter;
pub mod moe;
mod peers;
pub mod ring;
mod stream_sync;
pub mod ulysses;

pub use agree::agree;
pub use all_gather_matmul::{all_gather_matmul, AllGatherMatmul};
pub use allreduce_rmsnorm::AllReduceRmsNorm;
pub use gemm_path::GemmPath;
pub use ring::RingAttention;
pub use ulysses::UlyssesAttention;
