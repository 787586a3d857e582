//! The sizes a [`MoeDispatcher`](super::MoeDispatcher) is made for ([`MoeConfig`]), the limits
//! on them, and the symmetric memory they take.

use super::kernels::SYNC_WORDS;
use crate::{Error, Pgas, Result};

/// Most SMs a dispatch or combine grid is sized for (also capped at the GPU's SM count; the
/// grid has [`BLOCKS_PER_SM`](super::kernels::BLOCKS_PER_SM) blocks for each).
pub const MAX_BLOCKS: usize = 132;

/// Most experts a token is routed to (one lane of a warp writes each slot's metadata).
pub const MAX_TOP_K: usize = 32;

/// Most experts in all (`n_pes * experts_per_pe`): one layout block counts each.
pub const MAX_EXPERTS: usize = 4096;

/// The sizes a [`MoeDispatcher`](super::MoeDispatcher) is built for; the same on every PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeConfig {
    /// Most tokens a PE routes in one call (each call may route fewer; PEs may differ).
    pub max_tokens: usize,
    /// Elements of a token row (`bf16`); a multiple of 8 (rows move as 16-byte vectors).
    pub hidden: usize,
    /// Experts per token (1 to [`MAX_TOP_K`]).
    pub top_k: usize,
    /// Experts on each PE.
    pub experts_per_pe: usize,
}

impl MoeConfig {
    /// Rows a PE can receive in one call, the worst case: every token of every PE comes here.
    pub fn max_recv_rows(&self, n_pes: usize) -> usize {
        n_pes * self.max_tokens
    }

    /// (row, local expert) pairs a PE can receive in one call, the worst case: each received
    /// row is for `min(top_k, experts_per_pe)` experts here.
    pub fn max_pairs(&self, n_pes: usize) -> usize {
        self.max_recv_rows(n_pes) * self.top_k.min(self.experts_per_pe)
    }

    /// Bytes of symmetric heap a dispatcher of these sizes allocates on each PE (receive rows
    /// and combine rows, `2 * n_pes * max_tokens * hidden * 2` bytes, dominate), with 4 KiB
    /// per buffer for NVSHMEM's alignment; pass at least this much more than the rest of the
    /// program needs to [`crate::PgasBuilder::heap_size`] (and [`MoeConfig::fp8_bytes`] more
    /// for FP8 dispatch; where some peer is not load/store reachable, another
    /// `n_pes * max_tokens * hidden * 2` for the stage NVSHMEM's puts and gets use). One part per
    /// buffer `new` allocates.
    pub fn symmetric_bytes(&self, n_pes: usize) -> usize {
        let rows = self.max_recv_rows(n_pes);
        let w = n_pes + n_pes * self.experts_per_pe;
        let parts = [
            rows * self.hidden * 2,                    // recv_x
            16,                                        // recv_q, until FP8 dispatch is on
            4,                                         // recv_scale, likewise
            32,                                        // stage, where every peer is reachable
            n_pes * self.max_tokens * self.hidden * 2, // comb
            rows * 2 * 4,                              // recv_src
            rows * self.top_k * 4,                     // recv_idx
            rows * self.top_k * 4,                     // recv_w
            rows * self.top_k * 4,                     // row_pairs
            self.max_pairs(n_pes) * 4,                 // expert_rows
            n_pes * w * 4,                             // counts
            info_len(n_pes, self.experts_per_pe) * 4,  // info
            self.max_tokens * n_pes * 4,               // tok_rank
            self.max_tokens * self.top_k * 4,          // tok_erank
            SYNC_WORDS * 8,                            // sync
            SIG_GROUPS * n_pes * 8,                    // sigs
            AGREE_WORDS * 8,                           // agree_mine
            AGREE_WORDS * 8 * n_pes,                   // agree_all
        ];
        parts
            .iter()
            .map(|b| b.next_multiple_of(4096))
            .sum::<usize>()
    }

    /// Bytes of symmetric heap that [`MoeDispatcher::set_fp8_dispatch`] allocates on each PE
    /// the first time it turns FP8 dispatch on (rows of `e4m3` and their scales, with 4 KiB
    /// per buffer for NVSHMEM's alignment), beyond [`MoeConfig::symmetric_bytes`].
    ///
    /// [`MoeDispatcher::set_fp8_dispatch`]: super::MoeDispatcher::set_fp8_dispatch
    pub fn fp8_bytes(&self, n_pes: usize) -> usize {
        let values = self.max_recv_rows(n_pes) * self.hidden;
        [values, values / 128 * 4]
            .iter()
            .map(|b| b.next_multiple_of(4096))
            .sum()
    }

    /// Checks that every PE passed these sizes to `who` (a constructor, named in the error)
    /// and that they suit the context's PEs. Collective: the sizes are gathered from every PE.
    pub(super) fn agree_and_check(&self, pgas: &Pgas, who: &'static str) -> Result<()> {
        crate::ops::agree::agree(
            pgas,
            who,
            &[
                ("max_tokens", self.max_tokens as u64),
                ("hidden", self.hidden as u64),
                ("top_k", self.top_k as u64),
                ("experts_per_pe", self.experts_per_pe as u64),
            ],
        )?;
        let n = pgas.n_pes();
        match self.problem(n) {
            Some((name, reason)) => Err(Error::InvalidConfig {
                name,
                value: format!("{self:?} on {n} PE(s)"),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The first thing wrong with these sizes on `n_pes` PEs, if any.
    pub(super) fn problem(&self, n_pes: usize) -> Option<(&'static str, String)> {
        let e = n_pes.saturating_mul(self.experts_per_pe);
        if self.max_tokens == 0 {
            Some(("max_tokens", "must be at least 1".into()))
        } else if self.hidden == 0 || !self.hidden.is_multiple_of(8) {
            Some((
                "hidden",
                "must be a positive multiple of 8 (rows move as 16-byte vectors of 8 bf16)".into(),
            ))
        } else if self.top_k == 0 || self.top_k > MAX_TOP_K {
            Some(("top_k", format!("must be 1 to {MAX_TOP_K}")))
        } else if self.experts_per_pe == 0 || e > MAX_EXPERTS {
            Some((
                "experts_per_pe",
                format!("must be at least 1, and n_pes * experts_per_pe at most {MAX_EXPERTS}"),
            ))
        } else if self.max_pairs(n_pes) > i32::MAX as usize
            || self
                .max_recv_rows(n_pes)
                .checked_mul(self.hidden)
                .is_none_or(|x| x > isize::MAX as usize / 2)
        {
            Some((
                "max_tokens",
                "too large: row and pair numbers are 32-bit on the GPU".into(),
            ))
        } else {
            None
        }
    }
}

/// Small sizes the unit tests of the MoE modules share.
#[cfg(test)]
pub(super) const TEST_CONFIG: MoeConfig = MoeConfig {
    max_tokens: 4,
    hidden: 16,
    top_k: 2,
    experts_per_pe: 3,
};

/// Elements of `info` (see [`kernels`]): counts row, send offsets, send pair bases, receive
/// offsets, expert offsets.
pub(super) fn info_len(n: usize, el: usize) -> usize {
    let e = n * el;
    (n + e) + n + e + (n + 1) + (el + 1)
}

/// Signal words per PE in `sigs` (see [`kernels`](super::kernels)): counts row, dispatch,
/// combine, combine-rows ready.
pub(super) const SIG_GROUPS: usize = 4;

/// Words of one PE's entry in an agreement (config fields, or a routing verdict).
pub(super) const AGREE_WORDS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_sizes_are_named() {
        let ok = TEST_CONFIG;
        assert_eq!(ok.problem(2), None);
        let bad = |f: fn(&mut MoeConfig)| {
            let mut c = ok;
            f(&mut c);
            c.problem(2).map(|p| p.0)
        };
        assert_eq!(bad(|c| c.hidden = 12), Some("hidden"));
        assert_eq!(bad(|c| c.hidden = 0), Some("hidden"));
        assert_eq!(bad(|c| c.top_k = 0), Some("top_k"));
        assert_eq!(bad(|c| c.top_k = 33), Some("top_k"));
        assert_eq!(bad(|c| c.experts_per_pe = 0), Some("experts_per_pe"));
        assert_eq!(bad(|c| c.experts_per_pe = 4000), Some("experts_per_pe"));
        assert_eq!(bad(|c| c.max_tokens = 0), Some("max_tokens"));
        assert_eq!(bad(|c| c.max_tokens = 1 << 30), Some("max_tokens"));
    }

    #[test]
    fn sizes_of_the_deepseek_shape() {
        let c = MoeConfig {
            max_tokens: 4096,
            hidden: 7168,
            top_k: 8,
            experts_per_pe: 8,
        };
        assert_eq!(c.max_recv_rows(2), 8192);
        assert_eq!(c.max_pairs(2), 65536);
        // Two 117 MB row buffers dominate.
        let b = c.symmetric_bytes(2);
        assert!(
            b > 2 * 8192 * 7168 * 2 && b < 2 * 8192 * 7168 * 2 + (8 << 20),
            "{b}"
        );
        // Sizes where every buffer fits in 4 KiB: one 4 KiB slot for each of the 18 buffers
        // `MoeDispatcher::new` allocates.
        let tiny = MoeConfig {
            max_tokens: 1,
            hidden: 8,
            top_k: 1,
            experts_per_pe: 1,
        };
        assert_eq!(tiny.symmetric_bytes(2), 18 * 4096);
        // FP8: 8192 rows of 7168 bytes and 56 scales each.
        assert_eq!(c.fp8_bytes(2), 8192 * 7168 + 8192 * 56 * 4);
    }
}
