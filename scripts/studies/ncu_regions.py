#!/usr/bin/env python3
"""Where a kernel's warps spend their time, from Nsight Compute's stall sampling per instruction:
the samples of each run of consecutive instructions that executed the same number of times (a
run is a stretch of straight-line code: a prologue, a loop body, an epilogue), the samples by
execution count (instructions executed as often belong to the same role, e.g. the loop over
tiles of the multiplying warps), and the instructions with the most samples, each with its top
stall reasons. `docs/attention.md` ("Where a short sequence's block spends its time") quotes it.

Usage: ncu_regions.py SOURCE.csv [MIN_PERCENT (1.0)]
  SOURCE.csv  `ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SOURCE.csv`, of a
              report taken with `--set full` (or `--section SourceCounters`);
              scripts/studies/ncu_attention.sh makes them for the attention kernel."""

import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text):
    try:
        return int(float(text.replace(",", "")))
    except ValueError:
        return 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    least = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    rows = list(csv.reader(open(sys.argv[1])))
    # Row 0 names the kernel; row 1 is the header; then one row per instruction.
    header_at = next(i for i, r in enumerate(rows) if SAMPLES in r)
    head, body = rows[header_at], [r for r in rows[header_at + 1:] if len(r) > 2]
    name = rows[0][1] if header_at > 0 and len(rows[0]) > 1 else "kernel"
    col = {h: i for i, h in enumerate(head)}
    stalls = [(i, h[len("stall_"):]) for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
    instrs = [(n, r[col["Source"]].strip(), number(r[col[SAMPLES]]), number(r[col[EXECUTED]]),
               {s: number(r[i]) for i, s in stalls}) for n, r in enumerate(body)]
    total = sum(i[2] for i in instrs) or 1
    pct = lambda x: f"{100 * x / total:.1f}%"

    def top(why, k=3):
        return ", ".join(f"{s} {pct(v)}" for s, v in collections.Counter(why).most_common(k) if v)

    print(f"{name}: {total} samples over {len(instrs)} instructions")
    print("stall reasons: " + top(sum((collections.Counter(i[4]) for i in instrs), collections.Counter()), 8))

    print("\nby execution count (instructions executed that many times):")
    by = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for _, _, s, e, why in instrs:
        by[e][0] += 1
        by[e][1] += s
        by[e][2].update(why)
    for e, (count, s, why) in sorted(by.items(), key=lambda x: -x[1][1]):
        if 100 * s / total >= least:
            print(f"  {e:>10} executions: {count:4} instructions, {pct(s):>6}; {top(why)}")

    print(f"\nruns of one execution count with at least {least}% of the samples:")
    start = 0
    for n in range(1, len(instrs) + 1):
        if n < len(instrs) and instrs[n][3] == instrs[start][3]:
            continue
        run = instrs[start:n]
        s = sum(i[2] for i in run)
        if 100 * s / total >= least:
            why = sum((collections.Counter(i[4]) for i in run), collections.Counter())
            print(f"  [{start}-{n - 1}] x{run[0][3]}: {pct(s):>6}; {top(why)}; from `{run[0][1][:60]}`")
        start = n

    print("\ninstructions with the most samples:")
    for n, text, s, e, why in sorted(instrs, key=lambda i: -i[2])[:15]:
        print(f"  [{n}] {pct(s):>6} x{e}: `{text[:60]}`; {top(why, 2)}")


if __name__ == "__main__":
    main()
