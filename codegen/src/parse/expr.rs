//! The expression walk: which lowering each kind of expression gets, and the operators,
//! casts, indexing, borrows, literals and names.

use super::lowerer::{err_expr, Lowerer};
use super::ty::scalar_of_type;
use crate::error::Sp;
use crate::ir::{BinOp, Block, Expr, ExprKind, UnOp};
use crate::types::{EnumTy, Scalar};

impl Lowerer<'_> {
    /// Lower an expression: one arm per kind of expression, each lowered by its own method.
    pub fn lower_expr(&mut self, e: &syn::Expr) -> Expr {
        match e {
            syn::Expr::Lit(l) => self.lower_lit(&l.lit),
            syn::Expr::Paren(p) => self.lower_expr(&p.expr),
            syn::Expr::Group(g) => self.lower_expr(&g.expr),
            syn::Expr::Path(p) => self.lower_path(p),
            syn::Expr::Unary(u) => self.lower_unary(u),
            syn::Expr::Binary(b) => self.lower_binary(b),
            syn::Expr::Assign(a) => {
                let kind = ExprKind::Assign(self.boxed(&a.left), self.boxed(&a.right));
                Expr::new(kind, Sp::of(a))
            }
            syn::Expr::Cast(c) => self.lower_cast(c),
            syn::Expr::Index(ix) => self.lower_index(ix),
            syn::Expr::Reference(r) => self.lower_reference(r),
            syn::Expr::Call(c) => self.lower_call(c),
            syn::Expr::MethodCall(m) => self.lower_method_call(m),
            syn::Expr::If(i) => self.lower_if(i),
            syn::Expr::Block(b) => self.lower_block_expr(b),
            syn::Expr::ForLoop(f) => self.lower_for(f),
            syn::Expr::While(w) => self.lower_while(w),
            syn::Expr::Loop(l) => self.lower_loop(l),
            syn::Expr::Break(b) => self.lower_break(b),
            syn::Expr::Continue(c) => self.lower_continue(c),
            syn::Expr::Return(r) => self.lower_return(r),
            syn::Expr::Macro(m) => self.lower_macro(&m.mac),
            syn::Expr::Array(a) => {
                let elems = a.elems.iter().map(|x| self.lower_expr(x)).collect();
                Expr::new(ExprKind::Array(elems), Sp::of(a))
            }
            syn::Expr::Repeat(r) => {
                let kind = ExprKind::ArrayRepeat {
                    value: self.boxed(&r.expr),
                    len: self.boxed(&r.len),
                };
                Expr::new(kind, Sp::of(r))
            }
            // `()` is the empty block.
            syn::Expr::Tuple(t) if t.elems.is_empty() => {
                let span = Sp::of(e);
                let unit = Block {
                    stmts: Vec::new(),
                    tail: None,
                    span,
                };
                Expr::new(ExprKind::Block(unit), span)
            }
            other => self.unsupported(other),
        }
    }

    /// [`Self::lower_expr`], boxed for the IR's child expressions.
    pub fn boxed(&mut self, e: &syn::Expr) -> Box<Expr> {
        Box::new(self.lower_expr(e))
    }

    /// `-x` and `!x` (not `*x`: kernels have no pointers to dereference).
    fn lower_unary(&mut self, u: &syn::ExprUnary) -> Expr {
        let span = Sp::of(u);
        let op = match u.op {
            syn::UnOp::Neg(_) => UnOp::Neg,
            syn::UnOp::Not(_) => UnOp::Not,
            _ => {
                self.errors.push(
                    Sp::of(&u.op),
                    "dereferencing with `*` is not supported; index buffers with `x[i]`",
                );
                return err_expr(span);
            }
        };
        Expr::new(ExprKind::Unary(op, self.boxed(&u.expr)), span)
    }

    /// `a op b` and `a op= b`.
    fn lower_binary(&mut self, b: &syn::ExprBinary) -> Expr {
        let (op, assign) = bin_op(&b.op);
        let l = self.boxed(&b.left);
        let r = self.boxed(&b.right);
        let kind = if assign {
            ExprKind::AssignOp(op, l, r)
        } else {
            ExprKind::Binary(op, l, r)
        };
        Expr::new(kind, Sp::of(b))
    }

    /// `x as T`, to a scalar type.
    fn lower_cast(&mut self, c: &syn::ExprCast) -> Expr {
        let span = Sp::of(c);
        match scalar_of_type(&c.ty) {
            Some(s) => Expr::new(ExprKind::Cast(self.boxed(&c.expr), s), span),
            None => {
                self.errors.push(Sp::of(&c.ty), "`as` casts only to scalar types (bool, i8..i64, u8..u64, usize, isize, f16, bf16, f32, f64)");
                err_expr(span)
            }
        }
    }

    /// `x[i]`; a range index is a slice and must be borrowed.
    fn lower_index(&mut self, ix: &syn::ExprIndex) -> Expr {
        let span = Sp::of(ix);
        if let syn::Expr::Range(r) = &*ix.index {
            self.errors.push(
                Sp::of(&r),
                "a range slice must be borrowed: write `&x[a..b]` or `&mut x[a..b]`",
            );
            return err_expr(span);
        }
        let kind = ExprKind::Index(self.boxed(&ix.expr), self.boxed(&ix.index));
        Expr::new(kind, span)
    }

    /// `&x[a..b]` (a slice), `&x[i]` (an element's address), `&x` (the buffer itself).
    fn lower_reference(&mut self, r: &syn::ExprReference) -> Expr {
        let span = Sp::of(r);
        let mutable = r.mutability.is_some();
        let kind = match &*r.expr {
            syn::Expr::Index(ix) => match &*ix.index {
                syn::Expr::Range(range) => {
                    if let syn::RangeLimits::Closed(c) = range.limits {
                        self.errors.push(
                            Sp::of(&c),
                            "inclusive ranges `a..=b` are not supported; use `a..b + 1`",
                        );
                    }
                    ExprKind::Slice {
                        base: self.boxed(&ix.expr),
                        start: range.start.as_ref().map(|s| self.boxed(s)),
                        end: range.end.as_ref().map(|s| self.boxed(s)),
                        mutable,
                    }
                }
                index => ExprKind::ElemRef {
                    base: self.boxed(&ix.expr),
                    index: self.boxed(index),
                    mutable,
                },
            },
            syn::Expr::Path(_) | syn::Expr::Paren(_) => {
                // `&x` / `&mut x` of a buffer is the buffer itself.
                let mut inner = self.lower_expr(&r.expr);
                inner.span = span;
                return inner;
            }
            other => {
                self.errors.push(Sp::of(&other),
                    "`&` is supported on buffer elements `&x[i]`, slices `&x[a..b]` and buffer names",
                );
                return err_expr(span);
            }
        };
        Expr::new(kind, span)
    }

    /// A literal: integers and floats with their suffixes, `true`/`false`.
    pub fn lower_lit(&mut self, lit: &syn::Lit) -> Expr {
        let span = Sp::of(lit);
        let kind = match lit {
            syn::Lit::Int(i) => {
                let suffix = i.suffix();
                let scalar = if suffix.is_empty() {
                    None
                } else {
                    match Scalar::from_rust(suffix) {
                        Some(s) if s != Scalar::Bool && !s.is_half() && !s.is_fp8() => Some(s),
                        _ => {
                            self.errors
                                .push(span, format!("unsupported literal suffix `{suffix}`"));
                            return err_expr(span);
                        }
                    }
                };
                match scalar {
                    Some(s) if s.is_float() => {
                        ExprKind::Float(i.base10_digits().to_string(), Some(s))
                    }
                    _ => match i.base10_parse::<u128>() {
                        Ok(v) => ExprKind::Int(v, scalar),
                        Err(e) => {
                            self.errors.push(span, e.to_string());
                            return err_expr(span);
                        }
                    },
                }
            }
            syn::Lit::Float(f) => {
                let suffix = f.suffix();
                let scalar = match suffix {
                    "" => None,
                    "f32" => Some(Scalar::F32),
                    "f64" => Some(Scalar::F64),
                    _ => {
                        self.errors
                            .push(span, format!("unsupported literal suffix `{suffix}`"));
                        return err_expr(span);
                    }
                };
                ExprKind::Float(f.base10_digits().to_string(), scalar)
            }
            syn::Lit::Bool(b) => ExprKind::Bool(b.value),
            syn::Lit::Str(_) | syn::Lit::ByteStr(_) | syn::Lit::CStr(_) => {
                self.errors.push(
                    span,
                    "strings (`&str`, `String`) are not supported in kernels",
                );
                return err_expr(span);
            }
            _ => {
                self.errors.push(
                    span,
                    "this literal is not supported in kernels; use integer, float or bool literals",
                );
                return err_expr(span);
            }
        };
        Expr::new(kind, span)
    }

    /// A name: a local or parameter, or an intrinsic enum's variant (`Cmp::Eq`).
    fn lower_path(&mut self, p: &syn::ExprPath) -> Expr {
        let span = Sp::of(p);
        if p.qself.is_none() {
            if let Some(id) = p.path.get_ident() {
                let name = id.to_string();
                return Expr::new(
                    ExprKind::Var {
                        name,
                        c_name: String::new(),
                    },
                    span,
                );
            }
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs.len() == 2 {
                if let Some(en) = EnumTy::from_rust(&segs[0]) {
                    match en.variants().iter().find(|(v, _)| *v == segs[1]) {
                        Some((v, _)) => return Expr::new(ExprKind::Enum(en, v), span),
                        None => {
                            let list: Vec<String> = en
                                .variants()
                                .iter()
                                .map(|(v, _)| format!("{}::{v}", en.name()))
                                .collect();
                            self.errors.push(
                                p.path.segments[1].ident.span(),
                                format!(
                                    "no variant `{}` in `{}`; expected one of {}",
                                    segs[1],
                                    en.name(),
                                    list.join(", ")
                                ),
                            );
                            return err_expr(span);
                        }
                    }
                }
            }
        }
        self.errors.push(
        span,
        "paths are not supported in kernels (no host globals, constants or associated items); use parameters, locals, or `SignalOp::`/`Cmp::`/`ReduceOp::` variants",
    );
        err_expr(span)
    }
}

/// The IR operator of a `syn` one, and whether it is the compound assignment (`+=`).
fn bin_op(op: &syn::BinOp) -> (BinOp, bool) {
    use syn::BinOp as B;
    match op {
        B::Add(_) => (BinOp::Add, false),
        B::Sub(_) => (BinOp::Sub, false),
        B::Mul(_) => (BinOp::Mul, false),
        B::Div(_) => (BinOp::Div, false),
        B::Rem(_) => (BinOp::Rem, false),
        B::And(_) => (BinOp::And, false),
        B::Or(_) => (BinOp::Or, false),
        B::BitXor(_) => (BinOp::BitXor, false),
        B::BitAnd(_) => (BinOp::BitAnd, false),
        B::BitOr(_) => (BinOp::BitOr, false),
        B::Shl(_) => (BinOp::Shl, false),
        B::Shr(_) => (BinOp::Shr, false),
        B::Eq(_) => (BinOp::Eq, false),
        B::Lt(_) => (BinOp::Lt, false),
        B::Le(_) => (BinOp::Le, false),
        B::Ne(_) => (BinOp::Ne, false),
        B::Ge(_) => (BinOp::Ge, false),
        B::Gt(_) => (BinOp::Gt, false),
        B::AddAssign(_) => (BinOp::Add, true),
        B::SubAssign(_) => (BinOp::Sub, true),
        B::MulAssign(_) => (BinOp::Mul, true),
        B::DivAssign(_) => (BinOp::Div, true),
        B::RemAssign(_) => (BinOp::Rem, true),
        B::BitXorAssign(_) => (BinOp::BitXor, true),
        B::BitAndAssign(_) => (BinOp::BitAnd, true),
        B::BitOrAssign(_) => (BinOp::BitOr, true),
        B::ShlAssign(_) => (BinOp::Shl, true),
        B::ShrAssign(_) => (BinOp::Shr, true),
        // `syn::BinOp` is non-exhaustive; any future operator is outside the subset.
        _ => (BinOp::Add, false),
    }
}
