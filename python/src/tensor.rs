//! `pgas.Tensor`: a symmetric tensor that Python owns, and its DLPack producer side
//! (`__dlpack__`, `__dlpack_device__`), so `torch.from_dlpack(t)` is a view of the same memory.

use pgas_runtime::dlpark::ffi::{DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use pgas_runtime::dlpark::python::{export_dlpack, DlpackExporter, ExportRequest};
use pgas_runtime::dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::dtype::{with_tensor, AnyTensor, Elem};

/// A tensor in NVSHMEM's symmetric heap, of one dtype and a row-major shape, made by
/// `Context.alloc` or `Context.from_dlpack`.
///
/// `torch.from_dlpack(t)` (or CuPy's, JAX's, ...) is a view of this PE's copy without a copy,
/// as often as asked; each view keeps the tensor alive. The memory is freed, collectively,
/// when the last Python reference and the last view are gone, so let go of tensors in the same
/// order on every PE (as with NVSHMEM4Py's `free_tensor`).
#[pyclass(module = "pgas", name = "Tensor")]
pub(crate) struct Tensor {
    pub(crate) data: AnyTensor,
    /// The CUDA device ordinal of this PE.
    pub(crate) device: usize,
}

#[pymethods]
impl Tensor {
    /// The shape, a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, with_tensor!(&self.data, t => t.shape().to_vec()))
    }

    /// The dtype name (`"float32"`, `"bfloat16"`, ...; `pgas.DTYPES` lists them).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.data.dtype()
    }

    /// The device address of element 0 on this PE (what `torch.from_dlpack(t).data_ptr()` is).
    #[getter]
    fn data_ptr(&self) -> u64 {
        with_tensor!(&self.data, t => t.as_device_ptr())
    }

    /// The CUDA device ordinal (the GPU of this PE).
    #[getter]
    fn device(&self) -> usize {
        self.device
    }

    /// The size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        with_tensor!(&self.data, t => t.len() * elem_size(t))
    }

    /// The first dimension, as for a PyTorch tensor.
    fn __len__(&self) -> usize {
        with_tensor!(&self.data, t => t.shape()[0])
    }

    /// `pgas.Tensor(shape=..., dtype=..., device=cuda:N, data_ptr=0x...)`.
    fn __repr__(&self) -> String {
        let dims = with_tensor!(&self.data, t => t.shape().to_vec());
        format!(
            "pgas.Tensor(shape={dims:?}, dtype={}, device=cuda:{}, data_ptr={:#x})",
            self.data.dtype(),
            self.device,
            self.data_ptr()
        )
    }

    /// This PE's copy as a flat list of Python numbers, read through pgas (its stream, then a
    /// copy to the host). Work that another stream (PyTorch's) queued on the memory is not
    /// waited for: `torch.cuda.synchronize()` first.
    fn to_list(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        with_tensor!(&self.data, t => {
            let values = py.detach(|| t.to_vec()).map_err(crate::to_py)?;
            values.into_iter().map(|v| v.to_py(py)).collect()
        })
    }

    /// Sets every element of this PE's copy to `value`, through pgas (done when it returns).
    fn fill(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        with_tensor!(&mut self.data, t => {
            let v = Elem::from_py(value)?;
            py.detach(|| t.fill(v)).map_err(crate::to_py)
        })
    }

    /// Copies a flat sequence of `len` numbers (the tensor's element count) into this PE's
    /// copy, through pgas (done when it returns).
    fn copy_from(&mut self, py: Python<'_>, values: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        with_tensor!(&mut self.data, t => {
            let host = values.iter().map(Elem::from_py).collect::<PyResult<Vec<_>>>()?;
            py.detach(|| t.copy_from(&host)).map_err(crate::to_py)
        })
    }

    /// DLPack's device query: `(2, ordinal)`, 2 being `kDLCUDA`.
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = self.dl_device();
        (d.device_type.0, d.device_id)
    }

    /// The DLPack protocol: a fresh capsule over this tensor's memory (no copy) that keeps the
    /// tensor alive. pgas's queued work on the memory is complete before it returns (pgas
    /// waits for its stream), so any consumer stream may use it at once. `copy=True` and a
    /// `dl_device` other than this GPU are refused: pgas only lends its memory.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: &Bound<'_, Self>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        let exporter = Exporter {
            tensor: slf.clone().unbind(),
            device: slf.try_borrow()?.dl_device(),
        };
        export_dlpack(&exporter, py, request)
    }
}

impl Tensor {
    fn dl_device(&self) -> DLDevice {
        DLDevice::cuda(self.device as i32)
    }
}

/// The size of `t`'s elements.
fn elem_size<T>(_t: &pgas_runtime::SymTensor<T>) -> usize {
    std::mem::size_of::<T>()
}

/// One `__dlpack__` request: describes the tensor and hands each DLPack tensor a reference to
/// the Python object, which owns the `SymTensor`.
struct Exporter {
    tensor: Py<Tensor>,
    device: DLDevice,
}

impl Exporter {
    fn export<M: ManagedTensorBase>(&self, py: Python<'_>) -> PyResult<Managed<M>> {
        let owner = Box::new(ViewOwner(Some(self.tensor.clone_ref(py))));
        // Another thread may be inside `fill` or `copy_from` (which let go of the GIL):
        // then this is Python's "already mutably borrowed" error, not a panic.
        let me = self.tensor.try_borrow(py)?;
        // SAFETY: `owner` is a strong reference to the Python object that owns the tensor, and
        // `Tensor` never gives its `SymTensor` away, so the memory lives as long as the DLPack
        // tensor holds `owner`.
        with_tensor!(&me.data, t => unsafe { t.dlpack_sharing::<M, _>(owner) })
            .map_err(crate::to_py)
    }
}

/// The reference to the `Tensor` that a DLPack tensor holds, released by the consumer's
/// deleter.
struct ViewOwner(Option<Py<Tensor>>);

impl Drop for ViewOwner {
    fn drop(&mut self) {
        // The consumer calls the deleter from its own code (PyTorch: while CPython frees the
        // last view), where pyo3 does not know the thread holds the GIL and would put the
        // reference in its pool until its next call. Attaching drops it now, so the collective
        // free of the last reference comes where the program let go of the view, at the same
        // point on every PE. Where Python cannot be attached to (at shutdown, in a GC
        // traversal), pyo3 defers it after all.
        let mut owner = self.0.take();
        let _ = Python::try_attach(|_py| drop(owner.take()));
        drop(owner);
    }
}

impl DlpackExporter for Exporter {
    fn device(&self) -> DLDevice {
        self.device
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        // Any valid stream is fine: `dlpack_sharing` waits for the pgas stream on the host, so
        // the memory is ready for every stream. Parsing still refuses a malformed one.
        request.cuda_stream().map(|_| ())
    }

    fn export_legacy(&self, py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.export(py)
    }

    fn export_versioned(&self, py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.export(py)
    }
}
