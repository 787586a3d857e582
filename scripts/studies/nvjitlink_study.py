#!/usr/bin/env python3
"""Link-time compile study (docs/jit.md, "Link-time compiles"): what NVRTC + nvJitLink against an
LTO-IR NVSHMEM library costs beside NVRTC against NVSHMEM's headers. Standard library only
(ctypes); no GPU. Reuses scripts/studies/nvrtc_study.py's NVRTC wrapper, preludes and kernel bodies.

    python3 scripts/studies/nvjitlink_study.py [p2p] [reduce] [objects] [noinline] [--deps DIR] [--reps 3]

- p2p: a put-with-signal + wait kernel compiled inline (point-to-point prelude, to CUBIN) against
  the same kernel compiled against declarations only to LTO-IR and linked with a library of
  extern "C" wrappers (the library compiled once, first line).
- reduce: a `nvshmemx_float_sum_reduce_block` kernel inline (full prelude) against linked with a
  library wrapper of it.
- objects: the reduction compiled once as a relocatable object (`-rdc=true`,
  NVSHMEM_ENABLE_ALL_DEVICE_INLINING) at 128 and 255 registers against the same reduction in a
  whole kernel, with ptxas's stack and spill lines; then a kernel linked with a library of
  wrappers and the object in one LTO link against two steps (LTO to PTX, then PTX + object).
- noinline: a kernel of four reductions (sum, prod, min, max) through `__forceinline__` wrappers
  against `__noinline__` ones (slow: minutes on a 2-core machine).
DIR is the pip --target layout scripts/deps.sh makes (default: <repo>/.deps).
"""
import argparse
import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nvrtc_study as ns  # noqa: E402

LTOIR = 3  # NVJITLINK_INPUT_LTOIR
CUBIN = 1  # NVJITLINK_INPUT_CUBIN
PTX = 2  # NVJITLINK_INPUT_PTX
# What the first step of a two-step link keeps though nothing in it uses them.
KEEP = ["-variables-used=nvshmemi_device_state_d", "-variables-used=nvshmemi_device_lib_version_d"]


class Tools:
    def __init__(self, deps):
        lib = os.path.join(deps, "nvidia", "cu13", "lib")
        self.nv = ns.Nvrtc(lib)
        self.jl = ctypes.CDLL(os.path.join(lib, "libnvJitLink.so.13"))
        inc = os.path.join(deps, "nvidia")
        self.inline = ["-arch=sm_90", "-std=c++17", "-default-device", "-D__NVSHMEM_NUMBA_SUPPORT__",
                       "-I" + inc + "/nvshmem/include", "-I" + inc + "/cu13/include",
                       "-I" + inc + "/cu13/include/cccl", "--no-cache"]
        self.lto = self.inline + ["-dlto", "-rdc=true"]

    def ltoir(self, src):
        """NVRTC to LTO-IR: (seconds, bytes)."""
        lib = self.nv.lib
        prog = ctypes.c_void_p()
        assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"study.cu", 0, None, None) == 0
        opts = (ctypes.c_char_p * len(self.lto))(*[o.encode() for o in self.lto])
        t0 = time.perf_counter()
        rc = lib.nvrtcCompileProgram(prog, len(self.lto), opts)
        dt = time.perf_counter() - t0
        n = ctypes.c_size_t()
        if rc:
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(max(n.value, 1))
            lib.nvrtcGetProgramLog(prog, log)
            sys.exit("NVRTC failed:\n" + log.value.decode()[:3000])
        lib.nvrtcGetLTOIRSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetLTOIR(prog, buf)
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return dt, buf.raw

    def link(self, inputs, extra=(), lto=True):
        """nvJitLink of (bytes, kind) inputs to a CUBIN, or to PTX with "-ptx" in `extra`:
        (seconds, bytes). Bare bytes are LTO-IR."""
        # The versioned entry points nvJitLink.h's inline wrappers call (getattr: a name with
        # two leading underscores would be mangled inside a class).
        def jl(name):
            return getattr(self.jl, "__nvJitLink%s_13_0" % name)
        opts = [b"-arch=sm_90"] + ([b"-lto"] if lto else []) + [o.encode() for o in extra]
        h = ctypes.c_void_p()
        t0 = time.perf_counter()
        assert jl("Create")(ctypes.byref(h), len(opts), (ctypes.c_char_p * len(opts))(*opts)) == 0
        for i, item in enumerate(inputs):
            data, kind = item if isinstance(item, tuple) else (item, LTOIR)
            assert jl("AddData")(h, kind, data, ctypes.c_size_t(len(data)), b"in%d" % i) == 0
        rc = jl("Complete")(h)
        dt = time.perf_counter() - t0
        if rc:
            n = ctypes.c_size_t()
            jl("GetErrorLogSize")(h, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value + 1)
            jl("GetErrorLog")(h, log)
            sys.exit("nvJitLink failed:\n" + log.value.decode()[:3000])
        what = "Ptx" if "-ptx" in extra else "Cubin"
        n = ctypes.c_size_t()
        jl("GetLinked%sSize" % what)(h, ctypes.byref(n))
        out = ctypes.create_string_buffer(n.value)
        jl("GetLinked%s" % what)(h, out)
        jl("Destroy")(ctypes.byref(h))
        return dt, out.raw

    def inline_cubin(self, src):
        r = self.nv.compile(src, self.inline)
        if r["rc"]:
            sys.exit("NVRTC failed:\n" + r["log"][:3000])
        return r["seconds"]


DECLS = "typedef unsigned long long uint64_t; typedef int int32_t;\n"

P2P_LIB = ns.PRELUDE_P2P + r'''
extern "C" __device__ void pgas_w_put_signal_nbi_block(float *d, float *s, size_t n, uint64_t *sig, uint64_t v, int op, int pe) { nvshmemx_float_put_signal_nbi_block(d, s, n, sig, v, op, pe); }
extern "C" __device__ void pgas_w_signal_wait_until(uint64_t *sig, int cmp, uint64_t v) { nvshmem_signal_wait_until(sig, cmp, v); }
'''
P2P_KERNEL = DECLS + r'''
extern "C" __device__ void pgas_w_put_signal_nbi_block(float *d, float *s, size_t n, uint64_t *sig, uint64_t v, int op, int pe);
extern "C" __device__ void pgas_w_signal_wait_until(uint64_t *sig, int cmp, uint64_t v);
extern "C" __global__ void %s(float *dst, unsigned long long dst_len, float *src, unsigned long long src_len, uint64_t *sig, unsigned long long sig_len, int32_t pe) {
    size_t n = dst_len < src_len ? dst_len : src_len;
    if (blockIdx.x == 0) {
        pgas_w_put_signal_nbi_block(dst, src, n, &sig[0], 1, 9, pe);
        if (threadIdx.x == 0) pgas_w_signal_wait_until(&sig[0], 5, 1);
    }
}
'''

REDUCE_LIB = ns.PRELUDE_FULL + r'''
extern "C" __device__ int pgas_w_sum_reduce_block(int team, float *d, float *s, size_t n) { return nvshmemx_float_sum_reduce_block(team, d, s, n); }
extern "C" __device__ void pgas_w_barrier_all_block() { nvshmemx_barrier_all_block(); }
'''
REDUCE_KERNEL = DECLS + r'''
extern "C" __device__ int pgas_w_sum_reduce_block(int team, float *d, float *s, size_t n);
extern "C" __device__ void pgas_w_barrier_all_block();
extern "C" __global__ void %s(int team, float *d, unsigned long long dl, float *s, unsigned long long sl) {
    pgas_w_barrier_all_block();
    pgas_w_sum_reduce_block(team, d, s, dl < sl ? dl : sl);
}
'''


def four_reductions(qualifier, name):
    ops = ["sum", "prod", "min", "max"]
    wrappers = "".join(
        "__device__ %s void w_%s(nvshmem_team_t t, float *d, float *s, size_t n) "
        "{ nvshmemx_float_%s_reduce_block(t, d, s, n); }\n" % (qualifier, op, op) for op in ops)
    calls = "".join("    w_%s(team, d + %d, s, n);\n" % (op, 256 * i) for i, op in enumerate(ops))
    return (ns.PRELUDE_FULL + wrappers +
            'extern "C" __global__ void %s(nvshmem_team_t team, float *d, float *s, size_t n) {\n%s}\n'
            % (name, calls))


# -- objects: a collective compiled once to machine code (docs/jit.md, "Collective objects") --
INLINING = "-DNVSHMEM_ENABLE_ALL_DEVICE_INLINING"
OBJECT = ns.PRELUDE_FULL + r'''
extern "C" __device__ int pgas_w_sum_reduce_block(int team, float *d, float *s, size_t n) { return nvshmemx_float_sum_reduce_block(team, d, s, n); }
'''
WHOLE = ns.PRELUDE_FULL + r'''
extern "C" __global__ void __launch_bounds__(512) %s(int team, float *d, float *s, size_t n, unsigned iters) { for (unsigned k = 0; k < iters; k++) nvshmemx_float_sum_reduce_block(team, d, s, n); }
'''
STATE = r'''
__constant__ nvshmemi_device_host_state_t nvshmemi_device_state_d;
__constant__ nvshmemi_version_t nvshmemi_device_lib_version_d = {NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION, NVSHMEM_VENDOR_PATCH_VERSION};
'''


def many_wrappers():
    """A library like the JIT's: the study's point-to-point calls (type x op x scope) as
    extern "C" wrappers, plus NVSHMEM's state, defined once."""
    out = [ns.PRELUDE_P2P, STATE,
           'extern "C" __device__ void pgas_w_barrier_all_block() { nvshmem_quiet(); }\n']
    for t, ct in ns._TYPES:
        for op in ns._OPS:
            for fn, scope in ns._SCOPES:
                out.append('extern "C" __device__ void pgas_w_%s_%s_%s(%s *d, const %s *s, size_t n, int pe) '
                           '{ %s(d, s, n, pe); }\n' % (t, op, scope, ct, ct, fn.format(t=t, op=op)))
    return "".join(out)


def spills(log):
    """ptxas's stack frame and spill lines, per function."""
    return [l.strip() for l in log.splitlines() if "Function properties" in l or "spill" in l]


def objects(t):
    base = [o for o in t.inline if o != "-D__NVSHMEM_NUMBA_SUPPORT__"] + ["-Xptxas=-v"]
    for cap in (128, 255):
        r = t.nv.compile(OBJECT, base + ["-rdc=true", INLINING, "-maxrregcount=%d" % cap])
        assert r["rc"] == 0, r["log"][:3000]
        print("objects: the reduction as an object at %d registers: %.1f s" % (cap, r["seconds"]))
        print("\n".join("    " + l for l in spills(r["log"])[:4]))
        if cap == 128:
            obj = r["binary"]
    r = t.nv.compile(WHOLE % "pgas_whole", base + ["-D__NVSHMEM_NUMBA_SUPPORT__"])
    print("objects: the same reduction in a whole kernel bounded to 512 threads: %.1f s" % r["seconds"])
    print("\n".join("    " + l for l in spills(r["log"])[:2]))
    t.lto = [o for o in t.inline if o != "-D__NVSHMEM_NUMBA_SUPPORT__"] + [INLINING, "-dlto", "-rdc=true"]
    s, lib = t.ltoir(many_wrappers())
    print("objects: a library of %d wrappers to LTO-IR: %.2f s" % (many_wrappers().count('extern "C"'), s))
    _, ir = t.ltoir(REDUCE_KERNEL % "pgas_linked")
    one, _ = t.link([(ir, LTOIR), (lib, LTOIR), (obj, CUBIN)])
    first, ptx = t.link([(ir, LTOIR), (lib, LTOIR)], ["-ptx"] + KEEP)
    second, _ = t.link([(ptx.rstrip(b"\0"), PTX), (obj, CUBIN)], lto=False)
    print("objects: kernel + library + object in one LTO link: %.2f s; in two steps (LTO to PTX, "
          "then PTX + object): %.3f + %.3f s" % (one, first, second))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("modes", nargs="*", default=["p2p", "reduce"])
    ap.add_argument("--deps", default=os.path.normpath(os.path.join(HERE, "..", "..", ".deps")))
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    t = Tools(a.deps)
    names = ns.Names()
    if "p2p" in a.modes:
        s, lib = t.ltoir(P2P_LIB)
        print("p2p: library (2 wrappers) to LTO-IR: %.2f s, %d bytes" % (s, len(lib)))
        for _ in range(a.reps):
            inline = t.inline_cubin(ns.source("p2p", [names("i")], [ns.BODY_P2P], False))
            k, ir = t.ltoir(P2P_KERNEL % names("l"))
            l, _ = t.link([ir, lib])
            print("p2p: inline %.3f s; link-time %.3f s (NVRTC %.3f + nvJitLink %.3f)" % (inline, k + l, k, l))
    if "reduce" in a.modes:
        s, lib = t.ltoir(REDUCE_LIB)
        print("reduce: library to LTO-IR: %.2f s" % s)
        k, ir = t.ltoir(REDUCE_KERNEL % names("r"))
        l, _ = t.link([ir, lib])
        inline = t.inline_cubin(ns.source("full", [names("ri")], [ns.BODY_REDUCE], False))
        print("reduce: inline %.2f s; link-time %.2f s (NVRTC %.3f + nvJitLink %.2f)" % (inline, k + l, k, l))
    if "objects" in a.modes:
        objects(t)
    if "noinline" in a.modes:
        for q in ["__forceinline__", "__noinline__"]:
            print("four reductions, %s wrappers: %.1f s" % (q, t.inline_cubin(four_reductions(q, names("n")))))


if __name__ == "__main__":
    main()
