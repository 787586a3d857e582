//! The kernels of [`MoeDispatcher`](super::MoeDispatcher): dispatch is [`moe_layout`] then
//! [`moe_dispatch`], combine is [`moe_combine_send`] then [`moe_combine_reduce`], all on one
//! stream with no host round trip between them; the combine of rows already reduced on the
//! experts' PEs is [`moe_combine_pull`] alone. Each is specialized for the number of PEs `n`
//! and (the dispatch kernels and `moe_combine_send`) top-k `k`, so the loops over PEs and
//! slots unroll.
//!
//! `docs/ops.md` ("MoE dispatch and combine") has how they work: the names (`el`, `ee`, rows,
//! pairs), the count exchange, why no PE overwrites what another still reads, and the layout of
//! the `sync`, `sigs` and `info` words these kernels index.

/// Words of `sync` (see the module doc).
pub const SYNC_WORDS: usize = 8;

/// Threads of a layout block (at most 1024: its ranking keeps a shared word a warp).
pub const LAYOUT_THREADS: u32 = 1024;

/// Threads of a dispatch or combine block.
pub const DATA_THREADS: u32 = 512;

/// Blocks of a dispatch or combine grid per SM: a warp's work is a chain of loads and stores
/// (most over NVLink), so two blocks of [`DATA_THREADS`] an SM keep twice as many in flight as
/// one. No data kernel needs its blocks co-resident (see the module doc), so a busy GPU only
/// runs them in more waves.
pub const BLOCKS_PER_SM: u32 = 2;

use super::rows::{__pgas_device_load_four, __pgas_device_store_four};
use super::ticket::{
    __pgas_device_close_epoch, __pgas_device_count_block_in, __pgas_device_end_epoch,
    __pgas_device_last_block, __pgas_device_wait_pes,
};
use crate::prelude::*;

/// Counts and ranks this PE's tokens per destination PE (blocks `0..n`) and per expert (blocks
/// `n..n + ee`), then the last block exchanges the counts with every PE and computes the
/// offsets (see the module doc). `idx` holds `tokens * k` expert ids (`-1`: unused slot; the
/// host checked the rest are in range and distinct within a token).
// Long on purpose: ranking rounds and the exchange run between block barriers on shared state.
#[pgas_kernel(max_threads = 1024)]
pub fn moe_layout(
    idx: &SymTensor<i32>, tok_rank: &mut SymTensor<i32>, tok_erank: &mut SymTensor<i32>,
    info: &mut SymTensor<i32>, counts: &mut SymTensor<i32>, sync: &mut SymTensor<u64>,
    sigs: &mut SymTensor<u64>, me: u32, tokens: u32, el: u32, #[comptime] k: u32,
    #[comptime] n: u32,
) {
    // Each warp's hits in each of a round's 4 steps (`q * 32 + warp`).
    let warp_hits = shared_array::<i32, 128>();
    let c = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let nt = block_dim_x() as usize;
    let lane = lane_id();
    let warp = warp_id() as usize;
    let nn = n as usize;
    let kk = k as usize;
    let ell = el as usize;
    let ee = nn * ell;
    let w = nn + ee;
    let ntok = tokens as usize;
    // The expert ids this block counts: PE `c`'s experts, or expert `c - nn` alone.
    let mut id_lo = c * ell;
    let mut id_hi = id_lo + ell;
    if c >= nn {
        id_lo = c - nn;
        id_hi = id_lo + 1;
    }
    // A round ranks `4 * nt` consecutive tokens in 4 steps of `nt`, a token a thread in each,
    // so a warp's loads of the ids are adjacent and the round's loads are in flight together (a
    // thread owning a run of tokens made every load of a warp touch 32 lines and took longer
    // than the rows' copy: `docs/ops.md`). A token hits this block at most once (the
    // host checked its ids are distinct), so its rank is the hits before it: those of the
    // earlier steps (`count`), of the warps before its warp in its step, and of the lanes
    // before its lane (its warp's suffix sums by shuffles, taken from the warp's total).
    let warps = nt / 32;
    let mut count = 0i32;
    let mut base = 0usize;
    while base < ntok {
        let mut hit = [0i32; 4];
        let mut slot = [0u32; 4];
        for q in 0..4 {
            let tok = base + q * nt + t;
            if tok < ntok {
                // A token's ids as 16-byte vectors where they fill them (its row of `idx` is
                // then 16-byte aligned): a quarter of the cache requests of 4-byte loads.
                let vecs = if kk % 4 == 0 { kk / 4 } else { 0 };
                for j4 in 0..vecs {
                    let v = load_vec16(&idx[tok * kk + 4 * j4]);
                    for u in 0..4usize {
                        let id = vec16_get(v, u as u32);
                        if id >= 0 && id as usize >= id_lo && (id as usize) < id_hi {
                            hit[q] = 1;
                            slot[q] = (4 * j4 + u) as u32;
                        }
                    }
                }
                for j in 4 * vecs..kk {
                    let id = idx[tok * kk + j];
                    if id >= 0 && id as usize >= id_lo && (id as usize) < id_hi {
                        hit[q] = 1;
                        slot[q] = j as u32;
                    }
                }
            }
        }
        // Steps past the last token (the same in the whole block) exchange nothing.
        let steps = min(4, (ntok - base + nt - 1) / nt);
        let mut suffix = [0i32; 4];
        for q in 0..4 {
            if q < steps {
                let mut s = hit[q];
                let mut d = 1u32;
                while d < 32 {
                    let v = shfl_down_sync(0xffff_ffff, s, d);
                    if lane + d < 32 {
                        s += v;
                    }
                    d *= 2;
                }
                suffix[q] = s;
                if lane == 0 {
                    warp_hits[q * 32 + warp] = s;
                }
            }
        }
        sync_threads();
        for q in 0..4 {
            if q < steps {
                // Lane `l` holds warp `l`'s hits: their sum over every warp and over the warps
                // before this one, by butterflies (each lane ends with the whole sum).
                let mut all = 0i32;
                if (lane as usize) < warps {
                    all = warp_hits[q * 32 + lane as usize];
                }
                let mut before = 0i32;
                if (lane as usize) < warp {
                    before = all;
                }
                let mut m = 16i32;
                while m > 0 {
                    all += shfl_xor_sync(0xffff_ffff, all, m);
                    before += shfl_xor_sync(0xffff_ffff, before, m);
                    m /= 2;
                }
                let tok = base + q * nt + t;
                if tok < ntok {
                    let rank = count + before + warp_hits[q * 32 + warp] - suffix[q];
                    if c < nn {
                        tok_rank[tok * nn + c] = if hit[q] != 0 { rank } else { -1 };
                    } else if hit[q] != 0 {
                        tok_erank[tok * kk + slot[q] as usize] = rank;
                    }
                }
                count += all;
            }
        }
        // Every thread has read this round's totals before the next round writes them.
        sync_threads();
        base += 4 * nt;
    }
    if t == 0 {
        info[c] = count;
    }
    // Ticket: the last block to get here sees every block's count (each fenced its writes
    // before taking its ticket) and runs the exchange.
    threadfence();
    if last_block(sync, 0) {
        threadfence();
        let e = sync[1] + 1;
        let mine = me as usize;
        if t < nn {
            put_signal(
                &mut counts[mine * w..(mine + 1) * w],
                &info[0..w],
                &mut sigs[mine],
                e,
                SignalOp::Set,
                t as i32,
            );
        }
        wait_pes(sigs, 0, nn, e);
        // Where this PE's rows start on PE `t`: after the rows of every lower-numbered source.
        if t < nn {
            let mut o = 0i32;
            for s in 0..mine {
                o += counts[s * w + t];
            }
            info[w + t] = o;
        }
        // Where this PE's pairs of expert `g` start on its PE: after the pairs of the PE's
        // lower local experts (from every source), then those of lower-numbered sources.
        let mut g = t;
        while g < ee {
            let first = (g / ell) * ell;
            let mut base = 0i32;
            for g2 in first..g {
                for s in 0..nn {
                    base += counts[s * w + nn + g2];
                }
            }
            for s in 0..mine {
                base += counts[s * w + nn + g];
            }
            info[w + nn + g] = base;
            g += nt;
        }
        if t == 0 {
            let roff = w + nn + ee;
            let mut o = 0i32;
            for s in 0..nn {
                info[roff + s] = o;
                o += counts[s * w + mine];
            }
            info[roff + nn] = o;
            let eoff = roff + nn + 1;
            let mut p = 0i32;
            for e2 in 0..ell {
                info[eoff + e2] = p;
                for s in 0..nn {
                    p += counts[s * w + nn + mine * ell + e2];
                }
            }
            info[eoff + ell] = p;
        }
        close_epoch(sync, 0, e);
    }
}

/// Sends each of this PE's tokens once to every PE that holds one of its experts, with its
/// metadata, by peer stores (see the module doc); when it completes, every row bound here has
/// arrived. With `fp8`, the rows travel as `e4m3` into `recv_q` with one `f32` scale per 128
/// values into `recv_scale` (`hidden` a multiple of 128), for [`moe_dequant`] to expand into
/// `recv_x`; without, `recv_q` and `recv_scale` are not touched. With `rma` (some peer is not
/// load/store reachable), each row is copied into this PE's `stage` and put with NVSHMEM
/// (`fp8` is not offered then).
// Long on purpose: a warp a token; its row vectors stay in registers across the PE loop.
#[pgas_kernel(max_threads = 512)]
pub fn moe_dispatch(
    x: &CudaSlice<bf16>, idx: &SymTensor<i32>, wts: &SymTensor<f32>, tok_rank: &SymTensor<i32>,
    tok_erank: &SymTensor<i32>, info: &SymTensor<i32>, recv_x: &mut SymTensor<bf16>,
    recv_q: &mut SymTensor<e4m3>, recv_scale: &mut SymTensor<f32>, stage: &mut SymTensor<bf16>,
    recv_src: &mut SymTensor<i32>, recv_idx: &mut SymTensor<i32>, recv_w: &mut SymTensor<f32>,
    row_pairs: &mut SymTensor<i32>, expert_rows: &mut SymTensor<i32>, sync: &mut SymTensor<u64>,
    sigs: &mut SymTensor<u64>, me: u32, tokens: u32, el: u32, hidden: u32, #[comptime] k: u32,
    #[comptime] n: u32, #[comptime] rma: bool, #[comptime] fp8: bool,
) {
    let lane = lane_id() as usize;
    let nn = n as usize;
    let kk = k as usize;
    let ell = el as usize;
    let ee = nn * ell;
    let w = nn + ee;
    let h = hidden as usize;
    let nv = h / 8;
    let ntok = tokens as usize;
    let warps = (grid_dim_x() * block_dim_x()) as usize / 32;
    let mut tok = global_thread_idx() / 32;
    while tok < ntok {
        // Metadata: lane 0 the source, lane j < k slot j.
        for d in 0..nn {
            let r = tok_rank[tok * nn + d];
            if r >= 0 {
                let row = (info[w + d] + r) as usize;
                let pe = d as i32;
                // A slot's expert here (local number), weight and pair, or -1, 0, -1.
                let mut e = -1i32;
                let mut wt = 0.0f32;
                let mut pair = -1i32;
                if lane < kk {
                    let id = idx[tok * kk + lane];
                    if id >= 0 && id as usize / ell == d {
                        e = id % el as i32;
                        wt = wts[tok * kk + lane];
                        pair = info[w + nn + id as usize] + tok_erank[tok * kk + lane];
                    }
                }
                let slot = row * kk + lane;
                if rma {
                    // Single elements by NVSHMEM (`p`): a store through the peer mapping where
                    // there is one, its proxy where there is not.
                    if lane == 0 {
                        p(&mut recv_src[2 * row], me as i32, pe);
                        p(&mut recv_src[2 * row + 1], tok as i32, pe);
                    }
                    if lane < kk {
                        p(&mut recv_idx[slot], e, pe);
                        p(&mut recv_w[slot], wt, pe);
                        p(&mut row_pairs[slot], pair, pe);
                        if pair >= 0 {
                            p(&mut expert_rows[pair as usize], row as i32, pe);
                        }
                    }
                } else {
                    if lane == 0 {
                        let ps = recv_src.peer(pe);
                        ps[2 * row] = me as i32;
                        ps[2 * row + 1] = tok as i32;
                    }
                    if lane < kk {
                        recv_idx.peer(pe)[slot] = e;
                        recv_w.peer(pe)[slot] = wt;
                        row_pairs.peer(pe)[slot] = pair;
                        if pair >= 0 {
                            expert_rows.peer(pe)[pair as usize] = row as i32;
                        }
                    }
                }
            }
        }
        let xb = tok * h;
        if rma {
            // Some peer is not load/store reachable: the row goes through this PE's stage
            // (symmetric, so any transport can read it) and NVSHMEM's warp puts.
            let mut v = lane;
            while v < nv {
                store_vec16(&mut stage[xb + v * 8], load_vec16(&x[xb + v * 8]));
                v += 32;
            }
            sync_warp();
            for d in 0..nn {
                let r = tok_rank[tok * nn + d];
                if r >= 0 {
                    let rb = (info[w + d] + r) as usize * h;
                    put_nbi_warp(&mut recv_x[rb..rb + h], &stage[xb..xb + h], d as i32);
                }
            }
        } else if fp8 {
            // A lane quantizes 16 values a step, so a group of 128 (one scale) is 8 lanes, and
            // a step of the warp 4 groups; lanes past the row's end take part in the shuffles
            // with nothing.
            let ng = h / 128;
            // Every byte is set before a store: the template only gives the vector its type
            // (its value, racing with peers' stores to row 0, does not matter).
            let tq = load_vec16(&recv_q[0]);
            let mut step = 0usize;
            while step < h {
                let b = step + lane * 16;
                let ok = b < h;
                let bb = if ok { b } else { 0 };
                let a = [load_vec16(&x[xb + bb]), load_vec16(&x[xb + bb + 8])];
                let mut amax = 0.0f32;
                for u in 0..2usize {
                    for i in 0..8usize {
                        amax = amax.max((vec16_get(a[u], i as u32) as f32).abs());
                    }
                }
                if !ok {
                    amax = 0.0;
                }
                amax = amax.max(shfl_xor_sync(0xffffffff, amax, 1));
                amax = amax.max(shfl_xor_sync(0xffffffff, amax, 2));
                amax = amax.max(shfl_xor_sync(0xffffffff, amax, 4));
                let scale = amax / 448.0;
                let inv = if amax > 0.0 { 448.0 / amax } else { 0.0 };
                let mut q = tq;
                for u in 0..2usize {
                    for i in 0..8usize {
                        let y = vec16_get(a[u], i as u32) as f32 * inv;
                        q = vec16_set(q, (u * 8 + i) as u32, y as e4m3);
                    }
                }
                if ok {
                    for d in 0..nn {
                        let r = tok_rank[tok * nn + d];
                        if r >= 0 {
                            let row = (info[w + d] + r) as usize;
                            store_vec16(&mut recv_q.peer(d as i32)[row * h + b], q);
                            if lane % 8 == 0 {
                                recv_scale.peer(d as i32)[row * ng + b / 128] = scale;
                            }
                        }
                    }
                }
                step += 512;
            }
        } else {
            // The row: loaded once, four vectors a lane in flight, stored to every destination.
            let mut v = lane;
            while v + 96 < nv {
                let mut a = [load_vec16(&x[xb + v * 8]); 4];
                load_four(&mut a, x, xb, v);
                for d in 0..nn {
                    let r = tok_rank[tok * nn + d];
                    if r >= 0 {
                        let rb = (info[w + d] + r) as usize * h;
                        store_four(recv_x.peer(d as i32), rb, v, &a);
                    }
                }
                v += 128;
            }
            while v < nv {
                let a0 = load_vec16(&x[xb + v * 8]);
                for d in 0..nn {
                    let r = tok_rank[tok * nn + d];
                    if r >= 0 {
                        let rb = (info[w + d] + r) as usize * h;
                        store_vec16(&mut recv_x.peer(d as i32)[rb + v * 8], a0);
                    }
                }
                v += 32;
            }
        }
        tok += warps;
    }
    count_block_in(sigs, nn, nn, me as usize);
    // The last block waits for every PE's blocks of this call (`e` calls of `grid` blocks each).
    if last_block(sync, 2) {
        let e = sync[3] + 1;
        wait_pes(sigs, nn, nn, e * grid_dim_x() as u64);
        close_epoch(sync, 2, e);
    }
}

/// Expands the rows an FP8 dispatch left in `recv_q` (`e4m3`, one `f32` scale per 128 values
/// in `recv_scale`) into `recv_x` (`bf16`, `q * scale` rounded once): launched after
/// [`moe_dispatch`] on the same stream, so every row bound here has arrived. A thread's unit is
/// 16 values (one 16-byte vector in, two out).
#[pgas_kernel(max_threads = 512)]
pub fn moe_dequant(
    info: &SymTensor<i32>, recv_q: &SymTensor<e4m3>, recv_scale: &SymTensor<f32>,
    recv_x: &mut SymTensor<bf16>, el: u32, hidden: u32, #[comptime] n: u32,
) {
    let nn = n as usize;
    let ee = nn * el as usize;
    let w = nn + ee;
    let h = hidden as usize;
    let per_row = h / 16;
    let ng = h / 128;
    let rows = info[w + nn + ee + nn] as usize;
    let threads = (grid_dim_x() * block_dim_x()) as usize;
    // Every lane is set before a store: the template only gives the vectors their type (its
    // value, racing with the stores to row 0, does not matter).
    let tb = load_vec16(&recv_x[0]);
    let mut i = global_thread_idx();
    while i < rows * per_row {
        let row = i / per_row;
        let c = (i % per_row) * 16;
        let q = load_vec16(&recv_q[row * h + c]);
        let sc = recv_scale[row * ng + c / 128];
        let mut o = [tb, tb];
        for u in 0..2usize {
            for j in 0..8usize {
                let y = vec16_get(q, (u * 8 + j) as u32) as f32 * sc;
                o[u] = vec16_set(o[u], j as u32, y as bf16);
            }
        }
        store_vec16(&mut recv_x[row * h + c], o[0]);
        store_vec16(&mut recv_x[row * h + c + 8], o[1]);
        i += threads;
    }
}

/// For each row received here, the weighted sum (f32) of its pairs' expert outputs, rounded to
/// `bf16` and stored into the row's source PE at (this PE, source token) of `comb` (with `rma`,
/// staged here and put by NVSHMEM a stretch at a time); then counts the block in on every PE. `expert_out` holds one row of `hidden` per pair, in pair order.
///
/// A warp's unit of work is one row's stretch of 32 vectors (a vector a lane), so that small
/// calls still spread over every warp; with `k` a comptime value the slot loop unrolls, and the
/// expert-output loads of all slots (an unused slot loads the row's first pair instead, and
/// does not add it) are in flight together.
#[pgas_kernel(max_threads = 512)]
pub fn moe_combine_send(
    expert_out: &CudaSlice<bf16>, info: &SymTensor<i32>, recv_src: &SymTensor<i32>,
    recv_w: &SymTensor<f32>, row_pairs: &SymTensor<i32>, comb: &mut SymTensor<bf16>,
    stage: &mut SymTensor<bf16>, sigs: &mut SymTensor<u64>, me: u32, el: u32, hidden: u32,
    max_tokens: u32, #[comptime] k: u32, #[comptime] n: u32, #[comptime] rma: bool,
) {
    let lane = lane_id() as usize;
    let nn = n as usize;
    let kk = k as usize;
    let ee = nn * el as usize;
    let w = nn + ee;
    let h = hidden as usize;
    let nv = h / 8;
    let chunks = (nv + 31) / 32;
    let mine = me as usize;
    let rows = info[w + nn + ee + nn] as usize;
    let warps = (grid_dim_x() * block_dim_x()) as usize / 32;
    let mut item = global_thread_idx() / 32;
    while item < rows * chunks {
        let row = item / chunks;
        let v = (item % chunks) * 32 + lane;
        if v < nv {
            let rk = row * kk;
            // The first pair of the row (every row has one: it came for an expert here).
            let mut p0 = -1i32;
            for j in 0..kk {
                if p0 < 0 {
                    p0 = row_pairs[rk + j];
                }
            }
            let mut o = load_vec16(&expert_out[p0 as usize * h + v * 8]);
            let mut acc = [0.0f32; 8];
            for j in 0..kk {
                let p = row_pairs[rk + j];
                let q = if p >= 0 { p } else { p0 };
                let y = load_vec16(&expert_out[q as usize * h + v * 8]);
                if p >= 0 {
                    let wj = recv_w[rk + j];
                    for e in 0..8 {
                        acc[e] = wj.mul_add(vec16_get(y, e as u32) as f32, acc[e]);
                    }
                }
            }
            for e in 0..8 {
                o = vec16_set(o, e as u32, acc[e] as bf16);
            }
            if rma {
                store_vec16(&mut stage[row * h + v * 8], o);
            } else {
                let db = (mine * max_tokens as usize + recv_src[2 * row + 1] as usize) * h;
                store_vec16(&mut comb.peer(recv_src[2 * row])[db + v * 8], o);
            }
        }
        if rma {
            // The warp's stretch, staged above, goes to the token's PE by NVSHMEM's warp put.
            sync_warp();
            let c0 = (item % chunks) * 256;
            let len = min(256, h - c0);
            let db = (mine * max_tokens as usize + recv_src[2 * row + 1] as usize) * h + c0;
            let sb = row * h + c0;
            put_nbi_warp(
                &mut comb[db..db + len],
                &stage[sb..sb + len],
                recv_src[2 * row],
            );
        }
        item += warps;
    }
    count_block_in(sigs, 2 * nn, nn, mine);
}

/// Waits until every PE's send blocks of this call (`send_blocks` each) have counted in, then
/// sums each of this PE's tokens' partial rows from the PEs that hold its experts (f32, in PE
/// order) into `out` (`bf16`; zeros for a token routed nowhere). Work is spread as in
/// [`moe_combine_send`] (a token's stretch of 32 vectors a warp), and the PE loop unrolls (`n`
/// comptime) with every PE's load in flight (a PE the token did not go to loads the first
/// one's partial instead, and does not add it).
#[pgas_kernel(max_threads = 512)]
pub fn moe_combine_reduce(
    tok_rank: &SymTensor<i32>, comb: &SymTensor<bf16>, out: &mut CudaSlice<bf16>,
    sync: &mut SymTensor<u64>, sigs: &mut SymTensor<u64>, tokens: u32, hidden: u32,
    max_tokens: u32, send_blocks: u32, #[comptime] n: u32,
) {
    let lane = lane_id() as usize;
    let nn = n as usize;
    let h = hidden as usize;
    let nv = h / 8;
    let chunks = (nv + 31) / 32;
    let mt = max_tokens as usize;
    let ntok = tokens as usize;
    // Every block reads the epoch before it takes its ticket, and the last ticket's block
    // advances it, so all blocks of one call agree on it.
    let e = sync[5] + 1;
    wait_pes(sigs, 2 * nn, nn, e * send_blocks as u64);
    let warps = (grid_dim_x() * block_dim_x()) as usize / 32;
    let mut item = global_thread_idx() / 32;
    while item < ntok * chunks {
        let tok = item / chunks;
        let v = (item % chunks) * 32 + lane;
        if v < nv {
            let mut first = nn;
            for d in 0..nn {
                if first == nn && tok_rank[tok * nn + d] >= 0 {
                    first = d;
                }
            }
            if first == nn {
                for i in 0..8 {
                    out[tok * h + v * 8 + i] = 0.0;
                }
            } else {
                let mut o = load_vec16(&comb[(first * mt + tok) * h + v * 8]);
                let mut acc = [0.0f32; 8];
                for d in 0..nn {
                    let hit = tok_rank[tok * nn + d] >= 0;
                    let q = if hit { d } else { first };
                    let y = load_vec16(&comb[(q * mt + tok) * h + v * 8]);
                    if hit {
                        for e in 0..8 {
                            acc[e] += vec16_get(y, e as u32) as f32;
                        }
                    }
                }
                for e in 0..8 {
                    o = vec16_set(o, e as u32, acc[e] as bf16);
                }
                store_vec16(&mut out[tok * h + v * 8], o);
            }
        }
        item += warps;
    }
    end_epoch(sync, 4, e);
}

/// The combine of rows already reduced on the experts' PEs: `rows` holds, on every PE, one
/// row per row received in the last dispatch (the weighted sum of that PE's experts' outputs
/// for it). Each PE tells every PE its rows are ready (an epoch-valued signal, sent by every
/// block, so that no block depends on another being scheduled), waits for every PE's, then
/// *pulls*: each of its tokens loads its row from each PE it went to (peer loads, its own PE
/// included, where the dispatch put it: `info[w + d] + tok_rank`) and sums them (f32, in PE
/// order) into `out` (`bf16`; zeros for a token routed nowhere). Nothing is written to a
/// peer, so a row crosses NVLink once, and there is no second kernel.
///
/// With `rma` (some peer is not load/store reachable), NVSHMEM's warp gets bring each stretch
/// into this PE's `stage` first.
///
/// A warp's unit of work is one token's stretch of 64 vectors, two a lane, so that each lane
/// has `2 * n` loads in flight before it adds: a PE the token did not go to loads from this
/// PE's own rows instead (an L2 hit, never another NVLink read) and is not added; a lane past
/// the row's end loads the row's last vector again and stores nothing.
// Long on purpose: the signal exchange, the pull and the epoch ticket share the block's state.
#[pgas_kernel(max_threads = 512)]
pub fn moe_combine_pull(
    tok_rank: &SymTensor<i32>, info: &SymTensor<i32>, rows: &SymTensor<bf16>,
    stage: &mut SymTensor<bf16>, out: &mut CudaSlice<bf16>, sync: &mut SymTensor<u64>,
    sigs: &mut SymTensor<u64>, me: u32, tokens: u32, el: u32, hidden: u32, max_tokens: u32,
    #[comptime] n: u32, #[comptime] rma: bool,
) {
    let t = thread_idx_x() as usize;
    let lane = lane_id() as usize;
    let nn = n as usize;
    let w = nn + nn * el as usize;
    let h = hidden as usize;
    let nv = h / 8;
    let chunks = (nv + 63) / 64;
    let ntok = tokens as usize;
    let mine = me as usize;
    // As in moe_combine_reduce: every block reads the epoch before its ticket.
    let e = sync[7] + 1;
    // This PE's rows were written by earlier work on the stream, complete when this kernel
    // starts; the signalling threads' fence orders the signal after everything they saw.
    if t < nn {
        threadfence_system();
        signal_op(&mut sigs[3 * nn + mine], e, SignalOp::Set, t as i32);
    }
    wait_pes(sigs, 3 * nn, nn, e);
    let warps = (grid_dim_x() * block_dim_x()) as usize / 32;
    let mut item = global_thread_idx() / 32;
    while item < ntok * chunks {
        let tok = item / chunks;
        let v0 = (item % chunks) * 64 + lane;
        let va = [min(v0, nv - 1), min(v0 + 32, nv - 1)];
        // Overwritten lane by lane before they are stored: only their type matters.
        let mut o = [load_vec16(&rows[va[0] * 8]), load_vec16(&rows[va[1] * 8])];
        let mut acc = [0.0f32; 16];
        // Where the token's row of PE `d` is read from: with `rma`, NVSHMEM's warp gets bring
        // the stretch into this PE's stage first, at (d, token).
        let c0 = (item % chunks) * 512;
        let len = min(512, h - c0);
        if rma {
            for d in 0..nn {
                let r = tok_rank[tok * nn + d];
                if r >= 0 {
                    let sb = (d * max_tokens as usize + tok) * h + c0;
                    let rb = (info[w + d] + r) as usize * h + c0;
                    get_warp(&mut stage[sb..sb + len], &rows[rb..rb + len], d as i32);
                }
            }
            sync_warp();
        }
        for d in 0..nn {
            let r = tok_rank[tok * nn + d];
            let hit = r >= 0;
            let b = if hit {
                (info[w + d] + r) as usize * h
            } else {
                0
            };
            let sb = if hit {
                (d * max_tokens as usize + tok) * h
            } else {
                0
            };
            let src = rows.peer(if hit && !rma { d as i32 } else { me as i32 });
            for u in 0..2usize {
                let y = if rma {
                    load_vec16(&stage[sb + va[u] * 8])
                } else {
                    load_vec16(&src[b + va[u] * 8])
                };
                if hit {
                    for i in 0..8usize {
                        acc[u * 8 + i] += vec16_get(y, i as u32) as f32;
                    }
                }
            }
        }
        for u in 0..2usize {
            let v = v0 + u * 32;
            if v < nv {
                for i in 0..8usize {
                    o[u] = vec16_set(o[u], i as u32, acc[u * 8 + i] as bf16);
                }
                store_vec16(&mut out[tok * h + v * 8], o[u]);
            }
        }
        item += warps;
    }
    end_epoch(sync, 6, e);
}
