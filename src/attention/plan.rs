//! The host side of [`super::kernel::attention_fwd_sm90`]: a batch's sequences, the checks
//! before a launch, the specialization a head dim gets, and the launch.

use super::kernel::{attention_fwd_sm90, WG_ROWS};
use super::v_fp8::{attention_v_fp8, VT_KEYS, VT_SHARED};
use crate::gemm::{refuse, swizzled};
use crate::prelude::*;
use cudarc::driver::DevicePtr;

/// What an attention call computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Query heads.
    pub heads_q: usize,
    /// Key and value heads: `heads_q` (multi-head), a divisor of it (grouped-query: query head
    /// `h` reads key head `h / (heads_q / heads_kv)`) or 1 (multi-query).
    pub heads_kv: usize,
    /// Elements of a head: 64, 128 or 256.
    pub head_dim: usize,
    /// Whether query `i` of a sequence sees only the keys up to `i + len_k - len_q` (causal,
    /// aligned to the end of the sequence as FlashAttention does; with equal lengths, key `i`).
    pub causal: bool,
    /// The softmax scale: `None` for `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
}

/// Keys from which head dim 128 without a mask takes 176 keys a tile: below it, the last tile's
/// padding (4,096 keys are 23.3 tiles of 176) costs more than the fewer tiles save
/// (`docs/attention.md`, "Figures", has the measurement).
pub const WIDE_KEYS: usize = 16384;

/// The per-tensor scales of FP8 attention's inputs (the dequantization factors): each stored
/// e4m3 value times its tensor's scale is the value meant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fp8Scales {
    /// Q's scale.
    pub q: f32,
    /// K's scale.
    pub k: f32,
    /// V's scale.
    pub v: f32,
}

/// The kernel's comptime choices for a head dim, mask and sequence length: keys per tile and
/// the ring depth, the ones that ran fastest on an H200 (`docs/attention.md`: a deeper ring fits
/// at head dim 128 but ran slower), and whether the inputs are FP8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionConfig {
    /// Keys per K/V tile: 128; 176 at head dim 128 without a mask from [`WIDE_KEYS`] keys on
    /// (fewer tiles, so less of each tile's fixed cost; FlashAttention-3's tile); 64 at head dim
    /// 256 (whose O takes 128 registers a thread).
    pub bn: u32,
    /// Slots of each of the K and V rings.
    pub stages: u32,
    /// Multiplying warpgroups, 64 query rows each: 2, or 3 at head dim 64, whose tile's
    /// exponentials take as long as its matmuls, so that more warps share the issue slots
    /// (FlashAttention-3's 192-row tile there).
    pub wgs: u32,
    /// FP8 (e4m3) Q, K and transposed V ([`Attention::run_fp8`]).
    pub fp8: bool,
}

impl AttentionConfig {
    /// The specialization for `head_dim` (64, 128 or 256), with or without the causal mask, for
    /// a batch whose longest key range is `keys` tokens.
    pub fn for_shape(head_dim: usize, causal: bool, keys: usize) -> AttentionConfig {
        let (bn, stages, wgs) = match (head_dim, causal) {
            (256, _) => (64, 2, 2),
            (128, false) if keys >= WIDE_KEYS => (176, 2, 2),
            (128, _) => (128, 2, 2),
            _ => (128, 4, 3),
        };
        AttentionConfig {
            bn,
            stages,
            fp8: false,
            wgs,
        }
    }

    /// The FP8 specialization for `head_dim`: tiles of [`VT_KEYS`] keys (a row of the
    /// transposed V's box), a ring of 2 (faster than 3 or 4 on an H200: `docs/attention.md`,
    /// "Figures"), three multiplying warpgroups at head dim 64 as in bf16.
    pub fn for_fp8(head_dim: usize) -> AttentionConfig {
        AttentionConfig {
            bn: VT_KEYS as u32,
            stages: 2,
            fp8: true,
            wgs: if head_dim == 64 { 3 } else { 2 },
        }
    }

    /// The kernel's comptime values for this specialization, in its parameters' order (`d`,
    /// `bn`, `stages`, `causal`, `fp8`, `wgs`): what a prewarm or a compile test passes.
    pub fn comptime(&self, head_dim: usize, causal: bool) -> [i128; 6] {
        [
            head_dim as i128,
            self.bn as i128,
            self.stages as i128,
            causal as i128,
            self.fp8 as i128,
            self.wgs as i128,
        ]
    }

    /// Query rows of a block: 64 for each multiplying warpgroup.
    pub fn block_rows(&self) -> usize {
        WG_ROWS * self.wgs as usize
    }

    /// Threads of a block: the feeding warpgroup and the multiplying ones.
    pub fn threads(&self) -> u32 {
        128 * (1 + self.wgs)
    }

    /// Dynamic shared memory a block needs: Q's tile, the rings of K and V tiles, the mbarriers
    /// (Q's, and `full` and `empty` of each slot of each ring). A tile's row is 128 bytes at
    /// least with FP8 (at head dim 64, two heads' values; V's slot is K's size).
    pub fn shared_bytes(&self, head_dim: usize) -> u32 {
        let row = if self.fp8 {
            head_dim.max(128)
        } else {
            2 * head_dim
        };
        let rows = self.block_rows() + self.stages as usize * 2 * self.bn as usize;
        (rows * row + 8 * (1 + 4 * self.stages as usize)) as u32
    }
}

/// A batch of sequences planned for attention: their query lengths and key ranges on the host
/// (for the checks, the grid and the FLOP count) and on the GPU (for the kernel). Build it once
/// per batch layout and run it on any tensors of that layout.
pub struct Attention {
    params: AttentionParams,
    cfg: AttentionConfig,
    /// Each sequence's queries and its keys' range in K and V.
    seqs: Vec<(usize, (usize, usize))>,
    cu_q: CudaSlice<u32>,
    /// Each sequence's key range and its first column in the transposed FP8 V.
    k_ranges: CudaSlice<u32>,
    /// Columns of the transposed FP8 V: each sequence's keys in whole tiles of [`VT_KEYS`].
    vt_cols: usize,
}

/// The name its refusals give.
const NAME: &str = "attention_fwd_sm90";

impl Attention {
    /// `batch` sequences of `len_q` queries and `len_k` keys each.
    pub fn fixed(
        pgas: &Pgas, params: AttentionParams, batch: usize, (len_q, len_k): (usize, usize),
    ) -> crate::Result<Attention> {
        Attention::varlen(pgas, params, &vec![len_q; batch], &vec![len_k; batch])
    }

    /// Sequences of their own lengths, packed one after another: sequence `b` is the next
    /// `lens_q[b]` tokens of Q and O and the next `lens_k[b]` of K and V.
    pub fn varlen(
        pgas: &Pgas, params: AttentionParams, lens_q: &[usize], lens_k: &[usize],
    ) -> crate::Result<Attention> {
        if lens_q.len() != lens_k.len() {
            return refuse(
                NAME,
                format!(
                    "{} query lengths and {} key lengths: one of each per sequence",
                    lens_q.len(),
                    lens_k.len()
                ),
            );
        }
        let mut at = 0;
        let ranges: Vec<(usize, usize)> = lens_k
            .iter()
            .map(|&n| {
                at += n;
                (at - n, at)
            })
            .collect();
        Attention::with_key_ranges(pgas, params, lens_q, &ranges)
    }

    /// Sequences whose queries are packed one after another (sequence `b` is the next
    /// `lens_q[b]` tokens of Q and O) and whose keys are any range of K and V: sequence `b` sees
    /// tokens `ranges[b].0..ranges[b].1` (ranges may overlap; causal masking aligns each
    /// sequence's queries to the end of its range). Context-parallel attention plans its steps
    /// this way.
    pub fn with_key_ranges(
        pgas: &Pgas, params: AttentionParams, lens_q: &[usize], ranges: &[(usize, usize)],
    ) -> crate::Result<Attention> {
        if let Some(why) = params_error(&params) {
            return refuse(NAME, why);
        }
        if lens_q.is_empty() || lens_q.len() != ranges.len() {
            return refuse(
                NAME,
                format!(
                    "{} query lengths and {} key ranges: one of each per sequence, at least one \
                 sequence",
                    lens_q.len(),
                    ranges.len()
                ),
            );
        }
        if let Some((b, r)) = ranges.iter().enumerate().find(|(_, r)| r.0 > r.1) {
            return refuse(
                NAME,
                format!("sequence {b}'s key range {r:?} ends before it starts"),
            );
        }
        let word = |n: usize| u32::try_from(n).ok();
        let (mut at, mut vt_at) = (0usize, 0usize);
        let mut cq = vec![0u32];
        let mut kr = Vec::new();
        for (&n, &(start, end)) in lens_q.iter().zip(ranges) {
            at += n;
            let words = (word(at), word(start), word(end), word(vt_at));
            let (Some(a), Some(b), Some(e), Some(v)) = words else {
                return refuse(NAME, "more than 2^32 - 1 tokens in the batch".to_string());
            };
            cq.push(a);
            kr.extend([b, e, v]);
            vt_at += (end - start).next_multiple_of(VT_KEYS);
        }
        let stream = pgas.stream();
        Ok(Attention {
            params,
            cfg: AttentionConfig::for_shape(
                params.head_dim,
                params.causal,
                ranges.iter().map(|r| r.1 - r.0).max().unwrap_or(0),
            ),
            seqs: lens_q.iter().copied().zip(ranges.iter().copied()).collect(),
            cu_q: stream.clone_htod(&cq)?,
            k_ranges: stream.clone_htod(&kr)?,
            vt_cols: vt_at,
        })
    }

    /// Tokens of Q (and O), and of K (and V) the batch reads (up to the end of its last key
    /// range).
    pub fn tokens(&self) -> (usize, usize) {
        let q = self.seqs.iter().map(|s| s.0).sum();
        let k = self.seqs.iter().map(|s| s.1 .1).max().unwrap_or(0);
        (q, k)
    }

    /// The multiply-adds' floating-point operations of one call, counted as FlashAttention
    /// does: `4 d` for each (query, visible key) pair of each query head.
    pub fn flops(&self) -> f64 {
        let pairs: f64 = self
            .seqs
            .iter()
            .map(|&(q, (b, e))| visible_pairs(q, e - b, self.params.causal))
            .sum();
        4.0 * pairs * (self.params.head_dim * self.params.heads_q) as f64
    }

    /// `O = softmax(scale Q Kᵀ) V` for every sequence and query head, and the log-sum-exp of
    /// each row (natural log; -1e30 for a row that sees no key), on the pgas stream. A batch
    /// with query tokens needs at least one key token. Q and O are
    /// `[tokens_q][heads_q][head_dim]` bf16, K and V `[tokens_k][heads_kv][head_dim]`, LSE
    /// `[tokens_q][heads_q]` f32. `checked` runs the variant that checks every index. Needs
    /// sm_90a (H100, H200).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self, pgas: &Pgas, o: &mut CudaSlice<bf16>, lse: &mut CudaSlice<f32>, q: &CudaSlice<bf16>,
        k: &CudaSlice<bf16>, v: &CudaSlice<bf16>, checked: bool,
    ) -> crate::Result<()> {
        let kv_rows = self.check_lengths([o.len(), lse.len(), q.len(), k.len()])?;
        self.check_v(v.len(), kv_rows)?;
        let p = &self.params;
        let (tq, _) = self.tokens();
        if tq == 0 {
            return Ok(());
        }
        let (d, bn) = (p.head_dim, self.cfg.bn as usize);
        let stream = pgas.stream();
        let map =
            |rows: usize, heads: usize, box_rows: usize| swizzled(rows, heads * d, box_rows, 64);
        let q_map =
            TensorMap::tiled_2d_ragged(stream, q, map(tq, p.heads_q, self.cfg.block_rows()))?;
        let k_map = TensorMap::tiled_2d_ragged(stream, k, map(kv_rows, p.heads_kv, bn))?;
        let v_map = TensorMap::tiled_2d_ragged(stream, v, map(kv_rows, p.heads_kv, bn))?;
        let scale = p.scale.unwrap_or(1.0 / (d as f32).sqrt());
        self.launch(
            pgas,
            self.cfg,
            (o, lse),
            [&q_map, &k_map, &v_map],
            (scale, 1.0),
            checked,
        )
    }

    /// Elements of the transposed V that [`Attention::run_fp8`] reads and
    /// [`Attention::transpose_v`] writes: `[heads_kv][head_dim][columns]`, each sequence's keys
    /// in whole tiles of [`VT_KEYS`].
    pub fn vt_len(&self) -> usize {
        self.params.heads_kv * self.params.head_dim * self.vt_cols
    }

    /// V (`[tokens_k][heads_kv][head_dim]` e4m3, as K) into `vt` ([`Attention::vt_len`]
    /// elements), the layout [`Attention::run_fp8`] reads: FP8 `wgmma` takes V K-major, and its
    /// keys come in the order the kernel packs P in (`attention_v_fp8`). Once for a batch's V,
    /// which any number of runs then read (a KV cache kept in this layout pays it once).
    pub fn transpose_v(
        &self, pgas: &Pgas, vt: &mut CudaSlice<e4m3>, v: &CudaSlice<e4m3>,
    ) -> crate::Result<()> {
        let p = &self.params;
        let kv_rows = v.len() / (p.heads_kv * p.head_dim);
        self.check_v(v.len(), kv_rows.max(self.tokens().1))?;
        self.check_vt(vt.len())?;
        if self.vt_cols == 0 {
            return Ok(());
        }
        let longest = self.seqs.iter().map(|s| s.1 .1 - s.1 .0).max().unwrap_or(0);
        let launch = LaunchConfig {
            grid: (
                longest.div_ceil(VT_KEYS) as u32,
                p.heads_kv as u32,
                self.seqs.len() as u32,
            ),
            ..LaunchConfig::blocks(1, 256).with_shared_mem(VT_SHARED)
        };
        attention_v_fp8::launch(
            pgas,
            launch,
            vt,
            v,
            &self.k_ranges,
            p.heads_kv,
            p.head_dim,
            self.vt_cols,
        )
    }

    /// [`Attention::run`] on FP8: Q and K `e4m3` in `run`'s layouts, V transposed by
    /// [`Attention::transpose_v`], each tensor with its scale; O (bf16) and the LSE as `run`'s.
    /// P is rounded to e4m3 for `P V` (FlashAttention-3's FP8 does the same), so O is within
    /// FP8's rounding of the exact attention. Head dim 64 needs an even number of query and of
    /// key heads (a tile's 128-byte rows hold two heads).
    pub fn run_fp8(
        &self, pgas: &Pgas, o: &mut CudaSlice<bf16>, lse: &mut CudaSlice<f32>,
        (q, k, vt): (&CudaSlice<e4m3>, &CudaSlice<e4m3>, &CudaSlice<e4m3>), scales: Fp8Scales,
        checked: bool,
    ) -> crate::Result<()> {
        let kv_rows = self.check_lengths([o.len(), lse.len(), q.len(), k.len()])?;
        self.check_vt(vt.len())?;
        let p = &self.params;
        let (d, hq, hkv) = (p.head_dim, p.heads_q, p.heads_kv);
        if d == 64 && (hq % 2 == 1 || hkv % 2 == 1) {
            return refuse(
                NAME,
                format!(
                    "FP8 at head dim 64 with {hq} query and {hkv} key heads: both must be even                      (a 128-byte tile row holds two heads); run bf16 instead"
                ),
            );
        }
        let bad = [scales.q, scales.k, scales.v]
            .into_iter()
            .find(|s| !s.is_finite() || *s <= 0.0);
        if let Some(s) = bad {
            return refuse(NAME, format!("FP8 scale {s}: a finite positive number"));
        }
        let (tq, _) = self.tokens();
        if tq == 0 {
            return Ok(());
        }
        let cfg = AttentionConfig::for_fp8(p.head_dim);
        let stream = pgas.stream();
        let (pq, _rq) = q.device_ptr(stream);
        let (pk, _rk) = k.device_ptr(stream);
        let (pv, _rv) = vt.device_ptr(stream);
        // The maps count pairs of FP8 values (one bf16 column), so a box is 128 bytes a row.
        let pairs = |heads: usize| heads * d / 2;
        // SAFETY: Q, K and Vt hold tq x hq x d, kv_rows x hkv x d and vt_len() bytes (checked
        // above), so many pairs, borrowed until the launch below is enqueued; the kernel only
        // reads them, and the maps' rows past the end read as zeros.
        let (q_map, k_map, v_map) = unsafe {
            (
                TensorMap::<bf16>::from_device_ptr_ragged(
                    pq,
                    q.len() / 2,
                    swizzled(tq, pairs(hq), cfg.block_rows(), 64),
                )?,
                TensorMap::<bf16>::from_device_ptr_ragged(
                    pk,
                    k.len() / 2,
                    swizzled(kv_rows, pairs(hkv), cfg.bn as usize, 64),
                )?,
                TensorMap::<bf16>::from_device_ptr(
                    pv,
                    vt.len() / 2,
                    swizzled(hkv * d, self.vt_cols / 2, d, 64),
                )?,
            )
        };
        let scale = p.scale.unwrap_or(1.0 / (d as f32).sqrt()) * scales.q * scales.k;
        self.launch(
            pgas,
            cfg,
            (o, lse),
            [&q_map, &k_map, &v_map],
            (scale, scales.v),
            checked,
        )
    }

    /// Launches the kernel of `cfg` on the maps of Q, K and V (or Vt) with the softmax scale
    /// (natural base) and O's scale.
    fn launch(
        &self, pgas: &Pgas, cfg: AttentionConfig,
        (o, lse): (&mut CudaSlice<bf16>, &mut CudaSlice<f32>),
        [q_map, k_map, v_map]: [&TensorMap<bf16>; 3], (scale, o_scale): (f32, f32), checked: bool,
    ) -> crate::Result<()> {
        let p = &self.params;
        let max_q = self.seqs.iter().map(|s| s.0).max().unwrap_or(0);
        let launch = LaunchConfig {
            grid: (
                max_q.div_ceil(cfg.block_rows()) as u32,
                p.heads_q as u32,
                self.seqs.len() as u32,
            ),
            ..LaunchConfig::blocks(1, cfg.threads()).with_shared_mem(cfg.shared_bytes(p.head_dim))
        };
        let stream = pgas.stream();
        // SAFETY: unchecked only as the caller asked, where every buffer holds exactly what the
        // batch's lengths and heads need (checked by the callers) and the offsets were built from
        // those lengths, so every index the kernel forms is in bounds; the maps' rows past the
        // end read as zeros.
        unsafe {
            attention_fwd_sm90::launch_checked_if_on(
                pgas,
                stream,
                launch,
                checked,
                o,
                lse,
                q_map,
                k_map,
                v_map,
                &self.cu_q,
                &self.k_ranges,
                p.heads_q,
                p.heads_q / p.heads_kv,
                scale * std::f32::consts::LOG2_E,
                o_scale,
                p.head_dim as u32,
                cfg.bn,
                cfg.stages,
                p.causal,
                cfg.fp8,
                cfg.wgs,
            )
        }
    }

    /// Checks the lengths of `[o, lse, q, k]` against the batch ([`Attention::run`]'s
    /// layouts) and returns the token rows K holds.
    fn check_lengths(&self, [o, lse, q, k]: [usize; 4]) -> crate::Result<usize> {
        let p = &self.params;
        let (tq, tk) = self.tokens();
        let (d, hq, hkv) = (p.head_dim, p.heads_q, p.heads_kv);
        if tq > 0 && tk == 0 {
            return refuse(
                NAME,
                format!(
                "a batch of {tq} query tokens and no key at all: give at least one sequence a key"
            ),
            );
        }
        // K and V may hold more tokens than the key ranges read (a range of a larger buffer).
        let kv_rows = k / (hkv * d);
        for (what, len, want, exact) in [
            ("Q", q, tq * hq * d, true),
            ("O", o, tq * hq * d, true),
            ("K", k, tk * hkv * d, false),
            ("LSE", lse, tq * hq, true),
        ] {
            let whole = len.is_multiple_of(hkv * d);
            if (exact && len != want) || (!exact && (len < want || !whole)) {
                return refuse(
                    NAME,
                    format!(
                    "{what} has {len} elements where the batch's {tq} query tokens and keys up \
                     to token {tk}, {hq} query and {hkv} key heads of {d} need {}{want}",
                    if exact {
                        ""
                    } else {
                        "whole tokens and at least "
                    }
                ),
                );
            }
        }
        Ok(kv_rows)
    }

    /// Refuses a V of `len` elements unless it is `kv_rows` whole tokens (as many as K holds, or
    /// for `transpose_v` at least the batch's).
    fn check_v(&self, len: usize, kv_rows: usize) -> crate::Result<()> {
        let p = &self.params;
        let want = kv_rows * p.heads_kv * p.head_dim;
        if len != want {
            return refuse(
                NAME,
                format!(
                    "V has {len} elements where {kv_rows} tokens (K's, or at least the \
                     batch's) of {} key heads of {} need {want}",
                    p.heads_kv, p.head_dim
                ),
            );
        }
        Ok(())
    }

    /// Refuses a transposed V whose length is not [`Attention::vt_len`].
    fn check_vt(&self, len: usize) -> crate::Result<()> {
        if len != self.vt_len() {
            return refuse(
                NAME,
                format!(
                    "the transposed V has {len} elements where this batch needs {} \
                     (Attention::vt_len; Attention::transpose_v writes it)",
                    self.vt_len()
                ),
            );
        }
        Ok(())
    }
}

impl AttentionParams {
    /// Why buffers of `lens` elements (Q, O, K, V) are not `tokens` tokens of these heads, if
    /// they are not: the check of the context-parallel forms, whose every PE holds a slice.
    pub(crate) fn slice_error(&self, tokens: usize, lens: [usize; 4]) -> Option<String> {
        let (hq, hkv, d) = (self.heads_q, self.heads_kv, self.head_dim);
        ["Q", "O", "K", "V"]
            .into_iter()
            .zip(lens)
            .zip([hq, hq, hkv, hkv])
            .find(|&((_, len), heads)| len != tokens * heads * d)
            .map(|((what, len), heads)| {
                format!(
                    "{what} has {len} elements where {tokens} tokens of {heads} heads of {d} \
                     need {}",
                    tokens * heads * d
                )
            })
    }
}

/// Why `params` cannot run, if it cannot.
fn params_error(p: &AttentionParams) -> Option<String> {
    if ![64, 128, 256].contains(&p.head_dim) {
        return Some(format!(
            "head dim {}: the kernel takes 64, 128 or 256",
            p.head_dim
        ));
    }
    if p.heads_q == 0 || p.heads_kv == 0 || !p.heads_q.is_multiple_of(p.heads_kv) {
        return Some(format!(
            "{} query heads and {} key heads: the key heads must divide the query heads \
             (equal, grouped-query, or 1 for multi-query)",
            p.heads_q, p.heads_kv
        ));
    }
    match p.scale {
        Some(s) if !s.is_finite() || s <= 0.0 => {
            Some(format!("softmax scale {s}: a finite positive number"))
        }
        _ => None,
    }
}

/// (query, key) pairs that take part in a sequence of `q` queries and `k` keys.
fn visible_pairs(q: usize, k: usize, causal: bool) -> f64 {
    if !causal {
        return (q * k) as f64;
    }
    // Query i sees keys 0..=i + k - q, clamped to 0..k.
    (0..q)
        .map(|i| ((i + k) as i64 - q as i64 + 1).clamp(0, k as i64) as f64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(d: usize, hq: usize, hkv: usize) -> AttentionParams {
        AttentionParams {
            heads_q: hq,
            heads_kv: hkv,
            head_dim: d,
            causal: false,
            scale: None,
        }
    }

    #[test]
    fn long_unmasked_key_ranges_take_the_wide_tile_at_head_dim_128() {
        let bn = |d, causal, keys| AttentionConfig::for_shape(d, causal, keys).bn;
        assert_eq!(bn(128, false, WIDE_KEYS - 1), 128);
        assert_eq!(bn(128, false, WIDE_KEYS), 176);
        assert_eq!(bn(128, true, WIDE_KEYS), 128);
        assert_eq!(bn(64, false, WIDE_KEYS), 128);
        assert_eq!(bn(256, false, WIDE_KEYS), 64);
    }

    #[test]
    fn every_head_dim_fits_shared_memory() {
        for d in [64, 128, 256] {
            for (causal, keys) in [(false, 128), (false, WIDE_KEYS), (true, WIDE_KEYS)] {
                let bytes = AttentionConfig::for_shape(d, causal, keys).shared_bytes(d);
                assert!(
                    bytes <= 227 * 1024,
                    "head dim {d}, causal {causal}: {bytes} bytes"
                );
            }
            // FP8: rows of 128 bytes at least (two heads at head dim 64), Q's tile 192 rows
            // there (three multiplying warpgroups), 128 elsewhere.
            let cfg = AttentionConfig::for_fp8(d);
            let fp8 = cfg.shared_bytes(d);
            let row = d.max(128);
            let q_rows = if d == 64 { 192 } else { 128 };
            assert_eq!(cfg.block_rows(), q_rows);
            assert_eq!(
                fp8 as usize,
                (q_rows + 2 * 2 * 128) * row + 8 * 9,
                "FP8 head dim {d}"
            );
            assert!(fp8 <= 227 * 1024, "FP8 head dim {d}: {fp8} bytes");
        }
    }

    #[test]
    fn unsupported_params_are_named() {
        assert_eq!(params_error(&params(128, 32, 8)), None);
        let e = params_error(&params(96, 8, 8)).unwrap();
        assert!(e.contains("64, 128 or 256"), "{e}");
        let e = params_error(&params(64, 12, 8)).unwrap();
        assert!(e.contains("must divide the query heads"), "{e}");
        let bad = AttentionParams {
            scale: Some(f32::NAN),
            ..params(64, 8, 8)
        };
        assert!(params_error(&bad).unwrap().contains("finite positive"));
    }

    #[test]
    fn a_slice_of_the_wrong_size_is_named() {
        let p = params(64, 8, 2);
        let (q, kv) = (10 * 8 * 64, 10 * 2 * 64);
        assert_eq!(p.slice_error(10, [q, q, kv, kv]), None);
        let e = p.slice_error(10, [q, q, kv, kv - 1]).unwrap();
        assert_eq!(
            e,
            "V has 1279 elements where 10 tokens of 2 heads of 64 need 1280"
        );
    }

    #[test]
    fn causal_pairs_are_counted_from_the_end() {
        assert_eq!(visible_pairs(4, 4, false), 16.0);
        assert_eq!(visible_pairs(4, 4, true), 10.0);
        // Two queries at the end of six keys: they see 5 and 6.
        assert_eq!(visible_pairs(2, 6, true), 11.0);
        // More queries than keys: the first two see none.
        assert_eq!(visible_pairs(4, 2, true), 3.0);
    }
}
