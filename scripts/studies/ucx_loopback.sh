#!/usr/bin/env bash
# Issue 21: a real NVSHMEM remote transport on one machine without an InfiniBand NIC. Each rank
# runs in its own UTS namespace with its own hostname (`unshare -u`, root), so NVSHMEM takes the
# ranks for separate nodes: no NVLink P2P between them, every transfer through its proxy and the
# UCX transport (TCP over loopback; `cuda_copy` stages GPU memory). Runs what pgas's off-node
# paths need: the `reach` case (collectives, all-to-all-v, the fused ops off NVLink), then
# `hello_ring`. Writes probe.log (which UCX and NVSHMEM transports exist here) and one log per
# step to OUTDIR; prints a summary. A study, not a test: the exact error is the result where
# the transport cannot run.
#
# Usage (on a GPU machine, from the repository root, after scripts/build-device.sh):
#   scripts/studies/ucx_loopback.sh OUTDIR [BIN_DIR (default .device/bin)]
set -u
out=${1:?usage: ucx_loopback.sh OUTDIR [BIN_DIR]}
bin=${2:-.device/bin}
mkdir -p "$out"
{
  echo "== libucp found"
  find / -path /proc -prune -o -name 'libucp.so*' -print 2>/dev/null | head -20
  echo "== Python packages"
  python3 -m pip list 2>/dev/null | grep -i -E 'ucx|nvshmem'
  echo "== NVSHMEM transports"
  find / -path /proc -prune -o -name 'nvshmem_transport_*' -print 2>/dev/null | head -20
} >"$out/probe.log" 2>&1
# The newest UCX a wheel carries (NVSHMEM's UCX transport needs >= 1.19; the system's is older).
ucx=$(find / -path /proc -prune -o -name 'libucp.so.0' -path '*-packages*' -print 2>/dev/null | head -1)
ucx_dir=${ucx:+$(dirname "$ucx")}
echo "UCX library used: ${ucx:-none in a wheel, the system one}" >>"$out/probe.log"
# Each rank: its own hostname, then the program.
wrap="$out/own_host.sh"
cat >"$wrap" <<'W'
#!/bin/sh
exec unshare -u sh -c 'hostname "pgas-node-$PGAS_RANK" && exec "$@"' sh "$@"
W
chmod +x "$wrap"
step() { # NAME LIMIT CMD...
  local name=$1 limit=$2
  shift 2
  timeout -k 5 "$limit" env NVSHMEM_REMOTE_TRANSPORT=ucx UCX_TLS=tcp,cuda_copy,self \
    NVSHMEM_DEBUG=WARN LD_LIBRARY_PATH="${ucx_dir:+$ucx_dir:}${LD_LIBRARY_PATH:-}" "$@" \
    >"$out/$name.log" 2>&1
  echo "== $name: exit $?"
  grep -E 'passed|FAIL|rror|not supported|abort|transport' "$out/$name.log" | sort | uniq -c | sort -rn | head -12
}
{
  grep -A3 'UCX library used' "$out/probe.log"
  step reach_ucx 90 "$bin/pgas-run" -n 2 -- "$wrap" "$bin/gpu_suite" reach
  step hello_ring_ucx 40 "$bin/pgas-run" -n 2 -- "$wrap" "$bin/hello_ring"
} | tee "$out/summary.txt"
