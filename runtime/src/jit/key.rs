//! The one home of the JIT's cache keys: how a source becomes the [`CacheKey`] its CUBIN is
//! cached (and its module loaded) under, for a kernel, a batch program and the NVSHMEM library.
//!
//! A key hashes every input that determines the CUBIN: the source, the kernel name, every NVRTC
//! option, the NVRTC and NVSHMEM versions and the architecture; a link-time kernel's options
//! also name the key of the library it links (and a collective kernel's, its objects'
//! options). The build makes each kernel's key once, when it
//! plans ([`Keyed`]), and the key travels with the source from there.

use sha2::{Digest, Sha256};

use super::disk::{CacheKey, MAGIC};
use super::source::Source;
use super::toolchain::{Toolchain, LIBRARY};
use pgas_codegen::{nvcall, Prelude};

/// The kernel name a batch program's key is computed with.
pub(crate) const BATCH_KEY_NAME: &str = "pgas_batch";

impl CacheKey {
    /// Hashes every input that determines a CUBIN.
    pub fn new(
        source: &str, kernel_name: &str, options: &[String], nvrtc_version: (i32, i32),
        nvshmem_version: &str, arch: (u32, u32),
    ) -> CacheKey {
        let mut h = Sha256::new();
        // Length-prefix each field so no two different inputs hash the same byte stream.
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(MAGIC);
        field(source.as_bytes());
        field(kernel_name.as_bytes());
        for o in options {
            field(o.as_bytes());
        }
        field(format!("nvrtc {}.{}", nvrtc_version.0, nvrtc_version.1).as_bytes());
        field(format!("nvshmem {nvshmem_version}").as_bytes());
        field(format!("sm_{}{}", arch.0, arch.1).as_bytes());
        CacheKey::from_hash(h.finalize().into())
    }
}

/// What a link-time kernel links beside its own code ([`Toolchain::link_inputs`]).
pub(crate) struct LinkInputs {
    /// The prelude of the NVSHMEM library the kernel links (`nvcall::library_prelude`).
    pub prelude: Prelude,
    /// The key of that library.
    pub library: CacheKey,
    /// NVSHMEM's collectives the kernel calls, as objects, with their keys.
    pub objects: Vec<(nvcall::CollectiveObject, CacheKey)>,
    /// The register cap the objects are built for.
    pub registers: u32,
}

/// One specialization the build wants, with its key: made once, when the build plans, and
/// carried through the compile and the cache's links.
pub(crate) struct Keyed {
    /// Its position among the build's wants.
    pub index: usize,
    pub src: Source,
    pub key: CacheKey,
}

impl Toolchain {
    /// The disk-cache key of `source` compiled as `kernel_name` for `arch`: it covers every NVRTC
    /// option and the NVRTC and NVSHMEM versions.
    pub fn cache_key(&self, source: &str, kernel_name: &str, arch: (u32, u32)) -> CacheKey {
        let options = match self.links(source) {
            // The linked image also depends on the library: its key stands for it.
            Some(prelude) => {
                let mut o = self.lto_options(arch, source);
                let lib = self.library_key(nvcall::library_prelude(prelude), arch);
                o.push(format!("link {:02x?}", lib.as_bytes()));
                // The collective objects: their sources are the kernel's wrappers; their
                // options (the register cap, `--Ofast-compile`) are these.
                if prelude == Prelude::Full {
                    let regs = nvcall::register_cap(source);
                    o.push(format!(
                        "objects {}",
                        self.object_options(arch, regs).join(" ")
                    ));
                }
                o
            }
            None => self.options(arch, source),
        };
        self.cache_key_with(source, kernel_name, arch, &options)
    }

    /// The key of one specialization, compiled on its own under its own symbol.
    pub(crate) fn keyed(&self, index: usize, src: Source, arch: (u32, u32)) -> Keyed {
        let key = self.cache_key(&src.text, &src.cuda_name, arch);
        Keyed { index, src, key }
    }

    /// The key of a batch program (several specializations as one NVRTC program).
    pub(crate) fn batch_key(&self, program: &str, arch: (u32, u32)) -> CacheKey {
        self.cache_key(program, BATCH_KEY_NAME, arch)
    }

    /// The disk-cache key of the NVSHMEM library of `prelude` on `arch`.
    pub(crate) fn library_key(&self, prelude: Prelude, arch: (u32, u32)) -> CacheKey {
        let mut keys = self.library_keys.lock().unwrap_or_else(|e| e.into_inner());
        *keys.entry((prelude, arch)).or_insert_with(|| {
            let source = nvcall::library(prelude);
            self.cache_key_with(&source, LIBRARY, arch, &self.lto_options(arch, ""))
        })
    }

    /// What a link-time compile of `source` (of `prelude`, as [`Toolchain::links`] says) links
    /// beside its own LTO-IR: the key of the NVSHMEM library of its prelude, and each
    /// collective object with its key and register cap.
    pub(crate) fn link_inputs(
        &self, prelude: Prelude, source: &str, arch: (u32, u32),
    ) -> LinkInputs {
        let library_prelude = nvcall::library_prelude(prelude);
        let library = self.library_key(library_prelude, arch);
        let registers = nvcall::register_cap(source);
        let objects = nvcall::collective_objects(source)
            .into_iter()
            .map(|o| {
                let key = self.object_key(&o, arch, registers);
                (o, key)
            })
            .collect();
        LinkInputs {
            prelude: library_prelude,
            library,
            objects,
            registers,
        }
    }

    /// The disk-cache key of a collective object with at most `registers` registers a thread:
    /// what the link of a kernel calling that collective looks for, and what a helper given the
    /// object ([`super::helpers::Job::object`]) stores it under.
    pub fn object_key(
        &self, object: &nvcall::CollectiveObject, arch: (u32, u32), registers: u32,
    ) -> CacheKey {
        let options = self.object_options(arch, registers);
        self.cache_key_with(&object.source, &object.name, arch, &options)
    }

    /// The cache key of `source` compiled with `options`.
    pub(crate) fn cache_key_with(
        &self, source: &str, kernel_name: &str, arch: (u32, u32), options: &[String],
    ) -> CacheKey {
        CacheKey::new(
            source,
            kernel_name,
            options,
            self.nvrtc_version(),
            self.nvshmem_version(),
            arch,
        )
    }
}
