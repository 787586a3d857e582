//! The Hopper attention forward kernel: warp-specialized, rings of K and V tiles filled by the
//! copy engine, `wgmma` for `S = Q Kᵀ` and for `O += P V` with P in registers, the online
//! softmax of one tile computed while the tensor cores run the previous tile's `P V`, and the
//! multiplying warpgroups (two, or three at head dim 64) taking turns at the tensor cores.
//! `docs/attention.md` walks through it.

use crate::prelude::*;

/// Query rows of each multiplying warpgroup: a block has `64 * wgs` (`wgs` of them, 2 or 3).
pub const WG_ROWS: usize = 64;

/// `O = softmax(scale Q Kᵀ) V` for one tile of `64 * wgs` queries of one head of one sequence,
/// and the log-sum-exp of each row.
///
/// Layouts (row-major, bf16): Q and O are `[tokens_q][hq][d]`, K and V `[tokens_k][hkv][d]`,
/// where `hkv = hq / group` (grouped-query attention: query head `h` reads key head
/// `h / group`); LSE is `[tokens_q][hq]` f32, natural log. Sequence `b` of the batch is tokens
/// `cu_q[b]..cu_q[b + 1]` of Q and `k_ranges[3 b]..k_ranges[3 b + 1]` of K and V (key ranges
/// may overlap: a context-parallel step gives several query ranges the same keys). The maps view Q, K and V
/// as 2-D tensors of `heads * d` columns: Q's boxes are 128 rows x 64 columns, K's and V's
/// `bn` x 64, all with the 128-byte swizzle.
///
/// With `fp8`, Q and K are e4m3 in the same layouts, viewed by their maps as pairs (one bf16
/// column is two values, so a box is still 128 bytes a row; at `d` = 64 a box holds two heads
/// and the multiply reads the first), and V comes transposed, `[hkv][d][columns]` e4m3, sequence
/// `b`'s keys from column `k_ranges[3 b + 2]` on in tiles of 128 whose keys are in
/// `pack_a_k32`'s order (`attention_v_fp8` writes it so): FP8 `wgmma` reads both operands
/// K-major. `bn` is 128, S is `wgmma_m64n128k32`, P V `wgmma_m64n{d}k32_rs` on P packed to e4m3
/// times 16 (the small weights keep more bits); `scale_log2` carries the inputs' scales, and O
/// is multiplied by `o_scale` (V's) at the end.
///
/// The grid is (query tiles of the longest sequence, `hq`, batch); a block past its sequence's
/// end returns, and with `causal` block x takes the sequence's x-th query tile from the end.
/// Warpgroup 0 (24 registers) loads Q's tile once, then fills a ring of `stages` K tiles and
/// one of `stages` V tiles, `bn` rows and `d / 64` boxes each. Warpgroups 1 to `wgs` (240
/// registers, 160 of three) own 64 query rows each. For key tile `j` a multiplying warpgroup
/// starts S's accumulators at the mask (keys past the sequence; with `causal`, keys after the
/// query, aligned to the end of the sequence as FlashAttention does when the lengths differ;
/// only on tiles that cross an edge), issues `S = Q K_jᵀ` (`wgmma_m64n{bn}k16`) and
/// `O += P_{j-1} V_{j-1}` (`wgmma_m64n{d}k16_rs`, P in registers, V's tile MN-major), and while
/// `P V` runs updates each row's running maximum and sum and computes `P_j`; then it rescales
/// O, only where a row's maximum moved by more than a set factor (lazy rescaling). The two
/// warpgroups issue their `wgmma`s in turns (named barriers 1 and 2), so one's softmax runs
/// under the other's matmuls. `scale_log2` is the softmax scale times `log2(e)`, so each
/// exponential is `exp2_approx` of one fused multiply-add. `docs/attention.md` says what ptxas
/// needs for the matmuls to stay asynchronous.
// Long on purpose: the two roles share the shared-memory rings and their mbarriers.
#[pgas_kernel(max_threads = 128 * (1 + wgs))]
pub fn attention_fwd_sm90(
    o: &mut CudaSlice<bf16>, lse: &mut CudaSlice<f32>, q_map: &TensorMap<bf16>,
    k_map: &TensorMap<bf16>, v_map: &TensorMap<bf16>, cu_q: &CudaSlice<u32>,
    k_ranges: &CudaSlice<u32>, hq: usize, group: usize, scale_log2: f32, o_scale: f32,
    #[comptime] d: u32, #[comptime] bn: u32, #[comptime] stages: u32, #[comptime] causal: bool,
    #[comptime] fp8: bool, #[comptime] wgs: u32,
) {
    let b = block_idx_z() as usize;
    let head = block_idx_y() as usize;
    let q_start = cu_q[b] as usize;
    let q_len = cu_q[b + 1] as usize - q_start;
    // Query rows of a block: 64 for each multiplying warpgroup (`WG_ROWS`, which a kernel
    // cannot read: it sees its parameters only).
    let bm = 64 * wgs as usize;
    let q_tiles = (q_len + bm - 1) / bm;
    let bx = block_idx_x() as usize;
    if bx >= q_tiles {
        return;
    }
    // With `causal`, the blocks that see the most keys (the last query tiles) start first, so
    // that the short ones fill the end of the grid.
    let q0 = if causal {
        (q_tiles - 1 - bx) * bm
    } else {
        bx * bm
    };
    let k_start = k_ranges[3 * b] as usize;
    let k_len = k_ranges[3 * b + 1] as usize - k_start;
    let vt_col = k_ranges[3 * b + 2] as usize;
    let kvh = head / group;
    let dw = d as usize;
    let bw = bn as usize;
    let s = stages as usize;
    // Keys a query row r may see: those before k_len, and with `causal` up to r + diag.
    let diag = k_len as i64 - q_len as i64;
    let mut k_end = k_len as i64;
    if causal {
        k_end = min(k_end, (q0 + bm) as i64 + diag);
    }
    let tiles = if k_end > 0 {
        (k_end as usize + bw - 1) / bw
    } else {
        0
    };
    // A masked score: a finite stand-in for minus infinity, so that a row with every key masked
    // so far weighs them `exp2(masked * scale_log2 - 0) = 0`, never `inf - inf`.
    let masked = -1.0e30f32;

    let smem = dyn_shared::<bf16>();
    // The same bytes as FP8 (twice the index of `smem`'s), for the `fp8` operands.
    let smem8 = dyn_shared::<e4m3>();
    let bars = dyn_shared::<u64>();
    // A head's columns in Q's and K's maps (pairs with `fp8`) and the columns of a row of their
    // tiles: `dq / 64` boxes of 64 (128 bytes).
    let hcols = if fp8 { dw / 2 } else { dw };
    let dq = if fp8 { max(dw, 128) / 2 } else { dw };
    // K steps of a box: 4 of 16 (or of 32 FP8 values), 2 at FP8's d = 64.
    let ksteps = if fp8 { min(dw / 32, 4) } else { 4 };
    // Q's tile: dq / 64 boxes of 128 x 64 (8192 elements each). Then K's ring, `s` tiles of
    // dq / 64 boxes of bn x 64, then V's (with `fp8`, a box of d rows of 128 keys). Then the
    // mbarriers: Q's, then `full` and `empty` of each K slot, then of each V slot. Every box
    // starts at a multiple of 8 KiB (bn x 64 x 2 bytes) from the 1 KiB-aligned base.
    let q_elems = dq * bm;
    let tile = dq * bw;
    let v_bytes = if fp8 { dw * 128 } else { tile * 2 };
    let v0 = q_elems + s * tile;
    let q_bar = (q_elems + 2 * s * tile) / 4;
    let k_full = q_bar + 1;
    let k_empty = k_full + s;
    let v_full = k_empty + s;
    let v_empty = v_full + s;
    let t = thread_idx_x() as usize;
    let wg = warpgroup_id() as usize;
    if t == 0 {
        mbarrier_init(&mut bars[q_bar], 1);
        for i in 0..s {
            mbarrier_init(&mut bars[k_full + i], 1);
            mbarrier_init(&mut bars[v_full + i], 1);
            // Lane 0 of each multiplying warp frees a slot.
            mbarrier_init(&mut bars[k_empty + i], 4 * wgs);
            mbarrier_init(&mut bars[v_empty + i], 4 * wgs);
        }
    }
    sync_threads();

    if wg == 0 {
        setmaxnreg_dec(24);
        if t == 0 {
            mbarrier_arrive_expect_tx(&mut bars[q_bar], (q_elems * 2) as u32);
            for c in 0..dq / 64 {
                tma_load_2d(
                    &mut smem[c * bm * 64],
                    q_map,
                    &mut bars[q_bar],
                    (head * hcols + c * 64) as i32,
                    (q_start + q0) as i32,
                );
            }
            for j in 0..tiles {
                let st = j % s;
                let row = (k_start + j * bw) as i32;
                // K's slot is free once both warpgroups computed S from its last tile, V's once
                // their P V is done; the phase is that of the slot's previous round.
                let freed = ((j / s + 1) % 2) as u32;
                if j >= s {
                    mbarrier_wait(&bars[k_empty + st], freed);
                }
                mbarrier_arrive_expect_tx(&mut bars[k_full + st], (tile * 2) as u32);
                for c in 0..dq / 64 {
                    let col = (kvh * hcols + c * 64) as i32;
                    let at = q_elems + st * tile + c * bw * 64;
                    tma_load_2d(&mut smem[at], k_map, &mut bars[k_full + st], col, row);
                }
                if j >= s {
                    mbarrier_wait(&bars[v_empty + st], freed);
                }
                mbarrier_arrive_expect_tx(&mut bars[v_full + st], v_bytes as u32);
                if fp8 {
                    // Vt's box: the head's d rows, 128 keys (64 pairs).
                    let col = ((vt_col + j * bw) / 2) as i32;
                    let at = v0 + st * tile;
                    tma_load_2d(
                        &mut smem[at],
                        v_map,
                        &mut bars[v_full + st],
                        col,
                        (kvh * dw) as i32,
                    );
                } else {
                    for c in 0..dw / 64 {
                        let col = (kvh * dw + c * 64) as i32;
                        let at = v0 + st * tile + c * bw * 64;
                        tma_load_2d(&mut smem[at], v_map, &mut bars[v_full + st], col, row);
                    }
                }
            }
        }
    } else {
        // The registers the feeder gave back, shared by the multiplying warpgroups.
        if wgs == 3 {
            setmaxnreg_inc(160);
        } else {
            setmaxnreg_inc(240);
        }
        let lane = lane_id() as usize;
        let w = (t % 128) / 32;
        // This thread's two query rows (in the sequence): r0 and r0 + 8.
        let r0 = q0 + (wg - 1) * 64 + w * 16 + lane / 4;
        let c0 = (2 * (lane % 4)) as i32;
        // Turns at the tensor cores: this warpgroup waits on barrier `wg`, then lets the next
        // go on `wg % wgs + 1`. Warpgroup 1 has the first turn, and the last warpgroup the
        // last: no arrival is left that nobody waits for.
        let mine = wg as u32;
        // (Of two, the other, as `3 - wg`: the code the two-warpgroup kernel always had.)
        let theirs = if wgs == 2 {
            3 - wg as u32
        } else {
            wg as u32 % wgs + 1
        };
        if wg == 1 && tiles > 0 {
            arrive_named(mine, 256);
        }
        let mut o_acc = frag_c::<f32, 32>();
        let mut p = frag_a::<bf16, 11>();
        let mut p8 = frag_a::<e4m3, 4>();
        // Lazy rescaling (FlashAttention-4's): a row's maximum, and with it O and the sum, moves
        // only when a score exceeds it by more than 2^lazy after scaling, so most tiles skip
        // O's rescaling; a weight is then below 2^lazy. At head dim 64, whose O is 32 registers,
        // the vote costs more than it saves: every tile rescales (`docs/attention.md`). FP8's P
        // is e4m3 times 2^p_shift (the small weights keep more bits; taken out of the LSE),
        // within e4m3's 448 with `lazy`.
        let lazy = if d == 64 {
            0.0f32
        } else if fp8 {
            4.0f32
        } else {
            8.0f32
        };
        let p_shift = if fp8 { 8.0 - lazy } else { 0.0f32 };
        // Each row's running maximum of the raw scores and sum of the weights.
        let mut m = [masked; 2];
        let mut l = [0.0f32; 2];
        mbarrier_wait(&bars[q_bar], 0);
        let mut alpha = [1.0f32; 2];
        let mut sc = frag_c::<f32, 22>();
        for j in 0..tiles {
            let st = j % s;
            let kb = q_elems + st * tile;
            // The first K step of S writes over its accumulators (`_acc` with `add` false), or,
            // on a tile across an edge, adds to the mask: 0, or `masked` for keys past the
            // sequence or (causal) after the query, columns from `lim` on of this tile, per row.
            // Done before the matmul, not after, so that the code between the two waits below
            // has no branch, which would let ptxas hoist the second wait above the softmax it
            // should overlap.
            let k0 = j * bw;
            let edge = k0 + bw > k_len || (causal && (k0 + bw) as i64 > (q0 as i64) + diag + 1);
            if edge {
                for h in 0..2 {
                    let mut lim = k_len as i64 - k0 as i64;
                    if causal {
                        lim = min(lim, (r0 + h * 8) as i64 + diag + 1 - k0 as i64);
                    }
                    let lim = lim as i32;
                    for ni in 0..bw / 8 {
                        for e in 0..2 {
                            sc[ni][2 * h + e] = if c0 + (ni * 8 + e) as i32 >= lim {
                                masked
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
            let pv = v0 + ((j + s - 1) % s) * tile;
            mbarrier_wait(&bars[k_full + st], ((j / s) % 2) as u32);
            if j > 0 {
                mbarrier_wait(&bars[v_full + (j - 1) % s], (((j - 1) / s) % 2) as u32);
            }
            for ni in 0..dw / 8 {
                wgmma_fence_operand(&mut o_acc[ni]);
            }
            sync_named(mine, 256);
            wgmma_fence();
            for c in 0..dq / 64 {
                for ks in 0..ksteps {
                    let a = c * bm * 64 + (wg - 1) * 4096 + ks * 16;
                    let b = kb + c * bw * 64 + ks * 16;
                    let b8 = 2 * (kb + c * bw * 64) + ks * 32;
                    // `c` and `ks` are unrolled: one call a step is compiled.
                    let first = c == 0 && ks == 0;
                    if fp8 && first {
                        wgmma_m64n128k32_acc(&mut sc[0], &smem8[2 * a], &smem8[b8], edge);
                    } else if fp8 {
                        wgmma_m64n128k32(&mut sc[0], &smem8[2 * a], &smem8[b8]);
                    } else if bn == 176 && first {
                        wgmma_m64n176k16_acc(&mut sc[0], &smem[a], &smem[b], edge);
                    } else if bn == 176 {
                        wgmma_m64n176k16(&mut sc[0], &smem[a], &smem[b]);
                    } else if bn == 128 && first {
                        wgmma_m64n128k16_acc(&mut sc[0], &smem[a], &smem[b], edge);
                    } else if bn == 128 {
                        wgmma_m64n128k16(&mut sc[0], &smem[a], &smem[b]);
                    } else if first {
                        wgmma_m64n64k16_acc(&mut sc[0], &smem[a], &smem[b], edge);
                    } else {
                        wgmma_m64n64k16(&mut sc[0], &smem[a], &smem[b]);
                    }
                }
            }
            wgmma_commit();
            if j > 0 {
                // O = alpha O + P V of the previous tile, as a batch of its own after its own
                // fence, so that no register move of the branch falls inside a batch.
                wgmma_fence();
                issue_pv(&mut o_acc, &p, &p8, pv, bw, d, fp8);
                wgmma_commit();
                arrive_named(theirs, 256);
                wgmma_wait(1);
            } else {
                // In the same branch as the issue: ptxas's check of the registers a running
                // `wgmma` uses does not carry `j > 0` from one branch to another, and would
                // serialize every `wgmma` of the kernel (C7513, C7514).
                arrive_named(theirs, 256);
                wgmma_wait(0);
            }
            if lane == 0 {
                mbarrier_arrive(&mut bars[k_empty + st]);
            }

            // Each row's maximum across the 4 threads that hold it, and the weights in base 2,
            // while the tensor cores run P V.
            let mut mx = [m[0], m[1]];
            for ni in 0..bw / 8 {
                for e in 0..4 {
                    mx[e / 2] = max(mx[e / 2], sc[ni][e]);
                }
            }
            let mut base = [0.0f32; 2];
            for h in 0..2 {
                let mut v = mx[h];
                v = max(v, shfl_xor_sync(0xffff_ffff, v, 1));
                v = max(v, shfl_xor_sync(0xffff_ffff, v, 2));
                // Selects, not a branch: none may sit between the two waits.
                let grow = (v - m[h]) * scale_log2;
                alpha[h] = if grow > lazy { exp2_approx(-grow) } else { 1.0 };
                m[h] = if grow > lazy { v } else { m[h] };
                // A row with every key masked so far keeps a zero weight for all of them.
                base[h] = if m[h] > masked * 0.5 {
                    m[h] * scale_log2 - p_shift
                } else {
                    -p_shift
                };
            }
            let mut sum = [0.0f32; 2];
            for ni in 0..bw / 8 {
                for e in 0..4 {
                    let w = exp2_approx(sc[ni][e] * scale_log2 - base[e / 2]);
                    sc[ni][e] = w;
                    sum[e / 2] += w;
                }
            }
            for h in 0..2 {
                l[h] = l[h] * alpha[h] + sum[h];
            }
            // Unconditional, though nothing is in flight at j = 0 (see above).
            wgmma_wait(0);
            if j > 0 && lane == 0 {
                mbarrier_arrive(&mut bars[v_empty + (j - 1) % s]);
            }
            if fp8 {
                for kk in 0..bw / 32 {
                    pack_a_k32(&mut p8[kk], &sc[4 * kk]);
                }
            } else {
                for kk in 0..bw / 16 {
                    pack_a(&mut p[kk], &sc[2 * kk]);
                }
            }
            // O = alpha O before the next P V, skipped by a warp none of whose rows moved its
            // maximum (here, after the last wait: a branch at the top of the loop, before the
            // fence, made ptxas serialize every wgmma, C7515).
            if d == 64 || any_sync(0xffff_ffff, alpha[0] != 1.0 || alpha[1] != 1.0) {
                for ni in 0..dw / 8 {
                    for e in 0..4 {
                        o_acc[ni][e] *= alpha[e / 2];
                    }
                }
            }
        }
        if tiles > 0 {
            // The last tile's P V (O was rescaled for it at the end of the loop).
            let last = (tiles - 1) % s;
            let pv = v0 + last * tile;
            for ni in 0..dw / 8 {
                wgmma_fence_operand(&mut o_acc[ni]);
            }
            mbarrier_wait(&bars[v_full + last], (((tiles - 1) / s) % 2) as u32);
            sync_named(mine, 256);
            wgmma_fence();
            issue_pv(&mut o_acc, &p, &p8, pv, bw, d, fp8);
            wgmma_commit();
            if wg != wgs as usize {
                arrive_named(theirs, 256);
            }
            wgmma_wait(0);
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
                let inv = if l[h] > 0.0 { o_scale / l[h] } else { 0.0 };
                let at = ((q_start + row) * hq + head) * dw + c0 as usize;
                for ni in 0..dw / 8 {
                    o[at + ni * 8] = (o_acc[ni][2 * h] * inv) as bf16;
                    o[at + ni * 8 + 1] = (o_acc[ni][2 * h + 1] * inv) as bf16;
                }
                if lane % 4 == 0 {
                    // ln(sum of e^(scale s)) = (scale_log2 m + log2(l)) ln 2, m a raw score.
                    lse[(q_start + row) * hq + head] = if l[h] > 0.0 {
                        (m[h] * scale_log2 + log2(l[h]) - p_shift) * 0.693_147_2
                    } else {
                        masked
                    };
                }
            }
        }
    }
}

/// `O += P V` for one tile of `bw` keys, as one batch of `wgmma`s (the caller fences before and
/// commits after): P in registers, its fragment `kk` for keys `16 kk..` (`p`) or, with `fp8`,
/// `32 kk..` (`p8`, in `pack_a_k32`'s order); V's tile at element `pv` of the shared memory,
/// MN-major in boxes of 64 columns `bw * 64` elements apart (row `16 kk` is 1024 elements into
/// each), or with `fp8` Vt's box at byte `2 pv`, K-major (bytes `32 kk..` of its rows).
#[pgas_device]
fn issue_pv(
    o_acc: &mut [FragC<f32>], p: &[FragA<bf16>], p8: &[FragA<e4m3>], pv: usize, bw: usize, d: u32,
    fp8: bool,
) {
    let smem = dyn_shared::<bf16>();
    let smem8 = dyn_shared::<e4m3>();
    if fp8 {
        for kk in 0..bw / 32 {
            let v = 2 * pv + kk * 32;
            if d == 256 {
                wgmma_m64n256k32_rs(&mut o_acc[0], &p8[kk], &smem8[v]);
            } else if d == 128 {
                wgmma_m64n128k32_rs(&mut o_acc[0], &p8[kk], &smem8[v]);
            } else {
                wgmma_m64n64k32_rs(&mut o_acc[0], &p8[kk], &smem8[v]);
            }
        }
    } else {
        let chunk = (bw * 64) as u32;
        for kk in 0..bw / 16 {
            let v = pv + kk * 1024;
            if d == 256 {
                wgmma_m64n256k16_rs(&mut o_acc[0], &p[kk], &smem[v], chunk);
            } else if d == 128 {
                wgmma_m64n128k16_rs(&mut o_acc[0], &p[kk], &smem[v], chunk);
            } else {
                wgmma_m64n64k16_rs(&mut o_acc[0], &p[kk], &smem[v], chunk);
            }
        }
    }
}
