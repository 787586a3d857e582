// Device access through a team's multicast address (NVLink SHARP, `SymTensor::multicast`):
// `multimem.st` writes every member's copy, `multimem.red` adds into every member's copy,
// `multimem.ld_reduce` reads the sum of the members' copies. `mc` is the multicast address of a
// symmetric f32 tensor of `n` elements (`MulticastView::as_device_ptr`). sm_90, PTX 8.1.
// Run by tests/gpu_suite/parity.rs where multicast is available; compiled by NVRTC in CI
// (tests/nvrtc_multimem.rs) everywhere.

extern "C" __global__ void pgas_multimem_store(float* mc, unsigned long long n, float base) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = base + (float)i;
        asm volatile("multimem.st.relaxed.sys.global.f32 [%0], %1;" ::"l"(mc + i), "f"(v) : "memory");
    }
}

extern "C" __global__ void pgas_multimem_red_add(float* mc, unsigned long long n, float v) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) {
        asm volatile("multimem.red.relaxed.sys.global.add.f32 [%0], %1;" ::"l"(mc + i), "f"(v) : "memory");
    }
}

extern "C" __global__ void pgas_multimem_ld_reduce(float* mc, float* out, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float r;
        asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];" : "=f"(r) : "l"(mc + i) : "memory");
        out[i] = r;
    }
}
