//! `pgas.kernel(source)`: a kernel of the pgas language given as a string, compiled by the
//! module's own copy of the language's compiler (`pgas-codegen`, no Rust toolchain), JIT-compiled
//! by NVRTC at its first launch like any `#[pgas_kernel]`, and launched on pgas tensors.
//!
//! ```python
//! scale = pgas.kernel('''
//! #[pgas_kernel]
//! fn scale(x: &mut SymTensor<f32>, a: f32) {
//!     let i = global_thread_idx();
//!     if i < x.len() { x[i] = x[i] * a + 1.0; }
//! }
//! ''')
//! scale(grid=4, block=256, x=t, a=2.0)        # or positionally: scale(4, 256, t, 2.0)
//! ```
//!
//! A syntax or type error is `pgas.KernelSourceError` with the line and column in the string.

use std::collections::HashMap;
use std::sync::Mutex;

use pgas_codegen::{CompiledKernel, KernelParam, ParamKind as CgKind, Scalar};
use pgas_runtime::kernel::{KernelSpec, ParamKind, ParamSpec, Variant};
use pgas_runtime::launch::KernelArgs;
use pgas_runtime::LaunchConfig;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::dtype::{self, with_tensor};
use crate::errors::{misuse, to_py, KernelSourceError};
use crate::ops::call::run;
use crate::team::Team;
use crate::tensor::Tensor;

/// The file name the kernel's messages (and the checked variant's traps) name.
const FILE: &str = "<pgas.kernel>";

/// Every kernel compiled in this process, by its source: the runtime launches from a
/// `&'static KernelSpec` (the macro's are constants), so each source's specs are made once and
/// kept for the process, and compiling a source again costs a lookup.
static COMPILED: Mutex<Option<HashMap<String, Vec<&'static KernelSpec>>>> = Mutex::new(None);

/// A kernel of the pgas language compiled from a string (`pgas.kernel`). Call it with the launch
/// geometry, then its parameters in order (or by name), and its `#[comptime]` values by name:
/// `k(grid, block, *args, stream=None, shared_mem=0, checked=True, **named)`.
#[pyclass(module = "pgas", name = "Kernel", frozen)]
pub(crate) struct Kernel {
    spec: &'static KernelSpec,
}

/// Compiles the `#[pgas_kernel]` functions of `source` (and its `#[pgas_device]` functions) and
/// returns the one named `name` (the only one when `name` is omitted). Needs no GPU and no
/// `init`: NVRTC compiles it at its first launch. A syntax or type error is
/// `pgas.KernelSourceError` naming the line and column in `source`.
/// `pgas.finish_compiles()`: waits until every kernel that started on its quick build (one
/// calling NVSHMEM's device collectives) runs its full build (`docs/jit.md`, "Tiers"), and
/// returns how many it swapped in. Call it before timing such a kernel or capturing it in a
/// CUDA graph.
#[pyfunction]
pub(crate) fn finish_compiles(py: Python<'_>) -> PyResult<usize> {
    let pgas = crate::state::current()?.pgas()?;
    Ok(py.detach(|| pgas::launch::finish_compiles(&pgas)))
}

#[pyfunction]
#[pyo3(signature = (source, name=None))]
pub(crate) fn kernel(source: &str, name: Option<&str>) -> PyResult<Kernel> {
    let specs = compiled(source)?;
    let spec = match name {
        Some(name) => specs.iter().find(|s| s.rust_name == name).copied(),
        None if specs.len() == 1 => Some(specs[0]),
        None => None,
    };
    spec.map(|spec| Kernel { spec }).ok_or_else(|| {
        let names: Vec<&str> = specs.iter().map(|s| s.rust_name).collect();
        misuse(match name {
            Some(name) => {
                format!("pgas.kernel: the source has no kernel {name:?}; it has {names:?}")
            }
            None => format!(
                "pgas.kernel: the source has {} kernels ({names:?}); name the one to launch \
                 (pgas.kernel(source, name=...))",
                names.len()
            ),
        })
    })
}

/// The specs of `source`'s kernels, compiled now or earlier in this process.
fn compiled(source: &str) -> PyResult<Vec<&'static KernelSpec>> {
    let mut cache = COMPILED.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(specs) = cache.get(source) {
        return Ok(specs.clone());
    }
    let kernels = pgas_codegen::compile_file(source, FILE).map_err(|errors| {
        let first = &errors[0];
        let text = source
            .lines()
            .nth(first.line().saturating_sub(1))
            .unwrap_or("");
        let all: Vec<String> = errors.iter().map(|e| format!("line {e}")).collect();
        let err = KernelSourceError::new_err(format!(
            "pgas.kernel: line {}, column {}: {}\n    {text}\n    {}^{}",
            first.line(),
            first.column() + 1,
            first.message,
            " ".repeat(first.column()),
            if errors.len() > 1 {
                format!("\n(and: {})", all[1..].join("; "))
            } else {
                String::new()
            }
        ));
        Python::attach(|py| {
            let value = err.value(py);
            let _ = value.setattr("line", first.line());
            let _ = value.setattr("column", first.column() + 1);
        });
        err
    })?;
    if kernels.is_empty() {
        return Err(misuse(
            "pgas.kernel: the source has no #[pgas_kernel] fn: mark the kernel with \
             #[pgas_kernel] (and the functions it calls with #[pgas_device])"
                .into(),
        ));
    }
    let specs: Vec<&'static KernelSpec> = kernels.iter().map(leak_spec).collect();
    cache.insert(source.to_string(), specs.clone());
    Ok(specs)
}

/// The runtime's description of a compiled kernel, kept for the process.
fn leak_spec(k: &CompiledKernel) -> &'static KernelSpec {
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let params: Vec<ParamSpec> = k
        .params
        .iter()
        .map(|p: &KernelParam| ParamSpec {
            name: leak(&p.name),
            kind: param_kind(p.kind),
        })
        .collect();
    Box::leak(Box::new(KernelSpec {
        rust_name: leak(&k.rust_name),
        cuda_name: leak(&k.cuda_name),
        file: FILE,
        line: k.line as u32,
        plain_source: leak(&k.plain),
        checked_source: leak(&k.checked),
        params: Box::leak(params.into_boxed_slice()),
        collective: k.collective,
        max_threads: k.max_threads,
    }))
}

/// The runtime's kind of a parameter of the compiler's kind (as the macro writes it).
fn param_kind(kind: CgKind) -> ParamKind {
    let name = Scalar::rust_name;
    match kind {
        CgKind::Sym { elem, mutable } => ParamKind::Sym {
            elem: name(elem),
            mutable,
        },
        CgKind::Local { elem, mutable } => ParamKind::Local {
            elem: name(elem),
            mutable,
        },
        CgKind::Scalar(s) => ParamKind::Scalar(name(s)),
        CgKind::Team => ParamKind::Team,
        CgKind::TensorMap(s) => ParamKind::TensorMap(name(s)),
        CgKind::TensorMapMut(s) => ParamKind::TensorMapMut(name(s)),
        CgKind::Comptime(s) => ParamKind::Comptime(name(s)),
        // A reduction, given by name (`comptime_values`) and passed as its code.
        CgKind::ComptimeOp => ParamKind::Comptime("ReduceOp"),
    }
}

/// A launch dimension: an int or a tuple of 1 to 3 ints.
fn dims(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(u32, u32, u32)> {
    if let Ok(x) = obj.extract::<u32>() {
        return Ok((x, 1, 1));
    }
    let v: Vec<u32> = obj.extract().map_err(|_| {
        misuse(format!(
            "{what} takes an int or a tuple of 1 to 3 ints, not {obj}"
        ))
    })?;
    match v[..] {
        [x] => Ok((x, 1, 1)),
        [x, y] => Ok((x, y, 1)),
        [x, y, z] => Ok((x, y, z)),
        _ => Err(misuse(format!(
            "{what} takes 1 to 3 dimensions, not {}",
            v.len()
        ))),
    }
}

/// What pushes a scalar parameter: its value, read from Python as the Rust type `ty` names.
type ScalarPush = Box<dyn Fn(&mut KernelArgs<'_>) + Send + Sync>;

/// Reads scalar `value` as the Rust type `ty` names.
fn scalar(ty: &str, name: &str, value: &Bound<'_, PyAny>) -> PyResult<ScalarPush> {
    let bad = |e: PyErr| misuse(format!("parameter {name} ({ty}): {e}"));
    macro_rules! read {
        ($t:ty) => {{
            let v: $t = value.extract().map_err(bad)?;
            Box::new(move |a: &mut KernelArgs<'_>| {
                a.push_scalar(v);
            })
        }};
        ($t:ty, via f32) => {{
            let v = <$t>::from_f32(value.extract::<f32>().map_err(bad)?);
            Box::new(move |a: &mut KernelArgs<'_>| {
                a.push_scalar(v);
            })
        }};
    }
    Ok(match ty {
        "bool" => read!(bool),
        "i8" => read!(i8),
        "i16" => read!(i16),
        "i32" => read!(i32),
        "i64" => read!(i64),
        "isize" => read!(isize),
        "u8" => read!(u8),
        "u16" => read!(u16),
        "u32" => read!(u32),
        "u64" => read!(u64),
        "usize" => read!(usize),
        "f32" => read!(f32),
        "f64" => read!(f64),
        "f16" => read!(half::f16, via f32),
        "bf16" => read!(half::bf16, via f32),
        other => {
            return Err(misuse(format!(
                "parameter {name}: pgas.kernel does not pass {other} scalars from Python"
            )))
        }
    })
}

impl Kernel {
    /// Each parameter's Python value, in declaration order: positional ones first (the comptime
    /// ones are named only), then by name; every one present.
    fn bind<'py>(
        &self, args: &Bound<'py, PyTuple>, named: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let spec = self.spec;
        let mut values: Vec<Option<Bound<'py, PyAny>>> = vec![None; spec.params.len()];
        let mut positional = args.iter();
        for (slot, p) in values.iter_mut().zip(spec.params) {
            if !matches!(p.kind, ParamKind::Comptime(_)) {
                *slot = positional.next();
            }
        }
        if positional.next().is_some() {
            return Err(misuse(format!(
                "{}: too many arguments; it takes {:?}",
                spec.rust_name,
                self.params()
            )));
        }
        if let Some(named) = named {
            for (key, value) in named.iter() {
                let key: String = key.extract()?;
                let at = spec
                    .params
                    .iter()
                    .position(|p| p.name == key)
                    .ok_or_else(|| misuse(format!("{}: no parameter {key:?}", spec.rust_name)))?;
                if values[at].replace(value).is_some() {
                    return Err(misuse(format!(
                        "{}: parameter {key} given twice",
                        spec.rust_name
                    )));
                }
            }
        }
        values
            .into_iter()
            .zip(spec.params)
            .map(|(value, p)| {
                value.ok_or_else(|| {
                    misuse(format!(
                        "{}: parameter {} is missing",
                        spec.rust_name, p.name
                    ))
                })
            })
            .collect()
    }

    /// The comptime parameters' values, in declaration order.
    fn comptime_values(&self, values: &[Bound<'_, PyAny>]) -> PyResult<Vec<i128>> {
        let mut comptime = Vec::new();
        for (value, p) in values.iter().zip(self.spec.params) {
            if let ParamKind::Comptime(ty) = p.kind {
                let v = if ty == "bool" {
                    i128::from(value.extract::<bool>()?)
                } else if ty == "ReduceOp" {
                    // Named as pgas.coll names reductions; the kernel takes its code.
                    let name = value.extract::<String>().map_err(|_| {
                        misuse(format!(
                            "comptime parameter {} (ReduceOp) takes a reduction's name: \
                             \"sum\", \"prod\", \"min\", \"max\", \"and\", \"or\" or \"xor\"",
                            p.name
                        ))
                    })?;
                    crate::ops::collectives::reduce_op_of(&name)? as i128
                } else {
                    value.extract::<i128>().map_err(|_| {
                        misuse(format!("comptime parameter {} ({ty}) takes an int", p.name))
                    })?
                };
                comptime.push(v);
            }
        }
        Ok(comptime)
    }

    /// The `pgas.Tensor` of each symmetric parameter (`None` for the others).
    fn tensors<'py>(
        &self, values: &[Bound<'py, PyAny>],
    ) -> PyResult<Vec<Option<PyRef<'py, Tensor>>>> {
        let spec = self.spec;
        values
            .iter()
            .zip(spec.params)
            .map(|(v, p)| match p.kind {
                ParamKind::Sym { .. } => v.extract::<PyRef<'_, Tensor>>().map(Some).map_err(|_| {
                    misuse(format!(
                        "{}: parameter {} takes a pgas.Tensor (symmetric memory), not {}",
                        spec.rust_name,
                        p.name,
                        v.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ))
                }),
                _ => Ok(None),
            })
            .collect()
    }

    /// What each non-comptime parameter pushes at launch, checked against its declaration.
    fn pushes<'t>(
        &self, values: &[Bound<'_, PyAny>], tensors: &'t [Option<PyRef<'_, Tensor>>],
    ) -> PyResult<Vec<Push<'t>>> {
        let spec = self.spec;
        let mut pushes: Vec<Push<'t>> = Vec::new();
        for ((value, p), tensor) in values.iter().zip(spec.params).zip(tensors) {
            pushes.push(match p.kind {
                ParamKind::Sym { elem, .. } => {
                    let t: &Tensor = tensor.as_deref().expect("extracted by `tensors`");
                    if dtype::rust_elem(t.dtype) != Some(elem) {
                        return Err(misuse(format!(
                            "{}: parameter {} is SymTensor<{elem}>, and the tensor given is {}",
                            spec.rust_name, p.name, t.dtype
                        )));
                    }
                    Push::Sym(t)
                }
                ParamKind::Scalar(ty) => Push::Scalar(scalar(ty, p.name, value)?),
                ParamKind::Team => Push::Team(value.extract::<PyRef<'_, Team>>()?.team),
                ParamKind::Comptime(_) => continue,
                ParamKind::Local { .. } | ParamKind::TensorMap(_) | ParamKind::TensorMapMut(_) => {
                    return Err(misuse(format!(
                        "{}: parameter {} is a {}, which pgas.kernel cannot pass from Python yet: \
                         declare it a SymTensor (symmetric memory from pgas.alloc)",
                        spec.rust_name,
                        p.name,
                        self.params()
                            .into_iter()
                            .find(|(n, _)| *n == p.name)
                            .map(|(_, k)| k)
                            .unwrap_or_default()
                    )))
                }
            });
        }
        Ok(pushes)
    }
}

#[pymethods]
impl Kernel {
    /// The kernel's Rust name.
    #[getter]
    fn name(&self) -> &'static str {
        self.spec.rust_name
    }

    /// Its parameters as `(name, kind)` pairs, in order (`kind`: `"SymTensor<f32>"`,
    /// `"&mut SymTensor<f32>"`, `"f32"`, `"Team"`, `"comptime u32"`, ...).
    #[getter]
    fn params(&self) -> Vec<(&'static str, String)> {
        self.spec
            .params
            .iter()
            .map(|p| {
                let kind = match p.kind {
                    ParamKind::Sym { elem, mutable } => {
                        format!("{}SymTensor<{elem}>", if mutable { "&mut " } else { "&" })
                    }
                    ParamKind::Local { elem, mutable } => {
                        format!("{}CudaSlice<{elem}>", if mutable { "&mut " } else { "&" })
                    }
                    ParamKind::Scalar(s) => s.to_string(),
                    ParamKind::Team => "Team".to_string(),
                    ParamKind::TensorMap(s) | ParamKind::TensorMapMut(s) => {
                        format!("TensorMap<{s}>")
                    }
                    ParamKind::Comptime(s) => format!("comptime {s}"),
                };
                (p.name, kind)
            })
            .collect()
    }

    /// The generated CUDA C++ of the checked (`checked=True`) or plain variant.
    #[pyo3(signature = (checked=true))]
    fn cuda_source(&self, checked: bool) -> &'static str {
        self.spec.source(if checked {
            Variant::Checked
        } else {
            Variant::Plain
        })
    }

    /// Launches the kernel on `grid` blocks of `block` threads (ints or tuples of up to 3):
    /// its parameters follow in order, or by name; `#[comptime]` values by name. Symmetric
    /// tensor parameters take `pgas.Tensor`s of their element type, scalars Python numbers,
    /// teams `pgas.Team`s. `checked` (default) runs the variant that checks every index and PE
    /// and traps naming the line in the source; `stream=` as for the other calls; `shared_mem`
    /// bytes of dynamic shared memory a block. Collective kernels (barriers, device
    /// collectives) launch cooperatively, as in Rust.
    #[pyo3(signature = (grid, block, *args, stream=None, shared_mem=0, checked=true, **named))]
    #[allow(clippy::too_many_arguments)]
    fn __call__(
        &self, py: Python<'_>, grid: &Bound<'_, PyAny>, block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>, stream: Option<&Bound<'_, PyAny>>, shared_mem: u32,
        checked: bool, named: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let cfg = LaunchConfig::dims(dims(grid, "grid")?, dims(block, "block")?)
            .with_shared_mem(shared_mem);
        let values = self.bind(args, named)?;
        let comptime = self.comptime_values(&values)?;
        let variant = if checked {
            Variant::Checked
        } else {
            Variant::Plain
        };
        // The tensors are looked up in the registry (and the teams read) with the GIL held;
        // the launch itself runs without it, on the call's stream.
        let tensors = self.tensors(&values)?;
        let pushes = self.pushes(&values, &tensors)?;
        let spec = self.spec;
        run(py, stream, |call| {
            let mut kargs = KernelArgs::new();
            for push in &pushes {
                match push {
                    // `&mut` or not, a symmetric argument is its pointer and length.
                    Push::Sym(t) => {
                        with_tensor!(call.tensor(t)?, s => {
                            kargs.push_sym(s);
                        });
                    }
                    Push::Scalar(push) => push(&mut kargs),
                    Push::Team(team) => {
                        kargs.push_team(*team);
                    }
                }
            }
            pgas_runtime::launch::launch(
                call.pgas,
                spec,
                variant,
                &comptime,
                cfg,
                call.user.map(|s| &**s),
                &mut kargs,
            )
            .map_err(to_py)
        })
    }

    /// `pgas.Kernel(scale(x: &mut SymTensor<f32>, a: f32))`.
    fn __repr__(&self) -> String {
        let params: Vec<String> = self
            .params()
            .into_iter()
            .map(|(n, k)| format!("{n}: {k}"))
            .collect();
        format!(
            "pgas.Kernel({}({}))",
            self.spec.rust_name,
            params.join(", ")
        )
    }
}

/// One argument of a launch, ready to push.
enum Push<'a> {
    Sym(&'a Tensor),
    Scalar(ScalarPush),
    Team(pgas_runtime::Team),
}
