#!/bin/bash
# Throwaway probe: per-kernel GPU time of the MoE kernels at 4096 tokens x 7168 on 1 PE
# (examples/moe_dispatch.rs under ncu, clocks and caches left alone). Summary last.
set -u
O=$1; mkdir -p "$O"
mkdir -p .device/bin
for n in moe_dispatch pgas; do gunzip -c .device/carry/bin/$n.gz > .device/bin/$n; chmod +x .device/bin/$n; done
export NVSHMEM_DISABLE_NVLS=1 PGAS_CACHE_DIR=/tmp/kc-ncu
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
.device/bin/moe_dispatch > "$O/warm.log" 2>&1; echo "warm exit $?" > "$O/summary.txt"
timeout 400 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum,dram__bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed -k regex:moe --csv .device/bin/moe_dispatch > "$O/ncu.csv" 2> "$O/ncu.err"
echo "ncu exit $?" >> "$O/summary.txt"
python3 - "$O/ncu.csv" >> "$O/summary.txt" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows: print("no rows"); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); mi = h.index("Metric Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit"); ii = h.index("ID")
for r in rows[1:]:
    print(r[ii], r[ki][:60], r[mi], r[vi], r[ui])
PY
cat "$O/summary.txt"; tail -5 "$O/ncu.err"
