"""``pgas::ops`` on torch tensors: communication fused with compute, as torch custom ops.

- ``all_gather_matmul(shard, w)``: a tensor-parallel layer's sequence all-gather and its
  column-parallel GEMM in one operation;
- ``matmul_reduce_scatter(a, w)``: the row-parallel GEMM and its reduce-scatter;
- ``allreduce_rmsnorm(x, residual, weight, eps)``: the all-reduce, residual add and RMSNorm
  between two layers;
- ``MoE(max_tokens, hidden, top_k, experts_per_pe)``: MoE dispatch and combine for decoding
  (the ops ``moe_dispatch`` / ``moe_combine`` underneath).

Collective: every PE calls them in the same order with the same shapes. Each takes ``out=``
(the results' tensors, in place of new ones).
``python/examples/tp_mlp.py`` builds a tensor-parallel transformer MLP from the first two.
"""

from ._torch_ops import (MoE, all_gather_matmul, allreduce_rmsnorm, matmul_reduce_scatter,
                         moe_combine, moe_dispatch)

__all__ = ["MoE", "all_gather_matmul", "allreduce_rmsnorm", "matmul_reduce_scatter",
           "moe_combine", "moe_dispatch"]
