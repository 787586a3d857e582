"""NVSHMEM4Py's point-to-point calls: put, get (and ``_nbi``), put with signal, signal
operations and waits, quiet and flush. With ``stream=`` each is queued on that stream and the
call returns, as in NVSHMEM4Py; without one it goes on pgas's own stream (where NVSHMEM4Py
requires one)."""

from typing import Any, Optional, Tuple

from ... import _pgas
from ._registry import symmetric
from .enums import COMPARISONS, SIGNAL_OPS, ComparisonType, SignalOp


class NvshmemStream:
    """A PyTorch stream in the form NVSHMEM4Py's calls take (``__cuda_stream__``); pgas takes
    the PyTorch stream itself too."""

    def __init__(self, pt_stream: Any) -> None:
        self.pt_stream = pt_stream
        self.handle = pt_stream.cuda_stream

    def __cuda_stream__(self) -> Tuple[int, int]:
        return (0, int(self.pt_stream.cuda_stream))


NvshmemStreamsType = Any


def _target(args: Tuple[Any, ...], remote_pe: int, pe: Optional[int], count: Optional[int], what: str):
    """``(count, pe)`` from the forms NVSHMEM4Py's documents show: ``put(dst, src, remote_pe)``,
    ``put(dst, src, count, remote_pe)`` and ``put(dst, src, count=n, pe=p)``."""
    if len(args) == 1:
        remote_pe = args[0]
    elif len(args) == 2:
        count, remote_pe = args
    elif len(args) > 2:
        raise TypeError(f"{what}() takes dst, src, [count,] remote_pe; got {2 + len(args)} positional arguments")
    if pe is not None:
        remote_pe = pe
    if remote_pe is None or int(remote_pe) < 0:
        raise _pgas.ArgumentError(f"{what}: name the target PE (remote_pe=)")
    return (None if count is None else int(count)), int(remote_pe)


def _rma(fn: Any, what: str, dst: Any, src: Any, args: Tuple[Any, ...], remote_pe: int,
         stream: Any, count: Optional[int], pe: Optional[int]) -> None:
    n, target = _target(args, remote_pe, pe, count, what)
    fn(symmetric(dst, what, n), symmetric(src, what, n), target, stream=stream)


def put(dst: Any, src: Any, *args: Any, remote_pe: int = -1, stream: Any = None,
        count: Optional[int] = None, pe: Optional[int] = None) -> None:
    """Copies ``src`` (here) into ``dst`` on PE ``remote_pe`` (``count`` elements: all)."""
    _rma(_pgas.put, "put", dst, src, args, remote_pe, stream, count, pe)


def get(dst: Any, src: Any, *args: Any, remote_pe: int = -1, stream: Any = None,
        count: Optional[int] = None, pe: Optional[int] = None) -> None:
    """Copies ``src`` on PE ``remote_pe`` into ``dst`` here."""
    _rma(_pgas.get, "get", dst, src, args, remote_pe, stream, count, pe)


def put_nbi(dst: Any, src: Any, *args: Any, remote_pe: int = -1, stream: Any = None,
            count: Optional[int] = None, pe: Optional[int] = None) -> None:
    """``put`` that completes at the next ``quiet`` (or barrier)."""
    _rma(_pgas.put_nbi, "put_nbi", dst, src, args, remote_pe, stream, count, pe)


def get_nbi(dst: Any, src: Any, *args: Any, remote_pe: int = -1, stream: Any = None,
            count: Optional[int] = None, pe: Optional[int] = None) -> None:
    """``get`` that completes at the next ``quiet`` (or barrier)."""
    _rma(_pgas.get_nbi, "get_nbi", dst, src, args, remote_pe, stream, count, pe)


def _signal_op(op: Any) -> str:
    try:
        return SIGNAL_OPS[SignalOp(int(op))]
    except ValueError:
        raise _pgas.ArgumentError(f"unknown signal operator {op!r}: use SignalOp.SIGNAL_SET or SIGNAL_ADD") from None


def put_signal(dst: Any, src: Any, signal_var: Any, signal_val: int, signal_op: Any,
               remote_pe: int = -1, stream: Any = None) -> None:
    """Copies ``src`` into ``dst`` on PE ``remote_pe``, then updates its ``signal_var`` (a
    one-word ``uint64`` symmetric array, tensor or Buffer) with ``signal_op``/``signal_val``:
    a PE that sees the signal sees the data."""
    op = _signal_op(signal_op)
    _pgas.put_signal(symmetric(dst, "put_signal"), symmetric(src, "put_signal"),
                     symmetric(signal_var, "put_signal"), int(signal_val), op, int(remote_pe),
                     stream=stream)


def put_signal_nbi(dst: Any, src: Any, signal_var: Any, signal_val: int, signal_op: Any,
                   remote_pe: int = -1, stream: Any = None) -> None:
    """``put_signal`` that completes at the next ``quiet``."""
    op = _signal_op(signal_op)
    _pgas.put_signal(symmetric(dst, "put_signal_nbi"), symmetric(src, "put_signal_nbi"),
                     symmetric(signal_var, "put_signal_nbi"), int(signal_val), op,
                     int(remote_pe), nbi=True, stream=stream)


def signal_op(signal_var: Any, signal_val: int, signal_op: Any, remote_pe: int = -1,
              stream: Any = None) -> None:
    """Updates ``signal_var`` on PE ``remote_pe`` without moving data."""
    op = _signal_op(signal_op)
    _pgas.signal_op(symmetric(signal_var, "signal_op"), int(signal_val), op, int(remote_pe),
                    stream=stream)


def signal_wait(signal_var: Any, signal_val: int, signal_op: Any, stream: Any = None) -> None:
    """Waits until this PE's ``signal_var`` compares to ``signal_val`` as ``signal_op`` (a
    ``ComparisonType``) says. With ``stream=`` the wait is queued on the stream and the call
    returns; without, the host waits (bounded: ``pgas.WaitTimeoutError`` after 60 s)."""
    try:
        cmp = COMPARISONS[ComparisonType(int(signal_op))]
    except ValueError:
        raise _pgas.ArgumentError(f"unknown comparison {signal_op!r}: use a ComparisonType") from None
    _pgas.signal_wait(symmetric(signal_var, "signal_wait"), int(signal_val), cmp, stream=stream)


def signal_fetch(signal_var: Any) -> int:
    """This PE's current value of ``signal_var``."""
    return int(_pgas.signal_fetch(symmetric(signal_var, "signal_fetch")))


def quiet(stream: Any = None) -> None:
    """Completes every put and get this PE issued."""
    _pgas.quiet(stream=stream)


def flush(stream: Any = None) -> None:
    """Makes the sources of earlier non-blocking puts reusable (``nvshmemx_flush_on_stream``,
    NVSHMEM 3.7 and later; on older ones ``pgas.UnavailableError`` naming the version)."""
    _pgas.flush(stream=stream)
