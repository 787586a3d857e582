//! The collective kernels (all-reduce low-latency, one-shot and two-shot, reduce-scatter,
//! all-gather, broadcast, all-to-all), each written once as a generic kernel: the reducing ones
//! (`reducing.rs`) over every element type with the reduction a `#[comptime]` parameter, the
//! data-movement ones (`moving.rs`) over one unsigned type of each size. The pieces they share
//! (handshakes, the walks over the 16-byte data path that copy, spread and reduce) are the
//! generic device functions of `pieces.rs`, whose handshakes the fused all-reduce + RMSNorm
//! kernel shares. The flag protocol and the 16-byte data path are
//! `docs/coll.md`'s "Synchronization" and "Data path".

mod moving;
pub(crate) mod pieces;
mod reducing;

pub use moving::*;
pub use reducing::*;
