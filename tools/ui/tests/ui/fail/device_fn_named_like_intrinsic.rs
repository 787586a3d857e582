use pgas::prelude::*;

#[pgas_device]
fn quiet(x: f32) -> f32 {
    x
}

fn main() {}
