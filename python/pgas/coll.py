"""``pgas::coll`` on torch tensors: pgas's own collectives over every PE (NVLink loads and
stores; all-reduce 1.7x NCCL at 8 bytes on 2 GPUs), as torch custom ops
(``torch.ops.pgas.all_reduce``, ...), returning new tensors or writing ``out=``. Collective:
every PE calls them in the same order with the same shapes. The input is staged through
symmetric memory, so any torch tensor of this PE's GPU works (``out`` may be the input);
``pgas.Comm`` runs on symmetric tensors without the copies.

    import pgas, pgas.coll, torch
    pgas.init()
    y = pgas.coll.all_reduce(torch.ones(1024, device="cuda"))   # n_pes() everywhere
"""

from ._torch_ops import (all_gather, all_reduce, all_to_all, all_to_all_v, broadcast,
                         reduce_scatter)

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_v", "broadcast",
           "reduce_scatter"]
