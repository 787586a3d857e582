//! The module's exceptions (`pgas.PgasError` and its kinds), pgas's errors as them, and the
//! misuse this module finds itself.

use pgas_runtime::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(
    pgas,
    PgasError,
    PyRuntimeError,
    "An error of pgas; its message says what went wrong and what to do. Every exception pgas \
     raises for a failed operation is one of its subclasses, or this class itself."
);
create_exception!(
    pgas,
    InitError,
    PgasError,
    "pgas could not start: no GPU or driver, NVSHMEM missing or of another version, a \
     bootstrap that failed, or init called twice."
);
create_exception!(
    pgas,
    NotInitializedError,
    PgasError,
    "A call that needs pgas before `pgas.init()` or after `pgas.finalize()`."
);
create_exception!(
    pgas,
    ArgumentError,
    PgasError,
    "A bad argument: a PE, index or length out of range, dtypes or lengths that differ, a \
     tensor outside the symmetric heap, a stream of another device."
);
create_exception!(
    pgas,
    FreedError,
    PgasError,
    "A tensor used after `free_tensor` or `finalize`."
);
create_exception!(
    pgas,
    CollectiveMismatchError,
    PgasError,
    "The PEs disagreed on a collective call (an allocation of another size, `free_tensor` of \
     another tensor or while a view was alive); raised on every PE, none is left waiting."
);
create_exception!(
    pgas,
    HeapError,
    PgasError,
    "The symmetric heap has no room for the allocation (raise `heap_size`)."
);
create_exception!(
    pgas,
    KernelSourceError,
    PgasError,
    "A kernel given to `pgas.kernel` as a string that the pgas language refuses (a syntax or \
     type error); its message, and its `line` and `column` attributes, name the place in the \
     string."
);
create_exception!(
    pgas,
    TeamError,
    PgasError,
    "A team this PE is not a member of, or one that was destroyed."
);
create_exception!(
    pgas,
    UnavailableError,
    PgasError,
    "The machine or configuration lacks the feature (a multicast tensor without NVLink SHARP)."
);
create_exception!(
    pgas,
    WaitTimeoutError,
    PgasError,
    "A wait (`signal_wait`) was not satisfied in time; the stream stays blocked behind it, so \
     treat it as fatal for the run."
);

/// A pgas error as the Python exception of its kind, with pgas's message.
pub(crate) fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::NvshmemNotFound { .. }
        | Error::NvshmemLoad { .. }
        | Error::NvshmemHeader { .. }
        | Error::NvshmemVersionMismatch { .. }
        | Error::NvshmemUnsupported { .. }
        | Error::NoCudaDriver
        | Error::NoSuchDevice { .. }
        | Error::AlreadyInitialized
        | Error::Bootstrap { .. }
        | Error::MpiNotEnabled
        | Error::Launcher(_)
        | Error::RankFailed { .. }
        | Error::NvrtcMissing { .. }
        | Error::HeadersMissing { .. } => InitError::new_err(msg),
        Error::Finalized => NotInitializedError::new_err(msg),
        Error::HeapExhausted { .. } => HeapError::new_err(msg),
        Error::AllocMismatch { .. } => CollectiveMismatchError::new_err(msg),
        Error::OutOfRange { .. }
        | Error::EmptyView { .. }
        | Error::EmptyAllocation
        | Error::LengthMismatch { .. }
        | Error::InvalidPe { .. }
        | Error::InvalidConfig { .. }
        | Error::NotSymmetric { .. }
        | Error::Dlpack { .. } => ArgumentError::new_err(msg),
        Error::NotInTeam { .. } | Error::TeamDestroyed { .. } => TeamError::new_err(msg),
        Error::Unavailable { .. } => UnavailableError::new_err(msg),
        Error::TimedOut { .. } => WaitTimeoutError::new_err(msg),
        _ => PgasError::new_err(msg),
    }
}

/// A misuse found by this module itself (not by the runtime), as `pgas.ArgumentError`.
pub(crate) fn misuse(message: String) -> PyErr {
    ArgumentError::new_err(message)
}

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PgasError", py.get_type::<PgasError>())?;
    m.add("InitError", py.get_type::<InitError>())?;
    m.add("NotInitializedError", py.get_type::<NotInitializedError>())?;
    m.add("ArgumentError", py.get_type::<ArgumentError>())?;
    m.add("FreedError", py.get_type::<FreedError>())?;
    m.add(
        "CollectiveMismatchError",
        py.get_type::<CollectiveMismatchError>(),
    )?;
    m.add("HeapError", py.get_type::<HeapError>())?;
    m.add("TeamError", py.get_type::<TeamError>())?;
    m.add("KernelSourceError", py.get_type::<KernelSourceError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("WaitTimeoutError", py.get_type::<WaitTimeoutError>())?;
    Ok(())
}
