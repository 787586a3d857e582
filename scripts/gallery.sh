#!/usr/bin/env bash
# The main job (README.md): builds pgas and runs every gallery example (examples/*.rs) on the GPUs
# present, one process per GPU through pgas-run. On a machine without an NVIDIA GPU it says so, runs
# `pgas doctor` (what is there, what is missing, how to fix it) and runs no example.
#
# PGAS_BIN_DIR=DIR uses prebuilt binaries (pgas, pgas-run and the examples, all in DIR) instead of
# building: the GPU test machines have no Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${PGAS_BIN_DIR:-}" ]; then
  bin="$PGAS_BIN_DIR"; examples="$PGAS_BIN_DIR"
else
  # Without a system NVSHMEM/CUDA, the pinned wheels give NVRTC, headers and libnvshmem_host.
  if [ -z "${PGAS_NVSHMEM_HOME:-}${NVSHMEM_HOME:-}" ] && ! python3 -c 'import nvidia.nvshmem' 2>/dev/null; then
    eval "$(scripts/deps.sh)"
  fi
  cargo build --release --bins --examples
  bin=target/release; examples=target/release/examples
fi

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ "$gpus" -eq 0 ]; then
  echo "gallery: no NVIDIA GPU on this machine, so no example runs here."
  echo "gallery: running 'pgas doctor' to show what pgas finds and what a GPU machine would need:"
  "$bin/pgas" doctor || true
  exit 0
fi

export NVSHMEM_DISABLE_NVLS="${NVSHMEM_DISABLE_NVLS:-1}"
failed=()
for src in examples/*.rs; do
  name=$(basename "$src" .rs)
  echo "=== gallery: $name on $gpus GPU(s)"
  if ! "$bin/pgas-run" -n "$gpus" -- "$examples/$name"; then failed+=("$name"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "gallery: FAILED: ${failed[*]}"; exit 1
fi
echo "gallery: all examples passed on $gpus GPU(s)"
