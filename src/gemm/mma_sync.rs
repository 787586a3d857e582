//! The from-scratch teaching GEMM: a bf16 GEMM on the tensor cores written in pgas, `C = A B`
//! with `A` (M x K), `B` (K x N) and `C` (M x N) row-major `bf16`, accumulated in `f32`. It is
//! the sm_80-portable recipe (Ampere and Hopper alike; no `wgmma`), meant to be read top to
//! bottom; programs call [`crate::gemm`]'s Hopper GEMM instead. The recipe (block and warp
//! tiles, the `cp.async` ring, swizzled `ldmatrix` loads, double-buffered fragments) is in
//! `docs/gemm.md`, "The teaching GEMM". Shapes that do not divide into tiles are refused on the
//! host, before any launch ([`shape_error`]). `examples/gemm_bf16.rs` checks it against the
//! host; `benches/gemm.rs` times it against cuBLAS and the Hopper GEMM.

use super::shape::{refuse, size_error, tile_error};
use crate::prelude::*;
use crate::Result;

/// Rows of `C` per block.
pub const BM: usize = 128;
/// Columns of `C` per block of the wide tile (128 for skinny M: [`tile_n`]).
pub const BN: usize = 256;
/// The K step: columns of `A` (rows of `B`) per shared-memory stage.
pub const BK: usize = 64;
/// Shared-memory tiles in flight (a comptime parameter: each value is its own specialization).
/// Three 48 KiB stages fit every sm_80+ GPU (A100 gives a block 163 KiB; Hopper 227 KiB).
pub const STAGES: u32 = 3;

/// `C = A B` (row-major bf16, f32 accumulators): one 128 x `bn` tile of `C` a block, `stages`
/// shared-memory stages (see the module documentation). Launched by [`gemm`] and [`gemm_tiled`],
/// which check the shape first.
///
/// One function of about 190 lines on purpose: the teaching kernel reads top to bottom
/// (prologue, the ring's main loop, epilogue), and each part is commented where it happens.
#[pgas_kernel(max_threads = 256)]
pub fn gemm_bf16(
    c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>, b: &CudaSlice<bf16>, m: usize, n: usize,
    k: usize, #[comptime] stages: u32, #[comptime] bn: u32,
) {
    // The tile is 128 x w with 2 x (w / 64) warps of 64 x 64, so a block has w threads. Stage s
    // holds A's 128 x 64 tile at s * stage and B's 64 x w tile 8192 elements later.
    let smem = dyn_shared::<bf16>();
    let s = stages as usize;
    let w = bn as usize;
    let stage = 8192 + 64 * w;

    // Which tile of C: blocks go down 8 tile rows before moving right, so the blocks running
    // together share rows of A and columns of B in L2.
    let tiles_m = m / 128;
    let tiles_n = n / w;
    let pid = block_idx_x() as usize;
    let group = 8 * tiles_n;
    let first_m = (pid / group) * 8;
    let group_m = min(tiles_m - first_m, 8);
    let row0 = (first_m + (pid % group) % group_m) * 128;
    let col0 = ((pid % group) / group_m) * w;

    let t = thread_idx_x() as usize;
    let lane = lane_id() as usize;
    let warp = warp_id() as usize;
    let wm = (warp / (w / 64)) * 64;
    let wn = (warp % (w / 64)) * 64;
    let ktiles = k / 64;

    // Who copies what, in 16-byte chunks. A's tile is 128 rows of 8 chunks: thread t takes chunk
    // t % 8 of rows t / 8 + i * w / 8. B's is 64 rows of w / 8 chunks: chunk t % (w / 8) of rows
    // t / (w / 8) + 8 i. A chunk's column and swizzle are then the same for every i, so the
    // per-thread part of each address is computed once here and a tile adds uniform offsets:
    // recomputing full 64-bit products in the loop cost as many instructions as the copies.
    let a_row = t / 8;
    let a_src = (row0 + a_row) * k + (t % 8) * 8;
    let a_dst = a_row * 64 + ((t % 8) ^ (a_row % 8)) * 8;
    let b_row = t / (w / 8);
    let b_src = b_row * n + col0 + (t % (w / 8)) * 8;
    let b_dst = 8192 + b_row * w + ((t % (w / 8)) ^ (b_row % 8)) * 8;

    let mut acc = frag_c::<f32, 32>();
    // Two sets of operands: k16 step ks multiplies set ks % 2 while set (ks + 1) % 2 loads.
    let mut fa = frag_a::<bf16, 8>();
    let mut fb = frag_b::<bf16, 16>();

    // Prologue: start copying the first `stages - 1` k-tiles.
    for kt in 0..s - 1 {
        if kt < ktiles {
            let base = kt * stage;
            let k0 = kt * 64;
            copy_tile(a, a_src, a_dst, k, b, b_src, b_dst, n, base, k0, w);
        }
        cp_async_commit();
    }
    // k-tile 0 has landed (at most stages - 2 younger groups in flight) for every thread; its
    // first k16 step's operands go into set 0.
    cp_async_wait(stages - 2);
    sync_threads();
    for mi in 0..4 {
        let r = wm + mi * 16 + lane % 16;
        let ch = lane / 16;
        ldmatrix_x4(&mut fa[mi], &smem[r * 64 + (ch ^ (r % 8)) * 8]);
    }
    for p in 0..4 {
        let kr = lane % 16;
        let ch = (wn + p * 16) / 8 + lane / 16;
        ldmatrix_x4_trans(
            &mut fb[p * 2],
            &mut fb[p * 2 + 1],
            &smem[8192 + kr * w + (ch ^ (kr % 8)) * 8],
        );
    }

    // The ring's stages: k-tile kt is read from stage `rd`, and step 0 of its loop refills
    // stage `wr` (k-tile kt - 1's, free once the barrier of kt - 1 is passed) with k-tile
    // kt + s - 1. Counted here rather than as kt % s: a 64-bit remainder by 3 in every step
    // cost more instructions than the step's address arithmetic.
    let mut rd = 0;
    let mut wr = s - 1;
    for kt in 0..ktiles {
        let nx = if rd + 1 == s { 0 } else { rd + 1 };
        for ks in 0..4 {
            if ks == 3 {
                // k-tile kt + 1 has landed, and after the barrier every thread is done with
                // k-tile kt - 1 (its last operands were loaded in step 2) and sees every
                // thread's copies of kt + 1. Only step 3's mma.sync still reads tile kt, from
                // registers.
                cp_async_wait(stages - 2);
                sync_threads();
            }
            // The next k16 step's operands into the other set: step ks + 1 of this tile, or
            // step 0 of the next one (there is none after the last tile).
            if ks < 3 || kt + 1 < ktiles {
                let base = if ks < 3 { rd * stage } else { nx * stage };
                let nks = (ks + 1) % 4;
                let set = (ks + 1) % 2;
                // A: four 16 x 16 fragments down the warp's 64 rows; lane l gives row l % 16 and
                // the 8-column half l / 16 of the k-step (chunk nks * 2 + l / 16, swizzled).
                for mi in 0..4 {
                    let r = wm + mi * 16 + lane % 16;
                    let ch = nks * 2 + lane / 16;
                    ldmatrix_x4(
                        &mut fa[set * 4 + mi],
                        &smem[base + r * 64 + (ch ^ (r % 8)) * 8],
                    );
                }
                // B: eight 16 x 8 fragments across the warp's 64 columns, two per ldmatrix.
                for p in 0..4 {
                    let kr = nks * 16 + lane % 16;
                    let ch = (wn + p * 16) / 8 + lane / 16;
                    ldmatrix_x4_trans(
                        &mut fb[set * 8 + p * 2],
                        &mut fb[set * 8 + p * 2 + 1],
                        &smem[base + 8192 + kr * w + (ch ^ (kr % 8)) * 8],
                    );
                }
            }
            if ks == 0 {
                let next = kt + s - 1;
                if next < ktiles {
                    let base = wr * stage;
                    let k0 = next * 64;
                    copy_tile(a, a_src, a_dst, k, b, b_src, b_dst, n, base, k0, w);
                }
                cp_async_commit();
            }
            // Odd rows of fragments run the columns backwards (ni ^ 7), so consecutive
            // mma.syncs share an operand at every turn.
            let set = ks % 2;
            for mi in 0..4 {
                for ni in 0..8 {
                    let nj = ni ^ ((mi % 2) * 7);
                    mma_sync(&mut acc[mi * 8 + nj], &fa[set * 4 + mi], &fb[set * 8 + nj]);
                }
            }
        }
        wr = rd;
        rd = nx;
    }

    // Epilogue: the C tile goes through shared memory (rows of w + 8 so that the lanes' 4-byte
    // writes spread over the banks), then out in 16-byte stores along C's rows.
    cp_async_wait(0);
    sync_threads();
    for mi in 0..4 {
        for ni in 0..8 {
            for j in 0..4 {
                // Lane l holds rows l / 4 and l / 4 + 8, columns 2 * (l % 4) and the next.
                let r = wm + mi * 16 + lane / 4 + (j / 2) * 8;
                let col = wn + ni * 8 + (lane % 4) * 2 + j % 2;
                smem[r * (w + 8) + col] = acc[mi * 8 + ni][j] as bf16;
            }
        }
    }
    sync_threads();
    for i in 0..16 {
        let q = t + i * w;
        let r = q / (w / 8);
        let ch = q % (w / 8);
        let v = load_vec16(&smem[r * (w + 8) + ch * 8]);
        store_vec16(&mut c[idx2(row0 + r, col0 + ch * 8, n)], v);
    }
}

/// Starts the copies of the k-tile at column `k0` of A (row `k0` of B) into the stage at `base`
/// of shared memory: this thread's 16-byte chunks of A's 128 x 64 tile and of B's 64 x `w` one,
/// at the per-thread offsets [`gemm_bf16`] computed once (`a_src`, `a_dst`, `b_src`, `b_dst`).
/// `k` and `n` are A's and B's row lengths.
#[pgas_device]
#[allow(clippy::too_many_arguments)]
fn copy_tile(
    a: &CudaSlice<bf16>, a_src: usize, a_dst: usize, k: usize, b: &CudaSlice<bf16>, b_src: usize,
    b_dst: usize, n: usize, base: usize, k0: usize, w: usize,
) {
    let smem = dyn_shared::<bf16>();
    for i in 0..1024 / w {
        cp_async_16(
            &mut smem[base + a_dst + i * (w / 8) * 64],
            &a[a_src + i * (w / 8) * k + k0],
        );
    }
    for i in 0..8 {
        cp_async_16(
            &mut smem[base + b_dst + i * 8 * w],
            &b[b_src + (k0 + i * 8) * n],
        );
    }
}

/// Threads per block for tile width `bn`: 2 x (bn / 64) warps of 64 x 64.
pub fn threads(bn: usize) -> u32 {
    ((BM / 64) * (bn / 64) * 32) as u32
}

/// Shared memory per block: the stages, or the staged C tile (128 rows of bn + 8) if larger.
pub fn shared_bytes(stages: u32, bn: usize) -> u32 {
    let ring = stages as usize * (BM * BK + BK * bn) * 2;
    ring.max(BM * (bn + 8) * 2) as u32
}

/// The tile width for `m x n`: 256, unless that leaves most of the GPU's `sms` multiprocessors
/// idle (skinny M) or does not divide N: then 128, twice the blocks, each with half the work.
pub fn tile_n(m: usize, n: usize, sms: usize) -> usize {
    if !n.is_multiple_of(BN) || (m / BM) * (n / BN) < sms {
        128
    } else {
        BN
    }
}

/// Why `(m, n, k)` cannot run, if it cannot: the kernel has no edge handling, so every
/// dimension must be a whole number of tiles (of the narrow tile, for N).
pub fn shape_error(m: usize, n: usize, k: usize) -> Option<String> {
    let note = format!(" (N = {BN} where it divides)");
    tile_error("gemm_bf16", (m, n, k), (BM, 128, BK), &note)
}

/// `C = A B` on the pgas stream with the tile width [`tile_n`] picks; `checked` picks the
/// variant. Refuses shapes that do not divide into tiles and buffers of the wrong size, before
/// launching (and the launch refuses a ring larger than the GPU gives a block).
pub fn gemm(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>, b: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize), stages: u32, checked: bool,
) -> Result<()> {
    let sms = pgas.sm_count()?;
    gemm_tiled(
        pgas,
        c,
        a,
        b,
        (m, n, k),
        (stages, tile_n(m, n, sms)),
        checked,
    )
}

/// [`gemm`] with the tile width `bn` (128 or 256) given.
pub fn gemm_tiled(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>, b: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize), (stages, bn): (u32, usize), checked: bool,
) -> Result<()> {
    let refuse = |reason: String| refuse("gemm_bf16", reason);
    if let Some(why) = shape_error(m, n, k) {
        return refuse(why);
    }
    if (bn != 128 && bn != BN) || n % bn != 0 {
        return refuse(format!("tile width {bn}: 128 or {BN}, dividing N = {n}"));
    }
    if stages < 2 {
        return refuse(format!("stages = {stages}: the pipeline needs at least 2"));
    }
    if let Some(why) = size_error((a.len(), b.len(), c.len()), (m, n, k), (k, n)) {
        return refuse(why);
    }
    let blocks = ((m / BM) * (n / bn)) as u32;
    let cfg = LaunchConfig::blocks(blocks, threads(bn)).with_shared_mem(shared_bytes(stages, bn));
    let bn = bn as u32;
    let stream = pgas.stream();
    // SAFETY: unchecked only when the shape is whole tiles of this width and every buffer has
    // exactly its matrix's size (both checked above), so every index the kernel forms is in
    // bounds.
    unsafe {
        gemm_bf16::launch_checked_if_on(pgas, stream, cfg, checked, c, a, b, m, n, k, stages, bn)
    }
}
