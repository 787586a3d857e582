//! A live NVSHMEM runtime: `init` and the [`Pgas`] handle, symmetric memory, teams, host RMA and
//! host collectives. Each file holds one of these; `pgas.rs` is the handle the others hang off.

pub(crate) mod collectives;
pub(crate) mod memory;
pub(crate) mod pgas;
mod rma;
pub(crate) mod team;
pub(crate) mod tensor_map;

pub use collectives::{CollectiveElem, ReduceOp};
pub use memory::{SymRegion, SymTensor, SymView, SymViewMut};
pub use pgas::{builder, init, Pgas, PgasBuilder};
pub use team::Team;
pub use tensor_map::{Swizzle, TensorMap, Tile2d, TmaElem};
