//! The kernels of `pgas::ops::AllReduceRmsNorm`, which take their handshakes from the
//! collectives' pieces (`src/coll/kernels/pieces.rs`), so the corpus, which compiles a file on
//! its own, cannot compile them: each mode (one-shot, two-shot, no exchange) and the
//! low-latency kernel, for the team sizes the PE loops unroll over, plain and checked, compiled
//! by NVRTC for sm_90 as the JIT would, as one program: no errors, no warnings.

use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::ops::allreduce_rmsnorm::kernels::{allreduce_add_rmsnorm, allreduce_add_rmsnorm_ll};

#[test]
fn every_allreduce_rmsnorm_kernel_compiles_without_warnings() {
    let tc = crate::toolchain();
    // [n, mode]: one-shot (0) and two-shot (1) on 2 and 8 PEs, no exchange (2) on 1 PE; the
    // low-latency kernel [n] on 2 and 8.
    let fused = [[2, 0], [8, 0], [2, 1], [8, 1], [1, 2]];
    let ll = [[2], [8]];
    let list = fused
        .iter()
        .map(|c| (&allreduce_add_rmsnorm::SPEC, &c[..]))
        .chain(ll.iter().map(|c| (&allreduce_add_rmsnorm_ll::SPEC, &c[..])));
    let mut sources = Vec::new();
    for (spec, comptime) in list {
        for variant in [Variant::Plain, Variant::Checked] {
            let k = Prewarm {
                spec,
                variant,
                comptime,
            };
            sources.push(crate::p2p_source(&k, variant).0);
        }
    }
    crate::compile_p2p(
        &tc,
        &sources,
        "pgas_rmsnorm",
        "the all-reduce + RMSNorm kernels",
        false,
    );
}
