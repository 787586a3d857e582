//! The element types a Python `pgas.Tensor` can hold: one table (`dtypes!`) gives each its
//! Python name, Rust type and conversion to and from Python numbers; [`AnyTensor`] is a
//! `SymTensor` of any of them, and `with_tensor!` runs code on whichever it holds.

use cudarc::driver::DeviceRepr;
use half::{bf16, f16};
use pgas_runtime::dlpark::ffi::DLDataType;
use pgas_runtime::dlpark::DlpackElement;
use pgas_runtime::SymTensor;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

/// An element type of a Python tensor.
pub(crate) trait Elem: DeviceRepr + DlpackElement + Copy + Send + Sync + 'static {
    /// A Python number of this value.
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
    /// This type's value of a Python number (an `OverflowError` or `TypeError` when it has none).
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self>;
}

/// Integers and `f32`/`f64` convert through pyo3 directly (range-checked).
macro_rules! direct_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                self.into_py_any(py)
            }
            fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
                obj.extract()
            }
        }
    )*};
}
direct_elem!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

/// The 16-bit floats go through `f32` (Python has no such type; rounding to nearest).
macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                self.to_f32().into_py_any(py)
            }
            fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
                Ok(<$t>::from_f32(obj.extract::<f32>()?))
            }
        }
    )*};
}
half_elem!(f16, bf16);

/// The table: `Variant(Rust type) = "python name"`, in the order `pgas.DTYPES` lists them.
macro_rules! dtypes {
    ($($variant:ident($t:ty) = $name:literal),* $(,)?) => {
        /// A symmetric tensor of one of the supported element types.
        pub(crate) enum AnyTensor {
            $(
                #[doc = concat!("Elements of `", stringify!($t), "` (`", $name, "`).")]
                $variant(SymTensor<$t>),
            )*
        }

        /// The dtype names Python code passes (also with a `torch.` prefix).
        pub(crate) const NAMES: &[&str] = &[$($name),*];

        /// Allocates a symmetric tensor of shape `dims` and dtype `name` (collective).
        pub(crate) fn alloc(
            pgas: &pgas_runtime::Pgas,
            dims: &[usize],
            name: &str,
        ) -> PyResult<AnyTensor> {
            match name {
                $($name => Ok(AnyTensor::$variant(
                    pgas.alloc_shaped::<$t>(dims).map_err(crate::errors::to_py)?,
                )),)*
                _ => Err(unknown(name)),
            }
        }

        /// The Rust element type of dtype `name` (`"float32"` -> `"f32"`), as kernel
        /// parameters spell it.
        pub(crate) fn rust_elem(name: &str) -> Option<&'static str> {
            match name {
                $($name => Some(stringify!($t)),)*
                _ => None,
            }
        }

        /// The dtype name of a DLPack type, or `None` when pgas does not hold it.
        pub(crate) fn name_of(dtype: DLDataType) -> Option<&'static str> {
            $(if dtype == <$t as DlpackElement>::DTYPE {
                return Some($name);
            })*
            None
        }

        /// Registers `bytes` of CUDA VMM memory at `ptr`, owned by `keep_alive`, as a
        /// symmetric tensor of dtype `name` (see `Pgas::register_external`; collective).
        ///
        /// # Safety
        /// `ptr..ptr + bytes` stays mapped while `keep_alive` lives.
        pub(crate) unsafe fn register(
            pgas: &pgas_runtime::Pgas,
            name: &str,
            ptr: u64,
            bytes: usize,
            keep_alive: impl Send + Sync + 'static,
        ) -> PyResult<AnyTensor> {
            match name {
                // SAFETY: the caller's contract, handed on.
                $($name => Ok(AnyTensor::$variant(unsafe {
                    pgas.register_external::<$t>(ptr, bytes, keep_alive)
                }.map_err(crate::errors::to_py)?)),)*
                _ => Err(unknown(name)),
            }
        }

        /// Imports a DLPack tensor of dtype `name` (see `Pgas::from_dlpack`).
        pub(crate) fn import(
            pgas: &pgas_runtime::Pgas,
            name: &str,
            tensor: pgas_runtime::dlpark::Managed<
                impl pgas_runtime::dlpark::ManagedTensorBase + 'static,
            >,
        ) -> PyResult<AnyTensor> {
            match name {
                $($name => Ok(AnyTensor::$variant(
                    pgas.from_dlpack::<$t>(tensor).map_err(crate::errors::to_py)?,
                )),)*
                _ => Err(unknown(name)),
            }
        }

        impl AnyTensor {
            /// The dtype name.
            pub(crate) fn dtype(&self) -> &'static str {
                match self {
                    $(AnyTensor::$variant(_) => $name,)*
                }
            }
        }

        /// Host values of one dtype: what `to_list` reads and `copy_from` writes.
        pub(crate) enum Values {
            $(
                #[doc = concat!("`", $name, "` values.")]
                $variant(Vec<$t>),
            )*
        }

        $(impl From<Vec<$t>> for Values {
            fn from(v: Vec<$t>) -> Values {
                Values::$variant(v)
            }
        })*

        impl Values {
            /// Python numbers of dtype `name` (`OverflowError`/`TypeError` for one that is not).
            pub(crate) fn parse(name: &str, values: &[Bound<'_, PyAny>]) -> PyResult<Values> {
                match name {
                    $($name => Ok(Values::$variant(
                        values.iter().map(Elem::from_py).collect::<PyResult<Vec<$t>>>()?,
                    )),)*
                    _ => Err(unknown(name)),
                }
            }

            /// As a list of Python numbers.
            pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
                match self {
                    $(Values::$variant(v) => v.into_iter().map(|x| x.to_py(py)).collect(),)*
                }
            }
        }

        /// One value of one dtype.
        #[derive(Clone, Copy)]
        pub(crate) enum Scalar {
            $(
                #[doc = concat!("A `", $name, "` value.")]
                $variant($t),
            )*
        }

        impl Scalar {
            /// A Python number as dtype `name`.
            pub(crate) fn parse(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Scalar> {
                match name {
                    $($name => Ok(Scalar::$variant(Elem::from_py(value)?)),)*
                    _ => Err(unknown(name)),
                }
            }

            /// As a Python number.
            pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                match self {
                    $(Scalar::$variant(v) => v.to_py(py),)*
                }
            }
        }

        /// The value of a [`Scalar`] as a Rust type (the tensor's element type).
        pub(crate) trait ScalarOf: Sized {
            /// `v` as `Self`; an `ArgumentError` when `v` is of another dtype.
            fn of(v: Scalar) -> PyResult<Self>;
        }

        $(impl ScalarOf for $t {
            fn of(v: Scalar) -> PyResult<$t> {
                match v {
                    Scalar::$variant(x) => Ok(x),
                    _ => Err(crate::errors::misuse(format!("an operand of another dtype than {}", $name))),
                }
            }
        }

        impl From<$t> for Scalar {
            fn from(v: $t) -> Scalar {
                Scalar::$variant(v)
            }
        })*

        /// Sets every element of `t` to `v` (of its dtype: `Scalar::parse` with `t.dtype()`).
        pub(crate) fn fill(t: &mut AnyTensor, v: Scalar) -> PyResult<()> {
            match (t, v) {
                $((AnyTensor::$variant(t), Scalar::$variant(v)) => t.fill(v).map_err(crate::errors::to_py),)*
                (t, _) => Err(crate::errors::misuse(format!("fill: a value of another dtype than {}", t.dtype()))),
            }
        }

        /// Copies `v` (of `t`'s dtype and length) into `t`.
        pub(crate) fn copy_from(t: &mut AnyTensor, v: Values) -> PyResult<()> {
            match (t, v) {
                $((AnyTensor::$variant(t), Values::$variant(v)) => t.copy_from(&v).map_err(crate::errors::to_py),)*
                (t, _) => Err(crate::errors::misuse(format!("copy_from: values of another dtype than {}", t.dtype()))),
            }
        }

        /// Runs `$body` with `$t` bound to the `SymTensor<_>` that `$any` (an `AnyTensor`,
        /// `&AnyTensor` or `&mut AnyTensor`) holds.
        macro_rules! with_tensor {
            ($any:expr, $tensor:ident => $body:expr) => {
                match $any {
                    $(crate::dtype::AnyTensor::$variant($tensor) => $body,)*
                }
            };
        }

        /// Runs `$body` with `$a` and `$b` bound to the tensors of two `AnyTensor`s of the same
        /// dtype; evaluates to `$mismatch` when their dtypes differ.
        macro_rules! with_pair {
            ($x:expr, $y:expr, ($a:ident, $b:ident) => $body:expr, else $mismatch:expr) => {
                match ($x, $y) {
                    $((crate::dtype::AnyTensor::$variant($a), crate::dtype::AnyTensor::$variant($b)) => $body,)*
                    _ => $mismatch,
                }
            };
        }
    };
}

dtypes! {
    F16(f16) = "float16",
    BF16(bf16) = "bfloat16",
    F32(f32) = "float32",
    F64(f64) = "float64",
    I8(i8) = "int8",
    I16(i16) = "int16",
    I32(i32) = "int32",
    I64(i64) = "int64",
    U8(u8) = "uint8",
    U16(u16) = "uint16",
    U32(u32) = "uint32",
    U64(u64) = "uint64",
}

// The path import lets the other modules name the macros (`use crate::dtype::with_tensor`);
// clippy takes it for a redundant one.
#[allow(clippy::single_component_path_imports)]
pub(crate) use {with_pair, with_tensor};

/// The dtype name that `dtype` stands for: a name of [`NAMES`] (`"float32"`), anything whose
/// `str()` is one, also with a `torch.` prefix (`torch.float32`, `numpy.dtype("float32")`), or
/// a NumPy/CuPy scalar type (`numpy.float32`).
pub(crate) fn parse(dtype: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    // A NumPy/CuPy scalar type (`numpy.float32`) names itself in `__name__`.
    let text = if dtype.is_instance_of::<pyo3::types::PyType>() && dtype.hasattr("__name__")? {
        dtype.getattr("__name__")?.str()?.to_string()
    } else {
        dtype.str()?.to_string()
    };
    let name = text.strip_prefix("torch.").unwrap_or(&text);
    NAMES
        .iter()
        .copied()
        .find(|n| *n == name)
        .ok_or_else(|| unknown(&text))
}

fn unknown(name: &str) -> PyErr {
    crate::errors::misuse(format!(
        "unknown dtype {name:?}; pgas tensors hold one of {}",
        NAMES.join(", ")
    ))
}
