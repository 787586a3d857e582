//! `pgas::ops::jacobi`: a 2-D Jacobi smoother on a torus with its halo exchange fused in, the
//! production form of `examples/halo_exchange.rs`. Each PE owns a slab of whole rows
//! ([`Halo2d`](crate::ops::halo::Halo2d)); one persistent kernel ([`Method::Fused`]) runs every iteration, its edge rows
//! computed and sent first, its blocks chained by their neighbours' flags and the halo signals
//! instead of a grid-wide barrier (`docs/ops.md`, "The protocol"). [`Method::Unfused`] launches
//! the same sweep once per iteration after [`Halo2d::exchange_on`](crate::ops::halo::Halo2d::exchange_on) (the baseline). The stencil,
//! `u' = u / 2 + ((up + down) + (left + right)) / 8` in `f32`, scales by powers of two, so the
//! result equals the host's ([`host_jacobi`]) bit for bit. Both kernels come in forms
//! ([`Sweep`], [`Fused::threads`], listed in [`FORMS`]) that `benches/halo.rs` times side by side.

mod kernels;
mod op;
mod plan;
mod reference;

pub use kernels::*;
pub use op::{launch_step, run};
pub use plan::{Fused, Method, Sweep, FORMS, MAX_DEPTH, THREADS};
pub use reference::{host_jacobi, initial, row_starts};
