//! The pgas kernel compiler: Rust kernel syntax to kernel IR, type check, CUDA C++.
//!
//! `#[pgas_kernel]`, `#[pgas_device]` and `#[pgas_params]` (crate `pgas-macros`) are thin shims
//! over [`expand_kernel`], [`expand_device`] and [`expand_params`]. Tests, tools and the runtime
//! use the same compiler through [`compile_file`] / [`compile_kernel`], and [`specialize`] to
//! turn a generated source into one compilable specialization.
//!
//! ```
//! let src = r#"
//!     use pgas::prelude::*;
//!     #[pgas_kernel]
//!     fn scale(x: &mut SymTensor<f32>, a: f32) {
//!         let i = global_thread_idx();
//!         if i < x.len() {
//!             x[i] = x[i] * a + 1.0;
//!         }
//!     }
//! "#;
//! let kernels = pgas_codegen::compile_file(src, "src/scale.rs").unwrap();
//! assert_eq!(kernels[0].rust_name, "scale");
//! assert!(kernels[0].plain.contains("1.0f"));
//! let (full, symbol) = pgas_codegen::specialize(&kernels[0].checked, &kernels[0].cuda_name, "checked", &[]);
//! assert!(full.starts_with("#define PGAS_KERNEL_NAME"));
//! assert!(symbol.ends_with("_checked"));
//! ```

// Every public item is documented (docs are part of the feature).
#![deny(missing_docs)]

mod attr;
mod bound;
mod check;
mod compile;
mod docs;
mod emit;
mod error;
mod expand;
pub mod generic;
pub mod intrinsics;
mod ir;
pub mod nvcall;
mod params;
mod parse;
mod prelude;
mod specialize;
mod template;
mod types;

pub use compile::{
    compile_file, compile_instances, compile_kernel, compile_syn_file, CompiledKernel, KernelParam,
    ParamKind, FILE_PLACEHOLDER,
};
pub use docs::intrinsics_markdown;
pub use error::CodegenError;
pub use expand::{expand_device, expand_kernel};
pub use params::expand_params;
pub use prelude::{Prelude, PRELUDE, PRELUDE_BARRIER, PRELUDE_P2P, SM90A_MARKER};
pub use specialize::{batch, specialize};
pub use types::Scalar;
