//! The Hopper attention forward kernel: warp-specialized, a ring of K/V tiles filled by the copy
//! engine, `wgmma` for `S = Q Kᵀ` and for `O += P V` with P in registers, the online softmax in
//! base 2 between them. `docs/attention.md` walks through it.

use crate::prelude::*;

/// Query rows per block: 64 for each of the two multiplying warpgroups.
pub const BM: usize = 128;
/// Threads per block: the feeding warpgroup and two multiplying ones.
pub const THREADS: u32 = 384;

/// `O = softmax(scale Q Kᵀ) V` for one 128-row tile of queries of one head of one sequence, and
/// the log-sum-exp of each row.
///
/// Layouts (row-major, bf16): Q and O are `[tokens_q][hq][d]`, K and V `[tokens_k][hkv][d]`,
/// where `hkv = hq / group` (grouped-query attention: query head `h` reads key head
/// `h / group`); LSE is `[tokens_q][hq]` f32, natural log. Sequence `b` of the batch is tokens
/// `cu_q[b]..cu_q[b + 1]` of Q and `k_ranges[2 b]..k_ranges[2 b + 1]` of K and V (key ranges
/// may overlap: a context-parallel step gives several query ranges the same keys). The maps view Q, K and V
/// as 2-D tensors of `heads * d` columns: Q's boxes are 128 rows x 64 columns, K's and V's
/// `bn` x 64, all with the 128-byte swizzle.
///
/// The grid is (query tiles of the longest sequence, `hq`, batch); a block past its sequence's
/// end returns. Warpgroup 0 (24 registers) loads Q's tile once, then fills a ring of `stages`
/// slots with K's and V's tiles of `bn` rows, `d / 64` boxes each; warpgroups 1 and 2 (240
/// registers) own 64 query rows each and, per slot, compute `S = Q Kᵀ` (`wgmma_m64n{bn}k16`),
/// mask it (keys past the sequence; with `causal`, keys after the query, aligned to the end of
/// the sequence as FlashAttention does when the lengths differ), update the running maximum
/// and sum of each row, rescale O, and add `P V` with P taken from the score registers
/// (`wgmma_m64n{d}k16_rs`, V's tile MN-major). `scale_log2` is the softmax scale times
/// `log2(e)`, so the exponentials are `exp2`.
// Long on purpose: the two roles share the shared-memory ring and its mbarriers, and the
// accumulators cannot be passed to a device function.
#[pgas_kernel(max_threads = 384)]
pub fn attention_fwd_sm90(
    o: &mut CudaSlice<bf16>,
    lse: &mut CudaSlice<f32>,
    q_map: &TensorMap<bf16>,
    k_map: &TensorMap<bf16>,
    v_map: &TensorMap<bf16>,
    cu_q: &CudaSlice<u32>,
    k_ranges: &CudaSlice<u32>,
    hq: usize,
    group: usize,
    scale_log2: f32,
    #[comptime] d: u32,
    #[comptime] bn: u32,
    #[comptime] stages: u32,
    #[comptime] causal: bool,
) {
    let b = block_idx_z() as usize;
    let head = block_idx_y() as usize;
    let q0 = block_idx_x() as usize * 128;
    let q_start = cu_q[b] as usize;
    let q_len = cu_q[b + 1] as usize - q_start;
    if q0 >= q_len {
        return;
    }
    let k_start = k_ranges[2 * b] as usize;
    let k_len = k_ranges[2 * b + 1] as usize - k_start;
    let kvh = head / group;
    let dw = d as usize;
    let bw = bn as usize;
    let s = stages as usize;
    // Keys a query row r may see: those before k_len, and with `causal` up to r + diag.
    let diag = k_len as i64 - q_len as i64;
    let mut k_end = k_len as i64;
    if causal {
        k_end = min(k_end, (q0 + 128) as i64 + diag);
    }
    let tiles = if k_end > 0 {
        (k_end as usize + bw - 1) / bw
    } else {
        0
    };
    // A masked score: a finite stand-in for minus infinity, so that a row with every key masked
    // so far weighs them `exp2(masked - 0) = 0`, never `inf - inf`.
    let masked = -1.0e30f32;

    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    // Q's tile: d / 64 boxes of 128 x 64 (8192 elements each). Then slot st: K's d / 64 boxes of
    // bn x 64, then V's. Then the mbarriers: Q's, `full` and `empty` for each slot. Every box
    // starts at a multiple of 8 KiB (bn x 64 x 2 bytes) from the 1 KiB-aligned base.
    let q_elems = dw * 128;
    let slot = 2 * dw * bw;
    let q_bar = (q_elems + s * slot) / 4;
    let full0 = q_bar + 1;
    let empty0 = full0 + s;
    let t = thread_idx_x() as usize;
    let wg = t / 128;
    if t == 0 {
        mbarrier_init(&mut bars[q_bar], 1);
        for i in 0..s {
            mbarrier_init(&mut bars[full0 + i], 1);
            // Lane 0 of each of the 8 multiplying warps frees a slot.
            mbarrier_init(&mut bars[empty0 + i], 8);
        }
    }
    sync_threads();

    if wg == 0 {
        setmaxnreg_dec(24);
        if t == 0 {
            mbarrier_arrive_expect_tx(&mut bars[q_bar], (q_elems * 2) as u32);
            for c in 0..dw / 64 {
                tma_load_2d(
                    &mut smem[c * 8192],
                    q_map,
                    &mut bars[q_bar],
                    (head * dw + c * 64) as i32,
                    (q_start + q0) as i32,
                );
            }
            for j in 0..tiles {
                let st = j % s;
                if j >= s {
                    // Both multiplying warpgroups are done with the slot's last tile.
                    mbarrier_wait(&bars[empty0 + st], ((j / s + 1) % 2) as u32);
                }
                mbarrier_arrive_expect_tx(&mut bars[full0 + st], (slot * 2) as u32);
                let kb = q_elems + st * slot;
                let row = (k_start + j * bw) as i32;
                for c in 0..dw / 64 {
                    let col = (kvh * dw + c * 64) as i32;
                    tma_load_2d(
                        &mut smem[kb + c * bw * 64],
                        k_map,
                        &mut bars[full0 + st],
                        col,
                        row,
                    );
                    tma_load_2d(
                        &mut smem[kb + dw * bw + c * bw * 64],
                        v_map,
                        &mut bars[full0 + st],
                        col,
                        row,
                    );
                }
            }
        }
    } else {
        setmaxnreg_inc(240);
        let lane = lane_id() as usize;
        let w = (t % 128) / 32;
        // This thread's two query rows (in the sequence): r0 and r0 + 8.
        let r0 = q0 + (wg - 1) * 64 + w * 16 + lane / 4;
        let c0 = 2 * (lane % 4);
        let mut o_acc = frag_c::<f32, 32>();
        let mut m = [masked; 2];
        let mut l = [0.0f32; 2];
        mbarrier_wait(&bars[q_bar], 0);
        for j in 0..tiles {
            let st = j % s;
            mbarrier_wait(&bars[full0 + st], ((j / s) % 2) as u32);
            let kb = q_elems + st * slot;
            let vb = kb + dw * bw;
            let mut sc = frag_c::<f32, 16>();
            wgmma_fence();
            for c in 0..dw / 64 {
                for ks in 0..4 {
                    let a = c * 8192 + (wg - 1) * 4096 + ks * 16;
                    if bn == 128 {
                        wgmma_m64n128k16(&mut sc[0], &smem[a], &smem[kb + c * bw * 64 + ks * 16]);
                    } else {
                        wgmma_m64n64k16(&mut sc[0], &smem[a], &smem[kb + c * bw * 64 + ks * 16]);
                    }
                }
            }
            wgmma_commit();
            wgmma_wait(0);

            // Scale to base 2, mask where a key is past the sequence or (causal) after the
            // query, and take each row's maximum across the 4 threads that hold it.
            let k0 = j * bw;
            let edge = k0 + bw > k_len || (causal && (k0 + bw) as i64 > (q0 as i64) + diag + 1);
            let mut mx = [masked; 2];
            for ni in 0..bw / 8 {
                for e in 0..4 {
                    let mut x = sc[ni][e] * scale_log2;
                    if edge {
                        let col = (k0 + ni * 8 + c0 + e % 2) as i64;
                        let row = (r0 + (e / 2) * 8) as i64;
                        if col >= k_len as i64 || (causal && col > row + diag) {
                            x = masked;
                        }
                    }
                    sc[ni][e] = x;
                    mx[e / 2] = max(mx[e / 2], x);
                }
            }
            let mut alpha = [0.0f32; 2];
            let mut base = [0.0f32; 2];
            for h in 0..2 {
                let mut v = mx[h];
                v = max(v, shfl_xor_sync(0xffff_ffff, v, 1));
                v = max(v, shfl_xor_sync(0xffff_ffff, v, 2));
                let m_new = max(m[h], v);
                // A row with every key masked so far keeps a zero weight for all of them.
                base[h] = if m_new > masked * 0.5 { m_new } else { 0.0 };
                alpha[h] = exp2(m[h] - base[h]);
                m[h] = m_new;
            }
            let mut sum = [0.0f32; 2];
            for ni in 0..bw / 8 {
                for e in 0..4 {
                    let p = exp2(sc[ni][e] - base[e / 2]);
                    sc[ni][e] = p;
                    sum[e / 2] += p;
                }
            }
            for h in 0..2 {
                l[h] = l[h] * alpha[h] + sum[h];
            }
            for ni in 0..dw / 8 {
                for e in 0..4 {
                    o_acc[ni][e] *= alpha[e / 2];
                }
            }

            // O += P V: K step kk is keys 16 kk.. (score fragments 2 kk and 2 kk + 1, V's rows
            // 16 kk.., 1024 elements into each of its boxes).
            wgmma_fence();
            for kk in 0..bw / 16 {
                let v = vb + kk * 1024;
                let chunk = (bw * 64) as u32;
                if d == 256 {
                    wgmma_m64n256k16_rs(&mut o_acc[0], &sc[2 * kk], &smem[v], chunk);
                } else if d == 128 {
                    wgmma_m64n128k16_rs(&mut o_acc[0], &sc[2 * kk], &smem[v], chunk);
                } else {
                    wgmma_m64n64k16_rs(&mut o_acc[0], &sc[2 * kk], &smem[v], chunk);
                }
            }
            wgmma_commit();
            wgmma_wait(0);
            if lane == 0 {
                mbarrier_arrive(&mut bars[empty0 + st]);
            }
        }

        // Each row's sum over its 4 threads; rows of the tile past the sequence are not stored.
        for h in 0..2 {
            let mut v = l[h];
            v += shfl_xor_sync(0xffff_ffff, v, 1);
            v += shfl_xor_sync(0xffff_ffff, v, 2);
            l[h] = v;
        }
        for h in 0..2 {
            let row = r0 + h * 8;
            if row < q_len {
                let inv = if l[h] > 0.0 { 1.0 / l[h] } else { 0.0 };
                let at = ((q_start + row) * hq + head) * dw + c0;
                for ni in 0..dw / 8 {
                    o[at + ni * 8] = (o_acc[ni][2 * h] * inv) as bf16;
                    o[at + ni * 8 + 1] = (o_acc[ni][2 * h + 1] * inv) as bf16;
                }
                if lane % 4 == 0 {
                    // ln(sum of e^(scale s)) = (m + log2(l)) ln 2, m in base 2.
                    lse[(q_start + row) * hq + head] = if l[h] > 0.0 {
                        (m[h] + log2(l[h])) * 0.693_147_2
                    } else {
                        masked
                    };
                }
            }
        }
    }
}
