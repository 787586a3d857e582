"""NVSHMEM's device API in Numba-CUDA kernels.

Each function here is a Numba intrinsic that calls one function of the pgas NVSHMEM library:
the wrappers that link-time kernels of pgas's own language call (``pgas_nv_<row>_<T>``, one per
row of docs/dsl.md's point-to-point and barrier intrinsics and element type). When a kernel
uses one, the library (only the functions this process's kernels call, compiled by NVRTC
against NVSHMEM's headers and kept in pgas's kernel cache) is linked into it, and the module
Numba loads is readied for NVSHMEM before its first launch (``nvshmemx_culibrary_init``).
``pgas.init()`` must come first::

    import pgas, torch
    from numba import cuda
    from pgas.device import numba as dev

    @cuda.jit
    def ring(dst, src, sig):
        peer = (dev.my_pe() + 1) % dev.n_pes()
        dev.put_signal_block(dst, src, sig, 1, dev.SIGNAL_SET, peer)
        dev.signal_wait_until(sig, dev.CMP_EQ, 1)

    pgas.init()
    x = torch.from_dlpack(pgas.alloc((1024,), "float32"))    # symmetric memory
    ...
    ring[1, 128](x, y, sig)

Arguments are arrays for NVSHMEM's pointers (a bulk call moves ``min(dst.size, src.size)``
elements, as NVSHMEM4Py's do) and integers for PEs, teams, counts and values. Every array a
remote operation addresses must be symmetric: a pgas tensor or a view of one. The names are
NVSHMEM's (``put_nbi_block``, ``atomic_fetch_add``, ``sync``, ...), as in NVSHMEM4Py's
``nvshmem.core.device.numba``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import importlib

from llvmlite import ir
from numba import cuda
from numba.cuda.core.errors import TypingError
from numba.cuda.cudadrv.linkable_code import PTXSource
from numba.cuda.extending import intrinsic

# Numba's type objects and IR helpers, typed as Any: their names are made at import time (star
# imports, registries), which a static checker cannot see.
types: Any = importlib.import_module("numba.cuda.types")
cgutils: Any = importlib.import_module("numba.cuda.cgutils")

from .. import _pgas

__all__ = [
    "SIGNAL_SET",
    "SIGNAL_ADD",
    "CMP_EQ",
    "CMP_NE",
    "CMP_GT",
    "CMP_LE",
    "CMP_LT",
    "CMP_GE",
    "TEAM_WORLD",
    "TEAM_SHARED",
    "TEAM_NODE",
]

#: NVSHMEM's signal operators and comparisons (``nvshmem_constants.h``), for
#: ``put_signal*``/``signal_op`` and ``signal_wait_until``/``wait_until``/``test``.
SIGNAL_SET, SIGNAL_ADD = 9, 10
CMP_EQ, CMP_NE, CMP_GT, CMP_LE, CMP_LT, CMP_GE = 0, 1, 2, 3, 4, 5
#: NVSHMEM's predefined teams, as the handles kernels take.
TEAM_WORLD, TEAM_SHARED, TEAM_NODE = 0, 1, 2

# The library's wrappers: name -> (C return type, C parameter types, what each parameter is).
_WRAPPERS: Dict[str, Tuple[str, List[str], List[str]]] = {
    name: (ret, params, keys) for name, ret, params, keys in _pgas._device_wrappers()
}

# Numba's element types and the suffix of their wrappers (the kernel language's type names).
_SUFFIX = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
}

# C scalar types of the wrappers' parameters and returns, as Numba types.
_SCALAR = {
    "bool": types.boolean,
    "int": types.int32,
    "int32_t": types.int32,
    "nvshmem_team_t": types.int32,
    "uint32_t": types.uint32,
    "uint16_t": types.uint16,
    "int8_t": types.int8,
    "int16_t": types.int16,
    "uint8_t": types.uint8,
    "int64_t": types.int64,
    "uint64_t": types.uint64,
    "size_t": types.uint64,
    "unsigned long long": types.uint64,
    "float": types.float32,
    "double": types.float64,
}

# Kernel-language row names that NVSHMEM4Py's device API spells differently.
_RENAMED = {"team_sync": "sync", "team_sync_block": "sync_block", "team_sync_warp": "sync_warp"}
# Rows that return a pointer (a peer's address), which a Numba kernel cannot use as an array.
_SKIPPED = {"peer"}


class _Library(PTXSource):
    """The pgas NVSHMEM library as Numba links it: the wrappers this process's kernels have
    called so far, compiled when a kernel links (one object, so a kernel and the device
    functions it calls share one NVSHMEM device state)."""

    def __init__(self) -> None:
        super().__init__(
            b"",
            name="pgas_nvshmem_library.ptx",
            setup_callback=_setup,
            teardown_callback=_teardown,
        )
        self.used: set = set()
        self._built: Dict[Tuple[Tuple[str, ...], Tuple[int, int]], bytes] = {}

    @property  # type: ignore[override]
    def data(self) -> bytes:
        arch = tuple(cuda.get_current_device().compute_capability)
        key = (tuple(sorted(self.used)), arch)
        if key not in self._built:
            self._built[key] = _pgas._device_library_ptx(list(key[0]), arch).encode()
        return self._built[key]

    @data.setter
    def data(self, _value: bytes) -> None:
        # PTXSource's constructor sets it; the library is built when a kernel links.
        pass


def _handle(object_code: Any) -> int:
    """The ``CUlibrary`` of what Numba loaded, as an integer."""
    return int(getattr(object_code, "handle", object_code))


def _setup(object_code: Any) -> None:
    _pgas._culibrary_init(_handle(object_code))


def _teardown(object_code: Any) -> None:
    _pgas._culibrary_finalize(_handle(object_code))


_LIBRARY = _Library()


def _llvm(c_type: str) -> ir.Type:
    """The LLVM type of a C parameter or return: pointers as bytes, the rest as they are."""
    if c_type.endswith("*"):
        return ir.IntType(8).as_pointer()
    if c_type == "void":
        return ir.VoidType()
    if c_type == "bool":
        return ir.IntType(1)
    ty = _SCALAR[c_type]
    return ir.FloatType() if ty == types.float32 else ir.DoubleType() if ty == types.float64 else ir.IntType(ty.bitwidth)


def _numba_type(c_type: str, elem: Any) -> Any:
    """The Numba type of a C scalar, `elem` for the row's element type."""
    return _SCALAR.get(c_type, elem)


# Every element-type suffix of the wrappers; those without a Numba array type are left out.
_ALL_SUFFIXES = set(_SUFFIX.values()) | {"isize", "usize", "e4m3", "e5m2"}


def _split(name: str) -> Tuple[str, str]:
    """A wrapper's row and element-type suffix ("" for untyped rows)."""
    row = name[len("pgas_nv_") :]
    head, _, tail = row.rpartition("_")
    return (head, tail) if tail in _ALL_SUFFIXES else (row, "")


def _usable(name: str) -> bool:
    """Whether Numba can call the wrapper: a Numba element type, and every value it takes or
    returns a C scalar Numba has (not ``half`` or ``__nv_bfloat16`` by value)."""
    ret, params, _ = _WRAPPERS[name]
    if _split(name)[1] not in ("", *_SUFFIX.values()):
        return False
    values = [ret] + [p for p in params if not p.endswith("*")]
    return all(v in _SCALAR or v in ("void", "bool") for v in values)


def _rows() -> Dict[str, Dict[str, str]]:
    """The usable wrappers, by row and then by element-type suffix."""
    rows: Dict[str, Dict[str, str]] = {}
    for name in _WRAPPERS:
        row, suffix = _split(name)
        if row not in _SKIPPED and _usable(name):
            rows.setdefault(row, {})[suffix] = name
    return rows


# Intrinsics by arity: Numba reads the formal arguments from the definition's signature.
_ARITY: Dict[int, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    0: lambda f: lambda typingctx: f(typingctx),
    1: lambda f: lambda typingctx, a0: f(typingctx, a0),
    2: lambda f: lambda typingctx, a0, a1: f(typingctx, a0, a1),
    3: lambda f: lambda typingctx, a0, a1, a2: f(typingctx, a0, a1, a2),
    4: lambda f: lambda typingctx, a0, a1, a2, a3: f(typingctx, a0, a1, a2, a3),
    5: lambda f: lambda typingctx, a0, a1, a2, a3, a4: f(typingctx, a0, a1, a2, a3, a4),
    6: lambda f: lambda typingctx, a0, a1, a2, a3, a4, a5: f(typingctx, a0, a1, a2, a3, a4, a5),
}


def _function(name: str, row: str, by_type: Dict[str, str]) -> Any:
    """The intrinsic `name` over the wrappers of `row`."""
    any_wrapper = next(iter(by_type.values()))
    _, params, keys = _WRAPPERS[any_wrapper]
    arity = len({k for k in keys if k != "n"})
    typed = "" not in by_type
    offered = ", ".join(k for k, v in _SUFFIX.items() if v in by_type)

    def typer(typingctx: Any, *args: Any) -> Any:
        elem = None
        if typed:
            arrays = [a for a in args if isinstance(a, types.Array)]
            if not arrays:
                raise TypingError(f"pgas.device.numba.{name}: its first argument is an array")
            elem = arrays[0].dtype
            suffix = _SUFFIX.get(str(elem))
            if suffix not in by_type:
                raise TypingError(
                    f"pgas.device.numba.{name}: no form for {elem} arrays; it takes {offered}"
                )
            wrapper = by_type[suffix]
        else:
            wrapper = by_type[""]
        ret, params, keys = _WRAPPERS[wrapper]
        # The element's C type is the first pointer's; other pointers (a signal word) are
        # of their own C type.
        pointers = [p for p in params if p.endswith("*")]
        elem_c = pointers[0] if pointers else None
        for key, c_type in zip(keys, params):
            if key == "n":
                continue
            arg = args[int(key)]
            if c_type.endswith("*") != isinstance(arg, types.Array):
                want = "an array" if c_type.endswith("*") else "a number"
                raise TypingError(
                    f"pgas.device.numba.{name}: argument {int(key) + 1} must be {want}, got {arg}"
                )
            if isinstance(arg, types.Array):
                own = elem is not None and c_type == elem_c
                wanted = elem if own else _SCALAR[c_type.rstrip(" *")]
                if arg.dtype != wanted:
                    raise TypingError(
                        f"pgas.device.numba.{name}: argument {int(key) + 1} must be an array of "
                        f"{wanted}, got one of {arg.dtype}"
                    )
        retty = types.void if ret == "void" else _numba_type(ret, elem)
        sig = retty(*args)

        def codegen(context: Any, builder: Any, signature: Any, llargs: Any) -> Any:
            values: List[Any] = []
            arrays: List[Any] = []
            for key, c_type in zip(keys, params):
                if key == "n":
                    counts = [a.nitems for a in arrays]
                    n = counts[0]
                    for c in counts[1:]:
                        n = builder.select(builder.icmp_signed("<", c, n), c, n)
                    values.append(builder.zext(n, ir.IntType(64)) if n.type.width < 64 else n)
                    continue
                i = int(key)
                if c_type.endswith("*"):
                    ary = context.make_array(signature.args[i])(context, builder, llargs[i])
                    arrays.append(ary)
                    values.append(builder.bitcast(ary.data, _llvm(c_type)))
                else:
                    to = _numba_type(c_type, elem)
                    values.append(context.cast(builder, llargs[i], signature.args[i], to))
            fnty = ir.FunctionType(_llvm(ret), [v.type for v in values])
            fn = cgutils.get_or_insert_function(builder.module, fnty, wrapper)
            _LIBRARY.used.add(wrapper)
            context.active_code_library.add_linking_file(_LIBRARY)
            result = builder.call(fn, values)
            if ret == "void":
                return context.get_dummy_value()
            return result

        return sig, codegen

    definition = _ARITY[arity](typer)
    definition.__name__ = name
    definition.__doc__ = f"NVSHMEM's ``{row}`` in a Numba kernel (``{any_wrapper}`` and its kin)."
    return intrinsic(definition)


def _build() -> None:
    for row, by_type in sorted(_rows().items()):
        name = _RENAMED.get(row, row)
        globals()[name] = _function(name, row, by_type)
        __all__.append(name)


_build()
