//! Tiles and tensor cores: dynamic shared memory, `cp.async`, 16-byte vectors, 2-D indices,
//! fragments, `ldmatrix` and `mma.sync` m16n8k16.
use pgas::prelude::*;

/// One warp multiplies a 16 x 16 `bf16` tile of A by a 16 x 8 tile of B (both row-major) into
/// an `f32` 16 x 8 tile of C: staged through shared memory, loaded with `ldmatrix`.
#[pgas_kernel]
pub fn mma_tile_bf16(c: &mut CudaSlice<f32>, a: &CudaSlice<bf16>, b: &CudaSlice<bf16>) {
    let sa = shared_array::<bf16, 256>();
    let sb = shared_array::<bf16, 128>();
    let lane = lane_id() as usize;
    // 32 lanes x 16 bytes = 256 bf16 of A; the first 16 lanes also copy B.
    cp_async_16(&mut sa[lane * 8], &a[lane * 8]);
    if lane < 16 {
        cp_async_16(&mut sb[lane * 8], &b[lane * 8]);
    }
    cp_async_commit();
    cp_async_wait(0);
    sync_warp();
    let mut fa = frag_a::<bf16, 1>();
    let mut fb = frag_b::<bf16, 1>();
    let mut acc = frag_c::<f32, 1>();
    ldmatrix_x4(&mut fa[0], &sa[idx2(lane % 16, (lane / 16) * 8, 16)]);
    ldmatrix_x2_trans(&mut fb[0], &sb[idx2(lane % 16, 0, 8)]);
    mma_sync(&mut acc[0], &fa[0], &fb[0]);
    let row = lane / 4;
    let col = (lane % 4) * 2;
    for j in 0..4 {
        let r = row + (j / 2) * 8;
        c[idx2(r, col + j % 2, 8)] = acc[0][j];
    }
}

/// The same product in `f16` with B stored `[n][k]` (`ldmatrix_x2`), and two k-steps of a
/// 16 x 32 A against a 32 x 16 B stored `[k][n]` (`ldmatrix_x4_trans`): unrolled fragment loops.
#[pgas_kernel]
fn mma_steps_f16(c: &mut CudaSlice<f32>, a: &CudaSlice<f16>, bt: &CudaSlice<f16>, b: &CudaSlice<f16>, #[comptime] steps: u32) {
    let sa = shared_array::<f16, 512>();
    let sbt = shared_array::<f16, 128>();
    let sb = shared_array::<f16, 512>();
    let lane = lane_id() as usize;
    for q in 0..2 {
        let at = (q * 32 + lane) * 8;
        cp_async_16(&mut sa[at], &a[at]);
        cp_async_16(&mut sb[at], &b[at]);
    }
    if lane < 16 {
        cp_async_16(&mut sbt[lane * 8], &bt[lane * 8]);
    }
    cp_async_commit();
    cp_async_wait(steps - 2);
    sync_warp();
    let mut fa = frag_a::<f16, 2>();
    let mut fb = frag_b::<f16, 4>();
    let mut acc = frag_c::<f32, 3>();
    for ks in 0..2 {
        let ka = ks * 16;
        ldmatrix_x4(&mut fa[ks], &sa[idx2(lane % 16, ka + (lane / 16) * 8, 32)]);
        ldmatrix_x4_trans(&mut fb[ks * 2], &mut fb[ks * 2 + 1], &sb[idx2(ka + lane % 16, (lane / 16) * 8, 16)]);
    }
    for ks in 0..2 {
        for n in 0..2 {
            mma_sync(&mut acc[n], &fa[ks], &fb[ks * 2 + n]);
        }
    }
    let mut fbt = frag_b::<f16, 1>();
    ldmatrix_x2(&mut fbt[0], &sbt[idx2(lane % 8, ((lane / 8) % 2) * 8, 16)]);
    mma_sync(&mut acc[2], &fa[0], &fbt[0]);
    for n in 0..3 {
        for j in 0..4 {
            c[(n * 4 + j) * 32 + lane] = acc[n][j];
        }
    }
}

/// A tile fetched from a peer (or from local memory) into dynamic shared memory with
/// `cp.async`, then copied out 16 bytes at a time.
#[pgas_kernel]
fn async_tile_copy(dst: &mut CudaSlice<bf16>, src: &SymTensor<bf16>, local: &CudaSlice<bf16>, pe: i32, cols: usize, #[comptime] stages: u32) {
    let smem = dyn_shared::<bf16>();
    let t = thread_idx_x() as usize;
    let chunks = smem.len() / 8;
    let mut k = t;
    while k < chunks {
        let r = k / (cols / 8);
        let c8 = k % (cols / 8);
        if src.has_peer(pe) {
            let remote = src.peer(pe);
            cp_async_16(&mut smem[k * 8], &remote[idx2(r, c8 * 8, cols)]);
        } else {
            cp_async_16(&mut smem[k * 8], &local[idx2(r, c8 * 8, cols)]);
        }
        k += block_dim_x() as usize;
    }
    cp_async_commit();
    cp_async_wait(stages - 1);
    sync_threads();
    let mut k = t;
    while k < chunks {
        let mut v = load_vec16(&smem[k * 8]);
        v = load_vec16(&smem[k * 8]);
        store_vec16(&mut dst[k * 8], v);
        k += block_dim_x() as usize;
    }
}

/// Element-wise sum of two `f16` buffers 16 bytes at a time, in `f32`, through the lanes of
/// the vectors (`vec16_get` / `vec16_set`), with a peer's buffer as one operand.
#[pgas_kernel]
fn vec16_lane_sum(dst: &mut SymTensor<f16>, a: &SymTensor<f16>, pe: i32) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize * 8;
    if i + 8 <= dst.len() {
        let mut x = load_vec16(&a[i]);
        let y = load_vec16(&a.peer(pe)[i]);
        for j in 0..8 {
            let s = vec16_get(x, j) as f32 + vec16_get(y, j) as f32;
            x = vec16_set(x, j, s as f16);
        }
        store_vec16(&mut dst[i], x);
    }
}
