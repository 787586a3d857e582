"""NVSHMEM4Py's start-up and queries: ``init`` (from MPI, a unique id, or the environment),
``get_unique_id``, ``finalize``, ``get_version``, ``init_status``, ``my_pe``, ``n_pes``."""

from typing import Any, NamedTuple, Optional

from ... import _pgas
from ... import init as _init
from . import _registry
from .enums import InitStatus


class UniqueID:
    """NVSHMEM's unique id (``nvshmemx_uniqueid_t``), made on rank 0 by ``get_unique_id`` and
    handed to the other ranks (it pickles, so ``comm.bcast`` sends it)."""

    def __init__(self, data: bytes = b"") -> None:
        self._data = bytes(data)

    def __bytes__(self) -> bytes:
        return self._data

    def __repr__(self) -> str:
        return f"UniqueID({len(self._data)} bytes)"


class Version(NamedTuple):
    """What ``get_version`` returns."""

    nvshmem: str
    nvshmem4py: str
    openshmem_spec: str


def get_unique_id(empty: bool = False) -> UniqueID:
    """A fresh unique id (on rank 0), or an empty one (``empty=True``: for the other ranks to
    receive into)."""
    return UniqueID(b"" if empty else _pgas.get_unique_id())


def init(
    device: Any = None,
    uid: Optional[UniqueID] = None,
    rank: Optional[int] = None,
    nranks: Optional[int] = None,
    mpi_comm: Any = None,
    initializer_method: str = "",
    **_ignored: Any,
) -> None:
    """Initializes NVSHMEM on ``device`` (a cuda.core ``Device``, an ordinal, or ``None``: the
    launcher's choice). ``initializer_method``: ``"mpi"`` or ``"emulated_mpi"`` with
    ``mpi_comm`` (an mpi4py communicator: rank 0's unique id travels over it), ``"uid"`` with
    ``uid``, ``rank`` and ``nranks``, or ``""``: from the environment (``pgas-run``,
    ``mpirun``, one PE). Collective."""
    ordinal = getattr(device, "device_id", device)
    method = initializer_method or ("mpi" if mpi_comm is not None else "")
    if method in ("mpi", "emulated_mpi"):
        if mpi_comm is None:
            raise _pgas.ArgumentError(f"init: initializer_method={method!r} needs mpi_comm=")
        _init(device=ordinal, mpi_comm=mpi_comm)
    elif method == "uid":
        if uid is None or rank is None or nranks is None:
            raise _pgas.ArgumentError("init: initializer_method='uid' needs uid=, rank= and nranks=")
        _init(device=ordinal, initializer_method="uid", uid=bytes(uid), rank=rank, nranks=nranks)
    elif method == "":
        _init(device=ordinal)
    else:
        raise _pgas.ArgumentError(
            f"init: unknown initializer_method {initializer_method!r}: use 'mpi', "
            "'emulated_mpi', 'uid' or '' (from the environment)"
        )


def finalize(**_ignored: Any) -> None:
    """Frees what is left (in allocation order, the same on every PE) and finalizes NVSHMEM.
    Collective."""
    for a in reversed(_registry.allocations()):
        _pgas.free_tensor(a.tensor, with_views=True)
        _registry.forget(a)
    _pgas.finalize()


def get_version() -> Version:
    """The NVSHMEM version, the version of pgas that stands in for NVSHMEM4Py, and the
    OpenSHMEM specification NVSHMEM follows."""
    mine, (major, minor, patch) = _pgas.get_version()
    return Version(f"{major}.{minor}.{patch}", f"pgas {mine}", "1.5")


def get_name() -> str:
    """NVSHMEM's name and version, as ``nvshmem_info_get_name`` gives them."""
    return f"NVSHMEM v{get_version().nvshmem}"


def init_status() -> int:
    """``InitStatus`` as an int: ``STATUS_NOT_INITIALIZED`` before ``init``."""
    return int(_pgas.init_status())


def my_pe() -> int:
    """This PE's number."""
    return int(_pgas.my_pe())


def n_pes() -> int:
    """The number of PEs."""
    return int(_pgas.n_pes())


__all__ = ["UniqueID", "Version", "InitStatus", "get_unique_id", "init", "finalize",
           "get_version", "get_name", "init_status", "my_pe", "n_pes"]
