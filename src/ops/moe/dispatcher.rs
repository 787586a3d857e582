//! [`MoeDispatcher`]: the symmetric buffers of MoE dispatch and combine, and the calls that
//! route, dispatch and combine through them.

use super::config::{info_len, MoeConfig, AGREE_WORDS, MAX_BLOCKS, SIG_GROUPS};
use super::kernels::{self, BLOCKS_PER_SM, DATA_THREADS, LAYOUT_THREADS, SYNC_WORDS};
use super::routing::{check_routing, RecvCounts, Routing};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use pgas_runtime::kernel::{KernelSpec, Variant};
use pgas_runtime::launch::{KernelArgs, Prewarm};
use std::ops::Range;

use crate::{bf16, e4m3, Error, LaunchConfig, Pgas, Result, SymTensor, Team};

/// MoE dispatch and combine over all PEs, with the symmetric buffers for the sizes of a
/// [`MoeConfig`]. Create it once (collectively), route each batch with
/// [`MoeDispatcher::route`], then [`MoeDispatcher::dispatch`] and [`MoeDispatcher::combine`].
/// Calls are ordered on the host (`&mut self`) and every PE makes the same calls in the same
/// order; the buffers are per call, so the results of a dispatch are valid until the next.
///
/// Rows move by peer stores where every peer is load/store reachable (NVLink or PCIe peer
/// access); where some peer is not (another node, or `PGAS_PEER_ACCESS`), by NVSHMEM's puts and
/// gets through a symmetric stage (`n_pes * max_tokens * hidden` more `bf16` of heap), which
/// NVSHMEM carries by its proxy where nothing maps the peer.
pub struct MoeDispatcher {
    pgas: Pgas,
    cfg: MoeConfig,
    n: usize,
    me: usize,
    blocks: u32,
    variant: Variant,
    /// The kernels' comptime values, `[top_k, n_pes, rma, fp8]` ([`prewarm_list`] says which
    /// kernel takes which).
    comptime: [i128; 4],
    recv_x: SymTensor<bf16>,
    /// FP8 dispatch's rows (`e4m3`) and scales (one a 128 values); a token's worth until
    /// [`MoeDispatcher::set_fp8_dispatch`] first turns it on.
    recv_q: SymTensor<e4m3>,
    recv_scale: SymTensor<f32>,
    /// Where some peer is not load/store reachable, the symmetric rows NVSHMEM's puts and gets
    /// go from and to (`n_pes * max_tokens` rows); 16 elements otherwise.
    stage: SymTensor<bf16>,
    recv_src: SymTensor<i32>,
    recv_idx: SymTensor<i32>,
    recv_w: SymTensor<f32>,
    row_pairs: SymTensor<i32>,
    expert_rows: SymTensor<i32>,
    /// Combine's rows: the partials peers send here (`combine`), or this PE's experts' rows
    /// that peers pull (`combine_rows`, [`MoeDispatcher::combine_input`]).
    comb: SymTensor<bf16>,
    counts: SymTensor<i32>,
    info: SymTensor<i32>,
    sync: SymTensor<u64>,
    sigs: SymTensor<u64>,
    agree_mine: SymTensor<u64>,
    agree_all: SymTensor<u64>,
    tok_rank: SymTensor<i32>,
    tok_erank: SymTensor<i32>,
    routes: u64,
    /// The routing of the last dispatch (its id and tokens).
    dispatched: Option<(u64, usize)>,
    /// The last dispatch's counts, once read on the host.
    known: Option<RecvCounts>,
    /// Whether the last dispatch was combined already (a second combine could overwrite the
    /// combine rows a peer still reads: only the next dispatch orders them).
    combined: bool,
}

crate::debug::debug_fields!(|d: MoeDispatcher| cfg: d.cfg, n: d.n, blocks: d.blocks);

impl MoeDispatcher {
    /// A dispatcher for `cfg` over all PEs. Collective: every PE calls it with the same `cfg`.
    ///
    /// # Errors
    /// The same on every PE, before anything is allocated beyond a few words: `cfg` differs
    /// between PEs (each field that differs, with every PE's value); a size out of range
    /// ([`MoeConfig`]'s fields); a symmetric heap smaller than
    /// [`MoeConfig::symmetric_bytes`] ([`Error::HeapExhausted`]).
    pub fn new(pgas: &Pgas, cfg: MoeConfig) -> Result<MoeDispatcher> {
        let (n, me) = (pgas.n_pes(), pgas.my_pe());
        let sms = pgas.sm_count()?;
        cfg.agree_and_check(pgas, "MoeConfig (MoeDispatcher::new)")?;
        let mut agree_mine = pgas.alloc::<u64>(AGREE_WORDS)?;
        let agree_all = pgas.alloc::<u64>(AGREE_WORDS * n)?;
        // The grid must be the same on every PE (each waits for `blocks` signals per peer), and
        // the SM counts may differ: the smallest decides.
        let sm_blocks = MAX_BLOCKS.min(sms) as u64;
        let all = gather(pgas, &mut agree_mine, &agree_all, &[sm_blocks])?;
        let blocks = BLOCKS_PER_SM * all.iter().map(|r| r[0]).min().unwrap_or(1) as u32;
        let need = cfg.symmetric_bytes(n);
        if need > pgas.heap_size() {
            return Err(Error::HeapExhausted {
                requested: need,
                heap: pgas.heap_size(),
                in_use: " (all of a MoeDispatcher's buffers for these sizes, MoeConfig::symmetric_bytes; the \
                         rest of the program needs its own share on top)"
                    .into(),
            });
        }
        let rows = cfg.max_recv_rows(n);
        let k = cfg.top_k;
        let el = cfg.experts_per_pe;
        let recv_x = pgas.alloc::<bf16>(rows * cfg.hidden)?;
        let recv_q = pgas.alloc::<e4m3>(16)?;
        let recv_scale = pgas.alloc::<f32>(1)?;
        let comb = pgas.alloc::<bf16>(n * cfg.max_tokens * cfg.hidden)?;
        let recv_src = pgas.alloc::<i32>(rows * 2)?;
        let recv_idx = pgas.alloc::<i32>(rows * k)?;
        let recv_w = pgas.alloc::<f32>(rows * k)?;
        let row_pairs = pgas.alloc::<i32>(rows * k)?;
        let expert_rows = pgas.alloc::<i32>(cfg.max_pairs(n))?;
        let counts = pgas.alloc::<i32>(n * (n + n * el))?;
        let info = pgas.alloc::<i32>(info_len(n, el))?;
        let sync = pgas.alloc::<u64>(SYNC_WORDS)?;
        let sigs = pgas.alloc::<u64>(SIG_GROUPS * n)?;
        // The layout's ranks, read on this PE only: in the symmetric heap too, so no launch
        // pays cudarc's event wait and record for them (two driver calls a buffer a launch).
        let tok_rank = pgas.alloc::<i32>(cfg.max_tokens * n)?;
        let tok_erank = pgas.alloc::<i32>(cfg.max_tokens * k)?;
        let reachable = u64::from(pgas.first_unreachable(&recv_x, 0..n)?.is_none());
        let all = gather(pgas, &mut agree_mine, &agree_all, &[reachable])?;
        // One PE that cannot reach every peer puts every PE on NVSHMEM's RMA (which still
        // stores through the peer mapping where there is one): the kernels are specialized
        // for one path, the same on every PE.
        let rma = all.iter().any(|r| r[0] == 0);
        let stage = pgas.alloc::<bf16>(if rma {
            n * cfg.max_tokens * cfg.hidden
        } else {
            16
        })?;
        pgas.barrier_all()?;
        Ok(MoeDispatcher {
            pgas: pgas.clone(),
            cfg,
            n,
            me,
            blocks,
            variant: Variant::Plain,
            comptime: [k as i128, n as i128, i128::from(rma), 0],
            recv_x,
            recv_q,
            recv_scale,
            stage,
            recv_src,
            recv_idx,
            recv_w,
            row_pairs,
            expert_rows,
            comb,
            counts,
            info,
            sync,
            sigs,
            agree_mine,
            agree_all,
            tok_rank,
            tok_erank,
            routes: 0,
            dispatched: None,
            known: None,
            combined: false,
        })
    }

    /// The sizes it was built for.
    pub fn config(&self) -> MoeConfig {
        self.cfg
    }

    /// Blocks of its dispatch and combine grids: [`BLOCKS_PER_SM`](super::kernels::BLOCKS_PER_SM)
    /// for each SM of the PE with the fewest (counting at most [`MAX_BLOCKS`] SMs).
    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Compiles (or loads from the disk cache) the kernels of this dispatcher's sizes, so that
    /// no call compiles (and a graph capture can include them).
    pub fn prewarm(&self) -> Result<()> {
        pgas_runtime::launch::prewarm(&self.pgas, &prewarm_list(&self.comptime))
    }

    /// Runs the kernels' checked variant (every index and PE checked, a violation traps with
    /// the Rust line) instead of the plain one: for debugging. Every PE must choose the same.
    pub fn set_checked(&mut self, checked: bool) {
        self.variant = if checked {
            Variant::Checked
        } else {
            Variant::Plain
        };
    }

    /// Whether dispatch sends the rows as FP8: `e4m3` with one `f32` scale per 128 values
    /// (`scale = max |x| / 448` over the 128, each value `x / scale` rounded to nearest,
    /// [`super::reference::fp8_round_trip`]), half the bytes of `bf16` on the wire, expanded
    /// back to `bf16` in [`MoeDispatcher::recv_x`] on arrival (one more local pass). The rows a
    /// PE sends to itself are quantized too, so every received row has the same precision.
    /// Collective: every PE calls it with the same `on`; the first time it is turned on, it
    /// allocates the FP8 buffers ([`MoeConfig::fp8_bytes`] of symmetric heap beyond
    /// [`MoeConfig::symmetric_bytes`]).
    ///
    /// # Errors
    /// On every PE: `on` differs between PEs; `hidden` is not a multiple of 128 (one scale per
    /// 128 values of a row); the heap has no room for the FP8 buffers.
    pub fn set_fp8_dispatch(&mut self, on: bool) -> Result<()> {
        let all = gather(
            &self.pgas,
            &mut self.agree_mine,
            &self.agree_all,
            &[u64::from(on)],
        )?;
        if let Some(pe) = all.iter().position(|r| r[0] != u64::from(on)) {
            return Err(Error::InvalidConfig {
                name: "MoE FP8 dispatch",
                value: format!("{on} on PE {}, {} on PE {pe}", self.me, !on),
                reason: "every PE must make the same choice (a PE sends in the format its \
                         receivers expand). Fix: pass the same value on every PE"
                    .into(),
            });
        }
        if on && !self.cfg.hidden.is_multiple_of(128) {
            return Err(Error::InvalidConfig {
                name: "MoE FP8 dispatch",
                value: format!("hidden {}", self.cfg.hidden),
                reason: "FP8 dispatch scales each group of 128 values of a row, so hidden must \
                         be a multiple of 128. Fix: keep bf16 dispatch for this size"
                    .into(),
            });
        }
        if on && self.comptime[RMA] != 0 {
            return Err(Error::Unavailable {
                what: "MoE FP8 dispatch",
                reason: "some PE is not load/store reachable, so rows move by NVSHMEM's puts, \
                         which have no FP8 type; FP8 dispatch quantizes into peer memory. Fix: \
                         keep bf16 dispatch off NVLink"
                    .into(),
            });
        }
        let rows = self.cfg.max_recv_rows(self.n);
        if on && self.recv_q.len() < rows * self.cfg.hidden {
            // Collective, like the agreement above: every PE allocates here.
            self.recv_q = self.pgas.alloc::<e4m3>(rows * self.cfg.hidden)?;
            self.recv_scale = self.pgas.alloc::<f32>(rows * self.cfg.hidden / 128)?;
        }
        self.comptime[FP8] = i128::from(on);
        Ok(())
    }

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
        &mut self,
        stream: &CudaStream,
        x: &CudaSlice<bf16>,
        routing: &Routing,
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

    /// Received rows, `hidden` elements each, grouped by source PE (PE 0's first) and in each
    /// source's token order: rows `0..rows` of [`RecvCounts`] hold this call's. Capacity
    /// [`MoeConfig::max_recv_rows`].
    pub fn recv_x(&self) -> &SymTensor<bf16> {
        &self.recv_x
    }

    /// Per received row, its source PE and the token's number there (`2 * row`, `2 * row + 1`).
    pub fn recv_src(&self) -> &SymTensor<i32> {
        &self.recv_src
    }

    /// Per received row, `top_k` slots (`row * top_k + j`: slot `j` of the source's routing):
    /// the local expert of that slot when it is on this PE, else `-1`.
    pub fn recv_topk_idx(&self) -> &SymTensor<i32> {
        &self.recv_idx
    }

    /// Per received row, the weight of each slot (0 where [`MoeDispatcher::recv_topk_idx`] is
    /// `-1`).
    pub fn recv_topk_weights(&self) -> &SymTensor<f32> {
        &self.recv_w
    }

    /// The pairs, grouped by local expert (expert `e`'s at `expert_offsets[e]..[e + 1]` of
    /// [`RecvCounts`]) and in row order within each: the received row each pair is for. Pair
    /// `j`'s expert output is row `j` of combine's input.
    pub fn expert_rows(&self) -> &SymTensor<i32> {
        &self.expert_rows
    }

    /// Where the experts write their output for [`MoeDispatcher::combine_rows`]: row `r`
    /// (`hidden` elements, rows `0..rows` of [`RecvCounts`]) is the weighted sum of this PE's
    /// experts' outputs for received row `r` (the `recv_topk_weights` of its slots), as a
    /// grouped GEMM's epilogue produces it (DeepEP's combine takes the same). Capacity
    /// [`MoeConfig::max_recv_rows`] rows; valid to write from the end of a dispatch to its
    /// combine (the dispatch's count exchange orders the writes after the peers' reads of the
    /// last combine).
    ///
    /// [`RecvCounts`]: super::RecvCounts
    pub fn combine_input(&mut self) -> &mut SymTensor<bf16> {
        &mut self.comb
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
        &mut self,
        stream: &CudaStream,
        routing: &Routing,
        out: &mut CudaSlice<bf16>,
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
        &mut self,
        expert_out: &CudaSlice<bf16>,
        routing: &Routing,
        out: &mut CudaSlice<bf16>,
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
    /// [`MoeConfig::max_pairs`].
    pub fn combine_on(
        &mut self,
        stream: &CudaStream,
        expert_out: &CudaSlice<bf16>,
        routing: &Routing,
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
        &self,
        spec: &'static KernelSpec,
        window: Range<usize>,
        grid: LaunchConfig,
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
        &self,
        spec: &'static KernelSpec,
        window: Range<usize>,
        args: &mut KernelArgs<'_>,
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

/// Every PE's `words` (the same count on each), gathered on every PE through the dispatcher's
/// agreement buffers: an `fcollect` on the pgas stream, then a host wait. Collective.
fn gather(
    pgas: &Pgas,
    mine: &mut SymTensor<u64>,
    all: &SymTensor<u64>,
    words: &[u64],
) -> Result<Vec<[u64; AGREE_WORDS]>> {
    let mut row = [0u64; AGREE_WORDS];
    row[..words.len()].copy_from_slice(words);
    mine.copy_from(&row)?;
    pgas.fcollect(Team::WORLD, all, mine)?;
    let flat = all.to_vec()?;
    Ok(flat
        .chunks(AGREE_WORDS)
        .map(|c| {
            let mut r = [0u64; AGREE_WORDS];
            r.copy_from_slice(c);
            r
        })
        .collect())
}

/// The dispatcher's comptime values are `[top_k, n_pes, rma, fp8]`; each kernel takes a window of
/// them, its comptime parameters in order (`rma`: some peer is not load/store reachable, so rows
/// move by NVSHMEM's RMA; `fp8`: FP8 dispatch).
mod window {
    use std::ops::Range;
    /// `moe_layout`: `k, n`.
    pub const LAYOUT: Range<usize> = 0..2;
    /// `moe_dispatch`: `k, n, rma, fp8`.
    pub const DISPATCH: Range<usize> = 0..4;
    /// `moe_combine_send`: `k, n, rma`.
    pub const SEND: Range<usize> = 0..3;
    /// `moe_combine_pull`: `n, rma`.
    pub const PULL: Range<usize> = 1..3;
    /// `moe_combine_reduce`, `moe_dequant`: `n`.
    pub const N: Range<usize> = 1..2;
}

/// The index of `rma` in the comptime values.
const RMA: usize = 2;
/// The index of `fp8` in the comptime values.
const FP8: usize = 3;

/// Every specialization a dispatcher over `comptime = [top_k, n_pes, rma, fp8]` launches (plain
/// variant; `rma` 1 where some peer is not load/store reachable, `fp8` 1 after
/// [`MoeDispatcher::set_fp8_dispatch`]), for [`pgas_runtime::launch::prewarm`]: the kernels are
/// specialized for them so that their loops over PEs and slots unroll and each carries one path.
pub fn prewarm_list(comptime: &[i128; 4]) -> Vec<Prewarm<'_>> {
    let plain = |spec, comptime| Prewarm {
        spec,
        variant: Variant::Plain,
        comptime,
    };
    let mut list = vec![
        plain(&kernels::moe_layout::SPEC, &comptime[window::LAYOUT]),
        plain(&kernels::moe_dispatch::SPEC, &comptime[window::DISPATCH]),
        plain(&kernels::moe_combine_send::SPEC, &comptime[window::SEND]),
        plain(&kernels::moe_combine_reduce::SPEC, &comptime[window::N]),
        plain(&kernels::moe_combine_pull::SPEC, &comptime[window::PULL]),
    ];
    if comptime[FP8] != 0 {
        list.push(plain(&kernels::moe_dequant::SPEC, &comptime[window::N]));
    }
    list
}
