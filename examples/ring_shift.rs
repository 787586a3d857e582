//! The kernel from the language spec: every PE sends its buffer to the next PE with one signalled
//! block put, and waits for the signal from the previous PE before reading what arrived.
//!
//! ```text
//! cargo run --release --example ring_shift                     # 1 PE
//! pgas-run -n 2 -- target/release/examples/ring_shift          # one process per GPU
//! ```

use pgas::prelude::*;

#[pgas_kernel]
fn ring_shift(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut SymTensor<u64>) {
    let peer = (my_pe() + 1) % n_pes();
    put_signal_block(dst, src, &mut sig[0], 1, SignalOp::Set, peer);
    signal_wait_until(&sig[0], Cmp::Eq, 1);
}

const LEN: usize = 1 << 20;

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let prev = (me + n - 1) % n;

    let mut dst = pgas.alloc::<f32>(LEN)?;
    let src = pgas.alloc_from(&vec![me as f32; LEN])?;
    let mut sig = pgas.alloc::<u64>(1)?;
    ring_shift::launch(
        &pgas,
        LaunchConfig::blocks(1, 512),
        &mut dst,
        &src,
        &mut sig,
    )?;
    pgas.barrier_all()?;

    let got = dst.to_vec()?;
    if let Some(i) = got.iter().position(|&v| v != prev as f32) {
        eprintln!("PE {me}: dst[{i}] = {}, expected {prev}", got[i]);
        std::process::exit(1);
    }
    println!("PE {me}/{n}: received {LEN} floats from PE {prev} behind one signal, ok");
    Ok(())
}
