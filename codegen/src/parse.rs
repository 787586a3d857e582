//! Front end: `syn` items to the kernel IR. Everything outside the kernel subset is reported
//! here, at its own span, with what is supported instead.

use crate::error::{Errors, Sp};
use crate::ir::*;
use crate::types::{BufKind, BufTy, EnumTy, Scalar, Ty};
use syn::spanned::Spanned;

/// Lower one function. `is_kernel` selects the kernel rules (comptime parameters, no return
/// value); device functions may return a scalar.
pub fn lower_fn(item: &syn::ItemFn, is_kernel: bool, errors: &mut Errors) -> Function {
    let sig = &item.sig;
    let what = if is_kernel {
        "#[pgas_kernel]"
    } else {
        "#[pgas_device]"
    };
    if let Some(c) = &sig.constness {
        errors.push(c.span, format!("a {what} function cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        errors.push(a.span, format!("a {what} function cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        errors.push(u.span, format!("a {what} function cannot be `unsafe`; the `launch_unchecked` launcher is the unsafe entry point"));
    }
    if let Some(abi) = &sig.abi {
        errors.push(
            Sp::of(&abi),
            format!("a {what} function cannot declare an ABI"),
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(Sp::of(&sig.generics),
            "generic kernels are not supported; use concrete types, or `#[comptime]` parameters for values",
        );
    }
    if let Some(v) = &sig.variadic {
        errors.push(Sp::of(&v), "variadic functions are not supported");
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            syn::FnArg::Receiver(r) => errors.push(
                Sp::of(&r),
                format!("a {what} function cannot take `self`; it is a free function"),
            ),
            syn::FnArg::Typed(pt) => {
                if let Some(p) = lower_param(pt, is_kernel, errors) {
                    params.push(p);
                }
            }
        }
    }
    let ret = match &sig.output {
        syn::ReturnType::Default => None,
        syn::ReturnType::Type(_, ty) => {
            if is_kernel {
                errors.push(Sp::of(&ty),
                    "a #[pgas_kernel] returns nothing; write results into a `&mut SymTensor` or `&mut CudaSlice`",
                );
                None
            } else {
                match scalar_of_type(ty) {
                    Some(s) => Some((s, ty.span())),
                    None => {
                        errors.push(Sp::of(&ty),
                            "a #[pgas_device] function returns a scalar type (bool, i8..i64, u8..u64, usize, isize, f16, bf16, f32, f64) or nothing",
                        );
                        None
                    }
                }
            }
        }
    };
    let body = lower_block(&item.block, errors);
    Function {
        name: sig.ident.to_string(),
        span: sig.ident.span(),
        line: sig.ident.span().start().line,
        is_kernel,
        params,
        ret,
        body,
    }
}

fn lower_param(pt: &syn::PatType, is_kernel: bool, errors: &mut Errors) -> Option<Param> {
    let mut comptime = false;
    for attr in &pt.attrs {
        if attr.path().is_ident("comptime") && matches!(attr.meta, syn::Meta::Path(_)) {
            if is_kernel {
                comptime = true;
            } else {
                errors.push(Sp::of(&attr),
                    "`#[comptime]` parameters belong to #[pgas_kernel] functions; pass the value to the helper as an ordinary argument",
                );
            }
        } else {
            errors.push(
                Sp::of(&attr),
                "unsupported parameter attribute; only `#[comptime]` is allowed",
            );
        }
    }
    let (name, span) = match &*pt.pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            if let Some(m) = &pi.mutability {
                errors.push(
                    m.span,
                    "kernel parameters cannot be `mut`; copy the value into a `let mut` local",
                );
            }
            (pi.ident.to_string(), pi.ident.span())
        }
        other => {
            errors.push(
                Sp::of(&other),
                "parameters must be plain names (`x: T`); patterns are not supported",
            );
            return None;
        }
    };
    let ty = lower_param_type(&pt.ty, errors)?;
    if comptime {
        match ty {
            Ty::Scalar(s) if s.is_int() || s == Scalar::Bool => {}
            _ => {
                errors.push(
                    Sp::of(&pt.ty),
                    "a `#[comptime]` parameter must be an integer or `bool`",
                );
                return None;
            }
        }
    }
    Some(Param {
        name,
        span,
        ty,
        comptime,
        c_name: String::new(),
        read: false,
    })
}

const PARAM_TYPES: &str = "kernel parameters are `&SymTensor<T>`, `&mut SymTensor<T>`, `&CudaSlice<T>`, `&mut CudaSlice<T>`, `&TensorMap<T>`, a scalar type, or `Team`";

fn lower_param_type(ty: &syn::Type, errors: &mut Errors) -> Option<Ty> {
    match ty {
        syn::Type::Reference(r) => {
            if r.lifetime.is_some() {
                errors.push(
                    Sp::of(&r),
                    "lifetimes are not needed on kernel parameters; remove `'a`",
                );
                return None;
            }
            let mutable = r.mutability.is_some();
            if let syn::Type::Path(tp) = &*r.elem {
                if tp.qself.is_none() {
                    if let Some(seg) = tp.path.segments.last() {
                        if seg.ident == "TensorMap" {
                            return tensor_map_param(seg, mutable, errors);
                        }
                        let kind = match seg.ident.to_string().as_str() {
                            "SymTensor" => Some(BufKind::Sym),
                            "CudaSlice" => Some(BufKind::Local),
                            _ => None,
                        };
                        if let Some(kind) = kind {
                            let elem = match &seg.arguments {
                                syn::PathArguments::AngleBracketed(ab) if ab.args.len() == 1 => {
                                    match &ab.args[0] {
                                        syn::GenericArgument::Type(t) => scalar_of_type(t),
                                        _ => None,
                                    }
                                }
                                _ => None,
                            };
                            return match elem {
                                Some(elem) => Some(Ty::Buf(BufTy {
                                    kind,
                                    elem,
                                    mutable,
                                })),
                                None => {
                                    errors.push(
                                        Sp::of(&seg.arguments),
                                        format!(
                                            "`{}` takes one scalar element type, e.g. `{}<f32>`",
                                            seg.ident, seg.ident
                                        ),
                                    );
                                    None
                                }
                            };
                        }
                    }
                }
            }
            errors.push(Sp::of(&ty), PARAM_TYPES);
            None
        }
        _ => {
            if let Some(s) = scalar_of_type(ty) {
                return Some(Ty::Scalar(s));
            }
            if let syn::Type::Path(tp) = ty {
                if let Some(seg) = tp.path.segments.last() {
                    if seg.ident == "Team" && seg.arguments.is_empty() {
                        return Some(Ty::Team);
                    }
                    if seg.ident == "SymTensor" || seg.ident == "CudaSlice" {
                        errors.push(
                            Sp::of(&ty),
                            format!(
                                "take the buffer by reference: `&{0}<T>` or `&mut {0}<T>`",
                                seg.ident
                            ),
                        );
                        return None;
                    }
                }
            }
            errors.push(Sp::of(&ty), PARAM_TYPES);
            None
        }
    }
}

/// `&TensorMap<T>`: read-only (the copy engine reads it from parameter space), of a type the
/// copy engine moves.
fn tensor_map_param(seg: &syn::PathSegment, mutable: bool, errors: &mut Errors) -> Option<Ty> {
    let elem = match &seg.arguments {
        syn::PathArguments::AngleBracketed(ab) if ab.args.len() == 1 => match &ab.args[0] {
            syn::GenericArgument::Type(t) => scalar_of_type(t),
            _ => None,
        },
        _ => None,
    };
    let Some(elem) = elem.filter(|s| *s != Scalar::Bool) else {
        errors.push(
            Sp::of(&seg.arguments),
            "`TensorMap` takes one numeric element type, e.g. `TensorMap<bf16>`",
        );
        return None;
    };
    Some(if mutable {
        Ty::TensorMapMut(elem)
    } else {
        Ty::TensorMap(elem)
    })
}

/// The scalar a type names, if it is one (`f32`, `half::f16`, ...).
pub fn scalar_of_type(ty: &syn::Type) -> Option<Scalar> {
    match ty {
        syn::Type::Path(tp) if tp.qself.is_none() => {
            let seg = tp.path.segments.last()?;
            if !seg.arguments.is_empty() {
                return None;
            }
            Scalar::from_rust(&seg.ident.to_string())
        }
        syn::Type::Paren(p) => scalar_of_type(&p.elem),
        syn::Type::Group(g) => scalar_of_type(&g.elem),
        _ => None,
    }
}

fn lower_block(block: &syn::Block, errors: &mut Errors) -> Block {
    let mut stmts = Vec::new();
    let mut tail = None;
    let n = block.stmts.len();
    for (i, stmt) in block.stmts.iter().enumerate() {
        match stmt {
            syn::Stmt::Local(local) => {
                if let Some(l) = lower_let(local, errors) {
                    stmts.push(Stmt::Let(l));
                }
            }
            syn::Stmt::Item(item) => errors.push(Sp::of(&item),
                "items (fn, struct, use, const, static ...) inside a kernel are not supported; declare helpers as #[pgas_device] functions outside it",
            ),
            syn::Stmt::Expr(e, semi) => {
                let ex = lower_expr(e, errors);
                if semi.is_none() && i + 1 == n {
                    tail = Some(Box::new(ex));
                } else {
                    stmts.push(Stmt::Expr(ex));
                }
            }
            syn::Stmt::Macro(m) => {
                let ex = lower_macro(&m.mac, errors);
                stmts.push(Stmt::Expr(ex));
            }
        }
    }
    Block {
        stmts,
        tail,
        span: block.brace_token.span.join().into(),
    }
}

fn lower_let(local: &syn::Local, errors: &mut Errors) -> Option<Let> {
    let (pat, declared) = match &local.pat {
        syn::Pat::Type(pt) => {
            let d = match scalar_of_type(&pt.ty) {
                Some(s) => Some((s, pt.ty.span())),
                None => {
                    errors.push(Sp::of(&pt.ty),
                        "a `let` type annotation must be a scalar type; buffers, slices and peer views take their type from the initializer",
                    );
                    None
                }
            };
            (&*pt.pat, d)
        }
        p => (p, None),
    };
    let (name, span, mutable) = match pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (
            pi.ident.to_string(),
            pi.ident.span(),
            pi.mutability.is_some(),
        ),
        syn::Pat::Wild(w) => {
            errors.push(
                Sp::of(&w),
                "`let _ = ...` is not supported; use the expression as a statement: `expr;`",
            );
            return None;
        }
        other => {
            errors.push(Sp::of(&other),
                "only `let name` and `let mut name` are supported; tuple and struct patterns are not",
            );
            return None;
        }
    };
    let init = match &local.init {
        Some(init) => {
            if let Some((_, d)) = &init.diverge {
                errors.push(Sp::of(&d), "`let ... else` is not supported");
            }
            Some(lower_expr(&init.expr, errors))
        }
        None => None,
    };
    Some(Let {
        name,
        span,
        line: local.span().start().line,
        mutable,
        declared,
        init,
        ty: Ty::Error,
        c_name: String::new(),
        read: false,
        array_len: None,
    })
}

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

fn err_expr(span: Sp) -> Expr {
    Expr::new(ExprKind::Bool(false), span)
}

fn boxed(e: &syn::Expr, errors: &mut Errors) -> Box<Expr> {
    Box::new(lower_expr(e, errors))
}

/// Lower an expression.
pub fn lower_expr(e: &syn::Expr, errors: &mut Errors) -> Expr {
    let span = Sp::of(e);
    let kind = match e {
        syn::Expr::Lit(l) => return lower_lit(&l.lit, errors),
        syn::Expr::Paren(p) => return lower_expr(&p.expr, errors),
        syn::Expr::Group(g) => return lower_expr(&g.expr, errors),
        syn::Expr::Path(p) => return lower_path(p, errors),
        syn::Expr::Unary(u) => {
            let op = match u.op {
                syn::UnOp::Neg(_) => UnOp::Neg,
                syn::UnOp::Not(_) => UnOp::Not,
                _ => {
                    errors.push(
                        Sp::of(&u.op),
                        "dereferencing with `*` is not supported; index buffers with `x[i]`",
                    );
                    return err_expr(span);
                }
            };
            ExprKind::Unary(op, boxed(&u.expr, errors))
        }
        syn::Expr::Binary(b) => {
            let (op, assign) = bin_op(&b.op);
            let l = boxed(&b.left, errors);
            let r = boxed(&b.right, errors);
            if assign {
                ExprKind::AssignOp(op, l, r)
            } else {
                ExprKind::Binary(op, l, r)
            }
        }
        syn::Expr::Assign(a) => ExprKind::Assign(boxed(&a.left, errors), boxed(&a.right, errors)),
        syn::Expr::Cast(c) => match scalar_of_type(&c.ty) {
            Some(s) => ExprKind::Cast(boxed(&c.expr, errors), s),
            None => {
                errors.push(Sp::of(&c.ty), "`as` casts only to scalar types (bool, i8..i64, u8..u64, usize, isize, f16, bf16, f32, f64)");
                return err_expr(span);
            }
        },
        syn::Expr::Index(ix) => {
            if let syn::Expr::Range(r) = &*ix.index {
                errors.push(
                    Sp::of(&r),
                    "a range slice must be borrowed: write `&x[a..b]` or `&mut x[a..b]`",
                );
                return err_expr(span);
            }
            ExprKind::Index(boxed(&ix.expr, errors), boxed(&ix.index, errors))
        }
        syn::Expr::Reference(r) => {
            let mutable = r.mutability.is_some();
            match &*r.expr {
                syn::Expr::Index(ix) => match &*ix.index {
                    syn::Expr::Range(range) => {
                        if let syn::RangeLimits::Closed(c) = range.limits {
                            errors.push(
                                Sp::of(&c),
                                "inclusive ranges `a..=b` are not supported; use `a..b + 1`",
                            );
                        }
                        ExprKind::Slice {
                            base: boxed(&ix.expr, errors),
                            start: range.start.as_ref().map(|s| boxed(s, errors)),
                            end: range.end.as_ref().map(|s| boxed(s, errors)),
                            mutable,
                        }
                    }
                    index => ExprKind::ElemRef {
                        base: boxed(&ix.expr, errors),
                        index: boxed(index, errors),
                        mutable,
                    },
                },
                syn::Expr::Path(_) | syn::Expr::Paren(_) => {
                    // `&x` / `&mut x` of a buffer is the buffer itself.
                    let mut inner = lower_expr(&r.expr, errors);
                    inner.span = span;
                    return inner;
                }
                other => {
                    errors.push(Sp::of(&other),
                        "`&` is supported on buffer elements `&x[i]`, slices `&x[a..b]` and buffer names",
                    );
                    return err_expr(span);
                }
            }
        }
        syn::Expr::Call(c) => {
            let (name, name_span, generics) = match &*c.func {
                syn::Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
                    let seg = &p.path.segments[0];
                    let generics = match &seg.arguments {
                        syn::PathArguments::None => Vec::new(),
                        syn::PathArguments::AngleBracketed(ab) => lower_generics(ab, errors),
                        syn::PathArguments::Parenthesized(pa) => {
                            errors.push(Sp::of(&pa), "unsupported call syntax");
                            Vec::new()
                        }
                    };
                    (seg.ident.to_string(), seg.ident.span(), generics)
                }
                syn::Expr::Path(p)
                    if p.path.segments.first().is_some_and(|s| {
                        matches!(
                            s.ident.to_string().as_str(),
                            "Box" | "Vec" | "String" | "Rc" | "Arc"
                        )
                    }) =>
                {
                    errors.push(
                        Sp::of(p),
                        "heap allocation (`Box`, `Vec`, `String` ...) is not supported in kernels; use buffer parameters or `shared_array::<T, N>()`",
                    );
                    return err_expr(span);
                }
                other => {
                    errors.push(Sp::of(&other),
                        "only calls of kernel intrinsics and #[pgas_device] functions by plain name are supported (no paths, closures or host functions)",
                    );
                    return err_expr(span);
                }
            };
            ExprKind::Call {
                name,
                name_span,
                generics,
                args: c.args.iter().map(|a| lower_expr(a, errors)).collect(),
                callee: Callee::Unresolved,
            }
        }
        syn::Expr::MethodCall(m) => {
            if let Some(t) = &m.turbofish {
                errors.push(Sp::of(&t), "method turbofish is not supported");
            }
            let mut args = vec![lower_expr(&m.receiver, errors)];
            args.extend(m.args.iter().map(|a| lower_expr(a, errors)));
            ExprKind::Method {
                name: m.method.to_string(),
                name_span: m.method.span(),
                args,
                callee: Callee::Unresolved,
            }
        }
        syn::Expr::If(i) => {
            if let syn::Expr::Let(l) = &*i.cond {
                errors.push(
                    Sp::of(&l),
                    "`if let` is not supported; kernels have no enums or options to match",
                );
                return err_expr(span);
            }
            ExprKind::If {
                cond: boxed(&i.cond, errors),
                then: lower_block(&i.then_branch, errors),
                els: i.else_branch.as_ref().map(|(_, e)| boxed(e, errors)),
            }
        }
        syn::Expr::Block(b) => {
            if let Some(l) = &b.label {
                errors.push(Sp::of(&l), "labeled blocks are not supported");
            }
            ExprKind::Block(lower_block(&b.block, errors))
        }
        syn::Expr::ForLoop(f) => return lower_for(f, errors),
        syn::Expr::While(w) => {
            if let Some(l) = &w.label {
                errors.push(Sp::of(&l), "loop labels are not supported");
            }
            if let syn::Expr::Let(l) = &*w.cond {
                errors.push(Sp::of(&l), "`while let` is not supported");
                return err_expr(span);
            }
            ExprKind::While {
                cond: boxed(&w.cond, errors),
                body: lower_block(&w.body, errors),
            }
        }
        syn::Expr::Loop(l) => {
            if let Some(lb) = &l.label {
                errors.push(Sp::of(&lb), "loop labels are not supported");
            }
            ExprKind::Loop(lower_block(&l.body, errors))
        }
        syn::Expr::Break(b) => {
            if let Some(l) = &b.label {
                errors.push(Sp::of(&l), "loop labels are not supported");
            }
            if let Some(v) = &b.expr {
                errors.push(
                    Sp::of(&v),
                    "`break` with a value is not supported; assign to a `let mut` before breaking",
                );
            }
            ExprKind::Break
        }
        syn::Expr::Continue(c) => {
            if let Some(l) = &c.label {
                errors.push(Sp::of(&l), "loop labels are not supported");
            }
            ExprKind::Continue
        }
        syn::Expr::Return(r) => ExprKind::Return(r.expr.as_ref().map(|e| boxed(e, errors))),
        syn::Expr::Macro(m) => return lower_macro(&m.mac, errors),
        syn::Expr::Closure(c) => {
            errors.push(
                c.or1_token.span,
                "closures are not supported in kernels; write a #[pgas_device] function",
            );
            return err_expr(span);
        }
        syn::Expr::Range(r) => {
            errors.push(
                Sp::of(&r),
                "ranges are only supported in `for` loops and in slices `&x[a..b]`",
            );
            return err_expr(span);
        }
        syn::Expr::Tuple(t) if t.elems.is_empty() => {
            return Expr::new(
                ExprKind::Block(Block {
                    stmts: Vec::new(),
                    tail: None,
                    span,
                }),
                span,
            );
        }
        syn::Expr::Array(_) | syn::Expr::Repeat(_) => {
            errors.push(span, "array expressions are not supported; use `shared_array::<T, N>()` or a buffer parameter");
            return err_expr(span);
        }
        syn::Expr::Field(f) => {
            errors.push(Sp::of(&f), "field access is not supported; kernels have no structs (use `x.len()` for a buffer's length)");
            return err_expr(span);
        }
        syn::Expr::Match(m) => {
            errors.push(
                m.match_token.span,
                "`match` is not supported; use `if`/`else if`/`else`",
            );
            return err_expr(span);
        }
        syn::Expr::Unsafe(u) => {
            errors.push(
                u.unsafe_token.span,
                "`unsafe` blocks are not needed or supported in kernels",
            );
            return err_expr(span);
        }
        syn::Expr::Try(t) => {
            errors.push(
                t.question_token.span,
                "the `?` operator is not supported in kernels",
            );
            return err_expr(span);
        }
        syn::Expr::Async(_) | syn::Expr::Await(_) => {
            errors.push(span, "`async`/`.await` is not supported in kernels");
            return err_expr(span);
        }
        syn::Expr::Struct(_) => {
            errors.push(span, "struct expressions are not supported in kernels");
            return err_expr(span);
        }
        syn::Expr::Let(_) => {
            errors.push(span, "`let` expressions are not supported here");
            return err_expr(span);
        }
        syn::Expr::Tuple(_) => {
            errors.push(span, "tuples are not supported in kernels");
            return err_expr(span);
        }
        _ => {
            errors.push(span, "this expression is not supported in kernels; see docs/dsl.md for the supported subset");
            return err_expr(span);
        }
    };
    Expr::new(kind, span)
}

fn lower_generics(ab: &syn::AngleBracketedGenericArguments, errors: &mut Errors) -> Vec<Generic> {
    let mut out = Vec::new();
    for arg in &ab.args {
        match arg {
            syn::GenericArgument::Type(t) => {
                if let Some(s) = scalar_of_type(t) {
                    out.push(Generic::Type(s, t.span()));
                } else if let syn::Type::Path(tp) = t {
                    match tp.path.get_ident() {
                        Some(id) => out.push(Generic::Name(id.to_string(), id.span())),
                        None => errors.push(Sp::of(&t), "expected a scalar type, an integer literal or a comptime parameter name"),
                    }
                } else {
                    errors.push(
                        Sp::of(&t),
                        "expected a scalar type, an integer literal or a comptime parameter name",
                    );
                }
            }
            syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            })) => match i.base10_parse::<u64>() {
                Ok(v) => out.push(Generic::Len(v, i.span())),
                Err(e) => errors.push(Sp::of(&i), e.to_string()),
            },
            syn::GenericArgument::Const(syn::Expr::Block(b)) => match b.block.stmts.as_slice() {
                [syn::Stmt::Expr(syn::Expr::Path(p), None)] if p.path.get_ident().is_some() => {
                    let id = p.path.get_ident().map(|i| (i.to_string(), i.span()));
                    if let Some((n, s)) = id {
                        out.push(Generic::Name(n, s));
                    }
                }
                _ => errors.push(
                    Sp::of(&b),
                    "expected an integer literal or a comptime parameter name",
                ),
            },
            other => errors.push(
                Sp::of(&other),
                "expected a scalar type, an integer literal or a comptime parameter name",
            ),
        }
    }
    out
}

fn lower_lit(lit: &syn::Lit, errors: &mut Errors) -> Expr {
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
                        errors.push(span, format!("unsupported literal suffix `{suffix}`"));
                        return err_expr(span);
                    }
                }
            };
            match scalar {
                Some(s) if s.is_float() => ExprKind::Float(i.base10_digits().to_string(), Some(s)),
                _ => match i.base10_parse::<u128>() {
                    Ok(v) => ExprKind::Int(v, scalar),
                    Err(e) => {
                        errors.push(span, e.to_string());
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
                    errors.push(span, format!("unsupported literal suffix `{suffix}`"));
                    return err_expr(span);
                }
            };
            ExprKind::Float(f.base10_digits().to_string(), scalar)
        }
        syn::Lit::Bool(b) => ExprKind::Bool(b.value),
        syn::Lit::Str(_) | syn::Lit::ByteStr(_) | syn::Lit::CStr(_) => {
            errors.push(
                span,
                "strings (`&str`, `String`) are not supported in kernels",
            );
            return err_expr(span);
        }
        _ => {
            errors.push(
                span,
                "this literal is not supported in kernels; use integer, float or bool literals",
            );
            return err_expr(span);
        }
    };
    Expr::new(kind, span)
}

fn lower_path(p: &syn::ExprPath, errors: &mut Errors) -> Expr {
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
                        errors.push(
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
    errors.push(
        span,
        "paths are not supported in kernels (no host globals, constants or associated items); use parameters, locals, or `SignalOp::`/`Cmp::`/`ReduceOp::` variants",
    );
    err_expr(span)
}

fn lower_for(f: &syn::ExprForLoop, errors: &mut Errors) -> Expr {
    let span = Sp::of(f);
    if let Some(l) = &f.label {
        errors.push(Sp::of(&l), "loop labels are not supported");
    }
    let var = match &*f.pat {
        syn::Pat::Ident(pi)
            if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() =>
        {
            pi.ident.to_string()
        }
        syn::Pat::Wild(_) => "_".to_string(),
        other => {
            errors.push(Sp::of(&other), "the loop variable must be a plain name");
            return err_expr(span);
        }
    };
    let (range, step) = match strip(&f.expr) {
        syn::Expr::Range(r) => (r, None),
        syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            match strip(&m.receiver) {
                syn::Expr::Range(r) => (r, Some(boxed(&m.args[0], errors))),
                other => {
                    errors.push(
                        Sp::of(&other),
                        "`step_by` is supported on a range: `(a..b).step_by(s)`",
                    );
                    return err_expr(span);
                }
            }
        }
        other => {
            errors.push(Sp::of(&other),
                "`for` loops iterate over `a..b` or `(a..b).step_by(s)`; iterators over buffers are not supported",
            );
            return err_expr(span);
        }
    };
    if let syn::RangeLimits::Closed(c) = range.limits {
        errors.push(
            Sp::of(&c),
            "inclusive ranges `a..=b` are not supported; use `a..b + 1`",
        );
    }
    let (start, end) = match (&range.start, &range.end) {
        (Some(s), Some(e)) => (boxed(s, errors), boxed(e, errors)),
        _ => {
            errors.push(Sp::of(&range), "the loop range needs both ends: `a..b`");
            return err_expr(span);
        }
    };
    let body = lower_block(&f.body, errors);
    Expr::new(
        ExprKind::For {
            var,
            c_var: String::new(),
            c_end: String::new(),
            start,
            end,
            step,
            body,
            unroll: false,
        },
        span,
    )
}

fn strip(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip(&p.expr),
        syn::Expr::Group(g) => strip(&g.expr),
        other => other,
    }
}

fn lower_macro(mac: &syn::Macro, errors: &mut Errors) -> Expr {
    let span = Sp::of(mac);
    let name = mac
        .path
        .get_ident()
        .map(|i| i.to_string())
        .unwrap_or_default();
    if name != "assert" {
        let hint = match name.as_str() {
            "println" | "print" | "eprintln" | "eprint" | "format" | "write" | "writeln" => {
                "printing and formatting are not supported in kernels"
            }
            "panic" | "unreachable" | "todo" | "unimplemented" => {
                "panicking macros are not supported in kernels; use `assert!(cond)`, which traps with the Rust file:line"
            }
            "vec" => "heap allocation (`vec!`) is not supported in kernels; use buffer parameters or `shared_array::<T, N>()`",
            _ => "macros are not supported in kernels except `assert!`",
        };
        errors.push(
            Sp::of(&mac.path),
            format!("`{}!`: {hint}", name_of(&mac.path)),
        );
        return err_expr(span);
    }
    let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
    let args = match mac.parse_body_with(parser) {
        Ok(a) => a,
        Err(e) => {
            errors.push(e.span(), format!("in `assert!`: {e}"));
            return err_expr(span);
        }
    };
    let mut it = args.iter();
    let cond = match it.next() {
        Some(c) => c,
        None => {
            errors.push(span, "`assert!` needs a condition");
            return err_expr(span);
        }
    };
    let message = match it.next() {
        None => format!("assertion failed: {}", tokens_text(cond)),
        Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        })) if it.next().is_none() => s.value(),
        Some(other) => {
            errors.push(Sp::of(&other), "`assert!` takes a condition and at most a plain string message (no format arguments)");
            return err_expr(span);
        }
    };
    Expr::new(
        ExprKind::Assert {
            cond: boxed(cond, errors),
            message,
        },
        span,
    )
}

fn name_of(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn tokens_text(e: &syn::Expr) -> String {
    use quote::ToTokens;
    e.to_token_stream().to_string()
}

/// Whether every parameter of `item` is of a supported kernel type (used to keep the
/// launchers' signatures after an error elsewhere in the kernel).
pub fn params_valid(item: &syn::ItemFn) -> bool {
    let mut errors = Errors::default();
    item.sig.inputs.iter().all(|input| match input {
        syn::FnArg::Typed(pt) => lower_param(pt, true, &mut errors).is_some(),
        syn::FnArg::Receiver(_) => false,
    }) && errors.is_empty()
}
