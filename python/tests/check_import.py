"""Imports the pgas extension module (PYTHONPATH names the folder that holds the package pgas) and checks
what works without a GPU: the module's attributes, and that pgas.init() raises pgas.PgasError
with pgas's message rather than crashing the interpreter, every time it is called. On a machine
where init succeeds (a GPU, NVSHMEM), it checks a one-PE context instead. Run by
python/tests/import.rs (cargo test); prints `check_import: ok` last."""

import os
import sys

import pgas

expected = os.environ.get("PGAS_EXPECTED_VERSION")
assert expected is None or pgas.__version__ == expected, (pgas.__version__, expected)
assert "float32" in pgas.DTYPES and "bfloat16" in pgas.DTYPES, pgas.DTYPES
assert issubclass(pgas.PgasError, RuntimeError)
for cls in (pgas.Context, pgas.Tensor):
    try:
        cls()
    except TypeError:
        pass  # made by pgas.init() and Context.alloc only
    else:
        raise AssertionError(f"{cls.__name__}() made an object")

# A bad argument is Python's own error, before anything starts.
try:
    pgas.init(heap_size=-1)
except OverflowError:
    pass
else:
    raise AssertionError("init(heap_size=-1) did not raise OverflowError")

try:
    ctx = pgas.init()
except pgas.PgasError as e:
    first = str(e)
    print("pgas.init() raised pgas.PgasError:", first.splitlines()[0])
    # What is missing, and what to do about it.
    assert "NVSHMEM" in first or "driver" in first or "GPU" in first, first
    assert "pgas doctor" in first or "Fix" in first, first
    # Still no crash the second time (the process keeps its state).
    try:
        pgas.init()
    except pgas.PgasError as e:
        print("again:", str(e).splitlines()[0])
    else:
        raise AssertionError("the second init() succeeded after the first failed")
else:
    print("pgas.init() succeeded (a GPU is here):", ctx)
    assert ctx.n_pes >= 1 and 0 <= ctx.my_pe < ctx.n_pes
    t = ctx.alloc((2, 3), "int32")
    assert t.shape == (2, 3) and t.dtype == "int32" and t.nbytes == 24, t
    t.fill(7)
    assert t.to_list() == [7] * 6, t.to_list()
    try:
        ctx.alloc(4, "complex64")
    except pgas.PgasError as e:
        assert "unknown dtype" in str(e), e
    else:
        raise AssertionError("alloc of an unknown dtype succeeded")

print("check_import: ok")
sys.stdout.flush()
