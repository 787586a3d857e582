//! [`RingAttention`]: the plan (two symmetric ring slots, their signal words, the copy stream,
//! one attention plan per kind of step) and a call.

use crate::gemm::refuse;
use cudarc::driver::sys as cu;
use cudarc::driver::{CudaEvent, CudaStream};

use super::kernels::{ring_combine, ring_stage, ring_unstage};
use crate::attention::{Attention, AttentionParams};
use crate::prelude::*;
use crate::{Cmp, Error, Result, SignalOp, SymTensor, Team};

/// Threads per block of the copy and merge kernels.
const THREADS: u32 = 256;

/// Signal words of [`RingAttention::sig`]: the arrival in each slot, then the successor's credit.
const CREDIT: usize = 2;

/// Attention over one sequence split across every PE by a ring (see the [module docs](super)):
/// made collectively with [`RingAttention::new`], then one [`RingAttention::run`] per call on
/// every PE.
///
/// Each PE holds `tokens` tokens of the sequence (Q and O `[tokens][heads_q][head_dim]`, K and
/// V `[tokens][heads_kv][head_dim]`, bf16). Without `causal` any split works; with it, PE `r`
/// holds the zigzag slice [`RingAttention::slice_of`]: chunks `r` and `2P - 1 - r` of the `2P`
/// chunks of `tokens / 2` tokens, one after the other.
pub struct RingAttention {
    params: AttentionParams,
    tokens: usize,
    pes: usize,
    me: usize,
    /// The step plans: causal, [own block, an earlier PE's, a later PE's]; else [any block].
    plans: Vec<Attention>,
    /// Ring slots 0 and 1, each K then V of one block.
    slots: [SymTensor<bf16>; 2],
    sig: SymTensor<u64>,
    /// The credit's payload (a put carries each signal).
    token: SymTensor<u64>,
    /// K and V of the block a step computes on, the step's O and LSE, the running O and LSE.
    kv: [CudaSlice<bf16>; 2],
    step_o: CudaSlice<bf16>,
    step_lse: CudaSlice<f32>,
    acc: CudaSlice<f32>,
    lse_acc: CudaSlice<f32>,
    copy: std::sync::Arc<CudaStream>,
    events: [CudaEvent; 2],
    /// Calls made: signal values grow with them, so no word is ever reset.
    calls: u64,
}

/// The name its refusals give.
const NAME: &str = "RingAttention";

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

    /// `O = softmax(scale Q Kᵀ) V` of this PE's tokens over the whole sequence, on the pgas
    /// stream (the ring's puts on a copy stream of its own). Collective: every PE calls it, in
    /// the same order as its other collectives. Refuses buffers of the wrong size before
    /// anything is sent.
    pub fn run(
        &mut self,
        pgas: &Pgas,
        o: &mut CudaSlice<bf16>,
        q: &CudaSlice<bf16>,
        k: &CudaSlice<bf16>,
        v: &CudaSlice<bf16>,
    ) -> Result<()> {
        let p = self.params;
        let (t, d, pes, me) = (self.tokens, p.head_dim, self.pes, self.me);
        if let Some(why) = p.slice_error(t, [q.len(), o.len(), k.len(), v.len()]) {
            return refuse(NAME, why);
        }
        if t == 0 {
            return Ok(());
        }
        self.calls += 1;
        // Signal values of this call: step s's block arrives as base + s, the successor's
        // credit for step s is base + s.
        let base = self.calls * pes as u64;
        let main = pgas.stream().clone();
        let kv_len = t * p.heads_kv * d;
        launch(kv_len, |cfg| {
            ring_stage::launch(pgas, cfg, &mut self.slots[0], k, 0)
        })?;
        launch(kv_len, |cfg| {
            ring_stage::launch(pgas, cfg, &mut self.slots[0], v, kv_len)
        })?;
        self.fork(&main)?;
        let (next, prev) = ((me + 1) % pes, (me + pes - 1) % pes);
        for s in 0..pes {
            let slot = s % 2;
            // The copy stream passes this block on once it is here and the successor is done
            // with the slot it lands in (its step s - 1: computed on and passed on).
            if s + 1 < pes {
                if s >= 1 {
                    let arrived = base + s as u64;
                    pgas.signal_wait_until_on_stream(
                        &self.copy,
                        &self.sig,
                        slot,
                        Cmp::Ge,
                        arrived,
                    )?;
                    let done = base + s as u64 - 1;
                    pgas.signal_wait_until_on_stream(&self.copy, &self.sig, CREDIT, Cmp::Ge, done)?;
                }
                let [s0, s1] = &self.slots;
                let (from, to) = if slot == 0 { (s0, s1) } else { (s1, s0) };
                let value = base + s as u64 + 1;
                pgas.put_signal_on(
                    &self.copy,
                    to,
                    from,
                    &self.sig,
                    1 - slot,
                    value,
                    SignalOp::Set,
                    next,
                )?;
            }
            // The pgas stream computes on it.
            if s >= 1 {
                pgas.signal_wait_until_on_stream(&main, &self.sig, slot, Cmp::Ge, base + s as u64)?;
            }
            self.step(pgas, o, q, s)?;
            // The predecessor may refill this slot once this PE computed on it and passed it on.
            if s + 2 < pes {
                self.events[slot]
                    .record(&main)
                    .map_err(Error::cuda("recording a ring step"))?;
                self.copy
                    .wait(&self.events[slot])
                    .map_err(Error::cuda("ordering a credit after its step"))?;
                pgas.put_signal_on(
                    &self.copy,
                    &self.token,
                    &self.token,
                    &self.sig,
                    CREDIT,
                    base + s as u64,
                    SignalOp::Set,
                    prev,
                )?;
            }
        }
        // Nothing of this call is in flight when the next starts: the copy stream joins the
        // pgas stream, and every PE passes a barrier on it.
        self.events[0]
            .record(&self.copy)
            .map_err(Error::cuda("recording the ring's last put"))?;
        main.wait(&self.events[0])
            .map_err(Error::cuda("joining the ring's copy stream"))?;
        Team::WORLD.barrier_on(pgas, &main)
    }

    /// Starts the copy stream at this point of the pgas stream (`main`).
    fn fork(&self, main: &CudaStream) -> Result<()> {
        self.events[1]
            .record(main)
            .map_err(Error::cuda("recording the ring's start"))?;
        self.copy
            .wait(&self.events[1])
            .map_err(Error::cuda("starting the ring's copy stream"))
    }

    /// Step `s`: attention of this PE's queries against the block in slot `s % 2`, which came
    /// from PE `me - s`, merged into the running result; the last step writes O.
    fn step(
        &mut self,
        pgas: &Pgas,
        o: &mut CudaSlice<bf16>,
        q: &CudaSlice<bf16>,
        s: usize,
    ) -> Result<()> {
        let p = self.params;
        let (t, d) = (self.tokens, p.head_dim);
        let kv_len = t * p.heads_kv * d;
        let slot = &self.slots[s % 2];
        let [kb, vb] = &mut self.kv;
        launch(kv_len, |cfg| ring_unstage::launch(pgas, cfg, kb, slot, 0))?;
        launch(kv_len, |cfg| {
            ring_unstage::launch(pgas, cfg, vb, slot, kv_len)
        })?;
        // The block's owner: `s` PEs before this one.
        let src = (self.me + self.pes - s) % self.pes;
        let plan = if !p.causal || s == 0 {
            &self.plans[0]
        } else if src < self.me {
            &self.plans[1]
        } else {
            &self.plans[2]
        };
        plan.run(pgas, &mut self.step_o, &mut self.step_lse, q, kb, vb, false)?;
        let rows = t * p.heads_q;
        let (first, last) = (s == 0, s + 1 == self.pes);
        launch(rows, |cfg| {
            ring_combine::launch(
                pgas,
                cfg,
                &mut self.acc,
                &mut self.lse_acc,
                o,
                &self.step_o,
                &self.step_lse,
                d,
                first,
                last,
            )
        })
    }
}

/// Calls `f` with a launch of one thread for each of `n` items.
fn launch(n: usize, f: impl FnOnce(LaunchConfig) -> Result<()>) -> Result<()> {
    let n = n as u32;
    f(LaunchConfig::blocks(n.div_ceil(THREADS), THREADS))
}
