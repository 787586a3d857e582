#!/bin/bash
# A/B of the GPU suite's cold compile: old binary (gpu_suite_old) against new (gpu_suite),
# each from an empty kernel cache and an empty driver cache. Usage: run-compile.sh PES ORDER...
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_CUDA_VMM=1 CUDA_CACHE_DISABLE=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x /opt/torch/.venv/bin/python3 ] && export PATH="/opt/torch/.venv/bin:$PATH"
B=$PWD/.device/bin
if [ -d .device/carry ]; then
  mkdir -p "$B"; cp .device/carry/pgas .device/carry/pgas-run "$B/"
  for z in .device/carry/*.gz; do gunzip -c "$z" > "$B/$(basename "$z" .gz)"; chmod +x "$B/$(basename "$z" .gz)"; done
fi
S=$OUT/summary-$1.txt
pes=$1; shift
{ echo "commit $(git rev-parse --short HEAD 2>/dev/null) cpus $(nproc) pes $pes"; nvidia-smi -L; } >> "$S"
share=""
if [ "$pes" -gt 1 ]; then nvidia-cuda-mps-control -d && share="--share-gpus"; fi
for bin in "$@"; do
  name=$bin-$pes
  export PGAS_CACHE_DIR=/tmp/kc-$name CUDA_CACHE_PATH=/tmp/cc-$name
  rm -rf "$PGAS_CACHE_DIR" "$CUDA_CACHE_PATH"; mkdir -p "$PGAS_CACHE_DIR"
  t0=$(date +%s)
  timeout ${LIMIT:-280} "$B/pgas-run" -n "$pes" $share -- "$B/$bin" > "$OUT/logs/$name.log" 2>&1
  rc=$?
  { echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s"
    grep -E "gpu_suite: [0-9]+ kernels compiled|passed, [0-9]+ failed|helper process" "$OUT/logs/$name.log" | head -5
    grep -E "pgas: JIT: [0-9]+ kernel\(s\) compiled or loaded" "$OUT/logs/$name.log" | grep -v "^\[rank [1-9]" | awk '{for(i=1;i<=NF;i++) if($i=="in") {s+=$(i+1); n++}} END {printf "JIT builds (PE 0 or all): %d, their seconds summed: %.1f\n", n, s}'
    grep -E "program [0-9]+/[0-9]+: 1 kernel .*full prelude" "$OUT/logs/$name.log" | sort -t, -k3 -rn | head -4
  } >> "$S"
done
[ -n "$share" ] && echo quit | nvidia-cuda-mps-control
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
cat "$S"
