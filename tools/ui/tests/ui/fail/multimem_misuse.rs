use pgas::prelude::*;
// Floating-point min over the copies (multimem has integer min/max only), a multicast store
// into a local buffer (multicast addresses exist only for symmetric memory), and a load-reduce
// into a mismatched type.
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>, local: &mut CudaSlice<u64>, team: Team) {
    let a = multimem_ld_min(&x[0], team);
    multimem_st(&mut local[0], team, 1u64);
    let b: i32 = multimem_ld_add(&x[1], team);
    x[2] = a + (b as f32);
}

fn main() {}
