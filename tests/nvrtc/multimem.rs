//! The runtime's `MulticastView::copy_from` kernel (a `multimem.st` through a team's multicast
//! address), compiled by NVRTC for sm_90 with pgas's prelude, as `RawKernel` compiles it: no
//! errors, no warnings. The test machines run with NVLink multicast off, so this is where its
//! PTX is checked on every change; the kernel language's multicast rows are checked the same
//! way by `tests/nvrtc/corpus.rs` (`tests/gpu_suite/kernels/multimem.rs`).

#[test]
fn the_multicast_write_compiles_without_warnings() {
    let tc = crate::toolchain();
    // The runtime's own write through a multicast view (`MulticastView::copy_from`), with the
    // point-to-point prelude its RawKernel uses.
    let program = format!(
        "{}{}",
        pgas_codegen::PRELUDE_P2P,
        pgas_runtime::launch::MULTICAST_STORE_SOURCE
    );
    crate::compile_clean(
        &tc,
        &program,
        "pgas_multicast_store",
        "the multicast write",
        false,
    );
}
