//! [`LowLatencyMoe`]'s plan: the symmetric buffers of a decode step's dispatch and combine,
//! their sizes, and the kernels it compiles ahead; `op.rs` has the calls.

use super::LowLatencyMoe;
use pgas_runtime::kernel::Variant;
use pgas_runtime::launch::Prewarm;

use super::kernels::LL_SYNC_WORDS;
use crate::ops::moe::MoeConfig;
use crate::{bf16, Error, Pgas, Result, SymTensor};

/// Most tokens a PE dispatches in one low-latency call (decode batches; [`MoeDispatcher`](crate::ops::moe::MoeDispatcher)
/// takes larger ones).
pub const LL_MAX_TOKENS: usize = 1024;

/// Blocks a multiprocessor of a low-latency grid: each thread's work is a chain of loads and
/// (mostly remote) stores, so the more in flight the better (`docs/ops.md`, "The low-latency
/// mode", has the figures).
pub(super) const LL_BLOCKS_PER_SM: u32 = 2;

impl LowLatencyMoe {
    /// Allocates the buffers for `cfg` ([`LowLatencyMoe::symmetric_bytes`] of symmetric heap
    /// on each PE). Collective: every PE passes the same `cfg`.
    ///
    /// # Errors
    /// The same on every PE, before the buffers are allocated: `cfg` differs between PEs; a
    /// size out of range ([`MoeConfig`]'s limits, and `max_tokens` at most [`LL_MAX_TOKENS`]);
    /// a heap too small ([`Error::HeapExhausted`]); some peer not load/store reachable (the
    /// rows move by peer stores: use [`MoeDispatcher`](crate::ops::moe::MoeDispatcher), which also moves them by
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
}

/// The kernels a [`LowLatencyMoe`] of `[top_k, n_pes]` launches, in `variant`, for
/// [`pgas_runtime::launch::prewarm`].
pub fn ll_prewarm_list(comptime: &[i128; 2], variant: Variant) -> [Prewarm<'_>; 3] {
    [
        Prewarm {
            spec: &super::kernels::moe_ll_dispatch::SPEC,
            variant,
            comptime,
        },
        Prewarm {
            spec: &super::kernels::moe_ll_combine::SPEC,
            variant,
            comptime,
        },
        Prewarm {
            spec: &super::kernels::moe_ll_reduce::SPEC,
            variant,
            comptime,
        },
    ]
}
