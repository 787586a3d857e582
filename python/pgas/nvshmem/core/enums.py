"""NVSHMEM4Py's enums, with NVSHMEM's values: ``SignalOp``, ``ComparisonType``, ``InitStatus``
and ``Teams`` (whose members are plain team handles, ints, as in NVSHMEM4Py)."""

import enum


class SignalOp(enum.IntEnum):
    """How a signal word is updated (``NVSHMEM_SIGNAL_SET`` / ``NVSHMEM_SIGNAL_ADD``)."""

    SIGNAL_SET = 9
    SIGNAL_ADD = 10


class ComparisonType(enum.IntEnum):
    """The comparison a signal wait makes (``NVSHMEM_CMP_*``)."""

    CMP_EQ = 0
    CMP_NE = 1
    CMP_GT = 2
    CMP_LE = 3
    CMP_LT = 4
    CMP_GE = 5


class InitStatus(enum.IntEnum):
    """What ``init_status()`` returns (``nvshmemx_init_status``)."""

    STATUS_NOT_INITIALIZED = 0
    STATUS_IS_BOOTSTRAPPED = 1
    STATUS_IS_INITIALIZED = 2
    STATUS_LIMITED_MPG = 3
    STATUS_FULL_MPG = 4
    STATUS_INVALID = 2**31 - 1


class Teams(enum.IntEnum):
    """NVSHMEM's predefined teams, as handles (``TEAM_WORLD`` is 0). Teams split off later are
    handles too (what ``team_split_strided`` returns)."""

    TEAM_INVALID = -1
    TEAM_WORLD = 0
    TEAM_SHARED = 1
    TEAM_NODE = 2
    TEAM_SAME_MYPE_NODE = 3
    TEAM_SAME_GPU = 4
    TEAM_GPU_LEADERS = 5


# pgas's names for the operators and comparisons these stand for.
SIGNAL_OPS = {SignalOp.SIGNAL_SET: "set", SignalOp.SIGNAL_ADD: "add"}
COMPARISONS = {
    ComparisonType.CMP_EQ: "eq",
    ComparisonType.CMP_NE: "ne",
    ComparisonType.CMP_GT: "gt",
    ComparisonType.CMP_LE: "le",
    ComparisonType.CMP_LT: "lt",
    ComparisonType.CMP_GE: "ge",
}
