//! The layout changes around the all-to-alls of [`super::UlyssesAttention`]: a PE's slice with
//! every head into one block of heads per destination PE, and back.

use crate::prelude::*;

/// The two layouts: `[tokens][pes hp][d]` (unpacked) and `[pes][tokens][hp][d]` (packed).
#[pgas_params]
pub struct Packing {
    tokens: usize,
    hp: usize,
    d: usize,
    pes: usize,
}

/// `dst[p][t][j][x] = src[t][p * hp + j][x]` for the `tokens` rows of `src` (`[tokens][heads][d]`,
/// `heads = pes * hp`): block `p` of `dst` is what PE `p` receives (heads `p hp ..` of every
/// token of this PE), contiguous for the all-to-all. One thread an element.
#[pgas_kernel]
pub fn ulysses_pack(dst: &mut SymTensor<bf16>, src: &CudaSlice<bf16>, l: Packing) {
    let i = global_thread_idx();
    if i < dst.len() && i < l.tokens * l.pes * l.hp * l.d {
        dst[i] = src[unpacked(i, l)];
    }
}

/// The inverse of [`ulysses_pack`]: `dst[t][p * hp + j][x] = src[p][t][j][x]`, block `p` of
/// `src` being heads `p hp ..` of this PE's tokens as PE `p` returned them. One thread an
/// element.
#[pgas_kernel]
pub fn ulysses_unpack(dst: &mut CudaSlice<bf16>, src: &SymTensor<bf16>, l: Packing) {
    let i = global_thread_idx();
    if i < src.len() && i < l.tokens * l.pes * l.hp * l.d {
        dst[unpacked(i, l)] = src[i];
    }
}

/// Where element `i` of the packed layout is in the unpacked one.
#[pgas_device]
fn unpacked(i: usize, l: Packing) -> usize {
    let x = i % l.d;
    let j = (i / l.d) % l.hp;
    let t = (i / (l.d * l.hp)) % l.tokens;
    let p = i / (l.d * l.hp * l.tokens);
    (t * l.pes * l.hp + p * l.hp + j) * l.d + x
}
