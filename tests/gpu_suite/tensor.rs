//! Tiles and tensor cores: `mma.sync` m16n8k16 on bf16 and f16 fed by every `ldmatrix` form,
//! `cp.async` from local and peer memory into dynamic shared memory over 48 KiB, 16-byte vector
//! loads and stores, and a dynamic shared-memory request over the device's limit (an `Err` that
//! names the limit). Inputs are small integers, so every product and sum is exact in f32 and the
//! results compare exactly.

use crate::kernels::tensor::mma_tile_bf16;
use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("tensor/mma_bf16_ldmatrix_x4_x2_trans", mma_bf16_case),
    case("tensor/mma_f16_x4_trans_and_x2", mma_f16_case),
    case(
        "tensor/dyn_shared_100KiB_cp_async_peer_vec16",
        dyn_shared_case,
    ),
    case("tensor/dyn_shared_over_device_limit", dyn_shared_too_large),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &mma_tile_bf16::SPEC,
    &mma_two_steps::SPEC,
    &stage_copy::SPEC,
];

/// One warp, f16: C (16 x 16) = A (16 x 32) x B (32 x 16, row-major, `ldmatrix_x4_trans`) in two
/// k-steps, and D (16 x 8) = A[:, 0..16] x Bt^T with Bt (8 x 16) stored `[n][k]` (`ldmatrix_x2`).
#[pgas_kernel]
fn mma_two_steps(
    c: &mut CudaSlice<f32>, d: &mut CudaSlice<f32>, a: &CudaSlice<f16>, b: &CudaSlice<f16>,
    bt: &CudaSlice<f16>,
) {
    let sa = shared_array::<f16, 512>();
    let sb = shared_array::<f16, 512>();
    let sbt = shared_array::<f16, 128>();
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
    cp_async_wait(0);
    sync_warp();
    let mut fa = frag_a::<f16, 2>();
    let mut fb = frag_b::<f16, 4>();
    let mut acc = frag_c::<f32, 2>();
    for ks in 0..2 {
        ldmatrix_x4(
            &mut fa[ks],
            &sa[idx2(lane % 16, ks * 16 + (lane / 16) * 8, 32)],
        );
        ldmatrix_x4_trans(
            &mut fb[ks * 2],
            &mut fb[ks * 2 + 1],
            &sb[idx2(ks * 16 + lane % 16, (lane / 16) * 8, 16)],
        );
    }
    for ks in 0..2 {
        for n in 0..2 {
            mma_sync(&mut acc[n], &fa[ks], &fb[ks * 2 + n]);
        }
    }
    let mut fbt = frag_b::<f16, 1>();
    let mut dacc = frag_c::<f32, 1>();
    ldmatrix_x2(&mut fbt[0], &sbt[idx2(lane % 8, ((lane / 8) % 2) * 8, 16)]);
    mma_sync(&mut dacc[0], &fa[0], &fbt[0]);
    for j in 0..4 {
        let row = lane / 4 + (j / 2) * 8;
        let col = (lane % 4) * 2 + j % 2;
        for n in 0..2 {
            c[idx2(row, n * 8 + col, 16)] = acc[n][j];
        }
        d[idx2(row, col, 8)] = dacc[0][j];
    }
}

/// Stages all of `src` on PE `pe` (through its peer view when reachable, else this PE's copy)
/// into dynamic shared memory with `cp.async`, then writes it to `dst` 16 bytes at a time.
#[pgas_kernel]
fn stage_copy(
    dst: &mut CudaSlice<u16>, used_peer: &mut CudaSlice<u32>, src: &SymTensor<u16>, pe: i32,
) {
    let smem = dyn_shared::<u16>();
    let chunks = smem.len() / 8;
    let remote = src.has_peer(pe);
    if thread_idx_x() == 0 {
        used_peer[0] = remote as u32;
    }
    let mut k = thread_idx_x() as usize;
    while k < chunks {
        if remote {
            let view = src.peer(pe);
            cp_async_16(&mut smem[k * 8], &view[k * 8]);
        } else {
            cp_async_16(&mut smem[k * 8], &src[k * 8]);
        }
        k += block_dim_x() as usize;
    }
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();
    let mut k = thread_idx_x() as usize;
    while k < chunks {
        let v = load_vec16(&smem[k * 8]);
        store_vec16(&mut dst[k * 8], v);
        k += block_dim_x() as usize;
    }
}

/// A small integer in -4..=4 (exact in bf16 and f16, and so are all the sums below).
fn small(i: usize, salt: usize) -> f32 {
    ((i * 7 + salt * 13) % 9) as f32 - 4.0
}

/// Row-major `m x n` = `m x k` times `k x n`, in f32 on the host.
fn matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|x| a[i * k + x] * b[x * n + j]).sum();
        }
    }
    c
}

fn mma_bf16_case(p: &Pgas) -> CaseResult {
    let a: Vec<f32> = (0..256).map(|i| small(i, 1)).collect();
    let b: Vec<f32> = (0..128).map(|i| small(i, 2)).collect();
    let s = p.stream();
    let da = s.clone_htod(&a.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())?;
    let db = s.clone_htod(&b.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())?;
    let mut dc = s.alloc_zeros::<f32>(128)?;
    mma_tile_bf16::launch(p, LaunchConfig::blocks(1, 32), &mut dc, &da, &db)?;
    util::settle(p)?;
    check_eq(
        "bf16 16x8x16 mma",
        &s.clone_dtoh(&dc)?,
        &matmul(&a, &b, 16, 16, 8),
    )
}

fn mma_f16_case(p: &Pgas) -> CaseResult {
    let a: Vec<f32> = (0..512).map(|i| small(i, 3)).collect();
    let b: Vec<f32> = (0..512).map(|i| small(i, 4)).collect();
    // Bt is stored [n][k]: Bt[n][k] = B'[k][n] for the 16 x 8 operand B'.
    let bt: Vec<f32> = (0..128).map(|i| small(i, 5)).collect();
    let b_prime: Vec<f32> = (0..128).map(|i| bt[(i % 8) * 16 + i / 8]).collect();
    let s = p.stream();
    let half = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let (da, db, dbt) = (
        s.clone_htod(&half(&a))?,
        s.clone_htod(&half(&b))?,
        s.clone_htod(&half(&bt))?,
    );
    let mut dc = s.alloc_zeros::<f32>(256)?;
    let mut dd = s.alloc_zeros::<f32>(128)?;
    mma_two_steps::launch(
        p,
        LaunchConfig::blocks(1, 32),
        &mut dc,
        &mut dd,
        &da,
        &db,
        &dbt,
    )?;
    util::settle(p)?;
    check_eq(
        "f16 16x16x32 mma (ldmatrix_x4_trans)",
        &s.clone_dtoh(&dc)?,
        &matmul(&a, &b, 16, 32, 16),
    )?;
    let a16: Vec<f32> = (0..256).map(|i| a[(i / 16) * 32 + i % 16]).collect();
    check_eq(
        "f16 16x8x16 mma (ldmatrix_x2)",
        &s.clone_dtoh(&dd)?,
        &matmul(&a16, &b_prime, 16, 16, 8),
    )
}

/// 100 KiB: over the 48 KiB a kernel gets without opting in, under every sm_80+ GPU's limit.
const STAGE_BYTES: usize = 100 * 1024;

fn dyn_shared_case(p: &Pgas) -> CaseResult {
    let n = STAGE_BYTES / 2;
    let me = util::me(p);
    let vals: Vec<u16> = (0..n)
        .map(|i| (i as u16).wrapping_mul(31) ^ (me as u16) << 12)
        .collect();
    let src = p.alloc_from(&vals)?;
    p.barrier_all()?;
    let peer = util::next(p);
    let s = p.stream();
    let mut dst = s.alloc_zeros::<u16>(n)?;
    let mut used_peer = s.alloc_zeros::<u32>(1)?;
    let cfg = LaunchConfig::blocks(1, 256).with_shared_mem(STAGE_BYTES as u32);
    stage_copy::launch(p, cfg, &mut dst, &mut used_peer, &src, peer as i32)?;
    util::settle(p)?;
    let got = s.clone_dtoh(&dst)?;
    // Through NVLink the data is the peer's; without a peer view it is this PE's own copy.
    let owner = if s.clone_dtoh(&used_peer)?[0] == 1 {
        peer
    } else {
        me
    };
    let want: Vec<u16> = (0..n)
        .map(|i| (i as u16).wrapping_mul(31) ^ (owner as u16) << 12)
        .collect();
    check_eq("100 KiB staged through dynamic shared memory", &got, &want)
}

/// More dynamic shared memory than any GPU gives a block: an `Err` that names the device's
/// limit, before the driver is asked.
fn dyn_shared_too_large(p: &Pgas) -> CaseResult {
    let src = p.alloc_from(&[0u16; 64])?;
    let s = p.stream();
    let mut dst = s.alloc_zeros::<u16>(64)?;
    let mut used_peer = s.alloc_zeros::<u32>(1)?;
    let cfg = LaunchConfig::blocks(1, 32).with_shared_mem(300 * 1024);
    let me = util::me(p) as i32;
    let msg = match stage_copy::launch(p, cfg, &mut dst, &mut used_peer, &src, me) {
        Ok(()) => return Err("300 KiB of dynamic shared memory was accepted".into()),
        Err(e) => e.to_string(),
    };
    ensure(
        msg.contains("307200 bytes of dynamic shared memory")
            && msg.contains("this GPU's limit is"),
        || format!("the error does not name the request and the device's limit: {msg}"),
    )
}
