"""pgas.device.numba without a GPU (CI): Numba-CUDA kernels that call NVSHMEM's device API
compile to PTX (Numba's NVVM), that PTX links with the pgas NVSHMEM library's into a CUBIN
(nvJitLink, as Numba links at a kernel's first launch), and misuse is a typing error that
names the function and what it takes. Needs numba-cuda, NVVM, NVRTC and nvJitLink
(scripts/test.sh installs them into the test venv)."""

import re

import pytest
from cuda.core import Linker, LinkerOptions, ObjectCode
from numba import cuda, types
import numba.core.errors
import numba.cuda.core.errors

import pgas
from pgas.device import numba as dev

ARCH = (9, 0)
# Numba raises its core's TypingError around the one the intrinsic raised.
TypingError = (numba.core.errors.TypingError, numba.cuda.core.errors.TypingError)
F32 = types.float32[:]
I32 = types.int32[:]
U64 = types.uint64[:]


def every_call(dst, src, sig, ints, out):
    """One call of each family the seeds' device API lists."""
    me = dev.my_pe()
    peer = (me + 1) % dev.n_pes()
    dev.p(dst, 1.5, peer)
    out[0] = dev.g(src, peer)
    dev.put(dst, src, peer)
    dev.get(dst, src, peer)
    dev.put_nbi(dst, src, peer)
    dev.get_nbi(dst, src, peer)
    dev.put_warp(dst, src, peer)
    dev.get_nbi_warp(dst, src, peer)
    dev.put_nbi_block(dst, src, peer)
    dev.get_block(dst, src, peer)
    dev.put_signal(dst, src, sig, 1, dev.SIGNAL_SET, peer)
    dev.put_signal_nbi_block(dst, src, sig, 1, dev.SIGNAL_ADD, peer)
    dev.signal_op(sig, 2, dev.SIGNAL_SET, peer)
    out[1] = dev.signal_wait_until(sig, dev.CMP_GE, 1)
    out[2] = dev.signal_fetch(sig)
    dev.quiet()
    dev.fence()
    out[3] = dev.atomic_fetch_add(ints, 1, peer)
    dev.atomic_add(ints, 2, peer)
    out[4] = dev.atomic_compare_swap(ints, 0, 5, peer)
    out[5] = dev.atomic_fetch(ints, peer)
    dev.atomic_set(ints, 7, peer)
    dev.wait_until(ints, dev.CMP_NE, 0)
    dev.barrier_all()
    dev.barrier_all_block()
    dev.sync_all_warp()
    dev.barrier(dev.TEAM_WORLD)
    dev.sync(dev.TEAM_NODE)
    dev.sync_block(dev.TEAM_WORLD)
    out[6] = dev.team_my_pe(dev.TEAM_WORLD) + dev.team_n_pes(dev.TEAM_WORLD)


EVERY_CALL = (F32, F32, U64, I32, types.float64[:])


def test_every_call_compiles_and_links():
    ptx, _ = cuda.compile_ptx(every_call, EVERY_CALL, cc=ARCH)
    declared = set(re.findall(r"\.extern \.func\s+(?:\([^)]*\)\s*)?(pgas_nv_\w+)", ptx))
    for name in [
        "pgas_nv_p_f32",
        "pgas_nv_g_f32",
        "pgas_nv_put_nbi_block_f32",
        "pgas_nv_get_nbi_warp_f32",
        "pgas_nv_put_signal_nbi_block_f32",
        "pgas_nv_signal_wait_until",
        "pgas_nv_atomic_compare_swap_i32",
        "pgas_nv_barrier_all_block",
        "pgas_nv_team_sync_block",
        "pgas_nv_team_n_pes",
    ]:
        assert name in declared, f"{name} is not called ({sorted(declared)})"
    lib = pgas._pgas._device_library_ptx(sorted(declared), ARCH)
    assert "nvshmemi_device_state_d" in lib
    linker = Linker(
        ObjectCode.from_ptx(ptx.encode()),
        ObjectCode.from_ptx(lib.encode()),
        options=LinkerOptions(arch=f"sm_{ARCH[0]}{ARCH[1]}"),
    )
    cubin = linker.link("cubin").code
    assert bytes(cubin[:4]) == b"\x7fELF"


def test_the_library_is_what_kernels_called():
    def uses(x, y):
        dev.put_warp(x, y, 1)
        dev.barrier_all_warp()

    compile_one(uses, (types.int16[:], types.int16[:]))
    assert {"pgas_nv_put_warp_i16", "pgas_nv_barrier_all_warp"} <= dev._LIBRARY.used
    with pytest.raises(pgas.PgasError, match="pgas_nv_no_such_row"):
        pgas._pgas._device_library_ptx(["pgas_nv_no_such_row"], ARCH)


def test_names_are_nvshmem4pys():
    for name in ["put_block", "get_warp", "put_signal_nbi_warp", "sync", "sync_all_block",
                 "atomic_fetch_xor", "team_translate_pe", "test", "has_peer"]:
        assert name in dev.__all__, name
    assert "team_sync" not in dev.__all__ and "peer" not in dev.__all__


def compile_one(fn, sig):
    return cuda.compile_ptx(fn, sig, cc=ARCH)


def test_mixed_element_types_are_a_typing_error():
    def bad(dst, src):
        dev.put(dst, src, 0)

    with pytest.raises(TypingError, match=r"pgas\.device\.numba\.put: argument 2 must be an array of float32"):
        compile_one(bad, (F32, I32))


def test_a_number_for_an_array_is_a_typing_error():
    def bad(dst):
        dev.put(dst, 3, 0)

    with pytest.raises(TypingError, match=r"pgas\.device\.numba\.put: argument 2 must be an array"):
        compile_one(bad, (F32,))


def test_an_element_type_without_the_row_is_a_typing_error():
    def bad(x):
        dev.atomic_fetch_add(x, 1.0, 0)

    with pytest.raises(TypingError, match=r"atomic_fetch_add: no form for float32 arrays; it takes"):
        compile_one(bad, (F32,))
