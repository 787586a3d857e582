//! Fused communication and computation: building blocks that combine a pgas communication
//! kernel with a user's computation, at production sizes. See `docs/ops.md`.

pub mod halo;
