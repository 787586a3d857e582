//! The items most programs use: `use pgas::prelude::*;`.

pub use crate::bootstrap::Bootstrap;
pub use crate::collectives::ReduceOp;
pub use crate::context::{Pgas, PgasBuilder};
pub use crate::error::{Error, Result};
pub use crate::jit::{LaunchConfig, RawKernel};
pub use crate::memory::{SymRegion, SymTensor, SymView, SymViewMut};
pub use crate::team::Team;
