//! What [`MoeDispatcher`](super::MoeDispatcher) computes, on the host: the layout each PE
//! receives from a dispatch and the output of a combine, for checking results (the example,
//! the GPU tests and the benchmark compare the GPU's against these) and for reading as the
//! definition. Slow and simple: plain loops over every PE's routing. Also the stand-in for a
//! model's experts that `examples/moe_dispatch.rs` and `benches/moe.rs` share: the tokens they
//! dispatch ([`x_value`]) and a kernel that plays the experts between dispatch and combine
//! ([`experts`]), simple enough that these functions check it.

use half::bf16;
use pgas_runtime::e4m3;

use super::config::MoeConfig;
use crate::prelude::*;

/// What one PE receives from a dispatch (the GPU's receive buffers, first `rows` rows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// Source (PE, token) of each row: PE order, then token order.
    pub src: Vec<(usize, usize)>,
    /// `top_k` slots per row: local expert, or -1 when the slot's expert is elsewhere.
    pub idx: Vec<i32>,
    /// `top_k` weights per row (0 where `idx` is -1), as bits, so that rows compare exactly.
    pub weight_bits: Vec<u32>,
    /// For each row's slots, its pair (-1 where `idx` is -1).
    pub row_pairs: Vec<i32>,
    /// The row of each pair, grouped by local expert.
    pub expert_rows: Vec<i32>,
    /// Where each local expert's pairs start (`experts_per_pe + 1` entries).
    pub expert_offsets: Vec<usize>,
}

/// The receive layout of every PE for the routings of all PEs (`idx[pe]` and `weights[pe]`:
/// `top_k` entries per token, -1 for an unused slot, as [`MoeDispatcher::route`] accepts).
///
/// [`MoeDispatcher::route`]: super::MoeDispatcher::route
pub fn dispatch(cfg: &MoeConfig, idx: &[&[i32]], weights: &[&[f32]]) -> Vec<Received> {
    let n = idx.len();
    let (k, el) = (cfg.top_k, cfg.experts_per_pe);
    (0..n)
        .map(|d| {
            let mut r = Received {
                src: Vec::new(),
                idx: Vec::new(),
                weight_bits: Vec::new(),
                row_pairs: Vec::new(),
                expert_rows: Vec::new(),
                expert_offsets: Vec::new(),
            };
            // (local expert, row, slot) of every pair, in row order.
            let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
            for (s, ids) in idx.iter().enumerate() {
                for t in 0..ids.len() / k {
                    let slots = &ids[t * k..(t + 1) * k];
                    if !slots.iter().any(|&g| g >= 0 && g as usize / el == d) {
                        continue;
                    }
                    let row = r.src.len();
                    r.src.push((s, t));
                    for (j, &g) in slots.iter().enumerate() {
                        if g >= 0 && g as usize / el == d {
                            r.idx.push((g as usize % el) as i32);
                            r.weight_bits.push(weights[s][t * k + j].to_bits());
                            pairs.push((g as usize % el, row, j));
                        } else {
                            r.idx.push(-1);
                            r.weight_bits.push(0f32.to_bits());
                        }
                    }
                }
            }
            // Stable: row order within each expert.
            pairs.sort_by_key(|&(e, _, _)| e);
            r.row_pairs = vec![-1; r.src.len() * k];
            for (p, &(_, row, j)) in pairs.iter().enumerate() {
                r.row_pairs[row * k + j] = p as i32;
                r.expert_rows.push(row as i32);
            }
            r.expert_offsets = (0..=el)
                .map(|e| pairs.iter().filter(|&&(x, _, _)| x < e).count())
                .collect();
            r
        })
        .collect()
}

/// The combine output of PE `me` (`tokens * hidden`), given every PE's [`Received`] layout
/// and expert outputs (`expert_out(d, pair)`: the output row of `pair` on PE `d`, `hidden`
/// elements), in the GPU's
/// order of operations: on each expert's PE, `f32` fused multiply-adds over the row's slots in
/// slot order, rounded to `bf16`; on the token's PE, the partials summed in `f32` in PE order,
/// rounded to `bf16`. Zeros for a token routed nowhere.
pub fn combine(
    cfg: &MoeConfig, me: usize, tokens: usize, received: &[Received],
    expert_out: impl Fn(usize, usize) -> Vec<bf16>,
) -> Vec<bf16> {
    let (h, k) = (cfg.hidden, cfg.top_k);
    // Each destination's partial row for a received row, then summed as `combine_rows` sums.
    combine_rows(cfg, me, tokens, received, |d, row| {
        let r = &received[d];
        // The row's pairs in slot order, with their weights.
        let ys: Vec<(f32, Vec<bf16>)> = (0..k)
            .filter(|&j| r.row_pairs[row * k + j] >= 0)
            .map(|j| {
                let w = f32::from_bits(r.weight_bits[row * k + j]);
                (w, expert_out(d, r.row_pairs[row * k + j] as usize))
            })
            .collect();
        (0..h)
            .map(|c| {
                let mut a = 0f32;
                for (w, y) in &ys {
                    a = w.mul_add(y[c].to_f32(), a);
                }
                bf16::from_f32(a)
            })
            .collect()
    })
}

/// The output of [`MoeDispatcher::combine_rows`] on PE `me` (`tokens * hidden`), given every
/// PE's [`Received`] layout and combine input (`rows(d, row)`: the row PE `d`'s experts left
/// for its received row `row`, `hidden` elements): each token's rows from the PEs it went to,
/// summed in `f32` in PE order and rounded to `bf16`. Zeros for a token routed nowhere.
///
/// [`MoeDispatcher::combine_rows`]: super::MoeDispatcher::combine_rows
pub fn combine_rows(
    cfg: &MoeConfig, me: usize, tokens: usize, received: &[Received],
    rows: impl Fn(usize, usize) -> Vec<bf16>,
) -> Vec<bf16> {
    let h = cfg.hidden;
    let mut acc = vec![0f32; tokens * h];
    for (d, r) in received.iter().enumerate() {
        for (row, &(s, t)) in r.src.iter().enumerate() {
            if s == me {
                for (a, y) in acc[t * h..(t + 1) * h].iter_mut().zip(rows(d, row)) {
                    *a += y.to_f32();
                }
            }
        }
    }
    // A token routed nowhere sums nothing: its zeros are the f32 zeros rounded.
    acc.into_iter().map(bf16::from_f32).collect()
}

/// What FP8 dispatch ([`MoeDispatcher::set_fp8_dispatch`]) delivers for a row: per group of
/// 128 values, `scale = max |x| / 448` (`f32`), each value `x * (448 / max |x|)` rounded to
/// `e4m3` (nearest, saturating; 0 for an all-zero group), then `q * scale` rounded to `bf16`,
/// the GPU's operations in its order. `row.len()` a multiple of 128.
///
/// [`MoeDispatcher::set_fp8_dispatch`]: super::MoeDispatcher::set_fp8_dispatch
pub fn fp8_round_trip(row: &[bf16]) -> Vec<bf16> {
    row.chunks(128)
        .flat_map(|g| {
            let amax = g.iter().fold(0f32, |m, v| m.max(v.to_f32().abs()));
            let scale = amax / 448.0;
            let inv = if amax > 0.0 { 448.0 / amax } else { 0.0 };
            g.iter().map(move |v| {
                let q = e4m3::from_f32(v.to_f32() * inv);
                bf16::from_f32(q.to_f32() * scale)
            })
        })
        .collect()
}

/// A reproducible top-k routing of `tokens` tokens over `n_pes * experts_per_pe` experts (ids
/// and weights, `top_k` per token), for tests and benchmarks. `skewed == false`: every expert
/// equally likely, every slot used (as a trained gate's load balancing aims for). `skewed`:
/// experts `g` with `g % 5 == 3` get no token at all, the others very unequal shares, every
/// 17th token leaves its last slot unused (-1) and every 97th is routed nowhere. Weights in
/// `[0.05, 1)`.
pub fn sample_routing(
    cfg: &MoeConfig, n_pes: usize, tokens: usize, seed: u64, skewed: bool,
) -> (Vec<i32>, Vec<f32>) {
    let k = cfg.top_k;
    let experts = n_pes * cfg.experts_per_pe;
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let popularity: Vec<u64> = (0..experts)
        .map(|g| match skewed {
            false => 1,
            true if g % 5 == 3 => 0,
            true => (1 + (g as u64 * 7) % 11).pow(2),
        })
        .collect();
    let total: u64 = popularity.iter().sum();
    let live = popularity.iter().filter(|&&p| p > 0).count();
    let mut idx = vec![-1i32; tokens * k];
    let mut weights = vec![0f32; tokens * k];
    for t in 0..tokens {
        let used = match (skewed, t % 97 == 96, t % 17 == 16) {
            (true, true, _) => 0,
            (true, _, true) => k - 1,
            _ => k,
        }
        .min(live);
        let slots = &mut idx[t * k..(t + 1) * k];
        let mut j = 0;
        while j < used {
            let mut r = next() % total;
            let g = popularity.iter().position(|&p| {
                if r < p {
                    true
                } else {
                    r -= p;
                    false
                }
            });
            let g = g.unwrap_or(0) as i32;
            if !slots[..j].contains(&g) {
                slots[j] = g;
                j += 1;
            }
        }
        for j in 0..k {
            weights[t * k + j] = if slots[j] >= 0 {
                0.05 + (next() % 1000) as f32 * 0.00095
            } else {
                0.0
            };
        }
    }
    (idx, weights)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> MoeConfig {
        MoeConfig {
            max_tokens: 4,
            hidden: 8,
            top_k: 2,
            experts_per_pe: 2,
        }
    }

    #[test]
    fn each_token_goes_once_to_each_pe_of_its_experts() {
        // 2 PEs, experts 0 1 on PE 0, 2 3 on PE 1.
        let idx0 = [0, 1, 2, -1, 3, 0];
        let idx1 = [1, 2, -1, -1];
        let w0 = [0.5, 0.25, 1.0, 0.0, 2.0, 4.0];
        let w1 = [8.0, 16.0, 0.0, 0.0];
        let r = dispatch(&cfg(), &[&idx0, &idx1], &[&w0, &w1]);
        // PE 0: PE 0's tokens 0 (experts 0, 1) and 2 (expert 0), PE 1's token 0 (expert 1).
        assert_eq!(r[0].src, vec![(0, 0), (0, 2), (1, 0)]);
        assert_eq!(r[0].idx, vec![0, 1, -1, 0, 1, -1]);
        // Expert 0: rows 0, 1; expert 1: rows 0, 2.
        assert_eq!(r[0].expert_rows, vec![0, 1, 0, 2]);
        assert_eq!(r[0].expert_offsets, vec![0, 2, 4]);
        assert_eq!(r[0].row_pairs, vec![0, 2, -1, 1, 3, -1]);
        assert_eq!(r[0].weight_bits[3], 4.0f32.to_bits());
        // PE 1: PE 0's tokens 1 (expert 2) and 2 (expert 3), PE 1's token 0 (expert 2); PE 1's
        // token 1 is routed nowhere.
        assert_eq!(r[1].src, vec![(0, 1), (0, 2), (1, 0)]);
        assert_eq!(r[1].expert_offsets, vec![0, 2, 3]);
        assert_eq!(r[1].expert_rows, vec![0, 2, 1]);

        // Combine with expert outputs of 1 everywhere: token = sum of its weights.
        let ones = |_: usize, _: usize| vec![bf16::ONE; 8];
        let out0 = combine(&cfg(), 0, 3, &r, ones);
        let col0: Vec<f32> = (0..3).map(|t| out0[t * 8].to_f32()).collect();
        assert_eq!(col0, vec![0.75, 1.0, 6.0]);
        let out1 = combine(&cfg(), 1, 2, &r, ones);
        assert_eq!(out1[0].to_f32(), 24.0);
        assert_eq!(out1[8].to_f32(), 0.0);

        // Combine of rows: row `row` of PE `d` is `10 * d + row + 1` everywhere, so a token's
        // output is the sum of its rows' values on the PEs it went to.
        let rows = |d: usize, row: usize| vec![bf16::from_f32((10 * d + row + 1) as f32); 8];
        let out0 = combine_rows(&cfg(), 0, 3, &r, rows);
        let col0: Vec<f32> = (0..3).map(|t| out0[t * 8].to_f32()).collect();
        // Token 0: PE 0 row 0 only; token 1: PE 1 row 0; token 2: PE 0 row 1 + PE 1 row 1.
        assert_eq!(col0, vec![1.0, 11.0, 2.0 + 12.0]);
        let out1 = combine_rows(&cfg(), 1, 2, &r, rows);
        // PE 1's token 0: PE 0 row 2 + PE 1 row 2; token 1 routed nowhere.
        assert_eq!((out1[0].to_f32(), out1[8].to_f32()), (3.0 + 13.0, 0.0));
    }

    #[test]
    fn fp8_round_trip_keeps_each_group_within_its_scale() {
        // Group 0: a ramp up to 3.5; group 1: zeros; group 2: one huge value among small ones.
        let mut row = vec![bf16::ZERO; 384];
        for (i, v) in row[..128].iter_mut().enumerate() {
            *v = bf16::from_f32(i as f32 / 128.0 * 3.5 - 1.0);
        }
        row[256] = bf16::from_f32(1000.0);
        row[257] = bf16::from_f32(0.5);
        let q = fp8_round_trip(&row);
        // The largest value of a group comes back exactly (it maps to 448).
        assert_eq!(q[256].to_f32(), 1000.0);
        assert!(q[128..256].iter().all(|v| v.to_f32() == 0.0));
        // e4m3 keeps 3 mantissa bits: within 1/16 of the value, or of the group's scale
        // times the smallest normal where the value is tiny.
        for i in 0..128 {
            let (x, y) = (row[i].to_f32(), q[i].to_f32());
            assert!(
                (x - y).abs() <= x.abs() / 16.0 + 2.5 / 448.0 * 0.02,
                "{i}: {x} -> {y}"
            );
        }
        // 0.5 next to 1000: below the group's resolution near zero, so it flushes or rounds
        // coarsely, never grows.
        assert!(q[257].to_f32() <= 0.5 + 1000.0 / 448.0 * 0.002);
    }

    #[test]
    fn sampled_routings_are_valid_and_skewed_ones_starve_some_experts() {
        let c = MoeConfig {
            max_tokens: 500,
            hidden: 8,
            top_k: 8,
            experts_per_pe: 8,
        };
        for skewed in [false, true] {
            let (idx, w) = sample_routing(&c, 2, 500, 7, skewed);
            assert_eq!(
                super::super::routing::check_routing(&c, 2, &idx, &w),
                Ok(())
            );
            assert_eq!(
                (idx.clone(), w.clone()),
                sample_routing(&c, 2, 500, 7, skewed)
            );
            let per: Vec<usize> = (0..16)
                .map(|g| idx.iter().filter(|&&x| x == g).count())
                .collect();
            if skewed {
                assert!(per[3] == 0 && per[8] == 0 && per[13] == 0, "{per:?}");
                assert!(idx[96 * 8..97 * 8].iter().all(|&x| x == -1));
                assert_eq!(idx[16 * 8 + 7], -1);
            } else {
                assert!(per.iter().all(|&p| p > 150), "{per:?}");
                assert!(idx.iter().all(|&x| x >= 0));
            }
        }
    }
}

/// The stand-in experts: pair `p` of local expert `e` (`offsets[e] <= p <
/// offsets[e + 1]`) is its received row scaled by `(e + 1) / 4`, one warp a pair.
#[pgas_kernel]
pub fn experts(
    expert_out: &mut CudaSlice<bf16>, recv_x: &SymTensor<bf16>, expert_rows: &SymTensor<i32>,
    offsets: &CudaSlice<i32>, hidden: u32,
) {
    let h = hidden as usize;
    let el = offsets.len() - 1;
    let pairs = offsets[el] as usize;
    let warps = (grid_dim_x() * block_dim_x()) as usize / 32;
    let mut p = global_thread_idx() / 32;
    while p < pairs {
        let mut e = 0usize;
        while offsets[e + 1] as usize <= p {
            e += 1;
        }
        let scale = (e + 1) as f32 * 0.25;
        let row = expert_rows[p] as usize;
        let mut c = lane_id() as usize;
        while c < h {
            expert_out[p * h + c] = (recv_x[row * h + c] as f32 * scale) as bf16;
            c += 32;
        }
        p += warps;
    }
}

/// Element `c` of token `t` on PE `pe`: a multiple of 1/8 in [-4, 4), exact in `bf16`.
pub fn x_value(pe: usize, t: usize, c: usize) -> bf16 {
    bf16::from_f32(((pe * 7 + t * 3 + c * 5) % 64) as f32 / 8.0 - 4.0)
}
