//! Emitter: typed IR to readable CUDA C++.
//!
//! One source holds the prelude, the support helpers, the `#[pgas_device]` functions the kernel
//! reaches and one `extern "C" __global__` kernel. Statements carry `#line` directives naming
//! the Rust file and line. The checked variant wraps every index, slice range and PE in a
//! helper that prints the Rust `file:line` and traps on a violation.

use crate::check::is_simple_value;
use crate::intrinsics::{self, Arg, Count, Intrinsic, Ret, Scope};
use crate::ir::*;
use crate::nvcall;
use crate::prelude::{
    sm90_support, Prelude, CHECK_LL_SUPPORT, CHECK_SM90_SUPPORT, CHECK_SUPPORT,
    CHECK_TENSOR_SUPPORT, LL_SUPPORT, SUPPORT, TENSOR_SUPPORT,
};
use crate::template::expand_template;
use crate::types::{Scalar, Ty};

/// The C name of a `#[pgas_device]` function.
pub fn device_fn_name(rust: &str) -> String {
    format!("pgas_fn_{}", c_ident(rust))
}

/// A C identifier for a Rust one (non-ASCII characters become `_`).
pub fn c_ident(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Escape text for a C string literal.
pub fn c_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_ascii_graphic() || c == ' ' => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:03o}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// What the kernel and the device functions it reaches use, which decides what its source
/// carries.
#[derive(Clone, Copy, Debug, Default)]
pub struct Uses {
    /// The headers its calls need (and whether it is collective).
    pub prelude: Prelude,
    /// A warp-wide tensor-core instruction: the kernel traps at entry unless its block is whole
    /// warps.
    pub full_warp: bool,
    /// A tile or tensor-core intrinsic: the source carries their support code.
    pub tensor: bool,
    /// A warpgroup-wide instruction: the kernel traps at entry unless its block is whole
    /// warpgroups.
    pub warpgroup: bool,
    /// A Hopper intrinsic (mbarrier, TMA, wgmma): the source carries their support code, whose
    /// first line makes the runtime compile it for sm_90a.
    pub sm90: bool,
    /// A collective over peer memory: the source carries the LL protocol's support code.
    pub ll: bool,
    /// `setmaxnreg_*`: the kernel's bound is `__launch_bounds__(max_threads, 1)` (the register
    /// cap at entry that `setmaxnreg` needs), and the checked variant traps unless the block
    /// is exactly `max_threads`.
    pub setmaxnreg: bool,
}

/// Print one kernel (with the helpers it reaches, callees in any order) as a full source;
/// `uses` says what it needs (prelude, support code, the whole-warp guard); `max_threads`
/// becomes the kernel's `__launch_bounds__`.
pub fn emit_source(
    kernel: &Function,
    helpers: &[&Function],
    checked: bool,
    uses: Uses,
    max_threads: Option<u32>,
    file: &str,
) -> String {
    let mut e = Emitter {
        out: String::new(),
        indent: 0,
        checked,
        max_threads,
        full_warp: uses.full_warp,
        warpgroup: uses.warpgroup,
        setmaxnreg: uses.setmaxnreg,
        cur_line: None,
        wrappers: Default::default(),
    };
    // The source starts with its prelude (docs/internals.md), so tools can split on it.
    e.raw_block(uses.prelude.text());
    let variant = if checked { "checked" } else { "plain" };
    e.raw(&format!(
        "{} `#[pgas_kernel] fn {}`, {variant} variant.",
        nvcall::GENERATED,
        kernel.name
    ));
    e.raw("// PGAS_KERNEL_NAME and PGAS_CT_<param> are defined by pgas_codegen::specialize.");
    // `file` is inserted verbatim: the macro passes a placeholder that becomes `file!()`.
    e.raw(&format!("#define PGAS_RUST_FILE \"{file}\""));
    e.raw_block(SUPPORT);
    if uses.tensor {
        e.raw_block(TENSOR_SUPPORT);
    }
    if uses.sm90 {
        e.raw(&format!(
            "#define PGAS_CHECKED_VARIANT {}",
            u8::from(checked)
        ));
        e.raw_block(&sm90_support());
    }
    if uses.ll {
        e.raw_block(LL_SUPPORT);
    }
    if checked {
        e.raw_block(CHECK_SUPPORT);
        if uses.tensor {
            e.raw_block(CHECK_TENSOR_SUPPORT);
        }
        if uses.sm90 {
            e.raw_block(CHECK_SM90_SUPPORT);
        }
        if uses.ll {
            e.raw_block(CHECK_LL_SUPPORT);
        }
    }
    // The wrappers of the NVSHMEM calls go here, once the functions below say which.
    let wrappers_at = e.out.len();
    for h in helpers {
        let sig = e.signature(h);
        e.raw(&format!("{sig};"));
    }
    for h in helpers {
        e.function(h);
    }
    e.function(kernel);
    if !e.wrappers.is_empty() {
        let mut block = format!("{}\n", nvcall::WRAPPERS_BEGIN);
        for def in e.wrappers.values() {
            block.push_str(def);
            block.push('\n');
        }
        block.push_str(nvcall::WRAPPERS_END);
        block.push('\n');
        e.out.insert_str(wrappers_at, &block);
    }
    e.out
}

struct Emitter {
    out: String,
    indent: usize,
    checked: bool,
    /// The kernel's `max_threads`, emitted as `__launch_bounds__`.
    max_threads: Option<u32>,
    /// The kernel reaches a warp-wide tensor-core instruction: it starts with the whole-warp
    /// guard.
    full_warp: bool,
    /// The kernel reaches a warpgroup-wide instruction: it starts with the whole-warpgroup
    /// guard.
    warpgroup: bool,
    /// The kernel reallocates registers (`setmaxnreg_*`).
    setmaxnreg: bool,
    /// The Rust line the next output line maps to, once a `#line` has been written.
    cur_line: Option<usize>,
    /// The NVSHMEM call wrappers the source uses, by name, as inline definitions.
    wrappers: std::collections::BTreeMap<String, String>,
}

/// Where a value computed by statements goes.
enum Target<'a> {
    Return,
    Var(&'a str),
}

fn param_list(f: &Function) -> String {
    let mut parts = Vec::new();
    for p in &f.params {
        if p.comptime {
            continue;
        }
        match p.ty {
            Ty::Buf(b) => {
                parts.push(format!("{} *{}", b.elem.c_type(), p.c_name));
                parts.push(format!("unsigned long long {}_len", p.c_name));
            }
            Ty::Scalar(s) => parts.push(format!("{} {}", s.c_type(), p.c_name)),
            Ty::Team => parts.push(format!("nvshmem_team_t {}", p.c_name)),
            // Passed by value in parameter space, where the copy engine reads it (a
            // `__grid_constant__` parameter has an address); `_box` is the tile's rows << 32 |
            // columns, for the checked variant's bounds.
            Ty::TensorMap(_) | Ty::TensorMapMut(_) => {
                parts.push(format!(
                    "const __grid_constant__ pgas_tensor_map {}",
                    p.c_name
                ));
                parts.push(format!("unsigned long long {}_box", p.c_name));
            }
            _ => {}
        }
    }
    if parts.is_empty() {
        "void".into()
    } else {
        parts.join(", ")
    }
}

fn int_literal(v: u128, s: Scalar) -> String {
    // A cast binds tighter than any binary operator, so `(T)N` needs no outer parentheses; a
    // suffix only where the value does not fit an `int`.
    let suffix = match (v > i32::MAX as u128, s.is_signed_int()) {
        (false, _) => "",
        (true, true) => "ll",
        (true, false) => "ull",
    };
    match s {
        Scalar::I32 => format!("{v}"),
        Scalar::U32 => format!("{v}u"),
        _ => format!("({}){v}{suffix}", s.c_type()),
    }
}

fn float_literal(text: &str, s: Scalar) -> String {
    let mut t = text.replace('_', "");
    if !t.contains(['.', 'e', 'E']) {
        t.push_str(".0");
    } else if t.ends_with('.') {
        t.push('0');
    }
    match s {
        Scalar::F32 => format!("{t}f"),
        Scalar::F16 => format!("__float2half({t}f)"),
        Scalar::Bf16 => format!("__float2bfloat16({t}f)"),
        _ => t,
    }
}

/// Convert C expression `x` of type `from` to `to` (Rust `as`). The 16-bit floats and FP8 go
/// through `float` (exact from them, and `__nv_fp8_*`'s conversions are explicit); FP8 from
/// any other type goes through `double`, which holds every integer up to 32 bits and every
/// `f32` exactly, so the one rounding is FP8's (to nearest even, saturating to the largest
/// finite value, as CUDA's `__nv_fp8_*` constructors and `pgas::e4m3::from_f32` do).
fn cast(x: &str, from: Scalar, to: Scalar) -> String {
    if from == to {
        return x.to_string();
    }
    let via_float = |x: &str| -> String {
        match from {
            Scalar::F16 => format!("__half2float({x})"),
            Scalar::Bf16 => format!("__bfloat162float({x})"),
            _ => format!("(float)({x})"),
        }
    };
    match to {
        Scalar::F16 => format!("__float2half({})", via_float(x)),
        Scalar::Bf16 => format!("__float2bfloat16({})", via_float(x)),
        _ if to.is_fp8() && (from.is_half() || from.is_fp8() || from == Scalar::F32) => {
            format!("{}({})", to.c_type(), via_float(x))
        }
        _ if to.is_fp8() => format!("{}((double)({x}))", to.c_type()),
        Scalar::F32 if from.is_fp8() => format!("((float)({x}))"),
        _ if from.is_half() || from.is_fp8() => format!("(({}){})", to.c_type(), via_float(x)),
        _ => format!("(({})({x}))", to.c_type()),
    }
}

impl Emitter {
    fn bump(&mut self, text: &str) {
        if let Some(l) = &mut self.cur_line {
            *l += text.matches('\n').count();
        }
    }

    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
        self.out.push('\n');
        self.bump(s);
        self.bump("\n");
    }

    fn raw_block(&mut self, s: &str) {
        self.out.push_str(s);
        self.bump(s);
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.raw(s);
    }

    fn directive(&mut self, rust_line: usize) {
        if rust_line == 0 || self.cur_line == Some(rust_line) {
            return;
        }
        self.out
            .push_str(&format!("#line {rust_line} PGAS_RUST_FILE\n"));
        self.cur_line = Some(rust_line);
    }

    fn signature(&self, f: &Function) -> String {
        let params = param_list(f);
        if f.is_kernel {
            // The bound lets NVRTC budget registers for blocks of that many threads (spilling if
            // it must); without it a register-hungry kernel may not fit 1024 threads on an SM.
            // `setmaxnreg` takes effect only under a register cap at entry, which a minimum of
            // one block per SM gives.
            let min_blocks = if self.setmaxnreg { ", 1" } else { "" };
            let bounds = self
                .max_threads
                .map(|n| format!("__launch_bounds__({n}{min_blocks}) "))
                .unwrap_or_default();
            format!("extern \"C\" __global__ void {bounds}PGAS_KERNEL_NAME({params})")
        } else {
            let ret = f.ret.map(|(s, _)| s.c_type()).unwrap_or("void");
            format!(
                "static __device__ {ret} {}({params})",
                device_fn_name(&f.name)
            )
        }
    }

    fn function(&mut self, f: &Function) {
        self.cur_line = None;
        let sig = self.signature(f);
        self.raw(&format!("{sig} {{"));
        self.indent += 1;
        if let (true, true, true, Some(n)) =
            (f.is_kernel, self.checked, self.setmaxnreg, self.max_threads)
        {
            self.line(&format!("pgas_check_block_threads({n}u, {});", f.line));
        }
        if f.is_kernel && self.warpgroup {
            self.line(&format!("pgas_require_whole_warpgroups({});", f.line));
        } else if f.is_kernel && self.full_warp {
            self.line(&format!("pgas_require_whole_warps({});", f.line));
        }
        for p in &f.params {
            if let (true, Ty::Scalar(s)) = (p.comptime, p.ty) {
                let unused = if p.read { "" } else { "[[maybe_unused]] " };
                let ct = s.c_type();
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

    fn block_stmts(&mut self, stmts: &[Stmt]) {
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
    fn block_body(&mut self, b: &Block) {
        self.indent += 1;
        self.block_stmts(&b.stmts);
        if let Some(t) = &b.tail {
            self.directive(t.line);
            self.stmt_expr(t);
        }
        self.indent -= 1;
    }

    fn let_stmt(&mut self, l: &Let) {
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
            (ty, _) => {
                let c_ty = match ty {
                    Ty::Scalar(s) => s.c_type(),
                    Ty::Vec16(_) => "uint4",
                    _ => "nvshmem_team_t",
                };
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
    fn value_into(&mut self, e: &Expr, target: &Target) {
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

    fn block_into(&mut self, b: &Block, target: &Target) {
        self.indent += 1;
        self.block_stmts(&b.stmts);
        if let Some(t) = &b.tail {
            self.directive(t.line);
            self.value_into(t, target);
        }
        self.indent -= 1;
    }

    fn stmt_expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::If { cond, then, els } => {
                let c = self.expr(cond);
                self.line(&format!("if ({}) {{", bare(&c)));
                self.block_body(then);
                let mut els = els.as_deref();
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
                if *unroll {
                    self.line("#pragma unroll");
                }
                self.line(&format!(
                    "for ({t} {c_var} = {s}, {c_end} = {en}; {c_var} < {c_end}; {inc}) {{"
                ));
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
            ExprKind::Assert { cond, message } => {
                let c = self.expr(cond);
                self.line(&format!("if (!({c})) {{"));
                self.indent += 1;
                self.line(&format!(
                    "printf(\"%s:%d: %s\\n\", PGAS_RUST_FILE, {}, {});",
                    e.line,
                    c_string(message)
                ));
                self.line("__trap();");
                self.indent -= 1;
                self.line("}");
            }
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

    /// A buffer-valued expression as (pointer, length).
    fn buf(&mut self, e: &Expr) -> (String, String) {
        match &e.kind {
            ExprKind::Var { c_name, .. } => (c_name.clone(), format!("{c_name}_len")),
            ExprKind::Slice {
                base, start, end, ..
            } => {
                let (bp, bl) = self.buf(base);
                let s = match start {
                    Some(s) => self.expr(s),
                    None => "(size_t)0".into(),
                };
                let en = match end {
                    Some(x) => self.expr(x),
                    None => format!("(size_t){bl}"),
                };
                if start.is_none() && end.is_none() {
                    return (bp, bl);
                }
                let ptr = if self.checked {
                    format!("({bp} + pgas_check_range({s}, {en}, {bl}, {}))", e.line)
                } else {
                    format!("({bp} + {s})")
                };
                (ptr, format!("((size_t)({en}) - ({s}))"))
            }
            ExprKind::Method {
                args,
                callee: Callee::Intrinsic(row, _),
                ..
            } if row.name == "peer" => {
                let (bp, bl) = self.buf(&args[0]);
                let pe = self.expr(&args[1]);
                let ptr = if self.checked {
                    format!("pgas_check_peer({bp}, (long long)({pe}), {})", e.line)
                } else {
                    let c = match e.ty {
                        Ty::Buf(b) => b.elem.c_type(),
                        _ => "void",
                    };
                    format!("(({c} *)nvshmem_ptr({bp}, {}))", self.int_pe(&args[1], pe))
                };
                (ptr, bl)
            }
            ExprKind::Method {
                args,
                callee: Callee::Intrinsic(row, _),
                ..
            } if row.name == "cluster_peer" => {
                let (bp, bl) = self.buf(&args[0]);
                let rank = self.expr(&args[1]);
                let rank = if self.checked {
                    format!("pgas_check_cluster_rank({rank}, {})", e.line)
                } else {
                    rank
                };
                (format!("pgas_cluster_map({bp}, {rank})"), bl)
            }
            ExprKind::Call {
                callee: Callee::Intrinsic(row, Some(t)),
                ..
            } if row.ret == Ret::DynShared => {
                let c = t.c_type();
                (
                    format!("(({c} *)pgas_dyn_smem)"),
                    format!("pgas_dyn_smem_len(sizeof({c}))"),
                )
            }
            _ => (self.expr(e), "0ull".into()),
        }
    }

    fn int_pe(&self, e: &Expr, text: String) -> String {
        if e.ty == Ty::Scalar(Scalar::I32) {
            text
        } else {
            format!("(int)({text})")
        }
    }

    fn index(&mut self, base: &Expr, index: &Expr, line: usize) -> String {
        if let Ty::Frag(f) = base.ty {
            // A register of one fragment: `acc[i][j]`.
            let frag = self.expr(base);
            let j = self.expr(index);
            let regs = f.kind.regs().0;
            return if self.checked {
                format!("{frag}.x[pgas_check_index({j}, {regs}, {line})]")
            } else {
                format!("{frag}.x[{j}]")
            };
        }
        let (bp, bl) = self.buf(base);
        let i = self.expr(index);
        if self.checked {
            format!("{bp}[pgas_check_index({i}, {bl}, {line})]")
        } else {
            format!("{bp}[{i}]")
        }
    }

    fn expr(&mut self, e: &Expr) -> String {
        let scalar = e.ty.scalar();
        match &e.kind {
            ExprKind::Int(v, _) => int_literal(*v, scalar.unwrap_or(Scalar::I32)),
            ExprKind::Float(t, _) => float_literal(t, scalar.unwrap_or(Scalar::F64)),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Var { c_name, .. } => c_name.clone(),
            ExprKind::Enum(en, v) => en
                .variants()
                .iter()
                .find(|(n, _)| n == v)
                .map(|(_, c)| c.to_string())
                .unwrap_or_default(),
            ExprKind::Unary(op, inner) => {
                let x = self.expr(inner);
                match (op, scalar) {
                    (UnOp::Not, Some(Scalar::Bool)) => format!("(!{x})"),
                    (UnOp::Not, Some(s)) if s.is_narrow_int() => format!("(({})~{x})", s.c_type()),
                    (UnOp::Not, _) => format!("(~{x})"),
                    (UnOp::Neg, Some(s)) if s.is_narrow_int() => format!("(({})-{x})", s.c_type()),
                    (UnOp::Neg, _) => format!("(-{x})"),
                }
            }
            ExprKind::Binary(op, l, r) => {
                let (a, b) = (self.expr(l), self.expr(r));
                let operand = l.ty.scalar();
                match (op, operand) {
                    (BinOp::Rem, Some(s)) if s.is_float() => {
                        let f = if s == Scalar::F32 { "fmodf" } else { "fmod" };
                        format!("{f}({a}, {b})")
                    }
                    (op, Some(s)) if s.is_narrow_int() && !op.is_comparison() => {
                        format!("(({})({a} {} {b}))", s.c_type(), op.text())
                    }
                    _ => format!("({a} {} {b})", op.text()),
                }
            }
            ExprKind::Cast(inner, to) => {
                let x = self.expr(inner);
                match inner.ty.scalar() {
                    Some(from) => cast(&x, from, *to),
                    None => x,
                }
            }
            ExprKind::Index(base, index) => self.index(base, index, e.line),
            ExprKind::ElemRef { base, index, .. } => {
                format!("&{}", self.index(base, index, e.line))
            }
            ExprKind::Slice { .. } => self.buf(e).0,
            ExprKind::Call {
                name, args, callee, ..
            } => match callee {
                Callee::Device => {
                    let mut parts = Vec::new();
                    for a in args {
                        if matches!(a.ty, Ty::Buf(_)) {
                            let (p, l) = self.buf(a);
                            parts.push(p);
                            parts.push(l);
                        } else {
                            parts.push(self.expr(a));
                        }
                    }
                    format!("{}({})", device_fn_name(name), parts.join(", "))
                }
                Callee::Intrinsic(row, elem) => self.intrinsic(row, *elem, args, e.line),
                Callee::Unresolved => String::new(),
            },
            ExprKind::Method { args, callee, .. } => match callee {
                Callee::Intrinsic(row, _) if row.name == "peer" => self.buf(e).0,
                Callee::Intrinsic(row, elem) => self.intrinsic(row, *elem, args, e.line),
                _ => String::new(),
            },
            ExprKind::If {
                cond,
                then,
                els: Some(els),
            } => {
                let c = self.expr(cond);
                let t = then
                    .tail
                    .as_deref()
                    .map(|t| self.expr(t))
                    .unwrap_or_default();
                let f = self.expr(els);
                format!("({c} ? {t} : {f})")
            }
            ExprKind::Block(b) => b.tail.as_deref().map(|t| self.expr(t)).unwrap_or_default(),
            // Statement kinds never reach here: the checker only lets simple values nest.
            _ => String::new(),
        }
    }

    /// Expand an intrinsic row's template.
    fn intrinsic(
        &mut self,
        row: &Intrinsic,
        elem: Option<Scalar>,
        args: &[Expr],
        line: usize,
    ) -> String {
        let mut texts: Vec<String> = Vec::with_capacity(args.len());
        let mut lens: Vec<String> = Vec::with_capacity(args.len());
        let mut op = "";
        for (i, a) in args.iter().enumerate() {
            let kind = row.args.get(i).map(|(_, k)| *k);
            let (t, l) = match kind {
                Some(Arg::RemoteDst | Arg::SymSrc | Arg::AnySrc | Arg::AnyDst | Arg::AnyBuf) => {
                    self.buf(a)
                }
                Some(Arg::Pe) => {
                    let x = self.expr(a);
                    if self.checked {
                        (
                            format!("pgas_check_pe((long long)({x}), {line})"),
                            String::new(),
                        )
                    } else {
                        (self.int_pe(a, x), String::new())
                    }
                }
                Some(Arg::TeamPe(team)) => {
                    let x = self.expr(a);
                    if self.checked {
                        let team = args.get(team).map(|t| self.expr(t)).unwrap_or_default();
                        (
                            format!("pgas_check_team_pe((long long)({x}), {team}, {line})"),
                            String::new(),
                        )
                    } else {
                        (self.int_pe(a, x), String::new())
                    }
                }
                Some(kind @ (Arg::ClusterRank | Arg::ClusterMask)) => {
                    let x = self.expr(a);
                    if self.checked {
                        let what = if kind == Arg::ClusterRank {
                            "rank"
                        } else {
                            "mask"
                        };
                        (
                            format!("pgas_check_cluster_{what}({x}, {line})"),
                            String::new(),
                        )
                    } else {
                        (x, String::new())
                    }
                }
                Some(Arg::Bytes16 { .. }) => match &a.kind {
                    ExprKind::ElemRef { base, index, .. } => {
                        let (bp, bl) = self.buf(base);
                        let i = self.expr(index);
                        if self.checked {
                            (
                                format!("pgas_check_16({bp}, {i}, {bl}, {line})"),
                                String::new(),
                            )
                        } else {
                            (format!("({bp} + {i})"), String::new())
                        }
                    }
                    _ => (self.expr(a), String::new()),
                },
                // The helpers take fragments by reference: pass the lvalue `acc[i]`.
                Some(Arg::Frag { .. }) => match &a.kind {
                    ExprKind::ElemRef { base, index, .. } => {
                        (self.index(base, index, line), String::new())
                    }
                    _ => (self.expr(a), String::new()),
                },
                Some(Arg::TmaDst(map) | Arg::TmaSrc(map)) => match &a.kind {
                    ExprKind::ElemRef { base, index, .. } => {
                        let (bp, bl) = self.buf(base);
                        let i = self.expr(index);
                        if self.checked {
                            let map = args.get(map).map(|m| self.expr(m)).unwrap_or_default();
                            (
                                format!("pgas_check_tma_dst({bp}, {i}, {bl}, {map}_box, {line})"),
                                String::new(),
                            )
                        } else {
                            (format!("({bp} + {i})"), String::new())
                        }
                    }
                    _ => (self.expr(a), String::new()),
                },
                Some(Arg::WgTile { rows }) => match &a.kind {
                    ExprKind::ElemRef { base, index, .. } => {
                        let (bp, bl) = self.buf(base);
                        let i = self.expr(index);
                        if self.checked {
                            (
                                format!("pgas_check_wgmma_tile({bp}, {i}, {bl}, {rows}, {line})"),
                                String::new(),
                            )
                        } else {
                            (format!("({bp} + {i})"), String::new())
                        }
                    }
                    _ => (self.expr(a), String::new()),
                },
                // The helpers take the first of `n` accumulators by pointer.
                Some(Arg::WgAcc { n } | Arg::AccIn { n }) => match &a.kind {
                    ExprKind::ElemRef { base, index, .. } => {
                        let (bp, bl) = self.buf(base);
                        let i = self.expr(index);
                        if self.checked {
                            (
                                format!("&{bp}[pgas_check_range({i}, ({i}) + {n}, {bl}, {line})]"),
                                String::new(),
                            )
                        } else {
                            (format!("&{bp}[{i}]"), String::new())
                        }
                    }
                    _ => (self.expr(a), String::new()),
                },
                Some(Arg::Col(ld)) => {
                    let x = self.expr(a);
                    if self.checked {
                        let ld = args.get(ld).map(|t| self.expr(t)).unwrap_or_default();
                        (format!("pgas_check_col({x}, {ld}, {line})"), String::new())
                    } else {
                        (x, String::new())
                    }
                }
                Some(Arg::ReduceOp) => {
                    if let ExprKind::Enum(en, v) = &a.kind {
                        op = en
                            .variants()
                            .iter()
                            .find(|(n, _)| n == v)
                            .map(|(_, c)| *c)
                            .unwrap_or("");
                    }
                    (String::new(), String::new())
                }
                _ => (self.expr(a), String::new()),
            };
            texts.push(t);
            lens.push(l);
        }
        let len = |i: usize| lens.get(i).cloned().unwrap_or_default();
        let team_size = || {
            let team = texts.first().cloned().unwrap_or_default();
            format!("(unsigned long long)nvshmem_team_n_pes({team})")
        };
        let count = match row.count {
            Count::None => String::new(),
            Count::Min(a, b) => format!("pgas_min_len({}, {})", len(a), len(b)),
            Count::ReduceScatter => {
                format!("pgas_min_len({}, {} / {})", len(1), len(2), team_size())
            }
            Count::AllGather => format!("pgas_min_len({}, {} / {})", len(2), len(1), team_size()),
            Count::AllToAll => format!("(pgas_min_len({}, {}) / {})", len(1), len(2), team_size()),
        };
        let t_text = elem
            .and_then(|s| intrinsics::type_text(row, s))
            .unwrap_or("");
        let c_text = elem.map(|s| s.c_type()).unwrap_or("");
        let line_text = line.to_string();
        let call = if nvcall::wraps(row) {
            // Through the row's wrapper (nvcall.rs), so the source also compiles link-time.
            let w = nvcall::wrapper(row, elem, op);
            let values: Vec<String> = w
                .keys
                .iter()
                .map(|key| match key.split_once('.') {
                    _ if key == "n" => count.clone(),
                    _ if key == "line" => line_text.clone(),
                    Some((i, "len")) => i
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| lens.get(i).cloned())
                        .unwrap_or_default(),
                    _ => key
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| texts.get(i).cloned())
                        .unwrap_or_default(),
                })
                .collect();
            let call = format!("{}({})", w.name, values.join(", "));
            self.wrappers
                .entry(w.name.clone())
                .or_insert_with(|| w.inline_definition());
            call
        } else {
            expand_template(
                row.cuda, &texts, &lens, &count, t_text, c_text, op, &line_text,
            )
        };
        if self.checked && matches!(row.scope, Scope::FullWarp | Scope::Warpgroup) {
            format!("(pgas_check_full_warp({line}), {call})")
        } else if self.checked && row.group == intrinsics::Group::PeerCollective {
            // The scratch must hold `device_scratch_len` words from an even index on.
            let scratch = args.get(3).and_then(|a| match &a.kind {
                ExprKind::ElemRef { base, index, .. } => {
                    let (bp, bl) = self.buf(base);
                    Some((bp, self.expr(index), bl))
                }
                _ => None,
            });
            match scratch {
                Some((bp, i, bl)) => format!(
                    "(pgas_check_ll_scratch({bp}, {i}, {bl}, {}, ({count}) * sizeof({c_text}), {line}), {call})",
                    texts.first().cloned().unwrap_or_default()
                ),
                None => call,
            }
        } else {
            call
        }
    }
}

/// `x` without one pair of enclosing parentheses, where they enclose all of it (statement
/// positions need none).
fn bare(x: &str) -> &str {
    let Some(inner) = x.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        return x;
    };
    let mut depth = 0i32;
    for ch in inner.chars() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return x;
                }
            }
            _ => {}
        }
    }
    if depth == 0 {
        inner
    } else {
        x
    }
}
