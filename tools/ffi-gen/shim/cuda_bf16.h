/* pgas-ffi-gen shim: layout of CUDA's bfloat16; bindings map it to half::bf16. */
#pragma once
typedef struct __nv_bfloat16 { unsigned short __x; } __nv_bfloat16;
