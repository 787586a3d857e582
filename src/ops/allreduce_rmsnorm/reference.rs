//! The operation on the host, for the checks of the tests, the example and the benchmark.

use crate::bf16;

/// The operation on the host, for tests and checks: `parts[p]` is PE `p`'s `x` (tokens x
/// `hidden`), `residual` the residual stream before the call, `weight` the norm's weight.
/// Returns `(residual after, out)`. The residual is what the kernels compute bit for bit (f32
/// sums in rank order, one rounding); the norm's sum of squares runs in f64 here and in f32
/// over a block's threads on the GPU, and the GPU's `rsqrt` is approximate, so `out` agrees
/// within [`within_tolerance`].
pub fn reference(
    parts: &[&[bf16]], residual: &[bf16], weight: &[bf16], hidden: usize, eps: f32,
) -> (Vec<bf16>, Vec<bf16>) {
    let r: Vec<bf16> = (0..residual.len())
        .map(|i| {
            let mut s = 0.0f32;
            for x in parts {
                s += x[i].to_f32();
            }
            bf16::from_f32(s + residual[i].to_f32())
        })
        .collect();
    let mut y = vec![bf16::ZERO; r.len()];
    for (row, out) in r.chunks(hidden.max(1)).zip(y.chunks_mut(hidden.max(1))) {
        let ss: f64 = row.iter().map(|v| v.to_f64() * v.to_f64()).sum();
        let inv = (1.0 / (ss / hidden as f64 + f64::from(eps)).sqrt()) as f32;
        for ((o, v), w) in out.iter_mut().zip(row).zip(weight) {
            *o = bf16::from_f32(v.to_f32() * inv * w.to_f32());
        }
    }
    (r, y)
}

/// Whether a GPU result `got` of the norm agrees with [`reference()`]'s `want`: within 2^-7 of
/// `want`'s magnitude (two bf16 rounding steps), or both tiny.
pub fn within_tolerance(got: bf16, want: bf16) -> bool {
    let (g, w) = (got.to_f32(), want.to_f32());
    (g - w).abs() <= w.abs() / 128.0 + 1e-6
}

#[cfg(test)]
mod tests {
    use super::{reference, within_tolerance};
    use crate::bf16;

    #[test]
    fn the_reference_adds_in_rank_order_and_normalizes() {
        let b = |v: f32| bf16::from_f32(v);
        let (x0, x1) = ([b(1.0), b(2.0)], [b(3.0), b(-6.0)]);
        let (r, y) = reference(&[&x0, &x1], &[b(0.0), b(0.0)], &[b(1.0), b(0.5)], 2, 0.0);
        assert_eq!(r, vec![b(4.0), b(-4.0)]);
        // rms = 4: y = r / 4 * w.
        assert_eq!(y, vec![b(1.0), b(-0.5)]);
        assert!(within_tolerance(b(1.0), b(1.0)) && !within_tolerance(b(1.03), b(1.0)));
    }
}
