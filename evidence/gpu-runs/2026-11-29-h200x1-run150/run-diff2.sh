#!/usr/bin/env bash
# The differential test on 4 PEs sharing one GPU (MPS), at the head's suite (util::ll_takes).
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NVSHMEM_DISABLE_CUDA_VMM=1
export PATH="/opt/torch/.venv/bin:$PATH"
export PGAS_CACHE_DIR=/tmp/pgas-cache
B=$PWD/.device/bin; mkdir -p "$B"; cp .device/carry/pgas .device/carry/pgas-run "$B/"
gunzip -c .device/carry/gpu_suite.gz > "$B/gpu_suite"; chmod +x "$B/gpu_suite"
logs=$OUT/logs; mkdir -p $logs
S=$OUT/summary.txt
nvidia-smi -L > $S
nvidia-cuda-mps-control -d && echo "MPS started" >> $S
t0=$(date +%s); timeout -k 5 260 $B/pgas-run -n 4 --share-gpus -- $B/gpu_suite --differential 20261129 4000 150 > $logs/diff4.log 2>&1
echo "== diff4: exit $? after $(( $(date +%s)-t0 ))s" >> $S
grep -E "differential: seed|mismatch" $logs/diff4.log | grep "rank 0\]" | tail -5 >> $S
echo quit | nvidia-cuda-mps-control
tar -czf $OUT/logs.tgz -C $OUT logs; rm -rf $logs; cat $S
