//! `pgas::gemm`: the Hopper (sm_90a) bf16 GEMM written in pgas, for programs and fused kernels
//! to build on. `docs/gemm.md` explains the kernel and its figures. [`mma_sync`] is the
//! from-scratch teaching GEMM (`mma.sync`, sm_80 and up) that `examples/gemm_bf16.rs` runs and
//! `benches/gemm.rs` times.

mod grouped;
mod kernel;
pub mod mma_sync;
mod plan;
pub mod reference;
mod shape;

pub use grouped::{gemm_grouped, gemm_grouped_with, GroupedRows};
pub use kernel::{gemm_bf16_sm90, BK, BM, THREADS};
pub(crate) use plan::{
    a_tile, b_tile, c_tile, check, gemm_raw_with, launch, persistent_clusters, swizzled, Maps,
    Words,
};
pub use plan::{
    gemm_bf16, gemm_bf16_with, gemm_fp8, gemm_fp8_with, gemm_raw, raw_shape_error, shape_error,
    Chunking, GemmConfig, Operand, STREAM_K,
};
pub(crate) use shape::refuse;
