//! [`AllReduceRmsNorm`]: the plan (its `Comm`, sizes and low-latency scratch), the choice of
//! algorithm and the kernels' prewarm; `op.rs` has the calls.

use super::AllReduceRmsNorm;
use pgas_runtime::kernel::Variant;
use pgas_runtime::launch::Prewarm;

use super::kernels::{allreduce_add_rmsnorm, allreduce_add_rmsnorm_ll};
use crate::coll::{Algorithm, Comm};
use crate::prelude::*;
use crate::{Error, Pgas, Result, SymTensor, Team};

/// Threads per block: 16 warps; a row of 8192 bf16 is one 16-byte vector pair a thread.
pub(super) const THREADS: u32 = 512;

/// The most dynamic shared memory the low-latency form's gathered rows take (`n * hidden * 2`
/// bytes; H100 and H200 give a block 227 KiB): past it, [`Algorithm::LowLatency`] is refused.
pub const LL_MAX_SHARED_BYTES: usize = 192 << 10;

/// The most blocks of the low-latency form: its scratch holds
/// `coll::device_scratch_len::<bf16>(n, hidden)` words a block (about twice the bytes of the
/// `n` rows: 128 KiB for two PEs at hidden 8192).
pub const LL_MAX_BLOCKS: usize = 32;

/// The most blocks the low-latency form splits a row over ([`AllReduceRmsNorm::ll_slices`]):
/// 16 slices of 512 elements were slower than 8 of 1024 at 1-4 tokens, on 4 and on 2 x H100
/// (`docs/ops.md` has the all-reduce + RMSNorm's figures).
pub const LL_MAX_SLICES: usize = 8;

/// The fewest 16-byte vectors of a row's slice in the low-latency form (1024 bf16): a block's
/// share of the lines, as `pgas::coll`'s low-latency all-reduce gives a block.
const LL_SLICE_MIN_VECTORS: usize = 128;

/// The most tokens whose rows the low-latency form splits: measured on 4 and 2 x H100
/// (`docs/ops.md`), split rows made 1 to 4 tokens faster on both, but 8 tokens in 4 blocks a
/// row were no faster and 16 in 2 slower.
const LL_SPLIT_MAX_TOKENS: usize = 4;

/// The most bytes of `x` for which [`Algorithm::Auto`] takes the low-latency form on more than
/// two PEs: up to 8 tokens of hidden 8192 it was the fastest form on 4 x H100, ahead of
/// one-shot, and at 16 one-shot was (`docs/ops.md`).
pub const LL_AUTO_MAX_BYTES: usize = 128 << 10;

/// The most bytes of `x` for which [`Algorithm::Auto`] takes the one-shot form on more than two
/// PEs (two: [`crate::coll::ONE_SHOT_MAX_BYTES_2PE`], where one-shot and two-shot move the same
/// bytes). Above the all-reduce's 256 KiB: the fused two-shot pays a leave handshake and a
/// system fence between its halves, and on 4 x H100 (both forced in one job) one-shot was
/// clearly faster at 32 and 64 tokens of hidden 8192; from 128 two-shot was (`docs/ops.md` has
/// the times).
pub const ONE_SHOT_MAX_BYTES: usize = 1 << 20;

/// [`LL_AUTO_MAX_BYTES`] on two PEs, where the low-latency form was the fastest up to 16
/// tokens of hidden 8192 (on 2 x H100: clearly ahead of one-shot at 16, even with it at 32;
/// `docs/ops.md`).
pub const LL_AUTO_MAX_BYTES_2PE: usize = 256 << 10;

/// The low-latency form's buffers: its LL scratch, its groups' barrier words and their partial
/// sums of squares ([`AllReduceRmsNorm`]'s `ll_scratch`).
pub(super) type LlScratch = (SymTensor<u64>, SymTensor<u64>, SymTensor<f32>);

/// The kernel's `mode` (comptime): one-shot.
pub(super) const ONE_SHOT: i128 = 0;
/// Two-shot.
pub(super) const TWO_SHOT: i128 = 1;
/// No exchange: the residual add and RMSNorm of an input that is already reduced.
pub(super) const LOCAL: i128 = 2;

/// Why `(hidden, max_tokens, eps)` cannot make an [`AllReduceRmsNorm`], with the fix, or `None`.
fn config_error(hidden: usize, max_tokens: usize, eps: f32) -> Option<String> {
    if hidden == 0 || !hidden.is_multiple_of(8) {
        return Some(format!(
            "hidden is {hidden}, but rows move as 16-byte vectors of 8 bf16. Fix: pass a \
             positive multiple of 8"
        ));
    }
    if hidden > u32::MAX as usize || max_tokens > u32::MAX as usize {
        return Some(format!(
            "hidden {hidden} or max_tokens {max_tokens} is over 2^32 - 1. Fix: pass smaller sizes"
        ));
    }
    if max_tokens == 0 {
        return Some("max_tokens is 0. Fix: pass the most tokens a call will take".into());
    }
    if !eps.is_finite() || eps < 0.0 {
        return Some(format!(
            "eps is {eps}. Fix: pass a finite eps >= 0 (1e-5 or 1e-6 in most models)"
        ));
    }
    None
}

/// [`AllReduceRmsNorm::ll_slices`] for rows of `hidden` elements and `blocks` blocks.
fn slices_for(hidden: usize, tokens: usize, blocks: usize) -> usize {
    if tokens > LL_SPLIT_MAX_TOKENS {
        return 1;
    }
    let vectors = hidden / 8;
    let most = LL_MAX_SLICES
        .min(vectors / LL_SLICE_MIN_VECTORS)
        .min(blocks / tokens.max(1));
    (1..=most.max(1))
        .rev()
        .find(|s| vectors.is_multiple_of(*s))
        .unwrap_or(1)
}

impl AllReduceRmsNorm {
    /// An operation over every PE (the world team) for rows of `hidden` bf16 elements (a
    /// multiple of 8), at most `max_tokens` rows a call, normalized with `eps`. Collective over
    /// all PEs: it makes a [`Comm`] (its flags and call counters are the kernel's), then the PEs
    /// compare their arguments and whether each reaches every peer by loads and stores
    /// ([`crate::ops::agree`]), so a mismatch or a bad size is the same `Err` on every PE and
    /// nothing is launched. Where some peer is not load/store reachable, every call runs the
    /// off-node form instead of the fused kernel: [`Comm`]'s all-reduce (NVSHMEM's, or the
    /// hierarchical one across nodes of NVLink-joined PEs) into a buffer of this operation,
    /// then [`AllReduceRmsNorm::add_rms_norm_on`]; it allocates `max_tokens * hidden` more
    /// `bf16` of symmetric heap for that buffer.
    pub fn new(pgas: &Pgas, hidden: usize, max_tokens: usize, eps: f32) -> Result<Self> {
        let comm = Comm::new(pgas, Team::WORLD)?;
        crate::ops::agree::agree(
            pgas,
            "AllReduceRmsNorm::new",
            &[
                ("hidden", hidden as u64),
                ("max_tokens", max_tokens as u64),
                ("eps (f32 bits)", u64::from(eps.to_bits())),
                (
                    "every peer load/store reachable",
                    comm.peers_reachable() as u64,
                ),
            ],
        )?;
        if let Some(why) = config_error(hidden, max_tokens, eps) {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm::new",
                value: format!("hidden {hidden}, max_tokens {max_tokens}, eps {eps}"),
                reason: why,
            });
        }
        let n = pgas.n_pes();
        // The same on every PE: the agreement above compared it.
        let off_node = if comm.peers_reachable() {
            None
        } else {
            Some(pgas.alloc::<bf16>(max_tokens * hidden)?)
        };
        let sms = pgas.sm_count()?;
        let fewest = if n > 1 {
            crate::ops::agree::gather_words(pgas, &[sms as u64])?
                .into_iter()
                .min()
                .unwrap_or(1) as usize
        } else {
            sms
        };
        let max_blocks = fewest.clamp(1, crate::coll::MAX_BLOCKS);
        // The same on every PE (n, hidden, max_tokens and the fewest SMs are), so every PE
        // allocates alike.
        let ll_region = crate::coll::device_scratch_len::<bf16>(n, hidden);
        let ll_blocks = (max_tokens * LL_MAX_SLICES)
            .min(max_blocks)
            .min(LL_MAX_BLOCKS);
        let ll_scratch = if off_node.is_none() && n * hidden * 2 <= LL_MAX_SHARED_BYTES {
            Some((
                pgas.alloc::<u64>(ll_blocks * ll_region)?,
                pgas.alloc::<u64>(ll_blocks)?,
                pgas.alloc::<f32>(2 * ll_blocks)?,
            ))
        } else {
            None
        };
        Ok(AllReduceRmsNorm {
            pgas: pgas.clone(),
            comm,
            hidden,
            max_tokens,
            eps,
            n,
            max_blocks,
            ll_scratch,
            ll_region,
            ll_blocks,
            off_node,
        })
    }

    /// Elements per row.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The most rows a call takes.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The norm's epsilon.
    pub fn eps(&self) -> f32 {
        self.eps
    }

    /// The PEs that take part (every PE).
    pub fn n_pes(&self) -> usize {
        self.n
    }

    /// The algorithm [`Algorithm::Auto`] takes for `tokens` rows: the low-latency form while the
    /// bytes of `x` are at most [`LL_AUTO_MAX_BYTES`] ([`LL_AUTO_MAX_BYTES_2PE`] on two PEs;
    /// where it is available), then one-shot while they are at most [`ONE_SHOT_MAX_BYTES`]
    /// ([`crate::coll::ONE_SHOT_MAX_BYTES_2PE`] on two PEs, where one-shot and two-shot move
    /// the same bytes), two-shot above. One PE: one-shot.
    pub fn algorithm_for(&self, tokens: usize) -> Algorithm {
        let bytes = tokens * self.hidden * 2;
        let one_shot_max = if self.n == 2 {
            crate::coll::ONE_SHOT_MAX_BYTES_2PE
        } else {
            ONE_SHOT_MAX_BYTES
        };
        let ll_max = if self.n == 2 {
            LL_AUTO_MAX_BYTES_2PE
        } else {
            LL_AUTO_MAX_BYTES
        };
        if self.n > 1 && self.ll_scratch.is_some() && bytes <= ll_max {
            Algorithm::LowLatency
        } else if self.n == 1 || bytes <= one_shot_max {
            Algorithm::OneShot
        } else {
            Algorithm::TwoShot
        }
    }

    /// The blocks the low-latency form splits each of `tokens` rows over: the most, up to
    /// [`LL_MAX_SLICES`], that divide a row's 16-byte vectors into slices of at least 1024
    /// elements and keep `tokens` rows' slices within its blocks, so that a call of few tokens
    /// spreads its lines over many blocks; 1 (whole rows) above 4 tokens, where splitting
    /// measured no faster.
    pub fn ll_slices(&self, tokens: usize) -> usize {
        slices_for(self.hidden, tokens, self.ll_blocks)
    }

    /// Whether [`Algorithm::LowLatency`] is available: every peer is reachable and the PEs'
    /// rows fit the shared memory of a block (`n * hidden * 2 <= LL_MAX_SHARED_BYTES`).
    pub fn low_latency_available(&self) -> bool {
        self.ll_scratch.is_some()
    }

    /// Compiles (or loads from the disk cache) the kernels this operation launches (one-shot,
    /// two-shot, low-latency where available, and the unfused norm), so that no call compiles
    /// and every call can be captured into a CUDA graph.
    pub fn prewarm(&self) -> Result<()> {
        let n = self.n as i128;
        let specs = [[n, ONE_SHOT], [n, TWO_SHOT], [1, LOCAL]];
        let mut list: Vec<Prewarm<'_>> = specs
            .iter()
            .map(|c| Prewarm {
                spec: &allreduce_add_rmsnorm::SPEC,
                variant: Variant::Plain,
                comptime: c,
            })
            .collect();
        let ll = [n];
        if self.low_latency_available() {
            list.push(Prewarm {
                spec: &allreduce_add_rmsnorm_ll::SPEC,
                variant: Variant::Plain,
                comptime: &ll,
            });
        }
        pgas_runtime::launch::prewarm(&self.pgas, &list)
    }
}

#[cfg(test)]
mod tests {
    use super::{config_error, slices_for};

    #[test]
    fn few_tokens_split_their_rows_over_blocks() {
        // Hidden 8192 (1024 vectors): 8 slices of 1024 elements while 8 a row fit 32 blocks.
        assert_eq!(slices_for(8192, 1, 32), 8);
        assert_eq!(slices_for(8192, 4, 32), 8);
        // More than 4 tokens: whole rows (splitting measured no faster there).
        assert_eq!(slices_for(8192, 8, 32), 1);
        assert_eq!(slices_for(8192, 64, 32), 1);
        // Hidden 7168 (896 vectors): 7 divides them, 8 does not.
        assert_eq!(slices_for(7168, 1, 32), 7);
        // Slices keep at least 1024 elements: hidden 2048 splits in 2, 1024 not at all.
        assert_eq!(slices_for(2048, 1, 32), 2);
        assert_eq!(slices_for(1024, 1, 32), 1);
        // Fewer blocks than tokens: whole rows; 3 tokens in 16 blocks: 5 a row, rounded down to
        // a divisor of the 1024 vectors.
        assert_eq!(slices_for(8192, 4, 2), 1);
        assert_eq!(slices_for(8192, 3, 16), 4);
    }

    #[test]
    fn bad_sizes_say_what_to_pass() {
        assert!(config_error(8192, 4096, 1e-5).is_none());
        assert!(config_error(12, 4, 1e-5).unwrap().contains("multiple of 8"));
        assert!(config_error(0, 4, 1e-5).unwrap().contains("multiple of 8"));
        assert!(config_error(8, 0, 1e-5)
            .unwrap()
            .contains("max_tokens is 0"));
        assert!(config_error(8, 4, f32::NAN).unwrap().contains("eps"));
        assert!(config_error(8, 4, -1.0).unwrap().contains("eps"));
    }
}
