//! `stream=`: a PyTorch, CuPy or cuda.core stream (or anything that speaks the CUDA stream
//! protocol) as a raw `CUstream` checked to belong to this PE's device, and the call that puts a
//! pgas operation into that stream: issued on `s` itself through the runtime's `_on(stream)`
//! form, kept in order with pgas's own stream by two events, of which the second is owed
//! ([`settle`]) and the stream object's handle read once ([`handle`]). `docs/python.md`,
//! "`stream=`", has the protocol and why each wait is where it is. Every Python call that
//! takes `stream=` has an `_on` form in the runtime; the ones without one (`fence`,
//! `signal_fetch`, the atomics) take no `stream=`.

use std::cell::Cell;
use std::ptr;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{
    cuEventCreate, cuEventRecord, cuStreamGetCtx, cuStreamIsCapturing, cuStreamQuery,
    cuStreamWaitEvent, CUcontext, CUevent, CUevent_flags, CUresult, CUstream,
    CUstreamCaptureStatus,
};
use cudarc::driver::CudaStream;
use pgas_runtime::Pgas;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyTuple};

use crate::errors::{misuse, to_py};
use crate::locks::lock;

/// A user stream, checked (`check`) to be a stream of pgas's CUDA context.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserStream(usize);

/// The raw handle of a stream object: `__cuda_stream__()` (the CUDA stream protocol: a
/// `(version, handle)` pair), `.cuda_stream` (PyTorch), `.ptr` (CuPy), `.handle` (cuda.core),
/// or an int (a raw `CUstream`, trusted). `None` is no stream.
pub(crate) fn handle(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    let not_a_stream = || -> PyResult<Option<usize>> {
        Err(PyTypeError::new_err(format!(
            "stream= takes a CUDA stream: a torch.cuda.Stream, a cupy.cuda.Stream, a cuda.core \
             Stream, an object with __cuda_stream__, or an int handle; got {}",
            obj.get_type().name()?
        )))
    };
    // An int first: the form the library's torch ops pass on every call (one check, where the
    // attribute lookups below would each fail first). A negative one is no handle.
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<usize>().map(Some).or_else(|_| not_a_stream());
    }
    // The stream object of the last call, again: a program passes one stream call after call,
    // and asking the object costs Python calls (about as much as the rest of an ordering call).
    // The object is kept alive beside its handle, so the same address is the same object.
    if let Some((last, raw)) = &*lock(&LAST_OBJECT) {
        if last.as_ptr() == obj.as_ptr() {
            return Ok(Some(*raw));
        }
    }
    let raw = handle_of(obj)?.map_or_else(not_a_stream, |raw| Ok(Some(raw)))?;
    if let Some(raw) = raw {
        // The object it replaces is dropped after the lock is released: its finalizer may be
        // Python code that calls pgas again.
        let old = lock(&LAST_OBJECT).replace((obj.clone().unbind(), raw));
        drop(old);
    }
    Ok(raw)
}

/// The last stream object [`handle`] read, with its handle. (A stream object's handle does not
/// change while it lives: the CUDA stream protocol's, PyTorch's, CuPy's and cuda.core's.)
static LAST_OBJECT: Mutex<Option<(Py<PyAny>, usize)>> = Mutex::new(None);

/// A stream object's handle by the protocols [`handle`] names; `None` when it speaks none.
fn handle_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if obj.hasattr("__cuda_stream__")? {
        let pair = obj.call_method0("__cuda_stream__")?;
        let pair = pair.cast::<PyTuple>().map_err(|_| {
            PyTypeError::new_err("__cuda_stream__() did not return a (version, handle) tuple")
        })?;
        return Ok(Some(pair.get_item(1)?.extract()?));
    }
    for attr in ["cuda_stream", "ptr", "handle"] {
        if obj.hasattr(attr)? {
            let value = obj.getattr(attr)?;
            // cuda.core's `handle` is a CUstream object that converts with int().
            return py_int(&value).map(Some);
        }
    }
    Ok(None)
}

fn py_int(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    match value.extract::<usize>() {
        Ok(v) => Ok(v),
        Err(_) => value.call_method0("__int__")?.extract(),
    }
}

/// Checks that `raw` is a stream of pgas's context (this PE's device): the legacy and
/// per-thread default streams (0, 1, 2) always are.
pub(crate) fn check(pgas: &Pgas, raw: Option<usize>) -> PyResult<Option<UserStream>> {
    let Some(raw) = raw else { return Ok(None) };
    // The last handle that passed: a program passes torch's current stream call after call, and
    // the driver's answer cost about a microsecond a call. (Should that stream be destroyed and
    // its handle reused by a stream of another context, the launch fails with the driver's
    // error instead of this check's.)
    if raw <= 2 || LAST_CHECKED.load(Ordering::Relaxed) == raw {
        return Ok(Some(UserStream(raw)));
    }
    pgas.cuda()
        .bind_to_thread()
        .map_err(|e| misuse(format!("stream=: making pgas's CUDA context current: {e}")))?;
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: the driver checks the handle; `ctx` is a live local.
    let status = unsafe { cuStreamGetCtx(raw as CUstream, &mut ctx) };
    if status != CUresult::CUDA_SUCCESS {
        return Err(misuse(format!(
            "stream=: {raw:#x} is not a CUDA stream the driver knows ({status:?}); pass a live \
             stream of cuda:{} (torch.cuda.current_stream({}))",
            pgas.device_ordinal(),
            pgas.device_ordinal()
        )));
    }
    if ctx != pgas.cuda().cu_ctx() {
        return Err(misuse(format!(
            "stream=: the stream belongs to another device or CUDA context than this PE's GPU \
             (cuda:{}); pass a stream of cuda:{} (torch.cuda.current_stream({}), or create it \
             under torch.cuda.device({}))",
            pgas.device_ordinal(),
            pgas.device_ordinal(),
            pgas.device_ordinal(),
            pgas.device_ordinal()
        )));
    }
    LAST_CHECKED.store(raw, Ordering::Relaxed);
    Ok(Some(UserStream(raw)))
}

/// The last stream handle `check` found to belong to pgas's context (0: none yet).
static LAST_CHECKED: AtomicUsize = AtomicUsize::new(0);

/// How pgas's stream and the `stream=` streams are ordered, for the process's one pgas context.
struct StreamOrder {
    /// The two events `order` records, made once: creating and destroying one per call cost
    /// more than the rest of a `stream=` call's ordering.
    events: Option<[usize; 2]>,
    /// `(s, pgas's stream)`: pgas's stream owes a wait for the event `TheirsForMine` last
    /// recorded on `s` ([`settle`]).
    owed: Option<(usize, usize)>,
    /// A stream `s` that comes after everything queued on pgas's stream so far: nothing reached
    /// pgas's stream since a call on `s` made sure of it ([`after_mine`]).
    ordered_for: Option<usize>,
}

/// The lock is held from a record to its wait, so that two threads never wait on each other's
/// recording.
static ORDER: Mutex<StreamOrder> = Mutex::new(StreamOrder {
    events: None,
    owed: None,
    ordered_for: None,
});

thread_local! {
    /// The `stream=` stream of the call this thread runs, if any: pgas's stream need not be
    /// settled with it for the call, whose work that stream orders itself.
    static CALL_STREAM: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Which of the two events: pgas's stream recorded for `s`, or `s` recorded for pgas's stream.
#[derive(Clone, Copy)]
enum Direction {
    MineForTheirs = 0,
    TheirsForMine = 1,
}

/// The event for `direction`, made on first use (pgas's context is current: `on`).
fn event(o: &mut StreamOrder, direction: Direction) -> Result<CUevent, CUresult> {
    if o.events.is_none() {
        let mut made = [0usize; 2];
        for slot in &mut made {
            let mut event: CUevent = ptr::null_mut();
            // SAFETY: pgas's context is current; `event` is a live local the driver writes. The
            // events live as long as the process's one context.
            status(unsafe {
                cuEventCreate(&mut event, CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            })?;
            *slot = event as usize;
        }
        o.events = Some(made);
    }
    Ok(o.events.map_or(0, |e| e[direction as usize]) as CUevent)
}

/// Queues the wait pgas's stream owes (`o.owed`), if any.
fn pay(o: &mut StreamOrder) -> Result<(), CUresult> {
    let Some((_, mine)) = o.owed else {
        return Ok(());
    };
    let event = event(o, Direction::TheirsForMine)?;
    // SAFETY: the event was recorded on a stream of pgas's context, and `mine` is pgas's stream.
    status(unsafe { cuStreamWaitEvent(mine as CUstream, event, 0) })?;
    o.owed = None;
    Ok(())
}

/// A driver call's result as one `?` takes.
fn status(s: CUresult) -> Result<(), CUresult> {
    match s {
        CUresult::CUDA_SUCCESS => Ok(()),
        s => Err(s),
    }
}

fn driver_error(status: CUresult) -> PyErr {
    to_py(pgas_runtime::Error::Cuda {
        context: "ordering pgas's stream with the stream= stream",
        source: status.result().unwrap_err(),
    })
}

/// Makes `waiter` wait for the work queued on `signaler` so far.
fn order(waiter: CUstream, signaler: CUstream, direction: Direction) -> PyResult<()> {
    let mut o = lock(&ORDER);
    order_in(&mut o, waiter, signaler, direction)
}

/// [`order`] under the lock.
fn order_in(
    o: &mut StreamOrder, waiter: CUstream, signaler: CUstream, direction: Direction,
) -> PyResult<()> {
    let status = (|| {
        // The event is recorded anew below: a wait owed for its last recording goes first.
        if matches!(direction, Direction::TheirsForMine) {
            pay(o)?;
        }
        let event = event(o, direction)?;
        // SAFETY: both streams belong to the current context (checked by `check`, or pgas's
        // own); the event was made in it, and the lock keeps its record and wait together.
        unsafe {
            status(cuEventRecord(event, signaler))?;
            status(cuStreamWaitEvent(waiter, event, 0))
        }
    })();
    status.map_err(driver_error)
}

/// Records that pgas's stream `mine` owes a wait for the work queued on `theirs` so far.
fn owe(mine: CUstream, theirs: CUstream) -> PyResult<()> {
    let mut o = lock(&ORDER);
    let status = (|| {
        // Another stream's owed wait goes first: the event is recorded anew (a wait owed for
        // `theirs` itself is covered by the new recording).
        if o.owed.is_some_and(|(s, _)| s != theirs as usize) {
            pay(&mut o)?;
        }
        let event = event(&mut o, Direction::TheirsForMine)?;
        // SAFETY: `theirs` belongs to the current context (`check`); the event was made in it.
        status(unsafe { cuEventRecord(event, theirs) })
    })();
    status.map_err(driver_error)?;
    o.owed = Some((theirs as usize, mine as usize));
    Ok(())
}

/// Queues the wait pgas's stream owes for the last operation given `stream=` (see the module),
/// unless this thread is running a call on that same stream. Called wherever the module reaches
/// pgas's stream: the runtime handle (`State::pgas`) and a tensor's memory (`Tensor::with`).
pub(crate) fn settle() -> PyResult<()> {
    let call = CALL_STREAM.get();
    let mut o = lock(&ORDER);
    // Work may now reach pgas's stream that no stream= stream is ordered after yet.
    if o.ordered_for != call {
        o.ordered_for = None;
    }
    match o.owed {
        None => Ok(()),
        Some((s, _)) if Some(s) == call => Ok(()),
        Some(_) => pay(&mut o).map_err(driver_error),
    }
}

/// Runs `f` as a call on `stream=` stream `raw` (see [`settle`]). Afterwards, unless the call
/// was on the stream known to come after pgas's, no stream is: the call may have left work on
/// pgas's stream, after another thread's call on that stream checked it.
pub(crate) fn in_call_on<R>(raw: Option<usize>, f: impl FnOnce() -> R) -> R {
    let before = CALL_STREAM.replace(raw);
    let out = f();
    CALL_STREAM.set(before);
    let mut o = lock(&ORDER);
    if o.ordered_for != raw {
        o.ordered_for = None;
    }
    out
}

/// Makes `theirs` wait for the work queued on pgas's stream `mine`: nothing when a call on
/// `theirs` did so and nothing reached pgas's stream since (the usual case for a program that
/// calls with one `stream=` after another: a query of pgas's stream costs about as much as the
/// rest of the ordering), else after a query finds work left there.
fn after_mine(theirs: CUstream, mine: CUstream) -> PyResult<()> {
    let mut o = lock(&ORDER);
    if o.ordered_for == Some(theirs as usize) {
        return Ok(());
    }
    // SAFETY: pgas's stream, in the context the caller made current.
    if unsafe { cuStreamQuery(mine) } != CUresult::CUDA_SUCCESS {
        order_in(&mut o, theirs, mine, Direction::MineForTheirs)?;
    }
    o.ordered_for = Some(theirs as usize);
    Ok(())
}

/// Runs `op` with the stream the operation goes on: `None` for pgas's own (the runtime's plain
/// forms), or `user`'s, wrapped for the runtime's `_on` forms and ordered with pgas's stream (see
/// the module).
pub(crate) fn on<R>(
    pgas: &Pgas, user: Option<UserStream>, op: impl FnOnce(Option<&Arc<CudaStream>>) -> PyResult<R>,
) -> PyResult<R> {
    let Some(UserStream(raw)) = user else {
        return op(None);
    };
    // SAFETY: `check` found `raw` to be a stream of pgas's CUDA context (or a default-stream
    // handle, 0 to 2, which every context has); the Python caller holds the stream object for the
    // whole call, and the wrapper, which borrows it (its drop destroys nothing), drops at the end
    // of this function. Ordering with pgas's stream is done here, with events.
    let theirs: Arc<CudaStream> = unsafe { pgas.cuda().wrap_borrowed_stream(raw as CUstream) };
    let mine = pgas.stream().cu_stream();
    pgas.cuda()
        .bind_to_thread()
        .map_err(|e| misuse(format!("stream=: making pgas's CUDA context current: {e}")))?;
    // Captured into a CUDA graph, `s` is ordered by the graph alone: a wait for pgas's stream
    // would leave the capture, and pgas's stream waiting for `s` would join it unjoined.
    if capturing(raw as CUstream)? {
        return op(Some(&theirs));
    }
    after_mine(raw as CUstream, mine)?;
    let out = op(Some(&theirs))?;
    owe(mine, raw as CUstream)?;
    Ok(out)
}

/// Whether stream `raw` is known to come after the work queued on pgas's stream so far.
fn comes_after_mine(raw: usize) -> bool {
    lock(&ORDER).ordered_for == Some(raw)
}

/// Runs `op` on `user`'s stream (or pgas's) as [`on`] does, but without making pgas's stream
/// wait for it afterwards: for the library's operations on torch tensors (`library.rs`), whose
/// results only the caller's stream reads (two driver calls a call saved).
pub(crate) fn on_theirs<R>(
    pgas: &Pgas, user: Option<UserStream>, op: impl FnOnce(&Arc<CudaStream>) -> PyResult<R>,
) -> PyResult<R> {
    let Some(UserStream(raw)) = user else {
        return op(pgas.stream());
    };
    // SAFETY: as in `on`: a checked stream of pgas's context, held by the caller for the call.
    let theirs: Arc<CudaStream> = unsafe { pgas.cuda().wrap_borrowed_stream(raw as CUstream) };
    let mine = pgas.stream().cu_stream();
    pgas.cuda()
        .bind_to_thread()
        .map_err(|e| misuse(format!("stream=: making pgas's CUDA context current: {e}")))?;
    // Work still queued on pgas's stream (a call without stream= before this one) comes first,
    // unless the stream is captured (see `on`). Where `s` is known to come after pgas's stream
    // already, there is nothing to order, so `s` is not asked whether it is being captured
    // either (this call owes pgas's stream no wait, as `on`'s do, that a capture would affect).
    if !comes_after_mine(raw) && !capturing(raw as CUstream)? {
        after_mine(raw as CUstream, mine)?;
    }
    op(&theirs)
}

/// Whether `stream` is being captured into a CUDA graph.
fn capturing(stream: CUstream) -> PyResult<bool> {
    let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a stream of the current context (`check`); `status` is a live local.
    let s = unsafe { cuStreamIsCapturing(stream, &mut status) };
    if s != CUresult::CUDA_SUCCESS {
        return Err(misuse(format!(
            "stream=: asking whether the stream is captured: {s:?}"
        )));
    }
    Ok(status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Runs `op`, which enqueues on pgas's stream only (a fused op of `pgas::ops` that has no
/// `_on` form), as an operation of `user`'s stream: pgas's stream first waits for the work
/// queued on `user`'s, and `user`'s then waits for pgas's. Neither blocks the host; under CUDA
/// graph capture of `user`'s stream, pgas's stream joins the capture (the first wait) and
/// leaves it (the second), as a forked stream must.
pub(crate) fn through_pgas_stream<R>(
    pgas: &Pgas, user: Option<UserStream>, op: impl FnOnce() -> PyResult<R>,
) -> PyResult<R> {
    let Some(UserStream(raw)) = user else {
        return op();
    };
    let mine = pgas.stream().cu_stream();
    pgas.cuda()
        .bind_to_thread()
        .map_err(|e| misuse(format!("stream=: making pgas's CUDA context current: {e}")))?;
    order(mine, raw as CUstream, Direction::TheirsForMine)?;
    let out = op()?;
    order(raw as CUstream, mine, Direction::MineForTheirs)?;
    Ok(out)
}
