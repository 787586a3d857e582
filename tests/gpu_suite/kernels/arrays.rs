//! Local (register) arrays: the repeat form `[v; n]` with a literal or `#[comptime]` length,
//! the list form `[x, y, z]`, every scalar element type and 16-byte vectors, reads, writes and
//! every compound assignment at constant and runtime indices, `acc.len()`, and the unrolled
//! loops that keep them in registers.
use pgas::prelude::*;

/// Each thread sums 8 columns of a row-major `rows x 8` matrix `x` into a local array of 8
/// accumulators, then writes them scaled by a list-form array of weights: `out[c] =
/// w[c % 4] * sum of x[r][c]` over its rows `r = t, t + threads, ...`, 8 values per thread.
#[pgas_kernel]
pub fn array_column_sums(out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, rows: usize) {
    let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let threads = (grid_dim_x() * block_dim_x()) as usize;
    let mut acc = [0.0f32; 8];
    let w = [1.0f32, 0.5, 2.0, -1.0];
    let mut r = t;
    while r < rows {
        for j in 0..acc.len() {
            acc[j] += x[r * 8 + j];
        }
        r += threads;
    }
    for j in 0..8 {
        out[t * 8 + j] = acc[j] * w[j % 4];
    }
}

/// Every scalar element type and every compound assignment on elements; the results go out as
/// `u64` bit patterns (one row of 16 words per thread), which the host computes the same way.
#[pgas_kernel]
pub fn array_types(out: &mut CudaSlice<u64>, seed: u32) {
    let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let s = seed + t as u32;
    let mut a8 = [0u8; 4];
    let mut i16s = [-3i16, 7];
    let mut i32s = [s as i32; 3];
    let mut u32s = [s; 4];
    let mut i64s = [-(s as i64), 1, 2];
    let mut u64s = [1u64 << 40; 2];
    let mut us = [t; 2];
    let mut is = [t as isize - 5; 2];
    let mut f64s = [0.25f64; 4];
    let mut f16s = [1.5f32 as f16; 2];
    let mut b16s = [2.0f32 as bf16, 3.0f32 as bf16];
    let mut bools = [false; 3];
    let q = [0.75f32 as e4m3, -2.0f32 as e4m3];
    for j in 0..4 {
        a8[j] = (s as u8) * (j as u8) + 250;
        u32s[j] ^= j as u32;
        u32s[j] <<= 1;
        u32s[j] |= 1;
        f64s[j] *= j as f64;
    }
    i16s[1] -= i16s[0] * 2;
    i32s[0] += 11;
    i32s[1] *= -3;
    i32s[2] /= 2;
    i32s[2] %= 5;
    i64s[1] &= i64s[0];
    i64s[2] >>= 1;
    u64s[1] += 3;
    us[1] = us[0] * 3 + 1;
    is[0] -= 1;
    f64s[3] %= 0.5;
    f16s[1] = f16s[0] * f16s[1];
    b16s[0] += b16s[1];
    bools[1] = s % 2 == 0;
    bools[2] = !bools[1];
    let row = t * 16;
    out[row] = (a8[0] as u64) | (a8[1] as u64) << 8 | (a8[2] as u64) << 16 | (a8[3] as u64) << 24;
    out[row + 1] = (i16s[0] as i64 + i16s[1] as i64 * 1000) as u64;
    out[row + 2] = (i32s[0] as i64 + i32s[1] as i64 * 100000 + i32s[2] as i64) as u64;
    out[row + 3] = (u32s[0] as u64) ^ (u32s[1] as u64) << 8 ^ (u32s[2] as u64) << 16 ^ (u32s[3] as u64) << 24;
    out[row + 4] = i64s[0] as u64;
    out[row + 5] = i64s[1] as u64 ^ (i64s[2] as u64) << 32;
    out[row + 6] = u64s[0] + u64s[1];
    out[row + 7] = (us[0] + us[1]) as u64;
    out[row + 8] = (is[0] + is[1]) as u64;
    out[row + 9] = (f64s[1] + f64s[2] + f64s[3]) as u64;
    out[row + 10] = (f16s[1] as f32 * 4.0) as u64;
    out[row + 11] = (b16s[0] as f32) as u64;
    out[row + 12] = bools[0] as u64 | (bools[1] as u64) << 1 | (bools[2] as u64) << 2;
    out[row + 13] = ((q[0] as f32 + q[1] as f32) * 4.0 + 100.0) as u64;
    out[row + 14] = f64s.len() as u64 + bools.len() as u64;
    out[row + 15] = 0;
}

/// A `#[comptime]` length (`[v; n]`, one specialization per `n`), filled by a value read once,
/// and runtime indices: `out[i] = x[i] * (1 + i % n)`, through a table `k[j] = j + 1` and a
/// rotation of it by a runtime offset.
#[pgas_kernel]
pub fn array_comptime_len(out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, #[comptime] n: usize) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let mut k = [x[0] * 0.0; n];
    for j in 0..n {
        k[j] += (j + 1) as f32;
    }
    if i < out.len() && i < x.len() {
        let rot = i % k.len();
        out[i] = x[i] * k[rot];
    }
}

/// Arrays of 16-byte vectors: each thread loads two `Vec16<bf16>` (16 values) into a list-form
/// array, doubles every lane in unrolled loops (`v[i] = vec16_set(v[i], j, ..)`), and stores
/// them back in swapped order: `out[t * 16 + 8 * (1 - i) + j] = 2 * x[t * 16 + 8 * i + j]`.
#[pgas_kernel]
pub fn array_vec16(out: &mut CudaSlice<bf16>, x: &CudaSlice<bf16>) {
    let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let mut v = [load_vec16(&x[t * 16]), load_vec16(&x[t * 16 + 8])];
    for i in 0..2 {
        for j in 0..8 {
            let y = vec16_get(v[i], j as u32) as f32 * 2.0;
            v[i] = vec16_set(v[i], j as u32, y as bf16);
        }
    }
    let mut w = [v[1]; 2];
    w[1] = v[0];
    for i in 0..w.len() {
        store_vec16(&mut out[t * 16 + 8 * i], w[i]);
    }
}

/// A loop of runtime bounds whose counter indexes a local array: `#pragma unroll` has no trip
/// count to unroll by, so the array may live in local memory; correct either way (compiled
/// by the snapshot and NVRTC tests only).
#[pgas_kernel]
fn array_runtime_loop(out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, m: usize) {
    let mut acc = [0f32; 4];
    for j in 0..m {
        acc[j % 4] += x[j];
    }
    out[0] = acc[0] + acc[1] + acc[2] + acc[3];
}
