"""What this layer allocated, and how an NVSHMEM4Py argument (a ``pgas.Tensor``, a torch
tensor, a CuPy array or a Buffer) becomes the ``pgas.Tensor`` pgas's calls take.

NVSHMEM4Py hands out framework objects and Buffers, and finds the symmetric allocation behind
each argument by its data pointer. This layer does the same: every allocation it makes is
recorded here by address. A whole allocation maps to its own tensor at the cost of a dict
look-up; a view of one (a row, a slice, ``count`` elements) is imported through DLPack, so a
put of a slice moves the slice (NVSHMEM4Py would move the whole allocation)."""

from typing import Any, Dict, Optional

from ... import _pgas


class Allocation:
    """One symmetric allocation of this layer: its ``pgas.Tensor`` and what it was handed out
    as (``kind``: ``"buffer"``, ``"array"``, ``"tensor"`` or ``"external"``)."""

    __slots__ = ("tensor", "ptr", "nbytes", "kind", "aliases")

    def __init__(self, tensor: Any, kind: str) -> None:
        self.tensor = tensor
        self.ptr = int(tensor.data_ptr)
        self.nbytes = int(tensor.nbytes)
        self.kind = kind
        # Other addresses that name it: a registered buffer's own address before registration.
        self.aliases: list = []


_by_ptr: Dict[int, Allocation] = {}


def track(tensor: Any, kind: str) -> Allocation:
    """Records a new allocation."""
    a = Allocation(tensor, kind)
    _by_ptr[a.ptr] = a
    return a


def alias(a: Allocation, ptr: int) -> None:
    """Lets ``ptr`` name allocation ``a`` too."""
    a.aliases.append(int(ptr))
    _by_ptr[int(ptr)] = a


def lookup(ptr: int, what: str) -> Allocation:
    """The allocation that starts at ``ptr``, or ``ArgumentError`` naming ``what``."""
    a = _by_ptr.get(int(ptr))
    if a is None:
        raise _pgas.ArgumentError(
            f"{what}: {int(ptr):#x} is not the start of a symmetric allocation of "
            "pgas.nvshmem.core (buffer, array, tensor or register_external_*): allocate it "
            "with one of those"
        )
    return a


def forget(a: Allocation) -> None:
    """Drops the record of allocation ``a`` (when it is freed)."""
    for ptr in [a.ptr] + a.aliases:
        _by_ptr.pop(ptr, None)


def allocations() -> list:
    """Every live allocation, oldest first (the same order on every PE)."""
    seen: list = []
    for a in _by_ptr.values():
        if all(a is not b for b in seen):
            seen.append(a)
    return seen


def is_buffer(obj: Any) -> bool:
    """A cuda.core ``Buffer`` or this layer's ``SymmetricBuffer``: untyped bytes at ``handle``."""
    return hasattr(obj, "handle") and hasattr(obj, "size") and not hasattr(obj, "dtype")


def data_ptr(obj: Any) -> int:
    """The device address of a tensor, array or Buffer."""
    if isinstance(obj, _pgas.Tensor):
        return int(obj.data_ptr)
    if is_buffer(obj):
        return int(obj.handle)
    ptr = getattr(obj, "data_ptr", None)
    if callable(ptr):  # torch
        return int(ptr())
    data = getattr(obj, "data", None)
    if data is not None and hasattr(data, "ptr"):  # CuPy
        return int(data.ptr)
    raise TypeError(
        "expected a symmetric torch tensor, CuPy array, Buffer or pgas.Tensor, got "
        f"{type(obj).__name__}"
    )


def _nbytes(obj: Any) -> int:
    n = getattr(obj, "nbytes", None)
    if n is not None:
        return int(n)
    return int(obj.numel()) * int(obj.element_size())  # torch before 2.1


def _dtype(obj: Any) -> str:
    return str(obj.dtype).replace("torch.", "")


def symmetric(obj: Any, what: str, count: Optional[int] = None) -> Any:
    """The ``pgas.Tensor`` for argument ``obj`` (``count``: only its first ``count``
    elements)."""
    if isinstance(obj, _pgas.Tensor):
        if count is not None and count != len(obj):
            raise _pgas.ArgumentError(
                f"{what}: count={count} of a pgas.Tensor of {len(obj)} elements; pass a torch "
                "or CuPy view of the elements to move instead"
            )
        return obj
    if is_buffer(obj):
        a = lookup(int(obj.handle), what)
        if count is not None:
            raise _pgas.ArgumentError(
                f"{what}: count= with a Buffer (untyped bytes); pass the array or tensor instead"
            )
        return a.tensor
    ptr = data_ptr(obj)
    mine = _by_ptr.get(ptr)
    if mine is not None and _nbytes(obj) == mine.nbytes and _dtype(obj) == mine.tensor.dtype:
        if count is None or count == len(mine.tensor):
            return mine.tensor
    view = obj
    if count is not None:
        flat = obj.reshape(-1)
        if count > flat.shape[0]:
            raise _pgas.ArgumentError(
                f"{what}: count={count} but the argument holds {flat.shape[0]} elements"
            )
        view = flat[:count]
    return _pgas.from_dlpack(view)
