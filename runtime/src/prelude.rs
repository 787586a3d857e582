//! The items most programs use: `use pgas::prelude::*;`.

pub use crate::bootstrap::Bootstrap;
pub use crate::context::{
    Pgas, PgasBuilder, ReduceOp, Swizzle, SymRegion, SymTensor, SymView, SymViewMut, Team,
    TensorMap, Tile2d,
};
pub use crate::error::{Error, Result};
pub use crate::launch::{LaunchConfig, RawKernel};
