#!/usr/bin/env python3
"""torch's scaled_dot_product_attention on the shapes benches/attention.rs timed, bf16 forward,
causal and not, with the cuDNN and the flash backends: median of 20 timed runs after 3 (CUDA
events), TFLOP/s counted as FlashAttention does (4 d a visible (query, key) pair a head; causal:
s (s + 1) / 2 pairs). The shapes come from that benchmark's figures (FILE: its FIGURE lines, as
scripts/gpu-suite.sh's attention mode saves them), so the two lists cannot drift apart. Prints
one FIGURE line per shape and backend, in the format of the Rust benchmarks.

Usage: attention_sdpa.py FILE"""
import json
import re
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

# A figure name of benches/attention.rs: "BATCHxHEADS(KV_HEADS)xSEQxDIM full|causal".
NAME = re.compile(r"^(\d+)x(\d+)\((\d+)\)x(\d+)x(\d+) (full|causal)$")


def shapes(path):
    """(batch, heads, kv heads, sequence, head dim) of every figure of the pgas benchmark, in order."""
    out = []
    for line in open(path):
        # A FIGURE line, or its JSON alone (scripts/gpu-suite.sh's figures.jsonl).
        text = line.split("FIGURE ", 1)[-1].strip()
        if not text.startswith("{"):
            continue
        fig = json.loads(text)
        m = NAME.match(fig["name"]) if fig.get("bench") == "attention" else None
        shape = tuple(int(x) for x in m.groups()[:5]) if m else None
        if shape and shape not in out:
            out.append(shape)
    return out


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
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[-1])
    machine = torch.cuda.get_device_name() + " x1"
    for batch, hq, hkv, seq, d in shapes(sys.argv[1]):
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
