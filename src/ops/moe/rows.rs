//! The row copies the MoE dispatch kernels share: a lane keeps four 16-byte vectors of a row in
//! flight (vectors `v, v + 32, v + 64, v + 96`, a warp's four strides), since a row is a chain
//! of loads and remote stores.

use crate::prelude::*;

/// Vectors `v + 32 u` (u < 4) of the row at element `at` of `src`, into `a[u]`. The callers'
/// array starts as copies of the first vector (`[load_vec16(..); 4]`: an array needs a value),
/// a load the compiler merges with this one's.
#[pgas_device]
pub fn load_four(a: &mut [Vec16<bf16>], src: &CudaSlice<bf16>, at: usize, v: usize) {
    for u in 0..4 {
        a[u] = load_vec16(&src[at + (v + 32 * u) * 8]);
    }
}

/// `a[u]` (u < 4) stored as vectors `v + 32 u` of the row at element `at` of `dst`.
#[pgas_device]
pub fn store_four(dst: &mut CudaSlice<bf16>, at: usize, v: usize, a: &[Vec16<bf16>]) {
    for u in 0..4 {
        store_vec16(&mut dst[at + (v + 32 * u) * 8], a[u]);
    }
}
