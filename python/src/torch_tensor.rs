//! torch tensors read from Rust, for the torch ops' fast path: an eager GEMM with `out=`
//! (`pgas/_torch_ops.py`) is checked and launched in one native call, where the same checks in
//! Python cost about 3.5 us of attribute reads (`py_*` in `python/benches/torch_ops.py`).
//! Whatever this does not recognize gives no view; the Python path then checks again and says
//! what is wrong, so the error messages live there alone.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The element types of the GEMM's operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    Bf16,
    E4m3,
}

/// A contiguous 2-dimensional CUDA tensor.
pub(crate) struct Matrix {
    pub(crate) ptr: u64,
    /// The CUDA device's index.
    pub(crate) device: i64,
    /// `None`: another dtype than the GEMM's.
    pub(crate) elem: Option<Elem>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
}

/// `torch.bfloat16` and `torch.float8_e4m3fn`, looked up once (a dtype is one object for the
/// life of the process, so a tensor's is compared by identity).
static DTYPES: PyOnceLock<[Py<PyAny>; 2]> = PyOnceLock::new();

/// `torch._C._cuda_getCurrentRawStream`, looked up once.
static RAW_STREAM: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `t` as a [`Matrix`], or `None` when it is not a contiguous 2-dimensional CUDA tensor (or not
/// a tensor at all: any failed read).
pub(crate) fn matrix(t: &Bound<'_, PyAny>) -> Option<Matrix> {
    let py = t.py();
    let (rows, cols) = t.getattr(intern!(py, "shape")).ok()?.extract().ok()?;
    let cuda = t.getattr(intern!(py, "is_cuda")).ok()?.is_truthy().ok()?;
    let contiguous = t
        .call_method0(intern!(py, "is_contiguous"))
        .ok()?
        .is_truthy()
        .ok()?;
    if !cuda || !contiguous {
        return None;
    }
    let device: i64 = t
        .call_method0(intern!(py, "get_device"))
        .ok()?
        .extract()
        .ok()?;
    let dtype = t.getattr(intern!(py, "dtype")).ok()?;
    let [bf16, e4m3] = DTYPES
        .get_or_try_init(py, || -> PyResult<_> {
            let torch = py.import("torch")?;
            Ok([
                torch.getattr("bfloat16")?.unbind(),
                torch.getattr("float8_e4m3fn")?.unbind(),
            ])
        })
        .ok()?;
    let elem = [(bf16, Elem::Bf16), (e4m3, Elem::E4m3)]
        .into_iter()
        .find_map(|(d, e)| dtype.is(d).then_some(e));
    let ptr = t
        .call_method0(intern!(py, "data_ptr"))
        .ok()?
        .extract()
        .ok()?;
    Some(Matrix {
        ptr,
        device,
        elem,
        rows,
        cols,
    })
}

/// torch's current stream on CUDA device `device`, as its raw handle (what `stream=` takes).
pub(crate) fn current_stream(py: Python<'_>, device: i64) -> PyResult<Bound<'_, PyAny>> {
    RAW_STREAM
        .get_or_try_init(py, || -> PyResult<_> {
            Ok(py
                .import("torch")?
                .getattr("_C")?
                .getattr("_cuda_getCurrentRawStream")?
                .unbind())
        })?
        .bind(py)
        .call1((device,))
}
