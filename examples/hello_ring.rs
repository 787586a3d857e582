//! Every PE fills a symmetric tensor with its PE number, puts it to the next PE with a host-side
//! put, waits on a barrier and checks what arrived from the previous PE.
//!
//! ```text
//! cargo run --release --example hello_ring                         # 1 PE, no launcher
//! pgas-run -n 2 -- target/release/examples/hello_ring              # 2 PEs, one per GPU
//! mpirun -np 2 target/release/examples/hello_ring                  # built with --features mpi
//! ```

use pgas::prelude::*;

const LEN: usize = 1 << 20;

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;

    let mut src: SymTensor<i32> = pgas.alloc(LEN)?;
    src.fill(me as i32)?;
    let dst: SymTensor<i32> = pgas.alloc(LEN)?;

    pgas.put(&dst, &src, next)?;
    pgas.barrier_all()?;

    let got = dst.to_vec()?;
    let wrong = got.iter().filter(|&&v| v != prev as i32).count();
    if wrong != 0 {
        eprintln!(
            "PE {me}: {wrong} of {LEN} elements differ from {prev} (first: {})",
            got[0]
        );
        std::process::exit(1);
    }
    println!(
        "PE {me}/{n} on GPU {} ({}): received {LEN} x {prev} from PE {prev}, ok",
        pgas.device_ordinal(),
        pgas.bootstrap()
    );
    Ok(())
}
