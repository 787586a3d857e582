"""NVSHMEM4Py's package ``nvshmem``, over pgas: ``import pgas.nvshmem.core as nvshmem`` where a
program says ``import nvshmem.core as nvshmem`` (``pgas.nvshmem.core.core`` is the module
itself, so code that writes ``nvshmem.core.put(...)`` after that import works too)."""

from . import core  # noqa: F401
