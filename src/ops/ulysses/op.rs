//! [`UlyssesAttention`]: the plan (its `Comm`, symmetric exchange buffers, the per-PE attention
//! over the whole sequence) and a call.

use super::kernels::{ulysses_pack, ulysses_unpack};
use crate::attention::{Attention, AttentionParams};
use crate::coll::{Algorithm, Comm};
use crate::gemm::refuse;
use crate::prelude::*;
use crate::{Result, SymTensor, Team};

/// Threads per block of the layout kernels.
const THREADS: u32 = 256;

/// Attention over one sequence split across every PE (see the [module docs](super)): made
/// collectively with [`UlyssesAttention::new`], then one [`UlyssesAttention::run`] per call on
/// every PE.
///
/// PE `p` holds tokens `p * tokens .. (p + 1) * tokens` of the sequence: its Q and O are
/// `[tokens][heads_q][head_dim]`, its K and V `[tokens][heads_kv][head_dim]` (bf16). `causal`
/// masks by position in the whole sequence.
pub struct UlyssesAttention {
    comm: Comm,
    params: AttentionParams,
    tokens: usize,
    pes: usize,
    attention: Attention,
    send: SymTensor<bf16>,
    recv: SymTensor<bf16>,
    full: [CudaSlice<bf16>; 4],
    lse: CudaSlice<f32>,
}

/// The name its refusals give.
const NAME: &str = "UlyssesAttention";

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

    /// `O = softmax(scale Q Kᵀ) V` of this PE's tokens over the whole sequence, on the pgas
    /// stream. Collective: every PE calls it, in the same order as its other collectives.
    /// Refuses buffers of the wrong size before anything is sent.
    pub fn run(
        &mut self,
        pgas: &Pgas,
        o: &mut CudaSlice<bf16>,
        q: &CudaSlice<bf16>,
        k: &CudaSlice<bf16>,
        v: &CudaSlice<bf16>,
    ) -> Result<()> {
        let p = self.params;
        let (t, d, pes) = (self.tokens, p.head_dim, self.pes);
        if let Some(why) = p.slice_error(t, [q.len(), o.len(), k.len(), v.len()]) {
            return refuse(NAME, why);
        }
        if t == 0 {
            return Ok(());
        }
        let (hq, hkv) = (p.heads_q / pes, p.heads_kv / pes);
        let [qf, kf, vf, of] = &mut self.full;
        // Sequence split to head split: each tensor packed by destination PE, exchanged, and
        // copied out of the symmetric buffer (the attention reads `CudaSlice`s).
        for (x, full, h) in [(q, &mut *qf, hq), (k, &mut *kf, hkv), (v, &mut *vf, hkv)] {
            let n = t * pes * h * d;
            Layout(t, h, d, pes).pack(pgas, &mut self.send, x)?;
            self.comm.all_to_all(
                &mut self.recv.view_mut(..n)?,
                &self.send.view(..n)?,
                Algorithm::Auto,
            )?;
            Layout(t * pes, h, d, 1).unpack(pgas, full, &self.recv)?;
        }
        self.attention
            .run(pgas, of, &mut self.lse, qf, kf, vf, false)?;
        // And back: PE g's block is the tokens of PE g's slice, for this PE's heads.
        let n = t * pes * hq * d;
        Layout(t * pes, hq, d, 1).pack(pgas, &mut self.send, of)?;
        self.comm.all_to_all(
            &mut self.recv.view_mut(..n)?,
            &self.send.view(..n)?,
            Algorithm::Auto,
        )?;
        Layout(t, hq, d, pes).unpack(pgas, o, &self.recv)
    }
}

/// The sizes of a layout change, the kernels' `(tokens, hp, d, pes)`: `tokens` rows of `pes`
/// blocks of `hp` heads of `d` elements.
#[derive(Clone, Copy)]
struct Layout(usize, usize, usize, usize);

impl Layout {
    /// A launch over `tokens * pes * hp * d` elements, one thread each.
    fn blocks(self) -> LaunchConfig {
        let Layout(tokens, hp, d, pes) = self;
        let n = (tokens * pes * hp * d) as u32;
        LaunchConfig::blocks(n.div_ceil(THREADS), THREADS)
    }

    /// [`ulysses_pack`] of `src` into `dst`.
    fn pack(self, pgas: &Pgas, dst: &mut SymTensor<bf16>, src: &CudaSlice<bf16>) -> Result<()> {
        let Layout(tokens, hp, d, pes) = self;
        ulysses_pack::launch(pgas, self.blocks(), dst, src, tokens, hp, d, pes)
    }

    /// [`ulysses_unpack`] of `src` into `dst`.
    fn unpack(self, pgas: &Pgas, dst: &mut CudaSlice<bf16>, src: &SymTensor<bf16>) -> Result<()> {
        let Layout(tokens, hp, d, pes) = self;
        ulysses_unpack::launch(pgas, self.blocks(), dst, src, tokens, hp, d, pes)
    }
}
