"""pgas for Python: NVSHMEM's host API over pgas's runtime, with symmetric tensors handed to
PyTorch, CuPy or JAX through DLPack without a copy.

The functions and classes are those of the native module (``pgas._pgas``, built from Rust);
this file adds what is simplest in Python: start-up from an mpi4py communicator
(``init(mpi_comm=...)``). ``pgas.nvshmem.core`` is NVSHMEM4Py's ``nvshmem.core`` over the same
runtime, for programs written for NVSHMEM4Py. ``docs/python.md`` is the guide.

    import pgas, torch
    with pgas.init() as ctx:                   # one per process; pgas-run / mpirun / one PE
        t = pgas.alloc((4, 1024), "float32")   # symmetric: collective, zeroed
        x = torch.from_dlpack(t)               # the same memory
        ...
"""

import os
from typing import Any, Optional

from . import _pgas
# The native module's public names, all but init (defined below).
from ._pgas import (
    ArgumentError, CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NE, CollectiveMismatchError,
    Comm, Context, DTYPES, FreedError, HeapError, InitError, Kernel, KernelSourceError,
    NotInitializedError, PeerTensor, PgasError, SIGNAL_ADD, SIGNAL_SET, TEAM_NODE,
    TEAM_SAME_MYPE_NODE, TEAM_SHARED, TEAM_WORLD, Team, TeamError, Teams, Tensor,
    UnavailableError, WaitTimeoutError, alloc, allreduce, alltoall, atomic_add, atomic_and,
    atomic_compare_swap, atomic_fetch, atomic_fetch_add, atomic_fetch_and, atomic_fetch_inc,
    atomic_fetch_or, atomic_fetch_xor, atomic_inc, atomic_or, atomic_set, atomic_swap,
    atomic_xor, barrier, barrier_all, broadcast, context, fcollect, fence, finalize,
    finish_compiles, flush,
    free_tensor, from_dlpack, get, get_multicast_tensor, get_nbi, get_peer_tensor,
    get_team_unique_id, get_unique_id, get_version, init_status, kernel, my_pe, n_pes, put,
    put_nbi, put_signal, quiet, reduce, reducescatter, register_external, signal_fetch,
    signal_op, signal_wait, sync, sync_all, team_destroy, team_init, team_my_pe, team_n_pes,
    team_split_2d, team_split_strided, team_translate_pe,
)
from ._pgas import __version__, _views  # _views: DLPack views of a tensor, for the tests

__all__ = [name for name in dir(_pgas) if not name.startswith("_")] + ["__version__"]


def init(
    *,
    heap_size: Optional[int] = None,
    device: Optional[int] = None,
    initializer_method: str = "auto",
    uid: Optional[bytes] = None,
    rank: Optional[int] = None,
    nranks: Optional[int] = None,
    mpi_comm: Any = None,
) -> "_pgas.Context":
    """Initializes NVSHMEM on this process's GPU and returns the ``Context`` (also a context
    manager: ``with pgas.init() as ctx:`` finalizes at the end of the block).

    Start-up, by ``initializer_method``: ``"auto"`` (from the environment: ``pgas-run``,
    ``mpirun``/``srun``, or one PE), ``"single"``, ``"launcher"``, ``"mpi"``, ``"nvshmem"``, or
    ``"uid"``: a unique id from ``get_unique_id()`` on rank 0, handed to every rank by the
    program (``uid``, with ``rank`` and ``nranks``). With ``mpi_comm`` (an mpi4py communicator)
    rank 0 makes the id and broadcasts it over the communicator, and every rank of it starts
    with its rank and size there. ``heap_size`` sets each PE's symmetric heap in bytes,
    ``device`` the CUDA ordinal. Collective over every rank; once per process.
    """
    if mpi_comm is not None:
        if uid is not None:
            raise _pgas.ArgumentError(
                "init: pass either mpi_comm (pgas makes and broadcasts the unique id) or uid, "
                "not both"
            )
        try:
            comm_rank, comm_size = int(mpi_comm.Get_rank()), int(mpi_comm.Get_size())
        except AttributeError:
            raise TypeError(
                "init: mpi_comm takes an mpi4py communicator (with Get_rank, Get_size and bcast), "
                f"got {type(mpi_comm).__name__}"
            ) from None
        launched = os.environ.get("PGAS_WORLD_SIZE")
        if launched is not None and int(launched) != comm_size:
            raise _pgas.ArgumentError(
                f"init: pgas-run started {launched} ranks, but mpi_comm has {comm_size}: under "
                "pgas-run leave mpi_comm out (pgas-run starts the ranks), or start the program "
                "with mpirun so that the communicator holds every rank"
            )
        for name, given, actual in (("rank", rank, comm_rank), ("nranks", nranks, comm_size)):
            if given is not None and given != actual:
                raise _pgas.ArgumentError(
                    f"init: {name}={given}, but the communicator says {actual}: leave {name} out "
                    "with mpi_comm, or pass the communicator of the ranks that start together"
                )
        mine = _pgas.get_unique_id() if comm_rank == 0 else None
        uid = mpi_comm.bcast(mine, root=0)
        rank, nranks, initializer_method = comm_rank, comm_size, "uid"
    return _pgas.init(
        heap_size=heap_size,
        device=device,
        initializer_method=initializer_method,
        uid=uid,
        rank=rank,
        nranks=nranks,
    )
