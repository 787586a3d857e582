//! The compiler's driver: a file or a function in, each `#[pgas_kernel]` out as a
//! [`CompiledKernel`] (parse, check, emit both variants), with what the launcher needs to know
//! of its parameters.

use crate::bound::MaxThreads;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::check::{check_fn, FnInfo, FnSig};
use crate::error::{CodegenError, Errors};
use crate::ir::{Function, Param};
use crate::prelude::Prelude;
use crate::types::{BufKind, Scalar, Ty};
use crate::{emit, error, generic, intrinsics, parse};

/// The file name the macro passes to the compiler; the generated `SPEC` splices `file!()` in
/// its place (`concat!`), because a proc macro on stable Rust cannot name its source file.
pub const FILE_PLACEHOLDER: &str = "@PGAS_RUST_FILE@";

/// How one kernel parameter is passed (mirrors `pgas_runtime::kernel::ParamKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `&SymTensor<T>` / `&mut SymTensor<T>`: `T *ptr, unsigned long long len`.
    Sym {
        /// The element type.
        elem: Scalar,
        /// Whether the kernel takes it `&mut`.
        mutable: bool,
    },
    /// `&CudaSlice<T>` / `&mut CudaSlice<T>`: `T *ptr, unsigned long long len`.
    Local {
        /// The element type.
        elem: Scalar,
        /// Whether the kernel takes it `&mut`.
        mutable: bool,
    },
    /// A scalar by value.
    Scalar(Scalar),
    /// `Team`: `nvshmem_team_t` (an `int`).
    Team,
    /// `&TensorMap<T>`: the 128-byte `CUtensorMap` by value, then the tile shape.
    TensorMap(Scalar),
    /// `&mut TensorMap<T>`: as `TensorMap`, of a tensor the kernel writes (`tma_store_2d`).
    TensorMapMut(Scalar),
    /// `#[comptime]`: baked into the source by [`specialize`](crate::specialize), not passed at launch.
    Comptime(Scalar),
    /// `#[comptime] op: ReduceOp`: as `Comptime`, the reduction's code (`ReduceOp::Max as i128`).
    ComptimeOp,
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelParam {
    /// The parameter's Rust name.
    pub name: String,
    /// How it is passed.
    pub kind: ParamKind,
}

/// A compiled `#[pgas_kernel]`.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    /// The Rust function name.
    pub rust_name: String,
    /// Unique CUDA base name `pgas_<name>_<hash>`; [`specialize`](crate::specialize) appends the variant and
    /// comptime values.
    pub cuda_name: String,
    /// Line of the `fn` name in the Rust source.
    pub line: usize,
    /// Plain variant: prelude included, `PGAS_KERNEL_NAME`/`PGAS_CT_*` left to [`specialize`](crate::specialize).
    pub plain: String,
    /// Checked variant: every index, slice range and PE checked.
    pub checked: String,
    /// All parameters in declaration order, comptime ones included.
    pub params: Vec<KernelParam>,
    /// Whether the kernel (or a device function it calls) uses a barrier, sync or collective
    /// and so needs a collective (cooperative) launch.
    pub collective: bool,
    /// The prelude its sources start with (what its calls need).
    pub prelude: Prelude,
    /// Names of the comptime parameters, in declaration order.
    pub comptime: Vec<String>,
    /// The most threads per block the kernel declares (`#[pgas_kernel(max_threads = N)]`),
    /// emitted as `__launch_bounds__(N)` so NVRTC keeps its registers within what blocks of `N`
    /// threads can have; `None` also where the bound is an expression of comptime parameters
    /// (each specialization's `__launch_bounds__` is its own, and the driver checks a launch).
    pub max_threads: Option<u32>,
}

impl CompiledKernel {
    /// The source of one variant (`checked` or plain).
    pub fn source(&self, checked: bool) -> &str {
        if checked {
            &self.checked
        } else {
            &self.plain
        }
    }
}

/// Compile every `#[pgas_kernel]` in a Rust source file, with the `#[pgas_device]` functions
/// and `#[pgas_params]` groups of the same file (inline modules included). `file_name` goes
/// into the `#line` directives and the checked variant's messages.
pub fn compile_file(src: &str, file_name: &str) -> Result<Vec<CompiledKernel>, Vec<CodegenError>> {
    let file = syn::parse_file(src).map_err(|e| vec![CodegenError::from(e)])?;
    compile_syn_file(&file, file_name)
}

/// [`compile_file`] on an already parsed file.
pub fn compile_syn_file(
    file: &syn::File, file_name: &str,
) -> Result<Vec<CompiledKernel>, Vec<CodegenError>> {
    let mut kernels = Vec::new();
    let mut helpers = Vec::new();
    let mut groups = Vec::new();
    collect_items(&file.items, &mut kernels, &mut helpers, &mut groups);
    let flat_helpers = helpers
        .iter()
        .map(|h| crate::params::flatten(h, &groups))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::new();
    let mut errors: Vec<CodegenError> = Vec::new();
    let mut seen = HashSet::new();
    for k in kernels {
        let compiled = kernel_max_threads(k)
            .map_err(|e| vec![CodegenError::from(e)])
            .and_then(|max_threads| {
                let k = crate::params::flatten(k, &groups)?;
                compile_instances(&k, &flat_helpers, max_threads.as_ref(), file_name)
            });
        match compiled {
            Ok(c) => out.extend(c.into_iter().map(|(_, k)| k)),
            Err(es) => {
                for e in es {
                    if seen.insert((e.line(), e.column(), e.message.clone())) {
                        errors.push(e);
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The attribute `name` (by its last path segment) among `attrs`.
fn attr<'a>(attrs: &'a [syn::Attribute], name: &str) -> Option<&'a syn::Attribute> {
    attrs
        .iter()
        .find(|a| a.path().segments.last().is_some_and(|s| s.ident == name))
}

fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attr(attrs, name).is_some()
}

/// The `max_threads` of a kernel's own `#[pgas_kernel(...)]` attribute (what the macro gets as
/// its arguments).
fn kernel_max_threads(f: &syn::ItemFn) -> syn::Result<Option<MaxThreads>> {
    let args = match attr(&f.attrs, "pgas_kernel").map(|a| &a.meta) {
        Some(syn::Meta::List(list)) => list.tokens.clone(),
        _ => return Ok(None),
    };
    Ok(crate::attr::parse_kernel_attr(args)?
        .max_threads
        .map(|(m, _)| m))
}

fn collect_items<'a>(
    items: &'a [syn::Item], kernels: &mut Vec<&'a syn::ItemFn>, helpers: &mut Vec<syn::ItemFn>,
    groups: &mut Vec<syn::ItemStruct>,
) {
    for item in items {
        match item {
            syn::Item::Fn(f) if has_attr(&f.attrs, "pgas_kernel") => kernels.push(f),
            syn::Item::Fn(f) if has_attr(&f.attrs, "pgas_device") => helpers.push(f.clone()),
            syn::Item::Struct(s) if has_attr(&s.attrs, "pgas_params") => groups.push(s.clone()),
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    collect_items(inner, kernels, helpers, groups);
                }
            }
            _ => {}
        }
    }
}

/// Compile a kernel, generic or not ([`generic`]): one [`CompiledKernel`] for each type of
/// its bound, with the type (its `rust_name` is `k::<f32>`), or the one with `None`. An error
/// that only some types have says which.
pub fn compile_instances(
    kernel: &syn::ItemFn, helpers: &[syn::ItemFn], max_threads: Option<&MaxThreads>,
    file_name: &str,
) -> Result<Vec<(Option<Scalar>, CompiledKernel)>, Vec<CodegenError>> {
    let Some(g) = generic::generic_of(&kernel.sig).map_err(|e| vec![e])? else {
        return compile_kernel(kernel, helpers, max_threads, file_name).map(|k| vec![(None, k)]);
    };
    let compiled = each_instance(kernel, &g, |f| {
        compile_kernel(f, helpers, max_threads, file_name)
    })?;
    Ok(compiled
        .into_iter()
        .map(|(ty, mut k)| {
            k.rust_name = format!("{}::<{}>", k.rust_name, ty.rust_name());
            (Some(ty), k)
        })
        .collect())
}

/// `run` on each instance of the generic `item` (`g` its type parameter): the results by type,
/// or the errors of every instance, one a place: the first instance's words, and where not
/// every type has one there, the types that do.
fn each_instance<R>(
    item: &syn::ItemFn, g: &generic::Generic,
    mut run: impl FnMut(&syn::ItemFn) -> Result<R, Vec<CodegenError>>,
) -> Result<Vec<(Scalar, R)>, Vec<CodegenError>> {
    let mut out = Vec::new();
    let mut errors: Vec<(CodegenError, Vec<&str>)> = Vec::new();
    for &ty in g.bound.members {
        match generic::instantiate(item, g, ty).and_then(|f| run(&f)) {
            Ok(r) => out.push((ty, r)),
            Err(es) => {
                for e in es {
                    let at = (e.line(), e.column());
                    match errors
                        .iter_mut()
                        .find(|(x, _)| (x.line(), x.column()) == at)
                    {
                        Some((_, types)) if !types.contains(&ty.rust_name()) => {
                            types.push(ty.rust_name())
                        }
                        Some(_) => {}
                        None => errors.push((e, vec![ty.rust_name()])),
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        return Ok(out);
    }
    let all = g.bound.members.len();
    Err(errors
        .into_iter()
        .map(|(mut e, types)| {
            if types.len() < all {
                e.message
                    .push_str(&format!(" (with `{}` = {})", g.param, types.join(", ")));
            }
            e
        })
        .collect())
}

/// Compile one kernel together with the device functions it may call; `max_threads` is the
/// kernel's `#[pgas_kernel(max_threads = N)]` (see [`CompiledKernel::max_threads`]). The
/// phases: lower the functions to IR, check them, gather what the kernel reaches, check its
/// block against what that uses, then emit both variants.
pub fn compile_kernel(
    kernel: &syn::ItemFn, helpers: &[syn::ItemFn], max_threads: Option<&MaxThreads>,
    file_name: &str,
) -> Result<CompiledKernel, Vec<CodegenError>> {
    let (kernel, helpers) = &generic::monomorphize(kernel, helpers)?;
    let mut errors = Errors::default();
    let mut kf = parse::lower_fn(kernel, true, &mut errors);
    let mut hfs: Vec<Function> = helpers
        .iter()
        .map(|h| parse::lower_fn(h, false, &mut errors))
        .collect();
    if !errors.is_empty() {
        return Err(errors.into_vec());
    }
    let sigs = signatures(&kf, &hfs, &mut errors);
    let infos = check_helpers(&mut hfs, &sigs, &mut errors);
    let kinfo = match check_fn(&mut kf, &sigs, false) {
        Ok(i) => Some(i),
        Err(e) => {
            errors.extend(e.into_vec());
            None
        }
    };
    let Some(kinfo) = kinfo.filter(|_| errors.is_empty()) else {
        return Err(errors.into_vec());
    };
    let reached = reach(&kinfo, &infos);
    let comptime: Vec<String> = kf
        .params
        .iter()
        .filter(|p| p.comptime)
        .map(|p| p.name.clone())
        .collect();
    if let Some(m) = max_threads {
        m.check_names(&comptime)?;
    }
    check_block(kernel, &reached, max_threads)?;
    let uses = reached.uses;
    let used: Vec<&Function> = hfs
        .iter()
        .filter(|h| reached.functions.contains(&h.name))
        .collect();
    let bound = max_threads.map(MaxThreads::c_text);
    let emit = |checked| emit::emit_source(&kf, &used, checked, uses, bound.as_deref(), file_name);
    let (plain, checked) = (emit(false), emit(true));
    let params: Vec<KernelParam> = kf
        .params
        .iter()
        .map(|p| KernelParam {
            name: p.name.clone(),
            kind: param_kind(p),
        })
        .collect();
    let cuda_name = format!(
        "pgas_{}_{:08x}",
        emit::c_ident(&kf.name),
        fnv32(&[kf.name.as_bytes(), plain.replace(file_name, "").as_bytes()])
    );
    Ok(CompiledKernel {
        rust_name: kf.name.clone(),
        cuda_name,
        line: kf.line,
        plain,
        checked,
        params,
        collective: uses.prelude.collective(),
        prelude: uses.prelude,
        comptime,
        max_threads: max_threads.and_then(MaxThreads::fixed),
    })
}

/// The device functions' signatures, by name; reports a name defined twice (or the kernel's)
/// and a name an intrinsic has.
fn signatures(kf: &Function, hfs: &[Function], errors: &mut Errors) -> HashMap<String, FnSig> {
    let mut sigs = HashMap::new();
    for h in hfs {
        if h.name == kf.name || sigs.contains_key(&h.name) {
            errors.push(h.span, format!("`{}` is defined more than once", h.name));
        }
        if let Some(message) = intrinsic_name_clash(&h.name) {
            errors.push(h.span, message);
        }
        sigs.insert(
            h.name.clone(),
            FnSig {
                params: h.params.iter().map(|p| p.ty).collect(),
                ret: h.ret.map(|(t, _)| t).unwrap_or(Ty::Unit),
            },
        );
    }
    sigs
}

/// Check every device function against the signatures; what each uses, by name (the errors
/// go to `errors`).
fn check_helpers(
    hfs: &mut [Function], sigs: &HashMap<String, FnSig>, errors: &mut Errors,
) -> HashMap<String, FnInfo> {
    let mut infos = HashMap::new();
    for h in hfs {
        match check_fn(h, sigs, false) {
            Ok(info) => {
                infos.insert(h.name.clone(), info);
            }
            Err(e) => errors.extend(e.into_vec()),
        }
    }
    infos
}

/// What a kernel reaches through its calls.
struct Reach {
    /// What the kernel and the device functions it reaches use.
    uses: emit::Uses,
    /// Where the kernel or one of them first calls `setmaxnreg_*`.
    setmaxnreg_at: Option<error::Sp>,
    /// The device functions it reaches.
    functions: BTreeSet<String>,
}

/// The device functions the kernel (`kinfo`) reaches, and what any of them uses.
fn reach(kinfo: &FnInfo, infos: &HashMap<String, FnInfo>) -> Reach {
    let mut uses = emit::Uses {
        prelude: kinfo.prelude,
        full_warp: kinfo.full_warp,
        tensor: kinfo.tensor,
        warpgroup: kinfo.warpgroup,
        sm90: kinfo.sm90,
        ll: kinfo.ll,
        multimem: kinfo.multimem,
        setmaxnreg: kinfo.setmaxnreg.is_some(),
        local_arrays: kinfo.local_arrays,
    };
    let mut setmaxnreg_at = kinfo.setmaxnreg;
    let mut reached = BTreeSet::new();
    let mut stack: Vec<String> = kinfo.calls.iter().cloned().collect();
    while let Some(n) = stack.pop() {
        if reached.insert(n.clone()) {
            if let Some(info) = infos.get(&n) {
                uses.prelude = uses.prelude.max(info.prelude);
                uses.full_warp |= info.full_warp;
                uses.tensor |= info.tensor;
                uses.warpgroup |= info.warpgroup;
                uses.sm90 |= info.sm90;
                uses.ll |= info.ll;
                uses.multimem |= info.multimem;
                uses.local_arrays |= info.local_arrays;
                uses.setmaxnreg |= info.setmaxnreg.is_some();
                setmaxnreg_at = setmaxnreg_at.or(info.setmaxnreg);
                stack.extend(info.calls.iter().cloned());
            }
        }
    }
    Reach {
        uses,
        setmaxnreg_at,
        functions: reached,
    }
}

/// The kernel's declared block against what it uses: whole warpgroups for `wgmma_*`, and a
/// declared block at all for `setmaxnreg_*`.
fn check_block(
    kernel: &syn::ItemFn, reach: &Reach, max_threads: Option<&MaxThreads>,
) -> Result<(), Vec<CodegenError>> {
    let fixed = max_threads.and_then(MaxThreads::fixed);
    if let (true, Some(n)) = (reach.uses.warpgroup, fixed.filter(|n| n % 128 != 0)) {
        let mut errors = Errors::default();
        errors.push(
            error::Sp::of(&kernel.sig.ident),
            format!("this kernel calls warpgroup-wide `wgmma_*` (128 threads together), so its blocks are whole warpgroups, but `max_threads = {n}` is not a multiple of 128"),
        );
        return Err(errors.into_vec());
    }
    if let (Some(at), None) = (reach.setmaxnreg_at, max_threads) {
        let mut errors = Errors::default();
        errors.push(
            at,
            "`setmaxnreg_*` moves registers between the warpgroups of a block, so the kernel must declare its block: `#[pgas_kernel(max_threads = N)]`, N the threads it is launched with (a multiple of 128), every warpgroup taking part",
        );
        return Err(errors.into_vec());
    }
    Ok(())
}

/// How a checked kernel parameter is passed.
fn param_kind(p: &Param) -> ParamKind {
    match p.ty {
        Ty::Enum(_) if p.comptime => ParamKind::ComptimeOp,
        _ if p.comptime => ParamKind::Comptime(p.ty.scalar().unwrap_or(Scalar::I32)),
        Ty::Buf(b) if b.kind == BufKind::Sym => ParamKind::Sym {
            elem: b.elem,
            mutable: b.mutable,
        },
        Ty::Buf(b) => ParamKind::Local {
            elem: b.elem,
            mutable: b.mutable,
        },
        Ty::Team => ParamKind::Team,
        Ty::TensorMap(s) => ParamKind::TensorMap(s),
        Ty::TensorMapMut(s) => ParamKind::TensorMapMut(s),
        t => ParamKind::Scalar(t.scalar().unwrap_or(Scalar::I32)),
    }
}

/// A device function may not take an intrinsic's name: calls would be ambiguous.
fn intrinsic_name_clash(name: &str) -> Option<String> {
    intrinsics::INTRINSICS
        .iter()
        .any(|r| r.name == name)
        .then(|| format!("`{name}` is the name of a kernel intrinsic; give the #[pgas_device] function another name"))
}

/// Errors a `#[pgas_device]` function has on its own (its callees unknown yet).
pub(crate) fn device_errors(item: &syn::ItemFn) -> Vec<CodegenError> {
    // Its groups' fields are known only in a kernel, which reports its errors.
    if crate::params::takes_group(item) {
        return Vec::new();
    }
    if let Some(message) = intrinsic_name_clash(&item.sig.ident.to_string()) {
        // The clash and what lowering finds; its calls are not checked.
        let mut errors = Errors::default();
        errors.push(item.sig.ident.span(), message);
        if item.sig.generics.params.is_empty() {
            parse::lower_fn(item, false, &mut errors);
        }
        return errors.into_vec();
    }
    // A generic function is checked as each of its instances.
    let checked = match generic::generic_of(&item.sig) {
        Ok(None) => own_errors(item),
        Ok(Some(g)) => each_instance(item, &g, own_errors).map(|_| ()),
        Err(e) => Err(vec![e]),
    };
    checked.err().unwrap_or_default()
}

/// A device function's errors on its own: lowered and checked with its callees unknown.
fn own_errors(item: &syn::ItemFn) -> Result<(), Vec<CodegenError>> {
    let mut errors = Errors::default();
    let mut f = parse::lower_fn(item, false, &mut errors);
    if !errors.is_empty() {
        return Err(errors.into_vec());
    }
    check_fn(&mut f, &HashMap::new(), true)
        .map(|_| ())
        .map_err(|e| e.into_vec())
}

/// FNV-1a, folded to 32 bits: a short stable hash for symbol names.
fn fnv32(parts: &[&[u8]]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (h ^ (h >> 32)) as u32
}
