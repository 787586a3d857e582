//! The kernel IR: a small tree lowered from `syn`, every node keeping its span. The parser
//! builds it with `ty: Ty::Error` placeholders; the checker fills in types, C names and call
//! targets; the emitter prints it.

use crate::error::Sp;
use crate::intrinsics::Intrinsic;
use crate::types::{EnumTy, Scalar, Ty};
use proc_macro2::Span;

/// A `#[pgas_kernel]` or `#[pgas_device]` function.
#[derive(Debug)]
pub struct Function {
    pub name: String,
    pub span: Span,
    pub line: usize,
    pub is_kernel: bool,
    pub params: Vec<Param>,
    /// Declared return type (device functions only): a scalar or a `Vec16<T>`.
    pub ret: Option<(Ty, Span)>,
    pub body: Block,
}

/// One parameter.
#[derive(Debug)]
pub struct Param {
    pub name: String,
    pub span: Span,
    /// The declared type: a scalar, a buffer, or `Team`.
    pub ty: Ty,
    pub comptime: bool,
    /// The C identifier (set by the checker).
    pub c_name: String,
    /// Whether the body reads it (set by the checker; unread comptime constants are declared
    /// `[[maybe_unused]]`).
    pub read: bool,
}

/// `{ stmts; tail }`.
#[derive(Debug)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
    pub span: Sp,
}

/// A statement.
#[derive(Debug)]
pub enum Stmt {
    Let(Let),
    /// An expression statement (with or without `;`).
    Expr(Expr),
}

/// `let [mut] name[: ty] [= init];`
#[derive(Debug)]
pub struct Let {
    pub name: String,
    pub span: Span,
    pub line: usize,
    pub mutable: bool,
    pub declared: Option<(Scalar, Span)>,
    pub init: Option<Expr>,
    /// The variable's type (set by the checker).
    pub ty: Ty,
    pub c_name: String,
    /// Whether the variable is ever read (unread ones are declared `[[maybe_unused]]` so NVRTC
    /// stays quiet).
    pub read: bool,
    /// For `shared_array::<T, N>()`, the fragment arrays `frag_*::<T, N>()` and a local array
    /// whose length is a `#[comptime]` expression: N as C text.
    pub array_len: Option<String>,
}

/// An expression.
#[derive(Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Sp,
    pub line: usize,
    pub ty: Ty,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    /// The operator's spelling (the same in Rust and C).
    pub fn text(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// Comparison operators yield `bool`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

/// What a call resolved to.
#[derive(Clone, Copy, Debug)]
pub enum Callee {
    /// Not resolved yet (or resolution failed).
    Unresolved,
    /// An intrinsic row with its element type, if generic.
    Intrinsic(&'static Intrinsic, Option<Scalar>),
    /// A `#[pgas_device]` function.
    Device,
}

/// A generic argument of a declaration (`shared_array::<T, N>()`, `frag_c::<f32, N>()`,
/// `dyn_shared::<T>()`).
#[derive(Debug, Clone)]
pub enum Generic {
    Type(Scalar, Span),
    Len(u64, Span),
    /// A comptime parameter's name.
    Name(String, Span),
}

/// Expression kinds.
#[derive(Debug)]
pub enum ExprKind {
    Int(u128, Option<Scalar>),
    /// Float literal: its digits (no suffix, no underscores).
    Float(String, Option<Scalar>),
    Bool(bool),
    Var {
        name: String,
        c_name: String,
    },
    Enum(EnumTy, &'static str),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Cast(Box<Expr>, Scalar),
    Assign(Box<Expr>, Box<Expr>),
    AssignOp(BinOp, Box<Expr>, Box<Expr>),
    Index(Box<Expr>, Box<Expr>),
    /// A local array `[a, b, c]` (only as a `let` initializer).
    Array(Vec<Expr>),
    /// A local array `[value; len]` (only as a `let` initializer); `len` is a literal, a
    /// `#[comptime]` parameter or arithmetic on them.
    ArrayRepeat {
        value: Box<Expr>,
        len: Box<Expr>,
    },
    /// `&x[a..b]` / `&mut x[a..]` ...
    Slice {
        base: Box<Expr>,
        start: Option<Box<Expr>>,
        end: Option<Box<Expr>>,
        mutable: bool,
    },
    /// `&x[i]` / `&mut x[i]`.
    ElemRef {
        base: Box<Expr>,
        index: Box<Expr>,
        mutable: bool,
    },
    Call {
        name: String,
        name_span: Span,
        generics: Vec<Generic>,
        args: Vec<Expr>,
        callee: Callee,
    },
    /// `recv.name(args)`; after checking, `args[0]` is the receiver.
    Method {
        name: String,
        name_span: Span,
        args: Vec<Expr>,
        callee: Callee,
    },
    If {
        cond: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
    },
    Block(Block),
    For {
        var: String,
        c_var: String,
        c_end: String,
        start: Box<Expr>,
        end: Box<Expr>,
        step: Option<Box<Expr>>,
        body: Block,
        /// The loop variable indexes a fragment array (set by the checker): the loop is emitted
        /// with `#pragma unroll`, so the index is a constant and the fragments stay in registers.
        unroll: bool,
    },
    While {
        cond: Box<Expr>,
        body: Block,
    },
    Loop(Block),
    Break,
    Continue,
    Return(Option<Box<Expr>>),
    /// `assert!(cond)` / `assert!(cond, "message")`.
    Assert {
        cond: Box<Expr>,
        message: String,
    },
}

impl Expr {
    /// A new expression with an unknown type.
    pub fn new(kind: ExprKind, span: impl Into<Sp>) -> Expr {
        let span = span.into();
        Expr {
            kind,
            span,
            line: span.start.start().line,
            ty: Ty::Error,
        }
    }
}
