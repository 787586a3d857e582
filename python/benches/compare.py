"""The table of host_ops.py's figures for pgas beside NVSHMEM4Py's: reads their JSON lines (the
files given, or standard input) and prints, per operation, both medians and pgas / NVSHMEM4Py
(below 1: pgas is faster)."""

import json
import sys


def main() -> None:
    rows = {}
    lines = (line for f in (sys.argv[1:] or ["-"])
             for line in (sys.stdin if f == "-" else open(f)))
    for line in lines:
        line = line.strip()
        i = line.find("{")
        if i < 0:
            continue
        try:
            r = json.loads(line[i:])
        except ValueError:
            continue
        if "us" in r:
            rows.setdefault((r["op"], r["pes"]), {})[r["lib"]] = r["us"]
        elif "wrong" in r:
            rows.setdefault((r["op"], r["pes"]), {})[r["lib"]] = f"wrong result ({r['wrong']})"
    print("| operation | PEs | pgas (us) | NVSHMEM4Py (us) | pgas / NVSHMEM4Py |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (op, pes), libs in rows.items():
        a, b = libs.get("pgas"), libs.get("nvshmem4py")
        both = isinstance(a, float) and isinstance(b, float)
        ratio = f"{a / b:.2f}" if both else "-"
        print(f"| {op} | {pes} | {a if a else '-'} | {b if b else '-'} | {ratio} |")


if __name__ == "__main__":
    main()
