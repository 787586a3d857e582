use pgas::prelude::*;
#[pgas_kernel(max_threads = 128)]
fn k(c: &mut CudaSlice<f32>, h: &mut CudaSlice<f16>) {
    let s8 = dyn_shared::<e4m3>();
    let s5 = dyn_shared::<e5m2>();
    let s16 = dyn_shared::<bf16>();
    // FP8 operands accumulate in f32 only: no f16 accumulator.
    let mut acc16 = frag_c::<f16, 8>();
    wgmma_m64n64k32(&mut acc16[0], &s8[0], &s8[8192]);
    // Nor a buffer of f16 in place of the accumulator.
    wgmma_m64n64k32(&mut h[0], &s8[0], &s8[8192]);
    let mut acc = frag_c::<f32, 8>();
    // FP8 tiles with the 16-bit row, and 16-bit tiles with the FP8 row.
    wgmma_m64n64k16(&mut acc[0], &s8[0], &s8[8192]);
    wgmma_m64n128k32(&mut acc[0], &s16[0], &s16[4096]);
    // Both operands of one FP8 type.
    wgmma_m64n256k32(&mut acc[0], &s8[0], &s5[8192]);
    c[0] = acc[0][0];
}

fn main() {}
