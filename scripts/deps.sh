#!/usr/bin/env bash
# Installs what pgas needs on a machine without CUDA or NVSHMEM, for builds and CPU tests:
#   - the pinned NVIDIA wheels (NVRTC, CUDA headers, CCCL, NVSHMEM 3.4.5) into .deps/ (git-ignored),
#     and NVSHMEM 3.8.0 into .deps-nvshmem-3.8.0/ (PGAS_NVSHMEM_HOME_NEXT: CI compiles against both);
#   - Debian packages: libclang (bindgen, for mpi-sys), OpenMPI (the `mpi` feature).
# Then prints the environment lines that point pgas at them; source it with `eval "$(scripts/deps.sh)"`.
#
# Each dependency is detected by the exact file or command that is needed, never by a look-alike
# (libclang-cpp.so is not libclang.so: bindgen cannot use it):
#   wheels   the stamp in .deps AND the files pgas opens from them (libnvrtc, nvshmem.h, ...)
#   libclang a libclang.so, libclang.so.N or libclang-N.so[.N] where clang-sys looks for one
#   mpicc    the command on PATH
#
#   scripts/deps.sh --check   prints what is missing, one item a line, installs nothing (exit 0)
# For tests of the detection: PGAS_DEPS_SYSROOT prefixes every system path looked at, and
# PGAS_DEPS_DIR replaces .deps.
set -euo pipefail
# Builtins only up to the install step (no dirname): the detection test runs it with an empty PATH.
root=$(cd "${0%/*}/.." && pwd)
deps="${PGAS_DEPS_DIR:-$root/.deps}"
sysroot="${PGAS_DEPS_SYSROOT:-}"

# The versions the GPU machines have (../shared/notes/nvshmem-jit.md). NVSHMEM must match the
# GPU machines' library exactly, or kernels compiled here would not match the device state layout.
wheels=(nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-nvshmem-cu13==3.4.5 nvidia-nvjitlink==13.0.88)
stamp="$deps/.installed"
# NVSHMEM 3.8.0, the newest release pgas supports, beside the pinned 3.4.5: CI compiles the kernel
# corpus against its headers too (scripts/test.sh). Its own directory, so a reinstall of either
# leaves the other alone.
next_wheel=nvidia-nvshmem-cu13==3.8.0
next_dir="${deps}-nvshmem-3.8.0"
next_file="$next_dir/nvidia/nvshmem/include/nvshmem.h"
# What pgas opens from the wheels: a stamp without them (a half-deleted .deps) is not an install.
wheel_files=(
  nvidia/cu13/lib/libnvrtc.so.13
  nvidia/cu13/lib/libnvJitLink.so.13
  nvidia/cu13/include/cuda_runtime.h
  nvidia/cu13/include/cccl/cuda/std/type_traits
  nvidia/nvshmem/include/nvshmem.h
  nvidia/nvshmem/lib/libnvshmem_host.so.3
)

wheels_ok() {
  [ -f "$stamp" ] && [ "$(<"$stamp")" = "${wheels[*]}" ] || return 1
  local f
  for f in "${wheel_files[@]}"; do [ -e "$deps/$f" ] || return 1; done
}

# clang-sys (bindgen) searches these directories for these names; see its build/common.rs.
libclang_ok() {
  local dir f
  local dirs=("${LIBCLANG_PATH:-/nonexistent}")
  for dir in "$sysroot"/usr/lib/llvm-*/lib "$sysroot"/usr/lib/x86_64-linux-gnu "$sysroot"/usr/lib64 \
    "$sysroot"/usr/lib "$sysroot"/usr/local/lib; do
    dirs+=("$dir")
  done
  for dir in "${dirs[@]}"; do
    for f in "$dir"/libclang.so "$dir"/libclang.so.[0-9]* "$dir"/libclang-[0-9]*.so "$dir"/libclang-[0-9]*.so.[0-9]*; do
      [ -e "$f" ] && return 0
    done
  done
  return 1
}

next_ok() { [ -f "$next_dir/.installed" ] && [ "$(<"$next_dir/.installed")" = "$next_wheel" ] && [ -e "$next_file" ]; }

# Prints each missing item: "wheels", "nvshmem-next" or a Debian package name.
missing() {
  wheels_ok || echo wheels
  next_ok || echo nvshmem-next
  command -v mpicc >/dev/null 2>&1 || printf '%s\n' libopenmpi-dev openmpi-bin
  libclang_ok || echo libclang-dev
}

if [ "${1:-}" = --check ]; then
  missing
  exit 0
fi

need=()
install_wheels=0
install_next=0
while read -r item; do
  case "$item" in
    wheels) install_wheels=1 ;;
    nvshmem-next) install_next=1 ;;
    ?*) need+=("$item") ;;
  esac
done < <(missing)

if [ "$install_wheels" = 1 ]; then
  echo "deps: installing ${wheels[*]} into $deps" >&2
  rm -rf "$deps"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$deps" "${wheels[@]}" >&2
  echo "${wheels[*]}" >"$stamp"
  wheels_ok || { echo "deps: the wheels installed, but a file pgas needs is missing from $deps" >&2; exit 1; }
fi

if [ "$install_next" = 1 ]; then
  echo "deps: installing $next_wheel into $next_dir" >&2
  rm -rf "$next_dir"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$next_dir" "$next_wheel" >&2
  echo "$next_wheel" >"$next_dir/.installed"
  next_ok || { echo "deps: $next_wheel installed, but $next_file is missing" >&2; exit 1; }
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing Debian packages ${need[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
  left=$(missing | grep -v '^wheels$' || true)
  if [ -n "$left" ]; then
    echo "deps: still missing after apt-get install: $(echo "$left" | tr '\n' ' ')" >&2
    exit 1
  fi
fi

echo "export PGAS_CUDA_HOME='$deps/nvidia/cu13'"
echo "export PGAS_NVSHMEM_HOME='$deps/nvidia/nvshmem'"
echo "export PGAS_NVSHMEM_HOME_NEXT='$next_dir/nvidia/nvshmem'"
