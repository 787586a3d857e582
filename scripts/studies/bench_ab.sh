#!/usr/bin/env bash
# Two builds of one benchmark side by side in one job: runs A and B alternately (A, B, A, B, ...),
# ROUNDS times each, and prints every TFLOP/s (or other) figure of both and the ratio of their sums,
# B/A. The way the docs' "against main in one job, each build twice, alternating" figures are made:
# a figure moves between jobs and even between two runs of one build by about 2%, so only two
# builds timed in turns in the same job compare. Logs go to OUT/A_1.log, OUT/B_1.log, ...
#
# Usage: bench_ab.sh OUT A_BIN B_BIN [ROUNDS (2)] [TIMEOUT_S (150)]
#   e.g. on a GPU machine, with main's and a branch's benches/attention.rs built here
#   (scripts/build-device.sh at each, the `attention` binary of each kept under two names):
#   scripts/studies/bench_ab.sh "$OUT/ab" .device/bin/attention_main .device/bin/attention_branch
set -u
out="${1:?usage: bench_ab.sh OUT A_BIN B_BIN [ROUNDS] [TIMEOUT_S]}"
a="${2:?A_BIN}"
b="${3:?B_BIN}"
rounds="${4:-2}"
limit="${5:-150}"
mkdir -p "$out"
for i in $(seq "$rounds"); do
  for side in A B; do
    bin=$a
    [ "$side" = B ] && bin=$b
    timeout "$limit" "$bin" >"$out/${side}_$i.log" 2>&1
    echo "bench_ab: $side round $i ($bin) exit $?"
  done
done
python3 - "$out" <<'PY'
import collections, glob, json, sys

runs = collections.defaultdict(lambda: collections.defaultdict(list))
units = {}
for path in sorted(glob.glob(sys.argv[1] + "/[AB]_*.log")):
    side = path.rsplit("/", 1)[1][0]
    for line in open(path):
        if "FIGURE " not in line:
            continue
        fig = json.loads(line.split("FIGURE ", 1)[1])
        if isinstance(fig.get("value"), (int, float)):
            runs[fig["name"]][side].append(fig["value"])
            units[fig["name"]] = fig.get("unit", "")
for name, by in runs.items():
    a, b = by.get("A", []), by.get("B", [])
    if a and b:
        show = lambda xs: " ".join(f"{x:.4g}" for x in xs)
        print(f"{name} [{units[name]}]: A {show(a)} | B {show(b)} | B/A {sum(b) / len(b) / (sum(a) / len(a)):.3f}")
PY
