//! `init()` on a machine without a GPU or without NVSHMEM returns a clear error, quickly, every
//! time it is called (CI runs this; on a GPU machine it is skipped).

use std::time::{Duration, Instant};

use pgas_runtime::Error;

#[test]
fn init_fails_cleanly_without_a_driver() {
    // SAFETY: only probes dlopen.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        eprintln!("skipped: this machine has a CUDA driver");
        return;
    }
    for _ in 0..2 {
        let t = Instant::now();
        match pgas_runtime::init() {
            Err(Error::NoCudaDriver) => {}
            Err(Error::NvshmemNotFound { .. }) => {}
            other => panic!("expected NoCudaDriver or NvshmemNotFound, got {other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(30));
    }
    let msg = pgas_runtime::builder()
        .heap_size(0)
        .init()
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("heap_size") && msg.contains("at least one byte"),
        "{msg}"
    );
}
