//! [`RingAttention::run`]: the ring's steps (a block's attention while the next block travels)
//! and the merge of their results.

use cudarc::driver::CudaStream;

use super::kernels::{ring_combine, ring_stage, ring_unstage};
use super::plan::{CREDIT, NAME};
use super::RingAttention;
use crate::gemm::refuse;
use crate::prelude::*;
use crate::{Cmp, Error, Result, Team};

/// Threads per block of the copy and merge kernels.
const THREADS: u32 = 256;

impl RingAttention {
    /// `O = softmax(scale Q Kᵀ) V` of this PE's tokens over the whole sequence, on the pgas
    /// stream (the ring's puts on a copy stream of its own). Collective: every PE calls it, in
    /// the same order as its other collectives. Refuses buffers of the wrong size before
    /// anything is sent.
    pub fn run(
        &mut self, pgas: &Pgas, o: &mut CudaSlice<bf16>, q: &CudaSlice<bf16>, k: &CudaSlice<bf16>,
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
        &mut self, pgas: &Pgas, o: &mut CudaSlice<bf16>, q: &CudaSlice<bf16>, s: usize,
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
