//! [`MoeDispatcher`]'s calls: route a batch, dispatch its rows, read what arrived, combine the
//! experts' outputs.

use super::kernels::{self, DATA_THREADS, LAYOUT_THREADS};
use super::plan::{gather, window, FP8};
use super::routing::{check_routing, RecvCounts, Routing};
use super::MoeDispatcher;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use pgas_runtime::kernel::{KernelSpec, Variant};
use pgas_runtime::launch::KernelArgs;
use std::ops::Range;

use crate::{bf16, Error, LaunchConfig, Pgas, Result};

impl MoeDispatcher {
    /// Checks this PE's routing against the sizes and gathers every PE's verdict, then copies
    /// it to the GPU. `topk_idx` holds `top_k` expert ids per token (`tokens * top_k` in all,
    /// `tokens <= max_tokens`; `-1` marks an unused slot, as in DeepEP), `topk_weights` their
    /// weights. Collective: every PE calls it (each with its own routing and token count).
    ///
    /// # Errors
    /// On every PE when any PE's routing is bad: lengths that are not `tokens * top_k` or
    /// differ between ids and weights, more than `max_tokens` tokens, an expert id outside
    /// `-1..n_pes * experts_per_pe`, the same expert twice for one token, a weight that is not
    /// finite. The message names the PE, the token and the slot.
    pub fn route(&mut self, topk_idx: &[i32], topk_weights: &[f32]) -> Result<Routing> {
        let verdict = check_routing(&self.cfg, self.n, topk_idx, topk_weights);
        let mine = match &verdict {
            Ok(()) => [0u64; 1],
            Err(_) => [1u64],
        };
        let all = gather(&self.pgas, &mut self.agree_mine, &self.agree_all, &mine)?;
        verdict.map_err(|reason| Error::InvalidConfig {
            name: "MoE routing",
            value: format!("PE {}", self.me),
            reason,
        })?;
        if let Some(pe) = all.iter().position(|r| r[0] != 0) {
            return Err(Error::InvalidConfig {
                name: "MoE routing",
                value: format!("PE {pe}"),
                reason: format!(
                    "PE {pe}'s routing was rejected (its error says why), so no PE dispatches it"
                ),
            });
        }
        let tokens = topk_idx.len() / self.cfg.top_k;
        let stream = self.pgas.stream();
        // One element at least: cudarc allocates no empty buffers.
        let idx = if topk_idx.is_empty() {
            stream.clone_htod(&[-1i32])
        } else {
            stream.clone_htod(topk_idx)
        }
        .map_err(Error::cuda("copying the MoE routing"))?;
        let weights = if topk_weights.is_empty() {
            stream.clone_htod(&[0.0f32])
        } else {
            stream.clone_htod(topk_weights)
        }
        .map_err(Error::cuda("copying the MoE routing"))?;
        self.routes += 1;
        // The guards record a read on this stream, where the buffers live and are freed.
        let raw = (idx.device_ptr(stream).0, weights.device_ptr(stream).0);
        Ok(Routing {
            tokens,
            idx,
            weights,
            raw,
            id: self.routes,
        })
    }

    /// [`MoeDispatcher::dispatch_on`] on the context's stream.
    pub fn dispatch(&mut self, x: &CudaSlice<bf16>, routing: &Routing) -> Result<()> {
        let stream = self.pgas.stream().clone();
        self.dispatch_on(&stream, x, routing)
    }

    /// Sends this PE's `routing.tokens()` rows of `x` (`hidden` `bf16` each) to the PEs of their
    /// experts, on `stream` (not waited for on the host; no host round trip inside, so it can
    /// be captured into a CUDA graph once its kernels are compiled: [`MoeDispatcher::prewarm`]). When it
    /// completes on a PE, everything bound there has arrived: [`MoeDispatcher::recv_x`] and the
    /// other receive buffers hold this call's rows.
    ///
    /// # Errors
    /// On this PE only, before launching: `x` shorter than `tokens * hidden`.
    pub fn dispatch_on(
        &mut self, stream: &CudaStream, x: &CudaSlice<bf16>, routing: &Routing,
    ) -> Result<()> {
        let (h, t) = (self.cfg.hidden, routing.tokens);
        if x.len() < t * h {
            return Err(Error::LengthMismatch {
                what: "the MoE dispatch input (tokens * hidden elements at least)",
                got: x.len(),
                expected: t * h,
            });
        }
        let (n, me, el) = (
            self.n as u32,
            self.me as u32,
            self.cfg.experts_per_pe as u32,
        );
        // `_guards` (held to the end: past the launches) only where `stream` is not the home one.
        let ((idx, wts), _guards) = routing.pointers(stream, self.pgas.stream());
        let on = self.launches(stream);
        let mut args = KernelArgs::new();
        // SAFETY: `idx` and `wts` are the addresses of `routing`'s buffers, of their lengths,
        // valid until the kernels finish (`Routing::pointers`), and both kernels read them on
        // this PE only.
        unsafe { args.push_local_as_sym::<i32>(idx, routing.idx.len()) };
        args.push_sym_mut(&mut self.tok_rank)
            .push_sym_mut(&mut self.tok_erank)
            .push_sym_mut(&mut self.info)
            .push_sym_mut(&mut self.counts)
            .push_sym_mut(&mut self.sync)
            .push_sym_mut(&mut self.sigs)
            .push_scalar(me)
            .push_scalar(t as u32)
            .push_scalar(el);
        let layout_grid = LaunchConfig::blocks(n + n * el, LAYOUT_THREADS);
        on.grid(
            &kernels::moe_layout::SPEC,
            window::LAYOUT,
            layout_grid,
            &mut args,
        )?;
        let mut args = KernelArgs::new();
        args.push_local(x);
        // SAFETY: as for the layout's `idx` above.
        unsafe {
            args.push_local_as_sym::<i32>(idx, routing.idx.len())
                .push_local_as_sym::<f32>(wts, routing.weights.len())
        };
        args.push_sym(&self.tok_rank)
            .push_sym(&self.tok_erank)
            .push_sym(&self.info)
            .push_sym_mut(&mut self.recv_x)
            .push_sym_mut(&mut self.recv_q)
            .push_sym_mut(&mut self.recv_scale)
            .push_sym_mut(&mut self.stage)
            .push_sym_mut(&mut self.recv_src)
            .push_sym_mut(&mut self.recv_idx)
            .push_sym_mut(&mut self.recv_w)
            .push_sym_mut(&mut self.row_pairs)
            .push_sym_mut(&mut self.expert_rows)
            .push_sym_mut(&mut self.sync)
            .push_sym_mut(&mut self.sigs)
            .push_scalar(me)
            .push_scalar(t as u32)
            .push_scalar(el)
            .push_scalar(h as u32);
        on.data(&kernels::moe_dispatch::SPEC, window::DISPATCH, &mut args)?;
        if self.comptime[FP8] != 0 {
            let mut args = KernelArgs::new();
            args.push_sym(&self.info)
                .push_sym(&self.recv_q)
                .push_sym(&self.recv_scale)
                .push_sym_mut(&mut self.recv_x)
                .push_scalar(el)
                .push_scalar(h as u32);
            on.data(&kernels::moe_dequant::SPEC, window::N, &mut args)?;
        }
        self.dispatched = Some((routing.id, t));
        self.known = None;
        self.combined = false;
        Ok(())
    }

    /// What the last dispatch brought here, read on the host: waits for the GPU (every stream
    /// of the context) first. Combine then checks its input against the exact pair count
    /// instead of the worst case.
    pub fn recv_counts(&mut self) -> Result<RecvCounts> {
        if self.dispatched.is_none() {
            return Err(no_dispatch("read the receive counts"));
        }
        self.pgas
            .cuda()
            .synchronize()
            .map_err(Error::cuda("waiting for the MoE dispatch"))?;
        let info = self.info.to_vec()?;
        let (n, el) = (self.n, self.cfg.experts_per_pe);
        let roff = (n + n * el) + n + n * el;
        let eoff = roff + n + 1;
        let at = |i: usize| info[i].max(0) as usize;
        let rows_from: Vec<usize> = (0..n).map(|s| at(roff + s + 1) - at(roff + s)).collect();
        let expert_offsets: Vec<usize> = (0..=el).map(|e| at(eoff + e)).collect();
        let counts = RecvCounts {
            rows: at(roff + n),
            rows_from,
            per_expert: expert_offsets.windows(2).map(|w| w[1] - w[0]).collect(),
            pairs: at(eoff + el),
            expert_offsets,
        };
        self.known = Some(counts.clone());
        Ok(counts)
    }

    /// [`MoeDispatcher::combine_rows_on`] on the context's stream.
    pub fn combine_rows(&mut self, routing: &Routing, out: &mut CudaSlice<bf16>) -> Result<()> {
        let stream = self.pgas.stream().clone();
        self.combine_rows_on(&stream, routing, out)
    }

    /// Combine after the last dispatch, on `stream`, when the experts' PEs reduced each
    /// received row's pairs already: [`MoeDispatcher::combine_input`] holds one row per row
    /// received here. Each PE pulls its tokens' rows from the PEs they went to (peer loads,
    /// one kernel, each row crossing NVLink once) and sums them (f32, in PE order) into `out`
    /// (`tokens * hidden`, `bf16`; zeros for a token routed nowhere). So `out[t] = sum over
    /// the PEs d that t went to of combine_input[row of t on d]`, with one `bf16` rounding.
    /// Not waited for on the host; capturable into a CUDA graph like the other calls.
    ///
    /// # Errors
    /// On this PE only, before launching: as [`MoeDispatcher::combine_on`] (no dispatch yet,
    /// another routing, a second combine of one dispatch, `out` shorter than
    /// `tokens * hidden`).
    pub fn combine_rows_on(
        &mut self, stream: &CudaStream, routing: &Routing, out: &mut CudaSlice<bf16>,
    ) -> Result<()> {
        let tokens = self.check_combine(routing, out)?;
        let (me, el, h) = (
            self.me as u32,
            self.cfg.experts_per_pe as u32,
            self.cfg.hidden as u32,
        );
        let on = self.launches(stream);
        let mut args = KernelArgs::new();
        args.push_sym(&self.tok_rank)
            .push_sym(&self.info)
            .push_sym(&self.comb)
            .push_sym_mut(&mut self.stage)
            .push_local_mut(out)
            .push_sym_mut(&mut self.sync)
            .push_sym_mut(&mut self.sigs)
            .push_scalar(me)
            .push_scalar(tokens as u32)
            .push_scalar(el)
            .push_scalar(h)
            .push_scalar(self.cfg.max_tokens as u32);
        on.data(&kernels::moe_combine_pull::SPEC, window::PULL, &mut args)?;
        self.combined = true;
        Ok(())
    }

    /// [`MoeDispatcher::combine_on`] on the context's stream.
    pub fn combine(
        &mut self, expert_out: &CudaSlice<bf16>, routing: &Routing, out: &mut CudaSlice<bf16>,
    ) -> Result<()> {
        let stream = self.pgas.stream().clone();
        self.combine_on(&stream, expert_out, routing, out)
    }

    /// Combine after the last dispatch, on `stream`: `expert_out` holds one row of `hidden`
    /// per pair received here, in [`MoeDispatcher::expert_rows`] order; this PE reduces each
    /// received row's pairs with their weights (f32), sends the `bf16` partial row back to the
    /// token's PE, and each PE sums its tokens' partials (f32, in PE order) into `out`
    /// (`tokens * hidden`, `bf16`; zeros for a token routed nowhere). So
    /// `out[t] = sum over t's experts g of weight_g * expert_out[pair of (t, g)]`, with one
    /// `bf16` rounding per PE's partial and one at the end. Not waited for on the host.
    ///
    /// # Errors
    /// On this PE only, before launching: no dispatch yet, `routing` is not the last
    /// dispatch's, or the last dispatch was combined already (once per dispatch); `out` shorter than `tokens * hidden`; `expert_out` shorter than
    /// `pairs * hidden`, where `pairs` is [`RecvCounts::pairs`] when
    /// [`MoeDispatcher::recv_counts`] was read after the last dispatch, else the worst case
    /// [`MoeConfig::max_pairs`](super::MoeConfig::max_pairs).
    pub fn combine_on(
        &mut self, stream: &CudaStream, expert_out: &CudaSlice<bf16>, routing: &Routing,
        out: &mut CudaSlice<bf16>,
    ) -> Result<()> {
        let tokens = self.check_combine(routing, out)?;
        let h = self.cfg.hidden;
        let pairs = match &self.known {
            Some(c) => c.pairs,
            None => self.cfg.max_pairs(self.n),
        };
        if expert_out.len() < pairs * h {
            return Err(Error::LengthMismatch {
                what: "the MoE combine input (pairs * hidden elements at least: the pairs of \
                       recv_counts() when read after the dispatch, else MoeConfig::max_pairs)",
                got: expert_out.len(),
                expected: pairs * h,
            });
        }
        let (me, el) = (self.me as u32, self.cfg.experts_per_pe as u32);
        let on = self.launches(stream);
        let mut args = KernelArgs::new();
        args.push_local(expert_out)
            .push_sym(&self.info)
            .push_sym(&self.recv_src)
            .push_sym(&self.recv_w)
            .push_sym(&self.row_pairs)
            .push_sym_mut(&mut self.comb)
            .push_sym_mut(&mut self.stage)
            .push_sym_mut(&mut self.sigs)
            .push_scalar(me)
            .push_scalar(el)
            .push_scalar(h as u32)
            .push_scalar(self.cfg.max_tokens as u32);
        on.data(&kernels::moe_combine_send::SPEC, window::SEND, &mut args)?;
        let mut args = KernelArgs::new();
        args.push_sym(&self.tok_rank)
            .push_sym(&self.comb)
            .push_local_mut(out)
            .push_sym_mut(&mut self.sync)
            .push_sym_mut(&mut self.sigs)
            .push_scalar(tokens as u32)
            .push_scalar(h as u32)
            .push_scalar(self.cfg.max_tokens as u32)
            .push_scalar(self.blocks);
        on.data(&kernels::moe_combine_reduce::SPEC, window::N, &mut args)?;
        self.combined = true;
        Ok(())
    }

    /// What this dispatcher's launches on `stream` share; taken before the launch arguments
    /// borrow the buffers.
    fn launches<'s>(&self, stream: &'s CudaStream) -> Launches<'s> {
        Launches {
            pgas: self.pgas.clone(),
            variant: self.variant,
            comptime: self.comptime,
            blocks: self.blocks,
            stream,
        }
    }

    /// The checks both combines make before launching; the last dispatch's token count.
    fn check_combine(&self, routing: &Routing, out: &CudaSlice<bf16>) -> Result<usize> {
        let Some((id, tokens)) = self.dispatched else {
            return Err(no_dispatch("combine"));
        };
        if id != routing.id {
            return Err(Error::InvalidConfig {
                name: "MoE combine routing",
                value: format!("{routing:?}"),
                reason: "combine reverses the last dispatch, which used another routing. Fix: \
                         pass the routing of the last dispatch"
                    .into(),
            });
        }
        if self.combined {
            return Err(Error::InvalidConfig {
                name: "MoE combine",
                value: "a second combine of one dispatch".into(),
                reason: "combine runs once per dispatch: peers may still read the combine rows \
                         of the first, and only the next dispatch's count exchange orders a new \
                         combine after them. Fix: dispatch again before combining again"
                    .into(),
            });
        }
        if out.len() < tokens * self.cfg.hidden {
            return Err(Error::LengthMismatch {
                what: "the MoE combine output (tokens * hidden elements at least)",
                got: out.len(),
                expected: tokens * self.cfg.hidden,
            });
        }
        Ok(tokens)
    }
}

/// The context, variant, comptime values, data grid and stream of one call's launches.
struct Launches<'s> {
    pgas: Pgas,
    variant: Variant,
    comptime: [i128; 4],
    blocks: u32,
    stream: &'s CudaStream,
}

impl Launches<'_> {
    /// Launches `spec` on `grid`, with the comptime values of `window` (see [`window`]).
    fn grid(
        &self, spec: &'static KernelSpec, window: Range<usize>, grid: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        pgas_runtime::launch::launch(
            &self.pgas,
            spec,
            self.variant,
            &self.comptime[window],
            grid,
            Some(self.stream),
            args,
        )
    }

    /// Launches a data kernel (dispatch, dequantize, combine): the dispatcher's
    /// [`MoeDispatcher::blocks`] blocks of [`DATA_THREADS`].
    fn data(
        &self, spec: &'static KernelSpec, window: Range<usize>, args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        self.grid(
            spec,
            window,
            LaunchConfig::blocks(self.blocks, DATA_THREADS),
            args,
        )
    }
}

/// The error of a call that needs a dispatch before it.
fn no_dispatch(what: &str) -> Error {
    Error::InvalidConfig {
        name: "MoE dispatcher",
        value: "no dispatch yet".into(),
        reason: format!("cannot {what} before a dispatch. Fix: call dispatch first"),
    }
}
