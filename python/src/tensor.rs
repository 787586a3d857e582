//! `pgas.Tensor`, a handle to a symmetric tensor that the registry owns (`state.rs`), and
//! `pgas.PeerTensor`, another PE's copy (or a team's multicast address) mapped into this
//! process; both are DLPack producers (`__dlpack__`, `__dlpack_device__`), so
//! `torch.from_dlpack(t)` is a view of the same memory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pgas_runtime::dlpark::ffi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use pgas_runtime::dlpark::metadata::Dynamic;
use pgas_runtime::dlpark::python::{export_dlpack, DlpackExporter, ExportRequest};
use pgas_runtime::dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyResourceWarning;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::dtype::{with_tensor, AnyTensor};
use crate::state::{freed, State};

/// A tensor in NVSHMEM's symmetric heap, of one dtype and a row-major shape, made by
/// `pgas.alloc` (collective) or `pgas.from_dlpack` (a view of symmetric memory).
///
/// `torch.from_dlpack(t)` (or CuPy's, JAX's, ...) is a view of this PE's copy without a copy,
/// as often as asked. The memory stays allocated until `pgas.free_tensor(t)` (collective, on
/// every PE in the same order, refused while a view is alive on any PE) or `pgas.finalize()`;
/// the garbage collector never frees it (a collective free from the collector could hang the
/// job), and a handle collected before `free_tensor` raises a `ResourceWarning`. After the free
/// every use raises `pgas.FreedError`.
#[pyclass(module = "pgas", name = "Tensor", frozen)]
pub(crate) struct Tensor {
    pub(crate) state: Arc<State>,
    /// The registry's key.
    pub(crate) id: u64,
    /// Whether it was imported (`from_dlpack`): the registry drops it with the handle.
    pub(crate) imported: bool,
    pub(crate) dtype: &'static str,
    pub(crate) shape: Vec<usize>,
    pub(crate) ptr: u64,
    pub(crate) elem_size: usize,
}

impl Tensor {
    /// A handle to the registry's new entry `data`.
    pub(crate) fn register(state: &Arc<State>, data: AnyTensor, imported: bool) -> Tensor {
        let (dtype, shape, ptr, elem_size) = with_tensor!(&data, t => (
            data.dtype(),
            t.shape().to_vec(),
            t.as_device_ptr(),
            elem_size(t),
        ));
        let id = state.insert(data, imported);
        Tensor {
            state: state.clone(),
            id,
            imported,
            dtype,
            shape,
            ptr,
            elem_size,
        }
    }

    /// Runs `f` on the registry's tensor (`FreedError` once freed). Holds the registry lock:
    /// call it with the GIL released (`py.detach`).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut AnyTensor) -> PyResult<R>) -> PyResult<R> {
        // Reads and writes of the memory go on pgas's stream, after the `stream=` operations.
        crate::stream::settle()?;
        let mut reg = self.state.registry();
        let entry = reg
            .entries
            .get_mut(&self.id)
            .ok_or_else(|| freed(&self.describe()))?;
        f(&mut entry.data)
    }

    /// `float32 tensor of shape [4, 8]`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!("the {} tensor of shape {:?}", self.dtype, self.shape)
    }

    /// The element count.
    pub(crate) fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

#[pymethods]
impl Tensor {
    /// The shape, a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The dtype name (`"float32"`, `"bfloat16"`, ...; `pgas.DTYPES` lists them).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype
    }

    /// The device address of element 0 on this PE (what `torch.from_dlpack(t).data_ptr()` is).
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.ptr
    }

    /// The CUDA device ordinal (the GPU of this PE).
    #[getter]
    fn device(&self) -> usize {
        self.state.device
    }

    /// The size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.len() * self.elem_size
    }

    /// Whether the memory was freed (`free_tensor`, `finalize`): every other use raises then.
    #[getter]
    fn freed(&self) -> bool {
        !self.state.registry().entries.contains_key(&self.id)
    }

    /// The first dimension, as for a PyTorch tensor.
    fn __len__(&self) -> usize {
        self.shape[0]
    }

    /// `pgas.Tensor(shape=..., dtype=..., device=cuda:N, data_ptr=0x...)`.
    fn __repr__(&self) -> String {
        format!(
            "pgas.Tensor(shape={:?}, dtype={}, device=cuda:{}, data_ptr={:#x}{})",
            self.shape,
            self.dtype,
            self.state.device,
            self.ptr,
            if self.freed() { ", freed" } else { "" }
        )
    }

    /// This PE's copy as a flat list of Python numbers, read through pgas (its stream, then a
    /// copy to the host). Work that another stream (PyTorch's) queued on the memory is not
    /// waited for: `torch.cuda.synchronize()` first.
    fn to_list(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let values = py.detach(|| {
            self.with(|data| {
                Ok(with_tensor!(data, t => {
                    let v = t.to_vec().map_err(crate::errors::to_py)?;
                    crate::dtype::Values::from(v)
                }))
            })
        })?;
        values.into_py(py)
    }

    /// Sets every element of this PE's copy to `value`, through pgas (done when it returns).
    fn fill(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = crate::dtype::Scalar::parse(self.dtype, value)?;
        py.detach(|| self.with(|data| crate::dtype::fill(data, v)))
    }

    /// Copies a flat sequence of `len` numbers (the tensor's element count) into this PE's
    /// copy, through pgas (done when it returns).
    fn copy_from(&self, py: Python<'_>, values: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        let host = crate::dtype::Values::parse(self.dtype, &values)?;
        py.detach(|| self.with(|data| crate::dtype::copy_from(data, host)))
    }

    /// DLPack's device query: `(2, ordinal)`, 2 being `kDLCUDA`.
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = DLDevice::cuda(self.state.device as i32);
        (d.device_type.0, d.device_id)
    }

    /// The DLPack protocol: a fresh capsule over this tensor's memory (no copy). pgas's queued
    /// work on the memory is complete before it returns (pgas waits for its stream), so any
    /// consumer stream may use it at once. `copy=True` and a `dl_device` other than this GPU are
    /// refused: pgas only lends its memory. Each view counts as alive until the consumer
    /// releases it (`free_tensor` refuses meanwhile).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self, py: Python<'_>, stream: Option<&Bound<'_, PyAny>>, max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>, copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        // The export waits for pgas's stream, which comes after the `stream=` operations.
        crate::stream::settle()?;
        let views = {
            let reg = self.state.registry();
            let entry = reg
                .entries
                .get(&self.id)
                .ok_or_else(|| freed(&self.describe()))?;
            entry.views.clone()
        };
        let exporter = Exporter {
            source: Source::Tensor(self),
            device: DLDevice::cuda(self.state.device as i32),
            owner: ViewOwner::new(&self.state, views),
        };
        export_dlpack(&exporter, py, request)
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        if self.imported {
            // A view of memory someone else owns: releasing it is local (no collective).
            let entry = self.state.registry().entries.remove(&self.id);
            drop(entry);
        } else if self.state.registry().entries.contains_key(&self.id) {
            let _ = Python::try_attach(|py| {
                // A handle may go while an exception propagates (a temporary argument of a call
                // that raised): keep that exception, which the warning machinery would clear.
                let pending = PyErr::take(py);
                let msg = std::ffi::CString::new(format!(
                    "pgas: {} was garbage-collected without pgas.free_tensor(); its symmetric \
                     memory stays allocated until pgas.finalize() (a collective free from the \
                     garbage collector could hang the job)",
                    self.describe()
                ))
                .unwrap_or_default();
                let category = py.get_type::<PyResourceWarning>();
                if let Err(e) = PyErr::warn(py, &category, &msg, 1) {
                    e.write_unraisable(py, None);
                }
                if let Some(e) = pending {
                    e.restore(py);
                }
            });
        }
    }
}

/// The size of `t`'s elements.
fn elem_size<T>(_t: &pgas_runtime::SymTensor<T>) -> usize {
    std::mem::size_of::<T>()
}

/// Another PE's copy of a symmetric tensor mapped into this process (`pgas.get_peer_tensor`),
/// or a team's multicast address of one (`pgas.get_multicast_tensor`): a DLPack producer, so
/// `torch.from_dlpack(p)` loads and stores that memory directly (NVLink/PCIe). It keeps the
/// tensor from being freed while it lives (`free_tensor` refuses).
#[pyclass(module = "pgas", name = "PeerTensor", frozen)]
pub(crate) struct PeerTensor {
    pub(crate) state: Arc<State>,
    pub(crate) views: Arc<AtomicUsize>,
    pub(crate) dtype: &'static str,
    pub(crate) dl_dtype: DLDataType,
    pub(crate) shape: Vec<usize>,
    pub(crate) ptr: u64,
    /// The PE whose copy it is; `None` for a multicast address.
    pub(crate) pe: Option<usize>,
}

impl PeerTensor {
    /// Counts itself as a view of the tensor whose views counter is `views`.
    pub(crate) fn new(
        state: &Arc<State>, views: Arc<AtomicUsize>, src: &Tensor, dl_dtype: DLDataType, ptr: u64,
        pe: Option<usize>,
    ) -> PeerTensor {
        views.fetch_add(1, Ordering::SeqCst);
        PeerTensor {
            state: state.clone(),
            views,
            dtype: src.dtype,
            dl_dtype,
            shape: src.shape.clone(),
            ptr,
            pe,
        }
    }
}

impl Drop for PeerTensor {
    fn drop(&mut self) {
        self.views.fetch_sub(1, Ordering::SeqCst);
    }
}

#[pymethods]
impl PeerTensor {
    /// The shape, a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The dtype name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype
    }

    /// The address in this process (not a symmetric address: for loads and stores only).
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.ptr
    }

    /// The PE whose copy this is, or `None` for a multicast address.
    #[getter]
    fn pe(&self) -> Option<usize> {
        self.pe
    }

    /// `pgas.PeerTensor(pe=..., shape=..., dtype=..., data_ptr=0x...)`.
    fn __repr__(&self) -> String {
        let pe = self.pe.map_or("multicast".to_string(), |p| p.to_string());
        format!(
            "pgas.PeerTensor(pe={pe}, shape={:?}, dtype={}, data_ptr={:#x})",
            self.shape, self.dtype, self.ptr
        )
    }

    /// DLPack's device query: this PE's GPU (the mapping lives in its address space).
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = DLDevice::cuda(self.state.device as i32);
        (d.device_type.0, d.device_id)
    }

    /// The DLPack protocol, as `pgas.Tensor.__dlpack__` (no copy, refuses `copy=True`).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self, py: Python<'_>, stream: Option<&Bound<'_, PyAny>>, max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>, copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        let exporter = Exporter {
            source: Source::Peer(self),
            device: DLDevice::cuda(self.state.device as i32),
            owner: ViewOwner::new(&self.state, self.views.clone()),
        };
        export_dlpack(&exporter, py, request)
    }
}

/// What a DLPack request exports.
enum Source<'a> {
    Tensor(&'a Tensor),
    Peer(&'a PeerTensor),
}

/// One `__dlpack__` request.
struct Exporter<'a> {
    source: Source<'a>,
    device: DLDevice,
    owner: ViewOwner,
}

/// What each DLPack tensor holds: the state (NVSHMEM stays up) and the count of live views
/// of its tensor, released by the consumer's deleter.
#[derive(Clone)]
struct ViewOwner {
    _state: Arc<State>,
    views: Arc<AtomicUsize>,
}

impl ViewOwner {
    fn new(state: &Arc<State>, views: Arc<AtomicUsize>) -> ViewOwner {
        ViewOwner {
            _state: state.clone(),
            views,
        }
    }

    /// A counted copy, for one DLPack tensor.
    fn counted(&self) -> Box<ViewOwner> {
        self.views.fetch_add(1, Ordering::SeqCst);
        Box::new(self.clone())
    }
}

/// The deleter's side: one view fewer. Only counters, no Python: the consumer may call the
/// deleter from anywhere.
struct CountedOwner(Box<ViewOwner>);

impl Drop for CountedOwner {
    fn drop(&mut self) {
        self.0.views.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Exporter<'_> {
    fn export<M: ManagedTensorBase>(&self, py: Python<'_>) -> PyResult<Managed<M>> {
        let owner = Box::new(CountedOwner(self.owner.counted()));
        match self.source {
            Source::Tensor(t) => py.detach(|| {
                t.with(|data| {
                    // SAFETY: `owner` keeps the registry (so the memory) alive, and counts as
                    // a view, so `free_tensor` refuses to free it while the DLPack tensor lives;
                    // `finalize` refuses too, except at interpreter exit.
                    with_tensor!(&*data, s => unsafe { s.dlpack_sharing::<M, _>(owner) })
                        .map_err(crate::errors::to_py)
                })
            }),
            Source::Peer(p) => {
                let dims: Vec<i64> = p.shape.iter().map(|&d| d as i64).collect();
                let mut strides = vec![1i64; dims.len()];
                for i in (0..dims.len().saturating_sub(1)).rev() {
                    strides[i] = strides[i + 1] * dims[i + 1];
                }
                let mut t = Dynamic::new(dims, strides)
                    .initialize_as::<M>(owner)
                    .map_err(|e| {
                        crate::errors::misuse(format!("cannot describe the tensor: {e}"))
                    })?;
                t.set_device(self.device)
                    .set_dtype(p.dl_dtype)
                    .set_data(p.ptr as *mut std::ffi::c_void);
                // SAFETY: the address is the peer mapping (or multicast address) of a tensor
                // that `owner` keeps allocated (a counted view), with this shape and dtype.
                Ok(unsafe { t.finish() })
            }
        }
    }
}

impl DlpackExporter for Exporter<'_> {
    fn device(&self) -> DLDevice {
        self.device
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        // Any valid stream is fine: the export waits for the pgas stream on the host, so
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
