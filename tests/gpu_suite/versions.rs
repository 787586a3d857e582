//! The version queries on a live context: the running NVSHMEM is the one whose headers the JIT
//! compiles against, and it implements OpenSHMEM 1.3 or later; `pgas::info` sees the driver.

use crate::runner::{case, Case};
use crate::util::CaseResult;
use pgas::prelude::*;

pub const CASES: &[Case] = &[case("versions/nvshmem_spec_driver", versions)];

fn versions(p: &Pgas) -> CaseResult {
    let headers = pgas::nvshmem::version::read_header_version(&p.install().root.join("include"))?;
    if p.nvshmem_version() != headers {
        return Err(format!("library {:?} but headers {headers:?}", p.nvshmem_version()).into());
    }
    if p.spec_version() < (1, 3) {
        return Err(format!(
            "OpenSHMEM spec {:?}, expected 1.3 or later",
            p.spec_version()
        )
        .into());
    }
    let info = pgas::info::info();
    match info.driver {
        Ok(v) if v >= 12000 => Ok(()),
        other => Err(format!("driver version {other:?} on a GPU machine").into()),
    }
}
