"""The pgas module without a GPU (CI): it imports, describes itself, and every bad input or
missing machine part raises an exception of the pgas.PgasError hierarchy (or Python's own
TypeError/OverflowError for a wrong argument type) instead of crashing or hanging.

Run: `python3 -m pytest python/tests/test_cpu.py` with pgas installed (`pip install ./python`)
or PYTHONPATH naming the folder the wheel was installed into. On a machine where pgas.init() succeeds (a
GPU) the tests that need its failure are skipped; test_gpu.py covers that machine."""

import os
import re

import pytest

import pgas

SUBCLASSES = [
    "InitError",
    "NotInitializedError",
    "ArgumentError",
    "FreedError",
    "CollectiveMismatchError",
    "HeapError",
    "TeamError",
    "UnavailableError",
    "WaitTimeoutError",
    "KernelSourceError",
]

FUNCTIONS = [
    "init", "finalize", "my_pe", "n_pes", "get_version", "alloc", "from_dlpack", "free_tensor",
    "get_peer_tensor", "get_multicast_tensor", "put", "get", "put_nbi", "get_nbi", "put_signal",
    "signal_op", "signal_wait", "signal_fetch", "quiet", "fence", "barrier_all", "barrier",
    "sync_all", "broadcast", "fcollect", "alltoall", "reduce", "allreduce", "reducescatter",
    "team_my_pe",
    "team_n_pes", "team_translate_pe", "team_split_strided", "team_split_2d", "team_destroy",
    "atomic_fetch", "atomic_set", "atomic_swap", "atomic_compare_swap", "atomic_add",
    "atomic_fetch_add", "atomic_inc", "atomic_fetch_inc", "atomic_and", "atomic_fetch_and",
    "atomic_or", "atomic_fetch_or", "atomic_xor", "atomic_fetch_xor",
    "get_unique_id", "init_status", "sync", "flush", "register_external", "team_init",
    "get_team_unique_id",
]


def test_version_matches_the_crate():
    expected = os.environ.get("PGAS_EXPECTED_VERSION")
    if expected is None:
        cargo = os.path.join(os.path.dirname(__file__), "..", "..", "Cargo.toml")
        text = open(cargo).read()
        expected = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert pgas.__version__ == expected


def test_the_api_is_there():
    missing = [f for f in FUNCTIONS if not callable(getattr(pgas, f, None))]
    assert not missing, missing
    assert "float32" in pgas.DTYPES and "bfloat16" in pgas.DTYPES and len(pgas.DTYPES) == 12
    assert pgas.Teams.TEAM_WORLD == pgas.TEAM_WORLD != pgas.TEAM_NODE
    assert repr(pgas.TEAM_WORLD) == "pgas.TEAM_WORLD"
    assert (pgas.SIGNAL_SET, pgas.SIGNAL_ADD, pgas.CMP_GE) == ("set", "add", "ge")


def test_the_package_exports_every_name_of_the_native_module():
    native = {n for n in dir(pgas._pgas) if not n.startswith("_")}
    missing = sorted(n for n in native if not hasattr(pgas, n))
    assert not missing, missing


def test_grouped_rows_pad_each_group_to_whole_tiles():
    # pgas.gemm.grouped_rows' layout (that module needs torch): the native half, no GPU.
    starts, m, group_of = pgas._pgas._grouped_rows([130, 0, 128, 1])
    assert (starts, m, group_of) == ([0, 256, 256, 384], 512, [0, 0, 2, 3])


def test_the_exceptions_form_one_hierarchy():
    assert issubclass(pgas.PgasError, RuntimeError)
    for name in SUBCLASSES:
        cls = getattr(pgas, name)
        assert issubclass(cls, pgas.PgasError) and cls is not pgas.PgasError, name


class FakeComm:
    """What pgas.init(mpi_comm=) uses of an mpi4py communicator."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def bcast(self, obj, root=0):
        return obj


def test_a_communicator_that_disagrees_is_refused(monkeypatch):
    with pytest.raises(pgas.ArgumentError, match="nranks=4, but the communicator says 2"):
        pgas.init(mpi_comm=FakeComm(0, 2), nranks=4)
    monkeypatch.setenv("PGAS_WORLD_SIZE", "4")
    with pytest.raises(pgas.ArgumentError, match="pgas-run started 4 ranks, but mpi_comm has 1"):
        pgas.init(mpi_comm=FakeComm(0, 1))
    with pytest.raises(TypeError, match="mpi4py communicator"):
        pgas.init(mpi_comm=object())


def test_init_status_before_init_is_not_initialized():
    assert pgas.init_status() == 0


def test_context_is_a_context_manager():
    assert hasattr(pgas.Context, "__enter__") and hasattr(pgas.Context, "__exit__")


def test_handles_are_made_by_pgas_only():
    for cls in (pgas.Context, pgas.Tensor, pgas.PeerTensor, pgas.Team):
        with pytest.raises(TypeError):
            cls()


def init_fails():
    """pgas.init()'s exception on this machine, or None where it succeeds (a GPU)."""
    try:
        pgas.init()
    except pgas.PgasError as e:
        return e
    pgas.finalize()
    return None


def test_init_without_a_gpu_says_what_is_missing():
    err = init_fails()
    if err is None:
        pytest.skip("pgas.init() succeeds here (a GPU machine): test_gpu.py covers it")
    assert isinstance(err, pgas.InitError), type(err)
    msg = str(err)
    assert "NVSHMEM" in msg or "driver" in msg or "GPU" in msg, msg
    assert "pgas doctor" in msg or "Fix" in msg or "pip install" in msg, msg
    # Still no crash the second time: the process keeps its state.
    with pytest.raises(pgas.InitError):
        pgas.init()


def test_calls_before_init_raise_not_initialized():
    if init_fails() is None:
        pytest.skip("a GPU machine: pgas would initialize")
    for call in (
        pgas.my_pe,
        pgas.n_pes,
        pgas.quiet,
        pgas.fence,
        pgas.barrier_all,
        pgas.finish_compiles,
        pgas.finalize,
        pgas.context,
        lambda: pgas.alloc(4),
        lambda: pgas.barrier(pgas.TEAM_WORLD),
        lambda: pgas.TEAM_WORLD.n_pes(),
        lambda: pgas.team_split_strided(pgas.TEAM_WORLD, 0, 1, 1),
        lambda: pgas.Comm(pgas.TEAM_WORLD),
    ):
        with pytest.raises(pgas.NotInitializedError, match="pgas.init"):
            call()


def test_bad_arguments_raise_before_anything_starts():
    with pytest.raises(OverflowError):
        pgas.init(heap_size=-1)
    with pytest.raises(TypeError):
        pgas.init(heap_size="big")
    with pytest.raises(pgas.ArgumentError, match="unknown initializer_method"):
        pgas.init(initializer_method="udp")
    # The unique-id start-up: all three arguments, an id of the right size, a rank in range.
    with pytest.raises(pgas.ArgumentError, match="needs uid="):
        pgas.init(initializer_method="uid")
    with pytest.raises(pgas.ArgumentError, match="uid has 5 bytes, a unique id has 128"):
        pgas.init(uid=b"12345", rank=0, nranks=1)
    with pytest.raises(pgas.ArgumentError, match="rank 2 is not below nranks 2"):
        pgas.init(uid=bytes(128), rank=2, nranks=2)
    with pytest.raises(pgas.ArgumentError, match='go with initializer_method="uid"'):
        pgas.init(initializer_method="single", rank=0)
    with pytest.raises(pgas.ArgumentError, match="unknown dtype"):
        pgas.alloc(4, "complex64")
    with pytest.raises(TypeError):
        pgas.alloc("four")
    # A tensor argument must be a pgas.Tensor.
    with pytest.raises(TypeError):
        pgas.put(1, 2, 0)
    with pytest.raises(TypeError):
        pgas.reduce(pgas.TEAM_WORLD, [1.0], [2.0], "sum")
    with pytest.raises(TypeError):
        pgas.barrier("world")
    # stream= takes stream objects, not anything.
    with pytest.raises(TypeError, match="stream= takes a CUDA stream"):
        pgas.quiet(stream="s0")
    with pytest.raises(TypeError):
        pgas.quiet(stream=-1)


class FakeStream:
    """An object that speaks the CUDA stream protocol with a broken answer."""

    def __cuda_stream__(self):
        return "not a tuple"


def test_stream_protocol_answers_are_checked():
    with pytest.raises(TypeError, match="version, handle"):
        pgas.quiet(stream=FakeStream())


class CountingStream:
    """A stream object that counts how often its handle is asked for."""

    def __init__(self, handle):
        self.handle_value, self.asked = handle, 0

    def __cuda_stream__(self):
        self.asked += 1
        return (0, self.handle_value)


def test_a_stream_object_is_asked_for_its_handle_once_in_a_row():
    # The handle is read before the call needs init, so the calls raise NotInitializedError
    # after reading it; the same object again is not asked again, another one is.
    a, b = CountingStream(0x1000), CountingStream(0x2000)
    for s in (a, a, b, a):
        with pytest.raises(pgas.NotInitializedError):
            pgas.quiet(stream=s)
    assert (a.asked, b.asked) == (2, 1)


def test_numpy_dtypes_are_understood_where_numpy_is():
    np = pytest.importorskip("numpy")
    # The name is accepted (the call then needs init): anything but "unknown dtype".
    for dt in (np.float32, np.dtype("int64"), "uint16"):
        with pytest.raises(pgas.PgasError) as e:
            pgas.alloc(4, dt)
        assert "unknown dtype" not in str(e.value), (dt, e.value)


def test_the_torch_ops_without_torch_name_what_to_install():
    """pgas.gemm, pgas.coll and pgas.ops need PyTorch; where it is missing (CI), importing one
    says so and how to get it, and pgas itself still imports."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed here: test_torch_ops.py covers the modules")
    for module in ("pgas.gemm", "pgas.coll", "pgas.ops"):
        with pytest.raises(ImportError, match=r"need torch .*pgas\[torch\]"):
            __import__(module)
