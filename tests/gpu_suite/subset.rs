//! The Rust subset inside kernels and the thread intrinsics: every statement and expression form
//! of the spec, computed on the GPU and by the same Rust on the host.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("subset/thread_ids_3d", thread_ids_3d),
    case("subset/global_thread_idx", global_idx),
    case("subset/control_flow", control_flow_case),
    case("subset/device_fns", device_fns),
    case("subset/slices", slices_case),
    case("subset/comptime", comptime_case),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &thread_ids::SPEC,
    &global_ids::SPEC,
    &control_flow::SPEC,
    &device_fn_user::SPEC,
    &slices::SPEC,
];

const ROW: usize = 14;

#[pgas_kernel]
fn thread_ids(out: &mut SymTensor<u32>) {
    let t = thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z());
    let b = block_idx_x() + grid_dim_x() * (block_idx_y() + grid_dim_y() * block_idx_z());
    let per_block = block_dim_x() * block_dim_y() * block_dim_z();
    let row = ((b * per_block + t) * 14) as usize;
    out[row] = thread_idx_x();
    out[row + 1] = thread_idx_y();
    out[row + 2] = thread_idx_z();
    out[row + 3] = block_idx_x();
    out[row + 4] = block_idx_y();
    out[row + 5] = block_idx_z();
    out[row + 6] = block_dim_x();
    out[row + 7] = block_dim_y();
    out[row + 8] = block_dim_z();
    out[row + 9] = grid_dim_x();
    out[row + 10] = grid_dim_y();
    out[row + 11] = grid_dim_z();
    out[row + 12] = lane_id() as u32;
    out[row + 13] = warp_id() as u32;
}

fn thread_ids_3d(p: &Pgas) -> CaseResult {
    let (g, b) = ((3u32, 2u32, 2u32), (8u32, 4u32, 2u32));
    let threads = (g.0 * g.1 * g.2 * b.0 * b.1 * b.2) as usize;
    let mut out = p.alloc::<u32>(threads * ROW)?;
    out.fill(u32::MAX)?;
    thread_ids::launch(p, LaunchConfig::dims(g, b), &mut out)?;
    util::settle(p)?;
    let mut want = vec![0u32; threads * ROW];
    for (bz, by, bx) in iter3(g) {
        for (tz, ty, tx) in iter3(b) {
            let t = tx + b.0 * (ty + b.1 * tz);
            let blk = bx + g.0 * (by + g.1 * bz);
            let r = ((blk * b.0 * b.1 * b.2 + t) as usize) * ROW;
            want[r..r + ROW].copy_from_slice(&[
                tx,
                ty,
                tz,
                bx,
                by,
                bz,
                b.0,
                b.1,
                b.2,
                g.0,
                g.1,
                g.2,
                tx % 32,
                tx / 32,
            ]);
        }
    }
    // lane_id()/warp_id() are documented on the x dimension (threadIdx.x & 31, >> 5).
    check_eq("thread/block/grid ids, lane, warp", &out.to_vec()?, &want)
}

fn iter3(d: (u32, u32, u32)) -> impl Iterator<Item = (u32, u32, u32)> {
    (0..d.2).flat_map(move |z| (0..d.1).flat_map(move |y| (0..d.0).map(move |x| (z, y, x))))
}

#[pgas_kernel]
fn global_ids(out: &mut SymTensor<u64>) {
    let g = global_thread_idx();
    out[g] = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64 * 3 + g as u64;
}

fn global_idx(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u64>(5 * 96)?;
    out.fill(u64::MAX)?;
    global_ids::launch(p, LaunchConfig::blocks(5, 96), &mut out)?;
    util::settle(p)?;
    let want: Vec<u64> = (0..5 * 96).map(|g| g * 4).collect();
    check_eq("global_thread_idx", &out.to_vec()?, &want)
}

const CF: usize = 8;

/// Every control-flow and operator form of the subset, one value per form. `control_flow_ref`
/// below is the same text as plain Rust; keep the two in step.
#[pgas_kernel]
fn control_flow(out: &mut SymTensor<i64>, n: u32) {
    let i = global_thread_idx();
    if i >= n as usize {
        return;
    }
    let x = i as i64;
    let base = i * 8;
    let mut s: i64 = 0;
    for k in 0..x {
        s += k * 2;
    }
    out[base] = s;
    let mut t = 0i64;
    for k in (3..x + 20).step_by(4) {
        t = t + k;
    }
    out[base + 1] = t;
    let mut w = 0;
    let mut k = 0i64;
    while k < 50 {
        k += 1;
        if k % 3 == 0 {
            continue;
        }
        w ^= k * x;
    }
    out[base + 2] = w;
    let mut c = 0i64;
    let mut v = x + 1;
    loop {
        if v == 1 {
            break;
        }
        v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
        c += 1;
    }
    out[base + 3] = c;
    let cls = if x % 15 == 0 {
        15
    } else if x % 5 == 0 && x > 0 {
        5
    } else if !(x % 3 != 0) || x == 7 {
        3
    } else {
        -1
    };
    out[base + 4] = cls;
    out[base + 5] = ((x << 3) | (x >> 1)) & 0x5555 ^ !x;
    let f = x as f32 * 1.5 + 0.25;
    let narrow = ((x * 37) as u8) as i64;
    out[base + 6] = f as i64 + narrow * 1000 + (-x) as i8 as i64 * 1000000;
    let mut acc = -x;
    {
        let a = x * 3;
        acc -= a - 1;
    }
    acc *= 2;
    acc /= 3;
    acc %= 1000;
    acc <<= 2;
    acc >>= 1;
    acc |= 1;
    acc &= !2;
    out[base + 7] = acc + (x > 10) as i64 + (x <= 3 || x != 4) as i64 * 10;
}

fn control_flow_ref(x: i64) -> [i64; CF] {
    let mut out = [0i64; CF];
    let mut s: i64 = 0;
    for k in 0..x {
        s += k * 2;
    }
    out[0] = s;
    let mut t = 0i64;
    for k in (3..x + 20).step_by(4) {
        t += k;
    }
    out[1] = t;
    let mut w = 0;
    let mut k = 0i64;
    while k < 50 {
        k += 1;
        if k % 3 == 0 {
            continue;
        }
        w ^= k * x;
    }
    out[2] = w;
    let mut c = 0i64;
    let mut v = x + 1;
    while v != 1 {
        v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
        c += 1;
    }
    out[3] = c;
    out[4] = if x % 15 == 0 {
        15
    } else if x % 5 == 0 && x > 0 {
        5
    } else if x % 3 == 0 || x == 7 {
        3
    } else {
        -1
    };
    out[5] = ((x << 3) | (x >> 1)) & 0x5555 ^ !x;
    let f = x as f32 * 1.5 + 0.25;
    let narrow = ((x * 37) as u8) as i64;
    out[6] = f as i64 + narrow * 1000 + (-x) as i8 as i64 * 1000000;
    let mut acc = -x;
    acc -= x * 3 - 1;
    acc *= 2;
    acc /= 3;
    acc %= 1000;
    acc <<= 2;
    acc >>= 1;
    acc |= 1;
    acc &= !2;
    out[7] = acc + (x > 10) as i64 + (x <= 3 || x != 4) as i64 * 10;
    out
}

fn control_flow_case(p: &Pgas) -> CaseResult {
    let n = 300u32;
    let mut out = p.alloc::<i64>(n as usize * CF + CF)?;
    out.fill(i64::MIN)?;
    // One block more than needed: the early `return` must keep the spare threads out.
    control_flow::launch(p, LaunchConfig::blocks(3, 128), &mut out, n)?;
    util::settle(p)?;
    let mut want: Vec<i64> = (0..n as i64).flat_map(control_flow_ref).collect();
    want.extend([i64::MIN; CF]);
    check_eq("control flow and operators", &out.to_vec()?, &want)
}

#[pgas_device]
fn square(x: f32) -> f32 {
    x * x
}

#[pgas_device]
fn hyp(a: f32, b: f32) -> f32 {
    sqrt(square(a) + square(b))
}

#[pgas_device]
fn clamp_index(i: usize, len: usize) -> usize {
    if i >= len {
        return len - 1;
    }
    i
}

#[pgas_kernel]
fn device_fn_user(out: &mut SymTensor<f32>, idx: &mut SymTensor<u64>) {
    let i = thread_idx_x() as usize;
    out[i] = hyp(i as f32, 2.0 * i as f32 + 1.0);
    idx[i] = clamp_index(i * 3, 100) as u64;
}

fn device_fns(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<f32>(64)?;
    let mut idx = p.alloc::<u64>(64)?;
    out.fill(f32::NAN)?;
    idx.fill(u64::MAX)?;
    device_fn_user::launch(p, LaunchConfig::blocks(1, 64), &mut out, &mut idx)?;
    util::settle(p)?;
    let got: Vec<f64> = out.to_vec()?.iter().map(|&v| v as f64).collect();
    let want: Vec<f64> = (0..64)
        .map(|i| {
            let (a, b) = (i as f64, 2.0 * i as f64 + 1.0);
            (a * a + b * b).sqrt()
        })
        .collect();
    util::check_close("device fn hyp(square)", &got, &want, 1e-6)?;
    let want_idx: Vec<u64> = (0..64).map(|i| (i * 3).min(99)).collect();
    check_eq("device fn with early return", &idx.to_vec()?, &want_idx)
}

#[pgas_kernel]
fn slices(out: &mut SymTensor<u32>, src: &SymTensor<u32>, lens: &mut SymTensor<u64>) {
    let i = thread_idx_x() as usize;
    let a = &src[4..12];
    let inner = &a[2..6];
    let b = &mut out[16..32];
    b[i] = a[i % a.len()] * 2 + inner[i % inner.len()];
    if i == 0 {
        lens[0] = a.len() as u64;
        lens[1] = b.len() as u64;
        lens[2] = inner.len() as u64;
        lens[3] = src.len() as u64;
        lens[4] = out.len() as u64;
    }
}

fn slices_case(p: &Pgas) -> CaseResult {
    let src_host: Vec<u32> = (0..40).map(|i| i * 10 + 1).collect();
    let src = p.alloc_from(&src_host)?;
    let mut out = p.alloc::<u32>(48)?;
    let mut lens = p.alloc::<u64>(5)?;
    out.fill(7)?;
    lens.fill(0)?;
    slices::launch(p, LaunchConfig::blocks(1, 16), &mut out, &src, &mut lens)?;
    util::settle(p)?;
    let a = &src_host[4..12];
    let inner = &a[2..6];
    let mut want = vec![7u32; 48];
    for i in 0..16 {
        want[16 + i] = a[i % a.len()] * 2 + inner[i % inner.len()];
    }
    check_eq("range slices", &out.to_vec()?, &want)?;
    check_eq("slice len()", &lens.to_vec()?, &[8, 16, 4, 40, 48])
}

#[pgas_kernel]
fn comptime_scale(out: &mut SymTensor<u32>, #[comptime] k: u32, #[comptime] neg: bool) {
    let i = thread_idx_x();
    out[i as usize] = if neg { 1000 - i * k } else { i * k };
}

fn comptime_case(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u32>(32)?;
    for (k, neg) in [(3u32, false), (5, true), (3, true), (7, false)] {
        out.fill(u32::MAX)?;
        comptime_scale::launch(p, LaunchConfig::blocks(1, 32), &mut out, k, neg)?;
        util::settle(p)?;
        let want: Vec<u32> = (0..32)
            .map(|i| if neg { 1000 - i * k } else { i * k })
            .collect();
        check_eq(&format!("comptime k={k} neg={neg}"), &out.to_vec()?, &want)?;
    }
    ensure(comptime_scale::SPEC.params.len() == 3, || {
        "comptime parameters missing from KernelSpec".into()
    })
}
