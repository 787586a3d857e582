//! The CUDA source of one specialization: a spec's generated source (or a raw kernel's) with its
//! kernel name and comptime values defined.

use crate::kernel::{KernelSpec, Variant};

/// What the slow path compiles; built only on a cache miss.
#[derive(Clone)]
pub(crate) struct Source {
    /// How errors name the kernel (the Rust name).
    pub display: String,
    /// The `extern "C"` symbol.
    pub cuda_name: String,
    /// The full CUDA source.
    pub text: String,
    /// Whether it may share an NVRTC program with others: a `#[pgas_kernel]` specialization
    /// (unique symbol) yes, a raw kernel (whose name may repeat) no.
    pub batchable: bool,
}

/// The source and symbol of one specialization of `spec`.
pub(crate) fn spec_source(spec: &KernelSpec, variant: Variant, comptime: &[i128]) -> Source {
    let pairs: Vec<(&str, i128)> = spec
        .comptime_names()
        .zip(comptime.iter().copied())
        .collect();
    let (text, cuda_name) = pgas_codegen::specialize(
        spec.source(variant),
        spec.cuda_name,
        variant.as_str(),
        &pairs,
    );
    Source {
        display: spec.rust_name.to_owned(),
        cuda_name,
        text,
        batchable: true,
    }
}
