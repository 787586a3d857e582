"""pgas's own library on torch tensors, as torch custom ops (``torch.ops.pgas.*``).

Each op checks its tensors (on this PE's GPU, dtype, shape, contiguous), allocates its outputs
with torch's allocator, or writes them into ``out=``, and calls the native module
(``python/src/library.rs``) on torch's current stream; the host does not wait. Each has a fake
implementation (the same checks, the output shapes), so a program calling them compiles under
``torch.compile(fullgraph=True)``. They are defined with ``torch.library.Library`` (``_Op``);
an eager call on plain tensors skips the dispatcher (``_eager``).
``pgas.gemm``, ``pgas.coll`` and ``pgas.ops`` re-export them by topic; ``docs/python.md`` says
which replay in CUDA graphs.

The collectives and the fused ops are collective: every PE calls them in the same order with
the same shapes (as NCCL's). Their first call of a shape makes symmetric buffers (a collective
allocation), so warm them up before capturing a CUDA graph.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import functools
import inspect

try:
    import torch
    from torch import Tensor
except ImportError as e:  # pgas itself needs no torch; these modules do
    raise ImportError(
        "pgas.gemm, pgas.coll and pgas.ops are PyTorch ops and need torch (>= 2.4): "
        "pip install torch, or pgas with its torch extra ('pgas[torch]')"
    ) from e

from . import _pgas

_FP8 = torch.float8_e4m3fn
_BF16 = torch.bfloat16
_REDUCE_OPS = ("sum", "min", "max", "prod", "and", "or", "xor")


# torch.ops.pgas: defined here, once per process.
_LIB = torch.library.Library("pgas", "DEF")


class _Op:
    """``torch.ops.pgas.<name>``, defined by ``schema`` with ``impl`` as its kernel for CUDA
    tensors (and for CPU ones, which ``impl`` refuses with the fix), called as a function.

    Registered with ``torch.library.Library`` rather than ``torch.library.custom_op``: a call
    then goes from Python to the dispatcher and back to ``impl`` without custom_op's layers of
    Python, which cost tens of microseconds a call. An eager call on plain tensors
    (``_eager``) calls ``impl`` itself: the dispatcher would only call it back, at about 4 us
    (``python_kernel_op_empty`` against ``torch_empty`` in ``python/benches/torch_ops.py``).

    ``out=`` (an op with results; a tuple of tensors for several) writes the results into
    tensors the caller holds, of the results' shapes and dtypes, contiguous, on the inputs'
    GPU, in place of new ones, and returns them. Eager, the op writes them directly; traced,
    the op's results are copied into them. ``fast``, where an op has one, is a native function
    that takes the inputs and ``out``, and checks and launches in one call when the call may
    skip the dispatcher and the tensors are what it takes (``True``), else does nothing."""

    def __init__(self, schema: str, impl: Callable[..., Any],
                 fast: Optional[Callable[..., bool]] = None) -> None:
        self.name = schema.split("(", 1)[0]
        _LIB.define(schema)
        for key in ("CUDA", "CPU"):
            _LIB.impl(self.name, impl, key)
        self._overload = getattr(torch.ops.pgas, self.name).default
        self._impl = impl
        self._fast = fast
        self._takes_out = "out" in inspect.signature(impl).parameters
        functools.update_wrapper(self, impl)

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is not None and not self._takes_out:
            raise TypeError(f"pgas.{self.name} takes no out=: it returns no tensor")
        # is_compiling first, as in _eager: torch.compile's trace cannot step into ``fast``.
        if (out is not None and self._fast is not None and not kwargs and not _COMPILING()
                and self._fast(*args, out)):
            return out
        if _eager(args, kwargs):
            if out is None:
                return self._impl(*args, **kwargs)
            return self._impl(*args, out=out, **kwargs)
        result = self._overload(*args, **kwargs)
        return result if out is None else _into(self.name, result, out)

    def register_fake(self, fake: Callable[..., Any]) -> Callable[..., Any]:
        """Registers ``fake`` (the checks and the outputs' shapes) for tracing."""
        torch.library.register_fake(f"pgas::{self.name}", fake, lib=_LIB)
        return fake


# Bound once: each lookup through ``torch.`` costs a module attribute read.
_COMPILING = torch.compiler.is_compiling


def _eager(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """Whether a call may skip the dispatcher, which would call the implementation with the
    same arguments: not traced by ``torch.compile`` (asked first: its trace takes it as True
    and reads no further) and, by ``_pgas._untraced`` (``python/src/torch_tensor.rs``), no
    dispatch mode active, only plain tensors, none requiring grad while grad is on."""
    return not _COMPILING() and _pgas._untraced(args) and (
        not kwargs or _pgas._untraced(tuple(kwargs.values())))


def _out_error(op: str, out: Any, shape: Sequence[int], dtype: torch.dtype,
               device: torch.device) -> Exception:
    """The error for an ``out`` that cannot hold a result of ``shape``, ``dtype`` on
    ``device``."""
    got = (f"a{'' if out.is_contiguous() else ' non-contiguous'} {out.dtype} tensor of shape "
           f"{tuple(out.shape)} on {out.device}" if isinstance(out, Tensor)
           else type(out).__name__)
    return _bad(op, f"out is {got}; the result is a contiguous {dtype} tensor of shape "
                    f"{tuple(shape)} on {device}")


def _new(op: str, out: Optional[Tensor], shape: Sequence[int], dtype: torch.dtype,
         like: Tensor) -> Tensor:
    """A result of ``shape`` and ``dtype`` on ``like``'s device: ``out`` when given (checked:
    contiguous, on that device, compared by index since a ``device`` is a new object each
    read), else a new tensor."""
    if out is None:
        return like.new_empty(shape, dtype=dtype)
    if (isinstance(out, Tensor) and out.dtype == dtype and out.shape == tuple(shape)
            and out.get_device() == like.get_device() and out.is_contiguous()):
        return out
    raise _out_error(op, out, shape, dtype, like.device)


def _into(op: str, result: Any, out: Any) -> Any:
    """``out=`` on the dispatcher's path: ``result`` (a tensor or a tuple of them) copied into
    ``out`` (the same structure), which is returned. Shapes and dtypes are checked (``copy_``
    would broadcast and convert); where it lives is ``copy_``'s affair."""
    if isinstance(result, Tensor):
        if not (isinstance(out, Tensor) and out.dtype == result.dtype
                and out.shape == result.shape):
            raise _out_error(op, out, result.shape, result.dtype, result.device)
        return out.copy_(result)
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise _bad(op, f"out is {type(out).__name__}; the op returns {len(result)} tensors, so "
                       f"out is a tuple of {len(result)}")
    return tuple(_into(op, r, o) for r, o in zip(result, out))


def _op(schema: str, fast: Optional[Callable[..., bool]] = None
        ) -> Callable[[Callable[..., Any]], _Op]:
    return lambda impl: _Op(schema, impl, fast)


def _bad(op: str, what: str) -> Exception:
    return _pgas.ArgumentError(f"pgas.{op}: {what}")


def _check(op: str, name: str, t: Tensor, dtypes: Sequence[torch.dtype], dims: int) -> None:
    """Raises ``pgas.ArgumentError`` unless ``t`` is a contiguous CUDA tensor of one of
    ``dtypes`` with ``dims`` dimensions (any when ``dims`` is 0). One expression for the
    common case (each tensor attribute costs a fraction of a microsecond); ``_refuse`` says
    what is wrong."""
    try:
        if (t.is_cuda and t.dtype in dtypes and (not dims or t.dim() == dims)
                and t.is_contiguous()):
            return
    except AttributeError:
        pass
    _refuse(op, name, t, dtypes, dims)


def _refuse(op: str, name: str, t: Any, dtypes: Sequence[torch.dtype], dims: int) -> None:
    """The error ``_check`` raises for ``t``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"pgas.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise _bad(op, f"{name} is on {t.device}; pgas runs on this PE's GPU: pass a CUDA "
                       f"tensor (.cuda())")
    if t.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        raise _bad(op, f"{name} is {t.dtype}; it takes {names}")
    if dims and t.dim() != dims:
        raise _bad(op, f"{name} has shape {tuple(t.shape)}; it takes {dims} dimensions")
    raise _bad(op, f"{name} is not contiguous; pass {name}.contiguous()")


# The current stream's raw handle without a Stream object a call (the call torch.compile's
# generated code makes); torch.cuda's public form where a build lacks it.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(t: Tensor) -> int:
    """The handle of torch's current stream on ``t``'s device."""
    if _RAW_STREAM is not None:
        return _RAW_STREAM(t.get_device())  # type: ignore[no-any-return]
    return torch.cuda.current_stream(t.device).cuda_stream


# ---- GEMM -------------------------------------------------------------------------------------

def _gemm_shape(a: Tensor, bt: Tensor) -> Tuple[int, int, int]:
    _check("gemm", "a", a, (_BF16, _FP8), 2)
    _check("gemm", "bt", bt, (a.dtype,), 2)
    (m, k), (n, kb) = a.shape, bt.shape
    if k != kb:
        raise _bad("gemm", f"a is {m} x {k} and bt is {n} x {kb}: bt holds B transposed "
                           f"(N x K, a linear layer's weight), with a's K = {k}")
    # The kernel's tiles (pgas::gemm::shape_error), checked here too so that a trace under
    # torch.compile refuses the shape at once.
    kt = 128 if a.dtype == _FP8 else 64
    if m > 0 and n > 0 and k > 0 and not (n % 64 or k % kt):
        return m, n, k
    tiles = (("M", m, 1), ("N", n, 64), ("K", k, kt))
    bad = [f"{name} = {v} is not a positive multiple of {t}" for name, v, t in tiles
           if v <= 0 or v % t]
    if bad:
        raise _bad("gemm", f"the Hopper GEMM takes any M but whole tiles of N and K: "
                           f"{', '.join(bad)} (pad the "
                           f"tensors, or use torch.matmul for this shape)")
    return m, n, k


@_op("gemm(Tensor a, Tensor bt) -> Tensor", fast=_pgas._gemm_into)
def gemm(a: Tensor, bt: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """``a @ bt.T`` by ``pgas::gemm``, the Hopper GEMM (sm_90a): ``a`` (M x K) and ``bt``
    (N x K, a linear layer's weight) both bfloat16 or both float8_e4m3fn (unscaled), the
    result (M x N) bfloat16 with f32 accumulation. Any M; N a multiple of 64, K of 64 (128
    in FP8); other shapes raise with the rule. ``out``, when given, receives the result (it
    must not overlap ``a`` or ``bt``)."""
    m, n, k = _gemm_shape(a, bt)
    c = _new("gemm", out, (m, n), _BF16, a)
    _pgas._gemm(c.data_ptr(), a.data_ptr(), bt.data_ptr(), m, n, k, a.dtype == _FP8,
                stream=_stream(a))
    return c


@gemm.register_fake
def _(a: Tensor, bt: Tensor) -> Tensor:
    m, n, _ = _gemm_shape(a, bt)
    return a.new_empty((m, n), dtype=_BF16)


def _grouped_shape(a: Tensor, bt: Tensor, group_of: Tensor) -> Tuple[int, int, int, int]:
    _check("gemm_grouped", "a", a, (_BF16, _FP8), 2)
    _check("gemm_grouped", "bt", bt, (a.dtype,), 3)
    _check("gemm_grouped", "group_of", group_of, (torch.int32,), 1)
    (m, k), (groups, n, kb) = a.shape, bt.shape
    if k != kb:
        raise _bad("gemm_grouped", f"a is {m} x {k} and bt is {groups} x {n} x {kb}: bt holds "
                                   f"each group's B transposed (N x K), with a's K = {k}")
    tiles = -(-m // 128)
    if group_of.shape[0] != tiles:
        raise _bad("gemm_grouped", f"group_of has {group_of.shape[0]} entries; a's {m} rows are "
                                   f"{tiles} tiles of 128, one group each (grouped_rows lays "
                                   f"groups out)")
    kt = 128 if a.dtype == _FP8 else 64
    if m <= 0 or groups <= 0 or n <= 0 or n % 64 or k <= 0 or k % kt:
        raise _bad("gemm_grouped", f"M = {m}, {groups} groups, N = {n}, K = {k}: it takes M "
                                   f"and the groups positive, N a multiple of 64 and K of {kt}")
    return m, n, k, groups


@_op("gemm_grouped(Tensor a, Tensor bt, Tensor group_of) -> Tensor")
def gemm_grouped(a: Tensor, bt: Tensor, group_of: Tensor,
                 out: Optional[Tensor] = None) -> Tensor:
    """The grouped GEMM of a mixture of experts, in one launch (``pgas::gemm::gemm_grouped``):
    128-row tile ``i`` of ``a`` (M x K) times ``bt[group_of[i]]`` transposed (``bt`` G x N x K;
    ``group_of`` int32, one entry a tile), into the result's rows (M x N, bfloat16). ``a`` and
    ``bt`` both bfloat16, or both float8_e4m3fn (unscaled; K then a multiple of 128).
    ``grouped_rows(counts)`` lays out groups of any row counts. A tile of group -1 is skipped
    (its rows of the result are left unwritten); a group past the last gives zeros. ``out``,
    when given, receives the result (it must not overlap the inputs)."""
    m, n, k, groups = _grouped_shape(a, bt, group_of)
    c = _new("gemm_grouped", out, (m, n), _BF16, a)
    _pgas._gemm_grouped(c.data_ptr(), a.data_ptr(), bt.data_ptr(), group_of.data_ptr(),
                        m, n, k, groups, a.dtype == _FP8, stream=_stream(a))
    return c


@gemm_grouped.register_fake
def _(a: Tensor, bt: Tensor, group_of: Tensor) -> Tensor:
    m, n, _, _ = _grouped_shape(a, bt, group_of)
    return a.new_empty((m, n), dtype=_BF16)


def grouped_rows(counts: Sequence[int]) -> Tuple[List[int], int, List[int]]:
    """Where groups of ``counts`` rows go for ``gemm_grouped``: each group's first row (each a
    multiple of 128), M (all the rows, each group's padded to whole 128-row tiles) and each
    tile's group (``group_of``, as a list: ``torch.tensor(..., dtype=torch.int32)`` on the GPU)."""
    return _pgas._grouped_rows(list(counts))


# ---- Collectives ------------------------------------------------------------------------------

_COLL_DTYPES = (torch.float16, _BF16, torch.float32, torch.float64, torch.int32, torch.int64,
                torch.uint8, torch.int8)


def _coll_out_shape(kind: str, x: Tensor, op: str) -> Tuple[int, ...]:
    _check(kind, "x", x, _COLL_DTYPES, 0)
    if op not in _REDUCE_OPS:
        raise _bad(kind, f"op {op!r}: one of {', '.join(_REDUCE_OPS)}")
    if x.dim() == 0:
        raise _bad(kind, "x is a scalar; pass a tensor of at least one dimension")
    pes = _pgas.n_pes()
    rows = x.shape[0]
    if kind == "all_gather":
        return (rows * pes, *x.shape[1:])
    if kind in ("reduce_scatter", "all_to_all") and rows % pes:
        raise _bad(kind, f"x has {rows} rows, not a multiple of the {pes} PEs: the rows are "
                         f"split in {pes} equal chunks")
    if kind == "reduce_scatter":
        return (rows // pes, *x.shape[1:])
    return tuple(x.shape)


def _collective(kind: str, x: Tensor, op: str = "sum", root: int = 0,
                out: Optional[Tensor] = None) -> Tensor:
    """``kind`` of ``x`` into ``out`` or a new tensor. Staged (the module's docstring), so
    ``out`` may be ``x`` itself."""
    y = _new(kind, out, _coll_out_shape(kind, x, op), x.dtype, x)
    _pgas._collective(kind, y.data_ptr(), x.data_ptr(), y.numel(), x.numel(), str(x.dtype),
                      op, root, stream=_stream(x))
    return y


@_op("all_reduce(Tensor x, str op='sum') -> Tensor")
def all_reduce(x: Tensor, op: str = "sum", out: Optional[Tensor] = None) -> Tensor:
    """The element-wise reduction (``op``: sum, min, max, prod, and, or, xor) of every PE's
    ``x``, by ``pgas::coll`` (low latency, one- or two-shot by size), as a new tensor."""
    return _collective("all_reduce", x, op, out=out)


@all_reduce.register_fake
def _(x: Tensor, op: str = "sum") -> Tensor:
    return x.new_empty(_coll_out_shape("all_reduce", x, op))


@_op("all_gather(Tensor x) -> Tensor")
def all_gather(x: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """Every PE's ``x`` stacked along dimension 0 in PE order (``n_pes() x`` its rows)."""
    return _collective("all_gather", x, out=out)


@all_gather.register_fake
def _(x: Tensor) -> Tensor:
    return x.new_empty(_coll_out_shape("all_gather", x, "sum"))


@_op("reduce_scatter(Tensor x, str op='sum') -> Tensor")
def reduce_scatter(x: Tensor, op: str = "sum", out: Optional[Tensor] = None) -> Tensor:
    """PE ``r``'s chunk ``r`` (of ``n_pes()`` along dimension 0) of the reduction of every
    PE's ``x``."""
    return _collective("reduce_scatter", x, op, out=out)


@reduce_scatter.register_fake
def _(x: Tensor, op: str = "sum") -> Tensor:
    return x.new_empty(_coll_out_shape("reduce_scatter", x, op))


@_op("broadcast(Tensor x, int root) -> Tensor")
def broadcast(x: Tensor, root: int, out: Optional[Tensor] = None) -> Tensor:
    """PE ``root``'s ``x`` on every PE."""
    if not 0 <= root < _pgas.n_pes():
        raise _bad("broadcast", f"root {root} is not a PE (0 to {_pgas.n_pes() - 1})")
    return _collective("broadcast", x, "sum", root, out)


@broadcast.register_fake
def _(x: Tensor, root: int) -> Tensor:
    return x.new_empty(_coll_out_shape("broadcast", x, "sum"))


@_op("all_to_all(Tensor x) -> Tensor")
def all_to_all(x: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """Chunk ``q`` (of ``n_pes()`` along dimension 0) of PE ``r``'s ``x`` lands as chunk ``r``
    of PE ``q``'s result."""
    return _collective("all_to_all", x, out=out)


@all_to_all.register_fake
def _(x: Tensor) -> Tensor:
    return x.new_empty(_coll_out_shape("all_to_all", x, "sum"))


def _a2av_shape(x: Tensor, send_counts: List[int], recv_counts: List[int]) -> Tuple[int, ...]:
    _check("all_to_all_v", "x", x, _COLL_DTYPES, 0)
    pes = _pgas.n_pes()
    if x.dim() == 0:
        raise _bad("all_to_all_v", "x is a scalar; pass a tensor of at least one dimension")
    for name, counts in (("send_counts", send_counts), ("recv_counts", recv_counts)):
        if len(counts) != pes or any(c < 0 for c in counts):
            raise _bad("all_to_all_v", f"{name} is {list(counts)}: one row count a PE, "
                                       f"{pes} non-negative ints")
    if sum(send_counts) != x.shape[0]:
        raise _bad("all_to_all_v", f"send_counts sum to {sum(send_counts)} rows, x has "
                                   f"{x.shape[0]}: x holds the rows for PE 0, then PE 1, ...")
    return (sum(recv_counts), *x.shape[1:])


@_op("all_to_all_v(Tensor x, int[] send_counts, int[] recv_counts) -> Tensor")
def all_to_all_v(x: Tensor, send_counts: List[int], recv_counts: List[int],
                 out: Optional[Tensor] = None) -> Tensor:
    """All-to-all with per-PE row counts, as ``torch.distributed.all_to_all_single`` with
    split sizes: this PE sends ``send_counts[q]`` rows of ``x`` (PE 0's first, then PE 1's,
    ...) to PE ``q`` and receives ``recv_counts[p]`` rows from PE ``p``, in PE order. PE
    ``p``'s ``send_counts[q]`` must equal PE ``q``'s ``recv_counts[p]`` (checked on every PE
    alike). Each new set of counts is agreed once, on the host, and kept until finalize."""
    y = _new("all_to_all_v", out, _a2av_shape(x, send_counts, recv_counts), x.dtype, x)
    row = x[0].numel() if x.shape[0] else (y[0].numel() if y.shape[0] else 1)
    _pgas._all_to_all_v(y.data_ptr(), x.data_ptr(), [c * row for c in send_counts],
                        [c * row for c in recv_counts], str(x.dtype), stream=_stream(x))
    return y


@all_to_all_v.register_fake
def _(x: Tensor, send_counts: List[int], recv_counts: List[int]) -> Tensor:
    return x.new_empty(_a2av_shape(x, send_counts, recv_counts))


# ---- Fused operations -------------------------------------------------------------------------

def _pair_shapes(op: str, a: Tensor, bt: Tensor) -> Tuple[int, int, int]:
    _check(op, "a", a, (_BF16,), 2)
    _check(op, "bt", bt, (_BF16,), 2)
    (m, k), (n, kb) = a.shape, bt.shape
    if k != kb:
        raise _bad(op, f"a is {m} x {k} and bt is {n} x {kb}: bt is N x K with a's K = {k}")
    return m, n, k


@_op("all_gather_matmul(Tensor shard, Tensor bt) -> Tensor")
def all_gather_matmul(shard: Tensor, bt: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """``all_gather(shard) @ bt.T`` fused (``pgas::ops::AllGatherMatmul``): ``shard`` is this
    PE's ``mp x K`` rows of A, ``bt`` N x K, bfloat16; the result is ``mp * n_pes() x N``.
    Each PE's GEMM starts on its own rows while the others' arrive."""
    mp, n, k = _pair_shapes("all_gather_matmul", shard, bt)
    c = _new("all_gather_matmul", out, (mp * _pgas.n_pes(), n), _BF16, shard)
    _pgas._all_gather_matmul(c.data_ptr(), shard.data_ptr(), bt.data_ptr(), mp, n, k,
                             stream=_stream(shard))
    return c


@all_gather_matmul.register_fake
def _(shard: Tensor, bt: Tensor) -> Tensor:
    mp, n, _ = _pair_shapes("all_gather_matmul", shard, bt)
    return shard.new_empty((mp * _pgas.n_pes(), n))


def _rs_rows(a: Tensor, bt: Tensor) -> Tuple[int, int, int]:
    m, n, k = _pair_shapes("matmul_reduce_scatter", a, bt)
    if m % _pgas.n_pes():
        raise _bad("matmul_reduce_scatter", f"a has {m} rows, not a multiple of the "
                                            f"{_pgas.n_pes()} PEs")
    return m, n, k


@_op("matmul_reduce_scatter(Tensor a, Tensor bt) -> Tensor")
def matmul_reduce_scatter(a: Tensor, bt: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """This PE's ``M / n_pes()`` rows of the sum over PEs of ``a @ bt.T``, fused
    (``pgas::ops::MatmulReduceScatter``): ``a`` (M x K/P) and ``bt`` (N x K/P) are this PE's
    slices of K, bfloat16. Chunks of the product leave for their owners as they are done."""
    m, n, k = _rs_rows(a, bt)
    y = _new("matmul_reduce_scatter", out, (m // _pgas.n_pes(), n), _BF16, a)
    _pgas._matmul_reduce_scatter(y.data_ptr(), a.data_ptr(), bt.data_ptr(), m, n, k,
                                 stream=_stream(a))
    return y


@matmul_reduce_scatter.register_fake
def _(a: Tensor, bt: Tensor) -> Tensor:
    m, n, _ = _rs_rows(a, bt)
    return a.new_empty((m // _pgas.n_pes(), n))


def _rms_shapes(x: Tensor, residual: Tensor, weight: Tensor) -> Tuple[int, int]:
    op = "allreduce_rmsnorm"
    _check(op, "x", x, (_BF16,), 2)
    _check(op, "residual", residual, (_BF16,), 2)
    _check(op, "weight", weight, (_BF16,), 1)
    tokens, hidden = x.shape
    if tuple(residual.shape) != tuple(x.shape) or weight.shape[0] != hidden:
        raise _bad(op, f"x is {tuple(x.shape)}, residual {tuple(residual.shape)} and weight "
                       f"{tuple(weight.shape)}: residual must match x, weight be ({hidden},)")
    return tokens, hidden


@_op("allreduce_rmsnorm(Tensor x, Tensor residual, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)")
def allreduce_rmsnorm(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                      out: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
    """A transformer layer's all-reduce + residual add + RMSNorm in one operation
    (``pgas::ops::AllReduceRmsNorm``): ``h = sum over PEs of x + residual`` and
    ``RMSNorm(h) * weight``, returned as ``(normed, h)``; bfloat16 (tokens x hidden).
    ``out``, when given, is the pair ``(normed, h)`` to write (staged, so either may be an
    input)."""
    op = "allreduce_rmsnorm"
    tokens, hidden = _rms_shapes(x, residual, weight)
    if out is not None and (not isinstance(out, (tuple, list)) or len(out) != 2):
        raise _bad(op, f"out is {type(out).__name__}; it is the pair (normed, h)")
    normed, h = (_new(op, o, x.shape, _BF16, x) for o in (out or (None, None)))
    _pgas._allreduce_rmsnorm(normed.data_ptr(), h.data_ptr(), x.data_ptr(), residual.data_ptr(),
                             weight.data_ptr(), tokens, hidden, eps, stream=_stream(x))
    return normed, h


@allreduce_rmsnorm.register_fake
def _(x: Tensor, residual: Tensor, weight: Tensor,
      eps: float = 1e-6) -> Tuple[Tensor, Tensor]:
    _rms_shapes(x, residual, weight)
    return torch.empty_like(x), torch.empty_like(x)


# ---- MoE (low-latency mode) -------------------------------------------------------------------

class _Cuda:
    """A view of device memory for ``torch.as_tensor`` (the CUDA array interface, no stream:
    torch orders it)."""

    def __init__(self, ptr: int, shape: Sequence[int], typestr: str) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape),
                                         "typestr": typestr, "version": 3}


_TYPESTR = {"bfloat16": ("<i2", _BF16), "int32": ("<i4", torch.int32)}


def _moe_args(op: str, x: Tensor, topk_idx: Tensor, topk_weights: Tensor,
              max_tokens: int) -> Tuple[int, int, int]:
    """(tokens, hidden, top_k) of a dispatch's input, checked."""
    _check(op, "x", x, (_BF16,), 2)
    _check(op, "topk_idx", topk_idx, (torch.int32,), 2)
    _check(op, "topk_weights", topk_weights, (torch.float32,), 2)
    (tokens, hidden), (ti, top_k) = x.shape, topk_idx.shape
    if ti != tokens or tuple(topk_weights.shape) != (tokens, top_k):
        raise _bad(op, f"x is {tuple(x.shape)}, topk_idx {tuple(topk_idx.shape)} and "
                       f"topk_weights {tuple(topk_weights.shape)}: one row of top_k expert ids "
                       f"and weights for each of x's {tokens} tokens")
    if tokens > max_tokens:
        raise _bad(op, f"{tokens} tokens, over the MoE's max_tokens ({max_tokens})")
    return tokens, hidden, top_k


@_op("moe_dispatch(Tensor x, Tensor topk_idx, Tensor topk_weights, int max_tokens, "
     "int experts_per_pe, Tensor(a!) recv_x, Tensor(b!) recv_src, Tensor(c!) recv_counts) -> ()")
def moe_dispatch(x: Tensor, topk_idx: Tensor, topk_weights: Tensor, max_tokens: int,
                 experts_per_pe: int, recv_x: Tensor, recv_src: Tensor,
                 recv_counts: Tensor) -> None:
    """``MoE.dispatch``'s op: writes the receive buffers (``recv_x``, ``recv_src``,
    ``recv_counts``, which must be the ``MoE``'s own)."""
    tokens, hidden, top_k = _moe_args("moe_dispatch", x, topk_idx, topk_weights, max_tokens)
    recv = [t.data_ptr() for t in (recv_x, recv_src, recv_counts)]
    _pgas._moe_dispatch(x.data_ptr(), topk_idx.data_ptr(), topk_weights.data_ptr(), tokens,
                        [max_tokens, hidden, top_k, experts_per_pe], recv, stream=_stream(x))


@moe_dispatch.register_fake
def _(x: Tensor, topk_idx: Tensor, topk_weights: Tensor, max_tokens: int, experts_per_pe: int,
      recv_x: Tensor, recv_src: Tensor, recv_counts: Tensor) -> None:
    _moe_args("moe_dispatch", x, topk_idx, topk_weights, max_tokens)


def _combine_shape(expert_out: Tensor, topk_idx: Tensor, max_tokens: int,
                   experts_per_pe: int) -> Tuple[int, int, int]:
    """(tokens, hidden, top_k) of a combine, checked."""
    op = "moe_combine"
    _check(op, "expert_out", expert_out, (_BF16,), 3)
    _check(op, "topk_idx", topk_idx, (torch.int32,), 2)
    rows = (experts_per_pe, _pgas.n_pes() * max_tokens)
    if tuple(expert_out.shape[:2]) != rows:
        raise _bad(op, f"expert_out is {tuple(expert_out.shape)}: it is laid out as recv_x, "
                       f"{rows + (expert_out.shape[2],)}")
    tokens, top_k = topk_idx.shape
    if tokens > max_tokens:
        raise _bad(op, f"{tokens} tokens, over the MoE's max_tokens ({max_tokens})")
    return tokens, expert_out.shape[2], top_k


@_op("moe_combine(Tensor expert_out, Tensor topk_idx, int max_tokens, int experts_per_pe) "
     "-> Tensor")
def moe_combine(expert_out: Tensor, topk_idx: Tensor, max_tokens: int,
                experts_per_pe: int, out: Optional[Tensor] = None) -> Tensor:
    """``MoE.combine``'s op: each token's weighted sum of its experts' rows."""
    tokens, hidden, top_k = _combine_shape(expert_out, topk_idx, max_tokens, experts_per_pe)
    y = _new("moe_combine", out, (tokens, hidden), _BF16, expert_out)
    _pgas._moe_combine(y.data_ptr(), expert_out.data_ptr(), topk_idx.data_ptr(), tokens,
                       [max_tokens, hidden, top_k, experts_per_pe], stream=_stream(expert_out))
    return y


@moe_combine.register_fake
def _(expert_out: Tensor, topk_idx: Tensor, max_tokens: int, experts_per_pe: int) -> Tensor:
    tokens, hidden, _ = _combine_shape(expert_out, topk_idx, max_tokens, experts_per_pe)
    return expert_out.new_empty((tokens, hidden))


class MoE:
    """MoE dispatch and combine for decoding (``pgas::ops::moe::LowLatencyMoe``, DeepEP's
    low-latency layout) on torch tensors: one kernel each way, the routing read on the GPU, no
    host round trip, so a decode step runs under ``torch.compile`` and in a CUDA graph.

    Making one is collective (every PE, the same sizes) and allocates its receive buffers in
    the symmetric heap, where they stay until ``pgas.finalize()``; ``recv_x``, ``recv_src``
    and ``recv_counts`` are torch views of them (valid until then), rewritten by each dispatch.

    >>> moe = pgas.ops.MoE(max_tokens=128, hidden=7168, top_k=8, experts_per_pe=8)
    >>> recv_x, recv_src, counts = moe.dispatch(x, topk_idx, topk_weights)
    >>> # expert le's rows from PE s: recv_x[le, s * 128 : s * 128 + counts[le, s]]
    >>> y = moe.combine(expert_out, topk_idx)   # expert_out laid out as recv_x
    """

    def __init__(self, max_tokens: int, hidden: int, top_k: int, experts_per_pe: int) -> None:
        self.max_tokens, self.hidden = max_tokens, hidden
        self.top_k, self.experts_per_pe = top_k, experts_per_pe
        device = torch.device("cuda", _pgas.context().device)
        views = []
        for _, ptr, shape, dtype in _pgas._moe_buffers([max_tokens, hidden, top_k,
                                                         experts_per_pe]):
            typestr, as_dtype = _TYPESTR[dtype]
            views.append(torch.as_tensor(_Cuda(ptr, shape, typestr), device=device)
                         .view(as_dtype))
        #: Received rows, ``experts_per_pe x (n_pes * max_tokens) x hidden`` bfloat16: local
        #: expert ``le``'s rows from PE ``s`` start at row ``s * max_tokens`` of ``recv_x[le]``.
        self.recv_x: Tensor = views[0]
        #: For each received row, which pair it is on its source PE: ``token * top_k + slot``.
        self.recv_src: Tensor = views[1]
        #: ``experts_per_pe x n_pes`` int32: the rows each source sent each local expert.
        self.recv_counts: Tensor = views[2]

    def dispatch(self, x: Tensor, topk_idx: Tensor,
                 topk_weights: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Sends each of this PE's tokens (rows of ``x``, bfloat16, ``tokens x hidden``) to the
        PEs of its experts: ``topk_idx`` (int32, ``tokens x top_k``; expert ``g`` lives on PE
        ``g // experts_per_pe``, ``-1`` sends nothing) and ``topk_weights`` (float32, the
        same shape; applied in ``combine``). Returns ``(recv_x, recv_src, recv_counts)``.
        Collective: every PE dispatches, then combines, in turn."""
        moe_dispatch(x, topk_idx, topk_weights, self.max_tokens, self.experts_per_pe,
                     self.recv_x, self.recv_src, self.recv_counts)
        return self.recv_x, self.recv_src, self.recv_counts

    def combine(self, expert_out: Tensor, topk_idx: Tensor) -> Tensor:
        """Brings the experts' output (``expert_out``, laid out as ``recv_x``) back to the
        tokens' PEs: returns ``tokens x hidden`` bfloat16, each token the sum of its slots'
        rows times their weights (f32 sums). ``topk_idx`` is the last dispatch's. Collective."""
        return moe_combine(expert_out, topk_idx, self.max_tokens, self.experts_per_pe)
