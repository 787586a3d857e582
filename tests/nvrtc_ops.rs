//! Every kernel specialization `pgas::ops` launches (`ops::prewarm_all`), compiled by NVRTC for
//! sm_90 as the JIT would (and link-time against the NVSHMEM library, the JIT's default): no
//! errors, no warnings. Needs no GPU; needs NVRTC and the headers (`PGAS_CUDA_HOME`,
//! `PGAS_NVSHMEM_HOME`), as `tests/nvrtc_corpus.rs`.

use pgas_codegen::{batch, specialize, Prelude};
use pgas_runtime::jit::Toolchain;

#[test]
fn every_ops_kernel_compiles_without_warnings() {
    let tc = Toolchain::discover()
        .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"));
    let list = pgas::ops::prewarm_all();
    assert!(!list.is_empty());
    let mut by_prelude: Vec<(Prelude, Vec<String>)> = Vec::new();
    for k in &list {
        let pairs: Vec<(&str, i128)> = k
            .spec
            .comptime_names()
            .zip(k.comptime.iter().copied())
            .collect();
        let (src, _) = specialize(
            k.spec.source(k.variant),
            k.spec.cuda_name,
            k.variant.as_str(),
            &pairs,
        );
        let prelude = Prelude::of_source(&src).expect("a source starts with a prelude");
        match by_prelude.iter_mut().find(|(p, _)| *p == prelude) {
            Some((_, v)) => v.push(src),
            None => by_prelude.push((prelude, vec![src])),
        }
    }
    for (prelude, sources) in by_prelude {
        let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let program = batch(prelude.text(), &refs).expect("sources start with their prelude");
        let out = tc
            .compile_with(&program, "pgas_ops", (9, 0), &tc.options((9, 0), &program))
            .unwrap_or_else(|e| panic!("NVRTC rejected the ops kernels: {e}"));
        assert_eq!(out.warnings().count(), 0, "warnings:\n{}", out.log);
        let linked = tc
            .compile_program(None, &program, "pgas_ops_linked", (9, 0))
            .unwrap_or_else(|e| panic!("the link-time compile of the ops kernels failed: {e}"));
        assert_eq!(linked.warnings().count(), 0, "warnings:\n{}", linked.log);
    }
}
