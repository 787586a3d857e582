use pgas::prelude::*;

#[pgas_kernel]
fn k(name: String) {}

fn main() {}
