//! Locals and scopes: declaring and looking up names, and giving every local a unique C name
//! that no C/C++/CUDA keyword, builtin or generated name can shadow. Kept apart because the
//! naming rules are about the emitted C, not about Rust's types.

use super::checker::{Checker, Local};
use crate::types::Ty;

/// C/C++/CUDA names a Rust local must not take.
const RESERVED: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "const",
    "constexpr",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    "NULL",
    "main",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "printf",
    "assert",
    "std",
    "half",
    "size_t",
    "ptrdiff_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "min",
    "max",
    "abs",
    "sqrt",
    "sqrtf",
    "rsqrt",
    "rsqrtf",
    "exp",
    "expf",
    "exp2",
    "exp2f",
    "log",
    "logf",
    "log2",
    "log2f",
    "sin",
    "sinf",
    "cos",
    "cosf",
    "tanh",
    "tanhf",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "fabs",
    "fabsf",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    "pow",
    "powf",
    "fma",
    "fmaf",
    "fmod",
    "fmodf",
    "atomicAdd",
    "atomicSub",
    "atomicMin",
    "atomicMax",
    "atomicExch",
    "atomicCAS",
];

impl Checker<'_> {
    pub(super) fn c_name(&mut self, name: &str, is_buf: bool) -> String {
        let base = if name == "_" {
            "unused".to_string()
        } else if RESERVED.contains(&name)
            || name.starts_with("pgas_")
            || name.starts_with("PGAS_")
            || name.starts_with("nvshmem")
            || name.starts_with("__")
            || !name.is_ascii()
        {
            let clean: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            format!("{}_", clean.trim_start_matches('_'))
        } else {
            name.to_string()
        };
        let mut candidate = base.clone();
        let mut k = 1;
        while self.used_c_names.contains(&candidate)
            || (is_buf && self.used_c_names.contains(&format!("{candidate}_len")))
        {
            candidate = format!("{base}_{k}");
            k += 1;
        }
        self.used_c_names.insert(candidate.clone());
        if is_buf {
            self.used_c_names.insert(format!("{candidate}_len"));
        }
        candidate
    }

    pub(super) fn declare(
        &mut self, name: &str, ty: Ty, mutable: bool, is_param: bool, comptime: bool,
    ) -> String {
        let c_name = self.c_name(
            name,
            matches!(ty, Ty::Buf(_) | Ty::FragArray(_) | Ty::Array(_)),
        );
        self.locals.push(Local {
            name: name.to_string(),
            ty,
            mutable,
            is_param,
            c_name: c_name.clone(),
            comptime,
        });
        let idx = self.locals.len() - 1;
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(idx);
        }
        c_name
    }

    pub(super) fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .copied()
            .find(|&i| self.locals[i].name == name)
    }
}
