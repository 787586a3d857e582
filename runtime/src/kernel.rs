//! What a `#[pgas_kernel]` is, as the macro describes it: its parameters ([`ParamSpec`]), its two
//! generated sources ([`Variant`]) and everything else the JIT and the launch need
//! ([`KernelSpec`]). Pure data, built at compile time.

/// Which of the two generated sources to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// No bounds or PE checks (`unsafe launch_unchecked`).
    Plain,
    /// Every index checked against its buffer length and every `pe` against `n_pes()`;
    /// a violation prints the Rust `file:line` and traps (`launch`).
    Checked,
}

impl Variant {
    /// The suffix used in kernel symbol names (`plain` / `checked`).
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Checked => "checked",
        }
    }
}

/// How a kernel parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `&SymTensor<T>` / `&mut SymTensor<T>`: pointer plus length; may be a remote target.
    Sym {
        /// The Rust element type.
        elem: &'static str,
        /// Whether the kernel takes it `&mut`.
        mutable: bool,
    },
    /// `&CudaSlice<T>` / `&mut CudaSlice<T>`: pointer plus length; local only.
    Local {
        /// The Rust element type.
        elem: &'static str,
        /// Whether the kernel takes it `&mut`.
        mutable: bool,
    },
    /// A scalar passed by value; the string is the Rust type name.
    Scalar(&'static str),
    /// An NVSHMEM team handle.
    Team,
    /// `&TensorMap<T>`: the TMA descriptor by value, then its tile shape; the string is the Rust
    /// element type.
    TensorMap(&'static str),
    /// `&mut TensorMap<T>`: as `TensorMap`, of a tensor the kernel writes (a map built from a
    /// `&mut` tensor, `TensorMap::tiled_2d_mut`).
    TensorMapMut(&'static str),
    /// A `#[comptime]` value baked into the source; not passed at launch.
    Comptime(&'static str),
}

/// One kernel parameter as written in Rust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// The parameter's Rust name.
    pub name: &'static str,
    /// How it is passed.
    pub kind: ParamKind,
}

/// Everything the runtime needs to JIT-compile and launch one `#[pgas_kernel]`.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    /// The Rust function name.
    pub rust_name: &'static str,
    /// Unique CUDA base name (`pgas_<name>_<hash>`); see `pgas_codegen::specialize`.
    pub cuda_name: &'static str,
    /// Rust source file of the `fn`.
    pub file: &'static str,
    /// Line of the `fn` in [`KernelSpec::file`].
    pub line: u32,
    /// Generated CUDA of the plain variant (prelude included, name and comptime macros unset).
    pub plain_source: &'static str,
    /// Generated CUDA of the checked variant.
    pub checked_source: &'static str,
    /// All parameters in declaration order, comptime ones included.
    pub params: &'static [ParamSpec],
    /// Whether the kernel calls a device barrier, sync or collective and so needs all blocks
    /// resident at once (cooperative launch).
    pub collective: bool,
    /// The most threads per block the kernel declares (`#[pgas_kernel(max_threads = N)]`,
    /// compiled as `__launch_bounds__(N)`); a larger block is refused before compiling.
    pub max_threads: Option<u32>,
}

impl KernelSpec {
    /// The source of one variant.
    pub fn source(&self, variant: Variant) -> &'static str {
        match variant {
            Variant::Plain => self.plain_source,
            Variant::Checked => self.checked_source,
        }
    }

    /// Names of the comptime parameters, in declaration order.
    pub fn comptime_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.params.iter().filter_map(|p| match p.kind {
            ParamKind::Comptime(_) => Some(p.name),
            _ => None,
        })
    }
}

/// Most comptime parameters one kernel may have (cache keys hold them inline, with no
/// allocation).
pub const MAX_COMPTIME: usize = 8;
