"""NVSHMEM4Py's ``nvshmem.core.interop``: symmetric tensors as PyTorch tensors
(``interop.torch``) and CuPy arrays (``interop.cupy``)."""

from . import cupy, torch  # noqa: F401
