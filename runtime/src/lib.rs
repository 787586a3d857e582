//! pgas runtime: NVSHMEM host binding (loaded at run time), bootstrap, symmetric memory,
//! host-side RMA/collectives/teams, the JIT and kernel launch. Users reach it through the `pgas`
//! facade crate.

pub mod kernel;
