//! Halo exchange for a 2-D field split into slabs of rows across the PEs: [`Halo2d`] owns the
//! symmetric field (two planes, each with a halo row above and below the PE's rows) and the
//! signals and flags of the protocol, and exchanges the halo rows on a stream
//! ([`Halo2d::exchange_on`]) for a user's own stencil kernel.
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
pub use plan::{HaloParts, MAX_BLOCKS};

use self::plan::Plan;
use crate::{Pgas, SymTensor};

/// A 2-D `f32` field split into slabs of rows, one per PE in PE order, with its halo rows and
/// their signals (see the [module docs](super) for the layout and the protocol).
///
/// Made collectively by [`Halo2d::new`]; then on each PE either
/// - [`Halo2d::exchange_on`], the user's stencil kernel from plane [`Halo2d::current`] into
///   [`Halo2d::next`], and [`Halo2d::advance`]`(1)`, per iteration; or
/// - a persistent kernel written against the protocol that runs many iterations in one launch
///   (`examples/jacobi2d.rs`), given [`Halo2d::parts_mut`], then [`Halo2d::advance`]`(iters)`.
///
/// Every PE runs the same number of iterations, in the same order of calls (a PE that stops
/// early leaves its neighbours waiting for its halos, as with NCCL's send and receive). The
/// iteration count is kept on the host and passed to the kernels, so a launch captured in a CUDA
/// graph would replay the same count: run it eagerly. Dropping it frees the symmetric buffers
/// collectively: synchronize the streams its iterations ran on first, on every PE.
pub struct Halo2d {
    pgas: Pgas,
    plan: Plan,
    /// Iterations run since `new` (what the next iteration reads: plane `epoch % 2`).
    epoch: u64,
    /// Whether any halo was sent: the interior may be written only before.
    started: bool,
    field: SymTensor<f32>,
    sig: SymTensor<u64>,
    flags: SymTensor<u64>,
}

crate::debug::debug_fields!(|h: Halo2d| nx: h.plan.nx, rows: h.plan.rows, up: h.plan.up,
    down: h.plan.down, epoch: h.epoch);
