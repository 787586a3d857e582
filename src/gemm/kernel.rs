//! The Hopper bf16 GEMM kernel: `C = A Btᵀ`, warp-specialized, persistent, in thread-block
//! clusters that share B through multicast copies, with a copy-engine epilogue. `docs/gemm.md` walks through it.

use crate::prelude::*;

/// Rows of C per block, the K step, and the threads of a block (a feeding warpgroup and two
/// multiplying ones).
pub const BM: usize = 128;
/// Elements of K per ring slot.
pub const BK: usize = 64;
/// Threads per block.
pub const THREADS: u32 = 384;

/// `C = A Btᵀ` for `A` (m x k), `Bt` (n x k), `C` (m x n), all row-major `bf16`, f32 accumulate.
///
/// Each block owns 128 x `bn` tiles of C in turn (a persistent grid of `cluster`-block
/// clusters; the clusters take cluster tiles `cluster_id_x()`, then every `cluster_count_x()`th
/// one). The blocks of a cluster own vertically adjacent tiles, so they need the same `bn` rows
/// of Bt: each block copies `bn / cluster` of them, multicast to every block of the cluster.
/// Warpgroup 0 feeds a ring of `stages` slots (A's 128 x 64 tile, then Bt's `bn` x 64), with its
/// registers lowered to 40; warpgroups 1 and 2 (232 registers each) multiply 64 rows each with
/// `wgmma` and free each slot in every block of the cluster once their batch on it is done.
/// Their epilogue rounds the accumulators to bf16 into 64 x 64 swizzled tiles of shared memory
/// (`stmatrix_x4`, two buffers a warpgroup) that the copy engine stores into C (`c_map`, tiles
/// of 64 x 64 with a 128-byte swizzle).
///
/// With `gather`, A's rows come in chunks of `mp` rows, one a PE: chunk `me` is `a_map`'s (this
/// PE's shard, from row 0), the others `g_map`'s (the gathered buffer, at their place). Each
/// chunk lands in `pieces` pieces of K columns (`k / pieces` each, whole 64-column steps): piece
/// `i` of chunk `q` is in place once `landed[i * P + q]` (P = `m / mp` PEs) reaches `epoch`,
/// which PE `q`'s copy stream writes after it pushed the piece. A tile of chunk `q` waits for
/// each piece's word before its first K step in that piece, so it starts as soon as the first
/// piece landed. Tiles start with this PE's chunk, then `me + 1`'s: the all-gather of a
/// tensor-parallel linear layer overlapped with its GEMM.
///
/// With `scatter`, C's rows are chunks of `mp` rows, taken in order from chunk `me` (wrapping
/// round): once a multiplying warpgroup's stores of a tile of chunk `q` are complete, it adds 1
/// to `landed[q]`, so a chunk is whole once its word has grown by `2 x (mp / 128) x (n / bn)`.
/// A copy stream waiting on that word moves the chunk to its owner while the kernel computes
/// the next ones: the GEMM + reduce-scatter of a row-parallel layer in one kernel. Without
/// `gather` or `scatter`, `g_map`, `landed`, `epoch`, `mp`, `me` and `pieces` are unused
/// (`pieces` is then 1).
///
/// With `fp8`, A and Bt hold `e4m3` (K-major, like the bf16 ones): the maps and `k` count
/// them in pairs (a "bf16" column is two FP8 elements, so a 64-column tile row is 128 FP8
/// values, the same 128 bytes), and the multipliers run `wgmma_m64n{bn}k32` on the same slots.
///
/// With `grouped` (a grouped GEMM, one launch for many experts), Bt is `groups` matrices of
/// n x k one under the other, and 128-row tile `i` of A and C belongs to group `group_of[i]`:
/// its tiles multiply by Bt's rows from `group_of[i] * n`. A negative group marks padding rows,
/// whose tiles are skipped (C's rows there are left as they were). A group past the last reads
/// zeros (the copy engine fills rows outside Bt's map), so no group value faults.
///
/// M need not be whole tiles: the copy engine reads A's rows past M as zeros and does not
/// store C's. With `half` (M of at most 64 rows), the multiplying warpgroup whose rows are all
/// past M idles.
///
/// With `splits` above 1 (split-K, for C's of few tiles: decode-sized M), each tile's K steps
/// are cut in `splits` parts, a work unit each; with `splits` 0 (stream-K), the grid's clusters
/// share all tiles' K steps evenly, each taking one contiguous run of them in tile order, a
/// work unit for each tile the run touches. Either way a unit's epilogue adds its f32 partial sums
/// into `w_map` (an f32 m x n workspace of zeros; tiles of 64 x 32 with a 128-byte
/// swizzle) with the copy engine's atomic add; a second kernel (`gemm_splitk_finish`) rounds
/// the workspace into C. With 1, `w_map` is unused.
// Long on purpose: warp-specialized roles share the smem ring and mbarriers; frag_c cannot be passed.
#[pgas_kernel(max_threads = 384)]
pub fn gemm_bf16_sm90(
    c_map: &mut TensorMap<bf16>, a_map: &TensorMap<bf16>, b_map: &TensorMap<bf16>,
    g_map: &TensorMap<bf16>, w_map: &mut TensorMap<f32>, landed: &mut CudaSlice<u64>,
    group_of: &CudaSlice<i32>, epoch: u64, m: usize, n: usize, k: usize, mp: usize, me: usize,
    pieces: usize, splits: usize, #[comptime] stages: u32, #[comptime] bn: u32,
    #[comptime] cluster: u32, #[comptime] gather: bool, #[comptime] scatter: bool,
    #[comptime] fp8: bool, #[comptime] grouped: bool, #[comptime] half: bool,
) {
    let smem = dyn_shared::<bf16>();
    // The same bytes as FP8 (twice the index of `smem`'s), for the `fp8` operands.
    let smem8 = dyn_shared::<e4m3>();
    // The same bytes as f32 (half the index of `smem`'s), for split-K's epilogue.
    let smemf = dyn_shared::<f32>();
    let bars = dyn_shared::<u64>();
    let s = stages as usize;
    let bw = bn as usize;
    let cl = cluster as usize;
    // Slot st: A's tile at st * slot, Bt's 8192 elements later; then the epilogue's 4 tiles of
    // 64 x 64 (2 a multiplying warpgroup); then `full` and `empty` mbarriers, one of each a
    // slot. All are multiples of 8 KiB from the 1 KiB-aligned base, as the 128-byte swizzle
    // needs.
    let slot = 8192 + bw * 64;
    let staging = s * slot;
    let full0 = (staging + 16384) / 4;
    let empty0 = full0 + s;
    let rank = cluster_ctarank() as usize;
    // A last cluster tile may reach past M (partly or, for the second block of a cluster,
    // wholly): the copy engine reads zeros there and stores nothing.
    let tiles_m = (m + 128 * cl - 1) / (128 * cl);
    let tiles_n = n / bw;
    let tiles = tiles_m * tiles_n;
    // Work units: each tile's K steps in `splits` parts (the host checked that it divides
    // them); unit u is part u / tiles of tile u % tiles. Stream-K (`splits` 0): cluster c takes
    // the K steps [c U / G, (c + 1) U / G) of the U = tiles x ktiles steps, tile after tile, for
    // the grid's G clusters; `unit` is then the next of its steps. Both roles walk the same units.
    let ktiles = k / 64;
    let streamk = splits == 0;
    let clusters = cluster_count_x() as usize;
    let first = cluster_id_x() as usize;
    let steps = tiles * ktiles;
    let units = if streamk {
        (first + 1) * steps / clusters
    } else {
        tiles * splits
    };
    let per_split = if streamk { 0 } else { ktiles / splits };
    let unit0 = if streamk {
        first * steps / clusters
    } else {
        first
    };
    // K steps a piece of a gathered chunk (the host checked that `pieces` divides `ktiles`).
    let per_piece = ktiles / pieces;
    // Cluster-tile rows start at chunk `me` (this PE's when gathering), and the groups of rows
    // that share L2 (`tile_row`) stay inside a chunk, so chunks are taken (and, scattering,
    // finished) one after the other.
    let chunked = gather || scatter;
    let chunk = if chunked { mp / (128 * cl) } else { 8 };
    let shift = if chunked { me * chunk } else { 0 };
    let mut group = 8;
    while chunk % group != 0 {
        group /= 2;
    }
    let t = thread_idx_x() as usize;
    let wg = warpgroup_id() as usize;

    if t == 0 {
        for i in 0..s {
            mbarrier_init(&mut bars[full0 + i], 1);
            // Lane 0 of each multiplying warp of every block of the cluster frees a slot.
            mbarrier_init(&mut bars[empty0 + i], 8 * cluster);
        }
    }
    // Peers copy into and arrive on these mbarriers: all are initialized before anyone starts.
    cluster_sync();

    // Both roles count the ring slots they use, `it`: the feeder fills slot `it % s` for the
    // multipliers' `it`-th K step.
    let mut it = 0;
    if wg == 0 {
        setmaxnreg_dec(40);
        if t == 0 {
            let half = bw / cl;
            let mut unit = unit0;
            while unit < units {
                let tile = unit_tile(unit, tiles, ktiles, streamk);
                let kfirst = unit_kfirst(unit, tiles, ktiles, per_split, streamk);
                let kend = unit_kend(unit, kfirst, units, ktiles, per_split, streamk);
                unit = next_unit(unit, kend - kfirst, clusters, streamk);
                let tm = (tile_row(tile, tiles_m, tiles_n, group) + shift) % tiles_m;
                let row0 = (tm * cl + rank) * 128;
                let col0 = tile_col(tile, tiles_m, tiles_n, group) * bw;
                let g = if grouped { group_of[row0 / 128] } else { 0 };
                if g < 0 {
                    continue;
                }
                let brow = g as usize * n + col0;
                let q = if gather { row0 / mp } else { me };
                for kt in kfirst..kend {
                    if q != me && kt % per_piece == 0 {
                        // The piece of chunk q holding these K steps is in the gathered buffer
                        // once its word holds this call's epoch. PE q's copy stream wrote the
                        // word after the piece (a system-scope fence between them); the fence
                        // here orders this read before the copy engine's reads of the piece.
                        while atomic_add_local(&mut landed[(kt / per_piece) * (m / mp) + q], 0)
                            < epoch
                        {}
                        threadfence_system();
                        fence_proxy_async_global();
                    }
                    let st = it % s;
                    if it >= s {
                        // Every block's multipliers are done with the slot's last tenant.
                        mbarrier_wait(&bars[empty0 + st], ((it / s + 1) % 2) as u32);
                    }
                    mbarrier_arrive_expect_tx(&mut bars[full0 + st], (slot * 2) as u32);
                    let k0 = (kt * 64) as i32;
                    if q == me {
                        tma_load_2d(
                            &mut smem[st * slot],
                            a_map,
                            &mut bars[full0 + st],
                            k0,
                            (if gather { row0 - q * mp } else { row0 }) as i32,
                        );
                    } else {
                        tma_load_2d(
                            &mut smem[st * slot],
                            g_map,
                            &mut bars[full0 + st],
                            k0,
                            row0 as i32,
                        );
                    }
                    if cl == 1 {
                        tma_load_2d(
                            &mut smem[st * slot + 8192],
                            b_map,
                            &mut bars[full0 + st],
                            k0,
                            brow as i32,
                        );
                    } else {
                        tma_load_2d_multicast(
                            &mut smem[st * slot + 8192 + rank * half * 64],
                            b_map,
                            &mut bars[full0 + st],
                            k0,
                            (brow + rank * half) as i32,
                            ((1 << cluster) - 1) as u16,
                        );
                    }
                    it += 1;
                }
            }
        }
    } else {
        setmaxnreg_inc(232);
        let mut acc = frag_c::<f32, 32>();
        // This warpgroup's 64 rows of A's tile.
        let arows = (wg - 1) * 4096;
        let lane = lane_id() as usize;
        let w = (t % 128) / 32;
        let mut unit = unit0;
        while unit < units {
            let tile = unit_tile(unit, tiles, ktiles, streamk);
            let kfirst = unit_kfirst(unit, tiles, ktiles, per_split, streamk);
            let kend = unit_kend(unit, kfirst, units, ktiles, per_split, streamk);
            unit = next_unit(unit, kend - kfirst, clusters, streamk);
            let tm = (tile_row(tile, tiles_m, tiles_n, group) + shift) % tiles_m;
            let row0 = (tm * cl + rank) * 128;
            let col0 = tile_col(tile, tiles_m, tiles_n, group) * bw;
            if grouped && group_of[row0 / 128] < 0 {
                continue;
            }
            // With `half`, a warpgroup whose 64 rows are wholly past M (the second half of a
            // decode-sized M's tile) keeps the ring's protocol, waiting for each slot and
            // freeing it, but multiplies nothing and stores nothing, which leaves the tensor
            // cores and shared memory's bandwidth to the other warpgroup. A specialization,
            // since the branch around the multiplications slows the large GEMMs (docs/gemm.md,
            // "Split-K").
            let idle = half && row0 + (wg - 1) * 64 >= m;
            for ni in 0..bw / 8 {
                for j in 0..4 {
                    acc[ni][j] = 0.0;
                }
            }
            for kt in kfirst..kend {
                let st = it % s;
                mbarrier_wait(&bars[full0 + st], ((it / s) % 2) as u32);
                let base = st * slot;
                if !idle {
                    wgmma_fence();
                    for ks in 0..4 {
                        // `bn` and `fp8` are comptime values: one branch is compiled. A step is
                        // 32 bytes of K: 16 bf16 or 32 FP8 values.
                        let a8 = 2 * (base + arows + ks * 16);
                        let b8 = 2 * (base + 8192 + ks * 16);
                        if fp8 && bn == 256 {
                            wgmma_m64n256k32(&mut acc[0], &smem8[a8], &smem8[b8]);
                        } else if fp8 && bn == 128 {
                            wgmma_m64n128k32(&mut acc[0], &smem8[a8], &smem8[b8]);
                        } else if fp8 {
                            wgmma_m64n64k32(&mut acc[0], &smem8[a8], &smem8[b8]);
                        } else if bn == 256 {
                            wgmma_m64n256k16(
                                &mut acc[0],
                                &smem[base + arows + ks * 16],
                                &smem[base + 8192 + ks * 16],
                            );
                        } else if bn == 128 {
                            wgmma_m64n128k16(
                                &mut acc[0],
                                &smem[base + arows + ks * 16],
                                &smem[base + 8192 + ks * 16],
                            );
                        } else {
                            wgmma_m64n64k16(
                                &mut acc[0],
                                &smem[base + arows + ks * 16],
                                &smem[base + 8192 + ks * 16],
                            );
                        }
                    }
                    wgmma_commit();
                    // The batch before this one is done: its slot can be refilled.
                    wgmma_wait(1);
                }
                if kt > kfirst && lane == 0 {
                    free_slot(empty0 + (it - 1) % s, cluster);
                }
                it += 1;
            }
            wgmma_wait(0);
            if lane == 0 {
                free_slot(empty0 + (it - 1) % s, cluster);
            }
            if !idle && splits != 1 {
                // Split-K's epilogue, 32 columns (128 bytes of f32) at a time: each thread puts
                // its accumulators where the 128-byte swizzle has them (16-byte chunk c of row r
                // at chunk c ^ r % 8), and the copy engine adds the tile into the workspace.
                let quad = lane / 4;
                for ch in 0..bw / 32 {
                    let buf = (staging + (wg - 1) * 8192 + (ch % 2) * 4096) / 2;
                    staging_wait(wg, t);
                    for j in 0..4 {
                        let c = 8 * j + 2 * (lane % 4);
                        for h in 0..2 {
                            let rr = w * 16 + quad + 8 * h;
                            let at = buf + rr * 32 + ((c / 4) ^ (rr % 8)) * 4 + c % 4;
                            smemf[at] = acc[4 * ch + j][2 * h];
                            smemf[at + 1] = acc[4 * ch + j][2 * h + 1];
                        }
                    }
                    staging_done(wg);
                    if t % 128 == 0 {
                        tma_reduce_add_2d(
                            w_map,
                            &smemf[buf],
                            (col0 + ch * 32) as i32,
                            (row0 + (wg - 1) * 64) as i32,
                        );
                        tma_store_commit();
                    }
                }
            } else if !idle {
                // The epilogue, 64 columns at a time: warp w holds rows 16 w.. of the warpgroup's
                // 64; lane l addresses row l % 16, column 8 (l / 16) of each 16 x 16 stmatrix tile,
                // at its place in the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ r % 8).
                let r = w * 16 + lane % 16;
                for ch in 0..bw / 64 {
                    let buf = staging + (wg - 1) * 8192 + (ch % 2) * 4096;
                    staging_wait(wg, t);
                    for jj in 0..4 {
                        let chunk = 2 * jj + lane / 16;
                        stmatrix_x4(
                            &mut smem[buf + r * 64 + (chunk ^ (r % 8)) * 8],
                            &acc[8 * ch + 2 * jj],
                        );
                    }
                    staging_done(wg);
                    if t % 128 == 0 {
                        tma_store_2d(
                            c_map,
                            &smem[buf],
                            (col0 + ch * 64) as i32,
                            (row0 + (wg - 1) * 64) as i32,
                        );
                        tma_store_commit();
                    }
                }
            }
            if scatter && t % 128 == 0 {
                // This warpgroup's 64 rows of the tile are in C: written by the copy engine
                // (the async proxy), made visible to the copy stream that polls the word. Its
                // readers are this GPU's (the stream's wait and its copy engine), so the fence
                // is GPU-wide: a system-wide one was markedly slower at 8192^3 on 4 PEs
                // (`docs/gemm.md`).
                tma_store_wait(0);
                fence_proxy_async_global();
                threadfence();
                atomic_add_local(&mut landed[row0 / mp], 1);
            }
        }
        if t % 128 == 0 {
            // C (or the workspace) is written before the kernel ends.
            tma_store_wait(0);
        }
    }
    // No block leaves while a peer may still copy into its shared memory or arrive on its
    // mbarriers.
    cluster_sync();
}

/// Frees a ring slot, whose `empty` mbarrier is word `at` of the block's shared memory, in every
/// block of the cluster (of `cluster` blocks): each block holds a part of the slot.
#[pgas_device]
fn free_slot(at: usize, cluster: u32) {
    let bars = dyn_shared::<u64>();
    if cluster == 1 {
        mbarrier_arrive(&mut bars[at]);
    } else {
        for r in 0..cluster {
            mbarrier_arrive_cluster(&mut bars[at], r);
        }
    }
}

/// Before warpgroup `wg` (thread `t` of the block) writes its next epilogue staging buffer: the
/// copy engine's store from that buffer two chunks ago has read it (each warpgroup has two).
#[pgas_device]
fn staging_wait(wg: usize, t: usize) {
    if t % 128 == 0 {
        tma_store_wait_read(1);
    }
    sync_named(wg as u32, 128);
}

/// After warpgroup `wg` wrote a staging buffer: its writes are ordered before the copy engine's
/// reads (the async proxy) and done in every thread, so its first thread may store the buffer.
#[pgas_device]
fn staging_done(wg: usize) {
    fence_proxy_async();
    sync_named(wg as u32, 128);
}

/// The cluster tile of work unit `unit`: split-K's unit is part `unit / tiles` of tile
/// `unit % tiles`; stream-K's is K step `unit % ktiles` of tile `unit / ktiles`.
#[pgas_device]
fn unit_tile(unit: usize, tiles: usize, ktiles: usize, streamk: bool) -> usize {
    if streamk {
        unit / ktiles
    } else {
        unit % tiles
    }
}

/// The first K step of work unit `unit` in its tile (see [`unit_tile`]).
#[pgas_device]
fn unit_kfirst(unit: usize, tiles: usize, ktiles: usize, per_split: usize, streamk: bool) -> usize {
    if streamk {
        unit % ktiles
    } else {
        (unit / tiles) * per_split
    }
}

/// The end of unit `unit`'s run of K steps (from `kfirst`): split-K's part is `per_split`
/// steps; a stream-K run goes to its tile's end or to the end of the cluster's steps, `units`.
#[pgas_device]
fn unit_kend(
    unit: usize, kfirst: usize, units: usize, ktiles: usize, per_split: usize, streamk: bool,
) -> usize {
    if streamk {
        min(ktiles, kfirst + units - unit)
    } else {
        kfirst + per_split
    }
}

/// The unit a cluster takes after `unit`, whose run was `steps` K steps: split-K's clusters
/// stride over the units by the grid's `clusters`; a stream-K cluster goes on past its run.
#[pgas_device]
fn next_unit(unit: usize, steps: usize, clusters: usize, streamk: bool) -> usize {
    if streamk {
        unit + steps
    } else {
        unit + clusters
    }
}

/// The cluster-tile row of cluster tile `tile`: tiles go down groups of `group` (at most 8)
/// cluster-tile rows before moving right, so the clusters running together share rows of A and
/// of Bt in L2.
#[pgas_device]
fn tile_row(tile: usize, tiles_m: usize, tiles_n: usize, group: usize) -> usize {
    let rows = if tiles_m >= group { group } else { tiles_m };
    let first = (tile / (rows * tiles_n)) * rows;
    let in_group = min(tiles_m - first, rows);
    first + (tile % (rows * tiles_n)) % in_group
}

/// The cluster-tile column of cluster tile `tile` (see [`tile_row`]).
#[pgas_device]
fn tile_col(tile: usize, tiles_m: usize, tiles_n: usize, group: usize) -> usize {
    let rows = if tiles_m >= group { group } else { tiles_m };
    let first = (tile / (rows * tiles_n)) * rows;
    let in_group = min(tiles_m - first, rows);
    (tile % (rows * tiles_n)) / in_group
}

/// Split-K's last step: `c[i]` = `w[i]` rounded to bf16, for the `len` elements of C (the
/// workspace `gemm_bf16_sm90` added each split's partial sums into), and `w[i]` zeroed for the
/// next call's sums (so the host zeroes nothing before a call).
#[pgas_kernel]
pub fn gemm_splitk_finish(c: &mut CudaSlice<bf16>, w: &mut CudaSlice<f32>, len: usize) {
    let i = global_thread_idx() as usize;
    if i < len {
        c[i] = w[i] as bf16;
        w[i] = 0.0;
    }
}
