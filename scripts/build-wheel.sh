#!/usr/bin/env bash
# Builds pgas's Python wheel (python/: the package pgas and its native module pgas._pgas) with
# maturin into OUTDIR: one manylinux abi3 wheel for every CPython from 3.9, installable where
# there is no Rust (`pip install pgas-*.whl`, or `pip install 'pgas-*.whl[cu13]'` for NVRTC and
# NVSHMEM too). PROFILE is cargo's: release (the default) or dev (the tests: it reuses their
# build). maturin comes from PyPI into a venv of its own, .deps/py-build (made when missing:
# Debian's python3-venv is installed first where `python3 -m venv` fails).
#
# Usage: scripts/build-wheel.sh OUTDIR [release|dev]
set -euo pipefail
out="${1:?usage: scripts/build-wheel.sh OUTDIR [release|dev]}"
profile="${2:-release}"
cd "$(dirname "$0")/.."
venv=.deps/py-build
if ! "$venv/bin/maturin" --version >/dev/null 2>&1; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
      pyver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
      $sudo apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv "python$pyver-venv" >&2 ||
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >&2
    fi
    rm -rf "$venv"
    python3 -m venv "$venv" || {
      echo "scripts/build-wheel.sh: \`python3 -m venv\` fails here. Fix: install Python's venv module" \
        "(Debian/Ubuntu: apt-get install python3-venv)." >&2
      exit 1
    }
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" >&2
fi
mkdir -p "$out"
rm -f "$out"/pgas-*.whl
strip=()
[ "$profile" = release ] && strip=(--strip)
"$venv/bin/maturin" build --quiet --profile "$profile" "${strip[@]}" \
  --manifest-path python/Cargo.toml --out "$out" >&2
ls "$out"/pgas-*.whl
