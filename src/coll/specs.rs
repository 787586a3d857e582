//! The tables of the collectives' kernel specializations: the reducing kernels of one element
//! type ([`ReduceKernels`], an [`AllReduceElem`](super::AllReduceElem)'s) and the
//! data-movement kernels of one element size ([`MoveKernels`]).

use super::kernels;
use pgas_runtime::kernel::KernelSpec;

/// Defines `$table`, a struct with the specialization of each kernel `$kernel` (a field named
/// as the kernel) for one type, and `$instances`, the trait of the types that have an instance
/// of every one of them (implemented for each such type). The list is written once, so the
/// struct, the bound and the lookup cannot disagree.
macro_rules! kernel_table {
    ($(#[$doc:meta])* $table:ident, $instances:ident: $($kernel:ident),+ $(,)?) => {
        $(#[$doc])*
        pub struct $table {
            $(
                #[doc = concat!("`kernels::", stringify!($kernel), "`.")]
                pub(super) $kernel: &'static KernelSpec,
            )+
        }

        #[doc = concat!("The types with an instance of every kernel of [`", stringify!($table), "`].")]
        pub trait $instances: $(kernels::$kernel::Instance +)+ {}

        impl<U: $(kernels::$kernel::Instance +)+> $instances for U {}

        impl $table {
            /// The instances for `U`.
            pub const fn of<U: $instances>() -> $table {
                $table {
                    $($kernel: <U as kernels::$kernel::Instance>::SPEC,)+
                }
            }

            /// Every kernel of the table, in the order of its fields.
            pub fn specs(&self) -> Vec<&'static KernelSpec> {
                vec![$(self.$kernel),+]
            }
        }
    };
}

kernel_table! {
    /// The reducing kernels of one element type (each specialized further by its reduction).
    ReduceKernels, ReduceInstances:
    low_latency,
    one_shot,
    two_shot,
    two_shot_ll,
    two_shot_push,
    low_latency_reduce_scatter,
}

kernel_table! {
    /// The data-movement kernels of one element size.
    MoveKernels, MoveInstances:
    all_gather,
    pull_chunks,
    low_latency_gather,
    broadcast_two_shot,
    low_latency_broadcast,
    all_to_all,
    low_latency_all_to_all,
    all_to_all_v,
}

static MOVE8: MoveKernels = MoveKernels::of::<u8>();
static MOVE16: MoveKernels = MoveKernels::of::<u16>();
static MOVE32: MoveKernels = MoveKernels::of::<u32>();
static MOVE64: MoveKernels = MoveKernels::of::<u64>();

/// The data-movement kernels for elements of `T`'s size (every collective element type is 1,
/// 2, 4 or 8 bytes), whose instances exist per size: a call passes its buffers as unsigned
/// integers of the element's width.
pub(super) fn move_kernels<T>() -> &'static MoveKernels {
    match std::mem::size_of::<T>() {
        1 => &MOVE8,
        2 => &MOVE16,
        4 => &MOVE32,
        _ => &MOVE64,
    }
}
