#!/usr/bin/env python3
"""The instructions of a kernel's main loop in its machine code, by opcode: the loop is the
backward branch whose body holds the most `HGMMA`s or `QGMMA`s (FP8) (the smallest such body on a tie), so for
the attention kernel it is the loop over K/V tiles. `docs/attention.md`, "Instructions", quotes
these counts. For a kernel whose name gives its keys a tile (`_bn128_`), it also prints the
instructions a key without the `ISETP`s, `FSEL`s and `FMUL`s, nearly all of them the attention
loop's masking and rescaling branches (which most tiles skip).

Usage: sass_loop.py CUBIN [NAME_PART]
  CUBIN      machine code, e.g. /tmp/att/pgas_attention.cubin from
             PGAS_NVRTC_CUBIN_DIR=/tmp/att cargo test --test nvrtc attention
  NAME_PART  the kernels whose name contains it (default: every kernel), e.g. plain_d128_bn128
Needs `cuobjdump` on PATH (CUDA toolkit, or `pip install nvidia-cuda-cuobjdump`)."""

import collections
import re
import subprocess
import sys

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")


def kernels(cubin):
    """(name, [(address, opcode, operands)]) for each function of the cubin."""
    text = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout
    name, body = None, []
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = LINE.search(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name:
        yield name, body


def main_loop(body):
    """The instructions from the target of the chosen backward branch to the branch."""
    best = None
    for at, op, rest in body:
        t = re.search(r"0x([0-9a-f]+)", rest)
        if not op.startswith("BRA") or not t or int(t.group(1), 16) >= at:
            continue
        lo = int(t.group(1), 16)
        inside = [i for i in body if lo <= i[0] <= at]
        key = (sum(i[1].startswith(("HGMMA", "QGMMA")) for i in inside), -len(inside))
        if best is None or key > best[0]:
            best = (key, inside)
    return best[1] if best else []


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    part = sys.argv[2] if len(sys.argv) > 2 else ""
    for name, body in kernels(sys.argv[1]):
        if part not in name:
            continue
        loop = main_loop(body)
        ops = collections.Counter(i[1].split(".")[0] for i in loop)
        print(f"{name}: {len(loop)} instructions in the main loop")
        print("  " + ", ".join(f"{op} {n}" for op, n in ops.most_common()))
        keys = re.search(r"_bn(\d+)_", name)
        if keys:
            rest = len(loop) - sum(ops[op] for op in ("ISETP", "FSEL", "FMUL"))
            print(f"  {rest / int(keys.group(1)):.2f} a key without ISETP, FSEL, FMUL")


if __name__ == "__main__":
    main()
