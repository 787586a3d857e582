//! The element types of the reducing collectives ([`AllReduceElem`]) and the reductions'
//! comptime codes.

use super::specs::{ReduceInstances, ReduceKernels};
use pgas_runtime::kernel::KernelSpec;
use pgas_runtime::CollectiveElem;

use crate::{Error, ReduceOp, Result};

/// Element types of [`Comm::all_reduce`](super::Comm::all_reduce),
/// [`Comm::reduce_scatter`](super::Comm::reduce_scatter) and
/// [`Comm::all_gather`](super::Comm::all_gather): the
/// 16-bit floats (reduced in `f32`), `f32`, `f64` and the 8- to 64-bit integers (wrapping, as
/// NVSHMEM's). Sealed: the types the reducing kernels are instantiated for (`T: Elem`).
pub trait AllReduceElem: CollectiveElem + ReduceInstances {
    /// The type's instances of the reducing kernels.
    #[doc(hidden)]
    const KERNELS: ReduceKernels = ReduceKernels::of::<Self>();
    /// The low-latency all-reduce's instance (the GPU suite picks it out of the prewarm list).
    #[doc(hidden)]
    const LOW_LATENCY: &'static KernelSpec = Self::KERNELS.low_latency;
    /// The one-shot all-reduce's instance (as [`AllReduceElem::LOW_LATENCY`]).
    #[doc(hidden)]
    const ONE_SHOT: &'static KernelSpec = Self::KERNELS.one_shot;
    /// Whether the bitwise reductions exist for the type (integers).
    #[doc(hidden)]
    const BITS: bool;
}

macro_rules! elem {
    ($($t:ty => $bits:literal;)*) => {$(
        impl AllReduceElem for $t {
            const BITS: bool = $bits;
        }
    )*};
}

elem! {
    f32 => false;
    f64 => false;
    half::f16 => false;
    half::bf16 => false;
    i8 => true;
    i16 => true;
    i32 => true;
    i64 => true;
    u8 => true;
    u16 => true;
    u32 => true;
    u64 => true;
}

/// The comptime code of each reduction in the kernels (see `kernels/`).
pub(super) const OP_CODES: [[i128; 1]; 7] = [[0], [1], [2], [3], [4], [5], [6]];

pub(super) fn op_code(op: ReduceOp) -> &'static [i128; 1] {
    &OP_CODES[match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Min => 2,
        ReduceOp::Max => 3,
        ReduceOp::And => 4,
        ReduceOp::Or => 5,
        ReduceOp::Xor => 6,
    }]
}

/// An `Err` for a bitwise reduction on a float type.
pub(super) fn check_op<T: AllReduceElem>(op: ReduceOp) -> Result<()> {
    if !T::BITS && matches!(op, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor) {
        return Err(Error::InvalidConfig {
            name: "reduction",
            value: format!("{op:?} on {}", std::any::type_name::<T>()),
            reason: "bitwise reductions exist for integer types only; use Sum, Prod, Min or Max"
                .to_owned(),
        });
    }
    Ok(())
}
