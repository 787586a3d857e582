use pgas::prelude::*;

#[pgas_params]
struct Peers {
    pes: &SymTensor<i32>,
    n: u32,
    me: u32,
}

// A field left out.
#[pgas_kernel]
fn missing(x: &mut SymTensor<f32>, Peers { pes, n }: Peers) {
    x[0] = 1.0;
}

// A field renamed.
#[pgas_kernel]
fn renamed(x: &mut SymTensor<f32>, Peers { pes, n: count, me }: Peers) {
    x[0] = 1.0;
}

// The rest elided.
#[pgas_kernel]
fn elided(x: &mut SymTensor<f32>, Peers { pes, .. }: Peers) {
    x[0] = 1.0;
}

// A field the group does not have.
#[pgas_kernel]
fn unknown(x: &mut SymTensor<f32>, Peers { pes, n, me, sig }: Peers) {
    x[0] = 1.0;
}

// Another type.
#[pgas_kernel]
fn retyped(x: &mut SymTensor<f32>, Peers { pes, n, me }: u32) {
    x[0] = 1.0;
}

// A group no module declares.
#[pgas_kernel]
fn undeclared(x: &mut SymTensor<f32>, Team { pes }: Team) {
    x[0] = 1.0;
}

// A group taken whole: a field it lacks, and the bare name as a value.
#[pgas_kernel]
fn whole(x: &mut SymTensor<u32>, peers: Peers) {
    x[0] = peers.rank + peers;
}

// A generic group.
#[pgas_params]
struct Typed<T> {
    x: &SymTensor<T>,
}

fn main() {}
