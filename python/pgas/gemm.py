"""``pgas::gemm`` on torch tensors: the Hopper GEMM (sm_90a) at cuBLAS's speed, bf16 and FP8,
as the torch custom op ``torch.ops.pgas.gemm`` (``torch.compile`` and CUDA graphs take it).

    import pgas, pgas.gemm, torch
    pgas.init()
    c = pgas.gemm.gemm(a, w)        # a @ w.T: a (M x K), w (N x K), bf16 or float8_e4m3fn
    pgas.gemm.gemm(a, w, out=c)     # the same into c (no allocation)

and the grouped GEMM of a mixture of experts, every expert in one launch
(``torch.ops.pgas.gemm_grouped``):

    starts, m, group_of = pgas.gemm.grouped_rows(counts)   # each expert's rows, padded
    c = pgas.gemm.gemm_grouped(x, w, torch.tensor(group_of, dtype=torch.int32, device="cuda"))
"""

from ._torch_ops import gemm, gemm_grouped, grouped_rows

__all__ = ["gemm", "gemm_grouped", "grouped_rows"]
