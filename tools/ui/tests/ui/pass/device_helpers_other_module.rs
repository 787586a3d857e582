//! A device function from another module: import its hidden macro next to the kernel.
use pgas::prelude::*;

mod util {
    use pgas::prelude::*;

    #[pgas_device]
    pub fn twice(v: f32) -> f32 {
        v * 2.0
    }
}

use util::__pgas_device_twice;

#[pgas_kernel]
fn doubled(x: &mut SymTensor<f32>) {
    x[0] = twice(x[0]);
}

pub fn check() {
    assert!(doubled::SPEC.plain_source.contains("pgas_fn_twice"));
}
