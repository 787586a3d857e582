#!/usr/bin/env python3
"""Whether two builds' machine code is the same, kernel by kernel: for a restructuring of kernel
code that should change nothing (a device function instead of a copy, a shared handshake),
checked without a GPU. Instructions are compared with their operands, immediates, branch targets
and spacing aside (the checked variants carry line numbers as immediates), and kernels are matched
by name without the source hash (`pgas_k_1a2b3c4d_plain_..`: it changes with the text).

Usage: sass_same.py BEFORE_DIR AFTER_DIR
  each DIR the cubins of one build, from
  PGAS_NVRTC_CUBIN_DIR=DIR cargo test --test nvrtc
Prints each kernel found in both with its instruction counts and SAME or DIFFERENT; exits 1 if
any differs or a kernel is in one build only. Needs `cuobjdump` and `nvdisasm` on PATH (the
`nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` wheels)."""

import pathlib
import re
import sys

from sass_loop import kernels

HASH = re.compile(r"_[0-9a-f]{8}_")
IMMEDIATE = re.compile(r"0x[0-9a-f]+|-?\d+\.\d+(?:e[-+]\d+)?")
ENCODING = re.compile(r"/\*.*?\*/")


def build(folder):
    """{kernel name without its hash: [(opcode, operands without immediates)]} of every cubin."""
    out = {}
    for cubin in sorted(pathlib.Path(folder).glob("*.cubin")):
        for name, body in kernels(str(cubin)):
            out[HASH.sub("_", name, count=1)] = [(op, " ".join(IMMEDIATE.sub("#", ENCODING.sub("", rest)).split())) for _, op, rest in body]
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = build(sys.argv[1]), build(sys.argv[2])
    ok = True
    for name in sorted(before.keys() | after.keys()):
        if name not in before or name not in after:
            print(f"{name}: only in {'after' if name in after else 'before'}")
            ok = False
            continue
        same = before[name] == after[name]
        ok &= same
        print(f"{name}: {len(before[name])} / {len(after[name])} instructions, {'SAME' if same else 'DIFFERENT'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
