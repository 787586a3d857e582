"""pgas's library on torch tensors (pgas.gemm, pgas.coll, pgas.ops: torch custom ops) on a GPU,
on 1 or more PEs, checked against torch; then out= (the eager path and the dispatcher's), under
torch.compile(fullgraph=True) and in a CUDA graph; then bad input.

    python3 python/tests/test_torch_ops.py                      # one PE
    pgas-run -n 2 --share-gpus -- python3 python/tests/test_torch_ops.py

Every PE runs the checks in the same order (the collectives are collective). Prints
"test_torch_ops: ok ..." on success; any failure raises."""

import sys
import time

import torch

if not torch.cuda.is_available():
    sys.exit("test_torch_ops: no CUDA GPU")

import pgas  # noqa: E402
import pgas.coll  # noqa: E402
import pgas.gemm  # noqa: E402
import pgas.ops  # noqa: E402
from pgas import _pgas  # noqa: E402

CTX = pgas.init()
ME, N = CTX.my_pe, CTX.n_pes
torch.cuda.set_device(CTX.device)
DEV = torch.device("cuda", CTX.device)
HOPPER = torch.cuda.get_device_capability(DEV) == (9, 0)


def data(shape, seed, dtype=torch.bfloat16):
    """The same values on every PE for the same seed: [-1, 1), rounded to dtype."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1).to(dtype).to(DEV)


def close(got, want, what, tol=2e-2):
    """The worst error relative to the result's largest magnitude (bf16 rounds each partial
    sum: an element near 0 may be off by the rounding of its larger parts)."""
    got, want = got.float(), want.float()
    err = ((got - want).abs().max() / want.abs().max().clamp(min=1)).item()
    assert err <= tol, f"{what}: worst error {err:.4f} of the largest value > {tol} on PE {ME} of {N}"


def raises(exc, fn, needle):
    try:
        fn()
    except exc as e:
        assert needle in str(e), f"{exc.__name__} without {needle!r}: {e}"
        return
    raise AssertionError(f"expected {exc.__name__} with {needle!r}, nothing was raised")


def check_gemm():
    a, bt = data((256, 512), 1), data((192, 512), 2)
    close(pgas.gemm.gemm(a, bt), a.float() @ bt.float().T, "gemm bf16")
    a8, b8 = a.to(torch.float8_e4m3fn), bt.to(torch.float8_e4m3fn)
    close(pgas.gemm.gemm(a8, b8), a8.float() @ b8.float().T, "gemm fp8")
    for m in (1, 70):  # any M: a partial 128-row tile
        close(pgas.gemm.gemm(a[:m], bt), a[:m].float() @ bt.float().T, f"gemm bf16, M = {m}")
    # The grouped GEMM: experts of 130, 0, 64 and 200 rows, each with its own weight.
    counts = [130, 0, 64, 200]
    starts, m, group_of = pgas.gemm.grouped_rows(counts)
    x, w = data((m, 256), 5), data((len(counts), 192, 256), 6)
    table = torch.tensor(group_of, dtype=torch.int32, device=DEV)
    x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    for dt, xs, ws in (("bf16", x, w), ("fp8", x8, w8)):
        y = pgas.gemm.gemm_grouped(xs, ws, table)
        for e, (st, rows) in enumerate(zip(starts, counts)):
            if rows:
                close(y[st:st + rows], xs[st:st + rows].float() @ ws[e].float().T,
                      f"gemm_grouped {dt} {e}")


def check_collectives():
    x = data((N * 4, 33), 10 + ME, torch.float32)
    every = torch.stack([data((N * 4, 33), 10 + p, torch.float32) for p in range(N)])
    close(pgas.coll.all_reduce(x), every.sum(0), "all_reduce sum", 1e-5)
    close(pgas.coll.all_reduce(x, "max"), every.max(0).values, "all_reduce max", 0)
    close(pgas.coll.all_gather(x), every.reshape(N * N * 4, 33), "all_gather", 0)
    close(pgas.coll.reduce_scatter(x), every.sum(0)[ME * 4:(ME + 1) * 4], "reduce_scatter", 1e-5)
    close(pgas.coll.broadcast(x, N - 1), every[N - 1], "broadcast", 0)
    want = torch.cat([every[p][ME * 4:(ME + 1) * 4] for p in range(N)])
    close(pgas.coll.all_to_all(x), want, "all_to_all", 0)
    # All-to-all-v: PE p sends q + p + 1 rows to PE q, each row filled with 100 p + q.
    send = [q + ME + 1 for q in range(N)]
    rows = torch.cat([torch.full((send[q], 3), 100.0 * ME + q, device=DEV) for q in range(N)])
    recv = [ME + p + 1 for p in range(N)]
    want = torch.cat([torch.full((recv[p], 3), 100.0 * p + ME, device=DEV) for p in range(N)])
    close(pgas.coll.all_to_all_v(rows, send, recv), want, "all_to_all_v", 0)
    i = torch.full((5,), ME + 1, dtype=torch.int64, device=DEV)
    assert pgas.coll.all_reduce(i).tolist() == [N * (N + 1) // 2] * 5, "all_reduce int64"


def check_fused():
    mp, n, k = 128, 256, 512
    shards = [data((mp, k), 20 + p) for p in range(N)]
    w = data((n, k), 30)
    close(pgas.ops.all_gather_matmul(shards[ME], w), torch.cat(shards).float() @ w.float().T,
          "all_gather_matmul")
    m = 128 * N
    parts = [(data((m, k), 40 + p), data((n, k), 50 + p)) for p in range(N)]
    total = sum(a.float() @ b.float().T for a, b in parts)
    close(pgas.ops.matmul_reduce_scatter(*parts[ME]), total[ME * 128:(ME + 1) * 128],
          "matmul_reduce_scatter")
    xs = [data((8, 1024), 60 + p) for p in range(N)]
    res, weight = data((8, 1024), 70), data((1024,), 71)
    normed, h = pgas.ops.allreduce_rmsnorm(xs[ME], res, weight, 1e-6)
    hw = (sum(x.float() for x in xs) + res.float()).bfloat16().float()
    want = hw * torch.rsqrt(hw.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    close(h, hw, "allreduce_rmsnorm residual")
    close(normed, want, "allreduce_rmsnorm out")


def moe_inputs(pe, tokens, hidden, top_k, experts, seed):
    """PE ``pe``'s tokens, expert ids (distinct per token, some slots -1) and weights."""
    g = torch.Generator(device="cpu").manual_seed(seed * 1000 + pe)
    idx = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    idx[torch.rand((tokens, top_k), generator=g) < 0.1] = -1
    w = torch.rand((tokens, top_k), generator=g)
    return data((tokens, hidden), seed * 1000 + pe), idx.int().to(DEV), w.to(DEV)


def check_moe():
    """pgas.ops.MoE: every received row against the senders' routing, then the combine of
    experts that scale their rows by their global id + 1; then the same step replayed in a CUDA
    graph on new tokens."""
    m, h, el = 32, 256, 3
    k = min(4, N * el)  # distinct experts a token
    moe = pgas.ops.MoE(max_tokens=m, hidden=h, top_k=k, experts_per_pe=el)
    scale = (torch.arange(el, device=DEV) + ME * el + 1).float()[:, None, None]

    def experts(recv_x):
        return (recv_x.float() * scale).bfloat16()

    def want_out(x, idx, w):
        rows = x.float()[:, None, :] * (idx.float() + 1)[:, :, None]
        rows = rows.bfloat16().float() * torch.where(idx >= 0, w, 0)[:, :, None]
        return rows.sum(1)

    for seed, tokens in ((1, 20), (2, m)):
        ins = [moe_inputs(p, tokens, h, k, N * el, seed) for p in range(N)]
        x, idx, w = ins[ME]
        recv_x, recv_src, counts = moe.dispatch(x, idx, w)
        torch.cuda.synchronize()
        for le in range(el):
            for p in range(N):
                px, pidx, _ = ins[p]
                sent = (pidx == ME * el + le).nonzero().tolist()
                got = counts[le, p].item()
                assert got == len(sent), f"MoE: {got} rows from PE {p} for expert {le}, " \
                                         f"{len(sent)} sent"
                at = p * m
                pairs = sorted(recv_src[le, at:at + got].tolist())
                assert pairs == sorted(t * k + j for t, j in sent), f"MoE: pairs from PE {p}"
                for r in range(got):
                    t = recv_src[le, at + r].item() // k
                    assert torch.equal(recv_x[le, at + r], px[t]), f"MoE: row {r} from PE {p}"
        out = moe.combine(experts(recv_x), idx)
        close(out, want_out(x, idx, w), f"MoE combine ({tokens} tokens)")
    # A decode step in a CUDA graph: the buffers and the routing stay; new tokens each replay.
    x, idx, w = moe_inputs(ME, m, h, k, N * el, 3)
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    torch.cuda.synchronize()
    pgas.barrier_all()
    with torch.cuda.graph(graph, stream=s, capture_error_mode="thread_local"):
        recv_x, _, _ = moe.dispatch(x, idx, w)
        y = moe.combine(experts(recv_x), idx)
    for seed in (4, 5):
        x.copy_(data((m, h), seed * 1000 + ME))
        graph.replay()
        torch.cuda.synchronize()
        close(y, want_out(x, idx, w), f"MoE graph replay {seed}")
    raises(pgas.ArgumentError, lambda: moe.dispatch(x, idx.long(), w), "it takes torch.int32")
    raises(pgas.ArgumentError, lambda: moe.combine(x, idx), "3 dimensions")


def check_out():
    """out=: the results written into tensors the caller holds, on the eager path (which skips
    the dispatcher) and on the dispatcher's (the op itself, an input that requires grad,
    torch.compile); a wrong out refused."""
    a, bt = data((256, 512), 1), data((192, 512), 2)
    want = a.float() @ bt.float().T
    c = torch.empty((256, 192), dtype=torch.bfloat16, device=DEV)
    assert pgas.gemm.gemm(a, bt, out=c) is c, "gemm out= returns out"
    close(c, want, "gemm out=")
    close(torch.ops.pgas.gemm(a, bt), want, "torch.ops.pgas.gemm (the dispatcher)")
    c.zero_()
    assert pgas.gemm.gemm(a, bt.clone().requires_grad_(), out=c) is c
    close(c, want, "gemm out= through the dispatcher (an input that requires grad)")
    c.zero_()
    compiled = torch.compile(lambda a, bt, c: pgas.gemm.gemm(a, bt, out=c), fullgraph=True,
                             backend="aot_eager")
    compiled(a, bt, c)
    close(c, want, "gemm out= under torch.compile(fullgraph=True)")
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm(a, bt, out=c[:, :191]),
           "the result is a contiguous torch.bfloat16 tensor of shape (256, 192)")
    raises(TypeError, lambda: pgas.ops.moe_dispatch(a, out=c), "takes no out=")
    # The GEMM's native path (one call checks and launches) takes these and declines the
    # rest, which the Python checks then explain. c requires grad since the call through the
    # dispatcher above wrote a result that requires grad into it; a call writing into it
    # then takes the dispatcher (below), so the native path's checks write into a copy.
    assert c.requires_grad and not _pgas._gemm_into(a, bt, c)
    c = c.detach()
    a8, b8 = a.to(torch.float8_e4m3fn), bt.to(torch.float8_e4m3fn)
    assert _pgas._gemm_into(a8, b8, c), "the native path declined an FP8 GEMM it takes"
    close(c, a8.float() @ b8.float().T, "gemm fp8 out= (the native path)")
    assert _pgas._gemm_into(a, bt, c), "the native path declined a bf16 GEMM it takes"
    close(c, want, "gemm out= (the native path)")
    for bad in (c[:, :191], c.float(), c[:128], "c"):
        assert not _pgas._gemm_into(a, bt, bad), "the native path took a wrong out"
    for x, y in ((a, b8), (a.cpu(), bt), (a[:, :500], bt[:, :500]), (a.T, bt)):
        assert not _pgas._gemm_into(x, y, c), "the native path took wrong operands"
    # What may skip the dispatcher: not an input that requires grad while grad is on, nor
    # anything under a dispatch mode.
    w = bt.clone().requires_grad_()
    assert not _pgas._untraced((a, w)) and not _pgas._gemm_into(a, w, c)
    with torch.no_grad():
        assert _pgas._untraced((a, w, 3, "x")), "no grad: a call on w may skip the dispatcher"
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        assert not _pgas._untraced((a,)), "a dispatch mode is active: the dispatcher must run"
    x = data((N * 4, 33), 10 + ME, torch.float32)
    total = sum(data((N * 4, 33), 10 + p, torch.float32) for p in range(N))
    y = torch.empty_like(x)
    assert pgas.coll.all_reduce(x, out=y) is y, "all_reduce out= returns out"
    close(y, total, "all_reduce out=", 1e-5)
    pgas.coll.all_reduce(x, out=x)
    close(x, total, "all_reduce in place (out=x)", 1e-5)
    xs = [data((8, 1024), 60 + p) for p in range(N)]
    res, weight = data((8, 1024), 70), data((1024,), 71)
    want_normed, want_h = pgas.ops.allreduce_rmsnorm(xs[ME], res, weight, 1e-6)
    pair = (torch.empty_like(res), torch.empty_like(res))
    got = pgas.ops.allreduce_rmsnorm(xs[ME], res, weight, 1e-6, out=pair)
    assert got[0] is pair[0] and got[1] is pair[1], "allreduce_rmsnorm out= returns out"
    close(pair[0], want_normed, "allreduce_rmsnorm out= (normed)")
    close(pair[1], want_h, "allreduce_rmsnorm out= (h)")


def check_compile():
    """No graph break: fullgraph=True fails on one; aot_eager traces through the fake
    implementations and runs the real ops."""
    def layer(x, w):
        return pgas.coll.all_reduce(pgas.gemm.gemm(x, w))

    x, w = data((128, 256), 80), data((128, 256), 81)
    eager = layer(x, w)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")(x, w)
    close(compiled, eager, "torch.compile(fullgraph=True) of gemm + all_reduce", 0)


def check_graph():
    """gemm, all_reduce and allreduce_rmsnorm captured in a CUDA graph (after a warm-up that
    makes the staging) and replayed on new inputs: the graph must read x anew each replay."""
    x, w = data((128, 256), 90), data((128, 256), 91)
    res, weight = data((128, 128), 94), data((128,), 95)

    def step():
        y = pgas.coll.all_reduce(pgas.gemm.gemm(x, w))
        return y, pgas.ops.allreduce_rmsnorm(y, res, weight, 1e-6)[1]

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    pgas.barrier_all()
    graph = torch.cuda.CUDAGraph()
    # Thread-local capture, as torch.compile's CUDA graphs (mode="reduce-overhead") capture.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        y, h = step()
    for seed in (92, 93):
        x.copy_(data((128, 256), seed))
        graph.replay()
        torch.cuda.synchronize()
        want = (x.float() @ w.float().T).bfloat16().float() * N
        close(y, want, f"graph replay {seed}: gemm + all_reduce")
        close(h, (want * N).bfloat16().float() + res.float(),
              f"graph replay {seed}: allreduce_rmsnorm's residual", 3e-2)


def check_bad_input():
    cpu = torch.zeros((128, 64), dtype=torch.bfloat16)
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm(cpu, cpu), "pass a CUDA tensor")
    a, b = data((128, 64), 1), data((64, 128), 2)
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm(a, b), "bt holds B transposed")
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm(a, a.float()), "it takes torch.bfloat16")
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm(data((128, 100), 3), data((64, 100), 3)),
           "K = 100 is not a positive multiple of 64")
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm(a.T, a), "contiguous")
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm_grouped(
        data((256, 64), 7), data((2, 64, 64), 8), torch.zeros(1, dtype=torch.int32, device=DEV)),
        "one group each")
    raises(pgas.ArgumentError, lambda: pgas.gemm.gemm_grouped(
        data((128, 64), 7).to(torch.float8_e4m3fn), data((2, 64, 64), 8).to(torch.float8_e4m3fn),
        torch.zeros(1, dtype=torch.int32, device=DEV)), "K of 128")
    if N > 1:
        raises(pgas.ArgumentError, lambda: pgas.coll.reduce_scatter(data((N + 1, 4), 4)),
               "not a multiple of the")
    raises(pgas.ArgumentError, lambda: pgas.coll.all_reduce(data((4,), 5), "mean"), "one of sum")
    raises(pgas.ArgumentError, lambda: pgas.coll.broadcast(data((4,), 5), N), "is not a PE")
    raises(pgas.ArgumentError, lambda: pgas.coll.all_to_all_v(
        data((4 * N, 2), 6), [4] * N, [4] * (N + 1)), "one row count a PE")
    if N > 1:
        # Counts the peers disagree on (PE p sends p + 1 rows to each, expects 1 from each).
        mine = [ME + 1] * N
        raises(pgas.PgasError, lambda: pgas.coll.all_to_all_v(
            data((N * (ME + 1), 2), 7), mine, [1] * N), "")


def main():
    start = time.time()
    done = []
    checks = [check_collectives]  # the GEMMs need sm_90a
    if HOPPER:
        checks = [check_gemm, check_collectives, check_fused, check_moe, check_out,
                  check_compile, check_graph, check_bad_input]
    for check in checks:
        check()
        torch.cuda.synchronize()
        pgas.barrier_all()
        done.append(check.__name__[len("check_"):])
    pgas.finalize()
    print(f"test_torch_ops: ok on PE {ME} of {N}: {', '.join(done)} "
          f"({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
