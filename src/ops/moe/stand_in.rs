//! A stand-in for a model's experts, shared by `examples/moe_dispatch.rs` and `benches/moe.rs`:
//! the tokens they dispatch ([`x_value`]) and a kernel that plays the experts between dispatch
//! and combine ([`experts`]), simple enough that the host's [`super::reference`] checks it.

use crate::prelude::*;

/// The stand-in experts: pair `p` of local expert `e` (`offsets[e] <= p <
/// offsets[e + 1]`) is its received row scaled by `(e + 1) / 4`, one warp a pair.
#[pgas_kernel]
pub fn experts(
    expert_out: &mut CudaSlice<bf16>,
    recv_x: &SymTensor<bf16>,
    expert_rows: &SymTensor<i32>,
    offsets: &CudaSlice<i32>,
    hidden: u32,
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
