//! Comptime parameters: baked into the source, one specialization per value.
use pgas::prelude::*;

#[pgas_kernel]
fn tiled_copy(#[comptime] tile: u32, #[comptime] unroll: bool, src: &CudaSlice<f32>, dst: &mut SymTensor<f32>, #[comptime] bias: i64) {
    let buf = shared_array::<f32, tile>();
    let t = thread_idx_x();
    if t < tile {
        let i = block_idx_x() as usize * tile as usize + t as usize;
        assert!(i < src.len(), "tile index past the end of src");
        buf[t as usize] = src[i];
        sync_threads();
        if unroll {
            dst[i] = buf[(tile - 1 - t) as usize] + bias as f32;
        } else {
            assert!(t < tile);
            dst[i] = buf[t as usize];
        }
    }
}

#[pgas_kernel]
fn repeat_put(#[comptime] times: usize, dst: &mut SymTensor<i32>, src: &SymTensor<i32>) {
    let next = (my_pe() + 1) % n_pes();
    for _ in 0..times {
        put_nbi(dst, src, next);
    }
    quiet();
}
