//! Writes `runtime/src/ffi/bindings.rs` (or the path given as the first argument) from the
//! headers under `PGAS_NVSHMEM_HOME` and `PGAS_CUDA_HOME`.

use std::path::PathBuf;

fn main() {
    let out = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(pgas_ffi_gen::BINDINGS_PATH));
    let result = pgas_ffi_gen::roots_from_env()
        .and_then(|(nv, cuda)| pgas_ffi_gen::generate(&nv, &cuda))
        .and_then(|text| {
            std::fs::write(&out, text).map_err(|e| format!("writing {}: {e}", out.display()))
        });
    match result {
        Ok(()) => println!("wrote {}", out.display()),
        Err(e) => {
            eprintln!("pgas-ffi-gen: {e}");
            std::process::exit(1);
        }
    }
}
