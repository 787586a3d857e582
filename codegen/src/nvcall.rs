//! NVSHMEM calls through wrappers, and the link-time (LTO) form of a source.
//!
//! A kernel never calls NVSHMEM's device API directly: each call of an NVSHMEM intrinsic row
//! (for one element type and reduction) goes through a wrapper, `pgas_nv_<row>_<T>`, whose
//! parameters are the row's template placeholders and whose body is the row's template. A
//! source carries the wrappers it uses as `__forceinline__` definitions after its prelude, so
//! the one source compiles two ways:
//!
//! - **inline** (the source as emitted): the prelude includes NVSHMEM's headers, the wrappers
//!   inline away, NVRTC compiles the whole to CUBIN;
//! - **link time** ([`lto_source`]): the NVSHMEM headers and the wrapper bodies are replaced by
//!   [`LTO_HEAD`] and `extern "C"` declarations, so NVRTC parses a few hundred lines instead of
//!   NVSHMEM's and `cuda/std`'s headers (most of a compile: docs/jit.md), emits LTO-IR, and
//!   nvJitLink links it against [`library`], every wrapper of the prelude compiled once per
//!   machine, optimizing across both as one module.
//!
//! Collective kernels ([`Prelude::Full`]) stay inline: their cost is NVVM and ptxas on
//! NVSHMEM's algorithms, which linking does not avoid.

use crate::intrinsics::{self, Arg, Intrinsic, Ret, INTRINSICS};
use crate::prelude::Prelude;
use crate::types::{EnumTy, Scalar};

/// Where a source's wrapper definitions start and end (so [`lto_source`] can find them).
pub const WRAPPERS_BEGIN: &str = "// pgas: NVSHMEM call wrappers";
pub const WRAPPERS_END: &str = "// pgas: end of NVSHMEM call wrappers";

/// The NVSHMEM constants emitted kernels name, with their values in NVSHMEM 3.4.5
/// (`nvshmem_constants.h`, `nvshmem_common_transport.h`). [`LTO_HEAD`] defines them for
/// sources compiled without NVSHMEM's headers, and [`library`] asserts each value against those
/// headers, so a different NVSHMEM fails the library's compile rather than a kernel's result.
pub const NVSHMEM_CONSTANTS: &[(&str, i32)] = &[
    ("NVSHMEM_SIGNAL_SET", 9),
    ("NVSHMEM_SIGNAL_ADD", 10),
    ("NVSHMEM_CMP_EQ", 0),
    ("NVSHMEM_CMP_NE", 1),
    ("NVSHMEM_CMP_GT", 2),
    ("NVSHMEM_CMP_LE", 3),
    ("NVSHMEM_CMP_LT", 4),
    ("NVSHMEM_CMP_GE", 5),
];

/// NVSHMEM functions that support code calls outside the intrinsic rows (the checked
/// variant's PE checks, peer views, a collective's element count): `(name, return, params)`.
/// [`LTO_HEAD`] renames each to `pgas_lto_<name>`, which [`library`] defines.
const SUPPORT_CALLS: &[(&str, &str, &str)] = &[
    ("nvshmem_my_pe", "int", "void"),
    ("nvshmem_n_pes", "int", "void"),
    ("nvshmem_team_n_pes", "int", "nvshmem_team_t team"),
    ("nvshmem_ptr", "void *", "const void *ptr, int pe"),
];

/// What replaces the prelude in the link-time form: the fixed-width types, `half` and
/// `__nv_bfloat16`, NVSHMEM's team type and constants, and the support calls' declarations.
pub fn lto_head() -> String {
    let mut out = String::from(
        "// pgas: link-time form: NVSHMEM's device code comes from the pgas NVSHMEM library (LTO-IR).
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long ptrdiff_t;
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef int32_t nvshmem_team_t;
",
    );
    for (name, value) in NVSHMEM_CONSTANTS {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    for (name, ret, params) in SUPPORT_CALLS {
        out.push_str(&format!(
            "extern \"C\" __device__ {ret} pgas_lto_{name}({params});\n#define {name} pgas_lto_{name}\n"
        ));
    }
    out
}

/// One wrapper: `ret name(params) { body }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrapper {
    pub name: String,
    pub ret: String,
    /// `type pN` for each placeholder, in the order the call passes them.
    pub params: Vec<String>,
    /// Which placeholder each parameter stands for (`"0"`, `"0.len"`, `"n"`).
    pub keys: Vec<String>,
    pub body: String,
}

impl Wrapper {
    fn signature(&self) -> String {
        let params = if self.params.is_empty() {
            "void".to_string()
        } else {
            self.params.join(", ")
        };
        format!("{} {}({params})", self.ret, self.name)
    }

    /// The inline definition a source carries (one line: [`lto_source`] relies on it).
    pub fn inline_definition(&self) -> String {
        format!(
            "__device__ __forceinline__ {} {{ {}{}; }}",
            self.signature(),
            if self.ret == "void" { "" } else { "return " },
            self.body
        )
    }

    /// The library's definition: an `extern "C"` symbol the link resolves.
    fn library_definition(&self) -> String {
        format!(
            "extern \"C\" __device__ {} {{ {}{}; }}",
            self.signature(),
            if self.ret == "void" { "" } else { "return " },
            self.body
        )
    }
}

/// Whether calls of `row` go through a wrapper: its template calls NVSHMEM.
pub fn wraps(row: &Intrinsic) -> bool {
    row.cuda.contains("nvshmem")
}

/// The C type of a value the template receives in argument `kind`'s place, for element C type
/// `c`; `None` for arguments that are not values (a reduction's operator is part of the name).
fn param_type(kind: Arg, c: &str) -> Option<String> {
    Some(match kind {
        Arg::Pe | Arg::TeamPe(_) | Arg::SignalOp | Arg::Cmp => "int".into(),
        Arg::Team => "nvshmem_team_t".into(),
        Arg::Exact(s) => s.c_type().into(),
        Arg::Value => c.into(),
        // Non-const even for sources: some NVSHMEM functions (`nvshmem_*_wait_until`,
        // `nvshmem_signal_wait_until`) take a plain pointer to what they only read.
        Arg::RemoteDst
        | Arg::AnyDst
        | Arg::AnyElemMut
        | Arg::SymElem { .. }
        | Arg::SymSrc
        | Arg::AnySrc
        | Arg::AnyBuf => format!("{c} *"),
        Arg::Signal { .. } => "uint64_t *".into(),
        Arg::ReduceOp
        | Arg::Bytes16 { .. }
        | Arg::Frag { .. }
        | Arg::Vec16
        | Arg::Const(_)
        | Arg::Col(_) => return None,
    })
}

/// The C type a row's call evaluates to.
fn ret_type(ret: Ret, c: &str) -> String {
    match ret {
        Ret::Unit => "void".into(),
        Ret::Elem => c.into(),
        Ret::Exact(s) => s.c_type().into(),
        Ret::PeerView => format!("{c} *"),
        Ret::SharedArray | Ret::DynShared | Ret::FragArray(_) | Ret::Vec16 => "void".into(),
    }
}

/// The placeholders of a template that are values, in order of first appearance.
fn value_keys(template: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let key = &after[..close];
        if !matches!(key, "T" | "C" | "op") && !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
        rest = &after[close + 1..];
    }
    keys
}

/// The wrapper of `row` for element type `elem` and reduction `op` (its C infix).
pub fn wrapper(row: &Intrinsic, elem: Option<Scalar>, op: &str) -> Wrapper {
    let c = elem.map(|s| s.c_type()).unwrap_or("void");
    let t = elem
        .and_then(|s| intrinsics::type_text(row, s))
        .unwrap_or("");
    let mut name = format!("pgas_nv_{}", row.name);
    if let Some(s) = elem {
        name.push_str(&format!("_{}", s.rust_name()));
    }
    if !op.is_empty() {
        name.push_str(&format!("_{op}"));
    }
    let keys = value_keys(row.cuda);
    let mut params = Vec::with_capacity(keys.len());
    let mut args: Vec<String> = vec![String::new(); row.args.len()];
    let mut lens: Vec<String> = vec![String::new(); row.args.len()];
    let mut count = String::new();
    for (i, key) in keys.iter().enumerate() {
        let p = format!("p{i}");
        let ty = if key == "n" {
            count = p.clone();
            "size_t".to_string()
        } else if let Some((a, "len")) = key.split_once('.') {
            if let Some(slot) = a.parse::<usize>().ok().and_then(|a| lens.get_mut(a)) {
                *slot = p.clone();
            }
            "unsigned long long".to_string()
        } else {
            let a: usize = key.parse().unwrap_or(usize::MAX);
            let kind = row.args.get(a).map(|(_, k)| *k);
            if let Some(slot) = args.get_mut(a) {
                *slot = p.clone();
            }
            kind.and_then(|k| param_type(k, c))
                .unwrap_or_else(|| "int".into())
        };
        params.push(format!("{ty} {p}"));
    }
    let body = crate::emit::expand_template(row.cuda, &args, &lens, &count, t, c, op);
    Wrapper {
        name,
        ret: ret_type(row.ret, c),
        params,
        keys,
        body,
    }
}

/// Every wrapper a kernel of `prelude` may call: each NVSHMEM row its prelude covers, for each
/// element type and reduction.
pub fn all_wrappers(prelude: Prelude) -> Vec<Wrapper> {
    let mut out = Vec::new();
    for row in INTRINSICS
        .iter()
        .filter(|r| wraps(r) && r.prelude <= prelude)
    {
        let ops: Vec<&str> = if row.args.iter().any(|(_, k)| *k == Arg::ReduceOp) {
            EnumTy::ReduceOp.variants().iter().map(|(_, c)| *c).collect()
        } else {
            vec![""]
        };
        let elems: Vec<Option<Scalar>> = if row.types.is_empty() {
            vec![None]
        } else {
            row.types.iter().map(|(s, _)| Some(*s)).collect()
        };
        for elem in &elems {
            for op in &ops {
                // Bit reductions exist on integers only (the checker refuses the rest).
                if matches!(*op, "and" | "or" | "xor") && elem.is_some_and(|s| s.is_float()) {
                    continue;
                }
                out.push(wrapper(row, *elem, op));
            }
        }
    }
    out
}

/// The pgas NVSHMEM library of `prelude` (point-to-point or barrier): its NVSHMEM headers,
/// the checks of [`NVSHMEM_CONSTANTS`], and every wrapper and support call as an `extern "C"`
/// function, for NVRTC to compile once per machine to LTO-IR.
pub fn library(prelude: Prelude) -> String {
    let mut out = String::from(prelude.text());
    out.push_str("// pgas NVSHMEM library: every wrapper of this prelude, for link-time kernels.\n");
    out.push_str("static_assert(sizeof(nvshmem_team_t) == 4, \"nvshmem_team_t is not 32-bit\");\n");
    for (name, value) in NVSHMEM_CONSTANTS {
        out.push_str(&format!(
            "static_assert({name} == {value}, \"pgas assumes {name} == {value}\");\n"
        ));
    }
    for (name, ret, params) in SUPPORT_CALLS {
        let args: Vec<&str> = params
            .split(',')
            .filter(|p| p.trim() != "void")
            .map(|p| p.trim().rsplit([' ', '*']).next().unwrap_or(""))
            .collect();
        out.push_str(&format!(
            "extern \"C\" __device__ {ret} pgas_lto_{name}({params}) {{ return {name}({}); }}\n",
            args.join(", ")
        ));
    }
    for w in all_wrappers(prelude) {
        out.push_str(&w.library_definition());
        out.push('\n');
    }
    out
}

/// The preludes that have a library: kernels of other preludes compile inline.
pub fn links(prelude: Prelude) -> bool {
    prelude != Prelude::Full
}

/// The link-time form of a generated (specialized) source: its prelude replaced by
/// [`lto_head`] and its wrapper definitions by `extern "C"` declarations. `None` when the
/// source's prelude has no library or the source is not one pgas generated.
pub fn lto_source(source: &str) -> Option<String> {
    let prelude = Prelude::of_source(source)?;
    if !links(prelude) {
        return None;
    }
    let (defines, rest) = source.split_once(prelude.text())?;
    let mut out = String::with_capacity(rest.len() + 2048);
    out.push_str(defines);
    out.push_str(&lto_head());
    let mut inside = false;
    for line in rest.lines() {
        if line == WRAPPERS_BEGIN {
            inside = true;
        } else if line == WRAPPERS_END {
            inside = false;
        } else if inside {
            let decl = line
                .strip_prefix("__device__ __forceinline__ ")
                .and_then(|l| l.split_once(" { "))
                .map(|(sig, _)| sig)?;
            out.push_str(&format!("extern \"C\" __device__ {decl};"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str) -> &'static Intrinsic {
        INTRINSICS.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn a_put_wrapper_takes_the_placeholders_in_template_order() {
        let w = wrapper(row("put_signal_nbi_block"), Some(Scalar::F32), "");
        assert_eq!(w.name, "pgas_nv_put_signal_nbi_block_f32");
        assert_eq!(
            w.inline_definition(),
            "__device__ __forceinline__ void pgas_nv_put_signal_nbi_block_f32(float * p0, float * p1, size_t p2, uint64_t * p3, uint64_t p4, int p5, int p6) { nvshmemx_float_put_signal_nbi_block(p0, p1, p2, p3, p4, p5, p6); }"
        );
        assert_eq!(w.keys, ["0", "1", "n", "2", "3", "4", "5"]);
    }

    #[test]
    fn wrappers_return_what_the_template_evaluates_to() {
        let w = wrapper(row("has_peer"), Some(Scalar::U8), "");
        assert_eq!(w.ret, "bool");
        assert!(w.inline_definition().contains("{ return (nvshmem_ptr(p0, p1) != NULL); }"));
        let w = wrapper(row("my_pe"), None, "");
        assert_eq!(
            w.inline_definition(),
            "__device__ __forceinline__ int32_t pgas_nv_my_pe(void) { return nvshmem_my_pe(); }"
        );
    }

    #[test]
    fn every_wrapper_name_is_one_function() {
        for p in [Prelude::P2p, Prelude::Barrier, Prelude::Full] {
            let all = all_wrappers(p);
            let mut names: Vec<&str> = all.iter().map(|w| w.name.as_str()).collect();
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(n, names.len(), "two wrappers share a name in {p:?}");
        }
        // The barrier library holds the point-to-point one.
        assert!(all_wrappers(Prelude::Barrier).len() > all_wrappers(Prelude::P2p).len());
    }

    #[test]
    fn the_lto_head_defines_every_nvshmem_constant_a_kernel_names() {
        let head = lto_head();
        for en in [EnumTy::SignalOp, EnumTy::Cmp] {
            for (_, c) in en.variants() {
                assert!(
                    NVSHMEM_CONSTANTS.iter().any(|(n, _)| n == c),
                    "{c} has no value in NVSHMEM_CONSTANTS"
                );
                assert!(head.contains(&format!("#define {c} ")));
            }
        }
    }

    #[test]
    fn lto_source_swaps_the_prelude_and_declares_the_wrappers() {
        let w = wrapper(row("quiet"), None, "");
        let src = format!(
            "#define PGAS_KERNEL_NAME k\n{}X\n{WRAPPERS_BEGIN}\n{}\n{WRAPPERS_END}\nBODY\n",
            Prelude::P2p.text(),
            w.inline_definition()
        );
        let lto = lto_source(&src).unwrap();
        assert!(lto.starts_with("#define PGAS_KERNEL_NAME k\n// pgas: link-time form"));
        assert!(!lto.contains("#include <device/nvshmem_defines.h>"));
        assert!(lto.contains("\nX\n"));
        assert!(lto.contains("extern \"C\" __device__ void pgas_nv_quiet(void);\n"));
        assert!(lto.ends_with("BODY\n"));
        let full = src.replace(Prelude::P2p.text(), Prelude::Full.text());
        assert_eq!(lto_source(&full), None);
    }

    #[test]
    fn libraries_hold_their_rows_and_not_the_collectives() {
        let p2p = library(Prelude::P2p);
        assert!(p2p.contains("pgas_nv_put_block_f32("));
        assert!(!p2p.contains("nvshmemi_barrier_threadgroup"));
        assert!(!p2p.contains("_reduce_block"));
        assert!(p2p.contains("pgas_lto_nvshmem_ptr(const void *ptr, int pe) { return nvshmem_ptr(ptr, pe); }"));
        let barrier = library(Prelude::Barrier);
        assert!(barrier.contains("nvshmemi_barrier_threadgroup"));
    }
}
