//! pgas runtime: NVSHMEM host binding (loaded at run time), bootstrap, symmetric memory,
//! host-side RMA/collectives/teams, the JIT and kernel launch. Users reach it through the `pgas`
//! facade crate.

pub mod context;
pub mod error;
pub mod jit;
pub mod kernel;

pub use context::Pgas;
pub use error::{Error, Result};
pub use jit::LaunchConfig;
pub use kernel::{KernelSpec, Variant};

/// What kernel files and host programs usually need.
pub mod prelude {
    pub use crate::jit::{LaunchConfig, RawKernel};
    pub use crate::{Error, Pgas, Result};
}
