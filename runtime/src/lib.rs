//! pgas runtime: NVSHMEM host binding (loaded at run time), bootstrap, symmetric memory,
//! host-side RMA/collectives/teams, the JIT and kernel launch. Users reach it through the `pgas`
//! facade crate.
//!
//! Nothing here needs CUDA, NVSHMEM or MPI at build time: `libnvshmem_host.so.3` is found and
//! loaded by [`init`] (see [`nvshmem::discover`]) and CUDA comes through cudarc's dynamic loader.

pub mod bootstrap;
mod collectives;
mod context;
mod device;
pub mod doctor;
mod error;
pub mod ffi;
pub mod heap;
pub mod jit;
pub mod kernel;
pub mod launcher;
mod memory;
pub mod nvshmem;
pub mod prelude;
mod rma;
mod team;

pub use bootstrap::Bootstrap;
pub use collectives::{CollectiveElem, ReduceOp};
pub use context::{builder, init, Pgas, PgasBuilder};
pub use device::gpu_count;
pub use error::{Error, Result};
pub use jit::LaunchConfig;
pub use memory::{SymRegion, SymTensor, SymView, SymViewMut};
pub use team::Team;
