//! Host atomics: `atomic_fetch`, `atomic_set`, `atomic_swap`, `atomic_compare_swap`, and the
//! add, inc, and, or and xor families, one body (`amo`) for all of them. They take no
//! `stream=`: NVSHMEM's host atomics are blocking calls, not stream operations.

use pyo3::prelude::*;

use super::call::run;
use crate::dtype::{AnyTensor, Scalar, ScalarOf};
use crate::errors::misuse;
use crate::errors::to_py;
use crate::tensor::Tensor;

/// Runs `$body` with `$t` bound to the tensor when it holds an element type with every host
/// atomic (the 32- and 64-bit integers).
macro_rules! amo_int {
    ($data:expr, $what:expr, $t:ident => $body:expr) => {
        match $data {
            AnyTensor::I32($t) => $body,
            AnyTensor::I64($t) => $body,
            AnyTensor::U32($t) => $body,
            AnyTensor::U64($t) => $body,
            other => Err(misuse(format!(
                "{}: this atomic takes int32, int64, uint32 or uint64 tensors, not {}",
                $what,
                other.dtype()
            ))),
        }
    };
}

/// `amo_int!` that also takes `float32`/`float64` (fetch, set and swap).
macro_rules! amo_elem {
    ($data:expr, $what:expr, $t:ident => $body:expr) => {
        match $data {
            AnyTensor::F32($t) => $body,
            AnyTensor::F64($t) => $body,
            other => amo_int!(other, $what, $t => $body),
        }
    };
}

/// One host atomic.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Amo {
    Fetch,
    Set,
    Swap,
    CompareSwap,
    Add,
    FetchAdd,
    Inc,
    FetchInc,
    And,
    FetchAnd,
    Or,
    FetchOr,
    Xor,
    FetchXor,
}

/// Runs atomic `op` on element `index` of `t` on PE `pe` with operands `a` (and `b`: the new
/// value of a compare-swap); returns the fetched value, or `None` for the non-fetching ones.
fn amo(
    py: Python<'_>, op: Amo, t: &Tensor, index: usize, pe: usize,
    operands: [Option<&Bound<'_, PyAny>>; 2],
) -> PyResult<Option<Py<PyAny>>> {
    let what = "atomic";
    let parse = |v: Option<&Bound<'_, PyAny>>| v.map(|v| Scalar::parse(t.dtype, v)).transpose();
    let (a, b) = (parse(operands[0])?, parse(operands[1])?);
    let need = |v: Option<Scalar>| v.ok_or_else(|| misuse("atomic: a missing operand".into()));
    let got: Option<Scalar> = run(py, None, |call| {
        let (pgas, data) = (call.pgas, call.tensor(t)?);
        match op {
            Amo::Fetch => {
                amo_elem!(data, what, s => pgas.atomic_fetch(s, index, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Set => {
                amo_elem!(data, what, s => pgas.atomic_set(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::Swap => {
                amo_elem!(data, what, s => pgas.atomic_swap(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::CompareSwap => {
                amo_int!(data, what, s => pgas.atomic_compare_swap(s, index, ScalarOf::of(need(a)?)?, ScalarOf::of(need(b)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Add => {
                amo_int!(data, what, s => pgas.atomic_add(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchAdd => {
                amo_int!(data, what, s => pgas.atomic_fetch_add(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Inc => {
                amo_int!(data, what, s => pgas.atomic_inc(s, index, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchInc => {
                amo_int!(data, what, s => pgas.atomic_fetch_inc(s, index, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::And => {
                amo_int!(data, what, s => pgas.atomic_and(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchAnd => {
                amo_int!(data, what, s => pgas.atomic_fetch_and(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Or => {
                amo_int!(data, what, s => pgas.atomic_or(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchOr => {
                amo_int!(data, what, s => pgas.atomic_fetch_or(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Xor => {
                amo_int!(data, what, s => pgas.atomic_xor(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchXor => {
                amo_int!(data, what, s => pgas.atomic_fetch_xor(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
        }
    })?;
    got.map(|v| v.into_py(py)).transpose()
}

/// Defines the atomics: `name(t, index, [operands], pe)`, the doc, the operation.
macro_rules! atomics {
    ($($(#[doc = $doc:literal])* $name:ident($($arg:ident),*) = $op:ident;)*) => {$(
        $(#[doc = $doc])*
        #[pyfunction]
        fn $name(
            py: Python<'_>,
            t: PyRef<'_, Tensor>,
            index: usize,
            $($arg: &Bound<'_, PyAny>,)*
            pe: usize,
        ) -> PyResult<Option<Py<PyAny>>> {
            let ops: Vec<&Bound<'_, PyAny>> = vec![$($arg),*];
            amo(py, Amo::$op, &t, index, pe, [ops.first().copied(), ops.get(1).copied()])
        }
    )*
    pub(super) fn add_atomics(m: &Bound<'_, PyModule>) -> PyResult<()> {
        $(m.add_function(wrap_pyfunction!($name, m)?)?;)*
        Ok(())
    }
    };
}

atomics! {
    /// Atomically reads `t[index]` on PE `pe` (int32/64, uint32/64, float32/64).
    atomic_fetch() = Fetch;
    /// Atomically writes `value` to `t[index]` on PE `pe` (int32/64, uint32/64, float32/64).
    atomic_set(value) = Set;
    /// Atomically writes `value` to `t[index]` on PE `pe`; returns the old value.
    atomic_swap(value) = Swap;
    /// Writes `value` to `t[index]` on PE `pe` if it equals `cond`; returns the old value.
    atomic_compare_swap(cond, value) = CompareSwap;
    /// Atomically adds `value` to `t[index]` on PE `pe` (integer tensors).
    atomic_add(value) = Add;
    /// Atomically adds `value` to `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_add(value) = FetchAdd;
    /// Atomically adds 1 to `t[index]` on PE `pe`.
    atomic_inc() = Inc;
    /// Atomically adds 1 to `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_inc() = FetchInc;
    /// Atomically ands `value` into `t[index]` on PE `pe`.
    atomic_and(value) = And;
    /// Atomically ands `value` into `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_and(value) = FetchAnd;
    /// Atomically ors `value` into `t[index]` on PE `pe`.
    atomic_or(value) = Or;
    /// Atomically ors `value` into `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_or(value) = FetchOr;
    /// Atomically xors `value` into `t[index]` on PE `pe`.
    atomic_xor(value) = Xor;
    /// Atomically xors `value` into `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_xor(value) = FetchXor;
}
