#!/usr/bin/env bash
# The test command (README.md): installs what the CPU tests need, then runs every test of the
# workspace with all features. Needs no GPU; the GPU suite is scripts/gpu-suite.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/deps.sh)"
cargo test --workspace --all-features "$@"
