use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &CudaSlice<bf16>, pending: u32, #[comptime] stages: u32) {
    let s = dyn_shared::<bf16>();
    cp_async_16(&mut s[0], &x[0]);
    cp_async_commit();
    // An immediate of the instruction: a literal or comptime value is fine...
    cp_async_wait(stages - 1);
    // ... a launch argument is not.
    cp_async_wait(pending);
}

fn main() {}
