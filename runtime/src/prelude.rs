//! The items most programs use: `use pgas::prelude::*;`.

pub use crate::bootstrap::Bootstrap;
pub use crate::context::{
    Cmp, Pgas, PgasBuilder, ReduceOp, SignalOp, SymBuffer, SymRegion, SymTensor, SymView,
    SymViewMut, Team, TeamConfig,
};
pub use crate::error::{Error, Result};
pub use crate::launch::{LaunchConfig, RawKernel};
