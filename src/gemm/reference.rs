//! Inputs that GEMM examples, tests and benchmarks share: reproducible, spread over [-1, 1), and
//! exact in bf16, so a host product in f64 is a reference for any of them.

use half::bf16;

/// Element `i` of the matrix `salt` names: a hash of both mapped to [-1, 1) in steps of 2^-23,
/// rounded to bf16 (the few that round up to 1.0 become bf16's largest value below 1).
pub fn value(i: usize, salt: u64) -> bf16 {
    let mut x = (i as u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(salt);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let v = bf16::from_f32(((x ^ (x >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0);
    // bf16 keeps 8 significant bits: values within 2^-9 of 1 round to 1.0, outside the range.
    v.min(bf16::from_f32(1.0 - 1.0 / 256.0))
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
        assert!(xs.iter().all(|x| (-1.0..1.0).contains(x)));
        let negative = xs.iter().filter(|x| **x < 0.0).count();
        assert!(
            (1800..2300).contains(&negative),
            "{negative} of 4096 below 0"
        );
        assert_ne!(value(3, 7), value(3, 8), "the salt names another matrix");
    }
}
