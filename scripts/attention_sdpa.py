#!/usr/bin/env python3
"""torch's scaled_dot_product_attention on the shapes of benches/attention.rs (issue 46's table),
bf16 forward, causal and not, with the cuDNN and the flash backends: median of 20 timed runs
after 3 (CUDA events), TFLOP/s counted as FlashAttention does (4 d a visible (query, key) pair a
head; causal: s (s + 1) / 2 pairs). Prints one FIGURE line per shape and backend, in the format
of the Rust benchmarks. Run in the same job as `.device/bin/attention` to compare side by side."""
import json
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

SHAPES = [
    (16, 16, 16, 1024, 128),
    (4, 16, 16, 4096, 128),
    (1, 16, 16, 16384, 128),
    (4, 32, 32, 4096, 64),
    (4, 8, 8, 4096, 256),
    (4, 32, 8, 4096, 128),
    (1, 32, 8, 32768, 128),
]


def timed(fn):
    for _ in range(3):
        fn()
    ms = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def main():
    machine = torch.cuda.get_device_name() + " x1"
    for batch, hq, hkv, seq, d in SHAPES:
        q = torch.randn(batch, hq, seq, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(batch, hkv, seq, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(batch, hkv, seq, d, device="cuda", dtype=torch.bfloat16)
        for causal in (False, True):
            pairs = seq * (seq + 1) / 2 if causal else seq * seq
            flops = 4 * pairs * d * hq * batch
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                try:
                    with sdpa_kernel([backend]):
                        ms = timed(lambda: F.scaled_dot_product_attention(
                            q, k, v, is_causal=causal, enable_gqa=hq != hkv))
                    value = flops / (ms * 1e-3) / 1e12
                    note = f"median {ms:.3f} ms of 20"
                except RuntimeError as e:
                    value, note = None, f"unavailable: {str(e).splitlines()[0][:120]}"
                fig = {"bench": "attention_sdpa", "name": f"{batch}x{hq}({hkv})x{seq}x{d} {'causal' if causal else 'full'} {name}",
                       "value": value, "unit": "TFLOP/s", "machine": machine, "note": note}
                print("FIGURE " + json.dumps(fig), flush=True)


if __name__ == "__main__":
    main()
