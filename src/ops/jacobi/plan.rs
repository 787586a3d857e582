//! The forms of the stencil ([`Sweep`], [`Fused`], [`FORMS`]: which kernel a call launches and
//! how it walks its rows), the methods a call takes, and the checks of a field against them;
//! `op.rs` has the calls.

use crate::ops::halo::Halo2d;
use crate::{Error, Result};

/// Threads per block of the unfused stencil kernel ([`jacobi_step`](super::jacobi_step)) and of the fused kernel's
/// 1024-thread forms.
pub const THREADS: u32 = 1024;

/// The deepest batch [`Sweep::Batched`] takes: the rows a batch holds are an array of
/// `MAX_DEPTH + 2` vectors.
pub const MAX_DEPTH: usize = 8;

/// How the stencil kernels walk a band of rows (both kernels take it; `benches/halo.rs` times
/// each). Every form computes the same values bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// A thread walks 4 columns of up to 8 rows with the next row's loads in flight: one
    /// 16-byte load ahead of use per thread (the form of the first measurements).
    /// Best while the field fits L2 (its short items spread a small band over every thread).
    Rolled,
    /// A thread walks 4 columns of as many rows as the band divided among the block's threads
    /// gives it, loading `depth` rows (1 to [`MAX_DEPTH`]) at once before computing them:
    /// `depth` 16-byte loads in flight per thread, the memory parallelism a DRAM-bound sweep
    /// needs with one block an SM. `depth` costs registers: 4 is what a 1024-thread block's 64
    /// registers a thread hold; 8 needs a 512-thread block's budget ([`Fused::threads`]).
    Batched {
        /// Rows loaded at once per thread.
        depth: usize,
    },
}

impl Default for Sweep {
    /// [`Sweep::Batched`] 4 deep: the unfused kernel's form ([`Method::Unfused`]).
    fn default() -> Sweep {
        Sweep::Batched { depth: 4 }
    }
}

impl Sweep {
    /// The kernels' comptime `depth`: 0 for [`Sweep::Rolled`], else the batch depth. An `Err`
    /// for a batch depth outside 1 to [`MAX_DEPTH`].
    pub fn depth(self) -> Result<usize> {
        match self {
            Sweep::Rolled => Ok(0),
            Sweep::Batched { depth } if (1..=MAX_DEPTH).contains(&depth) => Ok(depth),
            Sweep::Batched { depth } => Err(Error::InvalidConfig {
                name: "jacobi Sweep::Batched depth",
                value: depth.to_string(),
                reason: format!(
                    "a batch holds its rows in registers, 1 to {MAX_DEPTH} of them. Fix: pass \
                     a depth from 1 to {MAX_DEPTH} (4 for 1024-thread blocks, 8 for 512)"
                ),
            }),
        }
    }
}

/// The form of the fused kernel ([`Method::FusedAs`]); [`Fused::for_size`] is what
/// [`Method::Fused`] runs. Every form computes the same values bit for bit, and every form is one
/// block an SM, so [`Halo2d::resident_blocks`] holds for all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fused {
    /// How each block walks its band.
    pub sweep: Sweep,
    /// Threads per block: 1024 ([`jacobi_fused`](super::jacobi_fused), at most 64 registers a thread) or 512
    /// ([`jacobi_fused_512`](super::jacobi_fused_512), up to 128: the batched forms there use 97 and 126, ptxas at
    /// sm_90, so such a block is alone on its SM: half the warps, each with twice the registers
    /// for rows in flight). Either way one block an SM is always resident (64K registers), which
    /// is all [`Halo2d::resident_blocks`] assumes.
    pub threads: u32,
}

/// The fused forms `benches/halo.rs` times side by side (and the GPU suite checks), the kernel
/// of the first measurements ([`Fused::FIRST`]) first.
pub const FORMS: [Fused; 5] = [
    Fused::FIRST,
    Fused {
        sweep: Sweep::Batched { depth: 2 },
        threads: 1024,
    },
    Fused {
        sweep: Sweep::Batched { depth: 4 },
        threads: 1024,
    },
    Fused {
        sweep: Sweep::Batched { depth: 4 },
        threads: 512,
    },
    Fused {
        sweep: Sweep::Batched { depth: 8 },
        threads: 512,
    },
];

impl Fused {
    /// The kernel as first measured: [`Sweep::Rolled`] in 1024-thread blocks.
    pub const FIRST: Fused = Fused {
        sweep: Sweep::Rolled,
        threads: 1024,
    };

    /// The form [`Method::Fused`] runs for a slab of `rows` rows of `nx` values, from the
    /// measurements in `docs/ops.md` (2 x H100, every form in one job), the fastest form at
    /// each size: up to a plane of 4 MiB (N <= 1024), batched 4 deep in 512-thread blocks; up
    /// to 16 MiB (N <= 2048), 8 deep in 512-thread blocks; above, where the planes outgrow the
    /// 50 MB L2, batched 2 deep in 1024-thread blocks (at N = 4096, 8192 and 16384; at 16384
    /// it beat the unfused sweep, which the first kernel did not).
    pub fn for_size(nx: usize, rows: usize) -> Fused {
        let plane = nx.saturating_mul(rows).saturating_mul(4);
        if plane <= 4 << 20 {
            Fused {
                sweep: Sweep::Batched { depth: 4 },
                threads: 512,
            }
        } else if plane <= 16 << 20 {
            Fused {
                sweep: Sweep::Batched { depth: 8 },
                threads: 512,
            }
        } else {
            Fused {
                sweep: Sweep::Batched { depth: 2 },
                threads: 1024,
            }
        }
    }
}

/// The stencil's 16-byte vectors need whole vectors per row. `nx` is the same on every PE
/// (`Halo2d::new` checked it), so this is an `Err` on every PE alike.
pub(super) fn check_vector_rows(halo: &Halo2d) -> Result<()> {
    if !halo.nx().is_multiple_of(4) {
        return Err(Error::InvalidConfig {
            name: "jacobi2d row length nx",
            value: halo.nx().to_string(),
            reason: "the stencil moves 16-byte vectors of 4 f32, so nx must be a multiple of 4. \
                     Fix: pad the rows to a multiple of 4"
                .to_owned(),
        });
    }
    Ok(())
}

/// How [`run`](super::run) iterates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every iteration in one launch ([`jacobi_fused`](super::jacobi_fused) or [`jacobi_fused_512`](super::jacobi_fused_512)), in the form
    /// [`Fused::for_size`] picks for this PE's slab.
    Fused,
    /// The same in the form given (each form is its own specialization, compiled on first
    /// use); an `Err` for a form no kernel has (threads other than 512 or 1024, a batch depth
    /// outside 1 to [`MAX_DEPTH`]).
    FusedAs(Fused),
    /// Per iteration, `Halo2d::exchange_on` and one [`jacobi_step`](super::jacobi_step) launch, the stencil walking
    /// its rows as the sweep says ([`Sweep::default`]: batched, 4 deep).
    Unfused(Sweep),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_size_picks_the_measured_best_and_a_listed_form() {
        let pick = |n: usize| Fused::for_size(n, n);
        let form = |depth, threads| Fused {
            sweep: Sweep::Batched { depth },
            threads,
        };
        assert_eq!(pick(1024), form(4, 512));
        assert_eq!(pick(2048), form(8, 512));
        assert_eq!(
            (pick(4096), pick(8192), pick(16384)),
            (form(2, THREADS), form(2, THREADS), form(2, THREADS))
        );
        // benches/halo.rs reports the pick's time from the forms it ran.
        for n in [4, 1024, 2048, 4096, 8192, 16384, 1 << 20] {
            assert!(FORMS.contains(&pick(n)), "{n}");
        }
    }

    #[test]
    fn every_listed_form_has_a_kernel_and_bad_depths_name_the_fix() {
        for f in FORMS {
            assert!(f.sweep.depth().is_ok(), "{f:?}");
            assert!(f.threads == THREADS || f.threads == 512, "{f:?}");
        }
        assert_eq!(Sweep::Rolled.depth().unwrap(), 0);
        for depth in [0, MAX_DEPTH + 1] {
            let e = Sweep::Batched { depth }.depth().unwrap_err();
            assert!(
                e.to_string().contains("Fix: pass a depth from 1 to 8"),
                "{e}"
            );
        }
    }
}
