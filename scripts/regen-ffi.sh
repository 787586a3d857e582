#!/usr/bin/env bash
# Regenerates runtime/src/ffi/bindings.rs from the NVSHMEM and CUDA headers with bindgen.
# Needs libclang (Debian/Ubuntu: apt-get install -y libclang-dev).
#   PGAS_NVSHMEM_HOME  NVSHMEM root with include/ (e.g. .../site-packages/nvidia/nvshmem)
#   PGAS_CUDA_HOME     folder with include/cuda.h (e.g. /usr/local/cuda or .../nvidia/cu13)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PGAS_NVSHMEM_HOME:?set PGAS_NVSHMEM_HOME to the NVSHMEM root (pip install nvidia-nvshmem-cu13==3.4.5)}"
: "${PGAS_CUDA_HOME:?set PGAS_CUDA_HOME to a folder with include/cuda.h}"
cargo run -q -p pgas-ffi-gen -- runtime/src/ffi/bindings.rs
