//! nvJitLink, loaded at run time from the CUDA library directory: links a kernel's LTO-IR with
//! the pgas NVSHMEM library's, and a collective kernel's NVSHMEM collectives as machine code,
//! into one CUBIN (docs/jit.md, "Link-time compiles"). cudarc has no
//! binding for it; these are the handful of entry points of `nvJitLink.h` (CUDA 13), called by
//! the versioned names its inline wrappers call.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// File name of the library (CUDA 13).
pub(crate) const NVJITLINK_SONAME: &str = "libnvJitLink.so.13";

type Handle = *mut c_void;

/// What a link input is (`nvJitLinkInputType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// NVVM's LTO-IR (a link-time kernel, the pgas NVSHMEM library), optimized in the link.
    LtoIr = 3,
    /// A relocatable CUBIN (a collective object), machine code the link only places.
    Cubin = 1,
    /// PTX (the first step's output in [`NvJitLink::link`]).
    Ptx = 2,
}

/// The symbols NVSHMEM's module initialization looks up, which the first step of a two-step
/// link must keep though nothing in it uses them.
const KEPT_VARIABLES: [&str; 2] = ["nvshmemi_device_state_d", "nvshmemi_device_lib_version_d"];

/// The loaded library and its entry points.
pub(crate) struct NvJitLink {
    path: PathBuf,
    create: unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Handle) -> c_int,
    add_data: unsafe extern "C" fn(Handle, c_int, *const c_void, usize, *const c_char) -> c_int,
    complete: unsafe extern "C" fn(Handle) -> c_int,
    cubin_size: unsafe extern "C" fn(Handle, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(Handle, *mut c_void) -> c_int,
    ptx_size: unsafe extern "C" fn(Handle, *mut usize) -> c_int,
    ptx: unsafe extern "C" fn(Handle, *mut c_void) -> c_int,
    error_log_size: unsafe extern "C" fn(Handle, *mut usize) -> c_int,
    error_log: unsafe extern "C" fn(Handle, *mut c_char) -> c_int,
    // Keeps the entry points valid.
    _lib: libloading::Library,
}

impl std::fmt::Debug for NvJitLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NvJitLink({})", self.path.display())
    }
}

/// What a link run returns.
#[derive(Clone, Copy)]
enum Output {
    Cubin,
    Ptx,
}

/// Destroys a link however it ends.
struct Link<'a> {
    lib: &'a NvJitLink,
    handle: Handle,
}

impl Drop for Link<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvJitLinkCreate and is destroyed once.
        unsafe { (self.lib.destroy)(&mut self.handle) };
    }
}

impl NvJitLink {
    /// Loads `libnvJitLink.so.13` from the first of `dirs` that has it.
    pub(crate) fn load(dirs: &[&Path]) -> Result<NvJitLink> {
        let path = dirs
            .iter()
            .map(|d| d.join(NVJITLINK_SONAME))
            .find(|p| p.is_file())
            .ok_or_else(|| Error::NvrtcMissing {
                searched: format!(
                    "{NVJITLINK_SONAME} in {}",
                    dirs.iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
        let fail = |e: libloading::Error| Error::NvrtcMissing {
            searched: format!("{} ({e})", path.display()),
        };
        // SAFETY: nvJitLink's initializers have no preconditions.
        let lib = unsafe { libloading::Library::new(&path) }.map_err(fail)?;
        // SAFETY: each symbol is looked up with the signature nvJitLink.h (13.0) declares.
        unsafe {
            Ok(NvJitLink {
                create: *lib.get(b"__nvJitLinkCreate_13_0\0").map_err(fail)?,
                destroy: *lib.get(b"__nvJitLinkDestroy_13_0\0").map_err(fail)?,
                add_data: *lib.get(b"__nvJitLinkAddData_13_0\0").map_err(fail)?,
                complete: *lib.get(b"__nvJitLinkComplete_13_0\0").map_err(fail)?,
                cubin_size: *lib
                    .get(b"__nvJitLinkGetLinkedCubinSize_13_0\0")
                    .map_err(fail)?,
                cubin: *lib.get(b"__nvJitLinkGetLinkedCubin_13_0\0").map_err(fail)?,
                ptx_size: *lib
                    .get(b"__nvJitLinkGetLinkedPtxSize_13_0\0")
                    .map_err(fail)?,
                ptx: *lib.get(b"__nvJitLinkGetLinkedPtx_13_0\0").map_err(fail)?,
                error_log_size: *lib
                    .get(b"__nvJitLinkGetErrorLogSize_13_0\0")
                    .map_err(fail)?,
                error_log: *lib.get(b"__nvJitLinkGetErrorLog_13_0\0").map_err(fail)?,
                _lib: lib,
                path,
            })
        }
    }

    /// Where it was loaded from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Links `inputs` (name, bytes, kind) into a CUBIN for `arch` (its architecture-specific
    /// form, `sm_90a`, with `specific`), optimizing the LTO-IR ones as one module.
    ///
    /// With machine-code inputs (collective objects) beside LTO-IR, nvJitLink keeps and compiles
    /// every function of the LTO-IR (the whole NVSHMEM library), since the objects might call
    /// any. So that link takes two steps: the LTO-IR alone to PTX (the kernel and what it uses,
    /// with NVSHMEM's state kept), then that PTX with the objects to the CUBIN (docs/jit.md,
    /// "Collective objects", has the times).
    ///
    /// The machine code of that second step keeps to `registers` a thread: the cap the objects
    /// were built for (`nvcall::register_cap`), which the kernel's own code must keep to as
    /// well, or a kernel without a bound may not run the blocks the cap promises.
    ///
    /// `optimize` false links at nvJitLink's `-O0` (no optimization of the LTO-IR, ptxas at
    /// `-O0`): for checks of what links, never for code that runs (`Toolchain::with_unoptimized_link`).
    pub(crate) fn link(
        &self, inputs: &[(&str, &[u8], Input)], arch: (u32, u32), specific: bool, registers: u32,
        optimize: bool,
    ) -> Result<Vec<u8>> {
        let suffix = if specific { "a" } else { "" };
        let mut base = vec![format!("-arch=sm_{}{}{suffix}", arch.0, arch.1)];
        if !optimize {
            base.push("-O0".to_owned());
        }
        let (lto, objects): (Vec<_>, Vec<_>) = inputs
            .iter()
            .partition(|(_, _, kind)| *kind == Input::LtoIr);
        if objects.is_empty() {
            let opts = [&base[..], &["-lto".to_owned()]].concat();
            return self.run(&opts, inputs, Output::Cubin);
        }
        if lto.is_empty() {
            // PTX and machine code only (another compiler's kernel and the pgas NVSHMEM
            // library for it, `jit::foreign`): one step.
            return self.run(&base, inputs, Output::Cubin);
        }
        let mut opts = [&base[..], &["-lto".to_owned(), "-ptx".to_owned()]].concat();
        opts.extend(KEPT_VARIABLES.map(|v| format!("-variables-used={v}")));
        // NUL-terminated, as `run` passes PTX.
        let ptx = self.run(&opts, &lto, Output::Ptx)?;
        let mut second = vec![("linked LTO-IR", &ptx[..], Input::Ptx)];
        second.extend(objects);
        let cap = format!("-maxrregcount={registers}");
        self.run(&[&base[..], &[cap]].concat(), &second, Output::Cubin)
    }

    /// One nvJitLink run with `opts` over `inputs`, returning what `output` names.
    fn run(
        &self, opts: &[String], inputs: &[(&str, &[u8], Input)], output: Output,
    ) -> Result<Vec<u8>> {
        let opts: Vec<CString> = opts
            .iter()
            .map(|o| CString::new(o.as_str()).expect("no NUL in the options"))
            .collect();
        let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut link = Link {
            lib: self,
            handle: std::ptr::null_mut(),
        };
        // SAFETY: options are NUL-terminated and outlive the call.
        let rc = unsafe { (self.create)(&mut link.handle, ptrs.len() as u32, ptrs.as_ptr()) };
        self.check("nvJitLinkCreate", rc, &link)?;
        for (name, data, kind) in inputs {
            let cname = CString::new(*name).expect("no NUL in input names");
            // PTX goes in as a C string: nvJitLink reads it past the given size to its NUL (an
            // input without one failed now and then with "does not match type PTX").
            let terminated;
            let data: &[u8] = if *kind == Input::Ptx && data.last() != Some(&0) {
                terminated = [*data, &[0u8][..]].concat();
                &terminated
            } else {
                data
            };
            // SAFETY: data and name outlive the call; nvJitLink copies the input.
            let rc = unsafe {
                (self.add_data)(
                    link.handle,
                    *kind as c_int,
                    data.as_ptr().cast(),
                    data.len(),
                    cname.as_ptr(),
                )
            };
            self.check("nvJitLinkAddData", rc, &link)?;
        }
        // SAFETY: a live handle.
        let rc = unsafe { (self.complete)(link.handle) };
        self.check("nvJitLinkComplete", rc, &link)?;
        let (size_of, get, names) = match output {
            Output::Cubin => (
                self.cubin_size,
                self.cubin,
                ["nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedCubin"],
            ),
            Output::Ptx => (
                self.ptx_size,
                self.ptx,
                ["nvJitLinkGetLinkedPtxSize", "nvJitLinkGetLinkedPtx"],
            ),
        };
        let mut size = 0usize;
        // SAFETY: a completed link; the buffer is sized by nvJitLink.
        let rc = unsafe { size_of(link.handle, &mut size) };
        self.check(names[0], rc, &link)?;
        let mut out = vec![0u8; size];
        // SAFETY: `out` holds the `size` bytes nvJitLink just reported.
        let rc = unsafe { get(link.handle, out.as_mut_ptr().cast()) };
        self.check(names[1], rc, &link)?;
        Ok(out)
    }

    fn check(&self, call: &'static str, rc: c_int, link: &Link) -> Result<()> {
        if rc == 0 {
            return Ok(());
        }
        let mut log = String::new();
        if !link.handle.is_null() {
            let mut size = 0usize;
            // SAFETY: a live handle; the buffer is sized by nvJitLink.
            if unsafe { (self.error_log_size)(link.handle, &mut size) } == 0 && size > 0 {
                let mut buf = vec![0u8; size];
                // SAFETY: `buf` holds the `size` bytes nvJitLink just reported.
                if unsafe { (self.error_log)(link.handle, buf.as_mut_ptr().cast()) } == 0 {
                    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                    log = String::from_utf8_lossy(&buf[..end]).trim_end().to_owned();
                }
            }
        }
        Err(Error::Nvrtc {
            call,
            detail: format!(
                "nvJitLink error {rc}{}{log}",
                if log.is_empty() { "" } else { ": " }
            ),
        })
    }
}
