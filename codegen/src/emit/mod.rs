//! Emitter: typed IR to readable CUDA C++.
//!
//! One source holds the prelude, the support helpers, the `#[pgas_device]` functions the kernel
//! reaches and one `extern "C" __global__` kernel. Statements carry `#line` directives naming
//! the Rust file and line. The checked variant wraps every index, slice range and PE in a
//! helper that prints the Rust `file:line` and traps on a violation.
//!
//! | file | emits |
//! | --- | --- |
//! | `emitter.rs` | the entry point `emit_source`, the emitter state, names, literals and casts |
//! | `stmt.rs` | blocks, `let`, control flow, statements |
//! | `expr.rs` | expressions: buffers as (pointer, length), indexing and its checks, values, device-function calls |
//! | `intrinsic.rs` | a call of an intrinsic row: its arguments (with the checked variant's checks), its count, its template or NVSHMEM wrapper |

mod emitter;
mod expr;
mod intrinsic;
mod stmt;

pub use emitter::{c_ident, emit_source, Uses};
