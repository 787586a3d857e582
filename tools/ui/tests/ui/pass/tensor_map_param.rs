use pgas::prelude::*;

/// A kernel with a tensor map parameter: its launcher takes `&TensorMap<bf16>`.
#[pgas_kernel(max_threads = 128)]
fn tile_in(c: &mut CudaSlice<bf16>, a_map: &TensorMap<bf16>) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    if thread_idx_x() == 0 {
        mbarrier_init(&mut bars[512], 1);
        mbarrier_arrive_expect_tx(&mut bars[512], 8192);
        tma_load_2d(&mut smem[0], a_map, &mut bars[512], 0, 0);
    }
    sync_threads();
    mbarrier_wait(&bars[512], 0);
    c[thread_idx_x() as usize] = smem[thread_idx_x() as usize];
}

#[allow(dead_code)]
fn launch_it(p: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>) -> pgas::Result<()> {
    let tile = Tile2d {
        rows: 64,
        cols: 64,
        box_rows: 64,
        box_cols: 64,
        swizzle: Swizzle::B128,
    };
    let map = TensorMap::tiled_2d(p.stream(), a, tile)?;
    tile_in::launch(
        p,
        LaunchConfig::blocks(1, 128).with_shared_mem(8200),
        c,
        &map,
    )
}
