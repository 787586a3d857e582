"""``pgas::gemm`` on torch tensors: the Hopper GEMM (sm_90a) at cuBLAS's speed, bf16 and FP8,
as the torch custom op ``torch.ops.pgas.gemm`` (``torch.compile`` and CUDA graphs take it).

    import pgas, pgas.gemm, torch
    pgas.init()
    c = pgas.gemm.gemm(a, w)        # a @ w.T: a (M x K), w (N x K), bf16 or float8_e4m3fn
"""

from ._torch_ops import gemm

__all__ = ["gemm"]
