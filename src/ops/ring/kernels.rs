//! The kernels around [`super::RingAttention`]'s attention steps: K and V into and out of a
//! symmetric ring slot, and the merge of one step's partial result into the running one.

use crate::prelude::*;

/// `dst[offset + i] = src[i]` for every element of `src`: this PE's K (at 0) and V (after it)
/// into ring slot `dst`, one thread an element.
#[pgas_kernel]
pub fn ring_stage(dst: &mut SymTensor<bf16>, src: &CudaSlice<bf16>, offset: usize) {
    let i = global_thread_idx();
    if i < src.len() && offset + i < dst.len() {
        dst[offset + i] = src[i];
    }
}

/// `dst[i] = src[offset + i]` for every element of `dst`: K or V out of the ring slot `src`,
/// for the attention kernel, one thread an element.
#[pgas_kernel]
pub fn ring_unstage(dst: &mut CudaSlice<bf16>, src: &SymTensor<bf16>, offset: usize) {
    let i = global_thread_idx();
    if i < dst.len() && offset + i < src.len() {
        dst[i] = src[offset + i];
    }
}

/// Merges one step's partial attention (`o_s`, `lse_s`) into the running one (`acc`,
/// `lse_acc`), one thread a (token, head) row of `d` values: each weighs by `exp` of its
/// log-sum-exp, so the merge of every step is the attention over all the keys. A row that saw
/// no key (log-sum-exp -1e30) weighs 0. With `first` the running result is replaced; with
/// `last` the merged row is also written, rounded, to `o`.
#[pgas_kernel]
pub fn ring_combine(
    acc: &mut CudaSlice<f32>, lse_acc: &mut CudaSlice<f32>, o: &mut CudaSlice<bf16>,
    o_s: &CudaSlice<bf16>, lse_s: &CudaSlice<f32>, d: usize, #[comptime] first: bool,
    #[comptime] last: bool,
) {
    let row = global_thread_idx();
    if row >= lse_s.len() || row >= lse_acc.len() || (row + 1) * d > acc.len() {
        return;
    }
    let ls = lse_s[row];
    let mut wa = 1.0f32;
    let mut ws = 1.0f32;
    let mut lse = ls;
    if !first {
        let la = lse_acc[row];
        let m = max(la, ls);
        let ea = exp(la - m);
        let es = exp(ls - m);
        lse = m + ln(ea + es);
        wa = ea / (ea + es);
        ws = es / (ea + es);
    }
    for x in 0..d {
        let i = row * d + x;
        // First: the running result is not read (it may hold anything, NaN included).
        let v = if first {
            o_s[i] as f32
        } else {
            acc[i] * wa + o_s[i] as f32 * ws
        };
        acc[i] = v;
        if last && i < o.len() {
            o[i] = v as bf16;
        }
    }
    lse_acc[row] = lse;
}
