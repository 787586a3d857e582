//! Collectives written in pgas: all-reduce, reduce-scatter and all-gather over a [`Team`](crate::Team) from
//! peer loads and stores over NVLink, synchronized with NVSHMEM signals instead of barriers,
//! called from the host on a stream (and so capturable into a CUDA graph).
//!
//! ```no_run
//! use pgas::coll::{Algorithm, Comm};
//! use pgas::prelude::*;
//!
//! # fn main() -> pgas::Result<()> {
//! let pgas = pgas::init()?;
//! let mut comm = Comm::new(&pgas, Team::WORLD)?; // collective over all PEs
//! let src = pgas.alloc_from(&vec![1.0f32; 1 << 20])?;
//! let mut dst = pgas.alloc::<f32>(1 << 20)?;
//! comm.all_reduce(&mut dst, &src, ReduceOp::Sum, Algorithm::Auto)?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Algorithm`] picks one-shot (small messages), two-shot (large), low-latency, NVSHMEM's own
//! (where peers are not load/store reachable) or hierarchical (across nodes); `Auto` chooses by
//! size and reach (`docs/coll.md` has the table). The kernels and their flag protocol are in
//! [`kernels`].

mod comm;
mod elem;
mod hier;
pub mod kernels;
mod layout;
mod movement;
mod options;
mod prewarm;
mod reduce;
mod region;
mod scratch;
mod specs;

pub use comm::{
    device_scratch_len, Algorithm, Comm, BROADCAST_RELAY_MAX_BYTES, BROADCAST_RELAY_MIN_BYTES,
    LL_BYTES_PER_BLOCK, LL_GATHER_MAX_BYTES, LL_MAX_BYTES, LL_REGION_BYTES, LL_SHARED_MAX_BYTES,
    MAX_BLOCKS, MOVE_PULL_MAX_BYTES, ONE_SHOT_MAX_BYTES, ONE_SHOT_MAX_BYTES_2PE, PUSH_MAX_BYTES,
    PUSH_MIN_BYTES,
};
pub use elem::AllReduceElem;
pub use layout::AllToAllLayout;
pub use options::Options;
pub use prewarm::{prewarm, prewarm_all, prewarm_list};
