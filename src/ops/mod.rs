//! Operations built on pgas kernels, at production sizes: fused communication and computation
//! ([`halo`]: a halo exchange fused with a stencil) and whole operations a model calls ([`moe`]:
//! the token dispatch and combine of a mixture-of-experts layer across PEs). See `docs/ops.md`.

pub mod halo;
pub mod moe;
