#!/bin/bash
# Throwaway driver: the MoE buffers read on one PE only moved to the symmetric heap (no cudarc
# event wait/record per launch). Correctness: gpu_suite moe/ on 4 and 2 PEs sharing the GPU, on
# 1 PE, and off NVLink on 2; speed: benches/moe.rs on 1 PE, old and new binaries alternating.
set -u
O=$1; mkdir -p "$O/logs"
B=$PWD/.device/carry; gunzip -f "$B/gpu_suite.gz"; chmod +x "$B"/*
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_CUDA_VMM=1 PGAS_CACHE_DIR=/tmp/kc-moe
[ -x /opt/torch/.venv/bin/python3 ] && export PATH="/opt/torch/.venv/bin:$PATH"
nl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
mkdir -p /tmp/pgas-nccl && ln -sf "$nl/libnccl.so.2" /tmp/pgas-nccl/libnccl.so
export LD_LIBRARY_PATH="/tmp/pgas-nccl:${LD_LIBRARY_PATH:-}"
S=$O/summary.txt; : > "$S"
T0=$(date +%s)
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s); local left=$((300 - (t0 - T0)))
  [ "$left" -lt 20 ] && { echo "== $name: SKIP (out of time)" >> "$S"; return; }
  [ "$lim" -gt "$left" ] && lim=$left
  timeout -k 5 "$lim" "$@" > "$O/logs/$name.log" 2>&1; local rc=$?
  echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s | $(grep -E 'gpu_suite: [0-9]+ passed|FAIL' "$O/logs/$name.log" | head -3 | tr '\n' ' ' | cut -c1-300)" >> "$S"; }
nvidia-cuda-mps-control -d; sleep 1
step suite4 120 "$B/pgas-run" -n 4 --share-gpus -- "$B/gpu_suite" moe/
step suite2 80 "$B/pgas-run" -n 2 --share-gpus -- "$B/gpu_suite" moe/
step offnode2 80 env PGAS_PEER_ACCESS=none "$B/pgas-run" -n 2 --share-gpus -- "$B/gpu_suite" moe/
echo quit | nvidia-cuda-mps-control; sleep 1
step suite1 80 "$B/gpu_suite" moe/
for r in 1 2 3; do
  for v in old new; do
    step "bench-$v-$r" 75 "$B/moe_$v" "$O/$v$r"
    grep -E "0tok|_128tok_|_4096tok_|moe_ll_(dispatch|combine)_128" "$O/logs/bench-$v-$r.log" | grep FIGURE | sed 's/.*"name":"\([^"]*\)","value":\([^,]*\).*/\1=\2/' | tr '\n' ' ' | sed "s/^/   $v$r: /" >> "$S"; echo >> "$S"
  done
done
cd "$O" && tar czf logs.tgz logs && rm -rf logs
cat "$S"
