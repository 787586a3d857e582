//! `pgas.init()` and `pgas.Context`: the pgas context of this process, symmetric allocation,
//! DLPack import, and the host RMA and synchronization a Python program needs around its
//! framework's kernels.

use std::ffi::c_void;

use cudarc::driver::sys::CUstream;
use pgas_runtime::dlpark::ffi::DLDevice;
use pgas_runtime::dlpark::python::consumer::stream::{self, DlpackStream, StreamArg};
use pgas_runtime::dlpark::python::{from_dlpack, ImportedDlpack};
use pgas_runtime::Pgas;
use pyo3::prelude::*;

use crate::dtype::{self, with_pair};
use crate::tensor::Tensor;
use crate::{misuse, to_py};

/// Initializes pgas (NVSHMEM) in this process and returns its context: one PE, or one PE of
/// the job that `pgas-run -n N`, `mpirun` or `srun` started (as `pgas::init` in Rust,
/// `docs/runtime.md`). `heap_size` (bytes) sets the symmetric heap of each PE, `device` the
/// CUDA ordinal (else `PGAS_DEVICE` or the local rank). Once per process; without a GPU,
/// NVSHMEM or driver it raises `pgas.PgasError` saying what is missing (`pgas doctor` checks
/// the machine).
#[pyfunction]
#[pyo3(signature = (*, heap_size=None, device=None))]
pub(crate) fn init(
    py: Python<'_>,
    heap_size: Option<usize>,
    device: Option<usize>,
) -> PyResult<Context> {
    let mut builder = pgas_runtime::builder();
    if let Some(bytes) = heap_size {
        builder = builder.heap_size(bytes);
    }
    if let Some(ordinal) = device {
        builder = builder.device(ordinal);
    }
    // Other PEs may take a while to arrive (the bootstrap waits for them): let other Python
    // threads run meanwhile.
    let pgas = py.detach(|| builder.init()).map_err(to_py)?;
    Ok(Context { pgas })
}

/// The pgas context of this process (`pgas.init()`). NVSHMEM is finalized when it and every
/// tensor are gone.
#[pyclass(module = "pgas", name = "Context", frozen)]
pub(crate) struct Context {
    pgas: Pgas,
}

/// A shape: an int or a sequence of ints.
#[derive(FromPyObject)]
enum Dims {
    One(usize),
    Many(Vec<usize>),
}

#[pymethods]
impl Context {
    /// This PE's number, 0 to `n_pes - 1`.
    #[getter]
    fn my_pe(&self) -> usize {
        self.pgas.my_pe()
    }

    /// The number of PEs.
    #[getter]
    fn n_pes(&self) -> usize {
        self.pgas.n_pes()
    }

    /// This PE's CUDA device ordinal (`torch.device("cuda", ctx.device)` is its GPU).
    #[getter]
    fn device(&self) -> usize {
        self.pgas.device_ordinal()
    }

    /// The symmetric heap size of each PE, in bytes.
    #[getter]
    fn heap_size(&self) -> usize {
        self.pgas.heap_size()
    }

    /// The address of pgas's CUDA stream (`torch.cuda.ExternalStream(ctx.stream)` orders
    /// PyTorch work with pgas's).
    #[getter]
    fn stream(&self) -> usize {
        self.pgas.stream().cu_stream() as usize
    }

    /// Allocates a zeroed symmetric tensor of `shape` (an int or a sequence of 1 to 8 ints)
    /// and `dtype` (a name of `pgas.DTYPES` or a `torch.dtype`; `float32` when omitted). Collective: every PE
    /// allocates the same shape and dtype in the same order (a mismatch raises on every PE).
    #[pyo3(signature = (shape, dtype=None))]
    fn alloc(
        &self,
        py: Python<'_>,
        shape: Dims,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Tensor> {
        let name = dtype.map_or(Ok("float32"), dtype::parse)?;
        let dims = match shape {
            Dims::One(n) => vec![n],
            Dims::Many(dims) => dims,
        };
        let data = py.detach(|| dtype::alloc(&self.pgas, &dims, name))?;
        Ok(self.tensor(data))
    }

    /// Takes any DLPack producer (a `torch.Tensor`, a capsule, a `pgas.Tensor`) whose memory
    /// lies in the symmetric heap on this PE's GPU, contiguous, as a `pgas.Tensor` over the same
    /// memory: a torch view (a row, a slice) of a pgas tensor, or a tensor of NVSHMEM4Py. The
    /// producer's pending work is ordered before pgas's stream (DLPack's `stream` argument).
    /// Memory outside the heap (PyTorch's own allocations) is refused with the fix: other PEs
    /// could not address it. Import on every PE at the same point, so that the tensors are
    /// symmetric.
    // The name every DLPack consumer uses (`torch.from_dlpack`, `cupy.from_dlpack`).
    #[allow(clippy::wrong_self_convention)]
    fn from_dlpack(&self, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let stream = PgasStream {
            stream: self.pgas.stream().cu_stream(),
            device: DLDevice::cuda(self.pgas.device_ordinal() as i32),
        };
        let imported = from_dlpack(obj.as_borrowed(), Some(&stream), None)?;
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
            ImportedDlpack::Legacy(t) => dtype::import(&self.pgas, name, t)?,
            ImportedDlpack::Versioned(t) => dtype::import(&self.pgas, name, t)?,
        };
        Ok(self.tensor(data))
    }

    /// Copies this PE's `src` into `dst` on PE `pe` (same dtype and length), on pgas's stream;
    /// complete after `quiet()` or `barrier_all()`. `src` must be complete first: after writing
    /// it through PyTorch, `torch.cuda.synchronize()` (or import the view with `from_dlpack`).
    fn put(
        &self,
        py: Python<'_>,
        dst: PyRef<'_, Tensor>,
        src: PyRef<'_, Tensor>,
        pe: usize,
    ) -> PyResult<()> {
        with_pair!(&dst.data, &src.data, (d, s) => {
            py.detach(|| self.pgas.put(d, s, pe)).map_err(to_py)
        }, else Err(dtype_mismatch("put", &dst, &src)))
    }

    /// Copies `src` on PE `pe` into this PE's `dst` (same dtype and length), on pgas's stream;
    /// `dst.to_list()` sees it, a framework's view after `quiet()`.
    fn get(
        &self,
        py: Python<'_>,
        dst: PyRef<'_, Tensor>,
        src: PyRef<'_, Tensor>,
        pe: usize,
    ) -> PyResult<()> {
        with_pair!(&dst.data, &src.data, (d, s) => {
            py.detach(|| self.pgas.get(d, s, pe)).map_err(to_py)
        }, else Err(dtype_mismatch("get", &dst, &src)))
    }

    /// Completes every put and get this PE issued, then waits for pgas's stream.
    fn quiet(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.pgas.quiet()).map_err(to_py)
    }

    /// Barrier over all PEs that also completes every put and get issued before it, then
    /// waits for pgas's stream: afterwards every PE's framework views show what was put there.
    fn barrier_all(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.pgas.barrier_all()).map_err(to_py)
    }

    /// `pgas.Context(my_pe=..., n_pes=..., device=cuda:N)`.
    fn __repr__(&self) -> String {
        format!(
            "pgas.Context(my_pe={}, n_pes={}, device=cuda:{})",
            self.pgas.my_pe(),
            self.pgas.n_pes(),
            self.pgas.device_ordinal()
        )
    }
}

impl Context {
    fn tensor(&self, data: dtype::AnyTensor) -> Tensor {
        Tensor {
            data,
            device: self.pgas.device_ordinal(),
        }
    }
}

fn dtype_mismatch(op: &str, dst: &Tensor, src: &Tensor) -> PyErr {
    misuse(format!(
        "{op}: dst is {} and src is {}; {op} copies between tensors of one dtype",
        dst.data.dtype(),
        src.data.dtype()
    ))
}

/// pgas's stream as the consumer stream of a DLPack import: the producer (PyTorch) makes its
/// pending work on the memory precede it.
struct PgasStream {
    stream: CUstream,
    device: DLDevice,
}

// SAFETY: the stream is pgas's, alive as long as the context that the import runs in, and on
// `device`; for a tensor on another device no stream is passed (pgas refuses the import then).
unsafe impl DlpackStream for PgasStream {
    fn as_python_arg(&self, _py: Python<'_>, device: DLDevice) -> PyResult<StreamArg> {
        Ok(if device == self.device {
            stream::cuda(self.stream as *mut c_void)
        } else {
            stream::none()
        })
    }
}
