#!/usr/bin/env python3
"""How evenly a persistent attention grid shares its work items: each block's key tiles (plus a
fixed cost an item) when blocks take a round's items in turn (round-robin) or in a snake (even
rounds from the round's start, odd ones from its end, as branch `exp-attention-persistent-tma`'s
`nth_item`), printed as the busiest block's load over the mean, for the attention bench's head
dim 128 shapes on 132 multiprocessors. Items are query tiles fastest, then heads, then
sequences; with the causal mask query tile x of q sees q - x key tiles (the kernel takes the
tiles from the end). `docs/attention.md` quotes it.

Usage: persistent_balance.py [ITEM_COST (1.5, in key tiles)]"""

import sys


def busiest(qx, heads, batch, blocks, causal, snake, item_cost):
    items = qx * heads * batch
    load = [0.0] * blocks
    r = 0
    while r * blocks < items:
        for k in range(blocks):
            it = (r + 1) * blocks - 1 - k if snake and r % 2 else r * blocks + k
            if it < items:
                load[k] += (qx - it % qx if causal else qx) + item_cost
        r += 1
    return max(load) / (sum(load) / blocks)


def main():
    cost = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    # (query tiles of 128 rows, heads, sequences): 16 x 16 x 1024, 4 x 16 x 4096, 4 x 32 x 4096.
    for qx, heads, batch in [(8, 16, 16), (32, 16, 4), (32, 32, 4)]:
        for causal in (False, True):
            rr = busiest(qx, heads, batch, 132, causal, False, cost)
            sn = busiest(qx, heads, batch, 132, causal, True, cost)
            print(f"{batch} x {heads} x {qx * 128}, causal {causal}: round-robin {rr:.3f}, snake {sn:.3f}")


if __name__ == "__main__":
    main()
