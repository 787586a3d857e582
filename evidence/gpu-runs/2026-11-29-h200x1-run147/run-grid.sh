#!/bin/bash
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_CUDA_VMM=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x /opt/torch/.venv/bin/python3 ] && export PATH="/opt/torch/.venv/bin:$PATH"
B=$PWD/.device/bin; mkdir -p "$B"; cp .device/carry/pgas .device/carry/pgas-run "$B/"
gunzip -c .device/carry/gpu_suite.gz > "$B/gpu_suite"; chmod +x "$B/gpu_suite"
export PGAS_CACHE_DIR=/tmp/kc-grid; mkdir -p $PGAS_CACHE_DIR
S=$OUT/summary.txt
nvidia-cuda-mps-control -d
step() { name=$1; lim=$2; shift 2; t0=$(date +%s); timeout $lim "$@" > "$OUT/logs/$name.log" 2>&1; rc=$?
  { echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s"; grep -E "rank 0.*(FAIL|passed, )|collective grid error" "$OUT/logs/$name.log" | grep "rank 0" | cut -c1-220 | head -8; } >> "$S"; }
step coll4 330 "$B/pgas-run" -n 4 --share-gpus -- "$B/gpu_suite" coll/
step launch4 90 "$B/pgas-run" -n 4 --share-gpus -- "$B/gpu_suite" launch/
echo quit | nvidia-cuda-mps-control
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
cat "$S"
