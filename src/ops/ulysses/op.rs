//! [`UlyssesAttention::run`]: the all-to-alls that trade the sequence split for a head split
//! and back, with the layout kernels around them and the attention between.

use super::kernels::{ulysses_pack, ulysses_unpack};
use super::plan::NAME;
use super::UlyssesAttention;
use crate::coll::Algorithm;
use crate::gemm::refuse;
use crate::prelude::*;
use crate::{Result, SymTensor};

/// Threads per block of the layout kernels.
const THREADS: u32 = 256;

impl UlyssesAttention {
    /// `O = softmax(scale Q Kᵀ) V` of this PE's tokens over the whole sequence, on the pgas
    /// stream. Collective: every PE calls it, in the same order as its other collectives.
    /// Refuses buffers of the wrong size before anything is sent.
    pub fn run(
        &mut self, pgas: &Pgas, o: &mut CudaSlice<bf16>, q: &CudaSlice<bf16>, k: &CudaSlice<bf16>,
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
