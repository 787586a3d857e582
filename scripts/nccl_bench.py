#!/usr/bin/env python3
"""NCCL through torch.distributed, the reference point for pgas's device collectives.

Figures (medians over repetitions after warm-up, timed with CUDA events; bus bandwidth as
nccl-tests defines it, https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
  all-reduce 8 B: latency in us (torch's host overhead included);
  all-reduce 1 GiB: busbw = size / time * 2(n-1)/n;
  all-gather and reduce-scatter 1 GiB (the full buffer): busbw = size / time * (n-1)/n;
  all-to-all 1 GiB: time in ms and busbw = size / time * (n-1)/n.

Run: python3 scripts/nccl_bench.py [N]   (spawns N processes, one per GPU; default all GPUs)
 or: python3 -m torch.distributed.run --nproc-per-node N scripts/nccl_bench.py
Prints a table on rank 0 and one machine-readable line per figure:
  FIGURE {"bench":"nccl",...}
"""
import json
import os
import statistics
import sys

# NVLink multicast stays off on the test machines (see shared/notes/gpu-test-machines.md).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch
import torch.distributed as dist

import torch_ranks

GIB = 1 << 30


def timed(fn, warmup, reps, inner=1):
    """Median milliseconds of `inner` back-to-back calls of fn, per call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times), min(times), max(times)


def bench(rank, n):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    machine = f"{torch.cuda.get_device_name(dev)} x{n} GPU"
    rows = []

    def add(name, value, unit, note):
        rows.append({"bench": "nccl", "name": name, "value": round(value, 4), "unit": unit,
                     "machine": machine, "note": note})

    small = torch.ones(2, dtype=torch.float32, device=dev)
    med, lo, hi = timed(lambda: dist.all_reduce(small), warmup=50, reps=20, inner=100)
    add("all_reduce_8B", med * 1e3, "us", f"100 calls per timing, median of 20 (min {lo*1e3:.1f})")

    elems = GIB // 4
    big = torch.full((elems,), float(rank + 1), dtype=torch.float32, device=dev)
    med, lo, hi = timed(lambda: dist.all_reduce(big), warmup=3, reps=10)
    # The sum grows with every call; check it once on fresh data instead.
    check = torch.full((1024,), float(rank + 1), device=dev)
    dist.all_reduce(check)
    want = n * (n + 1) / 2
    if not torch.all(check == want):
        raise SystemExit(f"all_reduce gave {check[0].item()}, expected {want}")
    factor_ar = 2 * (n - 1) / n
    add("all_reduce_1GiB_busbw", GIB / (med * 1e-3) / 1e9 * factor_ar, "GB/s", f"median {med:.3f} ms of 10")

    factor = (n - 1) / n
    out = torch.empty(elems, dtype=torch.float32, device=dev)
    part = torch.full((elems // n,), float(rank), dtype=torch.float32, device=dev)
    med, _, _ = timed(lambda: dist.all_gather_into_tensor(out, part), warmup=3, reps=10)
    add("all_gather_1GiB_busbw", GIB / (med * 1e-3) / 1e9 * factor, "GB/s", f"median {med:.3f} ms of 10")

    med, _, _ = timed(lambda: dist.reduce_scatter_tensor(part, big), warmup=3, reps=10)
    add("reduce_scatter_1GiB_busbw", GIB / (med * 1e-3) / 1e9 * factor, "GB/s", f"median {med:.3f} ms of 10")

    med, _, _ = timed(lambda: dist.all_to_all_single(out, big), warmup=3, reps=10)
    add("all_to_all_1GiB_time", med, "ms", "median of 10")
    add("all_to_all_1GiB_busbw", GIB / (med * 1e-3) / 1e9 * factor, "GB/s", f"median {med:.3f} ms of 10")

    if rank == 0:
        print(f"\nnccl (torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}) on {machine}")
        for r in rows:
            print(f"{r['name']:<30} {r['value']:>10.3f} {r['unit']:<5} {r['note']}")
        for r in rows:
            print("FIGURE " + json.dumps(r))
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch_ranks.run(bench, "nccl_bench")
