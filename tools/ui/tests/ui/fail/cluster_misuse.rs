use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<u32>, g: &mut CudaSlice<u32>, map: &TensorMap<bf16>, wide: u32) {
    let smem = dyn_shared::<bf16>();
    let words = shared_array::<u32, 4>();
    let bars = shared_array::<u64, 4>();
    // Distributed shared memory maps shared memory only.
    let v = g.cluster_peer(1);
    out[0] = v[0];
    // The multicast mask is a u16.
    tma_load_2d_multicast(&mut smem[0], map, &mut bars[0], 0, 0, wide);
    // A remote arrival needs an mbarrier (a shared u64).
    mbarrier_arrive_cluster(&mut words[0], 1);
    // The block rank is a u32.
    mbarrier_arrive_cluster(&mut bars[0], 1i32);
}

fn main() {}
