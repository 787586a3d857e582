#!/usr/bin/env python3
"""The baseline of benches/cp_attention.rs (context-parallel attention, issue 46): each rank holds
T tokens of one sequence (contiguous slices), 32 query and 8 key heads of 128, bf16; NCCL's
all-gather of K and V, then torch's scaled_dot_product_attention on the cuDNN backend (and on the
flash backend) for this rank's queries against the keys up to its slice's end (causal, aligned to the bottom right) or
all of them. Median of 10 after 3, CUDA events, a barrier before each, in ms. One process a GPU:
NCCL refuses two ranks on one GPU, so this runs only where each rank has a GPU of its own.

Run: python3 scripts/cp_attention_sdpa.py [N]   (spawns N processes; default every GPU)
Prints one machine-readable line per figure, named as the Rust bench's:
  FIGURE {"bench":"cp_attention_sdpa","name":"4096x2 causal nccl_cudnn_ms",...}
A backend that refuses the shape (the bottom-right causal mask, grouped-query heads) gives a
figure of null with the reason in its note.
"""
import json
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

import torch_ranks

TOKENS = (4096, 16384)  # as benches/cp_attention.rs
HEADS_Q, HEADS_KV, DIM = 32, 8, 128


def bench(rank, n):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    dev = torch.device("cuda", rank)
    machine = f"{torch.cuda.get_device_name(dev)} x{n}"
    for t in TOKENS:
        for causal in (False, True):
            g = torch.Generator(device=dev).manual_seed(rank)
            q = torch.randn(1, HEADS_Q, t, DIM, device=dev, generator=g).bfloat16()
            k = torch.randn(t, HEADS_KV, DIM, device=dev, generator=g).bfloat16()
            v = torch.randn(t, HEADS_KV, DIM, device=dev, generator=g).bfloat16()
            gk = torch.empty(n * t, HEADS_KV, DIM, device=dev, dtype=torch.bfloat16)
            gv = torch.empty_like(gk)
            end = (rank + 1) * t if causal else n * t
            mask = causal_lower_right(t, end) if causal else None

            def step(backend):
                dist.all_gather_into_tensor(gk, k)
                dist.all_gather_into_tensor(gv, v)
                # [tokens][heads][d] -> [1][heads][tokens][d].
                kk = gk[:end].permute(1, 0, 2).unsqueeze(0)
                vv = gv[:end].permute(1, 0, 2).unsqueeze(0)
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask,
                                                          enable_gqa=True)

            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("flash", SDPBackend.FLASH_ATTENTION)):
                try:
                    value, note = torch_ranks.median_ms(lambda: step(backend)), f"NCCL all-gather of K, V + SDPA ({name})"
                except RuntimeError as e:  # a backend that does not take this mask or GQA
                    value, note = None, f"unavailable: {str(e).splitlines()[0][:120]}"
                if rank == 0:
                    mask_name = "causal" if causal else "full"
                    print("FIGURE " + json.dumps({
                        "bench": "cp_attention_sdpa", "name": f"{t}x{n} {mask_name} nccl_{name}_ms",
                        "value": None if value is None else round(value, 4), "unit": "ms",
                        "machine": machine, "note": note}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch_ranks.run(bench, "cp_attention_sdpa")
