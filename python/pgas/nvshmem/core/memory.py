"""NVSHMEM4Py's memory functions: untyped symmetric ``Buffer``s (``buffer``, ``free``), peer and
multicast views, and registering memory another library allocated with CUDA VMM. Every one of
them is collective over all PEs, as in NVSHMEM4Py, except the peer and multicast views."""

from typing import Any, Tuple

from ... import _pgas
from . import _registry


class SymmetricBuffer:
    """An untyped symmetric buffer (``handle``: its device address, ``size``: its bytes), what
    ``buffer`` returns where cuda.core is not installed (with it, a cuda.core ``Buffer``).
    DLPack hands it out as ``uint8`` bytes."""

    def __init__(self, tensor: Any) -> None:
        self._tensor = tensor
        self.handle = int(tensor.data_ptr)
        self.size = int(tensor.nbytes)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> Any:
        return self._tensor.__dlpack_device__()

    def __repr__(self) -> str:
        return f"SymmetricBuffer(handle={self.handle:#x}, size={self.size})"


def _buffer_class() -> Any:
    for name in ("cuda.core", "cuda.core.experimental"):
        try:
            module = __import__(name, fromlist=["Buffer"])
            return getattr(module, "Buffer")
        except (ImportError, AttributeError):
            continue
    return None


def wrap_buffer(tensor: Any) -> Any:
    """A Buffer over the bytes of symmetric ``tensor`` (or of a peer or multicast view of it):
    a cuda.core ``Buffer`` that does not own them (pgas frees them), else a
    ``SymmetricBuffer``."""
    cls = _buffer_class()
    if cls is not None and hasattr(cls, "from_handle"):
        return cls.from_handle(int(tensor.data_ptr), _bytes_of(tensor))
    return SymmetricBuffer(tensor)


def _bytes_of(tensor: Any) -> int:
    n = getattr(tensor, "nbytes", None)
    if n is not None:
        return int(n)
    count = 1
    for d in tensor.shape:
        count *= int(d)
    return count * {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1,
                    "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4,
                    "uint64": 8}[tensor.dtype]


def buffer(size: int, release: bool = False, except_on_del: bool = True) -> Any:
    """Allocates ``size`` zeroed bytes of symmetric memory and returns them as a Buffer
    (``buf.handle``, ``buf.size``). Collective. Free it with ``free``. (``release`` and
    ``except_on_del`` are NVSHMEM4Py's garbage-collector options; pgas never frees symmetric
    memory from the collector, so they change nothing.)"""
    del release, except_on_del
    t = _pgas.alloc(int(size), "uint8")
    _registry.track(t, "buffer")
    return wrap_buffer(t)


def free_allocation(obj: Any, what: str) -> None:
    """Frees the allocation behind ``obj`` (collective), although the object handed out for it
    may still be alive (NVSHMEM4Py's rule: using it afterwards is a use after free)."""
    a = _registry.lookup(_registry.data_ptr(obj), what)
    _pgas.free_tensor(a.tensor, with_views=True)
    _registry.forget(a)


def free(buf: Any) -> None:
    """Frees a Buffer from ``buffer``. Collective."""
    free_allocation(buf, "free")


def get_peer_buffer(buf: Any, pe: int) -> Any:
    """PE ``pe``'s copy of ``buf`` mapped into this process (NVLink/PCIe), as a Buffer over the
    peer's memory; ``ArgumentError`` when PE ``pe`` is not reachable with loads and stores."""
    return wrap_buffer(peer_view(buf, pe, "get_peer_buffer"))


def get_multicast_buffer(team: int, buf: Any) -> Any:
    """The multicast view of ``buf`` over ``team`` (NVLink SHARP only; otherwise
    ``UnavailableError`` with the reason)."""
    return wrap_buffer(multicast_view(team, buf, "get_multicast_buffer"))


def allocate(shape: Any, dtype: Any, morder: str, kind: str) -> Any:
    """A zeroed symmetric ``pgas.Tensor`` of ``shape`` and ``dtype`` for ``interop.torch.tensor``
    or ``interop.cupy.array`` (``kind``: which). Collective."""
    if morder != "C":
        raise _pgas.ArgumentError(f"{kind}: only row-major (morder='C') memory is symmetric in pgas")
    t = _pgas.alloc(shape, dtype)
    _registry.track(t, kind)
    return t


def get_buffer(obj: Any, what: str) -> Tuple[Any, int, str]:
    """``(Buffer, nbytes, dtype)`` of the allocation behind ``obj``."""
    a = _registry.lookup(_registry.data_ptr(obj), what)
    return wrap_buffer(a.tensor), a.nbytes, str(obj.dtype)


def peer_view(obj: Any, pe: int, what: str) -> Any:
    """PE ``pe``'s copy of ``obj`` as a ``pgas.PeerTensor`` (NVLink or PCIe loads and stores),
    or ``ArgumentError`` when that PE is not reachable that way."""
    peer = _pgas.get_peer_tensor(_registry.symmetric(obj, what), int(pe))
    if peer is None:
        raise _pgas.ArgumentError(
            f"{what}: PE {pe} is not reachable with loads and stores from this PE (use put/get)"
        )
    return peer


def multicast_view(team: Any, obj: Any, what: str) -> Any:
    """The multicast view of ``obj`` over ``team`` (NVLink SHARP only; otherwise
    ``UnavailableError`` with the reason)."""
    from .teams import team_of

    return _pgas.get_multicast_tensor(team_of(team), _registry.symmetric(obj, what))


def register_external(obj: Any) -> Any:
    """Registers memory another library allocated with CUDA VMM (a DLPack producer or a
    Buffer) as symmetric; returns its ``pgas.Tensor``. Collective."""
    t = _pgas.register_external(obj)
    a = _registry.track(t, "external")
    # NVSHMEM4Py's examples unregister by the memory they registered, not the result.
    _registry.alias(a, _registry.data_ptr(obj))
    return t


def register_external_buffer(buf: Any) -> Any:
    """Registers a CUDA VMM ``Buffer`` (cuda.core's ``VirtualMemoryResource``) as symmetric
    memory and returns the registered Buffer. Collective; undo with
    ``unregister_external_buffer``."""
    return wrap_buffer(register_external(buf))


def unregister_external_buffer(buf: Any) -> None:
    """Undoes ``register_external_buffer``. Collective."""
    free_allocation(buf, "unregister_external_buffer")
