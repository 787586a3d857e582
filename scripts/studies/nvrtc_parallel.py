#!/usr/bin/env python3
"""Where a collective kernel's NVRTC time can be won back (docs/jit.md), on the GPU machine:
- does NVRTC run two compiles of one process at once (threads), or of two processes?
- `-split-compile=0` (NVVM/ptxas on every core) on a reduce kernel, with and without
  `--Ofast-compile=max`;
- a reduce kernel against NVSHMEM's internal reduce header only (the point-to-point prelude plus
  `non_abi/device/coll/reduce.cuh`, calling `nvshmemi_reduce_threadgroup` as NVSHMEM's own wrapper
  does) instead of the full prelude.

Reuses nvrtc_study.py's NVRTC driver and sources. Usage: python3 scripts/studies/nvrtc_parallel.py
[same path options as nvrtc_study.py] --out DIR. Prints a table last; one JSON line per row.
"""
import importlib.util
import json
import multiprocessing
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("nvrtc_study", os.path.join(HERE, "nvrtc_study.py"))
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)

BODY_REDUCE_INTERNAL = study.BODY_REDUCE.replace(
    "nvshmemx_barrier_all_block();",
    "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_block>(NVSHMEM_TEAM_WORLD);",
).replace(
    "nvshmemx_float_sum_reduce_block(team, fdst, fsrc, pgas_min_len(fdst_len, fsrc_len));",
    "nvshmemi_reduce_threadgroup<float, RDXN_OPS_sum, nvshmemi_threadgroup_block>(team, fdst, fsrc, pgas_min_len(fdst_len, fsrc_len));",
)
FAMILY_PRELUDE = study.PRELUDE_P2P + "#include <non_abi/device/coll/barrier.cuh>\n#include <non_abi/device/coll/reduce.cuh>\n"


def args():
    import argparse
    p = argparse.ArgumentParser()
    d = study.default
    p.add_argument("--nvrtc-lib", default=d("/usr/local/cuda/lib64", os.path.join(study.DEPS, "nvidia/cu13/lib")))
    p.add_argument("--cuda-include", default=d("/usr/local/cuda/include", os.path.join(study.DEPS, "nvidia/cu13/include")))
    p.add_argument("--cccl-include", default=d("/usr/local/cuda/include/cccl", os.path.join(study.DEPS, "nvidia/cu13/include/cccl")))
    p.add_argument("--nvshmem-include", default=d(study.GPU_NVSHMEM, os.path.join(study.DEPS, "nvidia/nvshmem/include")))
    p.add_argument("--arch", default="90")
    p.add_argument("--out", default="nvrtc-parallel-out")
    p.add_argument("--skip-reduce", action="store_true")
    return p.parse_args()


A = None
NV = None
rows = []
out = None


def opts(extra=()):
    return ["-arch=sm_%s" % A.arch, "-std=c++17", "-default-device", "-D__NVSHMEM_NUMBA_SUPPORT__",
            "-I" + A.nvshmem_include, "-I" + A.cuda_include, "-I" + A.cccl_include, "--no-cache"] + list(extra)


def src(prelude_text, body, name):
    return "#define PGAS_KERNEL_NAME %s\n%s#define PGAS_RUST_FILE \"p.rs\"\n%s%s" % (
        name, prelude_text, study.SUPPORT, body)


def one(label, prelude_text, body, extra=()):
    name = "par_%d_%d" % (os.getpid(), len(rows))
    r = NV.compile(src(prelude_text, body, name), opts(extra))
    ok = r["rc"] == 0 and name.encode() in r["binary"]
    rec = {"label": label, "seconds": round(r["seconds"], 3), "ok": ok,
           "log": r["log"][-400:] if not ok else ""}
    out.write(json.dumps(rec) + "\n")
    out.flush()
    rows.append(rec)
    print("  %-60s %7.2f s %s" % (label, r["seconds"], "" if ok else "FAILED " + rec["log"][-300:]), flush=True)
    return r["seconds"]


def init_child(a):
    global A
    A = a


def child(i):
    nv = study.Nvrtc(A.nvrtc_lib)
    name = "proc_%d_%d" % (os.getpid(), i)
    t = time.perf_counter()
    r = nv.compile(src(study.PRELUDE_FULL, study.BODY_BARRIER, name), opts())
    return time.perf_counter() - t, r["rc"]


def main():
    global A, NV, out
    A = args()
    os.makedirs(A.out, exist_ok=True)
    out = open(os.path.join(A.out, "nvrtc_parallel.jsonl"), "w")
    NV = study.Nvrtc(A.nvrtc_lib)
    print("NVRTC %d.%d, %d CPUs" % (NV.version + (os.cpu_count(),)), flush=True)
    NV.compile('extern "C" __global__ void w(float *x) { x[0] = 1.0f; }', ["-arch=sm_%s" % A.arch])

    # Threads: 4 barrier kernels one after the other, then 4 at once.
    full = study.PRELUDE_FULL
    t = time.perf_counter()
    for i in range(4):
        one("barrier kernel, sequential #%d" % i, full, study.BODY_BARRIER)
    seq = time.perf_counter() - t
    threads = [threading.Thread(target=one, args=("barrier kernel, 4 threads at once #%d" % i, full, study.BODY_BARRIER))
               for i in range(4)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    par = time.perf_counter() - t
    ctx = multiprocessing.get_context("spawn")
    t = time.perf_counter()
    with ctx.Pool(4, initializer=init_child, initargs=(A,)) as pool:
        res = pool.map(child, range(4))
    procs = time.perf_counter() - t
    for label, v in (("4 barrier kernels: sequential wall", seq), ("4 barrier kernels: 4 threads wall", par),
                     ("4 barrier kernels: 4 processes wall (incl. start)", procs)):
        rows.append({"label": label, "seconds": round(v, 3), "ok": True})
        out.write(json.dumps(rows[-1]) + "\n")
    print("  process compiles: %s" % [("%.2f" % s, rc) for s, rc in res], flush=True)

    if not A.skip_reduce:
        one("reduce kernel, family prelude (p2p + barrier.cuh + reduce.cuh)", FAMILY_PRELUDE, BODY_REDUCE_INTERNAL)
        one("reduce kernel, family prelude, --Ofast-compile=max", FAMILY_PRELUDE, BODY_REDUCE_INTERNAL, ["--Ofast-compile=max"])
        one("reduce kernel, full prelude, -split-compile=0", full, study.BODY_REDUCE, ["-split-compile=0"])
        one("reduce kernel, full prelude, -split-compile=0 --Ofast-compile=max", full, study.BODY_REDUCE,
            ["-split-compile=0", "--Ofast-compile=max"])
        one("barrier kernel, family prelude (p2p + barrier.cuh)", study.PRELUDE_P2P + "#include <non_abi/device/coll/barrier.cuh>\n",
            study.BODY_BARRIER.replace("nvshmemx_barrier_all_block();",
                                       "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_block>(NVSHMEM_TEAM_WORLD);"))

    print("\n%-62s %s" % ("what", "seconds"))
    for r in rows:
        print("%-62s %7.2f %s" % (r["label"], r["seconds"], "" if r["ok"] else "FAILED"))


if __name__ == "__main__":
    main()
