//! Inputs that GEMM examples, tests and benchmarks share: reproducible, spread over [-1, 1], and
//! exact in bf16, so a host product in f64 is a reference for any of them; and the operands and
//! host check of the all-gather + GEMM (`examples/allgather_gemm_sm90.rs`, `benches/ag_gemm.rs`).

use cudarc::driver::CudaSlice;
use half::bf16;

use crate::{Pgas, Result};

/// Element `i` of the matrix `salt` names: a hash of both mapped to [-1, 1) in steps of 2^-23,
/// rounded to bf16 (so 1.0 itself may come out).
pub fn value(i: usize, salt: u64) -> bf16 {
    let mut x = (i as u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(salt);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    bf16::from_f32(((x ^ (x >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
}

/// The first `n` elements of the matrix `salt` names ([`value`]).
pub fn values(n: usize, salt: u64) -> Vec<bf16> {
    (0..n).map(|i| value(i, salt)).collect()
}

/// Element `i` of the all-gather + GEMM's whole A (M x K, row-major): PE p's shard is rows
/// `p M/P ..`.
pub fn gathered_a(i: usize) -> bf16 {
    value(i, 11)
}

/// Element `i` of the all-gather + GEMM's Bt (N x K).
pub fn gathered_bt(i: usize) -> bf16 {
    value(i, 12)
}

/// This PE's shard of A (`mp` x `k`) and Bt (`n` x `k`) on the GPU.
pub fn gathered_inputs(
    pgas: &Pgas, (mp, n, k): (usize, usize, usize),
) -> Result<(CudaSlice<bf16>, CudaSlice<bf16>)> {
    let me = pgas.my_pe();
    let shard: Vec<bf16> = (0..mp * k).map(|i| gathered_a(me * mp * k + i)).collect();
    let bt: Vec<bf16> = (0..n * k).map(gathered_bt).collect();
    let stream = pgas.stream();
    Ok((stream.clone_htod(&shard)?, stream.clone_htod(&bt)?))
}

/// The worst error of `got` (C, M x n) against the host at `points`, relative to the tolerance
/// (bf16 rounding of the output plus f32 order; > 1 fails), with where and both values.
pub fn gathered_check(
    got: &[bf16], (n, k): (usize, usize), points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    for (row, col) in points {
        let want: f64 = (0..k)
            .map(|x| gathered_a(row * k + x).to_f64() * gathered_bt(col * k + x).to_f64())
            .sum();
        let g = got[row * n + col].to_f64();
        let r = (g - want).abs() / (want.abs() / 128.0 + 1e-2);
        if r.is_nan() || r > worst.0 {
            worst = (r, row, col, g, want);
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn values_are_reproducible_spread_and_in_range() {
        let xs: Vec<f32> = (0..4096).map(|i| value(i, 7).to_f32()).collect();
        assert_eq!(
            xs,
            (0..4096).map(|i| value(i, 7).to_f32()).collect::<Vec<_>>()
        );
        assert!(xs.iter().all(|x| (-1.0..=1.0).contains(x)));
        let negative = xs.iter().filter(|x| **x < 0.0).count();
        assert!(
            (1800..2300).contains(&negative),
            "{negative} of 4096 below 0"
        );
        assert_ne!(value(3, 7), value(3, 8), "the salt names another matrix");
    }
}
