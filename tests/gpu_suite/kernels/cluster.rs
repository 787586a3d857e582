//! Thread-block clusters (sm_90a): the cluster queries and barriers, distributed shared memory
//! (`cluster_peer`), arrivals on a peer block's mbarrier, multicast copies
//! (`tma_load_2d_multicast`), register reallocation between warpgroups (`setmaxnreg_*`) and
//! `stmatrix_x4`. Launched with `LaunchConfig::with_cluster((n, 1, 1))`.
use pgas::prelude::*;

/// Distributed shared memory: each block fills its shared array, then reads the next block's
/// through `cluster_peer` and writes into it (`cluster_arrive` / `cluster_wait` with work
/// between them, then `cluster_sync` before reading what the previous block wrote).
#[pgas_kernel]
fn cluster_exchange(out: &mut CudaSlice<u32>) {
    let s = shared_array::<u32, 256>();
    let t = thread_idx_x() as usize;
    let rank = cluster_ctarank();
    let n = cluster_nctarank();
    let block = (cluster_id_x() * n + rank) as usize;
    let blocks = (cluster_count_x() * n) as usize;
    if t < 256 {
        s[t] = rank * 1000 + t as u32;
    }
    cluster_sync();
    let next = s.cluster_peer((rank + 1) % n);
    let mut got = 0;
    if t < 256 {
        got = next[t];
    }
    // Every block's reads of `next` are done before anyone overwrites it.
    cluster_arrive();
    if t < 256 {
        out[block * 256 + t] = got;
    }
    cluster_wait();
    if t < 256 {
        next[t] = got + 1;
    }
    cluster_sync();
    if t < 256 {
        out[(blocks + block) * 256 + t] = s[t];
    }
}

/// Arrivals on another block's mbarrier: thread 0 of every block arrives on the mbarrier of
/// every block of the cluster at its rank or above, so block `r` waits for `r + 1` arrivals.
#[pgas_kernel]
fn cluster_mbarrier_arrivals(out: &mut CudaSlice<u32>) {
    let bars = shared_array::<u64, 1>();
    let t = thread_idx_x();
    let rank = cluster_ctarank();
    let n = cluster_nctarank();
    if t == 0 {
        mbarrier_init(&mut bars[0], rank + 1);
    }
    // Peers arrive on it: initialized in every block before anyone arrives.
    cluster_sync();
    if t == 0 {
        for r in rank..n {
            mbarrier_arrive_cluster(&mut bars[0], r);
        }
    }
    mbarrier_wait(&bars[0], 0);
    if t == 0 {
        out[(cluster_id_x() * n + rank) as usize] = rank + 1;
    }
    // No block leaves while a peer may still arrive on its mbarrier.
    cluster_sync();
}

/// One multicast copy: block 0 of each cluster loads a 64 x 64 tile once, into every block of
/// the cluster; each block's mbarrier expects the tile's bytes.
#[pgas_kernel(max_threads = 128)]
pub fn cluster_multicast_tile(out: &mut CudaSlice<bf16>, map: &TensorMap<bf16>) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    let rank = cluster_ctarank();
    let n = cluster_nctarank();
    // The tile (8 KiB), then the mbarrier (u64 element 1024).
    if t == 0 {
        mbarrier_init(&mut bars[1024], 1);
    }
    cluster_sync();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[1024], 8192);
    }
    // Every block expects the bytes before block 0 starts the copy.
    cluster_sync();
    if t == 0 && rank == 0 {
        let row = (cluster_id_x() * 64) as i32;
        tma_load_2d_multicast(&mut smem[0], map, &mut bars[1024], 0, row, ((1 << n) - 1) as u16);
    }
    mbarrier_wait(&bars[1024], 0);
    let block = (cluster_id_x() * n + rank) as usize;
    for i in 0..32 {
        out[block * 4096 + i * 128 + t] = smem[i * 128 + t];
    }
    cluster_sync();
}

/// Warp specialization with register reallocation: warpgroup 0 gives registers up, 1 and 2
/// take them (40 + 2 x 232 = 3 x 168, the cap at entry of 384 threads).
#[pgas_kernel(max_threads = 384)]
fn cluster_setmaxnreg_roles(out: &mut CudaSlice<f32>, x: &CudaSlice<f32>) {
    let t = thread_idx_x() as usize;
    let wg = t / 128;
    if wg == 0 {
        setmaxnreg_dec(40);
        out[t] = x[t];
    } else {
        setmaxnreg_inc(232);
        let mut acc = 0.0;
        for i in 0..64 {
            acc += x[(t + i) % 384] * (i as f32);
        }
        out[t] = acc;
    }
}

/// `stmatrix_x4`: each warp stores two 16 x 16 tiles of its accumulators (`acc[0..2]` and
/// `acc[2..4]`), lane `l` giving row `l % 16`, column `8 * (l / 16)`, then copies them out.
#[pgas_kernel(max_threads = 128)]
fn cluster_stmatrix_tiles(out: &mut CudaSlice<f16>, x: &CudaSlice<f32>) {
    let smem = dyn_shared::<f16>();
    let t = thread_idx_x() as usize;
    let lane = lane_id() as usize;
    let w = t / 32;
    let mut acc = frag_c::<f32, 4>();
    for i in 0..4 {
        for j in 0..4 {
            acc[i][j] = x[w * 128 + i * 32 + lane + j];
        }
    }
    for h in 0..2 {
        let base = (w * 2 + h) * 256;
        stmatrix_x4(&mut smem[base + (lane % 16) * 16 + 8 * (lane / 16)], &acc[h * 2]);
    }
    sync_warp();
    for i in 0..16 {
        out[w * 512 + i * 32 + lane] = smem[w * 512 + i * 32 + lane];
    }
}

/// TMA stores by one warpgroup of two: after a flag a copy stream sets (polled, then
/// `fence_proxy_async_global`), it fills a 32 x 32 tile, stores it through `out`, adds it
/// through `sum`, and waits for both; the other warpgroup does not take part (`sync_named`).
#[pgas_kernel(max_threads = 256)]
pub fn cluster_tma_store_tiles(
    out: &mut TensorMap<f32>,
    sum: &mut TensorMap<f32>,
    flags: &mut CudaSlice<u64>,
    epoch: u64,
) {
    let smem = dyn_shared::<f32>();
    let t = thread_idx_x() as usize;
    if t < 128 {
        if t == 0 {
            while atomic_add_local(&mut flags[0], 0) < epoch {}
            fence_proxy_async_global();
        }
        for i in 0..8 {
            smem[t * 8 + i] = (t * 8 + i) as f32;
        }
        fence_proxy_async();
        sync_named(1, 128);
        if t == 0 {
            tma_store_2d(out, &smem[0], 0, 0);
            tma_reduce_add_2d(sum, &smem[0], 0, 0);
            tma_store_commit();
            tma_store_wait_read(0);
            tma_store_wait(0);
        }
    }
}

/// Two warpgroups take 8 turns each, in alternation, through two named barriers (256 threads
/// each), as the attention kernel's multiplying warpgroups do: a warpgroup waits on its own
/// (`sync_named`), appends its index (`warpgroup_id`) to a log in shared memory, then lets the
/// other go (`arrive_named` on the other's). Warpgroup 0 arrives on its own barrier first, so it
/// has the first turn. `out` is the log's length (16), then the warpgroups in the order of
/// their turns: 0, 1, 0, 1, ... Without the hand-off both would write at once.
#[pgas_kernel(max_threads = 256)]
pub fn named_turns(out: &mut CudaSlice<u32>) {
    let log = shared_array::<u32, 17>();
    let t = thread_idx_x() as usize;
    let w = warpgroup_id() as usize;
    if t == 0 {
        log[0] = 0;
    }
    sync_threads();
    if w == 0 {
        arrive_named(1, 256);
    }
    for _ in 0..8 {
        sync_named((1 + w) as u32, 256);
        if t % 128 == 0 {
            let n = log[0] as usize;
            log[1 + n] = w as u32;
            log[0] = (n + 1) as u32;
        }
        arrive_named((2 - w) as u32, 256);
    }
    sync_threads();
    if t < 17 {
        out[t] = log[t];
    }
}
