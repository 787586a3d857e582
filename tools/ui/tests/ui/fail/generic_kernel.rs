use pgas::prelude::*;

// A type parameter needs one of the bounds the compiler instantiates.
#[pgas_kernel]
fn unbounded<T>(x: &mut SymTensor<T>) {
}

// An error only some instances have names them.
#[pgas_kernel]
fn bitwise<T: Elem>(x: &mut SymTensor<T>) {
    x[0] = combine(ReduceOp::Xor, x[0], x[1]);
}

// A generic device function is called with its type.
#[pgas_device]
fn twice<T: Float>(v: T) -> T {
    v + v
}

#[pgas_kernel]
fn untyped(x: &mut SymTensor<f32>) {
    x[0] = twice(x[0]);
}

fn main() {}
