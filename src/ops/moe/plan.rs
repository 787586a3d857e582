//! [`MoeDispatcher`]'s plan: the symmetric buffers of dispatch and combine for a
//! [`MoeConfig`], the agreement of every PE's arguments, the received rows it exposes, and the
//! kernels a call launches (`prewarm_list`); `op.rs` has the calls.

use super::config::{info_len, MoeConfig, AGREE_WORDS, MAX_BLOCKS, SIG_GROUPS};
use super::kernels::{self, BLOCKS_PER_SM, SYNC_WORDS};
use super::MoeDispatcher;
use pgas_runtime::kernel::Variant;
use pgas_runtime::launch::Prewarm;

use crate::{bf16, e4m3, Error, Pgas, Result, SymTensor, Team};

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

    /// Blocks of its dispatch and combine grids: [`BLOCKS_PER_SM`]
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

    /// Received rows, `hidden` elements each, grouped by source PE (PE 0's first) and in each
    /// source's token order: rows `0..rows` of [`RecvCounts`](super::RecvCounts) hold this call's. Capacity
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
    /// [`RecvCounts`](super::RecvCounts)) and in row order within each: the received row each pair is for. Pair
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
}

/// Every PE's `words` (the same count on each), gathered on every PE through the dispatcher's
/// agreement buffers: an `fcollect` on the pgas stream, then a host wait. Collective.
pub(super) fn gather(
    pgas: &Pgas, mine: &mut SymTensor<u64>, all: &SymTensor<u64>, words: &[u64],
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
pub(super) mod window {
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
pub(super) const FP8: usize = 3;

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
