"""pgas symmetric tensors handed to PyTorch and back, zero-copy, on a GPU machine with torch.

Run on every PE: `python3 python/tests/dlpack_torch.py` (one PE), under `pgas-run -n N --`,
or `mpirun -np N -x NVSHMEM_BOOTSTRAP=MPI ... python3 ...` (docs/runtime.md, "Handing tensors
to PyTorch"), with pgas installed (scripts/build-device.sh puts its wheel in
.device/python). Checks, on each PE:

- export: torch.from_dlpack(t) has t's pointer, shape, dtype and device, for every dtype both
  sides have; legacy and versioned capsules; a write through torch is read through pgas and a
  write through pgas is read through torch (the same memory);
- import: a torch view of pgas memory (a row) comes back as a pgas Tensor at the same address;
  memory outside the symmetric heap, a strided view, a CPU tensor and copy=True are refused
  with pgas's message;
- RMA between the views: each PE writes its row through torch, puts it (through the imported
  row) into the next PE's inbox and gets the previous PE's row; after barrier_all and quiet,
  torch on each PE sees what the others put there and what it got;
- lifetime: dropping the pgas Tensor frees nothing (only free_tensor or finalize do), so a torch
  view of it stays valid; the program ends without finalize, which pgas runs at exit.
Prints `test_dlpack_torch: ok (N PEs)` last; any failure raises (non-zero exit).
"""

import sys
import time

import torch

import pgas

LEN = 256


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def refused(fn, exc, *needles):
    """Calls fn, which must raise exc with every needle in its message; returns the message."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        for n in needles:
            check(n in msg, f"the error does not mention {n!r}: {msg}")
        return msg
    raise AssertionError(f"expected {exc.__name__}, nothing was raised")


def export_dtypes(ctx, dev):
    pairs = {
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
        "float32": torch.float32,
        "float64": torch.float64,
        "int8": torch.int8,
        "int16": torch.int16,
        "int32": torch.int32,
        "int64": torch.int64,
        "uint8": torch.uint8,
    }
    for name, tdt in pairs.items():
        t = ctx.alloc((3, 5), name)
        x = torch.from_dlpack(t)
        check(x.dtype == tdt, f"{name}: torch dtype {x.dtype}")
        check(tuple(x.shape) == (3, 5) and x.stride() == (5, 1), f"{name}: {x.shape} {x.stride()}")
        check(x.device == dev, f"{name}: device {x.device}")
        check(x.data_ptr() == t.data_ptr, f"{name}: data_ptr {x.data_ptr():#x} != {t.data_ptr:#x}")
        # Written by torch, read by pgas.
        x.copy_(torch.arange(15, device=dev).reshape(3, 5).to(tdt))
        torch.cuda.synchronize()
        check(t.to_list() == list(range(15)), f"{name}: pgas read {t.to_list()}")
        # Imported back: the same memory, the same dtype.
        back = ctx.from_dlpack(x)
        check(back.data_ptr == t.data_ptr and back.dtype == name and back.shape == (3, 5), f"{name}: {back}")
        del back, x, t
    # torch.dtype objects name dtypes too.
    t = ctx.alloc(4, torch.bfloat16)
    check(t.dtype == "bfloat16" and t.shape == (4,), repr(t))
    del t


def round_trips(ctx, dev):
    t = ctx.alloc((4, LEN), "float32")
    x = torch.from_dlpack(t)
    check(x.data_ptr() == t.data_ptr, "data_ptr differs")
    check(bool((x == 0).all()), "a new tensor is not zeroed")
    # pgas writes, torch reads (fill and copy_from return when done).
    t.fill(3.5)
    check(bool((x == 3.5).all()), f"torch read {x[0, :4].tolist()} after pgas fill(3.5)")
    t.copy_from([float(i) for i in range(4 * LEN)])
    check(bool((x.flatten() == torch.arange(4 * LEN, device=dev, dtype=torch.float32)).all()),
          "torch does not see pgas copy_from")
    # torch writes, pgas reads.
    x.mul_(2.0)
    torch.cuda.synchronize()
    check(t.to_list() == [2.0 * i for i in range(4 * LEN)], "pgas does not see torch's mul_")
    # A second view, and capsules of both ABIs: one memory.
    check(torch.from_dlpack(t).data_ptr() == t.data_ptr, "a second view moved")
    legacy = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    check(legacy.data_ptr() == t.data_ptr and legacy.shape == x.shape, "legacy capsule")
    try:
        versioned = torch.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    except Exception as e:  # noqa: BLE001 (which error an older torch raises varies)
        # Older torch takes only the legacy capsule; torch.from_dlpack(t) negotiates that.
        versioned = None
        versioned_note = f"torch {torch.__version__} refuses versioned capsules ({e})"
    if versioned is not None:
        # Outside the try: a wrong pointer must fail the test, not become a note.
        check(versioned.data_ptr() == t.data_ptr, "versioned capsule")
        versioned_note = "versioned capsule ok"
    del legacy
    # Import: a row view of pgas memory is a pgas Tensor over the same bytes.
    row = ctx.from_dlpack(x[2])
    check(row.data_ptr == t.data_ptr + 2 * LEN * 4, f"row at {row.data_ptr:#x}")
    check(row.shape == (LEN,) and row.dtype == "float32", repr(row))
    row.fill(-1.0)
    check(bool((x[2] == -1.0).all()) and bool((x[1] != -1.0).all()), "row fill through the import")
    whole = ctx.from_dlpack(t)
    check(whole.data_ptr == t.data_ptr and whole.shape == (4, LEN), "importing a pgas Tensor")
    # Refusals, each with pgas's reason and fix.
    refused(lambda: ctx.from_dlpack(torch.zeros(LEN, device=dev)), pgas.PgasError,
            "symmetric heap", "copy_from_device")
    refused(lambda: ctx.from_dlpack(x[:, ::2]), pgas.PgasError, "not contiguous", "contiguous view")
    refused(lambda: ctx.from_dlpack(torch.zeros(LEN)), pgas.PgasError, "not on this PE's GPU")
    # A view of the same heap bytes as complex64: refused for its dtype alone.
    refused(lambda: ctx.from_dlpack(x.view(torch.complex64)), pgas.PgasError,
            "is not one pgas holds")
    refused(lambda: t.__dlpack__(copy=True), BufferError, "zero-copy")
    refused(lambda: ctx.alloc(4, "complex64"), pgas.PgasError, "unknown dtype")
    refused(lambda: ctx.alloc(0), pgas.PgasError)
    refused(lambda: ctx.put(row, ctx.alloc(LEN, "int32"), 0), pgas.PgasError, "one dtype")
    refused(lambda: ctx.put(row, row, ctx.n_pes), pgas.PgasError)
    refused(lambda: pgas.init(), pgas.PgasError)
    del row, whole, x, t
    return versioned_note


def rma_between_views(ctx, dev):
    me, n = ctx.my_pe, ctx.n_pes
    nxt, prv = (me + 1) % n, (me + n - 1) % n
    t = ctx.alloc((n + 1, LEN), "int64")
    inbox = ctx.alloc((n, LEN), "int64")
    x, xin = torch.from_dlpack(t), torch.from_dlpack(inbox)
    # Row `me` written through torch, put through pgas (imported rows: the same symmetric
    # offsets on every PE) into row `me` of the next PE's inbox.
    x[me] = torch.arange(LEN, device=dev) + 1000 * (me + 1)
    torch.cuda.synchronize()
    mine, slot = ctx.from_dlpack(x[me]), ctx.from_dlpack(xin[me])
    ctx.barrier_all()
    ctx.put(slot, mine, nxt)
    ctx.barrier_all()
    want = torch.arange(LEN, device=dev) + 1000 * (prv + 1)
    check(bool((xin[prv] == want).all()), f"PE {me}: inbox row {prv} put by PE {prv} reads {xin[prv, :4].tolist()}")
    # The previous PE's row `prv` fetched into our spare last row.
    spare = ctx.from_dlpack(x[n])
    ctx.get(spare, ctx.from_dlpack(x[prv]), prv)
    ctx.quiet()
    check(bool((x[n] == want).all()), f"PE {me}: get of row {prv} reads {x[n, :4].tolist()}")
    ctx.barrier_all()
    del spare, mine, slot, xin, inbox
    # Lifetime: the garbage collector frees no symmetric memory (a collective free from it could
    # hang the job), so the torch view stays valid after the pgas Tensor goes; the memory is
    # freed at finalize (here at exit).
    ptr = t.data_ptr
    del t
    x[n].fill_(7)
    torch.cuda.synchronize()
    check(x.data_ptr() == ptr and int(x[n].sum()) == 7 * LEN, "the view outlived its memory")
    # Still held: an allocation of the same size (collective, on every PE alike) lands elsewhere.
    again = ctx.alloc((n + 1, LEN), "int64")
    check(again.data_ptr != ptr, "the memory under a live torch view was handed out again")
    del again, x
    ctx.barrier_all()


def main():
    t0 = time.time()
    ctx = pgas.init()
    torch.cuda.set_device(ctx.device)
    dev = torch.device("cuda", ctx.device)
    print(f"PE {ctx.my_pe}/{ctx.n_pes}: {ctx!r}, torch {torch.__version__}, init {time.time() - t0:.1f} s",
          flush=True)
    export_dtypes(ctx, dev)
    note = round_trips(ctx, dev)
    rma_between_views(ctx, dev)
    ctx.barrier_all()
    print(f"PE {ctx.my_pe}: {note}", flush=True)
    n = ctx.n_pes
    if ctx.my_pe == 0:
        print(f"test_dlpack_torch: ok ({n} PEs, {time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
