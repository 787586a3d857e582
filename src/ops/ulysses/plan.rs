//! [`UlyssesAttention`]'s plan: its `Comm`, the symmetric exchange buffers and the per-PE
//! attention over the whole sequence; `op.rs` has the call.

use super::UlyssesAttention;
use crate::attention::{Attention, AttentionParams};
use crate::coll::Comm;
use crate::gemm::refuse;
use crate::prelude::*;
use crate::{Result, Team};

/// The name its refusals give.
pub(super) const NAME: &str = "UlyssesAttention";

impl UlyssesAttention {
    /// The plan for `tokens` tokens a PE (the same on every PE) with `params` (the heads of the
    /// whole model layer). Collective: every PE calls it with the same arguments. Refuses head
    /// counts that the PEs do not divide (each PE takes `heads / P` of the query and of the key
    /// heads) and what [`Attention`] refuses.
    pub fn new(pgas: &Pgas, params: AttentionParams, tokens: usize) -> Result<UlyssesAttention> {
        let pes = pgas.n_pes();
        if !params.heads_q.is_multiple_of(pes) || !params.heads_kv.is_multiple_of(pes) {
            return refuse(
                NAME,
                format!(
                    "{} query and {} key heads over {pes} PEs: the all-to-all form gives each PE \
                 heads / {pes} of both, so both must be multiples of {pes}",
                    params.heads_q, params.heads_kv
                ),
            );
        }
        let local = AttentionParams {
            heads_q: params.heads_q / pes,
            heads_kv: params.heads_kv / pes,
            ..params
        };
        let total = tokens * pes;
        let attention = Attention::fixed(pgas, local, 1, (total, total))?;
        let d = params.head_dim;
        let (nq, nkv) = (total * local.heads_q * d, total * local.heads_kv * d);
        let stream = pgas.stream();
        let full = [
            stream.alloc_zeros::<bf16>(nq)?,
            stream.alloc_zeros::<bf16>(nkv)?,
            stream.alloc_zeros::<bf16>(nkv)?,
            stream.alloc_zeros::<bf16>(nq)?,
        ];
        Ok(UlyssesAttention {
            comm: Comm::new(pgas, Team::WORLD)?,
            params,
            tokens,
            pes,
            attention,
            send: pgas.alloc::<bf16>(nq.max(1))?,
            recv: pgas.alloc::<bf16>(nq.max(1))?,
            full,
            lse: stream.alloc_zeros::<f32>((total * local.heads_q).max(1))?,
        })
    }
}
