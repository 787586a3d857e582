#!/usr/bin/env bash
# Builds, here, one benchmark, the GPU suite and the launcher (`pgas-run`) at several git refs, for an A/B on a GPU machine
# (bench_ab.sh): each ref in a worktree of its own, release binaries copied under stable names to
# OUT/<ref>/ (`/` in a ref becomes `-`), stripped, and OUT packed into OUT.tgz for the device
# tool (which carries 64 MiB). The worktrees share one target folder, so a ref after the first
# rebuilds only the crates that differ.
#
# Usage: build_ab.sh OUT BENCH REF...
#   e.g. scripts/studies/build_ab.sh .device/ab attention main exp-attention-tma-store
#   then there: scripts/studies/bench_ab.sh "$OUT/ab" .device/ab/main/attention \
#                 .device/ab/exp-attention-tma-store/attention
#   and `.device/ab/<ref>/pgas-run -n 2 --share-gpus -- .device/ab/<ref>/gpu_suite attention/`
#   (and on 1 and 4 PEs) for each ref's correctness.
set -euo pipefail
out="${1:?usage: build_ab.sh OUT BENCH REF...}"
bench="${2:?BENCH}"
shift 2
[ $# -ge 1 ] || { echo "build_ab.sh: name at least one git ref" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}/ab"
rm -rf "$out"
mkdir -p "$out"
for ref in "$@"; do
  name=${ref//\//-}
  tree=$(mktemp -d)
  git -C "$root" worktree add --detach -q "$tree" "$ref"
  json=$(mktemp)
  (cd "$tree" && CARGO_TARGET_DIR="$target" cargo build --release --features gpu \
    --bench "$bench" --test gpu_suite --bin pgas-run --message-format=json-render-diagnostics >"$json")
  mkdir -p "$out/$name"
  python3 - "$json" "$out/$name" "$bench" <<'PY'
import json, shutil, sys
path, dest, bench = sys.argv[1:]
for line in open(path):
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    name = msg.get("target", {}).get("name")
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and name in (bench, "gpu_suite", "pgas-run"):
        shutil.copy2(msg["executable"], f"{dest}/{name}")
PY
  git -C "$tree" rev-parse --short HEAD >"$out/$name/COMMIT"
  git -C "$root" worktree remove --force "$tree"
  rm -f "$json"
done
strip "$out"/*/* 2>/dev/null || true
tar -czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
du -sh "$out" "$out.tgz"
