"""A tensor-parallel transformer MLP block in PyTorch on pgas (sequence parallel, as Megatron-LM
lays it out), against the same block written with torch and NCCL.

Each PE holds T/P tokens of the sequence (x: T/P x H) and 1/P of each weight: W1's rows
(F/P x H: column parallel) and W2's columns (H x F/P: row parallel). The block is

    h = gelu(all_gather(x) @ W1_p.T)          pgas.ops.all_gather_matmul: one fused op
    y = reduce_scatter(h @ W2_p.T)            pgas.ops.matmul_reduce_scatter: one fused op

and y (T/P x H) is this PE's rows of gelu(X W1.T) W2.T. Every PE checks its rows against the
block computed by torch on one GPU, then times it (median of 20, CUDA events) beside the
unfused form: torch's GEMMs with NCCL's all-gather and reduce-scatter where each PE has a GPU
of its own (NCCL refuses two ranks on one GPU), else pgas.coll's.

    python3 python/examples/tp_mlp.py                               # one PE
    pgas-run -n 4 --share-gpus -- python3 python/examples/tp_mlp.py
"""

import os
import sys
import tempfile

import torch
import torch.nn.functional as F

import pgas
import pgas.coll
import pgas.ops

T, H, FF = 2048, 2048, 8192  # tokens, hidden, MLP width


def weights(seed):
    """The block's input and weights, the same on every PE: X (T x H), W1 (FF x H), W2
    (H x FF), scaled so that activations stay near 1."""
    g = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(FF, H, generator=g) / H ** 0.5).bfloat16()
    w2 = (torch.randn(H, FF, generator=g) / FF ** 0.5).bfloat16()
    x = torch.randn(T, H, generator=g).bfloat16()
    return x, w1, w2


def median_ms(fn, reps=20):
    times = []
    for _ in range(reps + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        pgas.barrier_all()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times[2:])[reps // 2]


def main():
    ctx = pgas.init()
    me, p = ctx.my_pe, ctx.n_pes
    torch.cuda.set_device(ctx.device)
    dev = torch.device("cuda", ctx.device)
    if torch.cuda.get_device_capability(dev) != (9, 0):
        print(f"PE {me}: skipped: the fused ops need sm_90a (H100, H200), ok")
        return
    x, w1, w2 = weights(1)
    rows, cols = slice(me * T // p, (me + 1) * T // p), slice(me * FF // p, (me + 1) * FF // p)
    x_p = x[rows].contiguous().to(dev)
    w1_p, w2_p = w1[cols].contiguous().to(dev), w2[:, cols].contiguous().to(dev)

    def block():
        h = F.gelu(pgas.ops.all_gather_matmul(x_p, w1_p))
        return pgas.ops.matmul_reduce_scatter(h, w2_p)

    want = (F.gelu(x.to(dev) @ w1.to(dev).T) @ w2.to(dev).T)[rows].float()
    got = block().float()
    err = ((got - want).abs() / (want.abs() + 1)).max().item()
    if err > 0.05:
        sys.exit(f"PE {me}: tp_mlp: worst relative error {err:.4f} against torch on one GPU")

    # The unfused block, with NCCL where each PE has its own GPU (pgas-run gives PE r the
    # GPU r when there are as many).
    shared = torch.cuda.device_count() < p
    if p > 1 and not shared:
        import torch.distributed as dist
        run = os.environ.get("PGAS_RUN_ID", str(os.getppid()))
        store = os.path.join(tempfile.gettempdir(), f"pgas-tp-mlp-{run}")
        dist.init_process_group("nccl", init_method=f"file://{store}", rank=me, world_size=p,
                                device_id=dev)
        baseline = "torch + NCCL"

        def unfused():
            full = torch.empty((T, H), dtype=x_p.dtype, device=dev)
            dist.all_gather_into_tensor(full, x_p)
            part = F.gelu(full @ w1_p.T) @ w2_p.T
            out = torch.empty((T // p, H), dtype=part.dtype, device=dev)
            dist.reduce_scatter_tensor(out, part)
            return out
    else:
        baseline = "torch + pgas.coll"

        def unfused():
            part = F.gelu(pgas.coll.all_gather(x_p) @ w1_p.T) @ w2_p.T
            return pgas.coll.reduce_scatter(part)

    err = ((unfused().float() - want).abs() / (want.abs() + 1)).max().item()
    if err > 0.05:
        sys.exit(f"PE {me}: tp_mlp: the unfused block is off by {err:.4f}")
    fused_ms, unfused_ms = median_ms(block), median_ms(unfused)
    print(f"PE {me}: tp_mlp {T} x {H} -> {FF} on {p} PE(s): matches torch; pgas.ops "
          f"{fused_ms:.3f} ms, {baseline} {unfused_ms:.3f} ms ({unfused_ms / fused_ms:.2f}x), ok")
    if p > 1 and not shared:
        import torch.distributed as dist
        dist.destroy_process_group()
    pgas.finalize()


if __name__ == "__main__":
    main()
