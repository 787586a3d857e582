#!/bin/bash
# Throwaway driver (2026-11-29, eighteenth session): the head's binaries, gzipped in
# .device/carry (carry [".device/carry", ".device/run-final.sh"]), unpacked to .device/bin, then
#   suite OUT: scripts/gpu-suite.sh OUT suite (4/2/1 PEs, differential, off-node, uid, sanitizers)
#   rest OUT:  the default mode's steps after the suite: traps, hello_ring, the gallery (README's
#              main job), the Python module, dsl_vs_cuda. Summary last.
set -u
mode=$1; O=$2; mkdir -p "$O/logs"
rm -rf .device/bin .device/python; mkdir -p .device/bin .device/python
for f in .device/carry/bin/*.gz; do n=$(basename "$f" .gz); gunzip -c "$f" > ".device/bin/$n"; chmod +x ".device/bin/$n"; done
cp .device/carry/python/pgas.abi3.so .device/python/
if [ "$mode" = suite ]; then rmdir "$O/logs"; exec scripts/gpu-suite.sh "$O" suite; fi
B=$PWD/.device/bin
export NVSHMEM_DISABLE_NVLS=1 PGAS_CACHE_DIR=/tmp/kc-rest
[ -x /opt/torch/.venv/bin/python3 ] && export PATH="/opt/torch/.venv/bin:$PATH"
S=$O/summary.txt; : > "$S"
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 "$lim" "$@" > "$O/logs/$name.log" 2>&1; local rc=$?
  echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s | $(grep -vE '^\s*$' "$O/logs/$name.log" | tail -1 | cut -c1-200)" >> "$S"; }
echo "commit $(cat .device/carry/COMMIT) $(nvidia-smi -L | head -1)" >> "$S"
for k in oob local-oob bad-pe partial-warp divergent-mma cluster-rank multicast-mask ll-scratch; do
  step "trap-$k" 40 "$B/gpu_suite" --expect-trap "$k"
  grep -o "[^ ]*traps.rs:[0-9]*" "$O/logs/trap-$k.log" | head -1 >> "$S"
done
step hello_ring 40 "$B/hello_ring"
step gallery 240 env PGAS_BIN_DIR="$B" scripts/gallery.sh
grep -E "^=== gallery|passed|FAIL|error" "$O/logs/gallery.log" | cut -c1-160 >> "$S"
step py-dlpack 60 env PYTHONPATH=$PWD/.device/python python3 python/tests/dlpack_torch.py
step py-api 150 env PYTHONPATH=$PWD/.device/python python3 -m pytest -x -q -rs -p no:cacheprovider python/tests/test_gpu.py
step dsl_vs_cuda 100 "$B/dsl_vs_cuda"
grep FIGURE "$O/logs/dsl_vs_cuda.log" | grep -o '"name":"[^"]*","value":[0-9.]*' | head -24 >> "$S"
cd "$O" && tar czf logs.tgz logs && rm -rf logs
cat "$S"
