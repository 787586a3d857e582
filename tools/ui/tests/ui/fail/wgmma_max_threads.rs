use pgas::prelude::*;
// wgmma needs whole warpgroups; a 96-thread bound cannot hold one.
#[pgas_kernel(max_threads = 96)]
fn k(c: &mut CudaSlice<f32>) {
    let smem = dyn_shared::<bf16>();
    let mut acc = frag_c::<f32, 8>();
    wgmma_fence();
    wgmma_m64n64k16(&mut acc[0], &smem[0], &smem[4096]);
    wgmma_commit();
    wgmma_wait(0);
    c[0] = acc[0][0];
}

fn main() {}
