use pgas::prelude::*;
#[pgas_device]
fn half_of(x: f32) -> f32 {
    x > 1.0
}

fn main() {}

