//! Compiling the collectives' kernels up front ([`prewarm`]), so that no call compiles and a
//! graph capture can include any of them.

use super::elem::{AllReduceElem, OP_CODES};
use super::movement;
use pgas_runtime::kernel::Variant;
use pgas_runtime::launch::Prewarm;

use crate::{Pgas, Result};

/// Every specialization the collectives of element type `T` can launch (low-latency,
/// one-shot, two-shot and reduce-scatter with each reduction the type has, and the all-gather,
/// broadcast and all-to-all kernels of `T`'s size), for
/// [`pgas_runtime::launch::prewarm`]: compile them up front, in one NVRTC program, so that no
/// call compiles (and a graph capture can include any of them).
pub fn prewarm_list<T: AllReduceElem>() -> Vec<Prewarm<'static>> {
    let mut list = reducing::<T>();
    list.extend(moving::<T>());
    list
}

/// [`prewarm_list`] for every element type, each specialization once: the reducing kernels of
/// each type, the data-movement kernels of each element size (types of one size share them).
pub fn prewarm_all() -> Vec<Prewarm<'static>> {
    [
        reducing::<f32>(),
        reducing::<f64>(),
        reducing::<half::f16>(),
        reducing::<half::bf16>(),
        reducing::<i8>(),
        reducing::<i16>(),
        reducing::<i32>(),
        reducing::<i64>(),
        reducing::<u8>(),
        reducing::<u16>(),
        reducing::<u32>(),
        reducing::<u64>(),
    ]
    .into_iter()
    .flatten()
    .chain(moving::<u8>())
    .chain(moving::<u16>())
    .chain(moving::<u32>())
    .chain(moving::<u64>())
    .collect()
}

/// The reducing kernels of `T` (low-latency, one-shot, two-shot in its three forms, reduce-scatter
/// and its low-latency form), each with every reduction the type has.
fn reducing<T: AllReduceElem>() -> Vec<Prewarm<'static>> {
    let ops = if T::BITS { 7 } else { 4 };
    [
        T::LOW_LATENCY,
        T::ONE_SHOT,
        T::TWO_SHOT,
        T::TWO_SHOT_LL,
        T::TWO_SHOT_PUSH,
        T::REDUCE_SCATTER,
        T::LOW_LATENCY_REDUCE_SCATTER,
    ]
    .into_iter()
    .flat_map(|spec| {
        OP_CODES[..ops].iter().map(move |c| Prewarm {
            spec,
            variant: Variant::Plain,
            comptime: c,
        })
    })
    .collect()
}

/// The data-movement kernels of `T`'s size: no reduction, so no comptime code.
fn moving<T>() -> impl Iterator<Item = Prewarm<'static>> {
    movement::move_specs::<T>().into_iter().map(|spec| Prewarm {
        spec,
        variant: Variant::Plain,
        comptime: &[],
    })
}

/// Compiles (or loads from the disk cache) every collective kernel of element type `T`.
pub fn prewarm<T: AllReduceElem>(pgas: &Pgas) -> Result<()> {
    pgas_runtime::launch::prewarm(pgas, &prewarm_list::<T>())
}
