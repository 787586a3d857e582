//! [`LowLatencyMoe`]'s calls: a decode step's dispatch and combine, one kernel each way (and the
//! combine's reduction), and their checks.

use cudarc::driver::CudaSlice;
use pgas_runtime::kernel::{KernelSpec, Variant};
use pgas_runtime::launch::KernelArgs;

use super::kernels::{self, LL_THREADS};
use super::LowLatencyMoe;
use crate::ops::lengths::at_least;
use crate::{bf16, Error, LaunchConfig, Pgas, Result};

impl LowLatencyMoe {
    /// Sends this PE's `tokens` rows of `x` (`hidden` `bf16` each) to the PEs of their experts,
    /// on the context's stream, one kernel: `topk_idx` holds `tokens * top_k` expert ids on the
    /// GPU (expert `g` lives on PE `g / experts_per_pe`; `-1`, or an id out of range, sends
    /// nothing for that slot; an expert may appear twice in a token, and then gets the row twice)
    /// and `topk_weights` their weights, which travel with the rows: the experts' PEs apply them
    /// in [`LowLatencyMoe::combine`]. When it completes on a PE, [`LowLatencyMoe::recv_x`] and
    /// [`LowLatencyMoe::recv_counts`] hold this call's rows. Collective: every PE dispatches,
    /// then combines, in turn.
    ///
    /// # Errors
    /// On this PE only, before launching: `tokens` over `max_tokens`; `x`, `topk_idx` or
    /// `topk_weights` too short.
    pub fn dispatch(
        &mut self, x: &CudaSlice<bf16>, topk_idx: &CudaSlice<i32>, topk_weights: &CudaSlice<f32>,
        tokens: usize,
    ) -> Result<()> {
        self.check_tokens(tokens, x.len(), topk_idx.len(), "dispatch input")?;
        let (h, k, m, el) = self.sizes();
        at_least(&[(
            "the weights (tokens * top_k)",
            topk_weights.len(),
            tokens * k as usize,
        )])?;
        let launch = self.launcher();
        let mut args = KernelArgs::new();
        args.push_local(x)
            .push_local(topk_idx)
            .push_local(topk_weights)
            .push_sym_mut(&mut self.counters)
            .push_sym_mut(&mut self.recv_x)
            .push_sym_mut(&mut self.recv_src)
            .push_sym_mut(&mut self.tok_rows)
            .push_sym_mut(&mut self.tok_w)
            .push_sym_mut(&mut self.recv_count)
            .push_sym_mut(&mut self.counts)
            .push_sym_mut(&mut self.src_tokens)
            .push_sym_mut(&mut self.sync)
            .push_scalar(self.me as u32)
            .push_scalar(tokens as u32)
            .push_scalar(el)
            .push_scalar(h)
            .push_scalar(m);
        launch(&kernels::moe_ll_dispatch::SPEC, &mut args)?;
        self.dispatched = Some(tokens);
        Ok(())
    }

    /// Brings the experts' output back to the tokens' PEs and writes, for each of this PE's
    /// `tokens` tokens, `out[t]` = the sum over its slots `j` of `w_j * row(t, j)`, where
    /// `row(t, j)` is the row of `expert_out` (laid out as [`LowLatencyMoe::recv_x`],
    /// [`LowLatencyMoe::expert_out_len`] elements) at the place of the pair's received row and
    /// `w_j` the dispatch's weight; on the context's stream, two kernels. Each expert PE adds
    /// its slots of a token first (f32 in slot order, rounded to `bf16` once) and sends that
    /// one row; this PE adds the PEs' rows in PE order, in f32, `bf16` out. `topk_idx` and
    /// `tokens` are the last dispatch's. Collective, after every PE's dispatch.
    ///
    /// # Errors
    /// On this PE only, before launching: no dispatch since the last combine; `tokens` not the
    /// dispatch's; a buffer too short.
    pub fn combine(
        &mut self, expert_out: &CudaSlice<bf16>, topk_idx: &CudaSlice<i32>, tokens: usize,
        out: &mut CudaSlice<bf16>,
    ) -> Result<()> {
        match self.dispatched {
            Some(t) if t == tokens => {}
            Some(t) => {
                return Err(Error::InvalidConfig {
                    name: "LowLatencyMoe::combine",
                    value: format!("{tokens} tokens"),
                    reason: format!(
                        "the last dispatch sent {t} tokens; combine the same tokens it sent"
                    ),
                })
            }
            None => {
                return Err(Error::InvalidConfig {
                    name: "LowLatencyMoe::combine",
                    value: "no dispatch since the last combine".into(),
                    reason: "call dispatch first: each combine brings back one dispatch's rows"
                        .into(),
                })
            }
        }
        self.check_tokens(tokens, out.len(), topk_idx.len(), "combine output")?;
        let (h, _, m, el) = self.sizes();
        at_least(&[(
            "the experts' output (LowLatencyMoe::expert_out_len)",
            expert_out.len(),
            self.expert_out_len(),
        )])?;
        let launch = self.launcher();
        let mut args = KernelArgs::new();
        args.push_local(expert_out)
            .push_sym(&self.src_tokens)
            .push_sym(&self.tok_rows)
            .push_sym(&self.tok_w)
            .push_sym_mut(&mut self.comb_x)
            .push_sym_mut(&mut self.comb_sig)
            .push_sym_mut(&mut self.sync)
            .push_scalar(self.me as u32)
            .push_scalar(h)
            .push_scalar(m);
        launch(&kernels::moe_ll_combine::SPEC, &mut args)?;
        let mut args = KernelArgs::new();
        args.push_sym(&self.comb_x)
            .push_sym(&self.comb_sig)
            .push_local(topk_idx)
            .push_local_mut(out)
            .push_sym(&self.sync)
            .push_scalar(tokens as u32)
            .push_scalar(h)
            .push_scalar(el);
        launch(&kernels::moe_ll_reduce::SPEC, &mut args)?;
        self.dispatched = None;
        Ok(())
    }

    /// Launches a low-latency kernel (comptime `[top_k, n_pes]`) on the context's stream; taken
    /// before the launch arguments borrow the buffers.
    fn launcher(&self) -> impl Fn(&'static KernelSpec, &mut KernelArgs<'_>) -> Result<()> {
        let (pgas, variant, blocks) = (self.pgas.clone(), self.variant, self.blocks);
        let comptime = [self.cfg.top_k as i128, self.n as i128];
        move |spec, args| launch(&pgas, variant, blocks, spec, &comptime, args)
    }

    /// `hidden`, `top_k`, `max_tokens`, `experts_per_pe` as the kernels take them.
    fn sizes(&self) -> (u32, i128, u32, u32) {
        (
            self.cfg.hidden as u32,
            self.cfg.top_k as i128,
            self.cfg.max_tokens as u32,
            self.cfg.experts_per_pe as u32,
        )
    }

    /// `tokens` within `max_tokens`, a row buffer of `rows_len` and ids of `idx_len` enough.
    fn check_tokens(
        &self, tokens: usize, rows_len: usize, idx_len: usize, what: &'static str,
    ) -> Result<()> {
        if tokens > self.cfg.max_tokens {
            return Err(Error::InvalidConfig {
                name: "tokens",
                value: tokens.to_string(),
                reason: format!(
                    "at most max_tokens ({}) a call, as the LowLatencyMoe was built",
                    self.cfg.max_tokens
                ),
            });
        }
        at_least(&[
            (what, rows_len, tokens * self.cfg.hidden),
            (
                "the expert ids (tokens * top_k)",
                idx_len,
                tokens * self.cfg.top_k,
            ),
        ])
    }
}

/// Launches a low-latency kernel on the context's stream.
fn launch(
    pgas: &Pgas, variant: Variant, blocks: u32, spec: &'static KernelSpec, comptime: &[i128],
    args: &mut KernelArgs<'_>,
) -> Result<()> {
    pgas_runtime::launch::launch(
        pgas,
        spec,
        variant,
        comptime,
        LaunchConfig::blocks(blocks, LL_THREADS),
        Some(pgas.stream()),
        args,
    )
}
