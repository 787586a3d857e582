#!/bin/bash
# Throwaway driver: the MoE layout kernel ranking tokens in rounds (runs 160-162; run 163: its ids
# loaded as 16-byte vectors, against 5911f61 from .device/carry-5911f61) against
# 6bb855a. New binaries in .device/carry-new, old in .device/carry. Summary last.
set -u
O=$1; mkdir -p "$O/logs"
N=$PWD/.device/new; B=$PWD/.device/bin; rm -rf "$N" "$B"; mkdir -p "$N" "$B"
for f in .device/carry-new/*.gz; do n=$(basename "$f" .gz); gunzip -c "$f" > "$N/$n"; chmod +x "$N/$n"; done
for n in pgas pgas-run; do gunzip -c .device/carry/bin/$n.gz > "$B/$n"; chmod +x "$B/$n"; done
gunzip -c .device/carry-5911f61/moe.gz > "$B/moe"; chmod +x "$B/moe"
export NVSHMEM_DISABLE_NVLS=1 NVSHMEM_DISABLE_CUDA_VMM=1 PGAS_CACHE_DIR=/tmp/kc-layout
[ -x /opt/torch/.venv/bin/python3 ] && export PATH="/opt/torch/.venv/bin:$PATH"
nl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
mkdir -p /tmp/pgas-nccl && ln -sf "$nl/libnccl.so.2" /tmp/pgas-nccl/libnccl.so
export LD_LIBRARY_PATH="/tmp/pgas-nccl:${LD_LIBRARY_PATH:-}"
S=$O/summary.txt; : > "$S"
step() { local name=$1 lim=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 "$lim" "$@" > "$O/logs/$name.log" 2>&1; local rc=$?
  echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s | $(grep -E 'passed|mismatches' "$O/logs/$name.log" | tail -1 | cut -c1-220)" >> "$S"; }
R=$B/pgas-run
nvidia-cuda-mps-control -d; sleep 1
step moe-4pe 150 "$R" -n 4 --share-gpus -- "$N/gpu_suite" moe/
step moe-2pe 60 "$R" -n 2 --share-gpus -- "$N/gpu_suite" moe/
step moe-2pe-none 60 env PGAS_PEER_ACCESS=none "$R" -n 2 --share-gpus -- "$N/gpu_suite" moe/
step moe_dispatch-2pe 60 "$R" -n 2 --share-gpus -- "$N/moe_dispatch"
step moe_dispatch-1pe 60 "$N/moe_dispatch"
echo quit | nvidia-cuda-mps-control; sleep 1
step moe-1pe 60 "$N/gpu_suite" moe/
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:moe_layout --csv "$N/moe_dispatch" > "$O/logs/ncu.csv" 2>&1
python3 - "$O/logs/ncu.csv" >> "$S" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
    print("  layout kernel (new), ns:", " ".join(r[v] for r in rows[1:]), rows[1][k] if len(rows) > 1 else "")
PY
timeout 150 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:moe_layout --csv "$N/moe" "$O/ncubench" > "$O/logs/ncu-bench.csv" 2>&1
python3 - "$O/logs/ncu-bench.csv" >> "$S" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; v = h.index("Metric Value")
    d = [float(r[v].replace(",", "")) / 1000 for r in rows[1:]]
    print("  layout kernel (new) in the bench, us, launches in order (%d):" % len(d))
    print("  " + " ".join("%.1f" % x for x in d[:400]))
PY
for r in 1 2; do
  step "bench-old-$r" 110 "$B/moe" "$O/old$r"
  grep FIGURE "$O/logs/bench-old-$r.log" | grep -E '"moe_(dispatch|combine_rows)_pgas_(0|128|1024|2048|4096)tok_us"' | sed 's/.*"name":"\([^"]*\)","value":\([^,]*\).*/\1=\2/' | tr '\n' ' ' | sed "s/^/   old$r: /" >> "$S"; echo >> "$S"
  step "bench-new-$r" 110 "$N/moe" "$O/new$r"
  grep FIGURE "$O/logs/bench-new-$r.log" | grep -E '"moe_(dispatch|combine_rows)_pgas_(0|128|1024|2048|4096)tok_us"' | sed 's/.*"name":"\([^"]*\)","value":\([^,]*\).*/\1=\2/' | tr '\n' ' ' | sed "s/^/   new$r: /" >> "$S"; echo >> "$S"
done
cd "$O" && tar czf logs.tgz logs && rm -rf logs
cat "$S"
