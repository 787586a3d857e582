#!/usr/bin/env python3
"""NVRTC compile-time study for pgas's generated CUDA C (NVSHMEM device headers).

Standard library only (ctypes). Needs no GPU. Measures compile-to-CUBIN wall time of
representative pgas kernels and the effect of NVRTC precompiled headers (PCH),
--Ofast-compile, PTX-only compiles and batching, 3 repetitions each, and writes one JSON
object per compile to <out>/nvrtc_study.jsonl, then prints a table of medians.

    python3 scripts/studies/nvrtc_study.py [--nvrtc-lib DIR] [--cuda-include DIR] [--cccl-include DIR]
        [--nvshmem-include DIR] [--arch 90] [--out DIR] [--reps 3] [--reduce] [--study]
        [--reduce-with OPTIONS]... [--reduce-algorithms] [--auto-pch]

Defaults: the GPU test machines' paths (/usr/local/cuda/lib64, /usr/local/cuda/include,
/usr/local/cuda/include/cccl, the torch venv's nvidia/nvshmem/include) when they exist, else
the pip --target layout under <repo>/.deps. --reduce adds a kernel that calls
nvshmemx_float_sum_reduce_block (NVVM/ptxas-heavy, slow); --study adds the slower extras
(batches of 4 and 40, split-compile, extra-device-vectorization, --minimal, empty kernels).
--reduce-with OPTIONS (repeatable; OPTIONS split at spaces) measures only the reduce kernel, to
PTX and to CUBIN, with the default options and then with each OPTIONS added: how NVRTC's and
ptxas's optimization options trade compile time (docs/jit.md, "Collective objects"), e.g.
--reduce-with=--Ofast-compile=min --reduce-with=-Xptxas=-O1. --reduce-algorithms measures, to
PTX and to CUBIN, the f32 sum reduction through the public wrapper and then each of NVSHMEM
3.4.5's algorithms called alone (its internal templates: without the NVLS paths, segment,
recursive exchange, hierarchical fcollect, NVLS two-shot): which of them the compile time is.

Every measured compile uses a kernel name never used before in the run (NVRTC >= 12.9 may
cache results in the driver's compute cache when libcuda is present) and --no-cache.
PCH files are created in a private temporary directory (removed at exit): they are only
usable by the process (the NVRTC instance) that created them.
"""
import argparse
import ctypes
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEPS = os.path.normpath(os.path.join(HERE, "..", "..", ".deps"))
GPU_NVSHMEM = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem/include"


def default(gpu_path, deps_path):
    return gpu_path if os.path.exists(gpu_path) else deps_path


# --------------------------------------------------------------------------- sources
# The two preludes exactly as codegen/src/prelude.rs emits them.
PRELUDE_FULL = """#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT        // else ibgda_device.cuh wants <infiniband/mlx5dv.h>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }   // 3.4.5's reduce.cuh:819 names std::is_integral
#include <nvshmem.h>
#include <nvshmemx.h>
"""
PRELUDE_P2P = """#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT        // else ibgda_device.cuh wants <infiniband/mlx5dv.h>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }   // as in the full prelude
#include <device/nvshmem_defines.h>     // nvshmem.h without the collective headers
#include <device/nvshmemx_defines.h>
"""
PRELUDES = {"p2p": PRELUDE_P2P, "full": PRELUDE_FULL}
# The whole prelude as one header: the PCH arrangement. It is handed to NVRTC in memory
# (nvrtcCreateProgram's headers arrays), so no file has to exist and nothing can go stale.
HEADER_NAME = {"p2p": "pgas_prelude_p2p.h", "full": "pgas_prelude_full.h"}

SUPPORT = """// Rust accepts comparisons such as `x >= 0` on unsigned integers; NVRTC would warn (#186).
#pragma nv_diag_suppress 186
template <typename T> __device__ __forceinline__ T pgas_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T pgas_max(T a, T b) { return a < b ? b : a; }
template <typename T> __device__ __forceinline__ T pgas_abs(T a) { return a < (T)0 ? (T)-a : a; }
__device__ __forceinline__ size_t pgas_min_len(unsigned long long a, unsigned long long b) {
    return (size_t)(a < b ? a : b);
}
"""

BODY_P2P = """extern "C" __global__ void PGAS_KERNEL_NAME(float *dst, unsigned long long dst_len, float *src, unsigned long long src_len, uint64_t *sig, unsigned long long sig_len, int32_t pe) {
#line 6 PGAS_RUST_FILE
    size_t n = pgas_min_len(dst_len, src_len);
    if (blockIdx.x == 0) {
        nvshmemx_float_put_signal_nbi_block(dst, src, n, &sig[(size_t)0], (uint64_t)1, NVSHMEM_SIGNAL_SET, pe);
        if (threadIdx.x == 0) {
            nvshmem_signal_wait_until(&sig[(size_t)0], NVSHMEM_CMP_GE, (uint64_t)1);
        }
    }
}
"""
BODY_BARRIER = """extern "C" __global__ void PGAS_KERNEL_NAME(float *x, unsigned long long x_len, int32_t pe) {
#line 6 PGAS_RUST_FILE
    nvshmemx_barrier_all_block();
    if ((size_t)threadIdx.x < (size_t)x_len) {
        nvshmem_float_p(x + threadIdx.x, x[threadIdx.x] + 1.0f, pe);
    }
    nvshmemx_barrier_all_block();
}
"""
BODY_REDUCE = """extern "C" __global__ void PGAS_KERNEL_NAME(nvshmem_team_t team, float *fdst, unsigned long long fdst_len, float *fsrc, unsigned long long fsrc_len) {
#line 6 PGAS_RUST_FILE
    nvshmemx_barrier_all_block();
    nvshmemx_float_sum_reduce_block(team, fdst, fsrc, pgas_min_len(fdst_len, fsrc_len));
}
"""
# The f32 sum reduction of a block: the public wrapper, then NVSHMEM 3.4.5's algorithms (its
# internal templates, non_abi/device/coll/reduce.cuh) one at a time, for --reduce-algorithms.
_RDXN = "float, RDXN_OPS_SUM, NVSHMEMI_THREADGROUP_BLOCK"
REDUCE_ALGORITHMS = [
    ("public wrapper", "nvshmemx_float_sum_reduce_block"),
    ("without the NVLS paths", "nvshmemi_gpu_rdxn_threadgroup<%s>" % _RDXN),
    ("segment only", "gpu_rdxn_segment_threadgroup<%s>" % _RDXN),
    ("recursive exchange only", "gpu_rdxn_recexch_threadgroup<%s>" % _RDXN),
    ("hierarchical fcollect only", "nvshmemi_gpu_rdxn_hierarchical_fcollect_threadgroup<%s>" % _RDXN),
    ("NVLS two-shot only", "nvshmemi_add_reduce_nvls_twoshot_threadgroup<float, NVSHMEMI_THREADGROUP_BLOCK>"),
]


def reduce_body(call):
    return ('extern "C" __global__ void PGAS_KERNEL_NAME(nvshmem_team_t team, float *fdst, '
            'unsigned long long fdst_len, float *fsrc, unsigned long long fsrc_len) {\n'
            '    nvshmemx_barrier_all_block();\n'
            '    %s(team, fdst, fsrc, pgas_min_len(fdst_len, fsrc_len));\n}\n' % call)


BODY_EMPTY = """extern "C" __global__ void PGAS_KERNEL_NAME(float *x) { x[threadIdx.x] = 0.0f; }
"""

# Distinct small point-to-point kernels for batches: type x operation x scope.
_TYPES = [("float", "float"), ("double", "double"), ("int32", "int32_t"), ("int64", "int64_t"),
          ("uint64", "uint64_t")]
_OPS = ["put", "get", "put_nbi", "get_nbi"]
_SCOPES = [("nvshmemx_{t}_{op}_block", "block"), ("nvshmemx_{t}_{op}_warp", "warp")]


def batch_bodies(n):
    out = []
    for t, ct in _TYPES:
        for op in _OPS:
            for fn, _ in _SCOPES:
                call = fn.format(t=t, op=op)
                out.append(
                    "extern \"C\" __global__ void PGAS_KERNEL_NAME_%%d(%s *dst, unsigned long long dst_len, "
                    "const %s *src, unsigned long long src_len, int32_t pe) {\n"
                    "#line 6 PGAS_RUST_FILE\n"
                    "    %s(dst, src, pgas_min_len(dst_len, src_len), pe);\n"
                    "    nvshmem_quiet();\n}\n" % (ct, ct, call))
    assert n <= len(out), n
    return out[:n]


class Names:
    """Kernel names never used before in this run."""

    def __init__(self):
        self.n = 0

    def __call__(self, stem):
        self.n += 1
        return "pgas_study_%s_%d_%d" % (stem, os.getpid(), self.n)


def source(prelude, names, bodies, pch):
    """A pgas-style source: kernel-name #define, prelude, PGAS_RUST_FILE, SUPPORT, kernels.
    `pch`: the prelude is instead one header included first and followed by
    `#pragma nv_hdrstop`, so the per-kernel #defines come after the PCH prefix (a #define
    before the include would make every kernel's prefix different: warning #630, no PCH)."""
    if len(bodies) == 1:
        defines = "#define PGAS_KERNEL_NAME %s\n" % names[0]
        kernels = bodies[0].replace("PGAS_KERNEL_NAME_%d", "PGAS_KERNEL_NAME")
    else:
        defines = ""
        kernels = "".join(b.replace("PGAS_KERNEL_NAME_%d", n) for n, b in zip(names, bodies))
    head = '#include "%s"\n#pragma nv_hdrstop\n' % HEADER_NAME[prelude] if pch else ""
    prelude_text = "" if pch else PRELUDES[prelude]
    return head + defines + prelude_text + '#define PGAS_RUST_FILE "study.rs"\n' + SUPPORT + kernels


# --------------------------------------------------------------------------- NVRTC
PCH_STATUS = {0: "created", 13: "not_attempted", 14: "heap_exhausted", 15: "pch_create_error"}


class Nvrtc:
    def __init__(self, libdir):
        cands = sorted(glob.glob(os.path.join(libdir, "libnvrtc-builtins.so*")))
        cands = [c for c in cands if ".alt." not in c]
        for c in cands:  # libnvrtc loads the builtins by soname: preload them
            try:
                ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError:
                pass
        libs = [p for p in sorted(glob.glob(os.path.join(libdir, "libnvrtc.so*"))) if ".alt." not in p]
        if not libs:
            sys.exit("no libnvrtc.so* in %s" % libdir)
        self.path = min(libs, key=len)  # libnvrtc.so or libnvrtc.so.13
        self.lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        a, b = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
        self.version = (a.value, b.value)
        self.has_pch = hasattr(self.lib, "nvrtcGetPCHCreateStatus")

    def heap_size(self):
        n = ctypes.c_size_t()
        self.lib.nvrtcGetPCHHeapSize(ctypes.byref(n))
        return n.value

    def set_heap_size(self, size):
        return self.lib.nvrtcSetPCHHeapSize(ctypes.c_size_t(size))

    def compile(self, src, opts, headers=(), want="cubin"):
        lib = self.lib
        prog = ctypes.c_void_p()
        nh = len(headers)
        hs = (ctypes.c_char_p * nh)(*[h[1].encode() for h in headers]) if nh else None
        hn = (ctypes.c_char_p * nh)(*[h[0].encode() for h in headers]) if nh else None
        r = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"pgas_study.cu", nh, hs, hn)
        if r:
            raise RuntimeError("nvrtcCreateProgram: %s" % lib.nvrtcGetErrorString(r).decode())
        o = (ctypes.c_char_p * len(opts))(*[x.encode() for x in opts])
        t0 = time.perf_counter()
        rc = lib.nvrtcCompileProgram(prog, len(opts), o)
        dt = time.perf_counter() - t0
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(max(n.value, 1))
        lib.nvrtcGetProgramLog(prog, buf)
        res = {"seconds": dt, "rc": rc, "log": buf.value.decode(errors="replace"), "binary": b""}
        if rc == 0:
            get_size, get = (("nvrtcGetCUBINSize", "nvrtcGetCUBIN") if want == "cubin"
                             else ("nvrtcGetPTXSize", "nvrtcGetPTX"))
            getattr(lib, get_size)(prog, ctypes.byref(n))
            buf = ctypes.create_string_buffer(n.value)
            getattr(lib, get)(prog, buf)
            res["binary"] = buf.raw
        if self.has_pch:
            res["pch_status"] = PCH_STATUS.get(lib.nvrtcGetPCHCreateStatus(prog), "?")
            req = ctypes.c_size_t()
            if lib.nvrtcGetPCHHeapSizeRequired(prog, ctypes.byref(req)) == 0:
                res["pch_heap_required"] = req.value
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return res


def pch_note(log):
    if "using precompiled header file" in log:
        return "pch used"
    if "creating precompiled header file" in log:
        return "pch created"
    for code in ("#20282", "#629", "#630", "#626", "#2226", "#639"):
        if code in log:
            return "pch NOT used (%s)" % code.strip("#")
    return ""


# --------------------------------------------------------------------------- runner
class Study:
    def __init__(self, args):
        self.args = args
        self.nv = Nvrtc(args.nvrtc_lib)
        self.names = Names()
        os.makedirs(args.out, exist_ok=True)
        self.jsonl_path = os.path.join(args.out, "nvrtc_study.jsonl")
        self.jsonl = open(self.jsonl_path, "w")
        self.rows = []  # (label, [seconds], note)
        self.arch = "sm_%s" % args.arch
        self.base = [
            "-arch=%s" % self.arch, "-std=c++17", "-default-device", "-D__NVSHMEM_NUMBA_SUPPORT__",
            "-I" + args.nvshmem_include, "-I" + args.cuda_include, "-I" + args.cccl_include,
            # "#20283 PCH creation disabled because #line directive encountered": printed
            # when creating a PCH from a source whose kernel has #line; the PCH is fine.
            "-diag-suppress=20283",
        ]
        if self.nv.version >= (12, 9):
            self.base.append("--no-cache")  # NVRTC's own cache (driver compute cache, 12.9+)
        self.pchdir = tempfile.mkdtemp(prefix="pgas_pch_", dir=args.pch_dir)
        self.meta = {
            "nvrtc": "%d.%d" % self.nv.version, "nvrtc_lib": self.nv.path, "host": platform.node(),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
        }
        self.emit({"event": "meta", **self.meta, "args": vars(args)})

    def emit(self, obj):
        self.jsonl.write(json.dumps(obj) + "\n")
        self.jsonl.flush()

    def headers(self, prelude):
        return [(HEADER_NAME[prelude], "#pragma once\n" + PRELUDES[prelude])]

    def one(self, label, prelude, bodies, stem, extra=(), pch=None, want="cubin", rep=0):
        """pch: None, ('create', path), ('use', path) or ('auto', None): NVRTC's automatic PCH
        (`-pch`), which the process's first compile writes and its later ones use."""
        names = [self.names(stem) for _ in bodies]
        src = source(prelude, names, bodies, pch is not None)
        opts = list(self.base) + list(extra)
        if want == "ptx":
            opts[0] = "-arch=compute_%s" % self.args.arch
        if pch is not None:
            opts.append({"create": "--create-pch=%s", "use": "--use-pch=%s", "auto": "-pch"}[pch[0]]
                        .replace("%s", pch[1] or ""))
        hdrs = self.headers(prelude) if pch is not None else ()
        r = self.nv.compile(src, opts, hdrs, want)
        syms = all(n.encode() in r["binary"] for n in names) if r["rc"] == 0 else False
        note = pch_note(r["log"])
        rec = {"event": "compile", "label": label, "rep": rep, "seconds": round(r["seconds"], 4),
               "rc": r["rc"], "output": want, "bytes": len(r["binary"]), "symbols_ok": syms,
               "kernels": len(bodies), "prelude": prelude, "extra_options": list(extra),
               "pch": pch[0] if pch else None, "pch_note": note,
               "pch_status": r.get("pch_status"), "pch_heap_required": r.get("pch_heap_required"),
               "log": r["log"][:2000]}
        if pch and pch[0] == "create" and os.path.exists(pch[1]):
            rec["pch_file_bytes"] = os.path.getsize(pch[1])
        self.emit(rec)
        if r["rc"] != 0:
            print("  %s: rc=%d %s" % (label, r["rc"], r["log"][:400].strip()), file=sys.stderr)
        return rec

    def measure(self, label, prelude, bodies, stem, extra=(), pch=None, want="cubin", reps=None):
        reps = self.args.reps if reps is None else reps
        recs = [self.one(label, prelude, bodies, stem, extra, pch, want, i) for i in range(reps)]
        ok = all(r["rc"] == 0 and r["symbols_ok"] for r in recs)
        notes = sorted(set(r["pch_note"] for r in recs if r["pch_note"]))
        note = ("" if ok else "FAILED ") + ", ".join(notes)
        self.rows.append((label, [r["seconds"] for r in recs], note))
        print("  %-44s %s  %s" % (label, " ".join("%.2f" % r["seconds"] for r in recs), note), flush=True)
        return recs

    def create_pch(self, prelude, body, stem):
        """Create the PCH for `prelude` while compiling a kernel; grows the PCH heap and retries
        once when NVRTC reports that the heap is too small."""
        path = os.path.join(self.pchdir, "%s_%s.pch" % (prelude, self.names("pch")))
        rec = self.one("pch create %s (+1 kernel)" % prelude, prelude, [body], stem, pch=("create", path))
        if rec["pch_status"] == "heap_exhausted":
            need = rec["pch_heap_required"]
            size = (need + (need >> 3) + (64 << 20)) & ~((64 << 20) - 1)
            self.set_heap(size)
            rec2 = self.one("pch create %s (+1 kernel)" % prelude, prelude, [body], stem, pch=("create", path))
            self.rows.append(("pch create %s, heap too small" % prelude, [rec["seconds"]], "then heap -> %d MiB" % (size >> 20)))
            rec = rec2
        ok = rec["pch_status"] == "created" and os.path.exists(path)
        self.rows.append(("pch create %s (+1 kernel)" % prelude, [rec["seconds"]],
                          "%s, file %d MiB, heap need %d MiB" % (
                              rec["pch_status"], rec.get("pch_file_bytes", 0) >> 20,
                              (rec.get("pch_heap_required") or 0) >> 20)))
        print("  %-44s %.2f  %s" % (self.rows[-1][0], rec["seconds"], self.rows[-1][2]), flush=True)
        return path if ok else None

    def set_heap(self, size):
        rc = self.nv.set_heap_size(size)
        self.emit({"event": "set_pch_heap", "bytes": size, "rc": rc, "now": self.nv.heap_size()})

    def cross_process(self, prelude, path):
        """Does another process accept this PCH? (Expected: no, warning #20282, full compile.)"""
        code = ("import sys; sys.path.insert(0, %r); import nvrtc_study as s; s.child(%r)"
                % (HERE, json.dumps({"args": vars(self.args), "prelude": prelude, "path": path})))
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        try:
            rec = json.loads(p.stdout.strip().splitlines()[-1])
        except Exception:
            rec = {"seconds": time.perf_counter() - t0, "pch_note": "child failed: %s" % p.stderr[-300:]}
        rec["label"] = "pch use %s, OTHER process" % prelude
        self.emit(rec)
        self.rows.append((rec["label"], [rec["seconds"]], rec.get("pch_note", "")))
        print("  %-44s %.2f  %s" % (rec["label"], rec["seconds"], rec.get("pch_note", "")), flush=True)

    def run(self):
        a = self.args
        print("NVRTC %s (%s), %s CPUs, load %s" % (self.meta["nvrtc"], self.nv.path, self.meta["cpus"],
                                                 self.meta["loadavg"]), flush=True)
        # Set the PCH heap once, before any compile: resizing it later invalidates PCHs
        # already created. The full prelude needs about 563 MiB (NVRTC 13.0, NVSHMEM 3.4.5).
        if self.nv.has_pch and a.pch_heap_mib:
            self.set_heap(a.pch_heap_mib << 20)
        # First compile in the process (library init) is not counted.
        t0 = time.perf_counter()
        self.nv.compile('extern "C" __global__ void w(float *x) { x[0] = 1.0f; }', ["-arch=%s" % self.arch])
        self.rows.append(("first trivial compile in process", [time.perf_counter() - t0], "init, not a kernel"))
        if a.reduce_algorithms:
            for label, call in REDUCE_ALGORITHMS:
                for want in ("ptx", "cubin"):
                    self.measure("reduce, %s -> %s" % (label, want.upper()), "full", [reduce_body(call)],
                                 "redalg", want=want, reps=1)
            return
        if a.auto_pch:
            # The reduce kernel at --Ofast-compile=max (as the JIT's collective objects are
            # built), twice without a PCH, then three times with -pch in this one process.
            of = ["--Ofast-compile=max"]
            for i in (1, 2):
                self.measure("reduce kernel --Ofast-compile=max, no PCH, #%d" % i, "full",
                             [BODY_REDUCE], "apn", of, reps=1)
            for i in (1, 2, 3):
                self.measure("reduce kernel --Ofast-compile=max, -pch, #%d" % i, "full",
                             [BODY_REDUCE], "apc", of, pch=("auto", None), reps=1)
            return
        if a.reduce_with:
            for opts in [""] + a.reduce_with:
                extra = opts.split()
                for want in ("ptx", "cubin"):
                    self.measure("reduce kernel -> %s %s" % (want.upper(), opts or "(default options)"),
                                 "full", [BODY_REDUCE], "redw", extra, want=want, reps=1)
            return

        print("baseline (no PCH)", flush=True)
        self.measure("p2p kernel, p2p prelude", "p2p", [BODY_P2P], "p2p")
        self.measure("barrier kernel, full prelude", "full", [BODY_BARRIER], "bar")
        if a.reduce:
            self.measure("reduce kernel, full prelude", "full", [BODY_REDUCE], "red", reps=1)
        self.measure("batch of 16 p2p kernels, one program", "p2p", batch_bodies(16), "b16")
        if a.study:
            self.measure("batch of 4 p2p kernels, one program", "p2p", batch_bodies(4), "b4")
            self.measure("batch of 40 p2p kernels, one program", "p2p", batch_bodies(40), "b40")
            self.measure("one kernel of the batch, alone", "p2p", batch_bodies(1), "b1")

        print("PTX only (front end + NVVM, no ptxas)", flush=True)
        self.measure("p2p kernel -> PTX", "p2p", [BODY_P2P], "p2pptx", want="ptx")
        self.measure("barrier kernel -> PTX", "full", [BODY_BARRIER], "barptx", want="ptx")
        if a.reduce:
            self.measure("reduce kernel -> PTX", "full", [BODY_REDUCE], "redptx", want="ptx", reps=1)

        print("--Ofast-compile", flush=True)
        levels = ["max", "mid", "min"]
        for lv in levels:
            self.measure("p2p kernel --Ofast-compile=%s" % lv, "p2p", [BODY_P2P], "p2pof", ["--Ofast-compile=%s" % lv])
        for lv in levels if a.study else ["max"]:
            self.measure("barrier kernel --Ofast-compile=%s" % lv, "full", [BODY_BARRIER], "barof", ["--Ofast-compile=%s" % lv])
        if a.reduce:
            self.measure("reduce kernel --Ofast-compile=max", "full", [BODY_REDUCE], "redof", ["--Ofast-compile=max"])

        if a.study:
            print("other options", flush=True)
            for extra in (["-split-compile=0"], ["-split-compile=2"], ["--extra-device-vectorization"],
                          ["--minimal"], ["-dopt=on"]):
                self.measure("p2p kernel %s" % " ".join(extra), "p2p", [BODY_P2P], "p2px", extra)
            if a.reduce:
                self.measure("reduce kernel -split-compile=0", "full", [BODY_REDUCE], "redsc", ["-split-compile=0"])
            print("where the time goes (empty kernel)", flush=True)
            self.measure("empty kernel, no includes", "none", [BODY_EMPTY], "e0")
            self.measure("empty kernel, <cuda/std/type_traits> only", "tt", [BODY_EMPTY], "e1")
            self.measure("empty kernel, p2p prelude", "p2p", [BODY_EMPTY], "e2")
            self.measure("empty kernel, full prelude", "full", [BODY_EMPTY], "e3")
            self.measure("empty kernel, full prelude -> PTX", "full", [BODY_EMPTY], "e4", want="ptx")

        if not self.nv.has_pch:
            print("this NVRTC has no PCH API (needs 12.8+)")
            return
        print("PCH (whole prelude as one in-memory header + #pragma nv_hdrstop)", flush=True)
        for prelude, body, stem in (("p2p", BODY_P2P, "p2p"), ("full", BODY_BARRIER, "bar")):
            path = self.create_pch(prelude, body, stem + "c")
            if not path:
                continue
            kind = "p2p" if prelude == "p2p" else "barrier"
            self.measure("%s kernel, PCH" % kind, prelude, [body], stem + "u", pch=("use", path))
            if prelude == "p2p":
                self.measure("batch of 16 p2p kernels, PCH", prelude, batch_bodies(16), "b16u", pch=("use", path))
                self.measure("p2p kernel, PCH, --Ofast-compile=max", prelude, [body], "p2pou",
                             ["--Ofast-compile=max"], pch=("use", path), reps=1)
            else:
                if a.reduce:
                    self.measure("reduce kernel, PCH", prelude, [BODY_REDUCE], "redu", pch=("use", path), reps=1)
                    self.measure("reduce kernel, PCH, --Ofast-compile=max", prelude, [BODY_REDUCE],
                                 "redou", ["--Ofast-compile=max"], pch=("use", path))
            self.cross_process(prelude, path)

    def table(self):
        print()
        print("NVRTC %s, arch %s, %s CPUs, load at start %s" % (
            self.meta["nvrtc"], self.arch, self.meta["cpus"],
            tuple(round(x, 1) for x in self.meta["loadavg"]) if self.meta["loadavg"] else "?"))
        print("%-46s %8s %8s %8s %3s  %s" % ("what", "median s", "min", "max", "n", "note"))
        for label, secs, note in self.rows:
            print("%-46s %8.2f %8.2f %8.2f %3d  %s" % (label, statistics.median(secs), min(secs), max(secs),
                                                      len(secs), note))
        print("records: %s" % self.jsonl_path)

    def close(self):
        self.jsonl.close()
        shutil.rmtree(self.pchdir, ignore_errors=True)


def child(spec):
    """Subprocess half of the cross-process test: use a PCH another process created."""
    spec = json.loads(spec)
    args = argparse.Namespace(**spec["args"])
    args.out = tempfile.mkdtemp(prefix="pgas_pch_child_")
    s = Study(args)
    if args.pch_heap_mib:
        s.set_heap(args.pch_heap_mib << 20)
    body = BODY_P2P if spec["prelude"] == "p2p" else BODY_BARRIER
    rec = s.one("child", spec["prelude"], [body], "child", pch=("use", spec["path"]))
    s.close()
    shutil.rmtree(args.out, ignore_errors=True)
    print(json.dumps({k: rec[k] for k in ("seconds", "rc", "pch_note", "symbols_ok")}))


# Kernels with prelude "none"/"tt" (empty-kernel study).
PRELUDES["none"] = ""
PRELUDES["tt"] = "#include <cuda/std/type_traits>\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nvrtc-lib", default=default("/usr/local/cuda/lib64", os.path.join(DEPS, "nvidia/cu13/lib")))
    p.add_argument("--cuda-include", default=default("/usr/local/cuda/include", os.path.join(DEPS, "nvidia/cu13/include")))
    p.add_argument("--cccl-include", default=default("/usr/local/cuda/include/cccl", os.path.join(DEPS, "nvidia/cu13/include/cccl")))
    p.add_argument("--nvshmem-include", default=default(GPU_NVSHMEM, os.path.join(DEPS, "nvidia/nvshmem/include")))
    p.add_argument("--arch", default="90")
    p.add_argument("--out", default="nvrtc-study-out")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--pch-heap-mib", type=int, default=768,
                   help="nvrtcSetPCHHeapSize before the first compile (0: NVRTC's default, 256 MiB)")
    p.add_argument("--pch-dir", default=None, help="where the private PCH directory is made (default: $TMPDIR)")
    p.add_argument("--reduce", action="store_true", help="also a kernel with nvshmemx_float_sum_reduce_block (slow: its NVVM+ptxas time dominates; 1 rep for the slow rows)")
    p.add_argument("--study", action="store_true", help="also the slower extras")
    p.add_argument("--auto-pch", action="store_true",
                   help="measure only the reduce kernel at --Ofast-compile=max, without a PCH and with NVRTC's automatic -pch (the first compile writes it)")
    p.add_argument("--reduce-with", action="append", default=[], metavar="OPTIONS",
                   help="measure only the reduce kernel, by default and with these options added (repeatable)")
    p.add_argument("--reduce-algorithms", action="store_true",
                   help="measure only the f32 sum reduction: the public wrapper, then each NVSHMEM algorithm alone")
    args = p.parse_args()
    for k in ("nvrtc_lib", "cuda_include", "cccl_include", "nvshmem_include"):
        if not os.path.isdir(getattr(args, k)):
            sys.exit("--%s: no such directory: %s" % (k.replace("_", "-"), getattr(args, k)))
    s = Study(args)
    try:
        s.run()
    finally:
        s.table()
        s.close()


if __name__ == "__main__":
    main()
