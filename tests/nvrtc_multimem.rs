//! The multicast kernels of the GPU suite (`tests/gpu_suite/multimem.cu`: `multimem.st`,
//! `multimem.red`, `multimem.ld_reduce` through a team's multicast address) and the runtime's
//! `MulticastView::copy_from` kernel, compiled by NVRTC for sm_90 with pgas's prelude, as
//! `RawKernel` compiles them: no errors, no warnings. The test
//! machines run with NVLink multicast off, so this is where the PTX is checked on every change.
//! Needs no GPU; needs NVRTC and the headers (`PGAS_CUDA_HOME`, `PGAS_NVSHMEM_HOME`).

use pgas_runtime::jit::Toolchain;

#[test]
fn the_multimem_kernels_compile_without_warnings() {
    let tc = Toolchain::discover()
        .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"));
    let source = include_str!("gpu_suite/multimem.cu");
    for name in [
        "pgas_multimem_store",
        "pgas_multimem_red_add",
        "pgas_multimem_ld_reduce",
    ] {
        assert!(
            source.contains(&format!("void {name}(")),
            "{name} is in the file"
        );
    }
    let program = format!("{}{source}", pgas_codegen::PRELUDE);
    let out = tc
        .compile_with(
            &program,
            "pgas_multimem",
            (9, 0),
            &tc.options((9, 0), &program),
        )
        .unwrap_or_else(|e| panic!("NVRTC rejected the multimem kernels: {e}"));
    assert_eq!(out.warnings().count(), 0, "warnings:\n{}", out.log);
    // The runtime's own write through a multicast view (`MulticastView::copy_from`), with the
    // point-to-point prelude its RawKernel uses.
    let program = format!(
        "{}{}",
        pgas_codegen::PRELUDE_P2P,
        pgas_runtime::launch::MULTICAST_STORE_SOURCE
    );
    let out = tc
        .compile_with(
            &program,
            "pgas_multicast_store",
            (9, 0),
            &tc.options((9, 0), &program),
        )
        .unwrap_or_else(|e| panic!("NVRTC rejected the multicast write: {e}"));
    assert_eq!(out.warnings().count(), 0, "warnings:\n{}", out.log);
}
