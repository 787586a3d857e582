#!/usr/bin/env bash
# The test command (README.md): installs what the CPU tests need, runs the style gates, then runs
# every test of the workspace (every feature but `gpu`: see "test" below). Needs no GPU; the GPU
# suite is scripts/gpu-suite.sh.
# CONTRIBUTING.md describes each step.
#
# The gates, in order (each fails the run):
#   fmt     cargo fmt --all --check
#   nvrtc   tests/nvrtc (every generated kernel through NVRTC and nvJitLink), built first and
#           started in a process of its own, beside every later step, waited for at the end
#   3.8     the tests/nvrtc tests of what the NVSHMEM version changes, against NVSHMEM 3.8.0's
#           headers, likewise in a process of its own (NVRTC compiles one program at a time
#           in a process, so this is how the CPUs the cargo steps leave get work)
#   clippy  cargo clippy --workspace --all-targets --all-features -- -D warnings
#           (with the [workspace.lints] of Cargo.toml: every unsafe block has a SAFETY note)
#   doc     RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps
#   test    cargo test --workspace --features mpi "$@", tests/nvrtc's tests skipped (every
#           feature but `gpu`, which adds only tests/gpu_suite and the benchmarks: programs that
#           without a GPU print that they skipped, so clippy's check of them is what CI can do)
#   python  the wheel (scripts/build-wheel.sh: maturin) installed into a throwaway venv, then
#           pytest python/tests/test_cpu.py, test_nvshmem_cpu.py, test_kernel_cpu.py and
#           test_numba_cpu.py (with numba-cuda and CUDA 13.0's NVVM), stubtest of the type
#           stubs, mypy of the package
# rustfmt and clippy are detected by running `cargo fmt --version` and `cargo clippy --version`;
# when either is missing and rustup exists, `rustup component add rustfmt clippy` installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/deps.sh)"
# Debug info as line tables only (file and line in backtraces, no variables): the test build,
# the UI tests' builds and the wheel's (which reuses the test build) compile and link about a
# quarter faster than with full debug info.
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

step() { printf '\n== [%d s] %s\n' "$SECONDS" "$*" >&2; }

# The exact commands the gates run, not a look-alike (a rustfmt binary on PATH is not `cargo fmt`).
have_tools() { cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; }
if ! have_tools; then
  if command -v rustup >/dev/null 2>&1; then
    step "installing rustfmt and clippy (rustup component add rustfmt clippy)"
    rustup component add rustfmt clippy || true  # judged by have_tools below
  fi
  if ! have_tools; then
    missing=()
    cargo fmt --version >/dev/null 2>&1 || missing+=("cargo fmt (rustfmt)")
    cargo clippy --version >/dev/null 2>&1 || missing+=("cargo clippy (clippy)")
    how="rustup component add rustfmt clippy failed"
    command -v rustup >/dev/null 2>&1 || how="rustup is not installed"
    echo "scripts/test.sh: the style gates need $(IFS=,; echo "${missing[*]}" | sed 's/,/ and /'), which" \
      "cannot run here ($how). Fix: install the toolchain's rustfmt and clippy components" \
      "(rustup component add rustfmt clippy, or a distribution's rustfmt and rust-clippy packages)." >&2
    exit 1
  fi
fi

# The python step's venv and test packages (see that step), installed in the background from
# after clippy on: downloads and unpacking beside the Rust steps. Where `python3 -m venv` fails
# there (no python3-venv yet), the step makes the venv after scripts/build-wheel.sh installed it.
# Numba-CUDA and the NVVM, NVRTC and nvJitLink of CUDA 13.0 (pgas's NVRTC's) are for
# test_numba_cpu.py: Numba kernels calling pgas.device.numba compiled and linked with no GPU.
py_pkgs=(pytest mypy numba-cuda==0.30.4 numpy==2.2.6 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
  nvidia-nvjitlink==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88)
pytmp=$(mktemp -d)
# At exit, what runs in the background is stopped and the temporary files go.
cleanup() {
  for pid in "${nvrtc_pid:-}" "${next_pid:-}" "${py_pid:-}"; do
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$pytmp"
}
trap cleanup EXIT
py_venv() {
  python3 -m venv "$pytmp/venv" &&
    "$pytmp/venv/bin/python" -m pip install -q --no-compile --disable-pip-version-check "${py_pkgs[@]}"
}

step "fmt: cargo fmt --all --check"
cargo fmt --all --check

# The NVRTC tests (tests/nvrtc) first, so that they run beside every later step: they are most
# of the test command's time, nearly all of it NVRTC compiling one program at a time in a
# process (docs/jit.md), so a process of their own leaves the other CPU to cargo. Built with
# the test step's features (--workspace: the build below reuses what this one compiles).
step "nvrtc: build (cargo test --workspace --features mpi --test nvrtc --no-run)"
nvrtc_json="$pytmp/nvrtc.json"
cargo test --workspace --features mpi --test nvrtc --no-run \
  --message-format=json-render-diagnostics >"$nvrtc_json"
nvrtc_bin=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "nvrtc" and m.get("executable"):
        print(m["executable"])' "$nvrtc_json")
if [ -z "$nvrtc_bin" ]; then
  echo "scripts/test.sh: cargo built no tests/nvrtc executable" >&2
  exit 1
fi
# Its tests, by name: `cargo test` below skips exactly these (they run here instead).
mapfile -t nvrtc_tests < <("$nvrtc_bin" --list --format terse | sed -n 's/: test$//p')
if [ "${#nvrtc_tests[@]}" -eq 0 ]; then
  echo "scripts/test.sh: tests/nvrtc lists no tests" >&2
  exit 1
fi
# At normal priority: it is the longest step, mostly one CPU's, so it starts first and the
# cargo steps share the CPUs with it (at nice 19 it waited for them, then ran alone on one CPU
# for four minutes at the end). Waited for at the end, its log printed then.
nvrtc_log="$pytmp/nvrtc.log"
step "nvrtc: started in the background (tests/nvrtc: ${#nvrtc_tests[@]} tests)"
"$nvrtc_bin" >"$nvrtc_log" 2>&1 &
nvrtc_pid=$!
# The newest NVSHMEM pgas supports (3.8.0, installed by deps.sh beside the pinned 3.4.5): what
# can differ between the versions compiles against its headers too, inline and link-time: the
# preludes, every intrinsic row (the corpus folders cover each), the NVSHMEM library of every
# wrapper, and the register cap of a collective's two builds (tests/nvrtc/corpus.rs, `corpus`,
# `variants` and `link_objects`, say why that is all: the collective objects, the checked
# variants and the tests of the cache's and the link's mechanics would repeat what does not
# depend on the version). At the lowest
# priority (nice 19): it fills the CPU time the other steps leave, and it does not starve
# tests/jit_helpers.rs's background helper, which runs at nice 19 by design and which a
# process at nice 0 on every CPU held up for over a minute.
next_log="$pytmp/nvshmem-3.8.log"
next_tests=(corpus::every_corpus_kernel_compiles_without_warnings
  corpus::every_linkable_kernel_links_against_the_nvshmem_library
  corpus::both_builds_of_a_collective_kernel_keep_to_its_objects_register_cap)
step "3.8: started in the background (PGAS_NVSHMEM_HOME=\$PGAS_NVSHMEM_HOME_NEXT nice -n 19 tests/nvrtc ${next_tests[*]})"
PGAS_NVSHMEM_HOME="$PGAS_NVSHMEM_HOME_NEXT" PGAS_CORPUS_DIRS=tests/corpus,tests/gpu_suite/kernels \
  PGAS_CORPUS_VARIANTS=plain PGAS_LINK_OBJECTS=0 nice -n 19 "$nvrtc_bin" --exact "${next_tests[@]}" \
  >"$next_log" 2>&1 &
next_pid=$!

step "clippy: cargo clippy --workspace --all-targets --all-features -- -D warnings"
cargo clippy --workspace --all-targets --all-features -- -D warnings
# After clippy, whose checks it slowed by a fifth when it ran beside them (unpacking the wheels).
py_venv >"$pytmp/venv.log" 2>&1 &
py_pid=$!
step "doc: RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --all-features --no-deps"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps
# tests/nvrtc's tests by their full names (module path included, so no other test's name
# contains one), after the harness options given to test.sh if any (`-- ...`).
skips=()
for t in "${nvrtc_tests[@]}"; do skips+=(--skip "$t"); done
case " $* " in *" -- "*) ;; *) skips=(-- "${skips[@]}") ;; esac
step "test: cargo test --workspace --features mpi${*:+ $*} (tests/nvrtc's tests skipped: they run in the background)"
cargo test --workspace --features mpi "$@" "${skips[@]}"
# The Python package as a user installs it: its manylinux abi3 wheel, built by maturin
# (scripts/build-wheel.sh, dev profile: it reuses what `cargo test` just built), installed into a
# fresh venv, then the CPU pytest tests; then its type stubs checked against the module
# (mypy's stubtest) and the package's Python code type-checked (mypy). `python3 -m venv` is
# detected by running it (scripts/build-wheel.sh installs Debian's python3-venv when missing).
step "python: the wheel (scripts/build-wheel.sh) into a fresh venv, pytest python/tests/test_cpu*.py, stubtest, mypy"
wheel=$(scripts/build-wheel.sh "$pytmp/wheel" dev)
if ! wait "$py_pid"; then
  # The venv could not be made in the background (its log says why): here, once build-wheel.sh
  # has installed python3-venv where it was missing.
  cat "$pytmp/venv.log" >&2
  rm -rf "$pytmp/venv"
  py_venv
fi
py_pid=
"$pytmp/venv/bin/python" -m pip install -q --no-compile --disable-pip-version-check "$wheel"
# From another folder, so that the installed package is what `import pgas` finds; with a
# kernel cache of its own, so that what the tests compile stays out of the user's.
tests="$PWD/python/tests"
(cd "$pytmp" && PGAS_CACHE_DIR="$pytmp/kernel-cache" "$pytmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$tests/test_cpu.py" "$tests/test_nvshmem_cpu.py" "$tests/test_kernel_cpu.py" "$tests/test_numba_cpu.py")
allow="$PWD/python/stubtest-allowlist.txt"
(cd "$pytmp" && "$pytmp/venv/bin/python" -m mypy.stubtest pgas._pgas --allowlist "$allow")
"$pytmp/venv/bin/python" -m mypy --ignore-missing-imports python/pgas

# The background runs: each one's log, and the first failure ends the command.
wait_for() {  # name, pid, log
  local status=0
  step "$1: waiting"
  wait "$2" || status=$?
  cat "$3" >&2
  if [ "$status" -ne 0 ]; then
    echo "scripts/test.sh: $1 failed (above)" >&2
    exit "$status"
  fi
}
wait_for "nvrtc (tests/nvrtc)" "$nvrtc_pid" "$nvrtc_log"
nvrtc_pid=
wait_for "3.8 (tests/nvrtc against NVSHMEM 3.8.0)" "$next_pid" "$next_log"
next_pid=
step "done"
