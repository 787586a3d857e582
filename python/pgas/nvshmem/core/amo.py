"""NVSHMEM4Py's host atomics on element ``offset`` of a symmetric array, tensor or Buffer on PE
``remote_pe``: blocking calls, as in NVSHMEM4Py. ``dtype`` is NVSHMEM4Py's for raw Buffers;
pgas knows each allocation's dtype, so it is not needed (and not checked)."""

from typing import Any

from ... import _pgas
from ._registry import symmetric


def _pe(remote_pe: int, what: str) -> int:
    if int(remote_pe) < 0:
        raise _pgas.ArgumentError(f"{what}: name the target PE (remote_pe=)")
    return int(remote_pe)


def atomic_fetch(target: Any, remote_pe: int = -1, *, offset: int = 0, dtype: Any = None) -> Any:
    """The value of ``target[offset]`` on PE ``remote_pe``."""
    return _pgas.atomic_fetch(symmetric(target, "atomic_fetch"), int(offset), _pe(remote_pe, "atomic_fetch"))


def atomic_set(target: Any, value: Any, remote_pe: int = -1, *, offset: int = 0,
               dtype: Any = None) -> None:
    """Sets ``target[offset]`` on PE ``remote_pe``."""
    _pgas.atomic_set(symmetric(target, "atomic_set"), int(offset), value, _pe(remote_pe, "atomic_set"))


def atomic_swap(target: Any, value: Any, remote_pe: int = -1, *, offset: int = 0,
                dtype: Any = None) -> Any:
    """Swaps ``value`` into ``target[offset]`` on PE ``remote_pe``; the old value."""
    return _pgas.atomic_swap(symmetric(target, "atomic_swap"), int(offset), value, _pe(remote_pe, "atomic_swap"))


def atomic_compare_swap(target: Any, cond: Any, value: Any, remote_pe: int = -1, *,
                        offset: int = 0, dtype: Any = None) -> Any:
    """Sets ``target[offset]`` on PE ``remote_pe`` to ``value`` where it equals ``cond``; the
    old value."""
    return _pgas.atomic_compare_swap(symmetric(target, "atomic_compare_swap"), int(offset), cond,
                                     value, _pe(remote_pe, "atomic_compare_swap"))


def _define(name: str, fetching: bool, takes_value: bool) -> None:
    native = getattr(_pgas, name)

    if takes_value:
        def op(target: Any, value: Any, remote_pe: int = -1, *, offset: int = 0,
               dtype: Any = None) -> Any:
            out = native(symmetric(target, name), int(offset), value, _pe(remote_pe, name))
            return out if fetching else None
    else:
        def op(target: Any, remote_pe: int = -1, *, offset: int = 0,  # type: ignore[misc]
               dtype: Any = None) -> Any:
            out = native(symmetric(target, name), int(offset), _pe(remote_pe, name))
            return out if fetching else None

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"``{name}`` on ``target[offset]`` on PE ``remote_pe``"
                  + ("; returns the old value." if fetching else "."))
    globals()[name] = op


for _name in ("add", "and", "or", "xor"):
    _define(f"atomic_{_name}", False, True)
    _define(f"atomic_fetch_{_name}", True, True)
_define("atomic_inc", False, False)
_define("atomic_fetch_inc", True, False)

__all__ = [n for n in globals() if n.startswith("atomic_")]
