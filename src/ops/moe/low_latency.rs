//! [`LowLatencyMoe`]: MoE dispatch and combine for decoding (a few tokens per PE), in one kernel
//! each way with the routing on the GPU, no count exchange before the rows and no host round
//! trip, so a decode step captures into a CUDA graph. The kernels and how they synchronize are in
//! [`super::ll_kernels`].

use cudarc::driver::CudaSlice;
use pgas_runtime::kernel::{KernelSpec, Variant};
use pgas_runtime::launch::{KernelArgs, Prewarm};

use super::config::MoeConfig;
use super::ll_kernels::{self, LL_SYNC_WORDS, LL_THREADS};
use crate::ops::lengths::at_least;
use crate::{bf16, Error, LaunchConfig, Pgas, Result, SymTensor};

/// Most tokens a PE dispatches in one low-latency call (decode batches; [`super::MoeDispatcher`]
/// takes larger ones).
pub const LL_MAX_TOKENS: usize = 1024;

/// Blocks a multiprocessor of a low-latency grid: each thread's work is a chain of loads and
/// (mostly remote) stores, so the more in flight the better (`docs/ops.md`, "The low-latency
/// mode", has the figures).
const LL_BLOCKS_PER_SM: u32 = 2;

/// MoE dispatch and combine for decode steps, in the layout of DeepEP's low-latency mode: each
/// (token, slot) pair travels on its own to its expert's PE, where the rows of local expert `le`
/// from source PE `s` are rows `(le * n_pes + s) * max_tokens ..` of [`LowLatencyMoe::recv_x`],
/// [`LowLatencyMoe::recv_counts`]`[le * n_pes + s]` of them, and
/// [`LowLatencyMoe::recv_src`] says which pair each row is (`token * top_k + slot` on `s`).
/// The experts write their output row for row in that layout (a local buffer of
/// [`LowLatencyMoe::expert_out_len`] elements), and [`LowLatencyMoe::combine`] brings every
/// row back to its token's PE and sums them with their weights. Over NVLink (peer stores).
///
/// ```no_run
/// use pgas::ops::moe::{LowLatencyMoe, MoeConfig};
/// use pgas::prelude::*;
///
/// # fn main() -> pgas::Result<()> {
/// let pgas = pgas::init()?;
/// let cfg = MoeConfig { max_tokens: 128, hidden: 7168, top_k: 8, experts_per_pe: 8 };
/// let mut ll = LowLatencyMoe::new(&pgas, cfg)?;                       // collective
/// # let s = pgas.stream();
/// # let (x, idx, w) = (s.alloc_zeros::<bf16>(128 * 7168)?, s.alloc_zeros::<i32>(128 * 8)?, s.alloc_zeros::<f32>(128 * 8)?);
/// # let mut expert_out = s.alloc_zeros::<bf16>(ll.expert_out_len())?;
/// # let mut out = s.alloc_zeros::<bf16>(128 * 7168)?;
/// ll.dispatch(&x, &idx, &w, 128)?;         // idx, w: tokens * top_k expert ids and weights
/// // ... experts: rows of recv_x() by (local expert, source), recv_counts() of each,
/// //     output row r at row r of expert_out ...
/// ll.combine(&expert_out, &idx, 128, &mut out)?;  // out[t] = sum of w * expert row
/// # Ok(())
/// # }
/// ```
pub struct LowLatencyMoe {
    pgas: Pgas,
    cfg: MoeConfig,
    n: usize,
    me: usize,
    variant: Variant,
    /// Blocks of its grids: [`LL_BLOCKS_PER_SM`] on each of this GPU's multiprocessors.
    blocks: u32,
    counters: SymTensor<u32>,
    recv_x: SymTensor<bf16>,
    recv_src: SymTensor<i32>,
    tok_rows: SymTensor<u64>,
    tok_w: SymTensor<f32>,
    recv_count: SymTensor<u64>,
    comb_x: SymTensor<bf16>,
    comb_sig: SymTensor<u64>,
    sync: SymTensor<u64>,
    /// Rows from each source for each local expert, read on this PE only. It and the next are
    /// symmetric, so no launch waits on or records a cudarc event for them: a launch captured
    /// into a CUDA graph must not wait on an event recorded outside the capture.
    counts: SymTensor<i32>,
    /// Each source's token count, read on this PE only.
    src_tokens: SymTensor<i32>,
    /// The tokens of the last dispatch that no combine has followed yet.
    dispatched: Option<usize>,
}

impl LowLatencyMoe {
    /// Allocates the buffers for `cfg` ([`LowLatencyMoe::symmetric_bytes`] of symmetric heap
    /// on each PE). Collective: every PE passes the same `cfg`.
    ///
    /// # Errors
    /// The same on every PE, before the buffers are allocated: `cfg` differs between PEs; a
    /// size out of range ([`MoeConfig`]'s limits, and `max_tokens` at most [`LL_MAX_TOKENS`]);
    /// a heap too small ([`Error::HeapExhausted`]); some peer not load/store reachable (the
    /// rows move by peer stores: use [`super::MoeDispatcher`], which also moves them by
    /// NVSHMEM's puts).
    pub fn new(pgas: &Pgas, cfg: MoeConfig) -> Result<LowLatencyMoe> {
        let (n, me) = (pgas.n_pes(), pgas.my_pe());
        cfg.agree_and_check(pgas, "MoeConfig (LowLatencyMoe::new)")?;
        if cfg.max_tokens > LL_MAX_TOKENS {
            return Err(Error::InvalidConfig {
                name: "max_tokens",
                value: cfg.max_tokens.to_string(),
                reason: format!(
                    "the low-latency mode takes at most {LL_MAX_TOKENS} tokens a PE (decode \
                     batches); use MoeDispatcher for larger ones"
                ),
            });
        }
        if n * cfg.max_tokens * (cfg.hidden / 8) > u32::MAX as usize {
            return Err(Error::InvalidConfig {
                name: "max_tokens",
                value: format!("{cfg:?} on {n} PE(s)"),
                reason: "too large for the low-latency mode, which counts the combined \
                         tokens' 16-byte vectors (n_pes * max_tokens of them) in 32 bits: lower \
                         max_tokens or hidden, or use MoeDispatcher"
                    .into(),
            });
        }
        let need = Self::symmetric_bytes(&cfg, n);
        if need > pgas.heap_size() {
            return Err(Error::HeapExhausted {
                requested: need,
                heap: pgas.heap_size(),
                in_use: " (all of a LowLatencyMoe's buffers for these sizes, \
                         LowLatencyMoe::symmetric_bytes; the rest of the program needs its own \
                         share on top)"
                    .into(),
            });
        }
        let ee = n * cfg.experts_per_pe;
        // A GPU has at most a few hundred multiprocessors.
        let blocks = LL_BLOCKS_PER_SM * pgas.sm_count()?.min(1 << 16) as u32;
        let recv_x = pgas.alloc::<bf16>(Self::rows(&cfg, n) * cfg.hidden)?;
        let unreachable = pgas.first_unreachable(&recv_x, 0..n)?.is_some();
        let all = crate::ops::agree::gather_words(pgas, &[u64::from(unreachable)])?;
        if let Some(pe) = all.iter().position(|&u| u != 0) {
            return Err(Error::InvalidConfig {
                name: "LowLatencyMoe::new",
                value: format!("PE {pe} cannot load or store some peer's memory"),
                reason: "the low-latency mode moves rows by peer stores, over NVLink; use \
                         MoeDispatcher, which moves them by NVSHMEM's puts where a peer is off \
                         NVLink"
                    .into(),
            });
        }
        let ll = LowLatencyMoe {
            pgas: pgas.clone(),
            cfg,
            n,
            me,
            variant: Variant::Plain,
            blocks,
            counters: pgas.alloc::<u32>(ee)?,
            recv_src: pgas.alloc::<i32>(Self::rows(&cfg, n))?,
            recv_x,
            tok_rows: pgas.alloc::<u64>(Self::table(&cfg, n))?,
            tok_w: pgas.alloc::<f32>(Self::table(&cfg, n))?,
            recv_count: pgas.alloc::<u64>(ee + n)?,
            comb_x: pgas.alloc::<bf16>(cfg.max_tokens * n * cfg.hidden)?,
            comb_sig: pgas.alloc::<u64>(n)?,
            sync: pgas.alloc::<u64>(LL_SYNC_WORDS)?,
            counts: pgas.alloc::<i32>(ee)?,
            src_tokens: pgas.alloc::<i32>(n)?,
            dispatched: None,
        };
        pgas.barrier_all()?;
        Ok(ll)
    }

    /// Rows a PE can receive in one call: `max_tokens` from each PE for each local expert.
    fn rows(cfg: &MoeConfig, n: usize) -> usize {
        cfg.experts_per_pe * n * cfg.max_tokens
    }

    /// Entries of the token table (`tok_rows`, `tok_w`): a slot of each source's tokens.
    fn table(cfg: &MoeConfig, n: usize) -> usize {
        n * cfg.max_tokens * cfg.top_k
    }

    /// Bytes of symmetric heap [`LowLatencyMoe::new`] allocates on each PE for `cfg` on `n_pes`
    /// PEs (the received rows, `experts_per_pe * n_pes * max_tokens * hidden * 2`, and the
    /// combine rows, `max_tokens * n_pes * hidden * 2`, dominate), with 4 KiB per buffer for
    /// NVSHMEM's alignment.
    pub fn symmetric_bytes(cfg: &MoeConfig, n_pes: usize) -> usize {
        let rows = Self::rows(cfg, n_pes);
        let (ee, table) = (n_pes * cfg.experts_per_pe, Self::table(cfg, n_pes));
        [
            ee * 4,                                  // counters
            rows * cfg.hidden * 2,                   // recv_x
            rows * 4,                                // recv_src
            table * 8,                               // tok_rows
            table * 4,                               // tok_w
            (ee + n_pes) * 8,                        // recv_count
            cfg.max_tokens * n_pes * cfg.hidden * 2, // comb_x
            n_pes * 8,                               // comb_sig
            LL_SYNC_WORDS * 8,                       // sync
            n_pes * 4,                               // src_tokens
            ee * 4,                                  // counts
        ]
        .iter()
        .map(|b| b.next_multiple_of(4096))
        .sum()
    }

    /// The sizes it was built for.
    pub fn config(&self) -> MoeConfig {
        self.cfg
    }

    /// The received rows: local expert `le`'s rows from PE `s` start at row
    /// `(le * n_pes + s) * max_tokens`, [`LowLatencyMoe::recv_counts`]`[le * n_pes + s]` of them.
    pub fn recv_x(&self) -> &SymTensor<bf16> {
        &self.recv_x
    }

    /// For each received row, which pair it is on its source: `token * top_k + slot`.
    pub fn recv_src(&self) -> &SymTensor<i32> {
        &self.recv_src
    }

    /// Rows received from each source for each local expert (`experts_per_pe * n_pes`, on the
    /// GPU): valid on the stream after [`LowLatencyMoe::dispatch`].
    pub fn recv_counts(&self) -> &SymTensor<i32> {
        &self.counts
    }

    /// Elements of the experts' output buffer [`LowLatencyMoe::combine`] reads (one row for each
    /// row of [`LowLatencyMoe::recv_x`], at the same place).
    pub fn expert_out_len(&self) -> usize {
        Self::rows(&self.cfg, self.n) * self.cfg.hidden
    }

    /// Runs the kernels' checked variant (every index and PE checked) instead of the plain one:
    /// for debugging. Every PE must choose the same.
    pub fn set_checked(&mut self, checked: bool) {
        self.variant = if checked {
            Variant::Checked
        } else {
            Variant::Plain
        };
    }

    /// Compiles its kernels ahead (they compile on first use otherwise).
    pub fn prewarm(&self) -> Result<()> {
        let kn = [self.cfg.top_k as i128, self.n as i128];
        pgas_runtime::launch::prewarm(&self.pgas, &ll_prewarm_list(&kn, self.variant))
    }

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
        &mut self,
        x: &CudaSlice<bf16>,
        topk_idx: &CudaSlice<i32>,
        topk_weights: &CudaSlice<f32>,
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
        launch(&ll_kernels::moe_ll_dispatch::SPEC, &mut args)?;
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
        &mut self,
        expert_out: &CudaSlice<bf16>,
        topk_idx: &CudaSlice<i32>,
        tokens: usize,
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
        launch(&ll_kernels::moe_ll_combine::SPEC, &mut args)?;
        let mut args = KernelArgs::new();
        args.push_sym(&self.comb_x)
            .push_sym(&self.comb_sig)
            .push_local(topk_idx)
            .push_local_mut(out)
            .push_sym(&self.sync)
            .push_scalar(tokens as u32)
            .push_scalar(h)
            .push_scalar(el);
        launch(&ll_kernels::moe_ll_reduce::SPEC, &mut args)?;
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
        &self,
        tokens: usize,
        rows_len: usize,
        idx_len: usize,
        what: &'static str,
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

/// The kernels a [`LowLatencyMoe`] of `[top_k, n_pes]` launches, in `variant`, for
/// [`pgas_runtime::launch::prewarm`].
pub fn ll_prewarm_list(comptime: &[i128; 2], variant: Variant) -> [Prewarm<'_>; 3] {
    [
        Prewarm {
            spec: &ll_kernels::moe_ll_dispatch::SPEC,
            variant,
            comptime,
        },
        Prewarm {
            spec: &ll_kernels::moe_ll_combine::SPEC,
            variant,
            comptime,
        },
        Prewarm {
            spec: &ll_kernels::moe_ll_reduce::SPEC,
            variant,
            comptime,
        },
    ]
}

/// Launches a low-latency kernel on the context's stream.
fn launch(
    pgas: &Pgas,
    variant: Variant,
    blocks: u32,
    spec: &'static KernelSpec,
    comptime: &[i128],
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
