//! The reduction kernel: an owner adds its part of a chunk and the peers' staged parts.

use crate::prelude::*;

/// Threads per block of the reduction kernel.
pub(super) const THREADS: u32 = 512;

/// The sum of this PE's part and the `slots` staged parts of rows `[base, base + len)` (element
/// offsets into an M/P x N matrix), 8 elements a thread step, into `out`. `own` is the local
/// M x N partial product; this PE's rows start at `own0`. Staged part `s` starts at `s * part`.
/// `len` is a multiple of 8 and every offset 16-byte aligned (N is a multiple of 8).
#[pgas_kernel(max_threads = 512)]
#[allow(clippy::too_many_arguments)]
pub fn add_parts(
    out: &mut CudaSlice<bf16>, own: &CudaSlice<bf16>, staging: &SymTensor<bf16>, own0: usize,
    base: usize, len: usize, part: usize, slots: usize,
) {
    let stride = (grid_dim_x() * block_dim_x()) as usize * 8;
    let mut i = base + global_thread_idx() * 8;
    while i < base + len {
        let x = load_vec16(&own[own0 + i]);
        let mut a0 = vec16_get(x, 0) as f32;
        let mut a1 = vec16_get(x, 1) as f32;
        let mut a2 = vec16_get(x, 2) as f32;
        let mut a3 = vec16_get(x, 3) as f32;
        let mut a4 = vec16_get(x, 4) as f32;
        let mut a5 = vec16_get(x, 5) as f32;
        let mut a6 = vec16_get(x, 6) as f32;
        let mut a7 = vec16_get(x, 7) as f32;
        for s in 0..slots {
            let y = load_vec16(&staging[s * part + i]);
            a0 += vec16_get(y, 0) as f32;
            a1 += vec16_get(y, 1) as f32;
            a2 += vec16_get(y, 2) as f32;
            a3 += vec16_get(y, 3) as f32;
            a4 += vec16_get(y, 4) as f32;
            a5 += vec16_get(y, 5) as f32;
            a6 += vec16_get(y, 6) as f32;
            a7 += vec16_get(y, 7) as f32;
        }
        let mut v = x;
        v = vec16_set(v, 0, a0 as bf16);
        v = vec16_set(v, 1, a1 as bf16);
        v = vec16_set(v, 2, a2 as bf16);
        v = vec16_set(v, 3, a3 as bf16);
        v = vec16_set(v, 4, a4 as bf16);
        v = vec16_set(v, 5, a5 as bf16);
        v = vec16_set(v, 6, a6 as bf16);
        v = vec16_set(v, 7, a7 as bf16);
        store_vec16(&mut out[i], v);
        i += stride;
    }
}
