//! Type checker: Rust's rules on the kernel IR.
//!
//! Unsuffixed literals get inference variables that unify with the first concrete type they
//! meet (and default to `i32`/`f64`, as in Rust). Numeric types never mix implicitly. The
//! checker also resolves calls against the intrinsic table, enforces buffer kinds (only
//! `SymTensor` is a remote target) and mutability, gives every local a unique C name, and
//! records whether the function needs a collective launch.
//!
//! The checker is one `Checker` walking the IR; its methods are split by what they check:
//!
//! | file | checks |
//! | --- | --- |
//! | `checker.rs` | the entry point `check_fn`, the checker state, the expression contexts |
//! | `infer.rs` | inference variables: unification, defaulting, type names in messages |
//! | `scope.rs` | locals and scopes: lookup, and the unique C name each local gets |
//! | `stmt.rs` | blocks, `let` (and `shared_array`), control flow: `if`, loops, `return` |
//! | `expr.rs` | the expression walk: literals, variables, operators, casts, assignment |
//! | `array.rs` | local arrays `[0f32; 8]`, `[x, y]`: element type, length, indexing |
//! | `buffer.rs` | indexing, slices, element addresses, buffer kinds and mutability |
//! | `call.rs` | calls: device functions against their signatures, which calls are intrinsics; records callees |
//! | `intrinsic.rs` | intrinsic calls against their rows (`T`, argument kinds); records collectives and support code |
//! | `tensor.rs` | fragments, 16-byte tile accesses, compile-time constants, unrolled loops |
//! | `finish.rs` | the final pass: default literal types, literal ranges, unread locals |

mod array;
mod buffer;
mod call;
mod checker;
mod expr;
mod finish;
mod infer;
mod intrinsic;
mod scope;
mod stmt;
mod tensor;

pub use checker::{check_fn, is_simple_value, FnInfo, FnSig};
