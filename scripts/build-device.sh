#!/usr/bin/env bash
# Builds, here, the release binaries the GPU test machines run (they have no Rust toolchain) and
# puts them, stripped and under stable names, in .device/bin (git-ignored), for
# scripts/gpu-suite.sh to run there:
#   pgas, pgas-run                 the CLI and the launcher
#   gpu_suite                      the GPU test suite (tests/gpu_suite)
#   dsl_vs_cuda, jit_costs, jit_helpers, gemm, gemm_shapes, coll, halo, moe, ag_gemm, gemm_rs,
#   allreduce_rmsnorm_bench, host_ops, attention, cp_attention   the benchmarks (allreduce_rmsnorm_bench is
#                                  benches/allreduce_rmsnorm.rs)
#   <example>                      every example in examples/
#   hello_ring_mpi                 examples/hello_ring.rs built with the `mpi` feature
#   mpi_subcomm                    tests/mpi/subcomm.rs (NVSHMEM on MPI sub-communicators), `mpi`
# and, in .device/python, the Python package's wheel (python/: the package pgas and its native
# module, crate pgas-python): `pip install --target DIR .device/python/pgas-*.whl`, then
# `PYTHONPATH=DIR python3 -c "import pgas"` with any CPython >= 3.9.
# Building needs no GPU, CUDA or NVSHMEM; the mpi build needs an MPI library (scripts/deps.sh
# installs OpenMPI) and is skipped with a warning without one.
#
# For a run on another NVSHMEM than the GPU machine's (a device call carries 64 MiB in all):
#   PGAS_DEVICE_NVSHMEM=DIR  packs that NVSHMEM root's headers, host library and bootstrap
#                            plugins into .device/nvshmem.tar.xz (about 41 MB for 3.8.0), which
#                            scripts/gpu-suite.sh then uses; e.g. DIR=$PGAS_NVSHMEM_HOME_NEXT
#                            (scripts/deps.sh)
#   PGAS_DEVICE_ONLY="a b"   keeps only these binaries (and pgas, pgas-run) and no Python module,
#                            to make room for it: "gpu_suite hello_ring" for `gpu-suite.sh OUT suite`
set -euo pipefail
cd "$(dirname "$0")/.."
out=.device/bin
pyout=.device/python
rm -rf "$out" "$pyout"
mkdir -p "$out" "$pyout"
json=$(mktemp)
trap 'rm -f "$json"' EXIT

cargo build --release --bins --examples --message-format=json-render-diagnostics >>"$json"
cargo test --release --features gpu --no-run --test gpu_suite --message-format=json-render-diagnostics >>"$json"
cargo bench --no-run --features gpu --bench dsl_vs_cuda --bench jit_costs --bench jit_helpers --bench gemm --bench gemm_shapes --bench coll --bench halo --bench moe --bench ag_gemm --bench gemm_rs --bench allreduce_rmsnorm_bench --bench host_ops --bench attention --bench cp_attention \
  --message-format=json-render-diagnostics >>"$json"

# Copies every executable cargo reported under its target name (test and bench binaries carry a
# hash in their file name; the target name is stable). $1 renames one target (old=new).
copy_artifacts() {
  python3 - "$json" "$out" "${1:-}" <<'EOF'
import json, shutil, sys
path, out, rename = sys.argv[1], sys.argv[2], sys.argv[3]
old, _, new = rename.partition("=")
for line in open(path):
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    name = msg["target"]["name"]
    if old and name != old:
        continue
    shutil.copy2(msg["executable"], f"{out}/{new if old else name}")
EOF
}
copy_artifacts

if command -v mpicc >/dev/null 2>&1 && [ -f examples/hello_ring.rs ]; then
  : >"$json"
  cargo build --release --features mpi --example hello_ring --example mpi_subcomm \
    --message-format=json-render-diagnostics >>"$json"
  copy_artifacts hello_ring=hello_ring_mpi
  copy_artifacts mpi_subcomm=mpi_subcomm
else
  echo "build-device: no MPI compiler (mpicc) or no examples/hello_ring.rs: hello_ring_mpi and mpi_subcomm not built" >&2
fi

# The Python package as users install it: its wheel (scripts/build-wheel.sh; abi3, any CPython
# >= 3.9), which scripts/gpu-suite.sh installs there with pip (no Rust needed).
scripts/build-wheel.sh "$pyout" release >/dev/null
# Wheels the GPU machines lack, for their Python 3.12 (scripts/gpu-suite.sh installs each into a
# folder of its own): NVSHMEM4Py, which python/benches/host_ops.py times pgas against, and a
# numpy that their numba-cuda supports (0.30.4 fails with their numpy 2.5). From PyPI; without
# it the steps that need them say so and skip.
extras=(nvshmem4py-cu13==0.4.1 numpy==2.2.6)
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
  -d "$pyout/extras" "${extras[@]}" >&2 ||
  echo "build-device: could not download ${extras[*]} from PyPI: the NVSHMEM4Py comparison and the Numba example will skip" >&2

if [ -n "${PGAS_DEVICE_ONLY:-}" ]; then
  for f in "$out"/*; do
    case " pgas pgas-run $PGAS_DEVICE_ONLY " in *" $(basename "$f") "*) ;; *) rm -f "$f" ;; esac
  done
  rm -rf "${pyout:?}"/*
fi
strip "$out"/* 2>/dev/null || true
if [ -n "${PGAS_DEVICE_NVSHMEM:-}" ]; then
  nv="$PGAS_DEVICE_NVSHMEM"
  [ -f "$nv/include/nvshmem.h" ] && ls "$nv"/lib/libnvshmem_host.so* >/dev/null 2>&1 || {
    echo "build-device: PGAS_DEVICE_NVSHMEM=$nv is not an NVSHMEM root (include/nvshmem.h, lib/libnvshmem_host.so*)" >&2
    exit 1
  }
  stage=$(mktemp -d)
  mkdir -p "$stage/nvshmem/lib"
  cp -r "$nv/include" "$stage/nvshmem/"
  cp -P "$nv"/lib/libnvshmem_host.so* "$nv"/lib/nvshmem_bootstrap_*.so* "$stage/nvshmem/lib/"
  strip --strip-unneeded "$stage"/nvshmem/lib/*
  # xz: 5 MB less than gzip, which is what lets the binaries fit beside it.
  command -v xz >/dev/null || { echo "build-device: PGAS_DEVICE_NVSHMEM needs xz (apt-get install xz-utils)" >&2; exit 1; }
  tar -cf - -C "$stage" nvshmem | xz -6 -T0 >.device/nvshmem.tar.xz
  rm -rf "$stage"
else
  rm -f .device/nvshmem.tar.xz
fi
# The device copy of the tree has no .git: record what was built.
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.device' || echo -dirty)" >.device/COMMIT
du -sh "$out" "$pyout"
ls -l "$out" "$pyout"
# (du fails on the missing tarball without PGAS_DEVICE_NVSHMEM, yet sums what is there.)
size=$( (du -smc "$out" "$pyout" .device/nvshmem.tar.xz 2>/dev/null || true) | tail -1 | cut -f1)
if [ "$size" -gt 50 ]; then
  echo "build-device: WARNING: $out and $pyout are ${size} MiB, over the 50 MiB the device tool carries comfortably" >&2
fi
