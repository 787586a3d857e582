//! Element and bulk RMA at thread, warp and block scope.
use pgas::prelude::*;

#[pgas_kernel]
fn element_rma(dst: &mut SymTensor<i64>, src: &SymTensor<i64>, out: &mut CudaSlice<i64>) {
    let me = my_pe();
    let next = (me + 1) % n_pes();
    let i = global_thread_idx();
    if i < dst.len() && i < src.len() {
        p(&mut dst[i], src[i] * 2, next);
        quiet();
        out[i] = g(&src[i], next);
    }
}

#[pgas_kernel]
fn thread_rma(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, local: &mut CudaSlice<f32>, pe: i32) {
    let half = dst.len() / 2;
    put(&mut dst[0..half], &src[0..half], pe);
    put_nbi(&mut dst[half..], local, pe);
    get(local, &src[..half], pe);
    get_nbi(&mut local[half..], src, pe);
    quiet();
}

#[pgas_kernel]
fn warp_rma(dst: &mut SymTensor<u8>, src: &SymTensor<u8>, scratch: &mut CudaSlice<u8>, pe: u32) {
    let w = warp_id() as usize;
    let chunk = 32;
    let lo = w * chunk;
    let hi = lo + chunk;
    put_warp(&mut dst[lo..hi], &src[lo..hi], pe);
    get_warp(&mut scratch[lo..hi], &src[lo..hi], pe);
    put_nbi_warp(&mut dst[lo..hi], &scratch[lo..hi], pe);
    get_nbi_warp(&mut scratch[lo..hi], &dst[lo..hi], pe);
    quiet();
}

#[pgas_kernel]
fn block_rma(dst: &mut SymTensor<bf16>, src: &SymTensor<bf16>, staging: &mut CudaSlice<bf16>) {
    let pe = (my_pe() + n_pes() - 1) % n_pes();
    let per_block = dst.len() / grid_dim_x() as usize;
    let lo = block_idx_x() as usize * per_block;
    let hi = lo + per_block;
    put_block(&mut dst[lo..hi], &src[lo..hi], pe);
    get_block(&mut staging[lo..hi], &src[lo..hi], pe);
    put_nbi_block(&mut dst[lo..hi], &staging[lo..hi], pe);
    get_nbi_block(&mut staging[lo..hi], &dst[lo..hi], pe);
    quiet();
}
