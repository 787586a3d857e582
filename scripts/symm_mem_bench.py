#!/usr/bin/env python3
"""PyTorch's symmetric-memory all-reduce (torch.ops.symm_mem one-shot and two-shot), the third
reference of issue 11 beside NCCL (benches/coll.rs runs NCCL in the same job as pgas::coll): bf16
sum, one process per GPU, NVLink multicast off, at the sizes of benches/coll.rs, eager and
captured into a CUDA graph.

Each (size, algorithm) is first checked: every rank's input holds rank + 1 in each element, so
the result must be n (n + 1) / 2 everywhere (exact in bf16 for the PE counts used). Then it is
timed on a zeroed buffer (so in-place calls stay finite): K back-to-back calls between CUDA events
(K shrinks with the size), repeated 7 times after warm-up, the median per call on rank 0. In the
graph mode the K calls are captured once and the graph is replayed. An algorithm torch refuses at
a size (alignment, a size limit) is reported as not run, with torch's reason.

Run: python3 scripts/symm_mem_bench.py [N]   (spawns N processes, one per GPU; default all GPUs)
Prints a table on rank 0 and one machine-readable line per figure:
  FIGURE {"bench":"symm_mem","name":"allreduce_bf16_1MiB_symm_two_shot_graph","value":..,"unit":"us",..}
"""
import json
import os
import sys

# NVLink multicast stays off on the test machines (see shared/notes/gpu-test-machines.md).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch
import torch.distributed as dist

import torch_ranks

# Bytes, as benches/coll.rs.
SIZES = [8, 1 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
REPS = 7


def human(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b >> shift}{unit}"
    return f"{b}B"


def calls_per_rep(b):
    """Back-to-back calls per timed repetition: many at the small end, where launch gaps matter."""
    return 64 if b <= 1 << 20 else 16 if b <= 64 << 20 else 4


def bench(rank, n):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    import torch.distributed._symmetric_memory as symm_mem

    group = dist.group.WORLD.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group)
    machine = f"{torch.cuda.get_device_name(dev)} x{n} GPU"
    ops = torch.ops.symm_mem
    algorithms = {
        # name: (call on the symmetric tensor t, whether it runs in place)
        "one_shot": lambda t, out: ops.one_shot_all_reduce_out(t, "sum", group, out),
        "two_shot": lambda t, out: ops.two_shot_all_reduce_(t, "sum", group),
    }
    want = n * (n + 1) // 2
    rows, figures, failures = [], [], []
    for size in SIZES:
        numel = max(size // 2, 1)
        t = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
        symm_mem.rendezvous(t, group)
        out = torch.empty_like(t)
        k = calls_per_rep(size)
        for name, call in algorithms.items():
            result = {"size": size, "alg": name}
            try:
                t.fill_(rank + 1)
                dist.barrier()
                call(t, out)
                got = t if name == "two_shot" else out
                torch.cuda.synchronize()
                bad = (got.float() != want).sum().item()
                if bad:
                    failures.append(f"{name} {human(size)}: {bad} of {numel} elements != {want}")
                    continue
                t.zero_()
                for mode in ("eager", "graph"):
                    if mode == "graph":
                        graph = torch.cuda.CUDAGraph()
                        side = torch.cuda.Stream()
                        side.wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(side):
                            call(t, out)  # warm-up outside capture, as torch asks
                        torch.cuda.current_stream().wait_stream(side)
                        with torch.cuda.graph(graph):
                            for _ in range(k):
                                call(t, out)
                        run = graph.replay
                    else:
                        def run():
                            for _ in range(k):
                                call(t, out)
                    ms = torch_ranks.median_ms(run, warmup=1, reps=REPS)
                    result[mode] = ms * 1e3 / k
            except Exception as e:  # torch refuses this size or algorithm: record why
                result["why"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            rows.append(result)
        del t, out
        torch.cuda.empty_cache()

    if rank == 0:
        print(f"\nsymm_mem all-reduce (torch {torch.__version__}) on {machine}: bf16 sum, "
              f"us per call, median of {REPS}")
        print(f"{'size':>8} {'algorithm':>9} {'eager us':>10} {'graph us':>10} {'busbw GB/s':>11}")
        for r in rows:
            if "eager" not in r:
                print(f"{human(r['size']):>8} {r['alg']:>9}   not run: {r.get('why', 'failed')}")
                continue
            # nccl-tests' bus bandwidth of an all-reduce: size / time * 2 (n - 1) / n.
            busbw = r["size"] / (r["graph"] * 1e-6) * 2 * (n - 1) / n / 1e9 if n > 1 else 0.0
            print(f"{human(r['size']):>8} {r['alg']:>9} {r['eager']:>10.2f} {r['graph']:>10.2f} "
                  f"{busbw:>11.1f}")
            for mode in ("eager", "graph"):
                figures.append({"bench": "symm_mem",
                                "name": f"allreduce_bf16_{human(r['size'])}_symm_{r['alg']}_{mode}",
                                "value": round(r[mode], 4), "unit": "us", "machine": machine,
                                "note": f"median of {REPS} on rank 0 of {n}, torch {torch.__version__}"})
        for f in figures:
            print("FIGURE " + json.dumps(f))
        sys.stdout.flush()
    for f in failures:
        print(f"symm_mem_bench: rank {rank}: FAIL {f}")
    dist.barrier()
    dist.destroy_process_group()
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    torch_ranks.run(bench, "symm_mem_bench")
