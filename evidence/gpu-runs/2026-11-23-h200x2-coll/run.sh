#!/bin/bash
# pgas::coll on the GPU machine: the suite's coll/ cases on 2 and 1 PEs, then the bench on 2 PEs.
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
export PATH=/opt/torch/.venv/bin:$PATH
export PGAS_CACHE_DIR=/tmp/pgas-coll-cache
mkdir -p "$PGAS_CACHE_DIR"
D=.dev-coll
nvidia-smi -L
nccl_lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
mkdir -p /tmp/nccl && ln -sf "$nccl_lib/libnccl.so.2" /tmp/nccl/libnccl.so
echo "== suite coll/ 2 PE"; timeout 90 $D/pgas-run -n 2 -- $D/gpu_suite coll/ > $OUT/suite2.log 2>&1; echo "rc=$?"; grep -E "FAIL|passed|aborted" $OUT/suite2.log | head -30
echo "== suite coll/ 1 PE"; timeout 45 $D/gpu_suite coll/ > $OUT/suite1.log 2>&1; echo "rc=$?"; grep -E "FAIL|passed|aborted" $OUT/suite1.log | head -30
echo "== bench 2 PE"; LD_LIBRARY_PATH=/tmp/nccl:${LD_LIBRARY_PATH:-} timeout 90 $D/pgas-run -n 2 -- $D/coll $OUT > $OUT/bench2.log 2>&1; echo "rc=$?"
grep -v FIGURE $OUT/bench2.log | tail -40
