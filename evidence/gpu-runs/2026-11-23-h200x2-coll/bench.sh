#!/bin/bash
# The coll bench alone, 2 PEs, with a static heap (NVSHMEM's VMM heap refuses 1 GiB allocations).
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_CUDA_VMM=1
export PATH=/opt/torch/.venv/bin:$PATH
export PGAS_CACHE_DIR=/tmp/pgas-coll-cache
mkdir -p "$PGAS_CACHE_DIR"
D=.dev-coll
nccl_lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
mkdir -p /tmp/nccl && ln -sf "$nccl_lib/libnccl.so.2" /tmp/nccl/libnccl.so
LD_LIBRARY_PATH=/tmp/nccl:${LD_LIBRARY_PATH:-} timeout 200 $D/pgas-run -n 2 -- $D/coll $OUT > $OUT/bench2.log 2>&1; echo "rc=$?"
grep -v FIGURE $OUT/bench2.log | tail -40
