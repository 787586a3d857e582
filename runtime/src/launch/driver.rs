//! Launch geometry, its checks, and the driver calls that launch a loaded function (plain or
//! cooperative).

use std::ffi::c_void;

use cudarc::driver::{result, CudaStream};

use crate::error::{Error, Result};
use crate::jit::state::Function;

/// Grid and block dimensions of a launch, and its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `grid_x` blocks of `block_x` threads.
    pub const fn blocks(grid_x: u32, block_x: u32) -> LaunchConfig {
        LaunchConfig::dims((grid_x, 1, 1), (block_x, 1, 1))
    }

    /// A 2-D or 3-D launch (unused dimensions are 1).
    pub const fn dims(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
        }
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub const fn with_shared_mem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u64 {
        self.block.0 as u64 * self.block.1 as u64 * self.block.2 as u64
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.0 as u64 * self.grid.1 as u64 * self.grid.2 as u64
    }

    /// Checks the limits every CUDA device shares, so a bad configuration is a clear error
    /// rather than the driver's `CUDA_ERROR_INVALID_VALUE`.
    pub fn validate(&self, kernel: &str) -> Result<()> {
        let bad = |reason: String| {
            Err(Error::Launch {
                kernel: kernel.to_owned(),
                reason,
            })
        };
        let (g, b) = (self.grid, self.block);
        if g.0 == 0 || g.1 == 0 || g.2 == 0 || b.0 == 0 || b.1 == 0 || b.2 == 0 {
            return bad(format!(
                "grid {g:?} and block {b:?} must have no zero dimension"
            ));
        }
        if self.block_threads() > 1024 || b.2 > 64 {
            return bad(format!(
                "block {b:?} has {} threads; at most 1024 (and z at most 64)",
                self.block_threads()
            ));
        }
        if g.0 > i32::MAX as u32 || g.1 > 65535 || g.2 > 65535 {
            return bad(format!("grid {g:?} exceeds (2^31-1, 65535, 65535)"));
        }
        Ok(())
    }
}

/// The largest grid that can be resident at once for `f` at this block size and shared memory,
/// and its factors (blocks per SM, SMs).
pub(crate) fn max_resident_grid(f: Function, cfg: &LaunchConfig, sms: u32) -> Result<(u64, u32)> {
    // SAFETY: f is a live function of the current context.
    let per_sm = unsafe {
        result::occupancy::max_active_block_per_multiprocessor(
            f.raw(),
            cfg.block_threads() as i32,
            cfg.shared_mem_bytes as usize,
        )
    }
    .map_err(Error::cuda("computing occupancy for a collective launch"))?;
    let per_sm = per_sm.max(0) as u32;
    Ok((per_sm as u64 * sms as u64, per_sm))
}

/// Launches `f` on `stream` with `params` (one pointer per ABI parameter); `collective` kernels go
/// through a cooperative launch after checking that the grid fits.
///
/// # Safety
/// `params` must match the kernel's parameter list, and every pointer in it must stay valid for
/// as long as the kernel runs.
pub(crate) unsafe fn launch_function(
    f: Function,
    kernel: &str,
    collective: bool,
    sms: u32,
    cfg: &LaunchConfig,
    stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<()> {
    if collective {
        let (max, per_sm) = max_resident_grid(f, cfg, sms)?;
        if cfg.grid_blocks() > max {
            return Err(Error::CollectiveGrid {
                kernel: kernel.to_owned(),
                requested: cfg.grid_blocks(),
                max,
                per_sm,
                sms,
            });
        }
        result::launch_cooperative_kernel(
            f.raw(),
            cfg.grid,
            cfg.block,
            cfg.shared_mem_bytes,
            stream.cu_stream(),
            params,
        )
        .map_err(Error::cuda(
            "launching a kernel cooperatively (cuLaunchCooperativeKernel)",
        ))
    } else {
        result::launch_kernel(
            f.raw(),
            cfg.grid,
            cfg.block,
            cfg.shared_mem_bytes,
            stream.cu_stream(),
            params,
        )
        .map_err(Error::cuda("launching a kernel (cuLaunchKernel)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_checks() {
        assert!(LaunchConfig::blocks(1, 1024).validate("k").is_ok());
        assert!(LaunchConfig::dims((4, 4, 1), (16, 16, 1))
            .validate("k")
            .is_ok());
        for bad in [
            LaunchConfig::blocks(0, 32),
            LaunchConfig::blocks(1, 0),
            LaunchConfig::blocks(1, 1025),
            LaunchConfig::dims((1, 1, 1), (32, 32, 2)),
            LaunchConfig::dims((1, 70000, 1), (32, 1, 1)),
        ] {
            let err = bad.validate("my_kernel").unwrap_err();
            assert!(err.to_string().contains("my_kernel"), "{err}");
        }
        assert_eq!(
            LaunchConfig::blocks(3, 128)
                .with_shared_mem(64)
                .shared_mem_bytes,
            64
        );
    }
}
