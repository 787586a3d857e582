#!/usr/bin/env bash
# The attention kernel under Nsight Compute on a GPU machine: one launch of bf16 at
# 16 x 16 x 1024 x 128 and one of FP8 at 4 x 16 x 4096 x 128 (unmasked, after 3 warm-up
# launches each), `--set full`, each summarized by ncu_regions.py (where the warps' stall samples
# fall: prologue, loop, epilogue). Writes OUT/<name>.ncu-rep, .txt (ncu's details page), .csv
# (per instruction) and .regions.txt; prints the regions. About a minute.
#
# Usage: ncu_attention.sh OUT [ATTENTION_BIN (.device/bin/attention: scripts/build-device.sh)]
set -u
cd "$(dirname "$0")/../.."
out="${1:?usage: ncu_attention.sh OUT [ATTENTION_BIN]}"
bin="${2:-.device/bin/attention}"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
[ -x "$ncu" ] || { echo "ncu_attention: no Nsight Compute (ncu) on PATH or in /usr/local/cuda/bin" >&2; exit 1; }
mkdir -p "$out"
# NAME SHAPE SKIP: the bench runs, per shape, bf16 unmasked (3 + 20 launches of the kernel), FP8
# unmasked (3 + 20), then the causal pair; V's transpose is another kernel.
profile() {
  local name=$1 shape=$2 skip=$3
  timeout 240 "$ncu" -k regex:attention_fwd --launch-skip "$skip" --launch-count 1 --set full \
    -f -o "$out/$name" "$bin" "$shape" >"$out/$name.log" 2>&1 || echo "ncu_attention: $name: ncu exit $?"
  "$ncu" -i "$out/$name.ncu-rep" --page details >"$out/$name.txt" 2>&1
  "$ncu" -i "$out/$name.ncu-rep" --page source --csv --print-source sass >"$out/$name.csv" 2>&1
  python3 scripts/studies/ncu_regions.py "$out/$name.csv" >"$out/$name.regions.txt" 2>&1
  echo "== $name ($shape)"
  grep -E 'Duration|Compute \(SM\) Throughput' "$out/$name.txt"
  sed -n '1,40p' "$out/$name.regions.txt"
}
profile bf16_1024 "16x16(16)x1024x128" 3
profile fp8_4096 "4x16(16)x4096x128" 26
