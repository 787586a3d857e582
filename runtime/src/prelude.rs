//! The items most programs use: `use pgas::prelude::*;`.

pub use crate::bootstrap::Bootstrap;
pub use crate::context::{
    Cmp, Pgas, PgasBuilder, ReduceOp, SignalOp, Swizzle, SymBuffer, SymRegion, SymTensor, SymView,
    SymViewMut, Team, TeamConfig, TensorMap, Tile2d,
};
pub use crate::error::{Error, Result};
pub use crate::fp8::{e4m3, e5m2};
pub use crate::launch::{LaunchConfig, RawKernel};
