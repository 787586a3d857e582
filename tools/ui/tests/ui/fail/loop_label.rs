use pgas::prelude::*;
#[pgas_kernel]
fn k() {
    'outer: loop {
        break 'outer;
    }
}

fn main() {}
