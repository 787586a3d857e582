"""NVSHMEM4Py's ``nvshmem.core`` over pgas: a program written for NVSHMEM4Py runs with its import
line changed to ``import pgas.nvshmem.core as nvshmem``. The functions take what NVSHMEM4Py's
take (cuda.core Buffers and streams, CuPy arrays, torch tensors, team handles, its enums) and
call pgas's module (``pgas``), which does the work. Differences are listed in
``docs/python.md`` ("NVSHMEM4Py programs")."""

import sys as _sys

from . import interop
from .amo import *  # noqa: F401,F403
from .amo import __all__ as _amo
from .collective import (alltoall, barrier, barrier_all, broadcast, fcollect, reduce,
                         reducescatter, sync, sync_all)
from .enums import ComparisonType, InitStatus, SignalOp, Teams
from .init_fini import (UniqueID, Version, finalize, get_name, get_unique_id, get_version,
                        init, init_status, my_pe, n_pes)
from .interop.cupy import (array, array_get_buffer, bytearray, free_array, get_multicast_array,
                           get_peer_array, register_external_array, unregister_external_array)
from .interop.torch import (bytetensor, free_tensor, get_multicast_tensor, get_peer_tensor,
                            register_external_tensor, tensor, tensor_get_buffer,
                            unregister_external_tensor)
from .memory import (SymmetricBuffer, buffer, free, get_multicast_buffer, get_peer_buffer,
                     register_external_buffer, unregister_external_buffer)
from .rma import (NvshmemStream, NvshmemStreamsType, flush, get, get_nbi, put, put_nbi,
                  put_signal, put_signal_nbi, quiet, signal_fetch, signal_op, signal_wait)
from .teams import (TeamConfig, TeamUniqueId, get_team_unique_id, team_destroy, team_get_config,
                    team_init, team_my_pe, team_n_pes, team_split_2d, team_split_strided,
                    team_translate_pe)

from ... import ArgumentError as NvshmemInvalid  # noqa: E402
from ... import PgasError as NvshmemError  # noqa: E402

# `import pgas.nvshmem.core as nvshmem` followed by `nvshmem.core.put(...)`, as NVSHMEM4Py's
# tutorial writes, names this module again.
core = _sys.modules[__name__]

__all__ = [
    "interop", "core", "NvshmemInvalid", "NvshmemError",
    "ComparisonType", "InitStatus", "SignalOp", "Teams", "TeamConfig", "UniqueID", "Version",
    "SymmetricBuffer", "NvshmemStream", "NvshmemStreamsType", "TeamUniqueId",
    "init", "finalize", "get_unique_id", "get_version", "get_name", "init_status", "my_pe",
    "n_pes",
    "buffer", "free", "get_peer_buffer", "get_multicast_buffer", "register_external_buffer",
    "unregister_external_buffer",
    "array", "bytearray", "free_array", "array_get_buffer", "get_peer_array",
    "get_multicast_array", "register_external_array", "unregister_external_array",
    "tensor", "bytetensor", "free_tensor", "tensor_get_buffer", "get_peer_tensor",
    "get_multicast_tensor", "register_external_tensor", "unregister_external_tensor",
    "put", "get", "put_nbi", "get_nbi", "put_signal", "put_signal_nbi", "signal_op",
    "signal_wait", "signal_fetch", "quiet", "flush",
    "reduce", "reducescatter", "alltoall", "fcollect", "broadcast", "barrier", "barrier_all",
    "sync", "sync_all",
    "team_my_pe", "team_n_pes", "team_translate_pe", "team_split_strided", "team_split_2d",
    "team_destroy", "team_init", "get_team_unique_id", "team_get_config",
] + list(_amo)
