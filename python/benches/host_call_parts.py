"""Where the host time of a stream= ordering call goes, on pgas or on NVSHMEM4Py (--lib): the
call as NVSHMEM4Py's API makes it (a cuda.core Stream), and, on pgas, the native function given
that Stream and given its raw handle (an int), beside NVSHMEM's own function called through
ctypes in the same process. Each figure is the median, over ROUNDS rounds that take the forms
in turn (so a drift of the machine falls on every form alike), of the median of REPS calls, host
call only (the stream synchronized after each, untimed), in microseconds; one JSON line each.

    python3 python/benches/host_call_parts.py --lib pgas
    python3 python/benches/host_call_parts.py --lib nvshmem4py
"""

import argparse
import ctypes
import json
import statistics
import time

from host_ops import loaded  # beside this file

REPS, ROUNDS, WARMUP = 200, 15, 50


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=("pgas", "nvshmem4py"), required=True)
    args = ap.parse_args()
    if args.lib == "pgas":
        import pgas.nvshmem.core as nvshmem
    else:
        import nvshmem.core as nvshmem
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    nvshmem.init(device=dev, uid=nvshmem.get_unique_id(), rank=0, nranks=1,
                 initializer_method="uid")
    nv = loaded("libnvshmem_host.so.3", "nvshmemx_barrier_all_on_stream",
                "nvshmemx_quiet_on_stream")
    raw = int(stream.handle)
    handle = ctypes.c_void_p(raw)
    forms = {
        "barrier_all: NVSHMEM by ctypes": lambda: nv.nvshmemx_barrier_all_on_stream(handle),
        "barrier_all: the API, a Stream": lambda: nvshmem.barrier_all(stream=stream),
        "quiet: NVSHMEM by ctypes": lambda: nv.nvshmemx_quiet_on_stream(handle),
        "quiet: the API, a Stream": lambda: nvshmem.quiet(stream=stream),
    }
    if args.lib == "pgas":
        from pgas import _pgas

        forms["barrier_all: native, a Stream"] = lambda: _pgas.barrier_all(stream=stream)
        forms["barrier_all: native, an int"] = lambda: _pgas.barrier_all(stream=raw)
        forms["quiet: native, an int"] = lambda: _pgas.quiet(stream=raw)
        forms["a native call that does nothing"] = _pgas.n_pes

    def median_us(op):
        times = []
        for _ in range(REPS):
            t = time.perf_counter()
            op()
            dt = time.perf_counter() - t
            stream.sync()
            times.append(dt * 1e6)
        return statistics.median(times)

    for op in forms.values():
        for _ in range(WARMUP):
            op()
        stream.sync()
    rounds = {name: [] for name in forms}
    for _ in range(ROUNDS):
        for name, op in forms.items():
            rounds[name].append(median_us(op))
    for name, values in rounds.items():
        print(json.dumps({"lib": args.lib, "form": name,
                          "us": round(statistics.median(values), 3),
                          "spread": [round(min(values), 2), round(max(values), 2)]}))
    nvshmem.finalize()


if __name__ == "__main__":
    main()
