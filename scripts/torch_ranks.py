"""One process per GPU for the torch reference benchmarks (nccl_bench.py, async_tp_bench.py,
symm_mem_bench.py, cp_attention_sdpa.py), and their timer (`median_ms`): under `python3 -m torch.distributed.run`, which sets RANK, each process runs
the benchmark directly; run plainly (`python3 scripts/X.py [N]`), N processes are spawned here
with a rendezvous on a free local port."""
import os
import socket
import statistics
import sys

import torch


def _spawned(rank, n, port, bench):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    bench(rank, n)


def run(bench, name):
    """Runs bench(rank, n) on every rank; N is argv[1], else every GPU."""
    if "RANK" in os.environ:  # started by torch.distributed.run
        bench(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else torch.cuda.device_count()
    if n < 1:
        print(f"{name}: skipped: no GPU")
        return
    with socket.socket() as s:  # a free local port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_spawned, args=(n, port, bench), nprocs=n, join=True)


def median_ms(fn, warmup=3, reps=10):
    """Median milliseconds of fn on this rank (CUDA events), each repetition after a barrier of
    every rank (torch.distributed must be initialized), after `warmup` untimed calls."""
    import torch.distributed as dist
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        dist.barrier()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
