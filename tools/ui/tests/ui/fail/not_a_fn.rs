use pgas::prelude::*;
#[pgas_kernel]
struct NotAKernel;


fn main() {}
