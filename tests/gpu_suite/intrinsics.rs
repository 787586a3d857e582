//! Block and warp intrinsics: static shared memory with `sync_threads`, warp shuffles and
//! votes, `sync_warp`, `threadfence`, and the local atomics on `CudaSlice` buffers.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, sorted, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("intrinsics/shared_array_sync_threads", shared_reduce),
    case("intrinsics/shuffles_any_sync_sync_warp", shuffles),
    case("intrinsics/local_atomics", local_atomics_case),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[&block_sum::SPEC, &warp_ops::SPEC, &local_atomics::SPEC];

#[pgas_kernel]
fn block_sum(out: &mut SymTensor<u32>, x: &SymTensor<u32>) {
    let sh = shared_array::<u32, 256>();
    let t = thread_idx_x() as usize;
    sh[t] = x[block_idx_x() as usize * 256 + t];
    sync_threads();
    let mut s = 128usize;
    while s > 0 {
        if t < s {
            sh[t] += sh[t + s];
        }
        sync_threads();
        s /= 2;
    }
    if t == 0 {
        out[block_idx_x() as usize] = sh[0];
    }
}

fn shared_reduce(p: &Pgas) -> CaseResult {
    let blocks = 6;
    let xs: Vec<u32> = (0..blocks * 256)
        .map(|i| (i as u32).wrapping_mul(2654435761) >> 20)
        .collect();
    let x = p.alloc_from(&xs)?;
    let mut out = p.alloc::<u32>(blocks)?;
    out.fill(0)?;
    block_sum::launch(p, LaunchConfig::blocks(blocks as u32, 256), &mut out, &x)?;
    util::settle(p)?;
    let want: Vec<u32> = xs.chunks(256).map(|c| c.iter().sum()).collect();
    check_eq("shared-memory tree sum", &out.to_vec()?, &want)
}

#[pgas_kernel]
fn warp_ops(
    xor_sum: &mut SymTensor<u32>, down_sum: &mut SymTensor<u32>, mirror: &mut SymTensor<u32>,
) {
    let t = thread_idx_x() as usize;
    let lane = lane_id() as u32;
    let v = lane * lane + warp_id() as u32 * 1000;
    let mut a = v;
    a += shfl_xor_sync(0xffffffff, a, 16);
    a += shfl_xor_sync(0xffffffff, a, 8);
    a += shfl_xor_sync(0xffffffff, a, 4);
    a += shfl_xor_sync(0xffffffff, a, 2);
    a += shfl_xor_sync(0xffffffff, a, 1);
    xor_sum[t] = a;
    let mut d = v;
    d += shfl_down_sync(0xffffffff, d, 16);
    d += shfl_down_sync(0xffffffff, d, 8);
    d += shfl_down_sync(0xffffffff, d, 4);
    d += shfl_down_sync(0xffffffff, d, 2);
    d += shfl_down_sync(0xffffffff, d, 1);
    // Lane 24 of warp 1 and lane 8 of warp 2 hold it; no lane of warps 0 and 3.
    let one = any_sync(0xffffffff, lane + 16 * warp_id() as u32 == 40);
    down_sum[t] = if one { d + (1 << 30) } else { d };
    let sh = shared_array::<u32, 128>();
    sh[t] = v;
    threadfence();
    sync_warp();
    mirror[t] = sh[t - lane as usize + 31 - lane as usize];
}

fn shuffles(p: &Pgas) -> CaseResult {
    let n = 128;
    let mut xs = p.alloc::<u32>(n)?;
    let mut ds = p.alloc::<u32>(n)?;
    let mut mirror = p.alloc::<u32>(n)?;
    xs.fill(u32::MAX)?;
    ds.fill(u32::MAX)?;
    mirror.fill(u32::MAX)?;
    warp_ops::launch(
        p,
        LaunchConfig::blocks(1, n as u32),
        &mut xs,
        &mut ds,
        &mut mirror,
    )?;
    util::settle(p)?;
    let v = |t: usize| ((t % 32) * (t % 32) + (t / 32) * 1000) as u32;
    let warp_total = |w: usize| (0..32).map(|l| v(w * 32 + l)).sum::<u32>();
    let want_xor: Vec<u32> = (0..n).map(|t| warp_total(t / 32)).collect();
    check_eq("shfl_xor_sync butterfly sum", &xs.to_vec()?, &want_xor)?;
    // shfl_down leaves lane l with the sum over lanes l, l+1, ... of a tree; lane 0 has it all.
    let got_down = ds.to_vec()?;
    // any_sync marked every lane of warps 1 and 2, and no lane of 0 and 3 (bit 30).
    let marked: Vec<bool> = got_down.iter().map(|d| d >> 30 == 1).collect();
    let want_marked: Vec<bool> = (0..n).map(|t| t / 32 == 1 || t / 32 == 2).collect();
    check_eq("any_sync, the same in every lane", &marked, &want_marked)?;
    let got_down: Vec<u32> = got_down.iter().map(|d| d & !(1 << 30)).collect();
    let lane0: Vec<u32> = (0..n / 32).map(|w| got_down[w * 32]).collect();
    check_eq(
        "shfl_down_sync sum at lane 0",
        &lane0,
        &(0..n / 32).map(warp_total).collect::<Vec<_>>(),
    )?;
    let want_mirror: Vec<u32> = (0..n).map(|t| v(t - t % 32 + 31 - t % 32)).collect();
    check_eq(
        "shared memory across sync_warp",
        &mirror.to_vec()?,
        &want_mirror,
    )
}

#[pgas_kernel]
fn local_atomics(
    cnt: &mut CudaSlice<u32>, ints: &mut CudaSlice<i32>, fsum: &mut CudaSlice<f32>,
    olds: &mut SymTensor<u32>,
) {
    let t = global_thread_idx();
    let n = (block_dim_x() * grid_dim_x()) as usize;
    olds[t] = atomic_add_local(&mut cnt[0], 1);
    atomic_sub_local(&mut cnt[1], 2);
    olds[n + t] = atomic_exch_local(&mut cnt[2], t as u32 + 1);
    olds[2 * n + t] = atomic_cas_local(&mut cnt[3], 0, t as u32 + 1);
    atomic_max_local(&mut ints[0], t as i32 - 100);
    atomic_min_local(&mut ints[1], t as i32 - 100);
    atomic_add_local(&mut fsum[0], 0.5);
}

fn local_atomics_case(p: &Pgas) -> CaseResult {
    let n = 4 * 64usize;
    let s = p.stream();
    let mut cnt = s.clone_htod(&[0u32, 10_000, 0, 0])?;
    let mut ints = s.clone_htod(&[-1000i32, 1000])?;
    let mut fsum = s.clone_htod(&[0.0f32])?;
    let mut olds = p.alloc::<u32>(3 * n)?;
    olds.fill(u32::MAX)?;
    local_atomics::launch(
        p,
        LaunchConfig::blocks(4, 64),
        &mut cnt,
        &mut ints,
        &mut fsum,
        &mut olds,
    )?;
    util::settle(p)?;
    let c = s.clone_dtoh(&cnt)?;
    let o = olds.to_vec()?;
    check_eq(
        "atomic_add_local old values",
        &sorted(&o[..n]),
        &(0..n as u32).collect::<Vec<_>>(),
    )?;
    check_eq(
        "atomic_add_local / sub final",
        &c[..2],
        &[n as u32, 10_000 - 2 * n as u32],
    )?;
    let mut exch: Vec<u32> = o[n..2 * n].to_vec();
    exch.push(c[2]);
    check_eq(
        "atomic_exch_local chain",
        &sorted(&exch),
        &(0..=n as u32).collect::<Vec<_>>(),
    )?;
    let winners = o[2 * n..].iter().filter(|&&v| v == 0).count();
    util::ensure(
        winners == 1 && o[2 * n..].iter().all(|&v| v == 0 || v == c[3]),
        || format!("atomic_cas_local: {winners} winners, final {}", c[3]),
    )?;
    check_eq(
        "atomic_max/min_local",
        &s.clone_dtoh(&ints)?,
        &[n as i32 - 101, -100],
    )?;
    check_eq(
        "atomic_add_local f32",
        &s.clone_dtoh(&fsum)?,
        &[n as f32 * 0.5],
    )
}
