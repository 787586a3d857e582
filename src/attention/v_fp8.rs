//! FP8 attention's V in the layout its `P V` reads: transposed (FP8 `wgmma` reads both operands
//! K-major), each sequence's keys in tiles of 128 whose order is `pack_a_k32`'s.

use crate::prelude::*;

/// Keys a tile of the transposed V holds: one copy-engine box of 128 bytes a row.
pub const VT_KEYS: usize = 128;

/// Shared memory [`attention_v_fp8`] takes: 64 rows of 144 bytes (128 keys, 16-byte aligned rows).
pub const VT_SHARED: u32 = 64 * 144;

/// V (`[tokens][hkv][d]` e4m3) into `vt` (`[hkv][d][cols]` e4m3): sequence `b`'s keys
/// `k_ranges[3 b]..k_ranges[3 b + 1]` go to the columns from `k_ranges[3 b + 2]` on, in tiles
/// of 128 keys padded with zeros, and within each 16 keys position `4 t + j` holds key
/// `2 t + [0, 1, 8, 9][j]`: the K order `pack_a_k32` gives the attention's P. The grid is
/// (tiles of the longest sequence, `hkv`, batch) of 256 threads with [`VT_SHARED`] bytes; a
/// block moves one tile of one head, 64 of `d` at a time through shared memory, 16 bytes a
/// thread at a time from V (16 values of a token) and into Vt (16 keys of a row).
#[pgas_kernel(max_threads = 256)]
pub fn attention_v_fp8(
    vt: &mut CudaSlice<e4m3>, v: &CudaSlice<e4m3>, k_ranges: &CudaSlice<u32>, hkv: usize, d: usize,
    cols: usize,
) {
    let b = block_idx_z() as usize;
    let kvh = block_idx_y() as usize;
    let k_start = k_ranges[3 * b] as usize;
    let k_len = k_ranges[3 * b + 1] as usize - k_start;
    let k0 = block_idx_x() as usize * 128;
    if k0 >= k_len {
        return;
    }
    let col0 = k_ranges[3 * b + 2] as usize + k0;
    let t = thread_idx_x() as usize;
    // 64 rows (one an element of the head) of 128 keys, 144 bytes apart.
    let sh = dyn_shared::<e4m3>();
    let zero = 0.0f32 as e4m3;
    for c in 0..d / 64 {
        for r in 0..2 {
            // Token `key` of the tile, its elements x0..x0 + 16; a key past the sequence reads
            // the last one and stores zeros.
            let i = t + 256 * r;
            let key = i / 4;
            let x0 = (i % 4) * 16;
            let tok = k_start + min(k0 + key, k_len - 1);
            let w = load_vec16(&v[(tok * hkv + kvh) * d + c * 64 + x0]);
            let inside = k0 + key < k_len;
            for j in 0..16 {
                sh[(x0 + j) * 144 + key] = if inside { vec16_get(w, j as u32) } else { zero };
            }
        }
        sync_threads();
        for r in 0..2 {
            // Row x, keys 16 blk..16 blk + 16, permuted.
            let i = t + 256 * r;
            let x = i / 8;
            let blk = i % 8;
            let w = load_vec16(&sh[x * 144 + blk * 16]);
            let mut out = w;
            for p in 0..16 {
                let key = 2 * (p / 4) + p % 2 + 8 * ((p % 4) / 2);
                out = vec16_set(out, p as u32, vec16_get(w, key as u32));
            }
            store_vec16(
                &mut vt[(kvh * d + c * 64 + x) * cols + col0 + blk * 16],
                out,
            );
        }
        sync_threads();
    }
}
