//! The kernels of [`LowLatencyMoe`](super::LowLatencyMoe), the decode-time mode: one kernel
//! dispatches ([`moe_ll_dispatch`]), two combine ([`moe_ll_combine`] then [`moe_ll_reduce`]),
//! with no layout pass, no count exchange before the data and no host round trip, so a decode
//! step captures into a CUDA graph. The layout (regions by local expert and source PE, filled
//! from counters on the sending PE), the counts and epochs, the token table, the combine that
//! sends one partial row per (token, PE) and the reuse without a barrier are explained in
//! `docs/ops.md`, "The low-latency mode".

/// Threads of a low-latency block.
pub const LL_THREADS: u32 = 512;

/// Words of a low-latency `sync`: the dispatch ticket, the epoch, the combine ticket.
pub const LL_SYNC_WORDS: usize = 4;

use crate::ops::moe::rows::{__pgas_device_load_four, __pgas_device_store_four};
use crate::ops::moe::ticket::{
    __pgas_device_close_epoch, __pgas_device_last_block, __pgas_device_wait_pes,
};
use crate::prelude::*;

/// Sends every (token, slot) pair of `idx` (`tokens * k` expert ids, `-1` or out of range:
/// none) to its expert's PE by peer stores, a warp a pair, with its place in the token table;
/// then the last block sends and collects the counts (see the module doc). When it completes
/// on a PE, `recv_x` holds every row bound there, `counts[le * n + src]` how many came from
/// each source for each local expert and `src_tokens[src]` each source's token count.
// Long on purpose: the rows and the last block's count exchange are one kernel, so that a decode
// step has no second launch and no host round trip.
#[pgas_kernel(max_threads = 512)]
pub fn moe_ll_dispatch(
    x: &CudaSlice<bf16>, idx: &CudaSlice<i32>, wts: &CudaSlice<f32>, counters: &mut SymTensor<u32>,
    recv_x: &mut SymTensor<bf16>, recv_src: &mut SymTensor<i32>, tok_rows: &mut SymTensor<u64>,
    tok_w: &mut SymTensor<f32>, recv_count: &mut SymTensor<u64>, counts: &mut SymTensor<i32>,
    src_tokens: &mut SymTensor<i32>, sync: &mut SymTensor<u64>, me: u32, tokens: u32, el: u32,
    hidden: u32, max_tokens: u32, #[comptime] k: u32, #[comptime] n: u32,
) {
    let slot_of = shared_array::<u32, 16>();
    let t = thread_idx_x() as usize;
    let nt = block_dim_x() as usize;
    let lane = lane_id() as usize;
    let wib = t / 32;
    let nn = n as usize;
    let kk = k as usize;
    let ell = el as usize;
    let ee = nn * ell;
    let h = hidden as usize;
    let nv = h / 8;
    let m = max_tokens as usize;
    let mine = me as usize;
    let pairs = tokens as usize * kk;
    // This call's epoch: the last block advances `sync[1]` only once every block has started.
    let e = sync[1] + 1;
    let warps = (grid_dim_x() * block_dim_x()) as usize / 32;
    let mut pr = global_thread_idx() / 32;
    while pr < pairs {
        let id = idx[pr];
        if id >= 0 && (id as usize) < ee {
            let g = id as usize;
            let d = (g / ell) as i32;
            if lane == 0 {
                slot_of[wib] = atomic_add_local(&mut counters[g], 1u32);
            }
            sync_warp();
            let r = ((g % ell) * nn + mine) * m + slot_of[wib] as usize;
            let xb = (pr / kk) * h;
            let rb = r * h;
            let p = recv_x.peer(d);
            // Four vectors a lane in flight (`rows.rs`).
            let mut v = lane;
            while v + 96 < nv {
                let mut a = [load_vec16(&x[xb + v * 8]); 4];
                load_four(&mut a, x, xb, v);
                store_four(p, rb, v, &a);
                v += 128;
            }
            while v < nv {
                store_vec16(&mut p[rb + v * 8], load_vec16(&x[xb + v * 8]));
                v += 32;
            }
            if lane == 0 {
                recv_src.peer(d)[r] = pr as i32;
                // Pair `pr` is (token pr / k, slot pr % k): its place in the token table.
                let tr = mine * m * kk + pr;
                tok_w.peer(d)[tr] = wts[pr];
                tok_rows.peer(d)[tr] = (e << 32) | r as u64;
            }
            // Lane 0 writes the next pair's slot only after every lane has read this one.
            sync_warp();
        }
        pr += warps;
    }
    // Release this block's peer stores, then take a ticket: the last block sees every block's.
    threadfence_system();
    if last_block(sync, 0) {
        threadfence_system();
        let mut g = t;
        while g < ee + nn {
            if g < ee {
                // Read through the atomic unit, where every block counted.
                let c = atomic_add_local(&mut counters[g], 0u32);
                counters[g] = 0;
                let word = (e << 32) | c as u64;
                signal_op(
                    &mut recv_count[(g % ell) * nn + mine],
                    word,
                    SignalOp::Set,
                    (g / ell) as i32,
                );
            } else {
                let word = (e << 32) | tokens as u64;
                signal_op(
                    &mut recv_count[ell * nn + mine],
                    word,
                    SignalOp::Set,
                    (g - ee) as i32,
                );
            }
            g += nt;
        }
        let mut q = t;
        while q < ell * nn + nn {
            signal_wait_until(&recv_count[q], Cmp::Ge, e << 32);
            let c = (recv_count[q] & 0xffffffffu64) as i32;
            if q < ell * nn {
                counts[q] = c;
            } else {
                src_tokens[q - ell * nn] = c;
            }
            q += nt;
        }
        threadfence_system();
        sync_threads();
        close_epoch(sync, 0, e);
    }
}

/// Reduces each source token's rows here (`tok_rows` of this call's epoch, rows of
/// `expert_out`, laid out as `recv_x`) with their weights, f32 in slot order, and stores the
/// `bf16` partial row into the token's PE at row `token * n + me` of `comb_x`, a thread a
/// 16-byte vector; then the last block signals every PE (see the module doc).
///
/// The grid strides over the source tokens only (`src_tokens[s]` from each PE `s`): each block
/// lays them out as running starts in shared memory and finds an item's source by binary
/// search. Vectors are counted in 32 bits (`LowLatencyMoe::new` refuses sizes beyond that).
// Long on purpose: the source layout in shared memory, the weighted sums and the last block's
// signals are one kernel, for the same reason as the dispatch's.
#[pgas_kernel(max_threads = 512)]
pub fn moe_ll_combine(
    expert_out: &CudaSlice<bf16>, src_tokens: &SymTensor<i32>, tok_rows: &SymTensor<u64>,
    tok_w: &SymTensor<f32>, comb_x: &mut SymTensor<bf16>, comb_sig: &mut SymTensor<u64>,
    sync: &mut SymTensor<u64>, me: u32, hidden: u32, max_tokens: u32, #[comptime] k: u32,
    #[comptime] n: u32,
) {
    // One start a source and the end (`n <= MAX_EXPERTS`): source s's tokens are items
    // start[s] .. start[s + 1] of the flat order.
    let start = shared_array::<u32, 4097>();
    let part = shared_array::<u32, 32>();
    let t = thread_idx_x() as usize;
    let nt = block_dim_x();
    let mut q = thread_idx_x();
    while q < n {
        start[q as usize + 1] = src_tokens[q as usize] as u32;
        q += nt;
    }
    if t == 0 {
        start[0] = 0;
    }
    sync_threads();
    // Running sums: warp 0, a lane a chunk of sources, then the chunks' offsets in lane order.
    let chunk = (n + 31) / 32;
    let lo = thread_idx_x() * chunk + 1;
    let hi = min(lo + chunk, n + 1);
    if t < 32 {
        let mut sum = 0u32;
        let mut j = lo;
        while j < hi {
            sum += start[j as usize];
            start[j as usize] = sum;
            j += 1;
        }
        part[t] = sum;
    }
    sync_threads();
    if t == 0 {
        let mut acc = 0u32;
        for l in 0..32usize {
            let c = part[l];
            part[l] = acc;
            acc += c;
        }
    }
    sync_threads();
    if t < 32 {
        let mut j = lo;
        while j < hi {
            start[j as usize] += part[t];
            j += 1;
        }
    }
    sync_threads();
    let e = sync[1];
    let kk = k as usize;
    let h = hidden as usize;
    let nv = hidden / 8;
    let items = start[n as usize] * nv;
    let threads = grid_dim_x() * block_dim_x();
    let mut i = global_thread_idx() as u32;
    while i < items {
        let ti = i / nv;
        let v = (i - ti * nv) as usize;
        // The last source starting at or before `ti` (it is not empty).
        let mut a = 0u32;
        let mut b = n;
        while b - a > 1 {
            let mid = (a + b) / 2;
            if start[mid as usize] <= ti {
                a = mid;
            } else {
                b = mid;
            }
        }
        let tok = ti - start[a as usize];
        let base = (a * max_tokens + tok) as usize * kk;
        let mut acc = [0.0f32; 8];
        let mut any = false;
        for j in 0..kk {
            let w = tok_rows[base + j];
            if (w >> 32) == e {
                let r = (w & 0xffffffffu64) as usize;
                let wt = tok_w[base + j];
                let y = load_vec16(&expert_out[r * h + v * 8]);
                for c in 0..8usize {
                    acc[c] += wt * vec16_get(y, c as u32) as f32;
                }
                any = true;
            }
        }
        if any {
            // Any bf16 vector gives the result its type; every element is set.
            let mut o = load_vec16(&expert_out[v * 8]);
            for c in 0..8usize {
                o = vec16_set(o, c as u32, acc[c] as bf16);
            }
            let db = (tok * n + me) as usize * h;
            store_vec16(&mut comb_x.peer(a as i32)[db + v * 8], o);
        }
        i += threads;
    }
    threadfence_system();
    if last_block(sync, 2) {
        threadfence_system();
        let e = sync[1];
        if t < n as usize {
            signal_op(&mut comb_sig[me as usize], e, SignalOp::Set, t as i32);
        }
        if t == 0 {
            sync[2] = 0;
        }
    }
}

/// Waits for every PE's combine, then writes `out[token]` = the sum, in PE order and f32, of
/// the partial rows `comb_x[token * n + d]` of the PEs `d` holding one of the token's experts
/// (`bf16` out), a thread a 16-byte vector of a token.
#[pgas_kernel(max_threads = 512)]
pub fn moe_ll_reduce(
    comb_x: &SymTensor<bf16>, comb_sig: &SymTensor<u64>, idx: &CudaSlice<i32>,
    out: &mut CudaSlice<bf16>, sync: &SymTensor<u64>, tokens: u32, hidden: u32, el: u32,
    #[comptime] k: u32, #[comptime] n: u32,
) {
    let nn = n as usize;
    let kk = k as usize;
    let h = hidden as usize;
    wait_pes(comb_sig, 0, nn, sync[1]);
    let ee = el * n;
    let threads = grid_dim_x() * block_dim_x();
    let nv = hidden / 8;
    let mut i = global_thread_idx() as u32;
    while i < tokens * nv {
        let tok = (i / nv) as usize;
        let v = (i % nv) as usize;
        let ob = tok * h;
        let mut acc = [0.0f32; 8];
        for d in 0..nn {
            let mut here = false;
            for j in 0..kk {
                let id = idx[tok * kk + j];
                if id >= 0 && (id as u32) < ee && id as u32 / el == d as u32 {
                    here = true;
                }
            }
            if here {
                let a = load_vec16(&comb_x[(tok * nn + d) * h + v * 8]);
                for c in 0..8usize {
                    acc[c] += vec16_get(a, c as u32) as f32;
                }
            }
        }
        let mut o = load_vec16(&out[ob + v * 8]);
        for c in 0..8usize {
            o = vec16_set(o, c as u32, acc[c] as bf16);
        }
        store_vec16(&mut out[ob + v * 8], o);
        i += threads;
    }
}
