use pgas::prelude::*;

/// FP8 buffers, an FP8 scalar and an FP8 tensor map: the launcher takes the host types.
#[pgas_kernel(max_threads = 128)]
fn quantize(
    q: &mut CudaSlice<e4m3>, r: &mut SymTensor<e5m2>, x: &CudaSlice<f32>, fill: e4m3,
    a_map: &TensorMap<e4m3>,
) {
    let smem = dyn_shared::<e4m3>();
    let bars = dyn_shared::<u64>();
    let i = thread_idx_x() as usize;
    if i == 0 {
        mbarrier_init(&mut bars[1024], 1);
        mbarrier_arrive_expect_tx(&mut bars[1024], 8192);
        tma_load_2d(&mut smem[0], a_map, &mut bars[1024], 0, 0);
    }
    sync_threads();
    mbarrier_wait(&bars[1024], 0);
    q[i] = (x[i] + smem[i] as f32) as e4m3;
    r[i] = fill as e5m2;
}

#[allow(dead_code)]
fn launch_it(p: &Pgas, x: &CudaSlice<f32>) -> Result<(), Box<dyn std::error::Error>> {
    let mut q = p.stream().alloc_zeros::<e4m3>(128)?;
    let mut r = p.alloc::<e5m2>(128)?;
    let a = p.alloc_from(&vec![e4m3::from_f32(1.5); 64 * 128])?;
    let tile = Tile2d {
        rows: 64,
        cols: 128,
        box_rows: 64,
        box_cols: 128,
        swizzle: Swizzle::B128,
    };
    let map = TensorMap::tiled_2d_sym(&a, tile)?;
    let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(8200);
    quantize::launch(p, cfg, &mut q, &mut r, x, e4m3::from_f32(0.25), &map)?;
    Ok(())
}
