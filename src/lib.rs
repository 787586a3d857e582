//! # pgas: GPU kernels in Rust that talk to other GPUs directly
//!
//! `pgas` turns Rust functions marked `#[pgas_kernel]` into CUDA C that NVRTC compiles at run time
//! against the NVSHMEM device headers, and runs them on every PE (one process per GPU) over NVSHMEM
//! symmetric memory.
//!
//! ```no_run
//! use pgas::prelude::*;
//!
//! #[pgas_kernel]
//! fn ring_shift(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut SymTensor<u64>) {
//!     let peer = (my_pe() + 1) % n_pes();
//!     put_signal_block(dst, src, &mut sig[0], 1, SignalOp::Set, peer);
//!     signal_wait_until(&sig[0], Cmp::Eq, 1);
//! }
//!
//! fn main() -> pgas::Result<()> {
//!     let pgas = pgas::init()?;
//!     let mut dst = pgas.alloc::<f32>(1 << 20)?;
//!     let src = pgas.alloc_from(&vec![pgas.my_pe() as f32; 1 << 20])?;
//!     let mut sig = pgas.alloc::<u64>(1)?;
//!     ring_shift::launch(&pgas, LaunchConfig::blocks(1, 512), &mut dst, &src, &mut sig)?;
//!     pgas.barrier_all()?;
//!     Ok(())
//! }
//! ```
//!
//! See `docs/guide.md` for the guide, `docs/dsl.md` for the kernel language and `examples/` for the
//! gallery.

// Every public item is documented (docs are part of the feature).
#![deny(missing_docs)]

// The collectives in `coll` are `#[pgas_kernel]`s, whose expansion names `::pgas`.
extern crate self as pgas;

pub mod attention;
pub mod coll;
mod debug;
pub mod gemm;
pub mod ops;

pub use pgas_macros::{pgas_device, pgas_kernel, pgas_params};
pub use pgas_runtime::*;

/// Half-precision scalar types usable as kernel parameters (`__half` / `__nv_bfloat16`).
pub use half::{bf16, f16};
// `e4m3` / `e5m2`, the FP8 types (`__nv_fp8_e4m3` / `__nv_fp8_e5m2`), come with
// `pgas_runtime::*` above.

/// The CUDA driver types pgas hands out (device, stream, local buffers), re-exported from cudarc.
pub use cudarc;

/// Everything a kernel file or a host program usually needs.
pub mod prelude {
    pub use crate::{bf16, f16, pgas_device, pgas_kernel, pgas_params};
    pub use cudarc::driver::CudaSlice;
    pub use pgas_runtime::prelude::*;
}

/// Items the `#[pgas_kernel]` macro output refers to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use cudarc::driver::{CudaStream, DeviceRepr};
    pub use pgas_runtime::kernel::*;
    pub use pgas_runtime::launch::{launch, KernelArgs, KernelScalar};
}
