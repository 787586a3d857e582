//! The layout changes around the all-to-alls of [`super::UlyssesAttention`]: a PE's slice with
//! every head into one block of heads per destination PE, and back.

use crate::prelude::*;

/// `dst[p][t][j][x] = src[t][p * hp + j][x]` for the `tokens` rows of `src` (`[tokens][heads][d]`,
/// `heads = pes * hp`): block `p` of `dst` is what PE `p` receives (heads `p hp ..` of every
/// token of this PE), contiguous for the all-to-all. One thread an element.
#[pgas_kernel]
pub fn ulysses_pack(
    dst: &mut SymTensor<bf16>,
    src: &CudaSlice<bf16>,
    tokens: usize,
    hp: usize,
    d: usize,
    pes: usize,
) {
    let i = global_thread_idx();
    if i < dst.len() && i < tokens * pes * hp * d {
        dst[i] = src[unpacked(i, tokens, hp, d, pes)];
    }
}

/// The inverse of [`ulysses_pack`]: `dst[t][p * hp + j][x] = src[p][t][j][x]`, block `p` of
/// `src` being heads `p hp ..` of this PE's tokens as PE `p` returned them. One thread an
/// element.
#[pgas_kernel]
pub fn ulysses_unpack(
    dst: &mut CudaSlice<bf16>,
    src: &SymTensor<bf16>,
    tokens: usize,
    hp: usize,
    d: usize,
    pes: usize,
) {
    let i = global_thread_idx();
    if i < src.len() && i < tokens * pes * hp * d {
        dst[unpacked(i, tokens, hp, d, pes)] = src[i];
    }
}

/// Where element `i` of the packed layout `[pes][tokens][hp][d]` is in `[tokens][pes hp][d]`.
#[pgas_device]
fn unpacked(i: usize, tokens: usize, hp: usize, d: usize, pes: usize) -> usize {
    let x = i % d;
    let j = (i / d) % hp;
    let t = (i / (d * hp)) % tokens;
    let p = i / (d * hp * tokens);
    (t * pes * hp + p * hp + j) * d + x
}
