//! Compiling the collectives' kernels up front ([`prewarm`]), so that no call compiles and a
//! graph capture can include any of them.

use super::elem::{AllReduceElem, OP_CODES};
use super::specs::move_kernels;
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

/// The reducing kernels of `T` (low-latency, one-shot, which is also the reduce-scatter's,
/// two-shot in its three forms, the low-latency reduce-scatter), each with every reduction the
/// type has.
fn reducing<T: AllReduceElem>() -> Vec<Prewarm<'static>> {
    let ops = if T::BITS { 7 } else { 4 };
    T::KERNELS
        .specs()
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
    move_kernels::<T>().specs().into_iter().map(|spec| Prewarm {
        spec,
        variant: Variant::Plain,
        comptime: &[],
    })
}

/// Compiles (or loads from the disk cache) every collective kernel of element type `T`.
pub fn prewarm<T: AllReduceElem>(pgas: &Pgas) -> Result<()> {
    pgas_runtime::launch::prewarm(pgas, &prewarm_list::<T>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The kernels a file defines: the `pub fn` names of `kernels/reducing.rs` or
    /// `kernels/moving.rs` (each a generic kernel).
    fn defined(file: &str) -> BTreeSet<&str> {
        file.lines()
            .filter_map(|l| l.trim_start().strip_prefix("pub fn "))
            .filter_map(|l| l.split(['<', '(']).next())
            .collect()
    }

    fn names(list: &[Prewarm<'static>]) -> BTreeSet<&'static str> {
        // An instance is named `kernel::<T>`.
        list.iter()
            .filter_map(|p| p.spec.rust_name.split("::<").next())
            .collect()
    }

    /// The kernels `kernels/` defines, the lists that launch and prewarm them (the
    /// `AllReduceElem` constants, `MoveKernels`, [`prewarm_all`]) and so the specializations CI
    /// compiles (`tests/nvrtc/coll.rs` compiles `prewarm_all`) are one set: a kernel added to
    /// those files and not to the lists fails here.
    #[test]
    fn the_prewarm_lists_hold_every_collective_kernel() {
        let reducing_defined = defined(include_str!("kernels/reducing.rs"));
        let moving_defined = defined(include_str!("kernels/moving.rs"));
        for (ty, list, ops) in [
            ("f32", reducing::<f32>(), 4),
            ("f64", reducing::<f64>(), 4),
            ("f16", reducing::<half::f16>(), 4),
            ("bf16", reducing::<half::bf16>(), 4),
            ("i8", reducing::<i8>(), 7),
            ("i16", reducing::<i16>(), 7),
            ("i32", reducing::<i32>(), 7),
            ("i64", reducing::<i64>(), 7),
            ("u8", reducing::<u8>(), 7),
            ("u16", reducing::<u16>(), 7),
            ("u32", reducing::<u32>(), 7),
            ("u64", reducing::<u64>(), 7),
        ] {
            assert_eq!(names(&list), reducing_defined, "{ty}'s reducing kernels");
            assert_eq!(
                list.len(),
                reducing_defined.len() * ops,
                "{ty}: one per reduction"
            );
        }
        for (size, list) in [
            (1, moving::<u8>().collect::<Vec<_>>()),
            (2, moving::<u16>().collect()),
            (4, moving::<u32>().collect()),
            (8, moving::<u64>().collect()),
        ] {
            assert_eq!(
                names(&list),
                moving_defined,
                "the {size}-byte moving kernels"
            );
            assert_eq!(list.len(), moving_defined.len(), "{size} bytes: each once");
        }
        // Every specialization once across the types (types of one size share the moving ones).
        let all = prewarm_all();
        let distinct: BTreeSet<(&str, &[i128])> =
            all.iter().map(|p| (p.spec.cuda_name, p.comptime)).collect();
        assert_eq!(distinct.len(), all.len(), "a specialization listed twice");
    }
}
