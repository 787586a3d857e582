#!/usr/bin/env python3
"""PyTorch async-TP (torch.ops.symm_mem fused ops) against its unfused torch baselines, at the
shapes of benches/ag_gemm.rs, for issue 10's two tensor-parallel workloads (bf16, one process per
GPU, NVLink multicast off):

  all-gather + GEMM (column-parallel): each rank holds A's rows M/P x K and B (K x N);
    fused:   torch.ops.symm_mem.fused_all_gather_matmul(a_shard, [b], gather_dim=0)
    unfused: dist.all_gather_into_tensor, then torch.matmul
  GEMM + reduce-scatter (row-parallel): each rank holds A's columns M x K/P and B's rows
    K/P x N, and gets C's rows M/P x N of the sum over ranks;
    fused:   torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", scatter_dim=0)
    unfused: torch.matmul, then dist.reduce_scatter_tensor

Each fused result is compared with the unfused one (largest difference relative to the largest
|C|, at most 2e-2, else the run fails). Times: medians of 10 after 3 warm-ups, CUDA events on
rank 0, each repetition after a barrier, in microseconds.

Run: python3 scripts/async_tp_bench.py [N]   (spawns N processes, one per GPU; default all GPUs)
 or: python3 -m torch.distributed.run --nproc-per-node N scripts/async_tp_bench.py
Prints a table on rank 0 and one machine-readable line per figure:
  FIGURE {"bench":"async_tp","name":"ag_gemm_8192x8192x8192/fused_us",...}
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

# M x N x K, as benches/ag_gemm.rs: the two production shapes first, then smaller M.
SHAPES = [(8192, 8192, 8192), (16384, 8192, 8192), (1024, 8192, 8192), (2048, 8192, 8192),
          (4096, 8192, 8192)]
MAX_REL_DIFF = 2e-2


def timed(fn):
    """Median microseconds of fn on this rank, each repetition after a barrier."""
    return torch_ranks.median_ms(fn) * 1e3


def rel_diff(got, want):
    scale = want.float().abs().max().item()
    return (got.float() - want.float()).abs().max().item() / max(scale, 1e-30)


def bench(rank, n):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    import torch.distributed._symmetric_memory as symm_mem

    group = dist.group.WORLD
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group.group_name)
    machine = f"{torch.cuda.get_device_name(dev)} x{n} GPU"
    rows, figures, failures = [], [], []

    def add(key, name, value, unit):
        figures.append({"bench": "async_tp", "name": f"{key}/{name}", "value": round(value, 4),
                        "unit": unit, "machine": machine,
                        "note": f"median of 10 on rank 0 of {n}, torch {torch.__version__}"})

    gen = torch.Generator(device=dev)
    for (m, nn, k) in SHAPES:
        if m % n or k % n:
            continue
        gen.manual_seed(1234)  # the same B on every rank; the shards differ by rank below
        b = torch.randn(k, nn, device=dev, dtype=torch.bfloat16, generator=gen)
        gen.manual_seed(rank + 1)
        # All-gather + GEMM.
        a_shard = torch.randn(m // n, k, device=dev, dtype=torch.bfloat16, generator=gen)
        gathered = torch.empty(m, k, device=dev, dtype=torch.bfloat16)

        def unfused_ag():
            dist.all_gather_into_tensor(gathered, a_shard)
            return torch.matmul(gathered, b)

        def fused_ag():
            return torch.ops.symm_mem.fused_all_gather_matmul(
                a_shard, [b], gather_dim=0, group_name=group.group_name)[1][0]

        want, got = unfused_ag(), fused_ag()
        d = rel_diff(got, want)
        if not d <= MAX_REL_DIFF:
            failures.append(f"ag_gemm {m}x{nn}x{k}: fused differs from unfused by {d:.3e}")
        t_unfused, t_fused = timed(unfused_ag), timed(fused_ag)
        key = f"ag_gemm_{m}x{nn}x{k}"
        rows.append((key, t_unfused, t_fused, d))
        add(key, "unfused_us", t_unfused, "us")
        add(key, "fused_us", t_fused, "us")
        add(key, "speedup", t_unfused / t_fused, "x")
        del a_shard, gathered, want, got

        # GEMM + reduce-scatter.
        a_cols = torch.randn(m, k // n, device=dev, dtype=torch.bfloat16, generator=gen)
        b_rows = b[rank * (k // n):(rank + 1) * (k // n)].contiguous()
        out = torch.empty(m // n, nn, device=dev, dtype=torch.bfloat16)

        def unfused_rs():
            dist.reduce_scatter_tensor(out, torch.matmul(a_cols, b_rows))
            return out

        def fused_rs():
            return torch.ops.symm_mem.fused_matmul_reduce_scatter(
                a_cols, b_rows, "sum", scatter_dim=0, group_name=group.group_name)

        want = unfused_rs().clone()
        got = fused_rs()
        d = rel_diff(got, want)
        if not d <= MAX_REL_DIFF:
            failures.append(f"gemm_rs {m}x{nn}x{k}: fused differs from unfused by {d:.3e}")
        t_unfused, t_fused = timed(unfused_rs), timed(fused_rs)
        key = f"gemm_rs_{m}x{nn}x{k}"
        rows.append((key, t_unfused, t_fused, d))
        add(key, "unfused_us", t_unfused, "us")
        add(key, "fused_us", t_fused, "us")
        add(key, "speedup", t_unfused / t_fused, "x")
        del a_cols, b_rows, out, want, got, b
        torch.cuda.empty_cache()

    if rank == 0:
        print(f"\nasync_tp (torch {torch.__version__}) on {machine}: bf16, us per call, "
              "median of 10 on rank 0")
        print(f"{'workload':<28} {'unfused us':>11} {'fused us':>10} {'speedup':>8} {'max diff':>9}")
        for key, tu, tf, d in rows:
            print(f"{key:<28} {tu:>11.1f} {tf:>10.1f} {tu / tf:>8.3f} {d:>9.2e}")
        for f in figures:
            print("FIGURE " + json.dumps(f))
        sys.stdout.flush()
    for f in failures:
        print(f"async_tp: rank {rank}: FAIL {f}")
    dist.barrier()
    dist.destroy_process_group()
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    torch_ranks.run(bench, "async_tp_bench")
