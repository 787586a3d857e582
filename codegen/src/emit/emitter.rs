//! The emitter's state ([`Emitter`]), the entry point [`emit_source`], what a kernel uses
//! ([`Uses`]), the C spellings of names, literals and casts, and the output primitives the
//! other files write through.

use crate::ir::*;
use crate::nvcall;
use crate::prelude::{
    sm90_support, Prelude, CHECK_LL_SUPPORT, CHECK_LOCAL_SUPPORT, CHECK_SM90_SUPPORT,
    CHECK_SUPPORT, CHECK_TENSOR_SUPPORT, LL_SUPPORT, MULTIMEM_SUPPORT, SM90A_MARKER, SUPPORT,
    TENSOR_SUPPORT,
};
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
    /// A multicast row: the source carries the `multimem` helpers (and compiles for sm_90a).
    pub multimem: bool,
    /// `setmaxnreg_*`: the kernel's bound is `__launch_bounds__(max_threads, 1)` (the register
    /// cap at entry that `setmaxnreg` needs), and the checked variant traps unless the block
    /// is exactly `max_threads`.
    pub setmaxnreg: bool,
    /// A local array: the checked variant carries the check of its indices.
    pub local_arrays: bool,
}

/// Print one kernel (with the helpers it reaches, callees in any order) as a full source;
/// `uses` says what it needs (prelude, support code, the whole-warp guard); `max_threads`
/// becomes the kernel's `__launch_bounds__`.
pub fn emit_source(
    kernel: &Function, helpers: &[&Function], checked: bool, uses: Uses, max_threads: Option<&str>,
    file: &str,
) -> String {
    let mut e = Emitter {
        out: String::new(),
        indent: 0,
        checked,
        max_threads: max_threads.map(str::to_owned),
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
    if uses.multimem {
        if !uses.sm90 {
            e.raw(SM90A_MARKER);
        }
        e.raw_block(MULTIMEM_SUPPORT);
    }
    if checked {
        e.raw_block(CHECK_SUPPORT);
        if uses.local_arrays {
            e.raw_block(CHECK_LOCAL_SUPPORT);
        }
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

pub(super) struct Emitter {
    pub(super) out: String,
    pub(super) indent: usize,
    pub(super) checked: bool,
    /// The kernel's `max_threads` as C (a number, or an expression of `PGAS_CT_` values),
    /// emitted as `__launch_bounds__`.
    pub(super) max_threads: Option<String>,
    /// The kernel reaches a warp-wide tensor-core instruction: it starts with the whole-warp
    /// guard.
    pub(super) full_warp: bool,
    /// The kernel reaches a warpgroup-wide instruction: it starts with the whole-warpgroup
    /// guard.
    pub(super) warpgroup: bool,
    /// The kernel reallocates registers (`setmaxnreg_*`).
    pub(super) setmaxnreg: bool,
    /// The Rust line the next output line maps to, once a `#line` has been written.
    pub(super) cur_line: Option<usize>,
    /// The NVSHMEM call wrappers the source uses, by name, as inline definitions.
    pub(super) wrappers: std::collections::BTreeMap<String, String>,
}

/// Where a value computed by statements goes.
pub(super) enum Target<'a> {
    Return,
    Var(&'a str),
}

/// Whether `f` borrows a register array (`&mut [f32]`, `&[FragA<bf16>]`).
fn register_params(f: &Function) -> bool {
    f.params
        .iter()
        .any(|p| matches!(p.ty, Ty::Array(_) | Ty::FragArray(_)))
}

pub(super) fn param_list(f: &Function) -> String {
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
            Ty::Scalar(_) | Ty::Vec16(_) => {
                let c = p.ty.value_c_type().expect("a value type");
                parts.push(format!("{c} {}", p.c_name));
            }
            // A device function's borrow of its caller's registers: the array's address and
            // length, which inlining (`register_params`) turns back into the caller's registers.
            Ty::Array(a) => {
                if let Some(t) = a.elem.c_type() {
                    parts.push(format!("{t} *{}", p.c_name));
                    parts.push(format!("unsigned long long {}_len", p.c_name));
                }
            }
            Ty::FragArray(fr) => {
                parts.push(format!("{} *{}", fr.kind.c_type(), p.c_name));
                parts.push(format!("unsigned long long {}_len", p.c_name));
            }
            Ty::Team => parts.push(format!("nvshmem_team_t {}", p.c_name)),
            // A reduction passed on to a device function: its code.
            Ty::Enum(_) => parts.push(format!("int {}", p.c_name)),
            // Passed by value in parameter space, where the copy engine reads it (a
            // `__grid_constant__` parameter has an address), and to a device function by
            // reference to that parameter; `_box` is the tile's rows << 32 | columns, for the
            // checked variant's bounds.
            Ty::TensorMap(_) | Ty::TensorMapMut(_) => {
                parts.push(if f.is_kernel {
                    format!("const __grid_constant__ pgas_tensor_map {}", p.c_name)
                } else {
                    format!("const pgas_tensor_map &{}", p.c_name)
                });
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

pub(super) fn int_literal(v: u128, s: Scalar) -> String {
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

pub(super) fn float_literal(text: &str, s: Scalar) -> String {
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
pub(super) fn cast(x: &str, from: Scalar, to: Scalar) -> String {
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
    pub(super) fn bump(&mut self, text: &str) {
        if let Some(l) = &mut self.cur_line {
            *l += text.matches('\n').count();
        }
    }

    pub(super) fn raw(&mut self, s: &str) {
        self.out.push_str(s);
        self.out.push('\n');
        self.bump(s);
        self.bump("\n");
    }

    pub(super) fn raw_block(&mut self, s: &str) {
        self.out.push_str(s);
        self.bump(s);
    }

    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.raw(s);
    }

    pub(super) fn directive(&mut self, rust_line: usize) {
        if rust_line == 0 || self.cur_line == Some(rust_line) {
            return;
        }
        self.out
            .push_str(&format!("#line {rust_line} PGAS_RUST_FILE\n"));
        self.cur_line = Some(rust_line);
    }

    pub(super) fn signature(&self, f: &Function) -> String {
        let params = param_list(f);
        if f.is_kernel {
            // The bound lets NVRTC budget registers for blocks of that many threads (spilling if
            // it must); without it a register-hungry kernel may not fit 1024 threads on an SM.
            // `setmaxnreg` takes effect only under a register cap at entry, which a minimum of
            // one block per SM gives.
            let min_blocks = if self.setmaxnreg { ", 1" } else { "" };
            let bounds = self
                .max_threads
                .as_ref()
                .map(|n| format!("__launch_bounds__({n}{min_blocks}) "))
                .unwrap_or_default();
            format!("extern \"C\" __global__ void {bounds}PGAS_KERNEL_NAME({params})")
        } else {
            let ret = f.ret.and_then(|(t, _)| t.value_c_type()).unwrap_or("void");
            // A function that borrows register arrays is always inlined: out of line, the
            // arrays would need addresses, and so local memory instead of registers.
            let inline = if register_params(f) {
                "__forceinline__ "
            } else {
                ""
            };
            format!(
                "static __device__ {inline}{ret} {}({params})",
                device_fn_name(&f.name)
            )
        }
    }
}
