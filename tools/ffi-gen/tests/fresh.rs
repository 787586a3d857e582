//! Fails when the checked-in `runtime/src/ffi/bindings.rs` no longer matches what bindgen
//! generates from the headers under `PGAS_NVSHMEM_HOME` / `PGAS_CUDA_HOME`.

use std::path::Path;

#[test]
fn checked_in_bindings_are_current() {
    let (nv, cuda) = match pgas_ffi_gen::roots_from_env() {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let fresh = pgas_ffi_gen::generate(&nv, &cuda).unwrap_or_else(|e| panic!("{e}"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(pgas_ffi_gen::BINDINGS_PATH);
    let checked_in = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    if fresh != checked_in {
        let first = fresh
            .lines()
            .zip(checked_in.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| fresh.lines().count().min(checked_in.lines().count()));
        panic!(
            "{} is stale: it differs from bindgen's output starting at line {} \
             (generated: {:?}, checked in: {:?}). Run scripts/regen-ffi.sh and commit the result.",
            pgas_ffi_gen::BINDINGS_PATH,
            first + 1,
            fresh.lines().nth(first).unwrap_or("<end of file>"),
            checked_in.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}
