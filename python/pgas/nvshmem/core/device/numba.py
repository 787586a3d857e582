"""``nvshmem.core.device.numba`` over pgas: NVSHMEM's device API in Numba-CUDA kernels, the
functions of :mod:`pgas.device.numba` under the names NVSHMEM4Py gives them."""

from pgas.device.numba import *  # noqa: F401,F403
from pgas.device.numba import __all__  # noqa: F401
