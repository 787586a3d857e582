//! RMA: `put`, `get` and their `_nbi` forms, one body (`rma`) for the four.

use pyo3::prelude::*;

use super::call::{dtype_mismatch, run};
use crate::dtype::with_pair;
use crate::errors::to_py;
use crate::tensor::Tensor;

/// Which RMA call.
#[derive(Clone, Copy)]
enum Rma {
    Put,
    Get,
    PutNbi,
    GetNbi,
}

/// Issues `kind` of `src` into `dst` with PE `pe` on the call's stream (`_on` forms; on pgas's
/// stream they are the plain ones).
fn rma(
    py: Python<'_>, kind: Rma, dst: &Tensor, src: &Tensor, pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let name = match kind {
        Rma::Put => "put",
        Rma::Get => "get",
        Rma::PutNbi => "put_nbi",
        Rma::GetNbi => "get_nbi",
    };
    run(py, stream, |call| {
        let (pgas, on) = (call.pgas, call.stream());
        let (d, s) = (call.tensor(dst)?, call.tensor(src)?);
        with_pair!(d, s, (d, s) => match kind {
            Rma::Put => pgas.put_on(on, d, s, pe),
            Rma::Get => pgas.get_on(on, d, s, pe),
            Rma::PutNbi => pgas.put_nbi_on(on, d, s, pe),
            Rma::GetNbi => pgas.get_nbi_on(on, d, s, pe),
        }.map_err(to_py), else Err(dtype_mismatch(name, dst, src)))
    })
}

/// Defines the RMA functions: `name = kind;` with the doc; each is `rma` of its kind.
macro_rules! rma_functions {
    ($($(#[doc = $doc:literal])* $name:ident = $kind:ident;)*) => {$(
        $(#[doc = $doc])*
        #[pyfunction]
        #[pyo3(signature = (dst, src, remote_pe, *, stream=None))]
        pub(super) fn $name(
            py: Python<'_>,
            dst: PyRef<'_, Tensor>,
            src: PyRef<'_, Tensor>,
            remote_pe: usize,
            stream: Option<&Bound<'_, PyAny>>,
        ) -> PyResult<()> {
            rma(py, Rma::$kind, &dst, &src, remote_pe, stream)
        }
    )*};
}

rma_functions! {
    /// Copies this PE's `src` into `dst` on PE `remote_pe` (same dtype and length). Asynchronous
    /// on pgas's stream (or on `stream`); complete after `quiet()` or `barrier_all()`.
    /// `src` must be complete first: after writing it through PyTorch, `torch.cuda.synchronize()`
    /// (or pass PyTorch's stream as `stream=`).
    put = Put;
    /// Copies `src` on PE `remote_pe` into this PE's `dst` (same dtype and length), on pgas's
    /// stream (or on `stream`); `dst.to_list()` sees it, a framework's view after `quiet()`.
    get = Get;
    /// `put` whose source may be reused only after `quiet()` (`nvshmemx_putmem_nbi_on_stream`).
    put_nbi = PutNbi;
    /// `get` that completes at the next `quiet()` (`nvshmemx_getmem_nbi_on_stream`).
    get_nbi = GetNbi;
}
