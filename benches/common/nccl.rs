//! An NCCL communicator over every PE, for the benchmarks that run NCCL beside pgas in the same
//! job. NCCL is loaded by name (`libnccl.so`, which cudarc looks for; PyTorch's wheel has
//! `nvidia/nccl/lib/libnccl.so.2`, so scripts/gpu-suite.sh puts a `libnccl.so` link to it on
//! `LD_LIBRARY_PATH`); `nccl_comm` is `None` without it. The unique id crosses the PEs through an
//! NVSHMEM broadcast, so no other bootstrap is needed.

use super::BenchResult;
use pgas::cudarc::driver::{DevicePtr, DevicePtrMut};
use pgas::cudarc::nccl::{result as nccl, sys as nccl_sys};
use pgas::prelude::*;

/// An NCCL communicator, destroyed on drop. `.0` is the raw handle cudarc's `result` calls take.
pub struct Nccl(pub nccl_sys::ncclComm_t);

impl Drop for Nccl {
    fn drop(&mut self) {
        // SAFETY: a communicator this program created and no longer uses.
        unsafe {
            let _ = nccl::comm_destroy(self.0);
        }
    }
}

/// An NCCL communicator over every PE, its unique id broadcast from PE 0 through NVSHMEM.
pub fn nccl_comm(p: &Pgas) -> BenchResult<Option<Nccl>> {
    // SAFETY: only probes whether the library loads.
    if !unsafe { nccl_sys::is_culib_present() } {
        return Ok(None);
    }
    let id = if p.my_pe() == 0 {
        nccl::get_uniqueid().map_err(|e| format!("ncclGetUniqueId: {e:?}"))?
    } else {
        nccl_sys::ncclUniqueId { internal: [0; 128] }
    };
    let bytes: Vec<u8> = id.internal.iter().map(|&c| c as u8).collect();
    let mine = p.alloc_from(&bytes)?;
    let all = p.alloc::<u8>(128)?;
    p.barrier_all()?;
    p.broadcast(Team::WORLD, &all, &mine, 0)?;
    p.stream().synchronize()?;
    let got = all.to_vec()?;
    let mut id = nccl_sys::ncclUniqueId { internal: [0; 128] };
    for (d, s) in id.internal.iter_mut().zip(got) {
        *d = s as std::ffi::c_char;
    }
    let mut comm = std::ptr::null_mut();
    // SAFETY: every PE calls it with the same id and its own rank.
    unsafe { nccl::comm_init_rank(&mut comm, p.n_pes() as i32, id, p.my_pe() as i32) }
        .map_err(|e| format!("ncclCommInitRank: {e:?}"))?;
    Ok(Some(Nccl(comm)))
}

/// `ncclAllGather` of every PE's shard into `gathered`, on the pgas stream.
pub fn all_gather_bf16(
    p: &Pgas, comm: &Nccl, gathered: &mut CudaSlice<bf16>, shard: &CudaSlice<bf16>,
) -> BenchResult<()> {
    let stream = p.stream();
    let (s, _rs) = shard.device_ptr(stream);
    let (g, _rg) = gathered.device_ptr_mut(stream);
    // SAFETY: `gathered` holds n_pes shards; both live until the stream is done (the guards
    // order them on it).
    unsafe {
        nccl::all_gather(
            s as *const _,
            g as *mut _,
            shard.len(),
            nccl_sys::ncclDataType_t::ncclBfloat16,
            comm.0,
            stream.cu_stream() as _,
        )
    }
    .map_err(|e| format!("ncclAllGather: {e:?}"))?;
    Ok(())
}
