#!/usr/bin/env bash
# helper halo's GPU run: jacobi2d + gpu_suite halo/ + benches/halo.rs on 1 PE, then 2 PEs
# sharing the GPU under MPS (correctness only). Logs in $1.
set -uo pipefail
out=${1:?usage: go.sh OUTDIR}
mkdir -p "$out"
d=$(cd "$(dirname "$0")" && pwd)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x /opt/torch/.venv/bin/python3 ] && export PATH=/opt/torch/.venv/bin:$PATH
export PGAS_CACHE_DIR=/tmp/pgas-halo-cache
mkdir -p "$PGAS_CACHE_DIR"
nccl_lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
if [ -n "$nccl_lib" ] && [ -e "$nccl_lib/libnccl.so.2" ]; then
  mkdir -p /tmp/pgas-nccl && ln -sf "$nccl_lib/libnccl.so.2" /tmp/pgas-nccl/libnccl.so
fi
export LD_LIBRARY_PATH="/tmp/pgas-nccl:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_CUDA_VMM=1
cat "$d/COMMIT" >"$out/check.log" 2>/dev/null
nvidia-smi -L >>"$out/check.log" 2>&1
sum=()
run() {
  local name=$1 log=$2 lim=$3
  shift 3
  local t0
  t0=$(date +%s)
  echo "===== $name: $*" >>"$out/$log"
  timeout -k 5 "$lim" "$@" >>"$out/$log" 2>&1
  local rc=$?
  sum+=("$name: rc=$rc $(($(date +%s) - t0))s")
}
run "jacobi2d 1PE" check.log 30 "$d/jacobi2d"
run "gpu_suite halo 1PE" check.log 45 "$d/gpu_suite" halo
run "bench halo 1PE" bench1.log 100 "$d/halo" "$out/bench1" ${BENCH_ARGS:-}
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
nvidia-cuda-mps-control -d >>"$out/mps.log" 2>&1
sleep 1
MP=(mpirun -np 2 --bind-to none -x NVSHMEM_BOOTSTRAP=MPI -x PGAS_DEVICE=0 -x PATH -x PGAS_CACHE_DIR
  -x NVSHMEM_DISABLE_NVLS -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE -x LD_LIBRARY_PATH -x NVSHMEM_DISABLE_CUDA_VMM)
run "jacobi2d 2PE mps" mps.log 30 "${MP[@]}" "$d/jacobi2d"
run "gpu_suite halo 2PE mps" mps.log 40 "${MP[@]}" "$d/gpu_suite" halo
run "bench halo 2PE mps (correctness only)" mps.log 40 "${MP[@]}" "$d/halo" --sizes 1024,2048 --blocks 32 --no-nccl
echo quit | nvidia-cuda-mps-control
echo "===== tails"
for f in check.log bench1.log mps.log; do echo "--- $f"; grep -E "FAIL|ok$|ok,|passed|error|Error|differs|halo: N|^\| " "$out/$f" | tail -n 40; done
echo "===== summary"
printf '%s\n' "${sum[@]}"
