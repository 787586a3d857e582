use pgas::prelude::*;
// FP8 is a storage type: arithmetic, negation, comparisons and literals need a conversion.
#[pgas_kernel]
fn k(out: &mut CudaSlice<e4m3>, x: &CudaSlice<e4m3>, y: &CudaSlice<e5m2>) {
    let a = x[0];
    let b = x[1];
    out[0] = a + b;
    out[1] = -a;
    if a < b {
        out[2] = a;
    }
    let mut c = a;
    c *= b;
    out[3] = c;
    out[4] = 0.5;
    out[5] = y[0];
    out[6] = (a as f32 + b as f32) as e4m3;
}

fn main() {}
