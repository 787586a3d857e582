"""Numba-CUDA kernels that communicate through pgas.device.numba, on a GPU machine with
numba-cuda and torch.

Run on every PE: `python3 python/tests/numba_device.py` (one PE) or under `pgas-run -n N --`,
with pgas installed (the wheel from scripts/build-device.sh). Each PE, in one Numba kernel of
one block on symmetric tensors (pgas.alloc, handed to Numba through torch):

- puts its row into the next PE's inbox with a block-wide put_signal (signal ADD) and waits
  for the previous PE's signal; p() a scalar to the next PE; g() the next PE's first element;
  get_warp the next PE's row;
- adds 1 to PE 0's counter with atomic_fetch_add, then a barrier_all_block, then reads it
  back with atomic_fetch (every PE must see n);
- team queries and a block-wide sync(TEAM_WORLD) (a thread-level sync is one thread's call).
Checks every value on the host, a second launch (the module stays readied), and prints the
first launch's time (Numba's compile, pgas's library and the link). Prints `numba_device: ok
(N PEs)` last; any failure raises.
"""

import time

import torch
from numba import cuda

import pgas
from pgas.device import numba as dev

LEN = 128


@cuda.jit
def ring(inbox, row, sig, scalar, counter, fetched, got, out):
    t = cuda.threadIdx.x
    me = dev.my_pe()
    n = dev.n_pes()
    peer = (me + 1) % n
    dev.put_signal_block(inbox, row, sig, 1, dev.SIGNAL_ADD, peer)
    if t == 0:
        dev.p(scalar, 100.0 + me, peer)
        out[0] = dev.g(row, peer)
        dev.atomic_fetch_add(counter, 1, 0)
        dev.quiet()
        out[1] = dev.signal_wait_until(sig, dev.CMP_GE, 1)
    if t < 32:
        dev.get_warp(got, row, peer)
    cuda.syncthreads()
    dev.barrier_all_block()
    if t == 0:
        fetched[0] = dev.atomic_fetch(counter, 0)
        out[2] = dev.team_my_pe(dev.TEAM_WORLD)
        out[3] = dev.team_n_pes(dev.TEAM_WORLD)
    dev.sync_block(dev.TEAM_WORLD)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    ctx = pgas.init()
    me, n = ctx.my_pe, ctx.n_pes
    cuda.select_device(ctx.device)
    tensors = [
        pgas.alloc((LEN,), "float32"),  # inbox
        pgas.alloc((LEN,), "float32"),  # row
        pgas.alloc((1,), "uint64"),  # sig
        pgas.alloc((1,), "float32"),  # scalar
        pgas.alloc((1,), "int32"),  # counter
    ]
    inbox, row, sig, scalar, counter = (torch.from_dlpack(t) for t in tensors)
    row.copy_(torch.arange(LEN, dtype=torch.float32, device=row.device) + 1000.0 * me)
    fetched = torch.zeros(1, dtype=torch.int32, device=row.device)
    got = torch.zeros(LEN, dtype=torch.float32, device=row.device)
    out = torch.zeros(4, dtype=torch.float64, device=row.device)
    torch.cuda.synchronize()
    pgas.barrier_all()
    prev, nxt = (me - 1) % n, (me + 1) % n
    for launch in range(2):
        t0 = time.perf_counter()
        ring[1, 128](inbox, row, sig, scalar, counter, fetched, got, out)
        cuda.synchronize()
        took = time.perf_counter() - t0
        pgas.barrier_all()
        torch.cuda.synchronize()
        want = torch.arange(LEN, dtype=torch.float32, device=row.device) + 1000.0 * prev
        check(torch.equal(inbox, want), f"launch {launch}: the inbox is not PE {prev}'s row")
        check(sig.item() == launch + 1, f"launch {launch}: signal {sig.item()}, not {launch + 1}")
        check(scalar.item() == 100.0 + prev, f"launch {launch}: p() gave {scalar.item()}")
        check(out[0].item() == 1000.0 * nxt, f"launch {launch}: g() gave {out[0].item()}")
        want_got = torch.arange(LEN, dtype=torch.float32, device=row.device) + 1000.0 * nxt
        check(torch.equal(got, want_got), f"launch {launch}: get_warp did not fetch PE {nxt}'s row")
        check(fetched.item() == n * (launch + 1), f"launch {launch}: the counter read {fetched.item()}")
        check(out[2].item() == me and out[3].item() == n, f"launch {launch}: team queries {out[2:]}")
        if launch == 0:
            print(f"numba_device[pe {me}]: first launch (Numba compile, pgas library, link) {took:.2f} s")
        pgas.barrier_all()
    del inbox, row, sig, scalar, counter
    for t in tensors:
        pgas.free_tensor(t)
    pgas.finalize()
    print(f"numba_device: ok ({n} PEs)")


if __name__ == "__main__":
    main()
