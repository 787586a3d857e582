/* pgas-ffi-gen shim: layout of CUDA's half; bindings map it to half::f16. */
#pragma once
typedef struct __half { unsigned short __x; } __half;
typedef __half half;
