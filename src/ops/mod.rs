//! Operations built on pgas kernels that a model calls as a whole: [`moe`], the token dispatch
//! and combine of a mixture-of-experts layer across PEs.

pub mod moe;
