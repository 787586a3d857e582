//! Launching: the geometry ([`LaunchConfig`]), the packed arguments ([`KernelArgs`]), the one path
//! from a launcher to the driver ([`launch`]), and what launches kernels besides macro output:
//! [`prewarm`], [`RawKernel`] and the NVSHMEM-less [`Bare`] device.

mod amo;
mod args;
mod bare;
mod config;
mod driver;
mod entry;
mod fit;
mod multicast;
mod prewarm;
mod raw;

pub use amo::{AmoElem, AmoInt};
pub use args::{KernelArgs, KernelScalar, MAX_LOCAL_BUFFERS, MAX_PARAMS};
pub use bare::Bare;
pub use config::{LaunchConfig, MAX_CLUSTER_BLOCKS};
pub use entry::{launch, max_active_clusters};
#[doc(hidden)]
pub use multicast::MULTICAST_STORE_SOURCE;
pub use prewarm::{finish_compiles, prewarm, Prewarm};
pub use raw::RawKernel;
