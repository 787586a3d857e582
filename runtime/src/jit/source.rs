//! The CUDA source of one specialization: a spec's generated source (or a raw kernel's) with its
//! kernel name and comptime values defined.

use super::state::Source;
use crate::kernel::{KernelSpec, Variant};

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
