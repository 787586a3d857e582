#!/usr/bin/env bash
# Installs what pgas needs on a machine without CUDA or NVSHMEM, for builds and CPU tests:
#   - the pinned NVIDIA wheels (NVRTC, CUDA headers, CCCL, NVSHMEM 3.4.5) into .deps/ (git-ignored);
#   - Debian packages: libclang (bindgen), OpenMPI (the `mpi` feature).
# Then prints the environment lines that point pgas at them; source it with `eval "$(scripts/deps.sh)"`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"

# The versions the GPU machines have (../shared/notes/nvshmem-jit.md). NVSHMEM must match the
# GPU machines' library exactly, or kernels compiled here would not match the device state layout.
wheels=(nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-nvshmem-cu13==3.4.5)
stamp="$deps/.installed"
if [ "$(cat "$stamp" 2>/dev/null)" != "${wheels[*]}" ]; then
  echo "deps: installing ${wheels[*]} into $deps" >&2
  rm -rf "$deps"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$deps" "${wheels[@]}" >&2
  echo "${wheels[*]}" > "$stamp"
fi

need=()
command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev openmpi-bin)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing Debian packages ${need[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi

echo "export PGAS_CUDA_HOME='$deps/nvidia/cu13'"
echo "export PGAS_NVSHMEM_HOME='$deps/nvidia/nvshmem'"
