"""What the Python layer adds to pgas's library calls: the host time of a call, enqueue only
(torch's stream synchronized after each, untimed), median of REPS after WARMUP, in microseconds:

- ``pgas.gemm.gemm`` at 256^3 bf16 (sm_90a): the call (eager: past the dispatcher), the
  same with ``out=`` (no allocation: what the Rust call does), the op through the dispatcher
  (``torch.ops.pgas.gemm``) and the native function they call;
- ``pgas.coll.all_reduce`` of 8 bytes, the same ways, and ``pgas.Comm.all_reduce`` on
  symmetric tensors (no staging), on pgas's stream and on torch's;
- the parts of the GEMM's call (the native call on pgas's own stream, a native call that does
  nothing, ``torch.empty``, and the Python layer's steps: the eager test, the operands'
  checks, the ``out=`` check, taking torch's stream), which say where the time goes;
- the dispatcher's floors: the same allocation as an ATen op (C++ kernel) through
  ``torch.ops``, and as an op with a Python kernel.

``benches/host_ops.rs`` prints the Rust calls' figures (``gemm_256_enqueue``,
``all_reduce_8B_enqueue``); scripts/gpu-suite.sh (mode torch) runs both and reports the
difference. One ``FIGURE {...}`` line a figure, as the Rust benchmarks print them.

    python3 python/benches/torch_ops.py
"""

import json
import statistics
import time

import torch

import pgas
import pgas.coll
import pgas.gemm
from pgas import _pgas, _torch_ops

REPS, WARMUP = 2000, 50


def enqueue_us(op):
    times = []
    for i in range(WARMUP + REPS):
        t = time.perf_counter()
        op()
        elapsed = (time.perf_counter() - t) * 1e6
        torch.cuda.current_stream().synchronize()
        if i >= WARMUP:
            times.append(elapsed)
    return statistics.median(times)


def figure(name, value, note, machine):
    print("FIGURE " + json.dumps({"bench": "torch_ops", "name": name, "value": round(value, 4),
                                  "unit": "us", "machine": machine, "note": note}))


def main():
    ctx = pgas.init()
    torch.cuda.set_device(ctx.device)
    dev = torch.device("cuda", ctx.device)
    machine = f"{torch.cuda.get_device_name(dev)} x{ctx.n_pes} PE"
    stream = torch.cuda.current_stream().cuda_stream
    x = torch.ones(2, device=dev)
    out = torch.empty_like(x)
    figs = [
        ("all_reduce_8B_torch_op", lambda: pgas.coll.all_reduce(x),
         "pgas.coll.all_reduce of 8 bytes (with the output's allocation and the staging "
         "copies)"),
        ("all_reduce_8B_torch_op_out", lambda: pgas.coll.all_reduce(x, out=out),
         "the same into out= (the staging copies, no allocation)"),
        ("all_reduce_8B_dispatcher", lambda: torch.ops.pgas.all_reduce.default(x),
         "the op through torch's dispatcher (as a traced program calls it)"),
        ("all_reduce_8B_native", lambda: _pgas._collective(
            "all_reduce", out.data_ptr(), x.data_ptr(), 2, 2, "float32", "sum", 0, stream=stream),
         "the native call the op makes (staging copies included)"),
    ]
    # pgas.Comm on symmetric tensors: the Python form of the Rust call all_reduce_8B_enqueue
    # times (no staging: the tensors are symmetric).
    comm = pgas.Comm(pgas.TEAM_WORLD)
    sd, ss = pgas.alloc(2, "float32"), pgas.alloc(2, "float32")
    figs += [
        ("all_reduce_8B_comm", lambda: comm.all_reduce(sd, ss),
         "pgas.Comm.all_reduce of 8 bytes on symmetric tensors, on pgas's stream"),
        ("all_reduce_8B_comm_stream", lambda: comm.all_reduce(sd, ss, stream=stream),
         "the same on torch's current stream (stream=)"),
    ]
    if torch.cuda.get_device_capability(dev) == (9, 0):
        a = torch.ones((256, 256), dtype=torch.bfloat16, device=dev)
        c = torch.empty_like(a)
        figs += [
            ("gemm_256_torch_op", lambda: pgas.gemm.gemm(a, a),
             "pgas.gemm.gemm at 256^3 (with the output's allocation)"),
            ("gemm_256_torch_op_out", lambda: pgas.gemm.gemm(a, a, out=c),
             "the same into out= (no allocation, as the Rust call)"),
            ("gemm_256_dispatcher", lambda: torch.ops.pgas.gemm.default(a, a),
             "the op through torch's dispatcher (as a traced program calls it)"),
            ("gemm_256_native", lambda: _pgas._gemm(
                c.data_ptr(), a.data_ptr(), a.data_ptr(), 256, 256, 256, False, stream=stream),
             "the native call the op makes"),
            ("gemm_256_native_pgas_stream", lambda: _pgas._gemm(
                c.data_ptr(), a.data_ptr(), a.data_ptr(), 256, 256, 256, False),
             "the native call on pgas's own stream (no stream= check or ordering)"),
            ("py_eager_test", lambda: _torch_ops._eager((a, a), {}),
             "the Python layer: whether the call may skip the dispatcher"),
            ("py_gemm_checks", lambda: _torch_ops._gemm_shape(a, a),
             "the Python layer: the operands' checks (two tensors)"),
            ("py_out_check", lambda: _torch_ops._new("gemm", c, (256, 256), torch.bfloat16, a),
             "the Python layer: the out= tensor's check"),
            ("py_stream", lambda: _torch_ops._stream(a),
             "the Python layer: torch's current stream's handle"),
        ]
    # The floors an op on the dispatcher stands on: an ATen op whose kernel is C++ and
    # allocates its output, called as torch.ops calls it, and an op of this process whose
    # kernel is Python (as pgas's are) doing only the same allocation.
    noop = torch.library.Library("pgas_bench", "DEF")
    noop.define("alloc(Tensor a) -> Tensor")
    noop.impl("alloc", lambda t: t.new_empty((256, 256), dtype=torch.bfloat16), "CUDA")
    figs += [
        ("native_floor", _pgas.n_pes, "a native call that does nothing (pgas.n_pes())"),
        ("torch_empty", lambda: torch.empty((256, 256), dtype=torch.bfloat16, device=dev),
         "torch.empty of the GEMM's output"),
        ("aten_op_empty", lambda: torch.ops.aten.empty.memory_format(
            [256, 256], dtype=torch.bfloat16, device=dev),
         "the same allocation as an ATen op through torch.ops (a C++ kernel on the "
         "dispatcher)"),
        ("python_kernel_op_empty", lambda: torch.ops.pgas_bench.alloc.default(x),
         "an op whose Python kernel makes only that allocation (torch.library.Library)"),
    ]
    for name, op, note in figs:
        pgas.barrier_all()
        value = enqueue_us(op)
        if ctx.my_pe == 0:
            figure(name, value, note, machine)
    pgas.barrier_all()
    comm.free()
    pgas.free_tensor(sd)
    pgas.free_tensor(ss)
    pgas.finalize()


if __name__ == "__main__":
    main()
