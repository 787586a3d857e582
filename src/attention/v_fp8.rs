//! FP8 attention's V in the layout its `P V` reads: transposed (FP8 `wgmma` reads both operands
//! K-major), each sequence's keys in tiles of 128 whose order is `pack_a_k32`'s.

use crate::prelude::*;

/// Keys a tile of the transposed V holds: one copy-engine box of 128 bytes a row.
pub const VT_KEYS: usize = 128;

/// V (`[tokens][hkv][d]` e4m3) into `vt` (`[hkv][d][cols]` e4m3): sequence `b`'s keys
/// `k_ranges[3 b]..k_ranges[3 b + 1]` go to the columns from `k_ranges[3 b + 2]` on, in tiles
/// of 128 keys padded with zeros, and within each 16 keys position `4 t + j` holds key
/// `2 t + [0, 1, 8, 9][j]`: the K order `pack_a_k32` gives the attention's P. The grid is
/// (tiles of the longest sequence, `hkv`, batch); a block moves one tile of one head, 64 of `d`
/// at a time through shared memory, so that its reads (64 bytes of a token) and writes (128
/// keys of a row) are whole segments.
#[pgas_kernel(max_threads = 256)]
pub fn attention_v_fp8(
    vt: &mut CudaSlice<e4m3>,
    v: &CudaSlice<e4m3>,
    k_ranges: &CudaSlice<u32>,
    hkv: usize,
    d: usize,
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
    // 64 rows (one an element of the head) of 128 keys, 132 bytes apart: the writes of a warp
    // (32 rows, one key) then fall in different banks.
    let sh = shared_array::<e4m3, 8448>();
    for c in 0..d / 64 {
        for r in 0..32 {
            let i = t + 256 * r;
            let key = i / 64;
            let x = i % 64;
            sh[x * 132 + key] = if k0 + key < k_len {
                v[((k_start + k0 + key) * hkv + kvh) * d + c * 64 + x]
            } else {
                0.0f32 as e4m3
            };
        }
        sync_threads();
        for r in 0..32 {
            let i = t + 256 * r;
            let x = i / 128;
            let pos = i % 128;
            let j = pos % 4;
            let key = pos - pos % 16 + 2 * ((pos % 16) / 4) + j % 2 + 8 * (j / 2);
            vt[(kvh * d + c * 64 + x) * cols + col0 + pos] = sh[x * 132 + key];
        }
        sync_threads();
    }
}
