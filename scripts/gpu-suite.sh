#!/usr/bin/env bash
# The GPU run, in one script, for a GPU test machine (no Rust there): runs the binaries that
# scripts/build-device.sh put in .device/bin and writes full logs to OUTDIR:
#   env.log        nvidia-smi, the environment, `pgas doctor`
#   suite.log      the GPU test suite on `pgas-run -n 4`, `pgas-run -n 2` (GPUs shared under CUDA MPS
#                  where there are fewer), 1 PE; the differential test (`--differential`) on 2 PEs;
#                  the start-up from a unique id in a file (`--uid-bootstrap OUTDIR`) on 2 and 1 PE
#   traps.log      the checked variant's traps (bad index, bad local-array index, bad pe, ...), one process each
#   faults.log     rank death under pgas-run and mpirun (a PE panics, aborts or is killed)
#   sanitizer.log  compute-sanitizer memcheck, racecheck, synccheck (SKIP where it cannot attach)
#   examples.log   hello_ring on 1 PE, `pgas-run -n 2`, `mpirun -np 2`; NVSHMEM on MPI
#                  sub-communicators (mpi_subcomm, `mpirun -np 2` or 4); the gallery; the Python
#                  module on 1 and 2 PEs (python/tests/dlpack_torch.py and test_gpu.py, with torch)
#   bench.log      dsl_vs_cuda (2 PEs where 2 GPUs), jit_costs (1 PE), gemm and gemm_shapes vs cuBLAS (1 PE),
#                  coll and halo vs NCCL (2 PEs where 2 GPUs), all-gather + GEMM (ag_gemm),
#                  GEMM + reduce-scatter (gemm_rs) and all-reduce + RMSNorm (allreduce_rmsnorm_bench),
#                  every GPU
#   nccl.log       NCCL through torch.distributed; PyTorch async-TP (scripts/async_tp_bench.py)
#   figures.jsonl  every benchmark figure, one JSON object a line
#   summary.txt    one line per step (ok/FAIL/SKIP and key figures), also printed last
# Every step has a time limit and the whole stays within 9 minutes (PGAS_SUITE_BUDGET seconds); a failing step never stops
# the ones after it. The rank-death and compute-sanitizer steps come last (about 40 s and at most 115 s), so
# a tight budget skips them first. Exit status: 0 when every step that ran passed.
#
# Usage: scripts/gpu-suite.sh OUTDIR [suite|rest|faults|sanitize|coll|fused|soak2|soak4|python|pe8|attention|torch|quick]
#   suite:    only `pgas doctor`, the GPU test suite (4, 2, 1 PEs) and the differential test: for
#             a second NVSHMEM version (see .device/nvshmem.tar.xz below).
#   rest:     only `pgas doctor` and the default run's middle part: the traps, the examples, the
#             gallery, the Python module (as `python`) and the one-GPU benchmarks (dsl_vs_cuda,
#             host_ops, jit_costs, jit_helpers, gemm, gemm_shapes).
#   faults:   only `pgas doctor` and the last part (rank death, the unwritable cache, compute-sanitizer),
#             for a second device call when the whole does not fit one.
#   sanitize: only `pgas doctor` and compute-sanitizer over the WHOLE suite (1 PE) and every gallery
#             example (1 PE), each tool of PGAS_SANITIZE_TOOLS (default: memcheck racecheck
#             synccheck), as parallel jobs; PGAS_SANITIZE_ONLY (a regex over job names) splits
#             the sweep over calls. PGAS_SAVE_CACHE=1 (any mode) returns the warmed kernel cache
#             (kernel-cache.tar.gz in OUTDIR); a later call starts from it with
#             PGAS_CACHE_TAR=FILE PGAS_SANITIZE_WARM=0. docs/faults.md lists the variables.
#   coll:     only `pgas doctor` and the collectives against NCCL (benches/coll.rs, nccl_bench.py)
#             and PyTorch symm_mem's all-reduce (symm_mem_bench.py).
#   fused:    only `pgas doctor` and issue 10's workloads against their baselines (halo, moe,
#             ag_gemm, gemm_rs, allreduce_rmsnorm_bench, async_tp_bench.py), and context-parallel
#             attention against NCCL + cuDNN (cp_attention, cp_attention_sdpa.py).
#   python:   only `pgas doctor` and the Python steps of the default run (the wheel installed
#             with pip, python/tests/test_gpu.py, Numba kernels through pgas.device.numba,
#             NVSHMEM4Py's examples on pgas.nvshmem.core, on 1 and 2 PEs).
#   soak2, soak4: only `pgas doctor` and a long differential test (50,000 calls on 2 PEs, 20,000
#             on 4 PEs; GPUs shared under CUDA MPS where there are fewer), each PE's host and
#             GPU memory at the start, once warm and at the end; one device call each
#             (PGAS_SOAK_CALLS: another number of calls, for a shorter look at the memory).
#   pe8:      only `pgas doctor`, the GPU test suite on 8 PEs and the differential test on 8 PEs
#             (4,000 calls), one PE a GPU on 8 GPUs, else sharing the GPUs present under CUDA MPS:
#             correctness on a full node's PE count (issue 49) on any machine.
#   attention: only `pgas doctor`, the attention cases of the GPU suite (against the f32 GPU
#             reference) and benches/attention.rs against torch's scaled_dot_product_attention
#             (cuDNN and flash backends, scripts/attention_sdpa.py) on the shapes the bench's
#             figures name, 1 PE, after the attention cases on 4 and 2 PEs (the
#             context-parallel forms) and examples/long_context_attention (ring and all-to-all
#             forms against one-PE attention) on 1, 2 and 4 PEs.
#   quick:    only `pgas doctor`, the whole suite on 4 PEs from the empty cache (the cold compile),
#             `coll/ ops/ generic/` on 2 PEs and 1 PE, the differential test on 2 PEs (4,000
#             calls, 50 s) and the gallery: a restructuring's check in one short call (about 6
#             minutes on one H200).
#   torch:    only `pgas doctor` and pgas's library on torch tensors: the wheel installed with
#             pip, python/tests/test_torch_ops.py (pgas.gemm, pgas.coll, pgas.ops as torch custom
#             ops, torch.compile, CUDA graphs, bad input) and python/examples/tp_mlp.py (a
#             tensor-parallel MLP block against torch), on 1, 2 and 4 PEs; then the host time of
#             the same library calls from Rust (benches/host_ops.rs) and from Python
#             (python/benches/torch_ops.py), 1 PE.
# The default (all) is `suite`, `rest` and `faults` in one run. On one GPU it does not fit one
# device call (9 minutes): run `OUT suite`, `OUT rest` and `OUT faults` as three calls.
set -uo pipefail
outarg="${1:?usage: scripts/gpu-suite.sh OUTDIR [suite|rest|faults|sanitize|coll|fused|soak2|soak4|python|pe8|attention|torch|quick]}"
only="${2:-all}"
case "$only" in all | suite | rest | faults | sanitize | coll | fused | soak2 | soak4 | python | pe8 | attention | torch | quick) ;; *)
  echo "usage: scripts/gpu-suite.sh OUTDIR [suite|rest|faults|sanitize|coll|fused|soak2|soak4|python|pe8|attention|torch|quick] (not '$only')" >&2
  exit 2
  ;;
esac
cd "$(dirname "$0")/.."
root=$(pwd)
mkdir -p "$outarg"
out=$(cd "$outarg" && pwd)
# What build-device.sh made (PGAS_DEVICE_DIR: another such folder; tests/gpu_suite_script.rs
# points it at stubs to dry-run this script on a machine without a GPU).
dev="${PGAS_DEVICE_DIR:-$root/.device}"
bin="$dev/bin"
start=$(date +%s)
deadline=$((start + ${PGAS_SUITE_BUDGET:-530}))

# What the test machines require (shared/notes/gpu-test-machines.md): NVLink multicast off for
# every process, mpirun as root.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONUNBUFFERED=1
# The python3 that has the nvidia-nvshmem wheel (pgas finds NVSHMEM through it) and torch.
if [ -x /opt/torch/.venv/bin/python3 ]; then export PATH="/opt/torch/.venv/bin:$PATH"; fi
# Another NVSHMEM than the machine's, packed by build-device.sh (PGAS_DEVICE_NVSHMEM): headers,
# host library and bootstrap plugins. Its device bitcode is too large to carry, so kernels
# compile inline (PGAS_JIT_LTO=off).
# (Unpacked by Python's tarfile: the machine's tar may lack xz.)
if [ -f "$dev/nvshmem.tar.xz" ]; then
  rm -rf /tmp/pgas-nvshmem && mkdir -p /tmp/pgas-nvshmem
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$dev/nvshmem.tar.xz" /tmp/pgas-nvshmem
  export PGAS_NVSHMEM_HOME=/tmp/pgas-nvshmem/nvshmem PGAS_JIT_LTO=off
fi
# One kernel cache for every step, outside OUTDIR (only a few files come back from there). It
# starts empty, as on a fresh machine, so the first suite step records the cold compile
# (PGAS_KEEP_CACHE=1 keeps an earlier run's kernels).
export PGAS_CACHE_DIR="${PGAS_CACHE_DIR:-/tmp/pgas-gpu-suite-cache}"
# The CUDA driver's own cache off too: NVRTC 12.9 and later keep compiles there, which would make
# a second run on the same machine look warm whatever pgas's cache holds.
export CUDA_CACHE_DISABLE=1
[ "${PGAS_KEEP_CACHE:-0}" = 1 ] || rm -rf "$PGAS_CACHE_DIR"
mkdir -p "$PGAS_CACHE_DIR"
# PGAS_CACHE_TAR=FILE: start from the kernels an earlier call saved (PGAS_SAVE_CACHE below).
if [ -n "${PGAS_CACHE_TAR:-}" ]; then tar -xzf "$PGAS_CACHE_TAR" -C "$PGAS_CACHE_DIR"; fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
machine=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
# The commit the binaries were built from (build-device.sh records it; a copied tree's .git may be
# stale).
commit=$(cat "$dev/COMMIT" 2>/dev/null || git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
summary=()
failed=0

note() { summary+=("$1"); echo "== $1"; }

# step NAME LOG MAX_SECONDS CMD...: runs CMD with a time limit of MAX_SECONDS or what is left of
# the budget, appending its output to LOG; leaves the output in $last and the status in $rc.
step() {
  local name=$1 log=$2 max=$3
  shift 3
  local left=$((deadline - $(date +%s)))
  local limit=$((max < left ? max : left))
  last=""
  if [ "$limit" -lt 10 ]; then
    rc=-1
    note "SKIP $name (out of time)"
    return
  fi
  echo "===== $name (limit ${limit}s): $*" >>"$out/$log"
  local tmp
  tmp=$(mktemp)
  local t0
  t0=$(date +%s)
  timeout -k 5 "$limit" "$@" >"$tmp" 2>&1
  rc=$?
  cat "$tmp" >>"$out/$log"
  echo "===== $name: exit $rc after $(($(date +%s) - t0))s" >>"$out/$log"
  last=$(cat "$tmp")
  rm -f "$tmp"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then last="$last
TIMEOUT after ${limit}s"; fi
}

# verdict NAME DETAIL: ok when $rc is 0, else FAIL (counted); SKIP when the program said it
# skipped (no GPU). Output is searched with `grep -q PATTERN <<<"$last"`, never through a pipe:
# under pipefail, `echo "$last" | grep -q` fails when grep exits at a first-line match before
# echo wrote the rest (SIGPIPE), which made a skipped step an "ok" now and then.
verdict() {
  [ "$rc" = -1 ] && return # step() already noted the skip
  if [ "$rc" = 0 ] && grep -q "skipped: no GPU" <<<"$last"; then
    note "SKIP $1 (the program found no GPU)"
  elif [ "$rc" = 0 ]; then
    note "ok   $1${2:+: $2}"
  else
    failed=$((failed + 1))
    local why="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="timed out"
    note "FAIL $1 ($why)${2:+: $2}"
  fi
}

{
  echo "date: $(date -u +%FT%TZ)  commit: $commit  machine: ${gpus} x ${machine:-no GPU}"
  nvidia-smi 2>&1
  nvidia-smi topo -m 2>&1
  echo "python3: $(command -v python3)"
  env | grep -E '^(NVSHMEM|NCCL|PGAS|CUDA|LD_LIBRARY)' | sort
  ls -l "$bin"
} >"$out/env.log" 2>&1
note "run on ${gpus} x ${machine:-no GPU}, commit $commit, $(date -u +%FT%TZ)"

step "pgas doctor" env.log 30 "$bin/pgas" doctor
verdict "pgas doctor" "$(echo "$last" | tail -1)"
# PGAS_SAVE_CACHE=1: the kernel cache at the end of the run (every mode) as
# OUTDIR/kernel-cache.tar.gz, for a later call's PGAS_CACHE_TAR (a GPU session's calls each start
# on a bare machine).
save_cache() {
  [ "${PGAS_SAVE_CACHE:-0}" = 1 ] || return 0
  tar -czf "$out/kernel-cache.tar.gz" -C "$PGAS_CACHE_DIR" .
  note "saved the kernel cache: $(du -h "$out/kernel-cache.tar.gz" | cut -f1) in kernel-cache.tar.gz"
}
finish() {
  save_cache
  note "total $(($(date +%s) - start))s; $failed step(s) failed"
  printf '%s\n' "${summary[@]}" >"$out/summary.txt"
  echo
  echo "===== summary ($out)"
  cat "$out/summary.txt"
  [ "$failed" = 0 ]
  exit
}
if [ "$gpus" = 0 ]; then
  note "SKIP every GPU step: nvidia-smi lists no GPU here"
  finish
fi

# The GPU test suite. PE 0's last line is `gpu_suite: N passed, M failed` (pgas-run prefixes
# each line with `[rank N] `).
suite() {
  local n="$1 PE${suite_note:-}"
  shift
  step "gpu_suite $n" suite.log "$@"
  local failing
  failing=$(echo "$last" | sed -n 's/.*gpu_suite: FAIL \([^ ]*\) on PE.*/\1/p' | tr '\n' ' ')
  # The first run starts from an empty kernel cache: its compile time is the cold one.
  local compiled
  compiled=$(echo "$last" | grep -oE '[0-9]+ kernels compiled or loaded in [0-9.]+ s' | head -1)
  verdict "gpu_suite $n" "$(echo "$last" | grep -E 'gpu_suite: ([0-9]+ passed|aborted)' | tail -1)${compiled:+; $compiled}${failing:+ (failed: $failing)}"
}
# N PEs: one per GPU where there are N GPUs, else sharing the GPUs under CUDA MPS
# (`pgas-run --share-gpus`, docs/runtime.md): results are checked the same way, timings mean
# nothing. `share_begin N` starts the MPS daemon where needed and sets $share (the pgas-run flag,
# or empty), failing where N PEs cannot run; `share_end` stops the daemon: it runs only for those
# steps.
share=""
mps_on=0
share_begin() {
  share=""
  [ "$gpus" -ge "$1" ] && return 0
  command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d 2>/dev/null || return 1
  sleep 1
  mps_on=1 share="--share-gpus"
}
share_end() {
  [ "$mps_on" = 1 ] || return 0
  echo quit | nvidia-cuda-mps-control
  sleep 1
  mps_on=0
}
pes() {
  local n=$1 max=$2
  shift 2
  if share_begin "$n"; then
    suite_note="${share:+ (sharing $gpus GPU)}" suite "$n" "$max" "$bin/pgas-run" -n "$n" $share -- "$@"
    share_end
  else
    note "SKIP gpu_suite $n PE (${gpus} GPU and no CUDA MPS daemon to share one)"
  fi
}
# Benchmarks, figures to figures.jsonl.
: >"$out/figures.jsonl"
figures() { echo "$last" | sed -n 's/^.*FIGURE //p' | tee -a "$out/figures.jsonl"; }
brief() {
  # "name=value unit" for the figures whose name contains one of the |-separated words in $1.
  python3 -c '
import json, sys
words = sys.argv[1].split("|")
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print("; ".join("%s=%s %s" % (r["name"], r["value"], r["unit"]) for r in rows if any(w in r["name"] for w in words)))
' "$1"
}
# The Python package, from the wheel scripts/build-device.sh put in .device/python, installed
# with pip as users install it (into a folder of its own: the machine's venv is left alone):
# pgas tensors handed to PyTorch and back without a copy (python/tests/dlpack_torch.py), every
# operation of the API checked through torch (python/tests/test_gpu.py: with pytest where the
# python3 has it, else as a script), and NVSHMEM4Py's documented examples on pgas.nvshmem.core
# (python/examples/nvshmem4py, under mpirun: they start from an mpi4py communicator), on 1 PE
# and on 2; then python/benches/host_ops.py on pgas and on NVSHMEM4Py in the same job. The
# extra wheels build-device.sh carried (.device/python/extras: a numpy Numba supports, which
# goes first on the examples' path, and NVSHMEM4Py) are installed into folders of their own.
python_steps() {
  local wheel pyhome=/tmp/pgas-python pyt="$root/python/tests" ex="$root/python/examples/nvshmem4py"
  wheel=$(ls "$dev"/python/pgas-*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ] || ! python3 -c "import torch" 2>/dev/null; then
    note "SKIP python (no wheel in .device/python or no torch)"
    return
  fi
  rm -rf "$pyhome"
  step "python: pip install the wheel" examples.log 60 python3 -m pip install -q --no-deps --no-index --target "$pyhome" "$wheel"
  verdict "python: pip install $(basename "$wheel")"
  [ "$rc" = 0 ] || return
  local expath="$pyhome" extra
  extra=$(ls "$dev"/python/extras/numpy-*.whl 2>/dev/null | head -1)
  if [ -n "$extra" ] && python3 -m pip install -q --no-deps --no-index --target /tmp/pgas-numpy-compat "$extra"; then
    expath="/tmp/pgas-numpy-compat:$pyhome"
  fi
  if python3 -c "import pytest" 2>/dev/null; then
    api=(python3 -m pytest -x -q -rs -p no:cacheprovider "$pyt/test_gpu.py")
    api_ok() { echo "$last" | grep -oE '[0-9]+ passed[^=]*' | sort -u | tr '\n' ' '; }
  else
    api=(python3 "$pyt/test_gpu.py")
    api_ok() { echo "$last" | grep -o 'test_gpu: ok.*' | tail -1; }
  fi
  step "python dlpack 1 PE" examples.log 60 env PYTHONPATH="$pyhome" python3 "$pyt/dlpack_torch.py"
  verdict "python/torch DLPack 1 PE" "$(echo "$last" | grep -o 'test_dlpack_torch: ok.*' | tail -1)"
  step "python api 1 PE" examples.log 150 env PYTHONPATH="$pyhome" "${api[@]}"
  verdict "python API (test_gpu.py) 1 PE" "$(api_ok)"
  # Numba-CUDA kernels calling pgas.device.numba (numba-cuda wants the numpy carried beside it).
  local numba_ok=0
  python3 -c "import numba.cuda" 2>/dev/null && numba_ok=1
  if [ "$numba_ok" = 1 ]; then
    step "python numba 1 PE" examples.log 120 env PYTHONPATH="$expath" python3 "$pyt/numba_device.py"
    verdict "Numba kernels through pgas.device.numba, 1 PE" "$(echo "$last" | grep -oE 'numba_device(\[pe 0\]: first launch.*|: ok.*)' | tr '\n' ' ')"
  else
    note "SKIP Numba kernels (no numba-cuda)"
  fi
  local example
  for example in tutorial interop; do
    step "NVSHMEM4Py $example 1 PE" examples.log 120 env PYTHONPATH="$expath" python3 "$ex/$example.py"
    verdict "NVSHMEM4Py's $example on pgas.nvshmem.core, 1 PE" "$(echo "$last" | grep -o "$example: ok.*" | tail -1)"
  done
  if share_begin 2; then
    step "python dlpack 2 PE" examples.log 90 env PYTHONPATH="$pyhome" \
      "$bin/pgas-run" -n 2 $share -- python3 "$pyt/dlpack_torch.py"
    verdict "python/torch DLPack pgas-run -n 2 $share" "$(echo "$last" | grep -o 'test_dlpack_torch: ok.*' | tail -1)"
    step "python api 2 PE" examples.log 150 env PYTHONPATH="$pyhome" \
      "$bin/pgas-run" -n 2 $share -- "${api[@]}"
    verdict "python API (test_gpu.py) pgas-run -n 2 $share" "$(api_ok)"
    if [ "$numba_ok" = 1 ]; then
      step "python numba 2 PE" examples.log 150 env PYTHONPATH="$expath" \
        "$bin/pgas-run" -n 2 $share -- python3 "$pyt/numba_device.py"
      verdict "Numba kernels through pgas.device.numba, pgas-run -n 2 $share" "$(echo "$last" | grep -oE 'numba_device: ok.*' | sort -u)"
    fi
    # A PE that raises in the middle of a collective: pgas-run ends the job within 5 s and
    # names it (the raising PE prints the time of its raise, Unix ms).
    step "python: a PE raises in a collective" examples.log 60 env PYTHONPATH="$pyhome" \
      "$bin/pgas-run" -n 2 $share -- python3 "$pyt/raise_in_collective.py"
    if [ "$rc" != -1 ] && ! grep -q "skipped: no GPU" <<<"$last"; then
      local raised ended
      ended=$(echo "$last" | sed -n 's/.*every rank ended at \([0-9]*\) ms.*/\1/p' | head -1)
      ended=${ended:-$(date +%s%3N)}
      raised=$(echo "$last" | sed -n 's/.*raises at \([0-9]*\) ms.*/\1/p' | head -1)
      if [ -z "$raised" ] || [ "$rc" = 0 ] || grep -q "raise_in_collective: FAIL" <<<"$last"; then
        rc=1
      elif [ $((ended - raised)) -ge 5000 ] || ! grep -q "pgas-run: rank 1 " <<<"$last"; then
        rc=1
      else
        rc=0
      fi
      verdict "python: a PE raises in a collective, pgas-run -n 2${share:+ (sharing $gpus GPU)}" \
        "${raised:+ended $((ended - raised)) ms after the raise; }$(echo "$last" | grep -m1 "pgas-run: rank 1 " | cut -c1-100)"
    fi
    local mps_share=()
    [ -n "$share" ] && mps_share=(-x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50)
    for example in tutorial interop; do
      if command -v mpirun >/dev/null && python3 -c "import mpi4py" 2>/dev/null; then
        step "NVSHMEM4Py $example 2 PE" examples.log 150 mpirun -np 2 --bind-to none "${mps_share[@]}" \
          -x PYTHONPATH="$expath" -x NVSHMEM_DISABLE_NVLS python3 "$ex/$example.py"
        verdict "NVSHMEM4Py's $example on pgas.nvshmem.core, mpirun -np 2${share:+ (sharing $gpus GPU)}" \
          "$(echo "$last" | grep -o "$example: ok.*" | sort -u | tr '\n' ' ')"
      else
        note "SKIP NVSHMEM4Py's $example on 2 PEs (no mpirun or no mpi4py)"
      fi
    done
    share_end
  fi
  host_ops_vs_nvshmem4py "$pyhome"
}

# python/benches/host_ops.py: the same program on pgas and on NVSHMEM4Py (its wheel from
# .device/python/extras), one process each, on 1 PE and on 2 under mpirun; compare.py's table
# goes to bench.log and the ratios to the summary.
host_ops_vs_nvshmem4py() {
  local pyhome=$1 nv4py=/tmp/pgas-nvshmem4py wheel pes lib
  wheel=$(ls "$dev"/python/extras/nvshmem4py*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ] || ! python3 -m pip install -q --no-deps --no-index --target "$nv4py" "$wheel"; then
    note "SKIP host ops against NVSHMEM4Py (no NVSHMEM4Py wheel in .device/python/extras)"
    return
  fi
  for pes in 1 2; do
    local run=() results=""
    if [ "$pes" = 2 ]; then
      share_begin 2 || continue
      command -v mpirun >/dev/null || { share_end; continue; }
      run=(mpirun -np 2 --bind-to none -x NVSHMEM_DISABLE_NVLS -x PYTHONPATH)
      [ -n "$share" ] && run+=(-x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50)
    fi
    for lib in pgas nvshmem4py; do
      local path="$pyhome"
      [ "$lib" = nvshmem4py ] && path="$nv4py"
      step "host ops $lib $pes PE" bench.log 120 env PYTHONPATH="$path" "${run[@]}" \
        python3 "$root/python/benches/host_ops.py" --lib "$lib"
      results="$results
$last"
      verdict "host ops on $lib, $pes PE${share:+ (sharing $gpus GPU)}" "$(echo "$last" | grep -c '"us"') figures"
    done
    [ "$pes" = 2 ] && share_end
    echo "$results" | python3 "$root/python/benches/compare.py" | tee -a "$out/bench.log" >"$out/host-ops-$pes.md"
    note "host ops, pgas / NVSHMEM4Py, $pes PE: $(grep -E '^\| [a-z]' "$out/host-ops-$pes.md" | awk -F'|' '{gsub(/ /,"",$6); printf "%s=%s; ", $2, $6}')"
  done
}

# NCCL for the benchmarks that run it beside pgas: cudarc loads it as libnccl.so; PyTorch's wheel
# ships libnccl.so.2 only, so a link to it goes on the loader's path.
nccl_lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
if [ -n "$nccl_lib" ] && [ -e "$nccl_lib/libnccl.so.2" ]; then
  mkdir -p /tmp/pgas-nccl && ln -sf "$nccl_lib/libnccl.so.2" /tmp/pgas-nccl/libnccl.so
fi
if [ "$only" = python ]; then
  python_steps
  finish
fi

# The soak: the differential test at length (tests/gpu_suite/differential.rs), from a seed that is
# today's date; 0 mismatches and flat memory from the warm point to the end.
if [ "$only" = soak2 ] || [ "$only" = soak4 ]; then
  soak_pes=${only#soak}
  soak_calls=${PGAS_SOAK_CALLS:-$([ "$soak_pes" = 2 ] && echo 50000 || echo 20000)}
  if share_begin "$soak_pes"; then
    left=$((deadline - $(date +%s) - 20))
    step "soak $soak_pes PE" suite.log "$left" "$bin/pgas-run" -n "$soak_pes" $share -- "$bin/gpu_suite" --differential "$(date -u +%Y%m%d)" "$soak_calls" "$((left - 15))"
    share_end
    done_calls=$(echo "$last" | sed -n 's/.*differential: seed [0-9]*, \([0-9]*\) calls.*/\1/p' | tail -1)
    if [ "$rc" = 0 ] && [ "${done_calls:-0}" -lt "$soak_calls" ] && ! grep -q "skipped: no GPU" <<<"$last"; then
      rc=1 last="$last
the soak stopped at ${done_calls:-0} of $soak_calls calls (out of time)"
    fi
    verdict "soak $soak_pes PE${share:+ (sharing $gpus GPU)}" "$(echo "$last" | grep -oE 'differential: seed .*(mismatches|HUNG).*' | tail -1 | sed 's/: all_reduce.*refusals/: ... refusals/'); $(echo "$last" | grep -m1 -oE 'differential\[pe 0\]: memory .*')"
  else
    note "SKIP soak $soak_pes PE (${gpus} GPU and no CUDA MPS daemon to share one)"
  fi
  finish
fi

# The randomized differential test on PES PEs: CALLS calls drawn from today's date as the seed,
# drawing stops after SECONDS (the step's limit is a minute more).
differential() {
  local n=$1 calls=$2 secs=$3
  if share_begin "$n"; then
    step "differential $n PE" suite.log $((secs + 60)) "$bin/pgas-run" -n "$n" $share -- "$bin/gpu_suite" --differential "$(date -u +%Y%m%d)" "$calls" "$secs"
    share_end
    verdict "differential $n PE${share:+ (sharing $gpus GPU)}" "$(echo "$last" | grep -oE 'differential: seed .*(mismatches|HUNG).*' | tail -1)"
  else
    note "SKIP differential $n PE (${gpus} GPU and no CUDA MPS daemon to share one)"
  fi
}

# Quick: the cold suite on 4 PEs, the collectives and fused operations on 2 PEs and 1 PE, a
# short differential test, the gallery.
if [ "$only" = quick ]; then
  pes 4 240 "$bin/gpu_suite"
  pes 2 120 "$bin/gpu_suite" coll/ ops/ generic/
  differential 2 4000 50
  suite 1 90 "$bin/gpu_suite" coll/ ops/ generic/
  step "gallery" examples.log 150 env PGAS_BIN_DIR="$bin" "$root/scripts/gallery.sh"
  verdict "gallery" "$(echo "$last" | tail -1)"
  finish
fi

# Attention (pgas::attention): correctness against the f32 reference, then the speed beside
# torch's SDPA in the same job; the summary line gives the ratio to cuDNN per shape.
if [ "$only" = attention ]; then
  suite 1 240 "$bin/gpu_suite" hopper/ attention/
  # The context-parallel forms (ring, all-to-all) across PEs.
  pes 4 180 "$bin/gpu_suite" attention/
  pes 2 180 "$bin/gpu_suite" attention/
  for n in 1 2 4; do
    if share_begin "$n"; then
      step "long_context_attention $n PE" examples.log 180 "$bin/pgas-run" -n "$n" $share -- "$bin/long_context_attention"
      verdict "long_context_attention, pgas-run -n $n $share" "$(echo "$last" | grep -m1 -o 'PE 0: .*' | cut -c1-220)"
      share_end
    fi
  done
  step "attention bench" bench.log 240 "$bin/attention"
  pgas_figs=$(figures)
  verdict "attention bench" "$(echo "$pgas_figs" | brief 'causal|full|cold')"
  if ! python3 -c "import torch" 2>/dev/null; then
    note "SKIP attention_sdpa (no torch for python3)"
  else
    echo "$pgas_figs" >"$out/attention-shapes.jsonl"
    step "attention_sdpa" bench.log 240 python3 "$root/scripts/attention_sdpa.py" "$out/attention-shapes.jsonl"
    sdpa_figs=$(figures)
    verdict "attention_sdpa" "$(printf '%s\n%s\n' "$pgas_figs" "$sdpa_figs" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
pgas = {r["name"]: r["value"] for r in rows if r["bench"] == "attention"}
out = []
for r in rows:
    if r["bench"] == "attention_sdpa" and r["name"].endswith(" cudnn") and r["value"]:
        name = r["name"][: -len(" cudnn")]
        if pgas.get(name):
            out.append("%s pgas/cuDNN=%.3f" % (name, pgas[name] / r["value"]))
print("; ".join(out))')"
    step "attention plot" bench.log 30 "$bin/attention" --plot "$out/figures.jsonl" "$out/attention_d128.png"
    verdict "attention plot" "$out/attention_d128.png"
  fi
  finish
fi

# pgas's library on torch tensors (pgas.gemm, pgas.coll, pgas.ops), from the wheel.
if [ "$only" = torch ]; then
  wheel=$(ls "$dev"/python/pgas-*.whl 2>/dev/null | head -1)
  pyhome=/tmp/pgas-python
  if [ -z "$wheel" ] || ! python3 -c "import torch" 2>/dev/null; then
    note "SKIP torch (no wheel in .device/python or no torch)"
    finish
  fi
  step "python: pip install the wheel" examples.log 60 python3 -m pip install -q --no-deps --no-index --target "$pyhome" "$wheel"
  verdict "python: pip install $(basename "$wheel")"
  for n in 1 2 4; do
    if share_begin "$n"; then
      step "torch ops $n PE" examples.log 240 env PYTHONPATH="$pyhome" "$bin/pgas-run" -n "$n" $share -- python3 "$root/python/tests/test_torch_ops.py"
      verdict "test_torch_ops.py, pgas-run -n $n $share" "$(echo "$last" | grep -o 'test_torch_ops: ok on PE 0.*' | head -1)"
      step "tp_mlp $n PE" examples.log 180 env PYTHONPATH="$pyhome" "$bin/pgas-run" -n "$n" $share -- python3 "$root/python/examples/tp_mlp.py"
      verdict "tp_mlp.py, pgas-run -n $n $share" "$(echo "$last" | grep -o 'PE 0: tp_mlp.*' | head -1)"
      share_end
    fi
  done
  # The Python layer's cost: the same library calls' host time from Rust and from Python, in
  # five alternating rounds (a machine's speed moves between minutes; each round's Python
  # figures are set against the Rust figures of the same round). Every round's figures go to
  # figures.jsonl; the verdict gives the median over rounds of each difference and its range.
  rounds=""
  for round in 1 2 3 4 5; do
    step "host_ops (Rust calls), round $round" bench.log 120 "$bin/host_ops"
    rounds="$rounds$(figures | sed "s/^/$round /")
"
    step "torch_ops (Python calls), round $round" bench.log 120 env PYTHONPATH="$pyhome" python3 "$root/python/benches/torch_ops.py"
    rounds="$rounds$(figures | sed "s/^/$round /")
"
  done
  verdict "Python call over the Rust call (host time, 1 PE, median of 5 alternating rounds [range])" "$(echo "$rounds" | python3 -c '
import json, statistics, sys
by = {}
for l in sys.stdin:
    if l.strip():
        rnd, fig = l.split(" ", 1)
        r = json.loads(fig)
        by.setdefault(rnd, {})[r["name"]] = r["value"]
def over(name, rust):
    d = [v[name] - v[rust] for v in by.values() if name in v and rust in v]
    return "%+.1f [%+.1f, %+.1f]" % (statistics.median(d), min(d), max(d)) if d else "-"
def med(name):
    d = [v[name] for v in by.values() if name in v]
    return "%.1f" % statistics.median(d) if d else "-"
out = []
for op, rust, forms in (
        ("gemm_256", "gemm_256_enqueue", (("out=", "_torch_op_out"), ("new", "_torch_op"),
                                          ("dispatcher", "_dispatcher"), ("native", "_native"))),
        ("all_reduce_8B", "all_reduce_8B_enqueue", (("Comm stream=", "_comm_stream"),
                                                    ("out= (staged)", "_torch_op_out"),
                                                    ("native (staged)", "_native")))):
    out.append("%s: Rust %s us; Python %s" % (op, med(rust), ", ".join(
        "%s %s" % (k, over(op + s, rust)) for k, s in forms)))
parts = ("native_floor", "torch_empty", "py_eager_test", "py_gemm_checks", "py_out_check",
         "py_stream")
out.append("parts: " + ", ".join("%s %s us" % (k, med(k)) for k in parts))
print("; ".join(out))')"
  finish
fi

# Eight PEs: the suite, then the differential test (results checked as on fewer PEs).
if [ "$only" = pe8 ]; then
  pes 8 300 "$bin/gpu_suite"
  differential 8 4000 170
  finish
fi

# Everything but the last part, unless only that was asked for.
if [ "$only" = all ] || [ "$only" = suite ]; then

# Most PEs first: that run starts from the empty cache, as a user's first `pgas-run -n N` does,
# and its PEs share the cold compile (each compiles its share of the NVRTC programs).
pes 4 240 "$bin/gpu_suite"
pes 2 240 "$bin/gpu_suite"
# Randomized differential testing (tests/gpu_suite/differential.rs): 12000 calls of pgas::coll
# and pgas::ops drawn from a seed (today's date, printed, so a failure reproduces), each against
# a host reference; it stops drawing after 180 s. PE 0's last line is the summary.
differential 2 12000 180
suite 1 240 "$bin/gpu_suite"
# Every peer off-node (PGAS_PEER_ACCESS=none, docs/runtime.md): pgas::coll's NVSHMEM fallbacks,
# the operations' off-node forms and MoE by NVSHMEM's RMA, on 2 PEs.
if share_begin 2; then
  step "off-node, 2 PE" suite.log 120 env PGAS_PEER_ACCESS=none "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" reach moe/ halo/
  share_end
  verdict "gpu_suite reach, PGAS_PEER_ACCESS=none, 2 PE${share:+ (sharing $gpus GPU)}" "$(echo "$last" | grep -E 'gpu_suite: [0-9]+ passed' | tail -1)"
fi
# The start-up a program drives itself (tests/gpu_suite/uid_start.rs): rank 0's unique id through a
# file in OUTDIR, not pgas-run's rendezvous; then the host collectives on that context. Only the
# uid_start and host_collectives cases, so it costs seconds.
if share_begin 2; then
  suite_note="${share:+ (sharing $gpus GPU)}, unique id from a file" suite 2 60 "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --uid-bootstrap "$out"
  share_end
else
  note "SKIP gpu_suite 2 PE, unique id from a file (${gpus} GPU and no CUDA MPS daemon to share one)"
fi
suite_note=", unique id from a file" suite 1 60 "$bin/gpu_suite" --uid-bootstrap "$out"
fi # [ "$only" = all ] || [ "$only" = suite ]

# The rest of the default run: traps, examples, the gallery, the Python module, the one-GPU
# benchmarks (also `rest` alone).
if [ "$only" = all ] || [ "$only" = rest ]; then

# Traps: the process must report the launch failure and the output name the Rust file:line.
for kind in oob local-oob bad-pe partial-warp divergent-mma cluster-rank multicast-mask ll-scratch; do
  step "trap $kind" traps.log 40 "$bin/gpu_suite" --expect-trap "$kind"
  line=$(echo "$last" | sed -n 's/.*the report must name file .*, line \([0-9]*\).*/\1/p' | head -1)
  if [ "$rc" = 0 ] && ! grep -q "skipped: " <<<"$last" &&
    { [ -z "$line" ] || ! grep -q "traps.rs:$line" <<<"$last"; }; then
    rc=1
    last="$last
the output does not name traps.rs:$line"
  fi
  # A local array's report names the array, not only the line.
  if [ "$kind" = local-oob ] && [ "$rc" = 0 ] && ! grep -q "skipped: " <<<"$last" &&
    ! grep -q 'local array `acc`' <<<"$last"; then
    rc=1
    last="$last
the output does not name the local array \`acc\`"
  fi
  verdict "checked trap $kind" "$(echo "$last" | grep -o "[^ ]*traps.rs:[0-9]*" | head -1)"
done

# The first example on one PE, through pgas-run and through mpirun.
if [ -x "$bin/hello_ring" ]; then
  step "hello_ring 1 PE" examples.log 40 "$bin/hello_ring"
  verdict "hello_ring 1 PE" "$(echo "$last" | tail -1)"
  if [ "$gpus" -ge 2 ]; then
    step "hello_ring pgas-run -n 2" examples.log 40 "$bin/pgas-run" -n 2 -- "$bin/hello_ring"
    verdict "hello_ring pgas-run -n 2" "$(echo "$last" | tail -1)"
  fi
else
  rc=1
  verdict "hello_ring" "not in $bin"
fi
if [ -x "$bin/hello_ring_mpi" ] && [ "$gpus" -ge 2 ]; then
  # Local ranks inherit mpirun's environment (NVSHMEM_DISABLE_NVLS included).
  step "hello_ring mpirun -np 2" examples.log 40 mpirun -np 2 --bind-to none "$bin/hello_ring_mpi"
  verdict "hello_ring mpirun -np 2" "$(echo "$last" | tail -1)"
else
  note "SKIP hello_ring mpirun (no hello_ring_mpi binary or 1 GPU)"
fi
if [ -x "$bin/mpi_subcomm" ] && [ "$gpus" -ge 2 ]; then
  # MPI_COMM_WORLD split into even and odd ranks, an NVSHMEM job on each (bootstrap::mpi_unique_id):
  # two jobs of one PE on 2 GPUs, of two PEs on 4.
  np=$([ "$gpus" -ge 4 ] && echo 4 || echo 2)
  step "mpi_subcomm mpirun -np $np" examples.log 60 mpirun -np "$np" --bind-to none "$bin/mpi_subcomm"
  verdict "NVSHMEM on MPI sub-communicators, mpirun -np $np" "$(echo "$last" | grep -c ': ok$') of $np ranks ok"
else
  note "SKIP mpi_subcomm (no mpi_subcomm binary or 1 GPU)"
fi
if [ -x "$bin/hello_ring" ] && [ "$gpus" -ge 1 ]; then
  # More ranks than GPUs: pgas-run must refuse before starting anything.
  step "pgas-run -n $((gpus + 1))" examples.log 20 "$bin/pgas-run" -n $((gpus + 1)) -- "$bin/hello_ring"
  if [ "$rc" != 0 ] && ! grep -q "PE 0/" <<<"$last"; then rc=0; else rc=1; fi
  verdict "pgas-run refuses $((gpus + 1)) ranks on $gpus GPU(s)" "$(echo "$last" | head -1 | cut -c1-150)"
fi
if [ -x "$bin/hello_ring" ] && [ "$gpus" -ge 2 ]; then
  # NVSHMEM's own bootstrap (NVSHMEM_BOOTSTRAP set): the plain build, no rsmpi, NVSHMEM's MPI plugin.
  step "hello_ring NVSHMEM_BOOTSTRAP=MPI" examples.log 40 \
    mpirun -np 2 --bind-to none -x NVSHMEM_BOOTSTRAP=MPI "$bin/hello_ring"
  verdict "hello_ring NVSHMEM_BOOTSTRAP=MPI mpirun -np 2" "$(echo "$last" | tail -1)"
fi

# The gallery: every example on every GPU (the fused examples time their 8192^3 shapes too).
step "gallery" examples.log 180 env PGAS_BIN_DIR="$bin" "$root/scripts/gallery.sh"
verdict "gallery" "$(echo "$last" | tail -1)"

python_steps
bench_pes=$((gpus >= 2 ? 2 : 1))
step "dsl_vs_cuda $bench_pes PE" bench.log 120 "$bin/pgas-run" -n "$bench_pes" -- "$bin/dsl_vs_cuda"
verdict "dsl_vs_cuda $bench_pes PE" "$(figures | brief '64x1024|ping|barrier|reduce_block|host_put|init')"
# Host calls: RMA, quiet, barrier, atomics, the bounded signal wait against NVSHMEM's on-stream
# wait, a wait satisfied 10 us in, and the live-allocation check's cost.
step "host_ops" bench.log 60 "$bin/host_ops"
verdict "host_ops" "$(figures | brief 'put_signal|bounded|10us|live_check_4096')"
step "jit_costs" bench.log 90 "$bin/jit_costs"
verdict "jit_costs" "$(figures | brief 'cold_compile|full_builds|reduce_block|disk|memory|launch_dsl_checked|launch_bare|nvshmem_init')"
# The same cold compiles against NVSHMEM's headers, without nvJitLink (figures named inline/...).
# (PGAS_JIT_FAST_COMPILE=max, which only inline compiles use, is not timed here: docs/jit.md.)
step "jit_costs PGAS_JIT_LTO=off" bench.log 60 env PGAS_JIT_LTO=off "$bin/jit_costs"
last=$(echo "$last" | sed 's/"name": *"/&inline\//')
verdict "jit_costs PGAS_JIT_LTO=off" "$(figures | brief 'cold_compile|reduce_block')"
# Collective kernels link-time too, with NVSHMEM's collectives as objects built once per machine
# (docs/jit.md, "Collective objects"; figures named objects/...).
step "jit_costs PGAS_JIT_LTO=all" bench.log 90 env PGAS_JIT_LTO=all "$bin/jit_costs"
last=$(echo "$last" | sed 's/"name": *"/&objects\//')
verdict "jit_costs PGAS_JIT_LTO=all" "$(figures | brief 'collective')"
# The JIT's helper processes: new programs compiled in one process and in one per CPU.
step "jit_helpers" bench.log 60 "$bin/jit_helpers"
verdict "jit_helpers" "$(figures | brief 'process|speedup')"
# The bf16 GEMM against cuBLAS; cuBLAS from CUDA 13's toolkit or PyTorch's wheel when the loader
# does not find it (the bench looks in both).
step "gemm vs cuBLAS" bench.log 150 "$bin/gemm"
verdict "gemm vs cuBLAS" "$(figures | brief 'ratio|pgas_tflops|cold_compile_gemm')"
# The GEMM at 64 rows and as a grouped GEMM of experts, against cuBLAS (one call, and a loop).
step "gemm_shapes vs cuBLAS" bench.log 90 "$bin/gemm_shapes"
verdict "gemm_shapes vs cuBLAS" "$(figures | brief 'ratio|pgas_tflops')"
fi # [ "$only" = all ] || [ "$only" = rest ]

# Rank death (tests/gpu_suite/faults.rs): the last PE dies while the others wait for it in a
# barrier or a kernel; the launcher must end the job within 5 s of the death (the dying PE prints
# the time, Unix ms), exit non-zero, and name the rank and how it ended.
rank_death() { # NAME WANT CMD...: WANT is a regex the launcher's output must match
  local name=$1 want=$2
  shift 2
  step "$name" faults.log 60 "$@"
  local ended died took ranks_ended
  ended=$(date +%s%3N)
  # Under --share-gpus pgas-run checks the MPS server after the ranks ended, and says when they did.
  ranks_ended=$(echo "$last" | sed -n 's/.*every rank ended at \([0-9]*\) ms.*/\1/p' | head -1)
  ended=${ranks_ended:-$ended}
  died=$(echo "$last" | sed -n 's/.* dies by .* at \([0-9]*\) ms.*/\1/p' | head -1)
  took=$((ended - ${died:-0}))
  if [ "$rc" = -1 ]; then return; fi
  if [ "$rc" = 0 ] && grep -q "skipped: no GPU" <<<"$last"; then
    verdict "$name" # a SKIP: the program found no GPU
    return
  fi
  if [ -z "$died" ]; then
    rc=1 detail="no PE reported its death"
  elif [ "$rc" = 0 ]; then
    rc=1 detail="the job exited 0 although a PE died"
  elif [ "$took" -ge 5000 ]; then
    # A timeout of the step lands here too (its limit is far above 5 s).
    rc=1 detail="the job ended ${took} ms after the death (limit 5000 ms)"
  elif grep -q "rank-death .*: FAIL" <<<"$last"; then
    rc=1 detail="$(echo "$last" | grep -m1 "rank-death .*: FAIL" | cut -c1-150)"
  elif ! grep -qE "$want" <<<"$last"; then
    rc=1 detail="the launcher's output does not match /$want/"
  else
    rc=0 detail="ended ${took} ms after the death: $(echo "$last" | grep -m1 -E "$want" | cut -c1-120)"
  fi
  verdict "$name" "$detail"
}
# After a death under --share-gpus (CUDA MPS): the next jobs on the GPU, an ordinary 2-PE job
# through pgas-run and a 1-PE job without it, must pass. A client that dies with work on the GPU
# leaves the MPS server in its fault state; pgas-run probes after such a job and restarts the
# daemon (runtime/src/launcher/mps.rs), and says so.
after_death() { # NAME: the death step's output is in $last
  local name=$1 mended=""
  mended=$(echo "$last" | grep -m1 -o "the CUDA MPS server could not take new clients.*" | cut -c1-160)
  mended=${mended:+$mended; }
  step "after $name: next 2-PE job" faults.log 60 "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" rma/p_g_small_ints
  verdict "after $name: next 2-PE job${share:+ (sharing $gpus GPU)}" "$mended$(echo "$last" | grep -m1 -E "gpu_suite: [0-9]+ passed" | cut -c1-80)"
  step "after $name: next 1-PE job" faults.log 60 "$bin/gpu_suite" rma/p_g_small_ints
  verdict "after $name: next 1-PE job" "$(echo "$last" | grep -m1 -E "gpu_suite: [0-9]+ passed" | cut -c1-80)"
}
if [ "$only" != all ] && [ "$only" != faults ]; then
  : # rank death belongs to the default run and `faults`
elif share_begin 2; then
  # With one GPU the two PEs share it under CUDA MPS (share_begin); the launcher must behave as
  # with two GPUs. A panicking PE exits 101, or dies by SIGSEGV in NVSHMEM's exit handlers
  # (docs/faults.md): either way the launcher must end the job and name the rank.
  rank_death "rank death: panic in barrier (pgas-run)" "pgas-run: rank 1 (exited with status 101|was killed by signal 11 \\(SIGSEGV\\))" \
    "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death panic
  rank_death "rank death: abort in barrier (pgas-run)" "pgas-run: rank 1 was killed by signal 6 \\(SIGABRT\\)" \
    "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death abort
  rank_death "rank death: exit in barrier (pgas-run)" "pgas-run: rank 1 exited with status 7" \
    "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death exit
  rank_death "rank death: SIGKILL in barrier (pgas-run)" "pgas-run: rank 1 was killed by signal 9 \\(SIGKILL\\)" \
    "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death kill
  rank_death "rank death: SIGKILL, others in a kernel (pgas-run)" "pgas-run: rank 1 was killed by signal 9 \\(SIGKILL\\)" \
    "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death kill-in-kernel
  after_death "SIGKILL in a kernel"
  # OpenMPI ends the job itself ("mpirun noticed that process rank 1 ... exited on signal 9");
  # with a GPU a rank (pgas-run shares GPUs, mpirun here does not).
  [ "$gpus" -ge 2 ] && command -v mpirun >/dev/null && rank_death "rank death: SIGKILL in barrier (mpirun)" "rank 1 .*(signal 9|Killed)" \
    mpirun -np 2 --bind-to none -x NVSHMEM_BOOTSTRAP=MPI "$bin/gpu_suite" --rank-death kill
  # Deaths inside the library: the others wait inside a collective or fused operation.
  for op in all-reduce all-to-all-v ag-gemm moe-dispatch; do
    rank_death "rank death: SIGKILL inside $op (pgas-run)" "pgas-run: rank 1 was killed by signal 9 \\(SIGKILL\\)" \
      "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death "kill-in-$op"
    [ "$gpus" -ge 2 ] && command -v mpirun >/dev/null && rank_death "rank death: SIGKILL inside $op (mpirun)" "rank 1 .*(signal 9|Killed)" \
      mpirun -np 2 --bind-to none -x NVSHMEM_BOOTSTRAP=MPI "$bin/gpu_suite" --rank-death "kill-in-$op"
  done
  rank_death "rank death: trap in a collective kernel (pgas-run)" "pgas-run: rank 1 exited with status 1" \
    "$bin/pgas-run" -n 2 $share -- "$bin/gpu_suite" --rank-death trap-in-collective
  after_death "a trap in a kernel"
  share_end
else
  note "SKIP rank death (${gpus} GPU and no CUDA MPS daemon to share one)"
fi

# A hung case: the suite's watchdog must name it and end the process with status 124 (before
# issue 23's fix, giving up crashed in the exit handlers with SIGSEGV, status 139).
if [ "$only" = all ] || [ "$only" = faults ]; then
  # The watchdog's status is 124, as timeout(1)'s: step() then appends "TIMEOUT after", so the
  # step's own limit is told apart by the time it took (the watchdog gives up after 5 s).
  hang_check() { # NAME T0: from $rc and $last, T0 the step's start
    local took=$(($(date +%s) - $2))
    if [ "$rc" = 0 ] && grep -q "skipped: no GPU" <<<"$last"; then
      : # verdict says SKIP
    elif [ "$rc" = 124 ] && [ "$took" -lt 35 ] &&
      grep -q "FAIL faults/hang_in_kernel: still running after 5 s (hung); giving up" <<<"$last"; then
      rc=0 last=$(echo "$last" | grep -v "^TIMEOUT after")
    elif [ "$rc" != -1 ]; then
      last="$last
expected exit 124 and the watchdog's line for faults/hang_in_kernel, got exit $rc"
      rc=1
    fi
    verdict "$1" "$(echo "$last" | grep -m1 "hung" | cut -c1-120)"
  }
  t0=$(date +%s)
  step "watchdog: hung case, 1 PE" faults.log 40 env PGAS_SUITE_CASE_TIMEOUT=5 "$bin/gpu_suite" --expect-hang
  hang_check "watchdog: hung case, 1 PE" "$t0"
  if [ "$gpus" -ge 2 ]; then
    t0=$(date +%s)
    step "watchdog: hung case, pgas-run -n 2" faults.log 40 env PGAS_SUITE_CASE_TIMEOUT=5 "$bin/pgas-run" -n 2 -- "$bin/gpu_suite" --expect-hang
    hang_check "watchdog: hung case, pgas-run -n 2" "$t0"
  fi
  # The symmetric heap filled, and set-ups (Comm::new, MoeDispatcher::new) run into its end half-way:
  # an Err on every PE, nothing leaked. Its own process: where NVSHMEM meets the end of the heap
  # before pgas does, NVSHMEM 3.4.5 ends the process.
  if [ "$gpus" -ge 2 ]; then
    step "heap exhausted half-way, 2 PE" faults.log 60 "$bin/pgas-run" -n 2 -- "$bin/gpu_suite" --heap-exhaustion
    verdict "heap exhausted half-way, 2 PE" "$(echo "$last" | grep -m1 -E "gpu_suite: [0-9]+ passed|FAIL" | cut -c1-150)"
  fi
  step "heap exhausted half-way, 1 PE" faults.log 60 "$bin/gpu_suite" --heap-exhaustion
  verdict "heap exhausted half-way, 1 PE" "$(echo "$last" | grep -m1 -E "gpu_suite: [0-9]+ passed|FAIL" | cut -c1-150)"
fi

# A kernel cache that cannot be created (nobody can make a directory in /proc): the kernel must still
# compile, load and run, with exactly one warning line (docs/faults.md, "The kernel cache").
if [ -x "$bin/ring_shift" ] && { [ "$only" = all ] || [ "$only" = faults ]; }; then
  step "ring_shift, cache unwritable" faults.log 40 env PGAS_CACHE_DIR=/proc/pgas-no-cache "$bin/ring_shift"
  warnings=$(echo "$last" | grep -c "pgas: warning: kernel cache" || true)
  if [ "$rc" = 0 ] && [ "$warnings" != 1 ]; then
    rc=1 last="$last
expected one warning line about the kernel cache, got $warnings"
  fi
  verdict "ring_shift with an unwritable kernel cache" "$warnings warning line(s): $(echo "$last" | grep -m1 "pgas: warning" | cut -c1-110)"
fi

# compute-sanitizer (memcheck, racecheck, synccheck) over part of the suite and three gallery
# examples, 1 PE each, plus racecheck across `pgas-run -n 2` children; 0 errors expected. Its own
# limits, 115 s in all. NVSHMEM_DISABLE_NCCL=1: NVSHMEM's NCCL probe at init makes
# memcheck report API errors inside libnccl (shared/notes/nvshmem-jit.md); --report-api-errors no
# keeps API-error reports of other libraries out too, so only errors in kernels count. Where the
# tool cannot attach (gVisor: "Device not supported"), every sanitizer step is a SKIP.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
# PGAS_SANITIZER_ARGS: more options for every sanitizer call, split on spaces, such as
# `--kernel-name kns=NAME --launch-count N` (check only the first N launches of that kernel).
read -ra sanitizer_extra <<<"${PGAS_SANITIZER_ARGS:-}"
sanitizer_cmd=(env NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_CUDA_VMM=1 "$sanitizer"
  --error-exitcode 86 --report-api-errors no --target-processes all "${sanitizer_extra[@]}")
sanitize() { # NAME LIMIT TOOL CMD...
  local name=$1 limit=$2 tool=$3 word
  shift 3
  # A program build-device.sh left out (PGAS_DEVICE_ONLY) is a SKIP, not a failed attach.
  for word in "$@"; do
    if [[ "$word" == "$bin"/* ]] && [ ! -x "$word" ]; then
      note "SKIP $name (${word#"$bin"/} not built: PGAS_DEVICE_ONLY left it out)"
      return
    fi
  done
  step "$name" sanitizer.log "$limit" "${sanitizer_cmd[@]}" --tool "$tool" "$@"
  judge_sanitizer "$name"
}
judge_sanitizer() { # NAME, from $rc and $last
  local name=$1 why
  why=$(echo "$last" | grep -m1 -iE "device not supported|not supported on this|unable to (attach|initialize|find)|failed to (initialize|attach)|cannot attach" || true)
  if [ "$rc" != 0 ] && [ -n "$why" ]; then
    sanitizer_off="$why"
    note "SKIP $name (sanitizer unavailable: $(echo "$why" | sed 's/^=* *//' | cut -c1-120))"
    return
  fi
  # memcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY:
  # N hazards displayed (E errors, W warnings)"; one line per process.
  verdict "$name" "$(echo "$last" | grep -E "(ERROR|RACECHECK) SUMMARY|gpu_suite: [0-9]+ passed" | sed 's/^=* *//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
}
sanitizer_off=""
# pool LOG MAX JOBS JUDGE: runs the jobs listed on stdin (a line each: NAME, a tab, a shell
# command), JOBS at a time, all within MAX seconds or what is left of the budget; then, in list
# order, appends each job's output to LOG and calls JUDGE NAME with its $rc and $last.
pool() {
  local log=$1 max=$2 jobs=$3 judge=$4 left end tmp i=0 name cmd
  left=$((deadline - $(date +%s)))
  end=$(($(date +%s) + (max < left ? max : left)))
  tmp=$(mktemp -d)
  local names=()
  while IFS=$'\t' read -r name cmd; do
    names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    if [ $((end - $(date +%s))) -lt 10 ]; then
      echo -1 >"$tmp/$i.rc"
    else
      (t0=$(date +%s)
        timeout -k 5 $((end - t0)) bash -c "$cmd" </dev/null >"$tmp/$i.log" 2>&1
        echo $? >"$tmp/$i.rc"
        echo "$(($(date +%s) - t0))s" >"$tmp/$i.time") &
    fi
    i=$((i + 1))
  done
  wait
  for i in "${!names[@]}"; do
    rc=$(cat "$tmp/$i.rc") last=$(cat "$tmp/$i.log" 2>/dev/null)
    if [ "$rc" = -1 ]; then
      note "SKIP ${names[$i]} (out of time)"
      continue
    fi
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then last="$last
TIMEOUT"; fi
    { echo "===== ${names[$i]}: exit $rc after $(cat "$tmp/$i.time")"; echo "$last"; } >>"$out/$log"
    "$judge" "${names[$i]}"
  done
  rm -rf "$tmp"
}
judge_tail() { verdict "$1" "$(echo "$last" | tail -1 | cut -c1-150)"; }
if [ "$only" = coll ] || [ "$only" = fused ]; then
  : # the sanitizer belongs to the default run, `faults` and `sanitize`
elif [ -z "$sanitizer" ]; then
  note "SKIP compute-sanitizer (sanitizer unavailable: not on PATH nor in /usr/local/cuda)"
else
  # (The sweep needs no probe of its own: each of its jobs is a SKIP where the tool cannot attach.)
  [ "$only" = sanitize ] || sanitize "memcheck hello_ring 1 PE" 60 memcheck "$bin/hello_ring"
  if [ -z "$sanitizer_off" ] && [ "$only" = sanitize ]; then
    # The sweep: the whole suite and every gallery example under each tool, 1 PE. The kernels
    # compile first, outside the sanitizer (it would time the JIT, not the kernels), in several
    # processes at once: NVRTC compiles one program at a time per process, and one process had
    # compiled 11 of the suite's 19 programs after 200 s, where 4 PEs compiled all of them in
    # far less (docs/jit.md).
    # The suite's by 4 PEs sharing the GPU, the gallery's by its examples run natively, 4 at a
    # time (each checks its results; their timings mean nothing then). PGAS_SANITIZE_WARM=0 skips
    # this where PGAS_CACHE_TAR brought the kernels.
    if [ "${PGAS_SANITIZE_WARM:-1}" = 1 ]; then
      pes 4 240 "$bin/gpu_suite"
      # (pool reads its list from a redirect, not a pipe: in a pipe it would be a subshell, and
      # its verdicts would be lost.)
      for src in "$root"/examples/*.rs; do
        name=$(basename "$src" .rs)
        [ -x "$bin/$name" ] && printf '%s 1 PE (4 examples at a time)\t%q\n' "$name" "$bin/$name"
      done >"$out/.jobs"
      pool examples.log 240 4 judge_tail <"$out/.jobs"
    fi
    # Then every (tool, target) pair as a job of its own, PGAS_SANITIZE_JOBS at a time (the
    # sanitizer's cost is mostly on the host; one process under memcheck got through the first
    # 50 of the suite's cases in 240 s): the suite in PGAS_SANITIZE_SHARDS shards
    # (`gpu_suite shard:I/N`; its per-case watchdog raised, as a case of hundreds of launches
    # takes minutes under a tool), every tool's shards before any example (the shards hold the
    # longest jobs), then each gallery example under each tool.
    # PGAS_SANITIZE_ONLY (an extended regex) keeps the jobs whose name matches, such as
    # '^memcheck gpu_suite shard 2/6' or '^(racecheck|synccheck) [a-z0-9_]+ 1 PE' (the gallery).
    # One job has options of its own (named after the job): racecheck tracks every shared-memory
    # access of gemm_bf16's mma.sync kernel, and its 16 launches, 12 of them the same timed
    # 4096^3 launch, outlast a device call (docs/faults.md), so it checks the 5 distinct ones.
    declare -A job_opts=(["racecheck gemm_bf16"]="--kernel-name kns=pgas_gemm_bf16_ --launch-count 5")
    tools=${PGAS_SANITIZE_TOOLS:-memcheck racecheck synccheck}
    shards=${PGAS_SANITIZE_SHARDS:-6}
    {
      for tool in $tools; do
        for ((i = 0; i < shards; i++)); do
          printf '%s gpu_suite shard %s/%s 1 PE\t' "$tool" "$i" "$shards"
          printf '%q ' env PGAS_SUITE_CASE_TIMEOUT=600 "${sanitizer_cmd[@]}" --tool "$tool" "$bin/gpu_suite" "shard:$i/$shards"
          echo
        done
      done
      for src in "$root"/examples/*.rs; do
        name=$(basename "$src" .rs)
        [ -x "$bin/$name" ] || continue
        for tool in $tools; do
          own=${job_opts["$tool $name"]:-}
          read -ra opts <<<"$own"
          printf '%s %s 1 PE%s\t' "$tool" "$name" "${own:+ ($own)}"
          printf '%q ' "${sanitizer_cmd[@]}" "${opts[@]}" --tool "$tool" "$bin/$name"
          echo
        done
      done
    } | grep -E "${PGAS_SANITIZE_ONLY:-.}" >"$out/.jobs"
    pool sanitizer.log 600 "${PGAS_SANITIZE_JOBS:-8}" judge_sanitizer <"$out/.jobs"
    rm -f "$out/.jobs"
  elif [ -z "$sanitizer_off" ] && [ "$only" = faults ]; then
    # The suite did not run before, so its kernels are not in the cache yet: compile them outside
    # the sanitizer's limit.
    step "gpu_suite rma signals amo sync (kernel cache warm-up)" sanitizer.log 60 "$bin/gpu_suite" rma signals amo sync
    verdict "gpu_suite 1 PE, rma signals amo sync" "$(echo "$last" | grep -E 'gpu_suite: [0-9]+ passed' | tail -1)"
  fi
  if [ -z "$sanitizer_off" ] && [ "$only" != sanitize ]; then
    sanitize "memcheck gpu_suite 1 PE (rma signals amo sync)" 35 memcheck "$bin/gpu_suite" rma signals amo sync
    sanitize "racecheck team_allreduce 1 PE" 45 racecheck "$bin/team_allreduce"
    sanitize "synccheck ring_shift 1 PE" 15 synccheck "$bin/ring_shift"
    if [ "$gpus" -ge 2 ]; then
      sanitize "racecheck ring_shift pgas-run -n 2" 30 racecheck "$bin/pgas-run" -n 2 -- "$bin/ring_shift"
    fi
  fi
fi

# The communication benchmarks, each against its baseline in the same job, on every GPU present
# (one PE per GPU; on one GPU they run and check themselves, but there is no peer traffic).
# (a command prefix, not a function: `step` runs its command under `timeout`.) The VMM heap of
# NVSHMEM 3.4.5 refuses single allocations of 1 GiB, which the top sizes need.
with_nccl=(env LD_LIBRARY_PATH="/tmp/pgas-nccl:${LD_LIBRARY_PATH:-}" NVSHMEM_DISABLE_CUDA_VMM=1)
if [ "$only" = coll ]; then
  # pgas::coll against NCCL (eager and graph-captured), 8 B to 1 GiB; tables and plots into OUTDIR.
  step "coll vs NCCL $gpus PE" bench.log 300 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/coll" "$out"
  verdict "coll vs NCCL $gpus PE" "$(figures | brief 'allreduce_bf16_(8B|1MiB|256MiB).*(auto|nccl)|speedup_vs_nccl')"
  # The emulated two-node setup (issue 21): every peer off NVLink for pgas (NVSHMEM's
  # collectives through its proxy) and for NCCL (its network transport), up to 16 MiB.
  if [ "$gpus" -ge 2 ]; then
    step "coll off NVLink vs NCCL net $gpus PE" bench.log 150 "${with_nccl[@]}" PGAS_PEER_ACCESS=none NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
      "$bin/pgas-run" -n "$gpus" -- "$bin/coll" "$out/offnode" --max-bytes=16777216
    verdict "coll off NVLink $gpus PE" "$(figures | brief 'speedup_vs_nccl')"
  fi
  # As two nodes of half the GPUs each (PGAS_PEER_ACCESS=nodes:G): the hierarchical all-reduce,
  # all-gather, reduce-scatter and all-to-all, against NCCL with every peer off NVLink.
  if [ "$gpus" -ge 4 ] && [ $((gpus % 2)) -eq 0 ]; then
    step "coll as two nodes vs NCCL net $gpus PE" bench.log 150 "${with_nccl[@]}" PGAS_PEER_ACCESS=nodes:$((gpus / 2)) \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$bin/pgas-run" -n "$gpus" -- "$bin/coll" "$out/twonodes" --max-bytes=16777216
    verdict "coll as two nodes $gpus PE" "$(figures | brief 'speedup_vs_nccl')"
  fi
  # NCCL's collectives through torch, for the record beside cudarc's (and PyTorch's symm_mem).
  if ! python3 -c "import torch" 2>/dev/null; then
    note "SKIP nccl_bench, symm_mem_bench (no torch for python3)"
  else
    step "nccl_bench" nccl.log 120 python3 "$root/scripts/nccl_bench.py" "$gpus"
    verdict "nccl_bench $gpus GPU" "$(figures | brief 'all_reduce|all_gather|reduce_scatter|all_to_all_1GiB_time')"
    # PyTorch's symmetric-memory all-reduce (one-shot, two-shot), eager and graph-captured.
    step "symm_mem_bench" nccl.log 150 python3 "$root/scripts/symm_mem_bench.py" "$gpus"
    verdict "symm_mem_bench $gpus GPU" "$(figures | brief '_(8B|1MiB)_symm_.*graph')"
  fi
fi
if [ "$only" = fused ]; then
  # Issue 10's workloads, each against cuBLAS + NCCL (and PyTorch async-TP) in the same job.
  # The 2-D Jacobi with its halo exchange fused (examples/jacobi2d.rs) against pgas unfused and
  # NCCL send/recv, eager and graph-captured (benches/halo.rs; a 2 GiB field at the top size).
  step "halo vs NCCL $gpus PE" bench.log 120 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/halo" "$out"
  verdict "halo vs NCCL $gpus PE" "$(figures | brief 'jacobi2d_1024_fused_us|jacobi2d_1024_fused_speedup|jacobi2d_16384_fused_speedup')"
  # MoE dispatch and combine (pgas::ops::moe) against NCCL's all-to-all-v of the same rows.
  step "moe vs NCCL $gpus PE" bench.log 120 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/moe" "$out"
  verdict "moe vs NCCL $gpus PE" "$(figures | brief '4096tok_gbs')"
  # All-gather + GEMM and GEMM + reduce-scatter: cuBLAS + NCCL, the fused pgas kernel and the
  # pgas::ops form per shape (ag_gemm.md/png, gemm_rs.md/png).
  step "ag_gemm $gpus PE" bench.log 150 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/ag_gemm" "$out"
  verdict "ag_gemm $gpus PE" "$(figures | brief 'speedup|cublas_nccl_us')"
  step "gemm_rs $gpus PE" bench.log 150 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/gemm_rs" "$out"
  verdict "gemm_rs $gpus PE" "$(figures | brief 'speedup|cublas_nccl_us')"
  # All-reduce + residual add + RMSNorm (pgas::ops::AllReduceRmsNorm) against NCCL's and
  # pgas::coll's all-reduce followed by the same norm kernel, 1 to 8192 tokens x 8192 bf16
  # (allreduce_rmsnorm.md/png).
  step "allreduce_rmsnorm $gpus PE" bench.log 150 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/allreduce_rmsnorm_bench" "$out"
  verdict "allreduce_rmsnorm $gpus PE" "$(figures | brief '_1tok_fused_graph|_1tok_fused_ll_graph|_1tok_nccl_graph|_1tok_fused_speedup_vs_nccl|_1tok_fused_ll_speedup_vs_nccl|_64tok_fused_speedup_vs_nccl|_8192tok_fused_speedup_vs_nccl')"
  # Context-parallel attention (issue 46): the ring, Ulysses and NCCL's all-gather of K/V + the
  # same kernel (benches/cp_attention.rs), then NCCL's all-gather + cuDNN SDPA
  # (scripts/cp_attention_sdpa.py), one process a GPU.
  step "cp_attention $gpus PE" bench.log 180 "${with_nccl[@]}" "$bin/pgas-run" -n "$gpus" -- "$bin/cp_attention"
  verdict "cp_attention $gpus PE" "$(figures | brief 'ring_ms|ulysses_ms|nccl_ag_ms')"
  if python3 -c "import torch" 2>/dev/null; then
    step "cp_attention_sdpa" nccl.log 180 python3 "$root/scripts/cp_attention_sdpa.py" "$gpus"
    verdict "cp_attention_sdpa $gpus GPU" "$(figures | brief 'nccl_cudnn_ms')"
  fi
  # PyTorch async-TP (symm_mem fused all-gather + GEMM and GEMM + reduce-scatter) at the same
  # shapes, against torch's unfused ops: the other baseline of issue 10.
  if ! python3 -c "import torch" 2>/dev/null; then
    note "SKIP async_tp_bench (no torch for python3)"
  else
    step "async_tp_bench" nccl.log 150 python3 "$root/scripts/async_tp_bench.py" "$gpus"
    verdict "async_tp_bench $gpus GPU" "$(figures | brief 'speedup')"
  fi
fi

finish
