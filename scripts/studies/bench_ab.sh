#!/usr/bin/env bash
# Builds of one benchmark side by side in one job: runs them in turns (A, B, ..., A, B, ...),
# ROUNDS times each, and prints every figure of each and its ratio to A's (the means' ratio).
# The way the docs' "against main in one job, each build twice, alternating" figures are made:
# a figure moves between jobs and even between two runs of one build by about 2%, so only
# builds timed in turns in the same job compare. Logs go to OUT/A_1.log, OUT/B_1.log, ...
#
# Usage: bench_ab.sh OUT BIN_A BIN_B [BIN_C ...]
#   PGAS_AB_ROUNDS (2) rounds, PGAS_AB_TIMEOUT (150) seconds a run; e.g. on a GPU machine, with
#   main's and a branch's benches/attention.rs built here (build_ab.sh):
#   scripts/studies/bench_ab.sh "$OUT/ab" .device/ab/main/attention .device/ab/BRANCH/attention
set -u
out="${1:?usage: bench_ab.sh OUT BIN_A BIN_B [BIN_C ...]}"
shift
[ $# -ge 2 ] || { echo "bench_ab.sh: name at least two binaries" >&2; exit 2; }
rounds="${PGAS_AB_ROUNDS:-2}"
limit="${PGAS_AB_TIMEOUT:-150}"
mkdir -p "$out"
sides=(A B C D E F G H)
for i in $(seq "$rounds"); do
  n=0
  for bin in "$@"; do
    side=${sides[$n]}
    n=$((n + 1))
    timeout "$limit" "$bin" >"$out/${side}_$i.log" 2>&1
    echo "bench_ab: $side round $i ($bin) exit $?"
  done
done
python3 - "$out" "$@" <<'PY'
import collections, glob, json, sys

out, bins = sys.argv[1], sys.argv[2:]
sides = "ABCDEFGH"[: len(bins)]
for s, b in zip(sides, bins):
    print(f"{s}: {b}")
runs = collections.defaultdict(lambda: collections.defaultdict(list))
units = {}
for path in sorted(glob.glob(out + "/[A-H]_*.log")):
    side = path.rsplit("/", 1)[1][0]
    for line in open(path):
        if "FIGURE " not in line:
            continue
        fig = json.loads(line.split("FIGURE ", 1)[1])
        if isinstance(fig.get("value"), (int, float)):
            runs[fig["name"]][side].append(fig["value"])
            units[fig["name"]] = fig.get("unit", "")
mean = lambda xs: sum(xs) / len(xs)
for name, by in runs.items():
    if "A" not in by:
        continue
    parts = []
    for s in sides:
        xs = by.get(s, [])
        if xs:
            ratio = "" if s == "A" else f" ({mean(xs) / mean(by['A']):.3f})"
            parts.append(f"{s} {' '.join(f'{x:.4g}' for x in xs)}{ratio}")
    print(f"{name} [{units[name]}]: " + " | ".join(parts))
PY
