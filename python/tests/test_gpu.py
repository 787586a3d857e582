"""Every operation of the pgas module on a GPU, checked through PyTorch, on 1 or more PEs.

Run on every PE of a job, with torch and pgas installed (or the folder it was installed into
with `pip install --target` on PYTHONPATH):

    python3 -m pytest -x -q python/tests/test_gpu.py                     # one PE
    pgas-run -n 2 -- python3 -m pytest -x -q python/tests/test_gpu.py    # two PEs
    pgas-run -n 2 -- python3 python/tests/test_gpu.py                    # without pytest

Every PE runs the tests in the same order (they are collective); the last one finalizes.
Without torch or a GPU the module is skipped."""

import functools
import gc
import os
import sys
import warnings

try:
    import pytest
except ImportError:  # run as a script on a machine without pytest
    pytest = None

torch = (pytest.importorskip("torch") if pytest else __import__("torch"))
if not torch.cuda.is_available():
    if pytest:
        pytest.skip("no CUDA GPU", allow_module_level=True)
    sys.exit("test_gpu: no CUDA GPU")

import pgas  # noqa: E402

CTX = pgas.init()
ME, N = CTX.my_pe, CTX.n_pes
torch.cuda.set_device(CTX.device)
DEV = torch.device("cuda", CTX.device)
NXT, PRV = (ME + 1) % N, (ME + N - 1) % N

TORCH = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8,
}


def raises(exc, fn, *needles):
    """fn() raises exc with every needle in its message; returns the message."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        for n in needles:
            assert n in msg, f"{exc.__name__} without {n!r}: {msg}"
        return msg
    raise AssertionError(f"expected {exc.__name__}, nothing was raised")


def need(name):
    """The module `name`, or a skip (pytest) / a SKIP line (script) where it is not installed."""
    if pytest:
        return pytest.importorskip(name)
    try:
        return __import__(name)
    except ImportError:
        print(f"PE {ME}: SKIP: {name} is not installed", flush=True)
        return None


def view(t):
    return torch.from_dlpack(t)


def free(*ts):
    for t in ts:
        pgas.free_tensor(t)


def test_context():
    assert pgas.my_pe() == ME and pgas.n_pes() == N and 0 <= ME < N
    assert pgas.context().my_pe == ME and CTX.heap_size > 0 and CTX.stream != 0
    version, nvshmem = pgas.get_version()
    assert version == pgas.__version__ and nvshmem[0] >= 3
    assert CTX.put is pgas.put  # the context's methods are the module's functions
    raises(pgas.InitError, pgas.init)


def test_alloc_and_dlpack_every_dtype():
    for name, tdt in TORCH.items():
        t = pgas.alloc((3, 5), name)
        x = view(t)
        assert x.dtype == tdt and tuple(x.shape) == (3, 5) and x.device == DEV, name
        assert x.data_ptr() == t.data_ptr and bool((x == 0).all()), name
        x.copy_(torch.arange(15, device=DEV).reshape(3, 5).to(tdt))
        torch.cuda.synchronize()
        assert t.to_list() == list(range(15)), name
        t.fill(2)
        assert bool((x == 2).all()), name
        assert pgas._views(t) == 1
        del x
        assert pgas._views(t) == 0
        free(t)
    t = pgas.alloc(4, torch.uint32)
    assert t.dtype == "uint32" and t.shape == (4,)
    free(t)


def test_free_is_explicit_checked_and_final():
    t = pgas.alloc(64, "float32")
    x = view(t)
    # A live view on this PE (every PE here): refused on every PE, nothing freed.
    raises(pgas.CollectiveMismatchError, lambda: pgas.free_tensor(t), f"PE {ME} holds 1",
           "del those views")
    assert not t.freed and x.sum().item() == 0
    del x
    free(t)
    assert t.freed and "freed" in repr(t)
    for use in (t.to_list, lambda: t.fill(1), lambda: view(t), lambda: pgas.free_tensor(t),
                lambda: pgas.put(t, t, 0)):
        raises(pgas.FreedError, use, "freed")
    # Different tensors freed on different PEs: refused everywhere (with 2+ PEs).
    a, b = pgas.alloc(8), pgas.alloc(8)
    if N > 1:
        raises(pgas.CollectiveMismatchError, lambda: pgas.free_tensor(a if ME == 0 else b),
               "free different tensors", "same order")
    free(a, b)


def test_garbage_collection_does_not_free():
    t = pgas.alloc(1024, "int32")
    ptr = t.data_ptr
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del t
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) and "free_tensor" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    # A handle that goes while an exception propagates (a temporary argument of a call that
    # raised) warns without losing that exception.
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        raises(pgas.ArgumentError, lambda: pgas.put(pgas.alloc(4, "int32"), pgas.alloc(8, "int32"), 0))
    # Still allocated: a new allocation of the same size lands elsewhere.
    u = pgas.alloc(1024, "int32")
    assert u.data_ptr != ptr
    free(u)


def test_from_dlpack_imports_symmetric_views_only():
    t = pgas.alloc((4, 32), "float32")
    x = view(t)
    row = pgas.from_dlpack(x[2])
    assert row.data_ptr == t.data_ptr + 2 * 32 * 4 and row.shape == (32,)
    row.fill(-1.0)
    assert bool((x[2] == -1).all()) and bool((x[1] == 0).all())
    raises(pgas.ArgumentError, lambda: pgas.from_dlpack(torch.zeros(32, device=DEV)),
           "symmetric heap")
    raises(pgas.ArgumentError, lambda: pgas.from_dlpack(x[:, ::2]), "not contiguous")
    raises(pgas.ArgumentError, lambda: pgas.from_dlpack(torch.zeros(4)), "not on this PE's GPU")
    raises(pgas.ArgumentError, lambda: pgas.free_tensor(row), "imported")
    del row, x
    free(t)


def test_put_get_and_nbi_between_pes():
    for stream in (None, torch.cuda.current_stream(), torch.cuda.Stream()):
        src = pgas.alloc(256, "int64")
        inbox = pgas.alloc((N, 256), "int64")
        got = pgas.alloc((2, 256), "int64")
        xs, xin, xg = view(src), view(inbox), view(got)
        xs.copy_(torch.arange(256, device=DEV) + 1000 * ME)
        torch.cuda.synchronize()
        mine = pgas.from_dlpack(xin[ME])
        pgas.barrier_all()
        pgas.put(mine, src, NXT, stream=stream)
        pgas.put_nbi(pgas.from_dlpack(xin[ME]), src, NXT, stream=stream)
        pgas.barrier_all(stream=stream)
        if stream is not None:
            stream.synchronize()      # with stream=, the barrier is queued there, not waited for
        want = torch.arange(256, device=DEV) + 1000 * PRV
        assert bool((xin[PRV] == want).all()), xin[PRV, :4].tolist()
        pgas.get(pgas.from_dlpack(xg[0]), src, PRV, stream=stream)
        pgas.get_nbi(pgas.from_dlpack(xg[1]), src, PRV, stream=stream)
        pgas.quiet(stream=stream)
        if stream is not None:
            stream.synchronize()
        assert bool((xg == want).all()), xg[:, :4].tolist()
        pgas.barrier_all()
        del mine, xs, xin, xg
        gc.collect()
        free(src, inbox, got)


def stream_and_pair():
    """A new stream and two symmetric tensors of 1 Mi floats with their torch views, every PE
    past a barrier."""
    s = torch.cuda.Stream()
    t = pgas.alloc(1 << 20, "float32")
    dst = pgas.alloc(1 << 20, "float32")
    pgas.barrier_all()
    return s, t, dst, view(t), view(dst)


def test_stream_orders_torch_work_before_and_after():
    s, t, dst, x, y = stream_and_pair()
    with torch.cuda.stream(s):
        x.fill_(float(ME + 1))            # queued on s ...
        pgas.put(dst, t, NXT, stream=s)   # ... then the put, in s's order
    pgas.barrier_all(stream=s)
    with torch.cuda.stream(s):
        total = y.sum()                   # after the barrier, in s's order
    s.synchronize()
    assert total.item() == float(PRV + 1) * (1 << 20), total.item()
    del x, y
    free(t, dst)


def test_a_call_without_stream_runs_after_the_stream_calls_before_it():
    """A call with stream=s leaves pgas's stream owing a wait for s, paid when pgas's stream is
    next used: a put without stream= then reads what s wrote before it. A call that reaches
    pgas's runtime while s is captured into a CUDA graph pays a wait owed from before the
    capture without failing or joining pgas's stream to the capture."""
    s, t, dst, x, y = stream_and_pair()
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)     # the fill below lands well after the calls return
        x.fill_(float(ME + 1))
    pgas.quiet(stream=s)                  # owed
    pgas.put(dst, t, NXT)                 # pgas's stream: after s's fill
    pgas.barrier_all()
    assert bool((y == float(PRV + 1)).all()), y[:4].tolist()
    pgas.quiet(stream=s)                  # owed again, then s is captured
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        x.add_(1.0)
        # Reaches pgas's runtime handle (a host query, nothing enqueued): the owed wait is paid.
        assert pgas.TEAM_WORLD.my_pe() == ME
    pgas.fence()
    graph.replay()
    torch.cuda.synchronize()
    assert bool((x == float(ME + 2)).all()), x[:4].tolist()
    pgas.barrier_all()
    del x, y
    free(t, dst)


def test_streams_of_other_devices_are_refused():
    raises(TypeError, lambda: pgas.quiet(stream=object()), "stream= takes a CUDA stream")
    if torch.cuda.device_count() > 1:
        other = (CTX.device + 1) % torch.cuda.device_count()
        s = torch.cuda.Stream(device=other)
        raises(pgas.ArgumentError, lambda: pgas.quiet(stream=s), "another device",
               f"cuda:{CTX.device}")


def test_signals():
    data = pgas.alloc(128, "float32")
    src = pgas.alloc(128, "float32")
    sig = pgas.alloc(4, "uint64")
    view(src).fill_(float(ME))
    torch.cuda.synchronize()
    pgas.barrier_all()
    pgas.put_signal(data, src, sig, 1, pgas.SIGNAL_ADD, NXT, signal_index=2)
    pgas.signal_wait(sig, 1, pgas.CMP_GE, signal_index=2, timeout=30)
    assert pgas.signal_fetch(sig, 2) == 1
    assert bool((view(data) == float(PRV)).all())
    pgas.barrier_all()
    pgas.put_signal(data, src, sig, 7, "set", NXT, signal_index=0, nbi=True,
                    stream=torch.cuda.current_stream())
    pgas.signal_wait(sig, 7, "eq", timeout=30)
    # On a stream without a timeout, as NVSHMEM4Py: queued, then seen by the stream's next work.
    s = torch.cuda.Stream()
    pgas.signal_wait(sig, 7, "eq", stream=s)
    with torch.cuda.stream(s):
        after = view(data).sum()
    s.synchronize()
    assert after.item() == float(PRV) * 128, after.item()
    pgas.signal_op(sig, 5, "set", NXT, signal_index=3)
    pgas.quiet()
    pgas.signal_op(sig, 2, "add", NXT, signal_index=3)
    pgas.signal_wait(sig, 7, "eq", signal_index=3, timeout=30)
    assert pgas.signal_fetch(sig, 3) == 7
    pgas.barrier_all()
    raises(pgas.ArgumentError, lambda: pgas.signal_fetch(src, 0), "uint64")
    raises(pgas.ArgumentError, lambda: pgas.signal_fetch(sig, 4), "4")
    raises(pgas.ArgumentError, lambda: pgas.signal_op(sig, 1, "mul", 0), "unknown signal operator")
    raises(pgas.ArgumentError, lambda: pgas.signal_wait(sig, 1, "approx"), "unknown comparison")
    raises(pgas.ArgumentError, lambda: pgas.signal_wait(sig, 1, "eq", timeout=-1), "timeout")
    raises(pgas.ArgumentError, lambda: pgas.signal_op(sig, 1, "set", N), "PE")
    free(data, src, sig)


def test_fence_sync_and_team_barrier():
    pgas.fence()
    pgas.sync_all()
    pgas.sync_all(stream=torch.cuda.current_stream())
    pgas.barrier(pgas.TEAM_WORLD)
    pgas.barrier(pgas.TEAM_WORLD, stream=torch.cuda.current_stream())


def test_atomics():
    c = pgas.alloc(8, "int64")
    f = pgas.alloc(2, "float64")
    pgas.barrier_all()
    # Every PE adds to PE 0's counters.
    pgas.atomic_add(c, 0, ME + 1, 0)
    assert pgas.atomic_fetch_add(c, 1, 10, 0) % 10 == 0
    pgas.atomic_inc(c, 2, 0)
    assert pgas.atomic_fetch_inc(c, 3, 0) in range(N)
    pgas.barrier_all()
    if ME == 0:
        assert c.to_list()[:4] == [N * (N + 1) // 2, 10 * N, N, N], c.to_list()
    pgas.barrier_all()
    # The rest on this PE's own counters.
    pgas.atomic_set(c, 4, 0b1100, ME)
    assert pgas.atomic_fetch(c, 4, ME) == 0b1100
    pgas.atomic_and(c, 4, 0b0110, ME)
    assert pgas.atomic_fetch_or(c, 4, 0b0001, ME) == 0b0100
    pgas.atomic_or(c, 4, 0b1000, ME)
    assert pgas.atomic_fetch_xor(c, 4, 0b1111, ME) == 0b1101
    pgas.atomic_xor(c, 4, 0b0011, ME)
    assert pgas.atomic_fetch_and(c, 4, 0b0001, ME) == 0b0001
    assert pgas.atomic_swap(c, 5, 9, ME) == 0
    assert pgas.atomic_compare_swap(c, 5, 9, 11, ME) == 9
    assert pgas.atomic_compare_swap(c, 5, 9, 12, ME) == 11
    assert pgas.atomic_fetch(c, 5, ME) == 11
    pgas.atomic_set(f, 0, 2.5, NXT)
    pgas.barrier_all()
    assert pgas.atomic_fetch(f, 0, ME) == 2.5
    assert pgas.atomic_swap(f, 0, -1.0, ME) == 2.5 and f.to_list()[0] == -1.0
    raises(pgas.ArgumentError, lambda: pgas.atomic_add(f, 0, 1.0, ME), "int32, int64")
    raises(pgas.ArgumentError, lambda: pgas.atomic_fetch(c, 8, ME))
    raises(pgas.ArgumentError, lambda: pgas.atomic_fetch(c, 0, N), "PE")
    u = pgas.alloc(1, "uint32")
    raises(OverflowError, lambda: pgas.atomic_set(u, 0, -1, ME))
    pgas.barrier_all()
    free(c, f, u)


def test_collectives_every_dtype():
    for name, tdt in TORCH.items():
        src = pgas.alloc(4 * N, name)
        dst = pgas.alloc(4 * N, name)
        col = pgas.alloc(4 * N * N, name)
        xs, xd, xc = view(src), view(dst), view(col)
        xs.copy_((torch.arange(4 * N, device=DEV) % 7 + ME).to(tdt))
        torch.cuda.synchronize()
        stream = torch.cuda.current_stream() if name == "float32" else None
        pgas.broadcast(pgas.TEAM_WORLD, dst, src, N - 1, stream=stream)
        pgas.quiet()
        torch.cuda.synchronize()
        assert bool((xd == (torch.arange(4 * N, device=DEV) % 7 + N - 1).to(tdt)).all()), name
        pgas.fcollect(pgas.TEAM_WORLD, col, src)
        pgas.quiet()
        want = torch.cat([(torch.arange(4 * N, device=DEV) % 7 + p).to(tdt) for p in range(N)])
        assert bool((xc == want).all()), name
        pgas.alltoall(pgas.TEAM_WORLD, dst, src)
        pgas.quiet()
        want = torch.cat([(torch.arange(4 * ME, 4 * ME + 4, device=DEV) % 7 + p).to(tdt)
                          for p in range(N)])
        assert bool((xd == want).all()), (name, xd.tolist(), want.tolist())
        base = torch.arange(4 * N, device=DEV) % 7
        for op, expect in (("sum", base * N + N * (N - 1) // 2), ("max", base + N - 1),
                           ("min", base)):
            pgas.reduce(pgas.TEAM_WORLD, dst, src, op)
            pgas.quiet()
            assert bool((xd == expect.to(tdt)).all()), (name, op, xd.tolist())
        if not tdt.is_floating_point:
            terms = [base + p for p in range(N)]
            for op, fold in (("and", lambda a, b: a & b), ("or", lambda a, b: a | b),
                             ("xor", lambda a, b: a ^ b)):
                expect = functools.reduce(fold, terms)
                pgas.allreduce(pgas.TEAM_WORLD, dst, src, op)
                pgas.quiet()
                assert bool((xd == expect.to(tdt)).all()), (name, op, xd.tolist())
        else:
            raises(pgas.ArgumentError, lambda: pgas.reduce(pgas.TEAM_WORLD, dst, src, "xor"),
                   "reduce operator")
        if name in ("float32", "int32", "bfloat16"):
            part = pgas.alloc(4, name)
            pgas.reducescatter(pgas.TEAM_WORLD, part, src, "sum", stream=stream)
            pgas.quiet()
            whole = (base * N + N * (N - 1) // 2).to(tdt)
            assert bool((view(part) == whole[4 * ME:4 * ME + 4]).all()), (name, part.to_list())
            bad = pgas.alloc(3, name)
            raises(pgas.ArgumentError, lambda: pgas.reducescatter(pgas.TEAM_WORLD, bad, src),
                   "one block")
            free(part, bad)
        pgas.barrier_all()
        del xs, xd, xc
        free(src, dst, col)
    a, b = pgas.alloc(8, "float32"), pgas.alloc(8, "int32")
    raises(pgas.ArgumentError, lambda: pgas.reduce(pgas.TEAM_WORLD, a, b), "one dtype")
    raises(pgas.ArgumentError, lambda: pgas.reduce(pgas.TEAM_WORLD, a, a, "mean"), "unknown reduction")
    # In place is staged now (test_reduce_in_place), no longer refused.
    raises(pgas.ArgumentError, lambda: pgas.broadcast(pgas.TEAM_WORLD, a, a, N), "PE")
    c = pgas.alloc(8 * N + 1, "float32")
    raises(pgas.ArgumentError, lambda: pgas.fcollect(pgas.TEAM_WORLD, c, a))
    free(a, b, c)


def test_teams():
    w = pgas.TEAM_WORLD
    assert w.n_pes() == N and w.my_pe() == ME and pgas.team_my_pe(w) == ME
    assert pgas.team_n_pes(pgas.TEAM_NODE) == N and pgas.TEAM_SHARED.n_pes() >= 1
    assert pgas.team_translate_pe(w, N - 1, pgas.TEAM_NODE) == N - 1
    evens = pgas.team_split_strided(w, 0, 2, (N + 1) // 2)
    assert (evens is not None) == (ME % 2 == 0)
    if evens is not None:
        assert evens.my_pe() == ME // 2 and evens.n_pes() == (N + 1) // 2
        assert "num_contexts" in evens.config()
        src, dst = pgas.alloc(16, "int32"), pgas.alloc(16, "int32")
        src.fill(ME)
        pgas.barrier(evens)
        pgas.reduce(evens, dst, src, "sum")
        pgas.quiet()
        assert dst.to_list() == [sum(range(0, N, 2))] * 16
    else:
        src, dst = pgas.alloc(16, "int32"), pgas.alloc(16, "int32")
    row, col = w.split_2d(1)
    assert row.n_pes() == 1 and col.n_pes() == N
    for t in (row, col):
        t.destroy()
    if evens is not None:
        # reducescatter is NVSHMEM's, over any team: block i of the sum lands on team PE i.
        ne = evens.n_pes()
        block = 16 // ne
        xs, xd = view(src), view(dst)
        whole, part = pgas.from_dlpack(xs[:block * ne]), pgas.from_dlpack(xd[:block])
        pgas.reducescatter(evens, part, whole)
        pgas.quiet()
        assert xd[:block].tolist() == [sum(range(0, N, 2))] * block, xd.tolist()
        if ne > 1:
            raises(pgas.ArgumentError, lambda: pgas.reducescatter(evens, dst, src), "one block")
        del xs, xd, whole, part
        gc.collect()
    if evens is not None:
        pgas.team_destroy(evens)
        raises(pgas.TeamError, evens.n_pes, "destroyed")
        raises(pgas.TeamError, lambda: pgas.reduce(evens, dst, src), "destroyed")
    raises(pgas.ArgumentError, pgas.TEAM_WORLD.destroy, "predefined")
    raises(pgas.ArgumentError, lambda: w.split_strided(0, 1, N + 1), "start + stride")
    pgas.barrier_all()
    free(src, dst)


def test_peer_and_multicast_tensors():
    t = pgas.alloc((2, 64), "float32")
    p = pgas.get_peer_tensor(t, NXT)
    assert p is not None and p.pe == NXT and p.shape == (2, 64), p  # one node: NVLink/PCIe
    own = pgas.get_peer_tensor(t, ME)
    assert own.data_ptr == t.data_ptr
    pgas.barrier_all()
    view(p)[1].fill_(float(ME + 10))
    torch.cuda.synchronize()
    pgas.barrier_all()
    assert bool((view(t)[1] == float(PRV + 10)).all()) and bool((view(t)[0] == 0).all())
    raises(pgas.ArgumentError, lambda: pgas.get_peer_tensor(t, N), "PE")
    try:
        m = pgas.get_multicast_tensor(pgas.TEAM_WORLD, t)
    except pgas.UnavailableError as e:
        assert "multicast" in str(e) and ("NVSHMEM_DISABLE_NVLS" in str(e) or "NVLink SHARP" in str(e))
    else:
        assert m.pe is None and m.data_ptr != 0 and m.shape == (2, 64)
        del m
    # A peer tensor holds the memory: free_tensor refuses until it goes.
    raises(pgas.CollectiveMismatchError, lambda: pgas.free_tensor(t), "views")
    del p, own
    gc.collect()
    pgas.barrier_all()
    free(t)


def test_bad_inputs():
    a, b = pgas.alloc(16, "float32"), pgas.alloc(8, "float32")
    i = pgas.alloc(16, "int32")
    raises(pgas.ArgumentError, lambda: pgas.put(a, i, 0), "one dtype")
    raises(pgas.ArgumentError, lambda: pgas.put(a, b, 0))          # lengths
    raises(pgas.ArgumentError, lambda: pgas.get(a, a, N), "PE")
    raises(pgas.ArgumentError, lambda: pgas.alloc(0))
    raises(pgas.HeapError, lambda: pgas.alloc(1 << 60, "uint8"))
    raises(pgas.ArgumentError, lambda: a.copy_from([1.0] * 3))
    raises(TypeError, lambda: a.fill("x"))
    raises(BufferError, lambda: a.__dlpack__(copy=True), "zero-copy")
    pgas.barrier_all()
    free(a, b, i)


def test_cupy_interop():
    cupy = need("cupy")
    if cupy is None:
        return
    t = pgas.alloc(32, "float32")
    c = cupy.from_dlpack(t)
    assert c.data.ptr == t.data_ptr
    c += 3
    cupy.cuda.get_current_stream().synchronize()
    assert t.to_list() == [3.0] * 32
    back = pgas.from_dlpack(c[8:16])
    assert back.data_ptr == t.data_ptr + 32
    # A CuPy stream as `stream=` (its `.ptr`): the put to the next PE runs in its order.
    s = cupy.cuda.Stream(non_blocking=True)
    dst = pgas.alloc(32, "float32")
    pgas.barrier_all()
    with s:
        c *= 2                                   # queued on s ...
    pgas.put(dst, t, NXT, stream=s)              # ... then the put, in s's order
    pgas.barrier_all(stream=s)
    s.synchronize()
    assert dst.to_list() == [6.0] * 32
    del back, c
    gc.collect()
    free(t, dst)


def test_jax_interop():
    # JAX takes 75% of the GPU's memory when its backend starts; with PEs sharing the GPU that
    # left 78 MiB for the cases after this one (the VMM registration failed on 2 PEs).
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = need("jax")
    if jax is None:
        return
    if not any(d.platform == "gpu" for d in jax.devices()):
        if pytest:
            pytest.skip("jax has no GPU backend here")
        print(f"PE {ME}: SKIP: jax has no GPU backend here", flush=True)
        return
    t = pgas.alloc(16, "float32")
    t.fill(1.5)
    j = jax.dlpack.from_dlpack(t)
    assert float(j.sum()) == 24.0
    del j
    gc.collect()
    free(t)


def test_start_up_queries():
    # 2: initialized; 4: PEs sharing the GPU under CUDA MPS with every API (pgas-run --share-gpus).
    assert pgas.init_status() in (2, 4), pgas.init_status()
    # A unique id can be made at any time (rank 0 of a later job would hand it around).
    uid = pgas.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128


def test_team_sync_and_the_same_mype_node_team():
    pgas.sync(pgas.TEAM_WORLD)
    pgas.sync(pgas.TEAM_NODE, stream=torch.cuda.current_stream())
    torch.cuda.current_stream().synchronize()
    # One node: every PE is its node's PE number ME, alone in that team.
    assert pgas.TEAM_SAME_MYPE_NODE.n_pes() == 1 and pgas.TEAM_SAME_MYPE_NODE.my_pe() == 0


def test_flush_needs_nvshmem_3_7():
    major, minor, _ = pgas.get_version()[1]
    if (major, minor) >= (3, 7):
        pgas.flush()
        pgas.flush(stream=torch.cuda.current_stream())
    else:
        raises(pgas.UnavailableError, pgas.flush, f"NVSHMEM {major}.{minor}", "3.7")


def test_reduce_in_place():
    for dtype, op in (("float32", "sum"), ("int64", "max"), ("bfloat16", "sum")):
        t = pgas.alloc(1000, dtype)
        x = view(t)
        x.copy_(torch.arange(1000, device=DEV) % 7 + ME)
        torch.cuda.synchronize()
        pgas.reduce(pgas.TEAM_WORLD, t, t, op)
        # The reduction runs on pgas's stream, the check on torch's.
        torch.cuda.synchronize()
        base = torch.arange(1000, device=DEV) % 7
        want = base * N + N * (N - 1) // 2 if op == "sum" else base + N - 1
        assert bool((x.to(torch.float64) == want.to(torch.float64)).all()), (dtype, x[:8].tolist())
        # In place on a stream, with the staging buffer reused.
        pgas.reduce(pgas.TEAM_WORLD, t, t, op, stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        del x
        free(t)


def test_team_init_from_a_team_id():
    # PE 0 makes the id; every PE learns it through a broadcast, then all join one team, numbered
    # in reverse. Collective over every PE.
    ids = pgas.alloc(1, "uint64")
    if ME == 0:
        ids.copy_from([pgas.get_team_unique_id()])
    got = pgas.alloc(1, "uint64")
    pgas.barrier_all()
    pgas.broadcast(pgas.TEAM_WORLD, got, ids, 0)
    pgas.barrier_all()
    team = pgas.team_init((got.to_list()[0], N - 1 - ME, N))
    assert team is not None and team.my_pe() == N - 1 - ME and team.n_pes() == N
    assert team.translate_pe(0, pgas.TEAM_WORLD) == N - 1
    pgas.barrier(team)
    team.destroy()
    # Members that disagree are refused on every PE before NVSHMEM is called.
    raises(pgas.ArgumentError, lambda: pgas.team_init((7, 0, N + 1)), "team_init")
    free(ids, got)


def test_free_with_views_alive():
    t = pgas.alloc(64)
    x = view(t)
    raises(pgas.CollectiveMismatchError, lambda: pgas.free_tensor(t), "view")
    pgas.free_tensor(t, with_views=True)  # NVSHMEM4Py's rule: x must not be used now
    assert t.freed
    del x


def test_register_external_vmm_memory():
    core = need("cuda.core")
    if core is None:
        return
    vmr = getattr(core, "VirtualMemoryResource", None)
    if vmr is None:
        print(f"PE {ME}: SKIP: this cuda.core has no VirtualMemoryResource", flush=True)
        return
    free_b, total_b = torch.cuda.mem_get_info()
    print(f"PE {ME}: before the VMM allocation: {free_b >> 20} MiB free of {total_b >> 20}; "
          f"torch holds {torch.cuda.memory_reserved() >> 20} MiB", flush=True)
    buf = vmr(core.Device(CTX.device)).allocate(512 << 20)  # NVSHMEM 3.4.5's granularity
    t = pgas.register_external(buf, "float32")
    assert t.nbytes == 512 << 20 and t.dtype == "float32"
    x = view(t)
    x.fill_(float(ME))
    torch.cuda.synchronize()
    pgas.barrier_all()
    got = pgas.alloc(len(t), "float32")
    pgas.get(got, t, NXT)
    pgas.quiet()
    assert bool((view(got) == float(NXT)).all())
    del x
    pgas.barrier_all()
    pgas.free_tensor(t)  # unregisters, collectively
    free(got)
    # Memory that is not CUDA VMM is refused on every PE, with the fix.
    plain = torch.zeros(128 << 20, device=DEV)  # 512 MiB: a whole granule, not VMM memory
    raises(pgas.PgasError, lambda: pgas.register_external(plain), "VMM")


def test_context_manager_finalizes_nothing_while_the_block_raises():
    try:
        with pgas.context():
            raise KeyError("inside")
    except KeyError:
        pass
    assert pgas.my_pe() == ME  # still initialized: the raising block did not finalize


KERNELS = """
#[pgas_kernel]
fn fill_scaled(x: &mut SymTensor<f32>, a: f32, #[comptime] plus_one: bool) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = i as f32 * a;
        if plus_one {
            x[i] = x[i] + 1.0;
        }
    }
}

#[pgas_kernel]
fn ring(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut SymTensor<u64>, round: u64) {
    let peer = (my_pe() + 1) % n_pes();
    put_signal_block(dst, src, &mut sig[0], round, SignalOp::Set, peer);
    signal_wait_until(&sig[0], Cmp::Eq, round);
}
"""


def test_kernel_from_a_string():
    import time

    fill = pgas.kernel(KERNELS, "fill_scaled")
    x = pgas.alloc(1000, "float32")
    t0 = time.perf_counter()
    fill(4, 256, x, 0.5, plus_one=True)  # the first launch compiles it (NVRTC, cold or cached)
    pgas.quiet()
    print(f"PE {ME}: pgas.kernel's first launch (compile included) took "
          f"{time.perf_counter() - t0:.3f} s", flush=True)
    want = torch.arange(1000, device=DEV, dtype=torch.float32) * 0.5 + 1.0
    assert bool((view(x) == want).all())
    fill((4,), (256,), x=x, a=2.0, plus_one=False, checked=False, stream=torch.cuda.current_stream())
    torch.cuda.current_stream().synchronize()
    assert bool((view(x) == torch.arange(1000, device=DEV, dtype=torch.float32) * 2.0).all())
    # A put with signal to the next PE from the string's kernel.
    ring = pgas.kernel(KERNELS, "ring")
    src, dst, sig = pgas.alloc(256, "float32"), pgas.alloc(256, "float32"), pgas.alloc(1, "uint64")
    view(src).fill_(float(ME))
    torch.cuda.synchronize()
    pgas.barrier_all()
    ring(1, 128, dst, src, sig, 7)
    pgas.quiet()
    assert bool((view(dst) == float(PRV)).all())
    raises(pgas.ArgumentError, lambda: fill(1, 32, sig, 1.0, plus_one=True), "SymTensor<f32>", "uint64")
    pgas.barrier_all()
    free(x, src, dst, sig)


GENERIC = """
#[pgas_kernel]
fn fold<T: Elem>(x: &mut SymTensor<T>, y: &SymTensor<T>, #[comptime] op: ReduceOp) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = combine(op, x[i] as T::Acc, y[i] as T::Acc) as T;
    }
}
"""


def test_generic_kernel_from_a_string():
    # One instance a type, named `fold::<T>`; the comptime reduction by name.
    for dtype, name, op, ref in (
        ("float32", "fold::<f32>", "max", torch.maximum),
        ("int32", "fold::<i32>", "xor", torch.bitwise_xor),
        ("bfloat16", "fold::<bf16>", "sum", torch.add),
    ):
        k = pgas.kernel(GENERIC, name)
        x, y = pgas.alloc(300, dtype), pgas.alloc(300, dtype)
        a = (torch.arange(300, device=DEV) * 3 - 400).to(view(x).dtype)
        b = (500 - torch.arange(300, device=DEV) * 2).to(view(x).dtype)
        view(x).copy_(a)
        view(y).copy_(b)
        torch.cuda.synchronize()
        k(2, 256, x, y, op=op)
        pgas.quiet()
        assert bool((view(x) == ref(a, b)).all()), (name, op)
        if dtype == "float32":
            raises(pgas.ArgumentError, lambda: k(1, 32, x, y, op="mean"), "mean")
        free(x, y)


def test_comm_collectives():
    # pgas's own collectives (pgas::coll) through pgas.Comm: each algorithm by name, checked.
    comm = pgas.Comm(pgas.TEAM_WORLD)
    assert comm.n_pes() == N and comm.rank() == ME
    names = ("auto", "low_latency", "one_shot", "two_shot") if N > 1 else ("auto",)
    n = 4096
    base = torch.arange(n, device=DEV) % 7
    for dtype, op in (("float32", "sum"), ("int32", "max"), ("bfloat16", "sum")):
        want = base * N + N * (N - 1) // 2 if op == "sum" else base + N - 1
        src, dst = pgas.alloc(n, dtype), pgas.alloc(n, dtype)
        view(src).copy_(base + ME)
        torch.cuda.synchronize()
        for algorithm in names:
            view(dst).zero_()
            torch.cuda.synchronize()
            used = comm.all_reduce(dst, src, op, algorithm=algorithm)
            torch.cuda.synchronize()
            assert algorithm == "auto" or used == algorithm, (algorithm, used)
            got = view(dst).to(torch.float64)
            assert bool((got == want.to(torch.float64)).all()), (dtype, algorithm, got[:8].tolist())
        # In place, on torch's stream.
        used = comm.all_reduce(src, src, op, stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        assert bool((view(src).to(torch.float64) == want.to(torch.float64)).all()), (dtype, used)
        free(src, dst)
    # Reduce-scatter, all-gather, broadcast, all-to-all of int32 (exact), by Auto.
    m = 1000
    whole = pgas.alloc(N * m, "int32")
    part = pgas.alloc(m, "int32")
    view(whole).copy_(torch.arange(N * m, device=DEV, dtype=torch.int32) + 1000 * ME)
    torch.cuda.synchronize()
    comm.reduce_scatter(part, whole, "sum")
    torch.cuda.synchronize()
    k = torch.arange(m, device=DEV, dtype=torch.int64) + ME * m
    assert bool((view(part).to(torch.int64) == k * N + 1000 * N * (N - 1) // 2).all())
    comm.all_gather(whole, part)
    torch.cuda.synchronize()
    j = torch.arange(N * m, device=DEV, dtype=torch.int64)
    assert bool((view(whole).to(torch.int64) == j * N + 1000 * N * (N - 1) // 2).all())
    out = pgas.alloc(N * m, "int32")
    view(whole).copy_(torch.arange(N * m, device=DEV, dtype=torch.int32) + 1000 * ME)
    torch.cuda.synchronize()
    comm.broadcast(out, whole, N - 1)
    torch.cuda.synchronize()
    assert bool((view(out).to(torch.int64) == j + 1000 * (N - 1)).all())
    comm.all_to_all(out, whole)
    torch.cuda.synchronize()
    # Chunk r of `out` is chunk ME of rank r's `whole`.
    r = j // m
    assert bool((view(out).to(torch.int64) == ME * m + j % m + 1000 * r).all())
    # One element more than `part` on any number of PEs (`out` is `part`'s length on 1 PE).
    odd = pgas.alloc(m + 1, "int32")
    raises(pgas.ArgumentError, lambda: comm.all_reduce(odd, part), "length mismatch")
    raises(pgas.ArgumentError, lambda: comm.all_gather(whole, part, algorithm="sideways"),
           "unknown algorithm", "one_shot")
    raises(pgas.ArgumentError, lambda: comm.reduce_scatter(part, whole, algorithm="one_shot"),
           "Algorithm::Auto")
    comm.free()
    raises(pgas.FreedError, lambda: comm.all_gather(whole, part), "communicator")
    free(whole, part, out, odd)


def test_zz_finalize():
    t = pgas.alloc(8)
    x = view(t)
    raises(pgas.CollectiveMismatchError, pgas.finalize, "views")
    del x
    pgas.finalize()
    raises(pgas.NotInitializedError, pgas.my_pe, "pgas.init")
    raises(pgas.FreedError, t.to_list, "freed")
    raises(pgas.NotInitializedError, pgas.barrier_all)


if __name__ == "__main__":
    # Without pytest: every test in file order, on every PE.
    tests = [v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)]
    for fn in tests:
        fn()
        print(f"PE {ME}: {fn.__name__} ok", flush=True)
    print(f"test_gpu: ok ({N} PEs)", flush=True)
