//! FP8 (`e4m3`, `e5m2`): `as` conversions both ways, buffers, by-value parameters, shared
//! memory and 16-byte vectors of them, and the FP8 warpgroup MMA (`wgmma_m64nNk32`, f32
//! accumulate) on 128-byte-swizzled tiles the copy engine fetched (sm_90a).
use pgas::prelude::*;

/// Quantize with a scale and back: `as` between FP8 and `f32`, `f64`, `f16`, `bf16`, integers
/// and the other FP8 type; FP8 buffers (local and symmetric) and an FP8 parameter by value.
#[pgas_kernel]
fn fp8_casts(
    out: &mut CudaSlice<f32>,
    q: &mut CudaSlice<e4m3>,
    r: &mut SymTensor<e5m2>,
    x: &CudaSlice<f32>,
    h: &CudaSlice<f16>,
    b: &CudaSlice<bf16>,
    scale: f32,
    fill: e4m3,
) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < q.len() && i < r.len() {
        q[i] = (x[i] * scale) as e4m3;
        r[i] = h[i] as e5m2;
        let a = q[i];
        let e = r[i];
        let wide = a as f32 + e as f32 + (a as f64) as f32;
        let halves = (a as f16) as f32 + (e as bf16) as f32;
        let others = (b[i] as e4m3) as f32 + ((i as i32) as e5m2) as f32 + (a as e5m2) as f32;
        let ints = (a as i32) as f32 + (e as u8) as f32 + ((1.5f64 as e4m3) as f32);
        out[i] = wide + halves + others + ints + fill as f32 + ((x[i] as f64) as e5m2) as f32;
        if i == 0 {
            q[0] = fill;
        }
    }
}

/// FP8 through shared memory: `dyn_shared::<e4m3>()` filled by `cp.async` (16 FP8 a copy),
/// a `shared_array` of `e5m2`, and 16-byte vectors read and written lane by lane.
#[pgas_kernel(max_threads = 128)]
fn fp8_shared(dst: &mut CudaSlice<e5m2>, src: &CudaSlice<e4m3>) {
    let s = dyn_shared::<e4m3>();
    let t = thread_idx_x() as usize;
    cp_async_16(&mut s[t * 16], &src[t * 16]);
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();
    let st = shared_array::<e5m2, 2048>();
    let v = load_vec16(&s[t * 16]);
    let mut w = load_vec16(&st[t * 16]);
    for j in 0..16 {
        let y = vec16_get(v, j as u32) as f32 * 0.5;
        w = vec16_set(w, j as u32, y as e5m2);
    }
    store_vec16(&mut st[t * 16], w);
    sync_threads();
    store_vec16(&mut dst[t * 16], load_vec16(&st[t * 16]));
}

/// One warpgroup, `e4m3`, N = 64: C (64 x 64, f32) = A (64 x 128) Btᵀ with Bt (64 x 128)
/// stored `[n][k]`, both tiles of 128 bytes a row fetched by the copy engine onto one mbarrier,
/// four K steps of 32.
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_tile_e4m3(c: &mut CudaSlice<f32>, a_map: &TensorMap<e4m3>, b_map: &TensorMap<e4m3>) {
    let smem = dyn_shared::<e4m3>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    // Two 8 KiB tiles, then the mbarrier (u64 element 2048).
    if t == 0 {
        mbarrier_init(&mut bars[2048], 1);
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[2048], 16384);
        tma_load_2d(&mut smem[0], a_map, &mut bars[2048], 0, 0);
        tma_load_2d(&mut smem[8192], b_map, &mut bars[2048], 0, 0);
    }
    mbarrier_wait(&bars[2048], 0);
    let mut acc = frag_c::<f32, 8>();
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n64k32(&mut acc[0], &smem[ks * 32], &smem[8192 + ks * 32]);
    }
    wgmma_commit();
    wgmma_wait(0);
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..8 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 64)] = acc[ni][j];
        }
    }
}

/// One warpgroup, `e5m2`, N = 128, K in `ktiles` tiles of 128 through one slot (the mbarrier's
/// parity alternates); the result is stored as `bf16`.
#[pgas_kernel(max_threads = 128)]
fn wgmma_ktiles_e5m2(
    c: &mut CudaSlice<bf16>,
    a_map: &TensorMap<e5m2>,
    b_map: &TensorMap<e5m2>,
    #[comptime] ktiles: u32,
) {
    let smem = dyn_shared::<e5m2>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    // A's 64 x 128 tile (8 KiB), Bt's 128 x 128 (16 KiB), then the mbarrier (u64 element 3072).
    if t == 0 {
        mbarrier_init(&mut bars[3072], 1);
    }
    sync_threads();
    let mut acc = frag_c::<f32, 16>();
    for kt in 0..ktiles as usize {
        if t == 0 {
            mbarrier_arrive_expect_tx(&mut bars[3072], 24576);
            tma_load_2d(&mut smem[0], a_map, &mut bars[3072], (kt * 128) as i32, 0);
            tma_load_2d(&mut smem[8192], b_map, &mut bars[3072], (kt * 128) as i32, 0);
        }
        mbarrier_wait(&bars[3072], (kt % 2) as u32);
        wgmma_fence();
        for ks in 0..4 {
            wgmma_m64n128k32(&mut acc[0], &smem[ks * 32], &smem[8192 + ks * 32]);
        }
        wgmma_commit();
        wgmma_wait(0);
        sync_threads();
    }
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..16 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 128)] = acc[ni][j] as bf16;
        }
    }
}

/// One warpgroup, N = 256, `e4m3` or `e5m2` by the tensor maps' type: here `e4m3`, with the
/// tile stored back quantized to `e4m3` after a scale.
#[pgas_kernel(max_threads = 128)]
fn wgmma_n256_e4m3(c: &mut CudaSlice<e4m3>, a_map: &TensorMap<e4m3>, b_map: &TensorMap<e4m3>, scale: f32) {
    let smem = dyn_shared::<e4m3>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    // A: 8192 elements, Bt: 32768, then the mbarrier (u64 element 5120).
    if t == 0 {
        mbarrier_init(&mut bars[5120], 1);
        mbarrier_arrive_expect_tx(&mut bars[5120], 40960);
        tma_load_2d(&mut smem[0], a_map, &mut bars[5120], 0, 0);
        tma_load_2d(&mut smem[8192], b_map, &mut bars[5120], 0, 0);
    }
    sync_threads();
    mbarrier_wait(&bars[5120], 0);
    let mut acc = frag_c::<f32, 32>();
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n256k32(&mut acc[0], &smem[ks * 32], &smem[8192 + ks * 32]);
    }
    wgmma_commit();
    wgmma_wait(0);
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..32 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 256)] = (acc[ni][j] * scale) as e4m3;
        }
    }
}

/// `wgmma_tile_e4m3`, then O (64 x `n`) = 0.5 + S V with S fed from registers (each value
/// rounded to e4m3 by `pack_a_k32`, then `wgmma_m64nNk32_rs`, two K steps of 32) and V stored
/// transposed (`n` rows of 128 bytes, keys 0..64 used) with its keys in `pack_a_k32`'s order.
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_rs_pv_e4m3(
    o: &mut CudaSlice<f32>,
    a_map: &TensorMap<e4m3>,
    b_map: &TensorMap<e4m3>,
    vt_map: &TensorMap<e4m3>,
    #[comptime] n: u32,
) {
    let smem = dyn_shared::<e4m3>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    let nw = n as usize;
    // A and Bt (8 KiB each), Vt's tile from byte 16384, then the mbarrier.
    let bar = (16384 + nw * 128) / 8;
    if t == 0 {
        mbarrier_init(&mut bars[bar], 1);
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[bar], (16384 + nw * 128) as u32);
        tma_load_2d(&mut smem[0], a_map, &mut bars[bar], 0, 0);
        tma_load_2d(&mut smem[8192], b_map, &mut bars[bar], 0, 0);
        tma_load_2d(&mut smem[16384], vt_map, &mut bars[bar], 0, 0);
    }
    mbarrier_wait(&bars[bar], 0);
    let mut s = frag_c::<f32, 8>();
    wgmma_fence();
    for ks in 0..4 {
        wgmma_m64n64k32(&mut s[0], &smem[ks * 32], &smem[8192 + ks * 32]);
    }
    wgmma_commit();
    wgmma_wait(0);
    // K step kk: columns 32 kk.. of S (fragments 4 kk..4 kk + 4), Vt's keys 32 kk...
    let mut p = frag_a::<e4m3, 2>();
    for kk in 0..2 {
        pack_a_k32(&mut p[kk], &s[4 * kk]);
    }
    let mut acc = frag_c::<f32, 32>();
    for ni in 0..nw / 8 {
        for e in 0..4 {
            acc[ni][e] = 0.5;
        }
        wgmma_fence_operand(&mut acc[ni]);
    }
    wgmma_fence();
    for kk in 0..2 {
        if n == 256 {
            wgmma_m64n256k32_rs(&mut acc[0], &p[kk], &smem[16384 + kk * 32]);
        } else if n == 128 {
            wgmma_m64n128k32_rs(&mut acc[0], &p[kk], &smem[16384 + kk * 32]);
        } else {
            wgmma_m64n64k32_rs(&mut acc[0], &p[kk], &smem[16384 + kk * 32]);
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

/// `wgmma_tile_e4m3` with N = `n` (64, 128 or 256), the accumulators starting at 7 and the first
/// K step an `_acc` form: C = 7 + A Btᵀ with `add`, A Btᵀ without.
#[pgas_kernel(max_threads = 128)]
pub fn wgmma_acc_e4m3(
    c: &mut CudaSlice<f32>,
    a_map: &TensorMap<e4m3>,
    b_map: &TensorMap<e4m3>,
    add: bool,
    #[comptime] n: u32,
) {
    let smem = dyn_shared::<e4m3>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    let nw = n as usize;
    // A's 8 KiB tile, Bt's (n rows of 128 bytes), then the mbarrier.
    let bar = (8192 + nw * 128) / 8;
    if t == 0 {
        mbarrier_init(&mut bars[bar], 1);
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[bar], (8192 + nw * 128) as u32);
        tma_load_2d(&mut smem[0], a_map, &mut bars[bar], 0, 0);
        tma_load_2d(&mut smem[8192], b_map, &mut bars[bar], 0, 0);
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
        let a = ks * 32;
        let b = 8192 + ks * 32;
        if n == 256 && ks == 0 {
            wgmma_m64n256k32_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else if n == 256 {
            wgmma_m64n256k32(&mut acc[0], &smem[a], &smem[b]);
        } else if n == 128 && ks == 0 {
            wgmma_m64n128k32_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else if n == 128 {
            wgmma_m64n128k32(&mut acc[0], &smem[a], &smem[b]);
        } else if ks == 0 {
            wgmma_m64n64k32_acc(&mut acc[0], &smem[a], &smem[b], add);
        } else {
            wgmma_m64n64k32(&mut acc[0], &smem[a], &smem[b]);
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
