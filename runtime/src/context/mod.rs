//! A live NVSHMEM runtime: `init` and the [`Pgas`] handle, symmetric memory, teams, host RMA,
//! signals, atomics and collectives, and interop. Each file holds one of these; `pgas.rs` is the
//! handle the others hang off.

pub(crate) mod agree;
mod backoff;
pub(crate) mod collectives;
mod cuda;
mod dlpack;
mod external;
mod foreign;
mod local;
pub(crate) mod memory;
mod peer;
mod peer_access;
pub(crate) mod pgas;
mod reach;
mod rma;
mod shape;
pub(crate) mod team;
mod team_handle;
pub(crate) mod tensor_map;
mod view;

pub use collectives::{CollectiveElem, ReduceOp};
pub use external::VmmBuffer;
pub use memory::{SymBuffer, SymRegion, SymTensor};
pub use peer::{MulticastView, PeerView};
pub use peer_access::{PeerAccess, PEER_ACCESS_VAR};
pub use pgas::{builder, init, Pgas, PgasBuilder};
pub use rma::{Cmp, SignalOp};
pub use shape::{Shape, MAX_DIMS};
pub use team::{Team, TeamConfig, TeamMember, TeamUniqueId};
pub use tensor_map::{Swizzle, TensorMap, Tile2d, TmaElem};
pub use view::{SymView, SymViewMut};
