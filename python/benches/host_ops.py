"""NVSHMEM4Py's host operations timed through one program, on pgas (pgas.nvshmem.core) or on
NVSHMEM4Py (nvshmem.core): the same code, only the import differs (--lib). Each figure is the
median of REPS calls of host call + stream synchronize, in microseconds, after WARMUP calls
(the ordering calls also without the synchronize: "call only").
One JSON line a figure (`{"lib":..,"op":..,"us":..,"pes":..}`); run each library in its own
process (both load NVSHMEM) in one job, and compare with compare.py:

    python3 python/benches/host_ops.py --lib pgas
    python3 python/benches/host_ops.py --lib nvshmem4py      # where NVSHMEM4Py is installed

Under MPI (`mpirun -np 2 ...`) the PEs start from MPI.COMM_WORLD; alone, from one PE."""

import argparse
import json
import statistics
import time

REPS = 300
WARMUP = 30


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=("pgas", "nvshmem4py"), required=True)
    ap.add_argument("--reps", type=int, default=REPS)
    args = ap.parse_args()
    if args.lib == "pgas":
        import pgas.nvshmem.core as nvshmem
    else:
        import nvshmem.core as nvshmem
    import cupy as cp
    from cuda.core import Device

    try:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
    except ImportError:
        comm = None
    rank = comm.Get_rank() if comm else 0
    dev = Device(rank % max(1, cp.cuda.runtime.getDeviceCount()))
    dev.set_current()
    stream = dev.create_stream()
    if comm is not None:
        nvshmem.init(device=dev, mpi_comm=comm, initializer_method="mpi")
    else:
        uid = nvshmem.get_unique_id()
        nvshmem.init(device=dev, uid=uid, rank=0, nranks=1, initializer_method="uid")
    me, n = nvshmem.my_pe(), nvshmem.n_pes()
    nxt, prv = (me + 1) % n, (me + n - 1) % n
    world = nvshmem.Teams.TEAM_WORLD

    src = nvshmem.array((1024,), dtype="float32")   # 4 KiB
    dst = nvshmem.array((1024,), dtype="float32")
    part = nvshmem.array((256,), dtype="float32")    # 1 KiB a PE
    whole = nvshmem.array((256 * n,), dtype="float32")
    counter = nvshmem.array((1,), dtype="int64")
    sig = nvshmem.array((1,), dtype="uint64")
    sig_buf = nvshmem.array_get_buffer(sig)[0]
    cp.cuda.runtime.deviceSynchronize()
    nvshmem.barrier_all(stream=stream)
    stream.sync()

    def timed(op):
        times = []
        for i in range(WARMUP + args.reps):
            t = time.perf_counter()
            op()
            stream.sync()
            if i >= WARMUP:
                times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)

    def call_only(op):
        """The host call alone (its stream synchronized after, outside the timing): where a
        synchronizing figure's time goes, the call or the GPU's work behind it."""
        times = []
        for i in range(WARMUP + args.reps):
            t = time.perf_counter()
            op()
            dt = time.perf_counter() - t
            stream.sync()
            if i >= WARMUP:
                times.append(dt * 1e6)
        return statistics.median(times)

    figures = {}
    figures["put 4 KiB"] = timed(lambda: nvshmem.put(dst, src, remote_pe=nxt, stream=stream))
    figures["get 4 KiB"] = timed(lambda: nvshmem.get(dst, src, remote_pe=prv, stream=stream))
    figures["reduce 4 KiB"] = timed(lambda: nvshmem.reduce(world, dst, src, "sum", stream=stream))
    figures["broadcast 4 KiB"] = timed(lambda: nvshmem.broadcast(world, dst, src, 0, stream=stream))
    figures["reducescatter 1 KiB a PE"] = timed(
        lambda: nvshmem.reducescatter(world, part, whole, "sum", stream=stream))
    figures["quiet"] = timed(lambda: nvshmem.quiet(stream=stream))
    figures["barrier_all"] = timed(lambda: nvshmem.barrier_all(stream=stream))
    figures["barrier(team)"] = timed(lambda: nvshmem.barrier(world, stream=stream))
    figures["quiet, call only"] = call_only(lambda: nvshmem.quiet(stream=stream))
    figures["barrier_all, call only"] = call_only(lambda: nvshmem.barrier_all(stream=stream))
    figures["barrier(team), call only"] = call_only(lambda: nvshmem.barrier(world, stream=stream))
    figures["stream sync alone"] = timed(lambda: None)
    # Where a barrier's host time goes: NVSHMEM's own call, reached through ctypes in this
    # process (the library either module loaded), alone and followed by an event record on the
    # same stream (what pgas adds to order its own stream after a stream= call). The same two
    # figures in both processes say whether a difference is the module's or NVSHMEM's.
    raw = _raw_calls(stream)
    if raw is not None:
        barrier_raw, record = raw
        figures["barrier_all, NVSHMEM's call alone (ctypes)"] = call_only(barrier_raw)
        figures["barrier_all + event record (ctypes)"] = call_only(
            lambda: (barrier_raw(), record()))
    # Timed, then checked: every PE added 1 to the next PE's counter WARMUP + reps times, so
    # each counter holds that many (NVSHMEM 3.4.5's host atomics print "not implemented" and
    # return 0 without adding: a figure that is not counted as a speed).
    try:
        us = timed(lambda: nvshmem.atomic_fetch_add(counter, 1, remote_pe=nxt))
        nvshmem.barrier_all(stream=stream)
        stream.sync()
        got, want = int(counter[0]), WARMUP + args.reps
        if got == want:
            figures["atomic_fetch_add"] = us
        else:
            print(json.dumps({"lib": args.lib, "op": "atomic_fetch_add", "pes": n,
                              "wrong": f"the counter holds {got}, not {want}", "us_wrong": us}))
    except Exception as e:  # noqa: BLE001 (reported, not hidden)
        print(json.dumps({"lib": args.lib, "op": "atomic_fetch_add", "error": str(e)[:200]}))

    rounds = [0]

    def signal_round():
        rounds[0] += 1
        nvshmem.put_signal(dst, src, sig_buf, rounds[0], nvshmem.SignalOp.SIGNAL_SET,
                           remote_pe=nxt, stream=stream)
        nvshmem.signal_wait(sig_buf, rounds[0], nvshmem.ComparisonType.CMP_GE, stream=stream)

    nvshmem.barrier_all(stream=stream)
    stream.sync()
    figures["put_signal + signal_wait 4 KiB"] = timed(signal_round)

    def alloc_free():
        a = nvshmem.array((1024,), dtype="float32")
        nvshmem.free_array(a)

    figures["alloc + free 4 KiB"] = timed(alloc_free)

    for op, us in figures.items():
        if me == 0:
            print(json.dumps({"lib": args.lib, "op": op, "us": round(us, 2), "pes": n}), flush=True)
    nvshmem.barrier_all(stream=stream)
    stream.sync()
    for a in (src, dst, part, whole, counter, sig):
        nvshmem.free_array(a)
    nvshmem.finalize()


def loaded(name, *stream_functions):
    """The library ``name`` this process already loaded, through ctypes (OSError where it is
    not loaded under that name), with each of ``stream_functions`` declared as taking one
    stream handle (NVSHMEM's ``*_on_stream`` calls)."""
    import ctypes
    import os

    lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    for f in stream_functions:
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    return lib


def _raw_calls(stream):
    """``nvshmemx_barrier_all_on_stream(stream)`` and ``cuEventRecord(event, stream)`` as
    ctypes calls into the NVSHMEM host library and the driver this process already loaded;
    None where either is not loaded under its usual name."""
    import ctypes

    try:
        nv = loaded("libnvshmem_host.so.3", "nvshmemx_barrier_all_on_stream")
        cu = loaded("libcuda.so.1")
    except OSError as e:
        print(json.dumps({"op": "raw calls", "error": str(e)[:200]}))
        return None
    handle = ctypes.c_void_p(int(stream.handle))
    event = ctypes.c_void_p()
    if cu.cuEventCreate(ctypes.byref(event), 2) != 0:  # CU_EVENT_DISABLE_TIMING
        return None
    return (lambda: nv.nvshmemx_barrier_all_on_stream(handle),
            lambda: cu.cuEventRecord(event, handle))


if __name__ == "__main__":
    main()
