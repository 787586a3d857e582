//! torch tensors read from Rust: whether a call may skip torch's dispatcher (`_untraced`, the
//! test behind `pgas/_torch_ops.py`'s eager path), and the GEMM's `out=` form checked and
//! launched in one native call (`library.rs`'s `_gemm_into`), where the same checks in Python
//! cost microseconds of attribute reads (`py_*` in `python/benches/torch_ops.py`). Whatever
//! this does not recognize gives no view; the Python path then checks again and says what is
//! wrong, so the error messages live there alone.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

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

/// What of torch the reads compare with or call, looked up once (a dtype or a type is one
/// object for the life of the process, so a tensor's is compared by identity).
struct Torch {
    tensor: Py<PyAny>,
    parameter: Py<PyAny>,
    bf16: Py<PyAny>,
    e4m3: Py<PyAny>,
    grad_enabled: Py<PyAny>,
    /// `torch._C._len_torch_dispatch_stack`: active dispatch modes (FakeTensorMode, make_fx's);
    /// `None` in a torch without it, where every call takes the dispatcher.
    dispatch_modes: Option<Py<PyAny>>,
    /// `torch._C._cuda_getCurrentRawStream`.
    raw_stream: Py<PyAny>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

fn torch(py: Python<'_>) -> PyResult<&Torch> {
    TORCH.get_or_try_init(py, || {
        let torch = py.import("torch")?;
        let c = torch.getattr("_C")?;
        Ok(Torch {
            tensor: torch.getattr("Tensor")?.unbind(),
            parameter: torch.getattr("nn")?.getattr("Parameter")?.unbind(),
            bf16: torch.getattr("bfloat16")?.unbind(),
            e4m3: torch.getattr("float8_e4m3fn")?.unbind(),
            grad_enabled: torch.getattr("is_grad_enabled")?.unbind(),
            dispatch_modes: c
                .getattr("_len_torch_dispatch_stack")
                .ok()
                .map(Bound::unbind),
            raw_stream: c.getattr("_cuda_getCurrentRawStream")?.unbind(),
        })
    })
}

/// Whether a call on `args` may skip torch's dispatcher, which would only call the op's
/// implementation back: no dispatch mode is active, and every tensor of `args` is a plain
/// `torch.Tensor` or `torch.nn.Parameter` (no subclass such as a FakeTensor), none requiring
/// grad while grad is on (through the dispatcher such a call's results require grad, with an
/// autograd kernel that refuses backward). `torch.compile`'s trace is the caller's test: it
/// cannot step into a native function.
#[pyfunction]
pub(crate) fn _untraced(args: &Bound<'_, PyTuple>) -> PyResult<bool> {
    untraced(args.py(), args.iter())
}

/// [`_untraced`] on any arguments (the GEMM's `out=` call asks it of its three without making
/// a tuple).
pub(crate) fn untraced<'py>(
    py: Python<'py>, args: impl IntoIterator<Item = Bound<'py, PyAny>>,
) -> PyResult<bool> {
    let t = torch(py)?;
    let Some(modes) = &t.dispatch_modes else {
        return Ok(false);
    };
    if modes.bind(py).call0()?.is_truthy()? {
        return Ok(false);
    }
    let (tensor, parameter) = (t.tensor.bind(py), t.parameter.bind(py));
    let mut grad = None;
    for a in args {
        if !a.is_instance(tensor)? {
            continue;
        }
        let ty = a.get_type();
        if !(ty.is(tensor) || ty.is(parameter)) {
            return Ok(false);
        }
        if a.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
            let on = match grad {
                Some(on) => on,
                None => *grad.insert(t.grad_enabled.bind(py).call0()?.is_truthy()?),
            };
            if on {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

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
    let torch = torch(py).ok()?;
    let elem = [(&torch.bf16, Elem::Bf16), (&torch.e4m3, Elem::E4m3)]
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
    torch(py)?.raw_stream.bind(py).call1((device,))
}
