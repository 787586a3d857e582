//! The element types of the reducing collectives ([`AllReduceElem`]) and the reductions'
//! comptime codes.

use super::kernels;
use pgas_runtime::kernel::KernelSpec;
use pgas_runtime::CollectiveElem;

use crate::{Error, ReduceOp, Result};

/// Element types of [`Comm::all_reduce`](super::Comm::all_reduce),
/// [`Comm::reduce_scatter`](super::Comm::reduce_scatter) and
/// [`Comm::all_gather`](super::Comm::all_gather): the
/// 16-bit floats (reduced in `f32`), `f32`, `f64` and the 8- to 64-bit integers (wrapping, as
/// NVSHMEM's). Sealed.
pub trait AllReduceElem: CollectiveElem {
    #[doc(hidden)]
    const LOW_LATENCY: &'static KernelSpec;
    #[doc(hidden)]
    const ONE_SHOT: &'static KernelSpec;
    #[doc(hidden)]
    const TWO_SHOT: &'static KernelSpec;
    #[doc(hidden)]
    const TWO_SHOT_LL: &'static KernelSpec;
    #[doc(hidden)]
    const TWO_SHOT_PUSH: &'static KernelSpec;
    #[doc(hidden)]
    const REDUCE_SCATTER: &'static KernelSpec;
    #[doc(hidden)]
    const LOW_LATENCY_REDUCE_SCATTER: &'static KernelSpec;
    /// Whether the bitwise reductions exist for the type (integers).
    #[doc(hidden)]
    const BITS: bool;
}

macro_rules! elem {
    ($($t:ty => $m:ident, $bits:literal;)*) => {$(
        impl AllReduceElem for $t {
            const LOW_LATENCY: &'static KernelSpec = &kernels::$m::low_latency::SPEC;
            const ONE_SHOT: &'static KernelSpec = &kernels::$m::one_shot::SPEC;
            const TWO_SHOT: &'static KernelSpec = &kernels::$m::two_shot::SPEC;
            const TWO_SHOT_LL: &'static KernelSpec = &kernels::$m::two_shot_ll::SPEC;
            const TWO_SHOT_PUSH: &'static KernelSpec = &kernels::$m::two_shot_push::SPEC;
            const REDUCE_SCATTER: &'static KernelSpec = &kernels::$m::reduce_scatter::SPEC;
            const LOW_LATENCY_REDUCE_SCATTER: &'static KernelSpec =
                &kernels::$m::low_latency_reduce_scatter::SPEC;
            const BITS: bool = $bits;
        }
    )*};
}

elem! {
    f32 => f32_, false;
    f64 => f64_, false;
    half::f16 => f16_, false;
    half::bf16 => bf16_, false;
    i8 => i8_, true;
    i16 => i16_, true;
    i32 => i32_, true;
    i64 => i64_, true;
    u8 => u8_, true;
    u16 => u16_, true;
    u32 => u32_, true;
    u64 => u64_, true;
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
