//! The pgas context.
//!
//! PLACEHOLDER on branch rt-jit: the real `Pgas` (NVSHMEM bootstrap, symmetric memory) is the
//! foundation engineer's (branch rt-foundation) and replaces this file on merge. This stand-in
//! holds only what the JIT reads, so the JIT compiles and its tests run before that merge.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::jit::state::Target;
use crate::jit::JitState;

/// A PE's view of the job: its GPU, stream, NVSHMEM, and JIT state.
pub struct Pgas {
    cuda: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    jit: JitState,
}

impl Pgas {
    /// The CUDA context of this PE's GPU.
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.cuda
    }

    /// The stream launches and host-side operations use by default.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Where this context's kernels load: with the real context, `nvshmem` is its NVSHMEM.
    pub(crate) fn jit_target(&self) -> Target<'_> {
        Target {
            ctx: &self.cuda,
            jit: &self.jit,
            nvshmem: None,
        }
    }
}
