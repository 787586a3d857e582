//! [`RingAttention`]'s plan: two symmetric ring slots and their signal words, the copy stream,
//! one attention plan per kind of step, and the zigzag slices; `op.rs` has the call.

use super::RingAttention;
use crate::attention::{Attention, AttentionParams};
use crate::gemm::refuse;
use crate::prelude::*;
use crate::{Error, Result};
use cudarc::driver::sys as cu;

/// Signal words of [`RingAttention::sig`]: the arrival in each slot, then the successor's credit.
pub(super) const CREDIT: usize = 2;

/// The name its refusals give.
pub(super) const NAME: &str = "RingAttention";

impl RingAttention {
    /// The plan for `tokens` tokens a PE (the same on every PE; even when `params.causal`, for
    /// the two chunks of the zigzag slice). Collective: every PE calls it with the same
    /// arguments. Refuses what [`Attention`] refuses.
    pub fn new(pgas: &Pgas, params: AttentionParams, tokens: usize) -> Result<RingAttention> {
        let (pes, me) = (pgas.n_pes(), pgas.my_pe());
        if params.causal && !tokens.is_multiple_of(2) {
            return refuse(
                NAME,
                format!(
                    "{tokens} tokens a PE with causal masking: the zigzag slice is two chunks of \
                 tokens / 2, so the count must be even"
                ),
            );
        }
        let (t, c) = (tokens, tokens / 2);
        let plans = if params.causal {
            vec![
                // Own block: chunk r against itself (the diagonal), chunk 2P-1-r against both
                // (causal, aligned to the end of the range).
                Attention::with_key_ranges(pgas, params, &[c, c], &[(0, c), (0, t)])?,
                // An earlier PE's block: both chunks see its first chunk only.
                Attention::with_key_ranges(
                    pgas,
                    AttentionParams {
                        causal: false,
                        ..params
                    },
                    &[t],
                    &[(0, c)],
                )?,
                // A later PE's block: chunk r sees none of it, chunk 2P-1-r all of it.
                Attention::with_key_ranges(
                    pgas,
                    AttentionParams {
                        causal: false,
                        ..params
                    },
                    &[c, c],
                    &[(0, 0), (0, t)],
                )?,
            ]
        } else {
            vec![Attention::fixed(pgas, params, 1, (t, t))?]
        };
        let (hq, hkv, d) = (params.heads_q, params.heads_kv, params.head_dim);
        let kv_len = t * hkv * d;
        let stream = pgas.stream();
        let ctx = pgas.cuda();
        let event = || {
            ctx.new_event(Some(cu::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(Error::cuda("creating the ring's events"))
        };
        let sig = pgas.alloc::<u64>(3)?;
        let ring = RingAttention {
            params,
            tokens,
            pes,
            me,
            plans,
            slots: [
                pgas.alloc::<bf16>((2 * kv_len).max(1))?,
                pgas.alloc::<bf16>((2 * kv_len).max(1))?,
            ],
            sig,
            token: pgas.alloc::<u64>(1)?,
            kv: [
                stream.alloc_zeros::<bf16>(kv_len.max(1))?,
                stream.alloc_zeros::<bf16>(kv_len.max(1))?,
            ],
            step_o: stream.alloc_zeros::<bf16>((t * hq * d).max(1))?,
            step_lse: stream.alloc_zeros::<f32>((t * hq).max(1))?,
            acc: stream.alloc_zeros::<f32>((t * hq * d).max(1))?,
            lse_acc: stream.alloc_zeros::<f32>((t * hq).max(1))?,
            copy: ctx
                .new_stream()
                .map_err(Error::cuda("creating the ring's copy stream"))?,
            events: [event()?, event()?],
            calls: 0,
        };
        // Every PE's signal words are zeroed before any PE's first call can signal them.
        pgas.barrier_all()?;
        Ok(ring)
    }

    /// The sequence positions of PE `pe`'s tokens, in the order its tensors hold them: with
    /// causal masking the zigzag slice (chunk `pe`, then chunk `2P - 1 - pe`, each `tokens / 2`
    /// long), else the contiguous slice `pe`.
    pub fn slice_of(&self, pe: usize) -> Vec<std::ops::Range<usize>> {
        let (t, p) = (self.tokens, self.pes);
        if self.params.causal {
            let c = t / 2;
            vec![pe * c..(pe + 1) * c, (2 * p - 1 - pe) * c..(2 * p - pe) * c]
        } else {
            let slice = pe * t..(pe + 1) * t;
            vec![slice]
        }
    }
}
