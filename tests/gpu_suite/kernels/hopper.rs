//! Hopper (sm_90a): mbarriers, the copy engine (`tma_load_2d` from a `&TensorMap<T>` parameter)
//! and warpgroup MMA (`wgmma_m64nNk16`) on 128-byte-swizzled tiles in dynamic shared memory.
use pgas::prelude::*;

/// Thread 0's start of the copies of A's tile (to element 0) and Bt's (to 4096) onto
/// `bars[bar]`, `bytes` in all: a device function taking the kernel's maps.
#[pgas_device]
fn fetch_a_bt(a_map: &TensorMap<bf16>, b_map: &TensorMap<bf16>, bar: usize, bytes: u32) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    mbarrier_arrive_expect_tx(&mut bars[bar], bytes);
    tma_load_2d(&mut smem[0], a_map, &mut bars[bar], 0, 0);
    tma_load_2d(&mut smem[4096], b_map, &mut bars[bar], 0, 0);
}

/// One warpgroup: C (64 x `n`, f32) = A (64 x 64) Btᵀ with Bt (`n` x 64) stored `[n][k]`, both
/// `bf16` tiles fetched by the copy engine onto one mbarrier (`fetch_a_bt`), four K steps of
/// 16; `n` is 64 (`wgmma_m64n64k16`) or 176 (`wgmma_m64n176k16`).
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_tile_bf16(
    c: &mut CudaSlice<f32>,
    a_map: &TensorMap<bf16>,
    b_map: &TensorMap<bf16>,
    #[comptime] n: u32,
) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    let nw = n as usize;
    // A's 8 KiB tile, Bt's (n x 64), then the mbarrier.
    let bar = (4096 + nw * 64) / 4;
    if t == 0 {
        mbarrier_init(&mut bars[bar], 1);
    }
    sync_threads();
    if t == 0 {
        fetch_a_bt(a_map, b_map, bar, ((4096 + nw * 64) * 2) as u32);
    }
    mbarrier_wait(&bars[bar], 0);
    let mut acc = frag_c::<f32, 22>();
    wgmma_fence();
    for ks in 0..4 {
        if n == 176 {
            wgmma_m64n176k16(&mut acc[0], &smem[ks * 16], &smem[4096 + ks * 16]);
        } else {
            wgmma_m64n64k16(&mut acc[0], &smem[ks * 16], &smem[4096 + ks * 16]);
        }
    }
    wgmma_commit();
    wgmma_wait(0);
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..nw / 8 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, nw)] = acc[ni][j];
        }
    }
}

/// One warpgroup, f16, N = 128: C (64 x 128) = A (64 x K) Btᵀ, Bt (128 x K), K in `ktiles`
/// tiles of 64 through one slot: the mbarrier's phase parity alternates, and the slot is
/// refilled only after `wgmma_wait(0)` (a fence for the copy engine's next write).
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_ktiles_f16(
    c: &mut CudaSlice<f32>,
    a_map: &TensorMap<f16>,
    b_map: &TensorMap<f16>,
    #[comptime] ktiles: u32,
) {
    let smem = dyn_shared::<f16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    // A's 64 x 64 tile (8 KiB), Bt's 128 x 64 (16 KiB), then the mbarrier (u64 element 3072).
    if t == 0 {
        mbarrier_init(&mut bars[3072], 1);
    }
    sync_threads();
    let mut acc = frag_c::<f32, 16>();
    for kt in 0..ktiles as usize {
        if t == 0 {
            mbarrier_arrive_expect_tx(&mut bars[3072], 24576);
            tma_load_2d(&mut smem[0], a_map, &mut bars[3072], (kt * 64) as i32, 0);
            tma_load_2d(&mut smem[4096], b_map, &mut bars[3072], (kt * 64) as i32, 0);
        }
        mbarrier_wait(&bars[3072], (kt % 2) as u32);
        wgmma_fence();
        for ks in 0..4 {
            wgmma_m64n128k16(&mut acc[0], &smem[ks * 16], &smem[4096 + ks * 16]);
        }
        wgmma_commit();
        wgmma_wait(0);
        sync_threads();
    }
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..16 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 128)] = acc[ni][j];
        }
    }
}

/// Shared memory written by threads (not the copy engine) feeding wgmma: `fence_proxy_async`
/// orders the stores before the tensor cores read them, and `mbarrier_arrive` / `mbarrier_wait`
/// hand the tile over between threads.
#[pgas_kernel(max_threads = 256)]
pub fn wgmma_from_thread_stores(c: &mut CudaSlice<f32>, a: &CudaSlice<bf16>, bt: &CudaSlice<bf16>) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    if t == 0 {
        mbarrier_init(&mut bars[2048], 128);
    }
    sync_threads();
    if t < 128 {
        // The swizzle the copy engine would apply: 16-byte chunk q of row r goes to q ^ (r % 8).
        for i in 0..4 {
            let q = t * 4 + i;
            let r = q / 8;
            let ch = q % 8;
            store_vec16(&mut smem[r * 64 + (ch ^ (r % 8)) * 8], load_vec16(&a[q * 8]));
            store_vec16(&mut smem[4096 + r * 64 + (ch ^ (r % 8)) * 8], load_vec16(&bt[q * 8]));
        }
        fence_proxy_async();
        mbarrier_arrive(&mut bars[2048]);
    } else {
        mbarrier_wait(&bars[2048], 0);
        let mut acc = frag_c::<f32, 8>();
        wgmma_fence();
        for ks in 0..4 {
            wgmma_m64n64k16(&mut acc[0], &smem[ks * 16], &smem[4096 + ks * 16]);
        }
        wgmma_commit();
        wgmma_wait(0);
        let lane = lane_id() as usize;
        let r = (warp_id() as usize - 4) * 16 + lane / 4;
        for ni in 0..8 {
            for j in 0..4 {
                c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 64)] = acc[ni][j];
            }
        }
    }
}

/// Two multiplying warpgroups, N = 256: each takes 64 rows of a 128 x 64 A tile (64 rows of 64
/// elements, 8 KiB, further for the second) against one 256 x 64 Bt tile.
#[pgas_kernel(max_threads = 256)]
fn wgmma_n256_two_warpgroups(c: &mut CudaSlice<f32>, a_map: &TensorMap<bf16>, b_map: &TensorMap<bf16>) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    // A: 8192 elements, Bt: 16384, then the mbarrier (u64 element 6144).
    if t == 0 {
        mbarrier_init(&mut bars[6144], 1);
        mbarrier_arrive_expect_tx(&mut bars[6144], 49152);
        tma_load_2d(&mut smem[0], a_map, &mut bars[6144], 0, 0);
        tma_load_2d(&mut smem[8192], b_map, &mut bars[6144], 0, 0);
    }
    sync_threads();
    mbarrier_wait(&bars[6144], 0);
    let wg = t / 128;
    let mut acc = frag_c::<f32, 32>();
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n256k16(&mut acc[0], &smem[wg * 4096 + ks * 16], &smem[8192 + ks * 16]);
    }
    wgmma_commit();
    wgmma_wait(0);
    let lane = lane_id() as usize;
    let r = wg * 64 + (warp_id() as usize % 4) * 16 + lane / 4;
    for ni in 0..32 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 256)] = acc[ni][j];
        }
    }
}

/// The two matmuls of attention in one warpgroup: S (64 x 64, f32) = A Btᵀ as in
/// `wgmma_tile_bf16`, then O (64 x `n`) = 0.5 + S V with S fed from registers (each value rounded to
/// bf16 by `pack_a`, then `wgmma_m64nNk16_rs`) and V (64 x `n`, row-major, so MN-major for the product) fetched
/// by the copy engine in `n / 64` tiles of 64 x 64, 4096 elements apart.
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_rs_pv(
    o: &mut CudaSlice<f32>,
    a_map: &TensorMap<bf16>,
    b_map: &TensorMap<bf16>,
    v_map: &TensorMap<bf16>,
    #[comptime] n: u32,
) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    let nw = n as usize;
    // A and Bt (4096 elements each), V's tiles from element 8192, then the mbarrier.
    let bar = (8192 + nw * 64) / 4;
    if t == 0 {
        mbarrier_init(&mut bars[bar], 1);
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[bar], ((8192 + nw * 64) * 2) as u32);
        tma_load_2d(&mut smem[0], a_map, &mut bars[bar], 0, 0);
        tma_load_2d(&mut smem[4096], b_map, &mut bars[bar], 0, 0);
        for c in 0..nw / 64 {
            tma_load_2d(&mut smem[8192 + c * 4096], v_map, &mut bars[bar], (c * 64) as i32, 0);
        }
    }
    mbarrier_wait(&bars[bar], 0);
    let mut s = frag_c::<f32, 8>();
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n64k16(&mut s[0], &smem[ks * 16], &smem[4096 + ks * 16]);
    }
    wgmma_commit();
    wgmma_wait(0);
    // K step kk: columns 16 kk.. of S (fragments 2 kk and 2 kk + 1), rows 16 kk.. of V.
    let mut p = frag_a::<bf16, 4>();
    for kk in 0..4 {
        pack_a(&mut p[kk], &s[2 * kk]);
    }
    // O starts at 0.5, pinned before the fence so the stores stay out of the batch.
    let mut acc = frag_c::<f32, 32>();
    for ni in 0..nw / 8 {
        for e in 0..4 {
            acc[ni][e] = 0.5;
        }
        wgmma_fence_operand(&mut acc[ni]);
    }
    wgmma_fence();
    for kk in 0..4 {
        if n == 256 {
            wgmma_m64n256k16_rs(&mut acc[0], &p[kk], &smem[8192 + kk * 1024], 4096);
        } else if n == 128 {
            wgmma_m64n128k16_rs(&mut acc[0], &p[kk], &smem[8192 + kk * 1024], 4096);
        } else {
            wgmma_m64n64k16_rs(&mut acc[0], &p[kk], &smem[8192 + kk * 1024], 4096);
        }
    }
    wgmma_commit();
    wgmma_wait(0);
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..nw / 8 {
        for j in 0..4 {
            o[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, nw)] = acc[ni][j];
        }
    }
}

/// `wgmma_tile_bf16` with the accumulators starting at 7 and the first K step an `_acc` form:
/// C = 7 + A Btᵀ with `add`, A Btᵀ (the 7 written over) without; `n` is 64, 128, 176 or 256.
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_acc_bf16(
    c: &mut CudaSlice<f32>,
    a_map: &TensorMap<bf16>,
    b_map: &TensorMap<bf16>,
    add: bool,
    #[comptime] n: u32,
) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    let nw = n as usize;
    let bar = (4096 + nw * 64) / 4;
    if t == 0 {
        mbarrier_init(&mut bars[bar], 1);
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[bar], ((4096 + nw * 64) * 2) as u32);
        tma_load_2d(&mut smem[0], a_map, &mut bars[bar], 0, 0);
        tma_load_2d(&mut smem[4096], b_map, &mut bars[bar], 0, 0);
    }
    mbarrier_wait(&bars[bar], 0);
    let mut acc = frag_c::<f32, 32>();
    for ni in 0..nw / 8 {
        for e in 0..4 {
            acc[ni][e] = 7.0;
        }
        wgmma_fence_operand(&mut acc[ni]);
    }
    wgmma_fence();
    for ks in 0..4 {
        let a = ks * 16;
        let b = 4096 + ks * 16;
        if n == 256 && ks == 0 {
            wgmma_m64n256k16_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else if n == 256 {
            wgmma_m64n256k16(&mut acc[0], &smem[a], &smem[b]);
        } else if n == 176 && ks == 0 {
            wgmma_m64n176k16_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else if n == 176 {
            wgmma_m64n176k16(&mut acc[0], &smem[a], &smem[b]);
        } else if n == 128 && ks == 0 {
            wgmma_m64n128k16_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else if n == 128 {
            wgmma_m64n128k16(&mut acc[0], &smem[a], &smem[b]);
        } else if ks == 0 {
            wgmma_m64n64k16_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else {
            wgmma_m64n64k16(&mut acc[0], &smem[a], &smem[b]);
        }
    }
    wgmma_commit();
    wgmma_wait(0);
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..nw / 8 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, nw)] = acc[ni][j];
        }
    }
}
