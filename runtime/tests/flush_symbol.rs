//! `nvshmemx_flush_on_stream` is looked up by name (the bindings come from NVSHMEM 3.4.5's
//! headers, which lack it): found in NVSHMEM 3.8 (`PGAS_NVSHMEM_HOME_NEXT`, which
//! scripts/deps.sh installs). Its own test binary, so that only this NVSHMEM is loaded in the
//! process (tests/discovery.rs checks that 3.4.5 has none).

use std::path::PathBuf;

use pgas_runtime::nvshmem::discover::Search;
use pgas_runtime::nvshmem::Nvshmem;

#[test]
fn nvshmem_3_8_has_flush() {
    let Some(home) = std::env::var_os("PGAS_NVSHMEM_HOME_NEXT").map(PathBuf::from) else {
        eprintln!("skipped: PGAS_NVSHMEM_HOME_NEXT is not set (scripts/deps.sh sets it)");
        return;
    };
    let install = Search {
        pgas_nvshmem_home: Some(home),
        ..Search::default()
    }
    .find()
    .expect("NVSHMEM 3.8 is found where PGAS_NVSHMEM_HOME_NEXT points");
    let nv = Nvshmem::load(&install).expect("NVSHMEM 3.8 loads");
    assert!(nv.version() >= (3, 7, 0), "{:?}", nv.version());
    assert!(
        nv.has_flush(),
        "no nvshmemx_flush_on_stream in {}",
        nv.path().display()
    );
}
