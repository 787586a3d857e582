//! Local (register) arrays (`tests/gpu_suite/kernels/arrays.rs`): accumulators summed in an
//! unrolled loop, every scalar element type with every compound assignment, a `#[comptime]`
//! length with runtime indices, arrays of 16-byte vectors, in both variants. Inputs are small integers, so every f32 sum
//! is exact and the results compare exactly.

use crate::kernels::arrays::{array_column_sums, array_comptime_len, array_types, array_vec16};
use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("arrays/column_sums_8_accumulators", column_sums_case),
    case("arrays/every_element_type", types_case),
    case("arrays/comptime_len_runtime_index", comptime_len_case),
    case("arrays/vec16_elements", vec16_case),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`;
/// `array_comptime_len` has a comptime length, so it compiles when launched).
pub const KERNELS: &[&KernelSpec] = &[
    &array_column_sums::SPEC,
    &array_types::SPEC,
    &array_vec16::SPEC,
];

fn column_sums_case(p: &Pgas) -> CaseResult {
    let (blocks, threads, rows) = (2u32, 64u32, 1000usize);
    let n = (blocks * threads) as usize;
    let x: Vec<f32> = (0..rows * 8)
        .map(|i| ((i * 7) % 23) as f32 - 11.0)
        .collect();
    let w = [1.0f32, 0.5, 2.0, -1.0];
    let mut want = vec![0.0f32; n * 8];
    for t in 0..n {
        for j in 0..8 {
            let s: f32 = (t..rows).step_by(n).map(|r| x[r * 8 + j]).sum();
            want[t * 8 + j] = s * w[j % 4];
        }
    }
    let s = p.stream();
    let dx = s.clone_htod(&x)?;
    let cfg = LaunchConfig::blocks(blocks, threads);
    for checked in [true, false] {
        let mut out = s.alloc_zeros::<f32>(n * 8)?;
        if checked {
            array_column_sums::launch(p, cfg, &mut out, &dx, rows)?;
        } else {
            // SAFETY: thread t writes out[t * 8 .. t * 8 + 8] (n * 8 elements) and reads rows of
            // x below `rows` (rows * 8 elements); the local arrays are indexed below their
            // lengths (8 and 4) by loops of constant bounds.
            unsafe { array_column_sums::launch_unchecked(p, cfg, &mut out, &dx, rows)? };
        }
        util::settle(p)?;
        let what = if checked { "checked" } else { "plain" };
        check_eq(
            &format!("column sums ({what})"),
            &s.clone_dtoh(&out)?,
            &want,
        )?;
    }
    Ok(())
}

/// What `array_types` computes for thread `t`, on the host, in the same order.
fn types_row(seed: u32, t: usize) -> [u64; 16] {
    let s = seed.wrapping_add(t as u32);
    let mut a8 = [0u8; 4];
    let mut i16s = [-3i16, 7];
    let mut i32s = [s as i32; 3];
    let mut u32s = [s; 4];
    let mut i64s = [-(s as i64), 1, 2];
    let mut u64s = [1u64 << 40; 2];
    let mut us = [t; 2];
    let mut is = [t as isize - 5; 2];
    let mut f64s = [0.25f64; 4];
    let mut f16s = [f16::from_f32(1.5); 2];
    let mut b16s = [bf16::from_f32(2.0), bf16::from_f32(3.0)];
    let mut bools = [false; 3];
    let q = [pgas::e4m3::from_f32(0.75), pgas::e4m3::from_f32(-2.0)];
    for j in 0..4 {
        a8[j] = (s as u8).wrapping_mul(j as u8).wrapping_add(250);
        u32s[j] ^= j as u32;
        u32s[j] <<= 1;
        u32s[j] |= 1;
        f64s[j] *= j as f64;
    }
    i16s[1] = i16s[1].wrapping_sub(i16s[0].wrapping_mul(2));
    i32s[0] = i32s[0].wrapping_add(11);
    i32s[1] = i32s[1].wrapping_mul(-3);
    i32s[2] /= 2;
    i32s[2] %= 5;
    i64s[1] &= i64s[0];
    i64s[2] >>= 1;
    u64s[1] += 3;
    us[1] = us[0] * 3 + 1;
    is[0] -= 1;
    f64s[3] %= 0.5;
    // One rounding to f16 of the exact product, as `__hmul`.
    f16s[1] = f16::from_f32(f16s[0].to_f32() * f16s[1].to_f32());
    b16s[0] = bf16::from_f32(b16s[0].to_f32() + b16s[1].to_f32());
    bools[1] = s.is_multiple_of(2);
    bools[2] = !bools[1];
    [
        (a8[0] as u64) | (a8[1] as u64) << 8 | (a8[2] as u64) << 16 | (a8[3] as u64) << 24,
        (i16s[0] as i64 + i16s[1] as i64 * 1000) as u64,
        (i32s[0] as i64 + i32s[1] as i64 * 100000 + i32s[2] as i64) as u64,
        (u32s[0] as u64) ^ (u32s[1] as u64) << 8 ^ (u32s[2] as u64) << 16 ^ (u32s[3] as u64) << 24,
        i64s[0] as u64,
        i64s[1] as u64 ^ (i64s[2] as u64) << 32,
        u64s[0] + u64s[1],
        (us[0] + us[1]) as u64,
        (is[0] + is[1]) as u64,
        (f64s[1] + f64s[2] + f64s[3]) as u64,
        (f16s[1].to_f32() * 4.0) as u64,
        b16s[0].to_f32() as u64,
        bools[0] as u64 | (bools[1] as u64) << 1 | (bools[2] as u64) << 2,
        ((q[0].to_f32() + q[1].to_f32()) * 4.0 + 100.0) as u64,
        4 + 3,
        0,
    ]
}

fn types_case(p: &Pgas) -> CaseResult {
    let (threads, seed) = (64usize, 7u32);
    let want: Vec<u64> = (0..threads).flat_map(|t| types_row(seed, t)).collect();
    let s = p.stream();
    let mut out = s.alloc_zeros::<u64>(threads * 16)?;
    array_types::launch(p, LaunchConfig::blocks(1, threads as u32), &mut out, seed)?;
    util::settle(p)?;
    check_eq("local arrays of every type", &s.clone_dtoh(&out)?, &want)
}

fn comptime_len_case(p: &Pgas) -> CaseResult {
    let len = 300usize;
    let x: Vec<f32> = (0..len).map(|i| (i % 13) as f32 - 6.0).collect();
    let s = p.stream();
    let dx = s.clone_htod(&x)?;
    for n in [1usize, 4, 16] {
        let want: Vec<f32> = (0..len).map(|i| x[i] * (1 + i % n) as f32).collect();
        let mut out = s.alloc_zeros::<f32>(len)?;
        array_comptime_len::launch(p, LaunchConfig::blocks(3, 128), &mut out, &dx, n)?;
        util::settle(p)?;
        check_eq(&format!("comptime length {n}"), &s.clone_dtoh(&out)?, &want)?;
    }
    Ok(())
}

fn vec16_case(p: &Pgas) -> CaseResult {
    let threads = 96usize;
    let x: Vec<f32> = (0..threads * 16).map(|i| (i % 41) as f32 - 20.0).collect();
    let mut want = vec![0.0f32; threads * 16];
    for t in 0..threads {
        for i in 0..2 {
            for j in 0..8 {
                want[t * 16 + 8 * (1 - i) + j] = 2.0 * x[t * 16 + 8 * i + j];
            }
        }
    }
    let s = p.stream();
    let dx = s.clone_htod(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())?;
    let mut out = s.alloc_zeros::<bf16>(threads * 16)?;
    array_vec16::launch(p, LaunchConfig::blocks(1, threads as u32), &mut out, &dx)?;
    util::settle(p)?;
    let got: Vec<f32> = s.clone_dtoh(&out)?.iter().map(|v| v.to_f32()).collect();
    check_eq("arrays of Vec16<bf16>", &got, &want)
}
