"""NVSHMEM4Py's collectives over a team: reduce (an all-reduce), reducescatter, alltoall,
fcollect, broadcast, and the barriers and syncs."""

from typing import Any

from ... import _pgas
from ._registry import symmetric
from .teams import team_of

_OPS = ("sum", "min", "max", "prod", "and", "or", "xor")


def _op(op: Any) -> str:
    name = str(op).lower()
    if name not in _OPS:
        raise _pgas.ArgumentError(f"unknown reduction {op!r}: use one of {', '.join(_OPS)}")
    return name


def reduce(team: Any, dst: Any, src: Any, op: Any = "sum", stream: Any = None) -> None:
    """Every PE of ``team`` gets ``op`` over the PEs' ``src`` in ``dst`` (``dst`` may be
    ``src``: pgas stages the in-place form)."""
    name = _op(op)
    _pgas.reduce(team_of(team), symmetric(dst, "reduce"), symmetric(src, "reduce"), name,
                 stream=stream)


def reducescatter(team: Any, dst: Any, src: Any, op: Any = "sum", stream: Any = None) -> None:
    """Block ``i`` of ``op`` over the PEs' ``src`` on team PE ``i``, in ``dst``."""
    name = _op(op)
    _pgas.reducescatter(team_of(team), symmetric(dst, "reducescatter"),
                        symmetric(src, "reducescatter"), name, stream=stream)


def alltoall(team: Any, dst: Any, src: Any, stream: Any = None) -> None:
    """Block ``j`` of each PE's ``src`` to block ``i`` of team PE ``j``'s ``dst``."""
    _pgas.alltoall(team_of(team), symmetric(dst, "alltoall"), symmetric(src, "alltoall"),
                   stream=stream)


def fcollect(team: Any, dst: Any, src: Any, stream: Any = None) -> None:
    """Every PE's ``src``, in team order, in every PE's ``dst`` (an all-gather)."""
    _pgas.fcollect(team_of(team), symmetric(dst, "fcollect"), symmetric(src, "fcollect"),
                   stream=stream)


def broadcast(team: Any, dst: Any, src: Any, root: int = 0, stream: Any = None) -> None:
    """Team PE ``root``'s ``src`` in every PE's ``dst``."""
    _pgas.broadcast(team_of(team), symmetric(dst, "broadcast"), symmetric(src, "broadcast"),
                    int(root), stream=stream)


def barrier(team: Any, stream: Any = None) -> None:
    """Barrier over ``team`` that also completes this PE's puts and gets."""
    _pgas.barrier(team_of(team), stream=stream)


def barrier_all(stream: Any = None) -> None:
    """Barrier over every PE that also completes this PE's puts and gets."""
    _pgas.barrier_all(stream=stream)


def sync(team: Any, stream: Any = None) -> None:
    """Synchronizes the PEs of ``team`` without completing puts and gets."""
    _pgas.sync(team_of(team), stream=stream)


def sync_all(stream: Any = None) -> None:
    """Synchronizes every PE without completing puts and gets."""
    _pgas.sync_all(stream=stream)
