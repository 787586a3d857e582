//! Launch geometry ([`LaunchConfig`]) and its checks: the limits every CUDA device shares, and
//! a kernel's declared `max_threads`, both before anything is compiled.

use super::fit::{BlockCause, BlockDiagnosis};
use crate::error::{Error, Result};
use crate::launch_cause::LaunchCause;

/// Grid and block dimensions of a launch, its dynamic shared memory and its thread-block
/// clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Blocks per thread-block cluster in x, y, z (sm_90 and later); `(1, 1, 1)`: no clusters.
    pub cluster: (u32, u32, u32),
}

/// The most blocks a cluster may have on every GPU that has clusters (CUDA's portable size).
pub const MAX_CLUSTER_BLOCKS: u64 = 8;

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
            cluster: (1, 1, 1),
        }
    }

    /// The same launch in thread-block clusters of `cluster` blocks (x, y, z): the blocks of a
    /// cluster run at once on one GPU processing cluster and may read and write each other's
    /// shared memory (`cluster_peer`), arrive on each other's mbarriers and receive multicast
    /// copies (`tma_load_2d_multicast`). Each dimension must divide the grid's, and a cluster
    /// has at most [`MAX_CLUSTER_BLOCKS`] blocks; needs sm_90 or later.
    pub const fn with_cluster(self, cluster: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig { cluster, ..self }
    }

    /// Blocks per cluster.
    pub fn cluster_blocks(&self) -> u64 {
        self.cluster.0 as u64 * self.cluster.1 as u64 * self.cluster.2 as u64
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
        let bad = |cause| Err(Error::launch(kernel, cause));
        let (grid, block, cluster) = (self.grid, self.block, self.cluster);
        let (g, b, c) = (grid, block, cluster);
        if g.0 == 0 || g.1 == 0 || g.2 == 0 || b.0 == 0 || b.1 == 0 || b.2 == 0 {
            return bad(LaunchCause::ZeroDimension { grid, block });
        }
        if self.block_threads() > 1024 || b.2 > 64 {
            let threads = self.block_threads();
            return bad(LaunchCause::BlockTooLarge { block, threads });
        }
        if g.0 > i32::MAX as u32 || g.1 > 65535 || g.2 > 65535 {
            return bad(LaunchCause::GridTooLarge { grid });
        }
        if c.0 == 0 || c.1 == 0 || c.2 == 0 {
            return bad(LaunchCause::ZeroClusterDimension { cluster });
        }
        if self.cluster_blocks() > MAX_CLUSTER_BLOCKS {
            return bad(LaunchCause::ClusterTooLarge {
                cluster,
                blocks: self.cluster_blocks(),
                max: MAX_CLUSTER_BLOCKS,
            });
        }
        if g.0 % c.0 != 0 || g.1 % c.1 != 0 || g.2 % c.2 != 0 {
            return bad(LaunchCause::ClusterDoesNotDivideGrid { cluster, grid });
        }
        Ok(())
    }

    /// Checks the block against the kernel's declared `max_threads` (after [`Self::validate`]),
    /// before anything is compiled: the driver would refuse the launch, and NVRTC may have
    /// given the kernel more registers than a larger block can have.
    pub(crate) fn check_max_threads(
        &self, kernel: &str, collective: bool, max_threads: Option<u32>,
    ) -> Result<()> {
        match max_threads {
            Some(bound) if self.block_threads() > u64::from(bound) => Err(BlockDiagnosis {
                threads: self.block_threads() as u32,
                cause: BlockCause::Bound { bound },
                max_threads: bound,
            }
            .into_error(kernel, collective)),
            _ => Ok(()),
        }
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

    #[test]
    fn cluster_checks() {
        let ok = LaunchConfig::blocks(132, 384).with_cluster((2, 1, 1));
        assert!(ok.validate("k").is_ok());
        assert_eq!(ok.cluster_blocks(), 2);
        assert_eq!(LaunchConfig::blocks(3, 32).cluster, (1, 1, 1));
        for (bad, says) in [
            (
                LaunchConfig::blocks(131, 384).with_cluster((2, 1, 1)),
                "does not divide grid",
            ),
            (
                LaunchConfig::dims((4, 6, 1), (128, 1, 1)).with_cluster((2, 4, 1)),
                "does not divide grid",
            ),
            (
                LaunchConfig::blocks(32, 128).with_cluster((16, 1, 1)),
                "at most 8",
            ),
            (
                LaunchConfig::blocks(32, 128).with_cluster((0, 1, 1)),
                "zero dimension",
            ),
        ] {
            let err = bad.validate("gemm").unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("gemm"), "{err}");
        }
    }

    #[test]
    fn the_declared_bound_is_checked_before_anything_is_compiled() {
        let cfg = LaunchConfig::blocks(1, 1024);
        cfg.check_max_threads("k", true, None).unwrap();
        cfg.check_max_threads("k", true, Some(1024)).unwrap();
        let err = cfg.check_max_threads("k", true, Some(256)).unwrap_err();
        let Error::BlockDoesNotFit {
            threads,
            max_threads,
            ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!((*threads, *max_threads), (1024, 256));
        assert!(err
            .to_string()
            .contains("The largest block that fits is 256 threads"));
    }
}
