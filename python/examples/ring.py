"""The ring of docs/python.md: each PE puts its row to the next PE, then the PEs sum what they
received. Run: `pgas-run -n 2 -- python3 python/examples/ring.py` (or one PE without pgas-run),
with pgas installed (its wheel: scripts/build-wheel.sh)."""

import torch

import pgas

pgas.init()                                      # pgas-run, mpirun, srun or one PE
torch.cuda.set_device(pgas.context().device)     # this PE's GPU
stream = torch.cuda.current_stream()
me, n = pgas.my_pe(), pgas.n_pes()

src, dst, total = (pgas.alloc(1024, torch.float32) for _ in range(3))
torch.from_dlpack(src).fill_(me)                 # torch writes symmetric memory, on `stream`
pgas.put(dst, src, (me + 1) % n, stream=stream)  # ordered after the fill, in `stream`
pgas.barrier(pgas.TEAM_WORLD, stream=stream)     # every put has landed
pgas.reduce(pgas.TEAM_WORLD, total, dst, "sum", stream=stream)
stream.synchronize()
got = torch.from_dlpack(total)[0].item()
assert got == n * (n - 1) / 2, got
print(f"PE {me}: sum {got}")

for t in (src, dst, total):
    pgas.free_tensor(t)                          # collective, in the same order on every PE
pgas.finalize()
