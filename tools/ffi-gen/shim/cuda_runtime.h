/* pgas-ffi-gen shim: the few CUDA runtime names the NVSHMEM host headers use.
 * The real cuda_runtime.h needs crt/ headers that the CUDA wheels do not ship, and bindgen
 * only needs declarations: cudaStream_t is the driver's CUstream (same type in CUDA). */
#pragma once
#include <cuda.h>
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define CUDART_VERSION 13000
typedef CUstream cudaStream_t;
struct double2 { double x, y; };
typedef enum cudaError { cudaSuccess = 0 } cudaError_t;
struct dim3 { unsigned int x, y, z; };
