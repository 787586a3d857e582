//! Operations built on pgas kernels, at production sizes: communication fused with computation,
//! combining a pgas communication kernel or the copy engine with a user's computation or a vendor
//! library's (the halo exchange of a stencil, [`halo`]; all-gather fused with a GEMM,
//! [`AllGatherMatmul`]; a GEMM fused with a reduce-scatter, [`matmul_reduce_scatter`]), whole
//! operations a model calls (the token dispatch and combine of a mixture-of-experts layer across
//! PEs, [`moe`]), and what they share: cuBLAS loaded at run time ([`cublas`]) and the cross-PE
//! argument check of collective operations ([`agree`]). See `docs/ops.md`.

pub mod all_gather_matmul;
pub mod cublas;
mod gemm_path;
pub mod halo;
pub mod matmul_reduce_scatter;
pub mod moe;

pub use all_gather_matmul::{all_gather_matmul, AllGatherMatmul};
pub use gemm_path::GemmPath;

use crate::{Error, Pgas, Result, Team};

/// An `Err` on every PE when some PE's GPU cannot run 64-bit stream memory operations
/// (`cuStreamWriteValue64` / `cuStreamWaitValue64`), with which the copy-engine operations
/// ([`AllGatherMatmul`], [`matmul_reduce_scatter`]) signal their peers: without them a call
/// would fail half-way, after its peers moved on. Collective (one agreement); a failed query
/// counts as "cannot", so no PE leaves early.
pub(crate) fn require_stream_mem_ops(pgas: &Pgas, what: &'static str) -> Result<()> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS;
    let can = pgas
        .cuda()
        .attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)
        .is_ok_and(|v| v != 0);
    agree(
        pgas,
        what,
        &[("64-bit stream memory operations", can as u64)],
    )?;
    if can {
        return Ok(());
    }
    Err(Error::Unavailable {
        what,
        reason: "this GPU or driver does not run 64-bit stream memory operations \
                 (cuStreamWriteValue64, cuStreamWaitValue64), with which the copy stream signals \
                 the peers. Fix: a GPU of compute capability 7.0 or newer with a CUDA 12+ driver"
            .into(),
    })
}

/// Enqueues on `stream` a wait until the 64-bit word at `addr` is at least `value`
/// (`cuStreamWaitValue64`, `GEQ`): how the copy-engine operations wait for a peer's signal.
/// `what` says what is waited for, in the error.
///
/// # Safety
/// `addr` is a device address of a `u64` this context may read while `stream` runs.
pub(crate) unsafe fn stream_wait_geq(
    stream: cudarc::driver::sys::CUstream,
    addr: cudarc::driver::sys::CUdeviceptr,
    value: u64,
    what: &'static str,
) -> Result<()> {
    use cudarc::driver::sys as cu;
    // SAFETY: `addr` is a readable device `u64` while `stream` runs (the caller's contract).
    unsafe {
        cu::cuStreamWaitValue64_v2(
            stream,
            addr,
            value,
            cu::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
        )
    }
    .result()
    .map_err(Error::cuda(what))
}

/// Enqueues on `stream` a write of `value` to the 64-bit word at `addr`
/// (`cuStreamWriteValue64`): how the copy-engine operations signal a peer. `what` says what the
/// write signals, in the error.
///
/// # Safety
/// `addr` is a device address of a `u64` this context may write while `stream` runs.
pub(crate) unsafe fn stream_write(
    stream: cudarc::driver::sys::CUstream,
    addr: cudarc::driver::sys::CUdeviceptr,
    value: u64,
    what: &'static str,
) -> Result<()> {
    use cudarc::driver::sys as cu;
    // SAFETY: `addr` is a writable device `u64` while `stream` runs (the caller's contract).
    unsafe {
        cu::cuStreamWriteValue64_v2(
            stream,
            addr,
            value,
            cu::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
        )
    }
    .result()
    .map_err(Error::cuda(what))
}

/// An `Err` (before anything is enqueued) when `stream` is being captured into a CUDA graph, for
/// the operations that keep their call number on the host and pass it to stream memory
/// operations as an immediate ([`AllGatherMatmul`], [`matmul_reduce_scatter`]): a graph would
/// replay the captured number, so from the second replay on every wait (`>=` that number) would
/// pass at once and the copies would read and overwrite peers' buffers unsynchronized, silently.
pub(crate) fn refuse_capture(
    stream: &cudarc::driver::CudaStream,
    what: &'static str,
) -> Result<()> {
    let status = stream.capture_status().map_err(Error::cuda(
        "querying the stream's CUDA-graph capture status",
    ))?;
    if status == cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        name: what,
        value: "a call on a stream being captured into a CUDA graph".into(),
        reason: "the call's number is baked into its stream memory operations, so a replayed \
                 graph would not wait for the peers (their buffers would be read and overwritten \
                 while in use). Fix: run it eagerly, outside graph capture"
            .into(),
    })
}

/// Checks that every PE passed the same arguments to a collective operation: each PE's
/// `fields` (name, value) are gathered on every PE (a symmetric `fcollect` on the pgas stream,
/// then a host wait) and compared, so a mismatch is the same `Err` on every PE and nothing that
/// would leave a PE waiting has launched. `what` names the operation in the message. Collective
/// over all PEs; free with one PE.
///
/// # Errors
/// [`Error::InvalidConfig`] naming each field that differs with every PE's value; a different
/// number of fields on some PE is [`Error::AllocMismatch`] (on every PE).
pub fn agree(pgas: &Pgas, what: &'static str, fields: &[(&str, u64)]) -> Result<()> {
    let n = pgas.n_pes();
    if n < 2 || fields.is_empty() {
        return Ok(());
    }
    let values: Vec<u64> = fields.iter().map(|f| f.1).collect();
    let all = gather_words(pgas, &values)?;
    disagreement(what, fields, &all, n)
}

/// Every PE's `words` (the same count on each), in PE order, on every PE: a symmetric
/// `fcollect` on the pgas stream, then a host wait. Collective over all PEs.
pub(crate) fn gather_words(pgas: &Pgas, words: &[u64]) -> Result<Vec<u64>> {
    let mine = pgas.alloc_from(words)?;
    let all = pgas.alloc::<u64>(words.len() * pgas.n_pes())?;
    pgas.fcollect(Team::WORLD, &all, &mine)?;
    all.to_vec()
}

/// The error of [`agree`] when the gathered values (`n` PEs' rows of `fields.len()`) differ.
fn disagreement(what: &'static str, fields: &[(&str, u64)], all: &[u64], n: usize) -> Result<()> {
    let len = fields.len();
    let differ: Vec<String> = fields
        .iter()
        .enumerate()
        .filter(|(i, _)| (1..n).any(|pe| all[pe * len + i] != all[*i]))
        .map(|(i, (name, _))| {
            let per_pe: Vec<String> = (0..n)
                .map(|pe| format!("PE {pe} {}", all[pe * len + i]))
                .collect();
            format!("{name}: {}", per_pe.join(", "))
        })
        .collect();
    if differ.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        name: what,
        value: differ.join("; "),
        reason: "the PEs passed different arguments to this collective operation (nothing was \
                 launched on any PE). Fix: call it with the same shapes and types on every PE"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disagreement_names_the_field_and_every_pe() {
        let fields = [("m", 8u64), ("n", 4)];
        assert!(disagreement("op", &fields, &[8, 4, 8, 4], 2).is_ok());
        let e = disagreement("op", &fields, &[8, 4, 8, 5, 8, 4], 3)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("n: PE 0 4, PE 1 5, PE 2 4") && !e.contains("m: ") && e.contains("Fix:"),
            "{e}"
        );
    }
}
