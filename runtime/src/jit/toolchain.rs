//! Finding what NVRTC needs (the NVRTC library, the CUDA and CCCL headers, the NVSHMEM headers)
//! and compiling one CUDA source to a CUBIN. Needs no GPU: CI compiles every generated kernel
//! through [`Toolchain::compile_cubin`]. The keys it caches under are made in `key.rs`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::jit::disk::{CacheKey, DiskCache, Lookup};
use crate::jit::library::{self, Built};
use crate::jit::nvjitlink::{Input, NvJitLink};
use crate::jit::nvrtc::{self, Emit};
use crate::launch_cause::LaunchCause;
use pgas_codegen::{nvcall, Prelude};

use crate::jit::nvrtc::NVRTC_SONAME;
/// The name the NVSHMEM library's program and link input go by.
pub(super) const LIBRARY: &str = "pgas_nvshmem_library";

/// The define that makes NVSHMEM's headers keep a module's device state in the module.
const NUMBA: &str = "-D__NVSHMEM_NUMBA_SUPPORT__";
/// Where a CUDA root keeps its libraries, depending on how it was installed.
const LIB_SUBDIRS: &[&str] = &["lib64", "lib", "targets/x86_64-linux/lib"];
/// Where a CUDA root keeps its headers.
const INCLUDE_SUBDIRS: &[&str] = &["include", "targets/x86_64-linux/include"];

/// A CUDA installation as NVRTC needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaInstall {
    /// The root the search found (e.g. `/usr/local/cuda` or `<site-packages>/nvidia/cu13`).
    pub root: PathBuf,
    /// Directory holding `libnvrtc.so.13`.
    pub lib_dir: PathBuf,
    /// Directory holding `cuda_runtime.h`.
    pub include: PathBuf,
    /// Directory holding `cuda/std/type_traits` (CCCL), when it is not `include` itself.
    pub cccl_include: Option<PathBuf>,
}

/// Everything needed to turn CUDA C that includes `nvshmem.h` into a CUBIN.
#[derive(Clone, Debug)]
pub struct Toolchain {
    cuda: CudaInstall,
    nvshmem_include: PathBuf,
    nvshmem_version: String,
    nvrtc_version: (i32, i32),
    /// `PGAS_JIT_FAST_COMPILE` (`min`, `mid`, `max`): NVRTC's `--Ofast-compile`, which trades
    /// kernel speed for compile time (docs/jit.md). `None`: full optimization.
    fast_compile: Option<String>,
    /// nvJitLink, when found and not turned off (`PGAS_JIT_LTO=off`): point-to-point and
    /// barrier kernels then compile link-time (docs/jit.md), else against NVSHMEM's headers.
    linker: Option<Arc<NvJitLink>>,
    /// Whether collective kernels link too (`PGAS_JIT_LTO=all`), with collective objects.
    link_collectives: bool,
    /// Whether a kernel that calls NVSHMEM's device collectives starts on a quick build while
    /// its full build compiles in the background (`PGAS_JIT_TIERS`, on by default:
    /// [`Toolchain::quick_tier`]).
    tiers: bool,
    /// Whether nvJitLink optimizes (`-O3`, always for the JIT) or links at `-O0`
    /// ([`Toolchain::with_unoptimized_link`], for checks of what links).
    optimize_link: bool,
    /// The NVSHMEM library's cache key per (prelude, arch): every linked kernel's key includes
    /// it, and computing it generates and hashes the whole library source, so once is enough.
    pub(super) library_keys: Arc<Mutex<LibraryKeys>>,
}

/// The NVSHMEM library's cache key of each (prelude, arch) computed so far.
type LibraryKeys = HashMap<(Prelude, (u32, u32)), CacheKey>;

/// A compiled kernel image and the NVRTC log that came with it.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The CUBIN for the requested architecture.
    pub cubin: Vec<u8>,
    /// NVRTC's log: empty for clean generated code; see [`Compiled::warnings`].
    pub log: String,
}

impl Compiled {
    /// The lines of the log that are warnings (generated code should produce none; CI fails on
    /// any).
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        self.log.lines().filter(|l| l.contains(": warning"))
    }
}

impl Toolchain {
    /// Finds NVRTC, the CUDA headers and the NVSHMEM headers.
    ///
    /// CUDA: `PGAS_CUDA_HOME` if set (and then only there, so a wrong value is an error rather
    /// than silently replaced), else `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda` and the
    /// `nvidia/cu13` directory of python3's `nvidia` wheels. NVSHMEM: as
    /// [`crate::nvshmem::find`] finds it for the host library, so kernels compile against the
    /// headers of the library they run with.
    pub fn discover() -> Result<Toolchain> {
        let _span = tracing::info_span!("pgas.discover").entered();
        let env = |k: &str| std::env::var_os(k);
        let cuda = find_cuda(&cuda_candidates(&env))?;
        let nvshmem = crate::nvshmem::find()?;
        Toolchain::with(cuda, &nvshmem.root)
    }

    /// A toolchain from explicit roots: a CUDA root (`<root>/lib*/libnvrtc.so.13`,
    /// `<root>/include`) and an NVSHMEM root (`<root>/include/nvshmem.h`).
    pub fn from_roots(cuda_root: &Path, nvshmem_root: &Path) -> Result<Toolchain> {
        let cuda = find_cuda(&[cuda_root.to_path_buf()])?;
        Toolchain::with(cuda, nvshmem_root)
    }

    fn with(cuda: CudaInstall, nvshmem_root: &Path) -> Result<Toolchain> {
        let nvshmem_include = nvshmem_root.join("include");
        if !nvshmem_include.join("nvshmem.h").is_file() {
            return Err(Error::HeadersMissing {
                what: "the NVSHMEM headers (include/nvshmem.h)",
                searched: nvshmem_root.display().to_string(),
                hint: "Set PGAS_NVSHMEM_HOME to an NVSHMEM 3.x root (e.g. the nvidia-nvshmem-cu13 \
                       wheel's nvidia/nvshmem directory)",
            });
        }
        // Part of the disk cache key; unreadable means "unknown", which still keys correctly
        // against itself.
        let nvshmem_version = crate::nvshmem::version::read_header_version(&nvshmem_include)
            .map(crate::nvshmem::version::display)
            .unwrap_or_else(|_| "unknown".to_owned());
        let nvrtc_version = nvrtc::load(&cuda.lib_dir)?;
        let fast_compile = fast_compile(std::env::var("PGAS_JIT_FAST_COMPILE").ok().as_deref())?;
        let link_time = link_time(std::env::var("PGAS_JIT_LTO").ok().as_deref())?;
        let tiers = tiers(std::env::var("PGAS_JIT_TIERS").ok().as_deref())?;
        let linker = if link_time != LinkTime::Off {
            // Beside NVRTC in a CUDA root and in the nvidia-nvjitlink wheel; without it kernels
            // compile against the headers, as before (`pgas doctor` says which).
            NvJitLink::load(&[cuda.lib_dir.as_path()])
                .ok()
                .map(Arc::new)
        } else {
            None
        };
        Ok(Toolchain {
            cuda,
            nvshmem_include,
            nvshmem_version,
            nvrtc_version,
            fast_compile,
            linker,
            link_collectives: link_time == LinkTime::All,
            tiers,
            optimize_link: true,
            library_keys: Arc::default(),
        })
    }

    /// The toolchain of the quick tier (docs/jit.md, "Tiers"): collective kernels linked with
    /// NVSHMEM's collectives as objects compiled at `--Ofast-compile=max`, so a kernel that
    /// calls a device collective loads in seconds, not the quarter minute its full build takes
    /// (which runs slower code meanwhile: the JIT swaps the full build in when it is ready).
    /// `None` when tiers do not apply: `PGAS_JIT_TIERS=off`, no nvJitLink, or a toolchain that
    /// already trades speed for compile time (`PGAS_JIT_LTO=all`, `PGAS_JIT_FAST_COMPILE`).
    pub fn quick_tier(&self) -> Option<Toolchain> {
        if !self.tiers || self.linker.is_none() || self.link_collectives {
            return None;
        }
        if self.fast_compile.is_some() {
            return None;
        }
        let mut quick = self.clone();
        quick.link_collectives = true;
        quick.fast_compile = Some("max".to_owned());
        quick.tiers = false;
        Some(quick)
    }

    /// The environment under which a helper process (`pgas jit-helper`, which discovers its
    /// own toolchain) compiles as this toolchain does, so its cache keys match the build's.
    pub fn helper_env(&self) -> [(&'static str, String); 2] {
        let lto = match (&self.linker, self.link_collectives) {
            (None, _) => "off",
            (Some(_), false) => "on",
            (Some(_), true) => "all",
        };
        let fast = self
            .fast_compile
            .clone()
            .unwrap_or_else(|| "off".to_owned());
        [
            ("PGAS_JIT_LTO", lto.to_owned()),
            ("PGAS_JIT_FAST_COMPILE", fast),
        ]
    }

    /// This toolchain with NVRTC's `--Ofast-compile` at `level` (`min`, `mid`, `max` or `off`),
    /// as `PGAS_JIT_FAST_COMPILE` sets it: for tools that check what compiles rather than run
    /// it (the CI corpus test), where compile time matters and kernel speed does not.
    pub fn with_fast_compile(mut self, level: &str) -> Result<Toolchain> {
        self.fast_compile = fast_compile(Some(level))?;
        Ok(self)
    }

    /// This toolchain with its link-time compiles linked at nvJitLink's `-O0`: the same inputs,
    /// symbols and front-end checks, without the optimization of the linked LTO-IR and with
    /// ptxas at `-O0`. For tools that check what links rather than run it (the CI tests that
    /// link every collective specialization and corpus kernel, in about half the time). The
    /// JIT never builds one, and its cache keys do not tell the two apart: do not give such a
    /// toolchain a kernel cache.
    pub fn with_unoptimized_link(mut self) -> Toolchain {
        self.optimize_link = false;
        self
    }

    /// Where nvJitLink was loaded from, when point-to-point and barrier kernels compile
    /// link-time; `None` when they compile against NVSHMEM's headers (`PGAS_JIT_LTO=off`, or no
    /// `libnvJitLink.so.13` beside NVRTC).
    pub fn linker(&self) -> Option<&Path> {
        self.linker.as_deref().map(NvJitLink::path)
    }

    /// nvJitLink, where it was found (the tests of `jit::foreign` link with it).
    #[cfg(test)]
    pub(crate) fn nvjitlink(&self) -> Option<&NvJitLink> {
        self.linker.as_deref()
    }

    /// The prelude of `source` when it compiles link-time (its library is
    /// `nvcall::library_prelude` of it). Never for a source that calls no NVSHMEM
    /// ([`nvcall::calls_nvshmem`]): that one compiles from its link-time form alone, with no
    /// library to link (see [`Toolchain::compile_dumped`]).
    pub(super) fn links(&self, source: &str) -> Option<Prelude> {
        self.linker.as_ref()?;
        if !nvcall::calls_nvshmem(source) {
            return None;
        }
        // sm_90a kernels (wgmma, TMA) link too: their LTO-IR is sm_90a's and the link targets
        // sm_90a, with the library of plain sm_XY (LTO-IR of sm_90 joins an sm_90a link); the
        // machine code is the inline compile's (tests/nvrtc/corpus.rs compares them). Not with
        // collective objects, which are sm_90 machine code.
        Prelude::of_source(source).filter(|p| {
            let full = *p == Prelude::Full;
            (!full || self.link_collectives)
                && source.contains(nvcall::GENERATED)
                && !(full && needs_sm90a(source))
        })
    }

    /// Whether collective kernels compile link-time (`PGAS_JIT_LTO=all`).
    pub fn links_collectives(&self) -> bool {
        self.linker.is_some() && self.link_collectives
    }

    /// This toolchain with collective kernels compiled link-time or not (what
    /// `PGAS_JIT_LTO=all` or `on` chooses); without nvJitLink nothing links either way.
    pub fn with_link_time(mut self, link_time: LinkTime) -> Toolchain {
        if link_time == LinkTime::Off {
            self.linker = None;
        }
        self.link_collectives = link_time == LinkTime::All;
        self
    }

    /// NVRTC's options for the LTO-IR of `source` (a link-time kernel, or the NVSHMEM library:
    /// `""`): the usual ones, without `--Ofast-compile` (optimization happens in the link), plus
    /// `-dlto -rdc=true`; sm_90a for a source with sm_90a instructions.
    pub(crate) fn lto_options(&self, arch: (u32, u32), source: &str) -> Vec<String> {
        let mut o = self.relocatable_options(arch, source);
        o.retain(|o| !o.starts_with("--Ofast-compile"));
        o.push("-dlto".to_owned());
        o
    }

    /// NVRTC's options for a collective object (`nvcall::collective_objects`): machine code
    /// that a link places as it is, with at most `registers` registers a thread (the cap of the
    /// kernels it links into: `nvcall::register_cap`). `--Ofast-compile` applies here, where
    /// NVSHMEM's collective code is compiled.
    pub(crate) fn object_options(&self, arch: (u32, u32), registers: u32) -> Vec<String> {
        let mut o = self.relocatable_options(arch, "");
        o.push(format!("-maxrregcount={registers}"));
        o
    }

    /// The usual options for code that a link joins: relocatable, and with NVSHMEM's device
    /// state declared `extern` (NVSHMEM_ENABLE_ALL_DEVICE_INLINING instead of
    /// __NVSHMEM_NUMBA_SUPPORT__, which would give every input a state of its own), defined once,
    /// by the library (`nvcall::library`).
    pub(crate) fn relocatable_options(&self, arch: (u32, u32), source: &str) -> Vec<String> {
        let mut o: Vec<String> = self
            .options(arch, source)
            .into_iter()
            .map(|o| {
                if o == NUMBA {
                    "-DNVSHMEM_ENABLE_ALL_DEVICE_INLINING".to_owned()
                } else {
                    o
                }
            })
            .collect();
        o.push("-rdc=true".to_owned());
        o
    }

    /// The CUDA installation in use.
    pub fn cuda(&self) -> &CudaInstall {
        &self.cuda
    }

    /// The NVSHMEM include directory in use.
    pub fn nvshmem_include(&self) -> &Path {
        &self.nvshmem_include
    }

    /// NVSHMEM's version as its headers state it (`3.4.5`), or `unknown`.
    pub fn nvshmem_version(&self) -> &str {
        &self.nvshmem_version
    }

    /// NVRTC's version (`(13, 0)`).
    pub fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc_version
    }

    /// The NVRTC options for `source` on `arch`: those of `docs/jit.md`, which NVSHMEM's device
    /// code needs. A source with sm_90a instructions (`wgmma`, see
    /// [`pgas_codegen::SM90A_MARKER`]) compiles for the architecture-specific `sm_90a`.
    pub fn options(&self, arch: (u32, u32), source: &str) -> Vec<String> {
        let suffix = if needs_sm90a(source) { "a" } else { "" };
        let mut opts = vec![
            format!("-arch=sm_{}{}{suffix}", arch.0, arch.1),
            "-std=c++17".to_owned(),
            // NVSHMEM's headers have unannotated inline functions; NVRTC rejects them as host
            // functions without this.
            "-default-device".to_owned(),
            // Keeps NVSHMEM's device state in a per-module __constant__ that
            // nvshmemx_cumodule_init fills in.
            NUMBA.to_owned(),
            format!("-I{}", self.nvshmem_include.display()),
            format!("-I{}", self.cuda.include.display()),
        ];
        if let Some(cccl) = &self.cuda.cccl_include {
            opts.push(format!("-I{}", cccl.display()));
        }
        if let Some(level) = &self.fast_compile {
            opts.push(format!("--Ofast-compile={level}"));
        }
        // A kernel calling NVSHMEM's device collectives keeps to the register cap of its quick
        // build's objects (`nvcall::register_cap`), so the build swapped in runs every block the
        // quick one ran (`docs/jit.md`, "Tiers": without it an unbounded kernel's full build
        // could refuse a block size its quick build ran).
        if Prelude::of_source(source) == Some(Prelude::Full) {
            opts.push(format!("-maxrregcount={}", nvcall::register_cap(source)));
        }
        opts
    }

    /// Compiles `source` (which defines `extern "C" __global__ void <kernel_name>(...)`) to a
    /// CUBIN for compute capability `arch`.
    ///
    /// A compile error is [`Error::Compile`] naming `kernel_name`, the `file:line` of the first
    /// error (the Rust location when the source carries `#line` directives) and the full log; an
    /// architecture NVRTC does not know is [`Error::UnsupportedArch`].
    pub fn compile_cubin(
        &self, source: &str, kernel_name: &str, arch: (u32, u32),
    ) -> Result<Compiled> {
        self.compile_with(source, kernel_name, arch, &self.options(arch, source))
    }

    /// [`Toolchain::compile_cubin`] through a disk cache: a verified entry is returned as is
    /// (`true`: from the cache), else NVRTC compiles and the result is stored; a corrupt entry
    /// is dropped and rebuilt; a cache that cannot be read or written is skipped (one warning).
    /// With `dump`, `<kernel_name>.cu` and `<kernel_name>.log` (options,
    /// NVRTC log or the cache entry used) are written there.
    pub fn compile_cached(
        &self, cache: Option<&DiskCache>, dump: Option<&Path>, source: &str, kernel_name: &str,
        arch: (u32, u32),
    ) -> Result<(Compiled, bool)> {
        let key = self.cache_key(source, kernel_name, arch);
        if let Some(c) = cache {
            if let Lookup::Hit(cubin) = c.load_or_miss(&key) {
                if let Some(dir) = dump {
                    dump_file(dir, &format!("{kernel_name}.cu"), source);
                    let note = format!(
                        "options: {}\nloaded from {}\n",
                        self.options(arch, source).join(" "),
                        c.path(&key).display()
                    );
                    dump_file(dir, &format!("{kernel_name}.log"), &note);
                }
                return Ok((
                    Compiled {
                        cubin,
                        log: String::new(),
                    },
                    true,
                ));
            }
        }
        let compiled = self.compile_dumped(cache, dump, source, kernel_name, arch)?;
        if let Some(c) = cache {
            c.store_or_warn(&key, &compiled.cubin);
        }
        Ok((compiled, false))
    }

    /// A generated source (or a batch of them) compiled as the JIT compiles it: link-time
    /// against the NVSHMEM library when it applies ([`Toolchain::linker`]), else as
    /// [`Toolchain::compile_cubin`]. The library comes from `disk` when given, else is built.
    pub fn compile_program(
        &self, disk: Option<&DiskCache>, source: &str, kernel_name: &str, arch: (u32, u32),
    ) -> Result<Compiled> {
        self.compile_dumped(disk, None, source, kernel_name, arch)
    }

    /// [`Toolchain::compile_cubin`], or the link-time compile where it applies (the library
    /// from `disk` or built), writing `<kernel_name>.cu` and `<kernel_name>.log` (what NVRTC
    /// compiled, its options and log) to `dump` when given.
    pub(crate) fn compile_dumped(
        &self, disk: Option<&DiskCache>, dump: Option<&Path>, source: &str, kernel_name: &str,
        arch: (u32, u32),
    ) -> Result<Compiled> {
        let _span = tracing::debug_span!("pgas.compile", kernel = kernel_name).entered();
        let linked = self.links(source);
        let (compiled, compiled_source, opts) = match linked {
            Some(prelude) => {
                let lto = nvcall::lto_source(source)
                    .ok_or_else(|| Error::launch(kernel_name, LaunchCause::NoLinkTimeForm))?;
                let opts = self.lto_options(arch, source);
                let compiled =
                    self.compile_linked(disk, prelude, source, &lto, kernel_name, arch, &opts);
                (compiled, lto, opts)
            }
            None => {
                // A generated source that calls no NVSHMEM compiles without NVSHMEM's headers
                // (a third of a p2p kernel's compile): its link-time form, whose declarations
                // it never uses, straight to machine code.
                let text = match nvcall::calls_nvshmem(source) {
                    false => nvcall::lto_source(source).unwrap_or_else(|| source.to_owned()),
                    true => source.to_owned(),
                };
                let opts = self.options(arch, source);
                let compiled = self.compile_with(&text, kernel_name, arch, &opts);
                (compiled, text, opts)
            }
        };
        if let Some(dir) = dump {
            dump_file(dir, &format!("{kernel_name}.cu"), &compiled_source);
            let log = match &compiled {
                Ok(c) => c.log.clone(),
                Err(e) => e.to_string(),
            };
            let how = match linked {
                Some(p) => format!(
                    "linked by nvJitLink with the NVSHMEM library of the {}{}\n",
                    nvcall::library_prelude(p).name(),
                    nvcall::collective_objects(source)
                        .iter()
                        .map(|o| format!(" and the object of {}", o.name))
                        .collect::<String>()
                ),
                None => String::new(),
            };
            let text = format!("options: {}\n{how}{log}\n", opts.join(" "));
            dump_file(dir, &format!("{kernel_name}.log"), &text);
        }
        compiled
    }

    /// A link-time compile: NVRTC turns `lto_source` into LTO-IR, nvJitLink links it with the
    /// NVSHMEM library of `prelude` (and a collective kernel's collective objects, made from
    /// `source`'s wrappers) into a CUBIN.
    #[allow(clippy::too_many_arguments)]
    fn compile_linked(
        &self, disk: Option<&DiskCache>, prelude: Prelude, source: &str, lto_source: &str,
        kernel_name: &str, arch: (u32, u32), options: &[String],
    ) -> Result<Compiled> {
        let linker = self
            .linker
            .as_ref()
            .ok_or_else(|| Error::launch(kernel_name, LaunchCause::NoNvJitLink))?;
        self.check_target(source, kernel_name, arch)?;
        let sm90a = needs_sm90a(source);
        let parts = self.link_inputs(prelude, source, arch);
        let lib_prelude = parts.prelude;
        // The objects first, then the kernel, then the library: on a fresh machine a helper
        // builds the library meanwhile (`jit::compile::start_library_helpers`).
        let registers = parts.registers;
        let objects = parts
            .objects
            .into_iter()
            .map(|(o, key)| {
                let what = Built::Collective {
                    name: &o.name,
                    registers,
                };
                let bytes = library::get(key, disk, what, || {
                    self.build_object(&o, arch, registers, kernel_name)
                })?;
                Ok((o.name, bytes))
            })
            .collect::<Result<Vec<_>>>()?;
        let out = nvrtc::compile(
            lto_source,
            &format!("{kernel_name}.cu"),
            options,
            Emit::LtoIr,
        )?;
        let ir = out.cubin.ok_or_else(|| Error::Compile {
            kernel: kernel_name.to_owned(),
            location: first_error_location(&out.log),
            log: out.log.clone(),
        })?;
        let lib = library::get(parts.library, disk, Built::Library(lib_prelude), || {
            self.build_library(lib_prelude, arch)
        })?;
        let _span = tracing::debug_span!("pgas.link", kernel = kernel_name).entered();
        let mut inputs = vec![
            (kernel_name, &ir[..], Input::LtoIr),
            (LIBRARY, &lib[..], Input::LtoIr),
        ];
        inputs.extend(
            objects
                .iter()
                .map(|(n, b)| (n.as_str(), &b[..], Input::Cubin)),
        );
        let cubin = linker.link(&inputs, arch, sm90a, registers, self.optimize_link)?;
        Ok(Compiled {
            cubin,
            log: out.log,
        })
    }

    /// Compiles one NVSHMEM collective wrapper to a relocatable object (for `kernel_name`,
    /// which a failure names).
    pub(crate) fn build_object(
        &self, object: &nvcall::CollectiveObject, arch: (u32, u32), registers: u32,
        kernel_name: &str,
    ) -> Result<Vec<u8>> {
        let options = self.object_options(arch, registers);
        let out = nvrtc::compile(
            &object.source,
            &format!("{}.cu", object.name),
            &options,
            Emit::Cubin,
        )?;
        out.cubin.ok_or_else(|| Error::Compile {
            kernel: format!("NVSHMEM's collective {} (for {kernel_name})", object.name),
            location: first_error_location(&out.log),
            log: format!(
                "{}\n(this NVSHMEM's device API differs from what pgas expects; set \
                 PGAS_JIT_LTO=off to compile kernels against its headers directly)",
                out.log
            ),
        })
    }

    /// Compiles the NVSHMEM library of `prelude` (every call wrapper its kernels may use) to
    /// LTO-IR.
    pub(crate) fn build_library(&self, prelude: Prelude, arch: (u32, u32)) -> Result<Vec<u8>> {
        let source = nvcall::library(prelude);
        let out = nvrtc::compile(
            &source,
            &format!("{LIBRARY}.cu"),
            &self.lto_options(arch, ""),
            Emit::LtoIr,
        )?;
        out.cubin.ok_or_else(|| Error::Compile {
            kernel: format!("the pgas NVSHMEM library ({})", prelude.name()),
            location: first_error_location(&out.log),
            log: format!(
                "{}\n(this NVSHMEM's device API differs from what pgas expects; set \
                 PGAS_JIT_LTO=off to compile kernels against its headers directly)",
                out.log
            ),
        })
    }

    /// [`Error::NeedsSm90a`] for a kernel with sm_90a instructions on another GPU, then
    /// [`Toolchain::check_arch`]: before either compile, inline or linked.
    fn check_target(&self, source: &str, kernel_name: &str, arch: (u32, u32)) -> Result<()> {
        if needs_sm90a(source) && arch != (9, 0) {
            return Err(Error::NeedsSm90a {
                kernel: kernel_name.to_owned(),
                arch,
            });
        }
        self.check_arch(arch)
    }

    /// [`Error::UnsupportedArch`] unless this NVRTC can compile for `arch`.
    fn check_arch(&self, arch: (u32, u32)) -> Result<()> {
        let supported = nvrtc::supported_archs()?;
        let wanted = (arch.0 * 10 + arch.1) as i32;
        if !supported.contains(&wanted) {
            let list: Vec<String> = supported.iter().map(|a| format!("sm_{a}")).collect();
            return Err(Error::UnsupportedArch {
                arch,
                log: format!("this NVRTC supports {}", list.join(", ")),
            });
        }
        Ok(())
    }

    /// [`Toolchain::compile_cubin`] with explicit options (see [`Toolchain::options`]).
    pub fn compile_with(
        &self, source: &str, kernel_name: &str, arch: (u32, u32), options: &[String],
    ) -> Result<Compiled> {
        self.check_target(source, kernel_name, arch)?;
        let out = nvrtc::compile(source, &format!("{kernel_name}.cu"), options, Emit::Cubin)?;
        match out.cubin {
            Some(cubin) => Ok(Compiled {
                cubin,
                log: out.log,
            }),
            None => Err(Error::Compile {
                kernel: kernel_name.to_owned(),
                location: first_error_location(&out.log),
                log: out.log,
            }),
        }
    }
}

/// Whether `source` uses sm_90a-only instructions: its Hopper support code says so.
fn needs_sm90a(source: &str) -> bool {
    source.contains(pgas_codegen::SM90A_MARKER)
}

/// The `--Ofast-compile` level `PGAS_JIT_FAST_COMPILE` asks for: `None` when unset, empty or
/// `off`; a clear error for anything but `min`, `mid` or `max`.
fn fast_compile(value: Option<&str>) -> Result<Option<String>> {
    match value.map(str::trim) {
        None | Some("") | Some("off") | Some("0") => Ok(None),
        Some(level @ ("min" | "mid" | "max")) => Ok(Some(level.to_owned())),
        Some(other) => Err(Error::InvalidConfig {
            name: "PGAS_JIT_FAST_COMPILE",
            value: other.to_owned(),
            reason: "use min, mid or max (NVRTC's --Ofast-compile level), or off".to_owned(),
        }),
    }
}

/// Whether `PGAS_JIT_LTO` lets point-to-point and barrier kernels compile link-time: yes when
/// unset, empty, `on` or `1`; no for `off` or `0`; a clear error otherwise.
fn link_time(value: Option<&str>) -> Result<LinkTime> {
    match value.map(str::trim) {
        None | Some("") | Some("on") | Some("1") => Ok(LinkTime::PointToPoint),
        Some("all") => Ok(LinkTime::All),
        Some("off") | Some("0") => Ok(LinkTime::Off),
        Some(other) => Err(Error::InvalidConfig {
            name: "PGAS_JIT_LTO",
            value: other.to_owned(),
            reason: "use on (link point-to-point and barrier kernels against pgas's NVSHMEM \
                     library with nvJitLink, the default), all (collective kernels too, with \
                     NVSHMEM's collectives built once per machine: docs/jit.md) or off (compile \
                     every kernel against NVSHMEM's headers)"
                .to_owned(),
        }),
    }
}

/// Whether `PGAS_JIT_TIERS` lets collective kernels start on a quick build: yes when unset,
/// empty, `on` or `1`; no for `off` or `0`; a clear error otherwise.
fn tiers(value: Option<&str>) -> Result<bool> {
    match value.map(str::trim) {
        None | Some("") | Some("on") | Some("1") => Ok(true),
        Some("off") | Some("0") => Ok(false),
        Some(other) => Err(Error::InvalidConfig {
            name: "PGAS_JIT_TIERS",
            value: other.to_owned(),
            reason: "use on (a kernel calling NVSHMEM's device collectives starts on a quick \
                     build and its full build is swapped in when ready, the default) or off \
                     (wait for the full build)"
                .to_owned(),
        }),
    }
}

/// Which kernels compile link-time (`PGAS_JIT_LTO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkTime {
    /// None: every kernel compiles against NVSHMEM's headers (`off`).
    Off,
    /// Point-to-point, barrier and sm_90a kernels (`on`, the default); collective kernels
    /// compile inline.
    PointToPoint,
    /// Collective kernels too, linking each NVSHMEM collective they call as an object built
    /// once per machine (`all`): a new collective kernel compiles in 0.2 s instead of 16-20 s,
    /// but NVSHMEM's reduction then runs as a call, which makes a small reduction slower
    /// (docs/jit.md, "Collective objects", has the figures).
    All,
}

/// Writes a `PGAS_DUMP_DIR` file; a failure is reported, not fatal (dumps are a debugging aid).
fn dump_file(dir: &Path, name: &str, text: &str) {
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(dir.join(name), text))
    {
        eprintln!(
            "pgas: cannot write {name} to the dump directory {}: {e}",
            dir.display()
        );
    }
}

/// The `file:line` of the first error in an NVRTC log (`file(line): error: ...`).
pub(crate) fn first_error_location(log: &str) -> Option<String> {
    log.lines().find_map(|line| {
        let (head, rest) = line.split_once("): ")?;
        if !(rest.starts_with("error") || rest.starts_with("catastrophic error")) {
            return None;
        }
        let (file, num) = head.rsplit_once('(')?;
        num.parse::<u32>().ok()?;
        Some(format!("{file}:{num}"))
    })
}

/// The CUDA roots to search, in order. `PGAS_CUDA_HOME`, when set, is the only one.
pub fn cuda_candidates(env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    if let Some(home) = env("PGAS_CUDA_HOME") {
        return vec![PathBuf::from(home)];
    }
    let mut out: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|k| env(k).map(PathBuf::from))
        .collect();
    out.push(PathBuf::from("/usr/local/cuda"));
    out.extend(python_nvidia_dirs().into_iter().map(|d| d.join("cu13")));
    out
}

/// Searches `candidates` for NVRTC and the headers; the first root with NVRTC wins.
pub fn find_cuda(candidates: &[PathBuf]) -> Result<CudaInstall> {
    for root in candidates {
        let Some(lib_dir) = LIB_SUBDIRS
            .iter()
            .map(|d| root.join(d))
            .find(|d| d.join(NVRTC_SONAME).is_file())
        else {
            continue;
        };
        let Some(include) = INCLUDE_SUBDIRS
            .iter()
            .map(|d| root.join(d))
            .find(|d| d.join("cuda_runtime.h").is_file())
        else {
            return Err(Error::HeadersMissing {
                what: "the CUDA headers (include/cuda_runtime.h)",
                searched: root.display().to_string(),
                hint: "NVRTC was found there but not the headers: install the CUDA runtime \
                       headers (the nvidia-cuda-runtime wheel) into the same root",
            });
        };
        let cccl_include = if include.join("cuda/std/type_traits").is_file() {
            None
        } else if include.join("cccl/cuda/std/type_traits").is_file() {
            Some(include.join("cccl"))
        } else {
            return Err(Error::HeadersMissing {
                what: "the CCCL headers (cuda/std/type_traits)",
                searched: format!("{0}, {0}/cccl", include.display()),
                hint: "install CCCL (the nvidia-cuda-cccl wheel) into the same CUDA root",
            });
        };
        return Ok(CudaInstall {
            root: root.clone(),
            lib_dir,
            include,
            cccl_include,
        });
    }
    let searched: Vec<String> = candidates
        .iter()
        .map(|r| format!("{}/{{{}}}", r.display(), LIB_SUBDIRS.join(",")))
        .collect();
    Err(Error::NvrtcMissing {
        searched: searched.join(", "),
    })
}

/// The directories of python3's `nvidia` namespace package (where NVIDIA's wheels unpack).
fn python_nvidia_dirs() -> Vec<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import nvidia, os; print(os.pathsep.join(nvidia.__path__))",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            std::env::split_paths(String::from_utf8_lossy(&o.stdout).trim())
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_location_from_line_directive() {
        let log = "src/ring.rs(12): warning #1: meh\nsrc/ring.rs(14): error: identifier \"x\" is undefined\n";
        assert_eq!(first_error_location(log).as_deref(), Some("src/ring.rs:14"));
        let log = "k.cu(1): catastrophic error: cannot open source file \"nope.h\"";
        assert_eq!(first_error_location(log).as_deref(), Some("k.cu:1"));
        assert_eq!(first_error_location("nvrtc: error: invalid value"), None);
    }

    #[test]
    fn link_time_modes() {
        assert_eq!(link_time(None).unwrap(), LinkTime::PointToPoint);
        assert_eq!(link_time(Some("on")).unwrap(), LinkTime::PointToPoint);
        assert_eq!(link_time(Some(" all ")).unwrap(), LinkTime::All);
        assert_eq!(link_time(Some("0")).unwrap(), LinkTime::Off);
        let e = link_time(Some("yes")).unwrap_err().to_string();
        assert!(e.contains("PGAS_JIT_LTO") && e.contains("all"), "{e}");
    }

    #[test]
    fn tier_switch() {
        assert!(tiers(None).unwrap() && tiers(Some(" on")).unwrap());
        assert!(!tiers(Some("off")).unwrap() && !tiers(Some("0")).unwrap());
        let e = tiers(Some("later")).unwrap_err().to_string();
        assert!(e.contains("PGAS_JIT_TIERS") && e.contains("off"), "{e}");
    }

    #[test]
    fn fast_compile_levels() {
        assert_eq!(fast_compile(None).unwrap(), None);
        assert_eq!(fast_compile(Some("off")).unwrap(), None);
        assert_eq!(fast_compile(Some("max")).unwrap().as_deref(), Some("max"));
        let e = fast_compile(Some("fast")).unwrap_err().to_string();
        assert!(
            e.contains("PGAS_JIT_FAST_COMPILE") && e.contains("min, mid or max"),
            "{e}"
        );
    }

    #[test]
    fn explicit_cuda_home_is_the_only_candidate() {
        let env = |k: &str| (k == "PGAS_CUDA_HOME").then(|| OsString::from("/x"));
        assert_eq!(cuda_candidates(&env), vec![PathBuf::from("/x")]);
    }

    #[test]
    fn empty_roots_mean_nvrtc_missing() {
        let dir = std::env::temp_dir().join(format!("pgas-empty-cuda-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = find_cuda(std::slice::from_ref(&dir)).unwrap_err();
        assert!(matches!(err, Error::NvrtcMissing { .. }), "{err}");
        assert!(
            err.to_string().contains(&dir.display().to_string()),
            "{err}"
        );
        assert!(err.to_string().contains("PGAS_CUDA_HOME"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn nvrtc_without_headers_is_headers_missing() {
        let dir = std::env::temp_dir().join(format!("pgas-nohdr-cuda-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join("lib").join(NVRTC_SONAME), b"").unwrap();
        let err = find_cuda(std::slice::from_ref(&dir)).unwrap_err();
        assert!(matches!(err, Error::HeadersMissing { .. }), "{err}");
        assert!(err.to_string().contains("cuda_runtime.h"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
