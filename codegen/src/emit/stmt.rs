//! Statements: a function, its blocks, `let`, assignments, loops and branches.

use super::emitter::{c_string, Emitter, Target};
use super::intrinsic::bare;
use crate::check::is_simple_value;
use crate::ir::*;
use crate::types::{ArrayTy, Scalar, Ty, MAX_LOCAL_ARRAY};

impl Emitter {
    pub(super) fn function(&mut self, f: &Function) {
        self.cur_line = None;
        let sig = self.signature(f);
        self.raw(&format!("{sig} {{"));
        self.indent += 1;
        if let (true, true, true, Some(n)) = (
            f.is_kernel,
            self.checked,
            self.setmaxnreg,
            &self.max_threads,
        ) {
            // A number as an unsigned literal; an expression of comptime values cast.
            let n = if n.starts_with('(') {
                format!("(unsigned){n}")
            } else {
                format!("{n}u")
            };
            self.line(&format!("pgas_check_block_threads({n}, {});", f.line));
        }
        if f.is_kernel && self.warpgroup {
            self.line(&format!("pgas_require_whole_warpgroups({});", f.line));
        } else if f.is_kernel && self.full_warp {
            self.line(&format!("pgas_require_whole_warps({});", f.line));
        }
        for p in &f.params {
            let ct = match p.ty {
                Ty::Scalar(s) => Some(s.c_type()),
                // A reduction is its code (`EnumTy::ReduceOp`'s order).
                Ty::Enum(_) => Some("int"),
                _ => None,
            };
            if let (true, Some(ct)) = (p.comptime, ct) {
                // A reduction used only by a team collective is read through its macro
                // (`pgas_op_of<PGAS_CT_op>`), not this variable.
                let unused = if p.read && p.ty.scalar().is_some() {
                    ""
                } else {
                    "[[maybe_unused]] "
                };
                self.line(&format!(
                    "{unused}const {ct} {} = ({ct})(PGAS_CT_{});",
                    p.c_name, p.name
                ));
            }
        }
        self.block_stmts(&f.body.stmts);
        if let Some(t) = &f.body.tail {
            self.directive(t.line);
            if f.ret.is_some() {
                self.value_into(t, &Target::Return);
            } else {
                self.stmt_expr(t);
            }
        }
        self.indent -= 1;
        self.raw("}");
        self.cur_line = None;
    }

    pub(super) fn block_stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Let(l) => {
                    self.directive(l.line);
                    self.let_stmt(l);
                }
                Stmt::Expr(e) => {
                    self.directive(e.line);
                    self.stmt_expr(e);
                }
            }
        }
    }

    /// `{ stmts; tail }` as statements, the tail's value discarded.
    pub(super) fn block_body(&mut self, b: &Block) {
        self.indent += 1;
        self.block_stmts(&b.stmts);
        if let Some(t) = &b.tail {
            self.directive(t.line);
            self.stmt_expr(t);
        }
        self.indent -= 1;
    }

    pub(super) fn let_stmt(&mut self, l: &Let) {
        let unused = if l.read { "" } else { "[[maybe_unused]] " };
        match (l.ty, &l.array_len) {
            (Ty::FragArray(f), Some(n)) => {
                // Zeroed, so accumulators start at 0; registers, as long as every index is a
                // constant after unrolling.
                self.line(&format!(
                    "[[maybe_unused]] {} {}[{n}] = {{}};",
                    f.kind.c_type(),
                    l.c_name
                ));
                self.line(&format!(
                    "[[maybe_unused]] const unsigned long long {}_len = {n};",
                    l.c_name
                ));
            }
            (Ty::Buf(b), Some(n)) => {
                // `s.len()` alone reads only the length, so the array may go unreferenced.
                self.line(&format!(
                    "[[maybe_unused]] __shared__ {} {}[{n}];",
                    b.elem.c_type(),
                    l.c_name
                ));
                self.line(&format!(
                    "[[maybe_unused]] const unsigned long long {}_len = {n};",
                    l.c_name
                ));
            }
            (Ty::Buf(b), None) => {
                if let Some(init) = &l.init {
                    let (ptr, len) = self.buf(init);
                    // Only the length of a view may be used (`w.len()`), so neither half may warn.
                    self.line(&format!(
                        "[[maybe_unused]] {} *{} = {ptr};",
                        b.elem.c_type(),
                        l.c_name
                    ));
                    self.line(&format!(
                        "[[maybe_unused]] const unsigned long long {}_len = {len};",
                        l.c_name
                    ));
                }
            }
            (Ty::Array(a), _) => self.local_array(l, a),
            (ty, _) => {
                let c_ty = ty.value_c_type().unwrap_or("nvshmem_team_t");
                match &l.init {
                    Some(init) if !is_simple_value(init) => {
                        self.line(&format!("{unused}{c_ty} {};", l.c_name));
                        self.value_into(init, &Target::Var(&l.c_name));
                    }
                    Some(init) => {
                        let v = self.expr(init);
                        self.line(&format!("{unused}{c_ty} {} = {};", l.c_name, bare(&v)));
                    }
                    None => self.line(&format!("{unused}{c_ty} {};", l.c_name)),
                }
            }
        }
    }

    /// Evaluate `e` into `target` using statements where C needs them.
    pub(super) fn value_into(&mut self, e: &Expr, target: &Target) {
        match &e.kind {
            ExprKind::If {
                cond,
                then,
                els: Some(els),
            } if !is_simple_value(e) => {
                let c = self.expr(cond);
                self.line(&format!("if ({}) {{", bare(&c)));
                self.block_into(then, target);
                self.line("} else {");
                self.indent += 1;
                self.directive(els.line);
                self.value_into(els, target);
                self.indent -= 1;
                self.line("}");
            }
            ExprKind::Block(b) if !is_simple_value(e) => {
                self.line("{");
                self.block_into(b, target);
                self.line("}");
            }
            _ if matches!(e.ty, Ty::Never) => self.stmt_expr(e),
            _ => {
                let v = self.expr(e);
                match target {
                    Target::Return => self.line(&format!("return {};", bare(&v))),
                    Target::Var(name) => self.line(&format!("{name} = {};", bare(&v))),
                }
            }
        }
    }

    pub(super) fn block_into(&mut self, b: &Block, target: &Target) {
        self.indent += 1;
        self.block_stmts(&b.stmts);
        if let Some(t) = &b.tail {
            self.directive(t.line);
            self.value_into(t, target);
        }
        self.indent -= 1;
    }

    /// An expression in statement position: `if`, blocks, loops, `break`/`continue`,
    /// `return`, `assert!`, assignments, and any other expression as `(void)(x);`.
    pub(super) fn stmt_expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::If { cond, then, els } => self.if_stmt(cond, then, els.as_deref()),
            ExprKind::Block(b) => {
                self.line("{");
                self.block_body(b);
                self.line("}");
            }
            ExprKind::For {
                c_var,
                c_end,
                start,
                end,
                step,
                body,
                unroll,
                ..
            } => {
                let header = self.for_header(c_var, c_end, start, end, step.as_deref());
                if *unroll {
                    self.line("#pragma unroll");
                }
                self.line(&header);
                self.block_body(body);
                self.line("}");
            }
            ExprKind::While { cond, body } => {
                let c = self.expr(cond);
                self.line(&format!("while ({}) {{", bare(&c)));
                self.block_body(body);
                self.line("}");
            }
            ExprKind::Loop(body) => {
                self.line("for (;;) {");
                self.block_body(body);
                self.line("}");
            }
            ExprKind::Break => self.line("break;"),
            ExprKind::Continue => self.line("continue;"),
            ExprKind::Return(None) => self.line("return;"),
            ExprKind::Return(Some(v)) => self.value_into(v, &Target::Return),
            ExprKind::Assert { cond, message } => self.assert_stmt(cond, message, e.line),
            ExprKind::Assign(l, r) => {
                let lhs = self.expr(l);
                if is_simple_value(r) {
                    let v = self.expr(r);
                    self.line(&format!("{lhs} = {};", bare(&v)));
                } else {
                    self.value_into(r, &Target::Var(&lhs));
                }
            }
            ExprKind::AssignOp(op, l, r) => {
                let lhs = self.expr(l);
                let rhs = self.expr(r);
                match (op, l.ty) {
                    (BinOp::Rem, Ty::Scalar(s)) if s.is_float() => {
                        let f = if s == Scalar::F32 { "fmodf" } else { "fmod" };
                        self.line(&format!("{lhs} = {f}({lhs}, {rhs});"));
                    }
                    _ => self.line(&format!("{lhs} {}= {rhs};", op.text())),
                }
            }
            _ => {
                let v = self.expr(e);
                if matches!(e.ty, Ty::Unit | Ty::Never) {
                    self.line(&format!("{v};"));
                } else {
                    self.line(&format!("(void)({v});"));
                }
            }
        }
    }

    /// `if cond { then } else if ... else { ... }` as one C `if` / `else if` chain.
    fn if_stmt(&mut self, cond: &Expr, then: &Block, els: Option<&Expr>) {
        let c = self.expr(cond);
        self.line(&format!("if ({}) {{", bare(&c)));
        self.block_body(then);
        let mut els = els;
        while let Some(x) = els {
            match &x.kind {
                ExprKind::If {
                    cond,
                    then,
                    els: next,
                } => {
                    let c = self.expr(cond);
                    self.line(&format!("}} else if ({}) {{", bare(&c)));
                    self.block_body(then);
                    els = next.as_deref();
                }
                ExprKind::Block(b) => {
                    self.line("} else {");
                    self.block_body(b);
                    els = None;
                }
                _ => els = None,
            }
        }
        self.line("}");
    }

    /// The C header `for (T v = start, v_end = end; v < v_end; inc) {` of a `for` loop over
    /// `start..end` (`.step_by(step)`).
    fn for_header(
        &mut self, c_var: &str, c_end: &str, start: &Expr, end: &Expr, step: Option<&Expr>,
    ) -> String {
        let t = match start.ty {
            Ty::Scalar(s) => s.c_type(),
            _ => "int32_t",
        };
        let (s, en) = (self.expr(start), self.expr(end));
        let inc = match step {
            Some(st) => {
                let step = self.expr(st);
                if start.ty == Ty::Scalar(Scalar::Usize) {
                    format!("{c_var} += {}", bare(&step))
                } else {
                    format!("{c_var} += ({t})({})", bare(&step))
                }
            }
            None => format!("++{c_var}"),
        };
        format!("for ({t} {c_var} = {s}, {c_end} = {en}; {c_var} < {c_end}; {inc}) {{")
    }

    /// `assert!(cond, message)`: print the Rust file, line and message, then trap.
    fn assert_stmt(&mut self, cond: &Expr, message: &str, line: usize) {
        let c = self.expr(cond);
        self.line(&format!("if (!({c})) {{"));
        self.indent += 1;
        self.line(&format!(
            "printf(\"%s:%d: %s\\n\", PGAS_RUST_FILE, {}, {});",
            line,
            c_string(message)
        ));
        self.line("__trap();");
        self.indent -= 1;
        self.line("}");
    }
}

impl Emitter {
    /// `let acc = [v; n];` / `let a = [x, y];`: a C array of the element type, which NVRTC keeps
    /// in registers when every index is a constant after unrolling (the checker marks the loops
    /// whose counters index it `#pragma unroll`). `[v; n]` is filled by an unrolled loop, `v`
    /// evaluated once; a `#[comptime]` length is a constant `acc_len`, asserted in range when the
    /// kernel is specialized.
    fn local_array(&mut self, l: &Let, a: ArrayTy) {
        let unused = if l.read { "" } else { "[[maybe_unused]] " };
        let Some(t) = a.elem.c_type() else {
            return;
        };
        let c = &l.c_name;
        match l.init.as_ref().map(|i| &i.kind) {
            Some(ExprKind::Array(elems)) => {
                let vals: Vec<String> = elems
                    .iter()
                    .map(|x| bare(&self.expr(x)).to_string())
                    .collect();
                self.line(&format!(
                    "{unused}{t} {c}[{}] = {{{}}};",
                    elems.len(),
                    vals.join(", ")
                ));
            }
            Some(ExprKind::ArrayRepeat { value, len }) => {
                let (n, bound) = match a.len {
                    Some(n) => (n.to_string(), n.to_string()),
                    None => {
                        let text = self.expr(len);
                        self.line(&format!(
                            "const unsigned long long {c}_len = {};",
                            bare(&text)
                        ));
                        self.line(&format!(
                            "static_assert({c}_len >= 1 && {c}_len <= {MAX_LOCAL_ARRAY}, \"local array `{}` (\" PGAS_RUST_FILE \" line {}): the length must be 1 to {MAX_LOCAL_ARRAY}\");",
                            l.name, l.line
                        ));
                        (format!("{c}_len"), format!("(int){c}_len"))
                    }
                };
                self.line(&format!("{unused}{t} {c}[{n}];"));
                let v = self.expr(value);
                let fill = if has_effects(value) {
                    self.line("{");
                    self.indent += 1;
                    self.line(&format!("const {t} pgas_fill = {};", bare(&v)));
                    "pgas_fill".to_string()
                } else {
                    bare(&v).to_string()
                };
                self.line("#pragma unroll");
                self.line(&format!(
                    "for (int pgas_k = 0; pgas_k < {bound}; ++pgas_k) {c}[pgas_k] = {fill};"
                ));
                if fill == "pgas_fill" {
                    self.indent -= 1;
                    self.line("}");
                }
            }
            _ => {}
        }
    }
}

/// Whether evaluating `e` more than once could differ from once: it calls something or reads
/// memory (a trap in the checked variant, a load another thread may change).
fn has_effects(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(..) | ExprKind::Float(..) | ExprKind::Bool(_) | ExprKind::Var { .. } => false,
        ExprKind::Unary(_, x) | ExprKind::Cast(x, _) => has_effects(x),
        ExprKind::Binary(_, a, b) => has_effects(a) || has_effects(b),
        _ => true,
    }
}
