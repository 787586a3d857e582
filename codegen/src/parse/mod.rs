//! Front end: `syn` items to the kernel IR. Everything outside the kernel subset is reported
//! here, at its own span, with what is supported instead.
//!
//! The front end is one [`Lowerer`](lowerer::Lowerer) walking the syntax; its methods are split
//! by what they lower (the lowering functions call each other, so they are methods, not free
//! functions that would import each other's files):
//!
//! | file | lowers |
//! | --- | --- |
//! | `lowerer.rs` | the lowering state (where errors go) and the placeholder of a failed expression |
//! | `item.rs` | the entry points: a function's signature and parameters |
//! | `ty.rs` | parameter types, scalar type names |
//! | `stmt.rs` | blocks, `let`, control flow: `if`, loops, `break`/`continue`/`return` |
//! | `expr.rs` | the expression walk: literals, names, operators, casts, indexing, `&` |
//! | `call.rs` | calls of intrinsics and device functions, methods, generic arguments, `assert!` |
//! | `unsupported.rs` | what a kernel cannot say (closures, `match`, tuples ...), with the alternative |

mod call;
mod expr;
mod item;
mod lowerer;
mod stmt;
mod ty;
mod unsupported;

pub use item::{lower_fn, params_valid};
