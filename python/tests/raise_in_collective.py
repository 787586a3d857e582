"""A PE that raises in the middle of a collective ends the whole job: under `pgas-run -n 2`, the
last PE raises while the others wait for it in a reduction (on pgas's stream, then a host
barrier). pgas skips the collective frees and finalize on the raising PE (the others are not
finalizing with it), its process exits non-zero, and pgas-run stops the others and names it.
scripts/gpu-suite.sh checks that the job ended within 5 s of the raise, from the time printed
here (`raises at MS ms`, Unix milliseconds). A surviving PE that gets past the wait is a failure
(`FAIL`)."""

import time

import pgas

ctx = pgas.init()
me, n = ctx.my_pe, ctx.n_pes
if n < 2:
    raise SystemExit("raise_in_collective: needs 2 PEs or more (pgas-run -n 2)")
src, dst = pgas.alloc(1 << 20, "float32"), pgas.alloc(1 << 20, "float32")
pgas.barrier_all()
if me == n - 1:
    time.sleep(0.5)  # the others are waiting in the reduction by now
    print(f"raise_in_collective: PE {me} raises at {int(time.time() * 1000)} ms", flush=True)
    raise RuntimeError(f"PE {me} raises on purpose in the middle of a collective")
print(f"raise_in_collective: PE {me} waits in a reduction for PE {n - 1}", flush=True)
pgas.reduce(pgas.TEAM_WORLD, dst, src, "sum")
pgas.barrier_all()
print(f"raise_in_collective: FAIL: PE {me} got past the reduction without PE {n - 1}", flush=True)
