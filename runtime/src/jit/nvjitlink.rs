//! nvJitLink, loaded at run time from the CUDA library directory: links a kernel's LTO-IR with
//! the pgas NVSHMEM library's into one CUBIN (docs/jit.md, "Link-time compile"). cudarc has no
//! binding for it; these are the handful of entry points of `nvJitLink.h` (CUDA 13), called by
//! the versioned names its inline wrappers call.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// File name of the library (CUDA 13).
pub(crate) const NVJITLINK_SONAME: &str = "libnvJitLink.so.13";

type Handle = *mut c_void;
/// `NVJITLINK_INPUT_LTOIR`.
const INPUT_LTOIR: c_int = 3;

/// The loaded library and its entry points.
pub(crate) struct NvJitLink {
    path: PathBuf,
    create: unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Handle) -> c_int,
    add_data: unsafe extern "C" fn(Handle, c_int, *const c_void, usize, *const c_char) -> c_int,
    complete: unsafe extern "C" fn(Handle) -> c_int,
    cubin_size: unsafe extern "C" fn(Handle, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(Handle, *mut c_void) -> c_int,
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

    /// Links LTO-IR `inputs` (name, bytes) into a CUBIN for `arch` with link-time optimization.
    pub(crate) fn link(&self, inputs: &[(&str, &[u8])], arch: (u32, u32)) -> Result<Vec<u8>> {
        let opts = [format!("-arch=sm_{}{}", arch.0, arch.1), "-lto".to_owned()];
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
        for (name, data) in inputs {
            let cname = CString::new(*name).expect("no NUL in input names");
            // SAFETY: data and name outlive the call; nvJitLink copies the input.
            let rc = unsafe {
                (self.add_data)(
                    link.handle,
                    INPUT_LTOIR,
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
        let mut size = 0usize;
        // SAFETY: a completed link; the buffer is sized by nvJitLink.
        let rc = unsafe { (self.cubin_size)(link.handle, &mut size) };
        self.check("nvJitLinkGetLinkedCubinSize", rc, &link)?;
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` holds the `size` bytes nvJitLink just reported.
        let rc = unsafe { (self.cubin)(link.handle, cubin.as_mut_ptr().cast()) };
        self.check("nvJitLinkGetLinkedCubin", rc, &link)?;
        Ok(cubin)
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
