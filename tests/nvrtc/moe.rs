//! Every kernel `pgas::ops::moe` launches (`moe::prewarm_list`, plain, and the checked variant
//! too), for 2 PEs, top-8 and FP8 dispatch by peer stores and for 1 PE, top-1 and bf16 dispatch by
//! NVSHMEM's RMA (the loops over PEs and slots unroll), and the low-latency mode's for the same
//! PEs and top-k, and the stand-in experts of the example and the benchmark,
//! compiled by NVRTC for sm_90 as the JIT would, as one program: no errors, no warnings; and
//! link-time against the NVSHMEM library as the JIT does by default.

use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas_codegen::{batch, Prelude};

#[test]
fn every_moe_kernel_compiles_without_warnings() {
    let tc = crate::toolchain();
    let mut sources = Vec::new();
    // [top_k, n_pes, rma, fp8]
    for (comptime, kernels) in [([8, 2, 0, 1], 6), ([1, 1, 1, 0], 5)] {
        let list = pgas::ops::moe::prewarm_list(&comptime);
        assert_eq!(list.len(), kernels);
        for k in &list {
            for variant in [Variant::Plain, Variant::Checked] {
                sources.push(crate::p2p_source(k, variant).0);
            }
        }
    }
    // The low-latency mode's kernels, [top_k, n_pes] as above.
    for kn in [[8, 2], [1, 1]] {
        for variant in [Variant::Plain, Variant::Checked] {
            for k in pgas::ops::moe::ll_prewarm_list(&kn, variant) {
                sources.push(crate::p2p_source(&k, variant).0);
            }
        }
    }
    // The stand-in experts that the example and the benchmark launch between the two.
    for variant in [Variant::Plain, Variant::Checked] {
        let k = Prewarm {
            spec: &pgas::ops::moe::reference::experts::SPEC,
            variant,
            comptime: &[],
        };
        sources.push(crate::p2p_source(&k, variant).0);
    }
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let program = batch(Prelude::P2p.text(), &refs).expect("sources start with their prelude");
    crate::compile_clean(&tc, &program, "pgas_moe", "the MoE kernels", false);
    let linked = tc
        .compile_program(None, &program, "pgas_moe_linked", (9, 0))
        .unwrap_or_else(|e| panic!("the link-time compile of the MoE kernels failed: {e}"));
    assert_eq!(linked.warnings().count(), 0, "warnings:\n{}", linked.log);
}
