use pgas::prelude::*;
#[pgas_kernel]
fn k(c: &mut CudaSlice<f32>, g: &CudaSlice<bf16>, a_map: &TensorMap<f16>, n: u32) {
    let smem = dyn_shared::<bf16>();
    let words = dyn_shared::<u32>();
    let bars = dyn_shared::<u64>();
    let mut acc = frag_c::<f32, 8>();
    // A wgmma operand in global memory.
    wgmma_m64n64k16(&mut acc[0], &g[0], &smem[0]);
    // An mbarrier that is not a shared u64.
    mbarrier_init(&mut words[0], 1);
    // A tile of f16 into a bf16 buffer.
    tma_load_2d(&mut smem[0], a_map, &mut bars[0], 0, 0);
    // wgmma_wait's count is an immediate.
    wgmma_wait(n);
    c[0] = acc[0][0];
}

#[pgas_kernel]
fn m(map: &mut TensorMap<bf16>) {}

fn main() {}
