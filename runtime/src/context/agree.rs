//! The PEs agree on each symmetric allocation's size before NVSHMEM allocates it.
//!
//! `nvshmem_calloc` trusts every PE to ask for the same size; when they do not, the symmetric
//! heaps drift apart and later remote accesses land in the wrong place, silently. So with more
//! than one PE, `alloc` first gathers every PE's requested byte count (one 8-byte `fcollect` on
//! the pgas stream, a few microseconds next to the allocation's own barrier) and, when they
//! differ, returns [`Error::AllocMismatch`] on every PE without allocating anything: every PE
//! takes the same branch, so none is left waiting in `nvshmem_calloc`. One PE skips it all.

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::sys::{self as cu, CUdeviceptr};

use super::pgas::Inner;
use crate::error::{Error, Result};
use crate::ffi::NVSHMEM_TEAM_WORLD;
use crate::nvshmem::Nvshmem;

/// The symmetric scratch of the exchange: `n_pes` slots to gather into, then this PE's own.
/// Allocated by the first `alloc` (which every PE makes at the same point, so it is collective
/// like any allocation) and kept until NVSHMEM finalizes; NVSHMEM initializes once per process,
/// so one scratch per process. The lock also keeps two threads' exchanges apart.
static SCRATCH: Mutex<Option<CUdeviceptr>> = Mutex::new(None);

/// Checks that every PE asked for `bytes` (saturated when the request overflows). Collective.
pub(crate) fn same_size(inner: &Inner, bytes: u64) -> Result<()> {
    if inner.n_pes < 2 {
        return Ok(());
    }
    check_sizes(gather(inner, bytes)?)
}

/// Every PE's `value`, in PE order (one 8-byte `fcollect` over WORLD on the pgas stream, through
/// the same scratch). Collective: every PE calls it at the same point. One PE: its own value.
pub(crate) fn gather(inner: &Inner, bytes: u64) -> Result<Vec<u64>> {
    let n = inner.n_pes;
    if n < 2 {
        return Ok(vec![bytes]);
    }
    let mut scratch = SCRATCH.lock().unwrap_or_else(|p| p.into_inner());
    let nv = inner.nvshmem.raw();
    let base = match *scratch {
        Some(p) => p,
        None => {
            // SAFETY: NVSHMEM is initialized (an Inner exists) and the context is bound; every
            // PE makes this same first call (collective), with the same size.
            let p = unsafe { nv.nvshmem_calloc(n + 1, 8) } as CUdeviceptr;
            if p == 0 {
                return Err(Error::HeapExhausted {
                    requested: (n + 1) * 8,
                    heap: inner.heap_size,
                    in_use: " (pgas's allocation-size check needs 8 bytes per PE of it)".into(),
                });
            }
            *scratch = Some(p);
            p
        }
    };
    let (gathered, mine) = (base, base + 8 * n as CUdeviceptr);
    let stream = inner.stream.cu_stream();
    let err = Error::cuda("exchanging allocation sizes");
    let mut sizes = vec![0u64; n];
    // SAFETY: `mine` and `gathered` are the symmetric scratch (n + 1 slots); the host buffers
    // live until the stream is synchronized below.
    unsafe {
        cu::cuMemcpyHtoDAsync_v2(mine, (&bytes as *const u64).cast(), 8, stream)
            .result()
            .map_err(err)?;
        let st = nv.nvshmemx_uint64_fcollect_on_stream(
            NVSHMEM_TEAM_WORLD,
            gathered as *mut u64,
            mine as *const u64,
            1,
            stream,
        );
        Nvshmem::check(
            st,
            "nvshmemx_uint64_fcollect_on_stream (pgas's agreement on sizes)",
            "every PE must allocate and register at the same points",
        )?;
        cu::cuMemcpyDtoHAsync_v2(sizes.as_mut_ptr().cast::<c_void>(), gathered, 8 * n, stream)
            .result()
            .map_err(Error::cuda("exchanging allocation sizes"))?;
    }
    inner.sync_stream()?;
    Ok(sizes)
}

/// `Ok` when every PE asked for the same size.
pub(crate) fn check_sizes(sizes: Vec<u64>) -> Result<()> {
    if sizes.windows(2).all(|w| w[0] == w[1]) {
        Ok(())
    } else {
        Err(Error::AllocMismatch { sizes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_sizes_name_every_pe_and_the_fix() {
        assert!(check_sizes(vec![64, 64, 64]).is_ok());
        assert!(check_sizes(vec![8]).is_ok());
        let e = check_sizes(vec![40, 44]).unwrap_err();
        assert!(matches!(&e, Error::AllocMismatch { sizes } if sizes == &[40, 44]));
        let msg = e.to_string();
        assert!(
            msg.contains("PE 0 asked for 40 bytes, PE 1 asked for 44 bytes")
                && msg.contains("Fix: call alloc with the same length and element type"),
            "{msg}"
        );
    }
}
