//! How every operation runs: its tensors looked up in the registry, the GIL released, and the
//! stream it goes on (pgas's, or the caller's `stream=`, `stream.rs`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use pgas_runtime::Pgas;
use pyo3::prelude::*;

use crate::dtype::AnyTensor;
use crate::errors::misuse;
use crate::state::{current, freed, Registry, State};
use crate::stream;
use crate::tensor::Tensor;

/// The tensor `t` stands for in `reg`, or `FreedError`.
pub(super) fn entry<'r>(
    reg: &'r Registry, state: &Arc<State>, t: &Tensor,
) -> PyResult<&'r AnyTensor> {
    if !Arc::ptr_eq(&t.state, state) {
        return Err(freed(&t.describe()));
    }
    reg.entries
        .get(&t.id)
        .map(|e| &e.data)
        .ok_or_else(|| freed(&t.describe()))
}

/// What an operation runs with: the runtime, the registry and its stream.
pub(crate) struct Call<'a> {
    pub(crate) pgas: &'a Pgas,
    state: &'a Arc<State>,
    reg: &'a Registry,
    /// The caller's `stream=`, wrapped; `None`: pgas's own stream.
    pub(crate) user: Option<&'a Arc<CudaStream>>,
}

impl<'a> Call<'a> {
    /// The tensor `t` stands for, or `FreedError`.
    pub(crate) fn tensor(&self, t: &Tensor) -> PyResult<&'a AnyTensor> {
        entry(self.reg, self.state, t)
    }

    /// The address of a symmetric staging buffer of at least `bytes` bytes, grown (an
    /// allocation: collective) when it is smaller. Kept until `finalize`.
    pub(super) fn staging(&self, bytes: usize) -> PyResult<u64> {
        self.state.staging(self.pgas, bytes)
    }

    /// The stream the operation goes on: the caller's, else pgas's (where the runtime's plain
    /// forms issue, so `x_on(call.stream(), ..)` is `x(..)` without `stream=`).
    pub(crate) fn stream(&self) -> &'a Arc<CudaStream> {
        self.user.unwrap_or(self.pgas.stream())
    }
}

/// Runs `f` with the runtime and the registry, the GIL released, on `stream` when given (the
/// runtime's `_on` forms, ordered with pgas's stream: `stream::on`).
pub(crate) fn run<R: Send>(
    py: Python<'_>, stream: Option<&Bound<'_, PyAny>>,
    f: impl FnOnce(&Call<'_>) -> PyResult<R> + Send,
) -> PyResult<R> {
    with_stream(py, stream, |state, pgas, user| {
        let reg = state.registry();
        stream::on(pgas, user, |user| {
            f(&Call {
                pgas,
                state,
                reg: &reg,
                user,
            })
        })
    })
}

/// Runs `f` with the state, the runtime and the caller's `stream=` (checked to be of this PE's
/// context; `None` for pgas's own), the GIL released: what `run` and the library's calls on
/// foreign memory (`library.rs`) start from.
pub(crate) fn with_stream<R: Send>(
    py: Python<'_>, stream: Option<&Bound<'_, PyAny>>,
    f: impl FnOnce(&Arc<State>, &Pgas, Option<stream::UserStream>) -> PyResult<R> + Send,
) -> PyResult<R> {
    // Arguments first: a bad one raises the same with or without a context.
    let raw = stream::handle(stream)?;
    let state = current()?;
    py.detach(|| {
        stream::in_call_on(raw, || {
            let pgas = state.pgas()?;
            let user = stream::check(&pgas, raw)?;
            f(&state, &pgas, user)
        })
    })
}

/// The error of an operation given tensors of two dtypes.
pub(crate) fn dtype_mismatch(op: &str, a: &Tensor, b: &Tensor) -> PyErr {
    misuse(format!(
        "{op}: dst is {} and src is {}; {op} takes tensors of one dtype",
        a.dtype, b.dtype
    ))
}

/// `len` elements of symmetric memory at `ptr` that the call keeps alive: a registry tensor (for
/// the collectives that take the destination as `&mut`, where the registry lends it as `&`) or
/// the staging buffer.
pub(crate) struct Region<T> {
    ptr: u64,
    len: usize,
    _elem: std::marker::PhantomData<T>,
}

impl<T> Region<T> {
    /// # Safety
    /// `ptr..ptr + len` elements is symmetric memory, live on every PE while the region is used.
    pub(crate) unsafe fn new(ptr: u64, len: usize) -> Region<T> {
        Region {
            ptr,
            len,
            _elem: std::marker::PhantomData,
        }
    }

    /// The whole of `t`, which the call's registry holds.
    pub(crate) fn of(t: &pgas_runtime::SymTensor<T>) -> Region<T>
    where
        T: cudarc::driver::DeviceRepr,
    {
        // SAFETY: a live symmetric tensor, borrowed from the registry for the call.
        unsafe { Region::new(t.as_device_ptr(), t.len()) }
    }
}

// SAFETY: `new`'s contract: symmetric memory of `len` elements, live while the region is used.
unsafe impl<T> pgas_runtime::SymRegion<T> for Region<T> {
    fn as_device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
