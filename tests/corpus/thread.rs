//! Thread indices, synchronization, shared memory, warp shuffles and local atomics.
use pgas::prelude::*;

#[pgas_kernel]
fn indices(out: &mut CudaSlice<u32>) {
    let x = thread_idx_x() + block_idx_x() * block_dim_x();
    let y = thread_idx_y() + block_idx_y() * block_dim_y();
    let z = thread_idx_z() + block_idx_z() * block_dim_z();
    let width = grid_dim_x() * block_dim_x();
    let height = grid_dim_y() * block_dim_y();
    let depth = grid_dim_z();
    let i = global_thread_idx();
    if i < out.len() {
        out[i] = x + y * width + z * width * height + depth + lane_id() + warp_id();
    }
}

/// Block sum through shared memory, then a warp shuffle reduction.
#[pgas_kernel]
fn block_sum(input: &CudaSlice<f32>, out: &mut CudaSlice<f32>) {
    let tile = shared_array::<f32, 256>();
    let t = thread_idx_x() as usize;
    let i = global_thread_idx();
    tile[t] = if i < input.len() { input[i] } else { 0.0 };
    sync_threads();
    let mut stride = 128;
    while stride >= 32 {
        if t < stride {
            tile[t] += tile[t + stride];
        }
        sync_threads();
        stride /= 2;
    }
    if t < 32 {
        let mut v = tile[t];
        v += shfl_down_sync(0xffff_ffff, v, 16);
        v += shfl_down_sync(0xffff_ffff, v, 8);
        v += shfl_xor_sync(0xffff_ffff, v, 4);
        v += shfl_xor_sync(0xffff_ffff, v, 2);
        v += shfl_xor_sync(0xffff_ffff, v, 1);
        sync_warp();
        if t == 0 && any_sync(0xffff_ffff, v > 0.0) {
            atomic_add_local(&mut out[0], v);
        }
    }
    threadfence();
    threadfence_system();
}

/// All local atomics, on global and shared memory.
#[pgas_kernel]
fn local_atomics(counters: &mut CudaSlice<u32>, signed: &mut CudaSlice<i32>, wide: &mut CudaSlice<u64>, f: &mut CudaSlice<f64>) {
    let hist = shared_array::<u32, 32>();
    let lane = lane_id();
    hist[lane as usize] = 0;
    sync_threads();
    let old = atomic_add_local(&mut hist[lane as usize], 1);
    atomic_sub_local(&mut counters[0], 1);
    atomic_min_local(&mut signed[0], -5);
    atomic_max_local(&mut signed[1], old as i32);
    let prev = atomic_exch_local(&mut wide[0], 42);
    let seen = atomic_cas_local(&mut wide[1], prev, 7);
    atomic_add_local(&mut wide[2], seen);
    atomic_add_local(&mut f[0], 0.5);
    sync_threads();
    counters[1 + lane as usize % 4] = hist[lane as usize];
}
