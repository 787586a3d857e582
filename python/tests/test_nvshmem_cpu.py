"""pgas.nvshmem.core, NVSHMEM4Py's nvshmem.core over pgas, without a GPU (CI): every name of
NVSHMEM4Py's core is there, its enums carry NVSHMEM's values, arguments are checked before
anything starts, and the calls that need a context say so.

Run: `python3 -m pytest python/tests/test_nvshmem_cpu.py` with pgas installed."""

import pytest

import pgas
import pgas.nvshmem.core as nvshmem

# nvshmem.core's public names (NVSHMEM4Py 0.4: init_fini, direct, memory, cupy and torch
# interop, rma, collective, teams, amo), every one of which pgas.nvshmem.core has.
NAMES = """
init finalize get_unique_id get_version init_status my_pe n_pes team_my_pe team_n_pes
buffer free get_peer_buffer get_multicast_buffer register_external_buffer
unregister_external_buffer
array bytearray free_array array_get_buffer get_peer_array get_multicast_array
register_external_array unregister_external_array
tensor bytetensor free_tensor tensor_get_buffer get_peer_tensor get_multicast_tensor
register_external_tensor unregister_external_tensor
put get put_nbi get_nbi put_signal put_signal_nbi signal_op signal_wait signal_fetch quiet flush
reduce reducescatter alltoall fcollect broadcast barrier barrier_all sync sync_all
team_split_strided team_split_2d team_destroy team_init team_translate_pe get_team_unique_id
atomic_fetch atomic_set atomic_swap atomic_compare_swap atomic_add atomic_fetch_add atomic_inc
atomic_fetch_inc atomic_and atomic_fetch_and atomic_or atomic_fetch_or atomic_xor atomic_fetch_xor
""".split()


def test_every_name_of_nvshmem_core_is_there():
    missing = [n for n in NAMES if not callable(getattr(nvshmem, n, None))]
    assert not missing, missing
    for cls in ("SignalOp", "ComparisonType", "InitStatus", "Teams", "TeamConfig", "UniqueID"):
        assert hasattr(nvshmem, cls), cls
    assert set(NAMES) <= set(nvshmem.__all__)
    # `import pgas.nvshmem.core as nvshmem` then `nvshmem.core.put`, as the tutorial writes.
    assert nvshmem.core is nvshmem
    assert nvshmem.interop.torch.tensor is nvshmem.tensor
    assert nvshmem.interop.cupy.array is nvshmem.array


def test_enums_carry_nvshmems_values():
    assert (nvshmem.SignalOp.SIGNAL_SET, nvshmem.SignalOp.SIGNAL_ADD) == (9, 10)
    assert [int(c) for c in nvshmem.ComparisonType] == [0, 1, 2, 3, 4, 5]
    assert nvshmem.ComparisonType.CMP_GE == 5
    assert nvshmem.InitStatus.STATUS_FULL_MPG == 4
    assert nvshmem.Teams.TEAM_WORLD == 0 and nvshmem.Teams.TEAM_SAME_MYPE_NODE == 3
    assert nvshmem.init_status() == nvshmem.InitStatus.STATUS_NOT_INITIALIZED


def test_arguments_are_checked_first():
    with pytest.raises(pgas.ArgumentError, match="unknown initializer_method"):
        nvshmem.init(initializer_method="carrier pigeon")
    with pytest.raises(pgas.ArgumentError, match="needs mpi_comm"):
        nvshmem.init(initializer_method="mpi")
    with pytest.raises(pgas.ArgumentError, match="needs uid="):
        nvshmem.init(initializer_method="uid", rank=0)
    with pytest.raises(pgas.ArgumentError, match="uid has 3 bytes"):
        nvshmem.init(uid=nvshmem.UniqueID(b"abc"), rank=0, nranks=1, initializer_method="uid")
    with pytest.raises(pgas.ArgumentError, match="unknown signal operator"):
        nvshmem.signal_op(None, 1, 42, 0)
    with pytest.raises(pgas.ArgumentError, match="unknown reduction"):
        nvshmem.reduce(nvshmem.Teams.TEAM_WORLD, None, None, "median")
    with pytest.raises(pgas.ArgumentError, match="name the target PE"):
        nvshmem.put(None, None)
    with pytest.raises(TypeError, match="takes dst, src"):
        nvshmem.put(None, None, 1, 2, 3)
    with pytest.raises(pgas.ArgumentError, match="is not the start of a symmetric allocation"):
        nvshmem.free(ForeignBuffer())
    with pytest.raises(TypeError, match="expected a symmetric torch tensor"):
        nvshmem.put(object(), object(), 0)


class ForeignBuffer:
    """A Buffer that pgas.nvshmem.core did not allocate."""

    handle = 0x7F0000001000
    size = 64


def test_team_config_and_unique_id_are_plain_values():
    c = nvshmem.TeamConfig(num_contexts=2, uniqueid=7)
    assert (c.version, c.num_contexts, c.uniqueid) == (2, 2, 7)
    assert bytes(nvshmem.get_unique_id(empty=True)) == b""


def test_calls_that_need_a_context_say_so():
    try:
        pgas.init()
    except pgas.PgasError:
        pass
    else:
        pgas.finalize()
        pytest.skip("a GPU machine: test_gpu.py and the examples cover it")
    with pytest.raises(pgas.NotInitializedError):
        nvshmem.my_pe()
    with pytest.raises(pgas.NotInitializedError):
        nvshmem.buffer(64)
    with pytest.raises(pgas.NotInitializedError):
        nvshmem.barrier_all()
