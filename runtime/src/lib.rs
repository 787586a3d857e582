//! pgas runtime: NVSHMEM host binding (loaded at run time), bootstrap, symmetric memory,
//! host-side RMA/collectives/teams, the JIT and kernel launch. Users reach it through the `pgas`
//! facade crate.
//!
//! Nothing here needs CUDA, NVSHMEM or MPI at build time: `libnvshmem_host.so.3` is found and
//! loaded by [`init`] (see [`nvshmem::discover`]) and CUDA comes through cudarc's dynamic loader.
//!
//! The modules are layers that only import downwards (`docs/internals.md`; a test keeps it so):
//! `error`, `ffi`, `fp8`, `nvshmem`, `device` -> `bootstrap`, `heap` -> `kernel` (what a kernel is) ->
//! `jit` (compile, cache, load) -> `context` (the `Pgas` handle, memory, teams) -> `launch`
//! (checks and the driver call) -> `doctor`, `info`, `launcher`, `prelude`.

// Every public item is documented (docs are part of the feature).
#![deny(missing_docs)]

pub mod bootstrap;
mod context;
mod device;
pub mod doctor;
mod error;
pub mod ffi;
mod fp8;
pub mod heap;
pub mod info;
pub mod jit;
pub mod kernel;
pub mod launch;
mod launch_cause;
pub mod launcher;
pub mod nvshmem;
pub mod prelude;

pub use bootstrap::Bootstrap;
pub use context::{
    builder, init, Cmp, CollectiveElem, MulticastView, PeerAccess, PeerView, Pgas, PgasBuilder,
    ReduceOp, Shape, SignalOp, Swizzle, SymBuffer, SymRegion, SymTensor, SymView, SymViewMut, Team,
    TeamConfig, TeamMember, TeamUniqueId, TensorMap, Tile2d, TmaElem, VmmBuffer, MAX_DIMS,
    PEER_ACCESS_VAR,
};
pub use device::gpu_count;
/// The DLPack crate pgas exports and imports through ([`SymTensor::into_dlpack`],
/// [`Pgas::from_dlpack`]); `dlpark::versioned::Dlpack` is the tensor type.
pub use dlpark;
pub use error::{Error, Result};
pub use fp8::{e4m3, e5m2};
pub use launch::{AmoElem, AmoInt, LaunchConfig};
pub use launch_cause::{Dim3, LaunchCause};
/// The rsmpi crate pgas is built with (feature `mpi`): its communicators are what
/// [`bootstrap::mpi_unique_id`] takes, so a program splits them with this same version.
#[cfg(feature = "mpi")]
pub use mpi;
