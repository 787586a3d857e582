//! Symmetric tensors: `alloc`, `from_dlpack`, `register_external`, `free_tensor`,
//! `get_peer_tensor`, `get_multicast_tensor` (and `_views`, for tests).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pgas_runtime::dlpark::ffi::{DLDataType, DLDevice};
use pgas_runtime::dlpark::python::consumer::stream::{self as dl_stream, DlpackStream, StreamArg};
use pgas_runtime::dlpark::python::{from_dlpack as import_dlpack, ImportedDlpack};
use pgas_runtime::dlpark::DlpackElement;
use pyo3::prelude::*;

use super::call::entry;
use crate::dtype::{self, with_tensor};
use crate::errors::{misuse, to_py};
use crate::state::{current, freed};
use crate::team::Team;
use crate::tensor::{PeerTensor, Tensor};

/// A shape: an int or a sequence of ints.
#[derive(FromPyObject)]
pub(super) enum Dims {
    One(usize),
    Many(Vec<usize>),
}

/// Allocates a zeroed symmetric tensor of `shape` (an int or a sequence of 1 to 8 ints) and
/// `dtype` (a name of `pgas.DTYPES`, a `torch.dtype` or a NumPy/CuPy dtype; `float32` when
/// omitted). Collective: every PE allocates the same shape and dtype in the same order (a size
/// mismatch raises `CollectiveMismatchError` on every PE). Free it with `free_tensor`.
#[pyfunction]
#[pyo3(signature = (shape, dtype=None))]
pub(super) fn alloc(
    py: Python<'_>, shape: Dims, dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    let name = dtype.map_or(Ok("float32"), dtype::parse)?;
    let state = current()?;
    let dims = match shape {
        Dims::One(n) => vec![n],
        Dims::Many(dims) => dims,
    };
    let data = py.detach(|| dtype::alloc(&state.pgas()?, &dims, name))?;
    Ok(Tensor::register(&state, data, false))
}

/// Takes any DLPack producer (a `torch.Tensor`, a CuPy array, a capsule, a `pgas.Tensor`)
/// whose memory lies in the symmetric heap on this PE's GPU, contiguous, as a `pgas.Tensor`
/// over the same memory: a torch view (a row, a slice) of a pgas tensor, or a tensor of
/// NVSHMEM4Py. The producer's pending work is ordered before pgas's stream. Memory outside the
/// heap (PyTorch's own allocations) is refused with the fix: other PEs could not address it.
/// Import on every PE at the same point, so that the tensors are symmetric. The import is
/// released with its handle (no collective).
#[pyfunction]
pub(super) fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let state = current()?;
    let pgas = state.pgas()?;
    let consumer = PgasStream {
        stream: pgas.stream().cu_stream(),
        device: DLDevice::cuda(pgas.device_ordinal() as i32),
    };
    let imported = import_dlpack(obj.as_borrowed(), Some(&consumer), None)?;
    let dl_dtype = imported
        .validate()
        .map_err(|e| misuse(format!("the DLPack tensor's metadata is invalid: {e}")))?
        .dtype();
    let name = dtype::name_of(dl_dtype).ok_or_else(|| {
        misuse(format!(
            "the tensor's dtype (DLPack code {}, {} bits, {} lanes) is not one pgas holds ({})",
            dl_dtype.code.0,
            dl_dtype.bits,
            dl_dtype.lanes,
            dtype::NAMES.join(", ")
        ))
    })?;
    let data = match imported {
        ImportedDlpack::Legacy(t) => dtype::import(&pgas, name, t)?,
        ImportedDlpack::Versioned(t) => dtype::import(&pgas, name, t)?,
    };
    Ok(Tensor::register(&state, data, true))
}

/// Registers memory another library allocated with CUDA VMM (`cuMemCreate` + `cuMemMap`:
/// cuda.core's `VirtualMemoryResource`, PyTorch's expandable segments) as symmetric
/// (`nvshmemx_buffer_register_symmetric`), and returns it as a `pgas.Tensor` of `dtype`
/// (`uint8` by default) at its symmetric address. `obj` is a cuda.core `Buffer` (`handle`,
/// `size`), a torch tensor or a CuPy array, contiguous from the start of its allocation; it is
/// kept alive until the registration is undone. Collective: every PE registers the same size
/// at the same point; `free_tensor` of the result unregisters it (collectively). Memory that is
/// not VMM, sizes that differ across PEs, and a static heap (`NVSHMEM_DISABLE_CUDA_VMM=1`)
/// raise with the fix, on every PE, before NVSHMEM is called.
#[pyfunction]
#[pyo3(signature = (obj, dtype=None))]
pub(super) fn register_external(
    py: Python<'_>, obj: &Bound<'_, PyAny>, dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    let name = dtype.map_or(Ok("uint8"), dtype::parse)?;
    let (ptr, bytes) = address_and_size(obj)?;
    let state = current()?;
    let keep: Py<PyAny> = obj.clone().unbind();
    let data = py.detach(|| {
        // SAFETY: `keep` holds the object that owns the memory, so it stays mapped until the
        // registration (which owns `keep`) is undone.
        unsafe { dtype::register(&state.pgas()?, name, ptr, bytes, keep) }
    })?;
    Ok(Tensor::register(&state, data, false))
}

/// The device address and size in bytes of a cuda.core `Buffer` (`handle`, `size`), a torch
/// tensor (`data_ptr()`, `nbytes`) or a CuPy array (`data.ptr`, `nbytes`).
fn address_and_size(obj: &Bound<'_, PyAny>) -> PyResult<(u64, usize)> {
    let int = |v: Bound<'_, PyAny>| -> PyResult<u64> {
        v.extract::<u64>()
            .or_else(|_| v.call_method0("__int__")?.extract::<u64>())
    };
    if obj.hasattr("handle")? && obj.hasattr("size")? {
        return Ok((
            int(obj.getattr("handle")?)?,
            obj.getattr("size")?.extract()?,
        ));
    }
    if obj.hasattr("data_ptr")? && obj.hasattr("nbytes")? {
        return Ok((
            int(obj.call_method0("data_ptr")?)?,
            obj.getattr("nbytes")?.extract()?,
        ));
    }
    if obj.hasattr("data")? && obj.hasattr("nbytes")? {
        return Ok((
            int(obj.getattr("data")?.getattr("ptr")?)?,
            obj.getattr("nbytes")?.extract()?,
        ));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "register_external takes a cuda.core Buffer, a torch tensor or a CuPy array, not {}",
        obj.get_type().name()?
    )))
}

/// Frees a tensor made by `alloc`. Collective: every PE frees the same tensors in the same
/// order. The PEs first compare what they are freeing: a different tensor on some PE, or a
/// DLPack view of it still alive on some PE (`del` the torch tensors made from it first),
/// raises `CollectiveMismatchError` on every PE and frees nothing. Afterwards every use of `t`
/// raises `FreedError`. (The garbage collector never frees symmetric memory.)
///
/// `with_views=True` frees it although DLPack views of it are alive (NVSHMEM4Py's
/// `free_tensor` and `free_array` do, and `pgas.nvshmem.core` with them): the caller promises
/// not to use them again, since they would read and write freed memory.
#[pyfunction]
#[pyo3(signature = (t, *, with_views=false))]
pub(super) fn free_tensor(py: Python<'_>, t: PyRef<'_, Tensor>, with_views: bool) -> PyResult<()> {
    let state = current()?;
    if !Arc::ptr_eq(&t.state, &state) {
        return Err(freed(&t.describe()));
    }
    let (id, what) = (t.id, t.describe());
    py.detach(|| state.free(id, &what, with_views))
}

/// PE `pe`'s copy of `t` mapped into this process (NVLink or PCIe peer access), as a
/// `pgas.PeerTensor` (`torch.from_dlpack` of it loads and stores the peer's memory), or `None`
/// when PE `pe` is not reachable with loads and stores (RMA still works).
#[pyfunction]
pub(super) fn get_peer_tensor(
    py: Python<'_>, t: PyRef<'_, Tensor>, pe: usize,
) -> PyResult<Option<PeerTensor>> {
    let state = current()?;
    let tr: &Tensor = &t;
    let found = py.detach(|| {
        let reg = state.registry();
        let data = entry(&reg, &state, tr)?;
        let views = reg.entries[&tr.id].views.clone();
        let found = with_tensor!(data, s => {
            let dl = dl_dtype_of(s);
            s.peer(pe).map_err(to_py)?.map(|v| (v.as_device_ptr(), dl))
        });
        Ok::<_, PyErr>(found.map(|(ptr, dl)| (ptr, dl, views)))
    })?;
    Ok(found.map(|(ptr, dl, views)| PeerTensor::new(&state, views, &t, dl, ptr, Some(pe))))
}

/// The multicast address of `t` for `team` (`nvshmemx_mc_ptr`), as a `pgas.PeerTensor` (for
/// kernels with `multimem` instructions). Only NVLink SHARP systems have one; elsewhere it
/// raises `pgas.UnavailableError` with the reason.
#[pyfunction]
pub(super) fn get_multicast_tensor(
    py: Python<'_>, team: &Team, t: PyRef<'_, Tensor>,
) -> PyResult<PeerTensor> {
    let state = current()?;
    let tr: &Tensor = &t;
    let team = team.team;
    let (ptr, dl, views) = py.detach(|| {
        let reg = state.registry();
        let data = entry(&reg, &state, tr)?;
        let views = reg.entries[&tr.id].views.clone();
        let (ptr, dl) = with_tensor!(data, s => {
            let dl = dl_dtype_of(s);
            (s.multicast(team).map_err(to_py)?.as_device_ptr(), dl)
        });
        Ok::<_, PyErr>((ptr, dl, views))
    })?;
    Ok(PeerTensor::new(&state, views, &t, dl, ptr, None))
}

fn dl_dtype_of<T: DlpackElement>(_t: &pgas_runtime::SymTensor<T>) -> DLDataType {
    T::DTYPE
}

/// pgas's stream as the consumer stream of a DLPack import: the producer (PyTorch) makes its
/// pending work on the memory precede it.
struct PgasStream {
    stream: cudarc::driver::sys::CUstream,
    device: DLDevice,
}

// SAFETY: the stream is pgas's, alive as long as the context that the import runs in, and on
// `device`; for a tensor on another device no stream is passed (pgas refuses the import then).
unsafe impl DlpackStream for PgasStream {
    fn as_python_arg(&self, _py: Python<'_>, device: DLDevice) -> PyResult<StreamArg> {
        Ok(if device == self.device {
            dl_stream::cuda(self.stream as *mut std::ffi::c_void)
        } else {
            dl_stream::none()
        })
    }
}

/// The DLPack views of `t` alive on this PE (torch tensors made from it, peer tensors): what
/// `free_tensor` checks; for tests and debugging.
#[pyfunction]
pub(super) fn _views(py: Python<'_>, t: PyRef<'_, Tensor>) -> PyResult<usize> {
    let tr: &Tensor = &t;
    py.detach(|| {
        let reg = tr.state.registry();
        reg.entries
            .get(&tr.id)
            .map(|e| e.views.load(Ordering::SeqCst))
            .ok_or_else(|| freed(&tr.describe()))
    })
}
