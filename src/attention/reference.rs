//! A plain attention in f32 on the GPU, one thread a (query, head), for checking
//! [`super::Attention`] at shapes a host reference would take minutes over; and the inputs that
//! tests and the benchmark share.

use crate::prelude::*;

/// One thread per query token and head: that row's attention in f32 from the same bf16 Q, K
/// and V and the same layouts as `attention_fwd_sm90`, in two passes over the row's visible keys
/// (the maximum score, then the sum and the weighted values); sequence `b`'s keys are
/// `k_ranges[2 b]..k_ranges[2 b + 1]`. `seq_of[t]` is the sequence of
/// query token `t`; `scale` is the softmax scale (natural base). Writes O in f32 and the
/// log-sum-exp (-1e30 for a row that sees no key).
#[pgas_kernel]
pub fn attention_reference(
    o: &mut CudaSlice<f32>, lse: &mut CudaSlice<f32>, q: &CudaSlice<bf16>, k: &CudaSlice<bf16>,
    v: &CudaSlice<bf16>, cu_q: &CudaSlice<u32>, k_ranges: &CudaSlice<u32>, seq_of: &CudaSlice<u32>,
    hq: usize, hkv: usize, d: usize, scale: f32, causal: bool,
) {
    let id = global_thread_idx();
    if id >= seq_of.len() * hq {
        return;
    }
    let tok = id / hq;
    let head = id % hq;
    let b = seq_of[tok] as usize;
    let i = tok - cu_q[b] as usize;
    let q_len = (cu_q[b + 1] - cu_q[b]) as i64;
    let k_start = k_ranges[2 * b] as usize;
    let k_len = (k_ranges[2 * b + 1] - k_ranges[2 * b]) as i64;
    let mut k_end = k_len;
    if causal {
        k_end = min(k_len, i as i64 + k_len - q_len + 1);
    }
    let kvh = head / (hq / hkv);
    let qa = (tok * hq + head) * d;
    let mut mx = -1.0e30f32;
    for j in 0..max(k_end, 0) as usize {
        let ka = ((k_start + j) * hkv + kvh) * d;
        mx = max(mx, dot(q, qa, k, ka, d) * scale);
    }
    let mut acc = [0.0f32; 256];
    let mut sum = 0.0f32;
    for j in 0..max(k_end, 0) as usize {
        let ka = ((k_start + j) * hkv + kvh) * d;
        let p = exp(dot(q, qa, k, ka, d) * scale - mx);
        sum += p;
        for x in 0..d {
            acc[x] += p * v[ka + x] as f32;
        }
    }
    for x in 0..d {
        o[qa + x] = if sum > 0.0 { acc[x] / sum } else { 0.0 };
    }
    lse[tok * hq + head] = if sum > 0.0 { mx + ln(sum) } else { -1.0e30 };
}

/// The score of a query and a key, each `d` bf16 values from `qa` of `q` and `ka` of `k`: their
/// dot product in f32, summed in order.
#[pgas_device]
fn dot(q: &CudaSlice<bf16>, qa: usize, k: &CudaSlice<bf16>, ka: usize, d: usize) -> f32 {
    let mut s = 0.0f32;
    for x in 0..d {
        s += q[qa + x] as f32 * k[ka + x] as f32;
    }
    s
}

/// One row of attention on the host in f64, for spot checks where the GPU reference would take
/// too long: query token `tok`, head `head` of a sequence that starts at token 0 of `q`
/// (`[tokens][hq][d]`) and of `k` and `v` (`[tokens][hkv][d]`), over its first `keys` keys,
/// with the softmax scale `1 / sqrt(d)`. Returns the row of O and its log-sum-exp (natural).
pub fn host_row(
    (q, k, v): (&[bf16], &[bf16], &[bf16]), (hq, hkv, d): (usize, usize, usize), tok: usize,
    head: usize, keys: usize,
) -> (Vec<f64>, f64) {
    let kvh = head / (hq / hkv);
    let qa = (tok * hq + head) * d;
    let scale = 1.0 / (d as f64).sqrt();
    let scores: Vec<f64> = (0..keys)
        .map(|j| {
            let ka = (j * hkv + kvh) * d;
            (0..d)
                .map(|x| q[qa + x].to_f64() * k[ka + x].to_f64())
                .sum::<f64>()
                * scale
        })
        .collect();
    let mx = scores.iter().cloned().fold(f64::MIN, f64::max);
    let mut o = vec![0.0f64; d];
    let mut sum = 0.0f64;
    for (j, s) in scores.iter().enumerate() {
        let w = (s - mx).exp();
        sum += w;
        let va = (j * hkv + kvh) * d;
        for (a, x) in o.iter_mut().zip(&v[va..va + d]) {
            *a += w * x.to_f64();
        }
    }
    o.iter_mut().for_each(|a| *a /= sum);
    (o, mx + sum.ln())
}

/// Element `i` of the input tensor `salt` names: the GEMM's inputs, spread over [-1, 1) and
/// exact in bf16.
pub use crate::gemm::reference::{value, values};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_row_weighs_the_values_by_the_softmax_of_the_scores() {
        // d = 4, one head; key 0 scores 1, key 1 scores 0 (q . k / 2).
        let b = |x: &[f32]| x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>();
        let q = b(&[2.0, 0.0, 0.0, 0.0]);
        let k = b(&[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        let v = b(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 0.5, 0.25]);
        let (o, lse) = host_row((&q, &k, &v), (1, 1, 4), 0, 0, 1);
        assert_eq!(o, [1.0, 2.0, 3.0, 4.0]);
        assert!((lse - 1.0).abs() < 1e-12);
        let (o, lse) = host_row((&q, &k, &v), (1, 1, 4), 0, 0, 2);
        let w0 = 1.0f64.exp() / (1.0f64.exp() + 1.0);
        for (x, got) in o.iter().enumerate() {
            let want = w0 * v[x].to_f64() + (1.0 - w0) * v[4 + x].to_f64();
            assert!((got - want).abs() < 1e-12, "O[{x}] = {got}, want {want}");
        }
        assert!((lse - (1.0f64.exp() + 1.0).ln()).abs() < 1e-12);
    }
}
