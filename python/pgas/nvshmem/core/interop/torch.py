"""NVSHMEM4Py's ``nvshmem.core.interop.torch``: symmetric memory as PyTorch tensors."""

from typing import Any, Sequence, Tuple, Union

from .. import memory

Shape = Union[int, Sequence[int]]


def _torch() -> Any:
    import torch

    return torch


def tensor(
    shape: Shape,
    dtype: Any = None,
    release: bool = False,
    morder: str = "C",
    except_on_del: bool = True,
) -> Any:
    """A zeroed symmetric tensor of ``shape`` and ``dtype`` (``torch.float32`` by default) as a
    ``torch.Tensor`` on this PE's GPU. Collective. Free it with ``free_tensor``."""
    del release, except_on_del
    torch = _torch()
    t = memory.allocate(shape, dtype if dtype is not None else torch.float32, morder, "tensor")
    return torch.from_dlpack(t)


def empty(shape: Shape, dtype: Any = None) -> Any:
    """``tensor(shape, dtype)`` (the spelling of NVSHMEM4Py's interoperability guide)."""
    return tensor(shape, dtype)


def bytetensor(shape: Shape, dtype: Any = None) -> Any:
    """A zeroed symmetric ``uint8`` tensor of ``shape`` (NVSHMEM4Py's raw form). Collective."""
    del dtype
    return tensor(shape, _torch().uint8)


def free_tensor(t: Any) -> None:
    """Frees a tensor from ``tensor``. Collective; ``t`` must not be used afterwards."""
    memory.free_allocation(t, "free_tensor")


def tensor_get_buffer(t: Any) -> Tuple[Any, int, str]:
    """``(Buffer, nbytes, dtype)`` of the allocation behind ``t``."""
    return memory.get_buffer(t, "tensor_get_buffer")


def get_peer_tensor(t: Any, peer_pe: int) -> Any:
    """PE ``peer_pe``'s copy of ``t`` as a torch tensor that loads and stores there (NVLink or
    PCIe); ``ArgumentError`` when the peer is not reachable that way."""
    return _torch().from_dlpack(memory.peer_view(t, peer_pe, "get_peer_tensor"))


def get_multicast_tensor(team: int, t: Any) -> Any:
    """The multicast view of ``t`` over ``team`` as a torch tensor (NVLink SHARP only)."""
    return _torch().from_dlpack(memory.multicast_view(team, t, "get_multicast_tensor"))


def register_external_tensor(t: Any) -> Any:
    """Registers a tensor in CUDA VMM memory (PyTorch's expandable segments) as symmetric and
    returns the registered tensor. Collective."""
    return _torch().from_dlpack(memory.register_external(t))


def unregister_external_tensor(t: Any) -> None:
    """Undoes ``register_external_tensor``. Collective."""
    memory.free_allocation(t, "unregister_external_tensor")
