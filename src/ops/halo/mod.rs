//! Halo exchange for a 2-D field split into slabs of rows across the PEs: [`Halo2d`] owns the
//! symmetric field (two planes, each with a halo row above and below the PE's rows), the
//! signals the halos arrive with and the flags a persistent kernel chains its blocks with, and
//! exchanges the halo rows on a stream ([`Halo2d::exchange_on`]) for a user's own stencil kernel.
//!
//! ```text
//! plane p of PE q, at element p * plane_len():     row 0           top halo: the last row of PE q - 1
//!                                                  rows 1..=rows   PE q's own rows
//!                                                  row rows + 1    bottom halo: the first row of PE q + 1
//! ```
//!
//! The PEs form a ring (periodic in y; one PE is its own neighbour). Iteration `e` (counted
//! since [`Halo2d::new`]) reads plane `e % 2` and writes plane `(e + 1) % 2`.
//!
//! # The protocol (shared with fused kernels written against it)
//! Halos arrive with the iteration number as their signal (waits are `>=`, nothing is reset), and
//! two planes suffice with no barrier: `docs/ops.md`, "The protocol", says how and why.

mod kernels;
mod op;
mod plan;

pub use kernels::halo_rows;
pub use plan::{Halo2d, HaloParts, MAX_BLOCKS};
