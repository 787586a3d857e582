"""NVSHMEM4Py's ``nvshmem.core.interop.cupy``: symmetric memory as CuPy arrays."""

from typing import Any, Sequence, Tuple, Union

from .. import memory

Shape = Union[int, Sequence[int]]


def _cupy() -> Any:
    import cupy

    return cupy


def array(
    shape: Shape,
    dtype: Any = "float32",
    release: bool = False,
    morder: str = "C",
    except_on_del: bool = True,
) -> Any:
    """A zeroed symmetric array of ``shape`` and ``dtype`` (a name or a NumPy/CuPy dtype) as a
    CuPy array on this PE's GPU. Collective. Free it with ``free_array``."""
    del release, except_on_del
    cupy = _cupy()
    t = memory.allocate(shape, cupy.dtype(dtype).name, morder, "array")
    return cupy.from_dlpack(t)


def empty(shape: Shape, dtype: Any = "float32") -> Any:
    """``array(shape, dtype)`` (the spelling of NVSHMEM4Py's interoperability guide)."""
    return array(shape, dtype)


def bytearray(shape: Shape, dtype: Any = None) -> Any:
    """A zeroed symmetric ``uint8`` array of ``shape``. Collective."""
    del dtype
    return array(shape, "uint8")


def free_array(arr: Any) -> None:
    """Frees an array from ``array``. Collective; ``arr`` must not be used afterwards."""
    memory.free_allocation(arr, "free_array")


def array_get_buffer(arr: Any) -> Tuple[Any, int, str]:
    """``(Buffer, nbytes, dtype)`` of the allocation behind ``arr``."""
    return memory.get_buffer(arr, "array_get_buffer")


def get_peer_array(arr: Any, peer_pe: int) -> Any:
    """PE ``peer_pe``'s copy of ``arr`` as a CuPy array that loads and stores there (NVLink or
    PCIe); ``ArgumentError`` when the peer is not reachable that way."""
    return _cupy().from_dlpack(memory.peer_view(arr, peer_pe, "get_peer_array"))


def get_multicast_array(team: int, arr: Any) -> Any:
    """The multicast view of ``arr`` over ``team`` as a CuPy array (NVLink SHARP only)."""
    return _cupy().from_dlpack(memory.multicast_view(team, arr, "get_multicast_array"))


def register_external_array(arr: Any) -> Any:
    """Registers an array in CUDA VMM memory (cuda.core's ``VirtualMemoryResource``) as
    symmetric and returns the registered array. Collective."""
    return _cupy().from_dlpack(memory.register_external(arr))


def unregister_external_array(arr: Any) -> None:
    """Undoes ``register_external_array``. Collective."""
    memory.free_allocation(arr, "unregister_external_array")
