//! NVRTC itself: loading the library by absolute path and running one compilation through
//! cudarc's raw `sys` layer (its safe layer has no CUBIN output).

use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cudarc::nvrtc::sys;

use crate::error::{Error, Result};

/// File name of the NVRTC library (CUDA 13).
pub(crate) const NVRTC_SONAME: &str = "libnvrtc.so.13";
/// The builtins library NVRTC loads by name while compiling; loading it first from the same
/// directory means it need not be on `LD_LIBRARY_PATH`.
const NVRTC_BUILTINS: &str = "libnvrtc-builtins.so.13.0";

/// The directory NVRTC was loaded from, once it has been (a process holds one NVRTC).
static LOADED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Loads NVRTC from `lib_dir` (once per process) and returns its version.
///
/// cudarc opens NVRTC by soname and panics when that fails; opening it here first by absolute
/// path with `RTLD_GLOBAL` makes cudarc's lookup find the already-loaded library, and
/// `is_culib_present` is checked so no cudarc call can reach its panic.
pub(crate) fn load(lib_dir: &Path) -> Result<(i32, i32)> {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if loaded.is_none() {
        let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL;
        for name in [NVRTC_BUILTINS, NVRTC_SONAME] {
            let path = lib_dir.join(name);
            // SAFETY: NVRTC's initializers have no preconditions; the library stays loaded for
            // the life of the process (cudarc keeps using it), hence the forget.
            match unsafe { libloading::os::unix::Library::open(Some(&path), flags) } {
                Ok(lib) => std::mem::forget(lib),
                Err(e) => {
                    return Err(Error::NvrtcMissing {
                        searched: format!("{} ({e})", path.display()),
                    })
                }
            }
        }
        // SAFETY: only probes dlopen by name.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NvrtcMissing {
                searched: format!(
                    "{} (loaded, but not found again by soname)",
                    lib_dir.display()
                ),
            });
        }
        *loaded = Some(lib_dir.to_path_buf());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (above); out-pointers are valid.
    check("nvrtcVersion", unsafe {
        sys::nvrtcVersion(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

/// The architectures this NVRTC can compile for, as `major * 10 + minor`.
pub(crate) fn supported_archs() -> Result<Vec<i32>> {
    let mut n: c_int = 0;
    // SAFETY: NVRTC is loaded (a Toolchain exists only after `load`); buffers sized by NVRTC.
    check("nvrtcGetNumSupportedArchs", unsafe {
        sys::nvrtcGetNumSupportedArchs(&mut n)
    })?;
    let mut archs = vec![0; n.max(0) as usize];
    // SAFETY: `archs` holds the `n` entries NVRTC just reported.
    check("nvrtcGetSupportedArchs", unsafe {
        sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
    })?;
    Ok(archs)
}

/// What a compilation hands back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Emit {
    /// Machine code (`nvrtcGetCUBIN`).
    Cubin,
    /// NVVM LTO-IR for nvJitLink (`-dlto` among the options, `nvrtcGetLTOIR`).
    LtoIr,
    /// PTX text (`nvrtcGetPTX`), for another compiler's linker.
    Ptx,
}

/// What one NVRTC compilation produced: the [`Emit`] asked for (in `cubin`, whatever its
/// kind) when it succeeded, and the log either way.
pub(crate) struct Output {
    pub cubin: Option<Vec<u8>>,
    pub log: String,
}

/// `nvrtcGetCUBINSize` and its kin.
type SizeFn = unsafe fn(sys::nvrtcProgram, *mut usize) -> sys::nvrtcResult;
/// `nvrtcGetCUBIN` and its kin.
type GetFn = unsafe fn(sys::nvrtcProgram, *mut c_char) -> sys::nvrtcResult;

/// Destroys the program however compilation ends.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed once.
        unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

/// Compiles `source` (named `name` in diagnostics) with `options`, returning what `emit` asks
/// for.
pub(crate) fn compile(source: &str, name: &str, options: &[String], emit: Emit) -> Result<Output> {
    let nul = |what: &'static str| Error::Nvrtc {
        call: "nvrtcCreateProgram",
        detail: format!("the {what} contains a NUL byte"),
    };
    let src = CString::new(source).map_err(|_| nul("source"))?;
    let cname = CString::new(name).map_err(|_| nul("program name"))?;
    let opts = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| nul("options"))?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();

    let mut prog = Program(std::ptr::null_mut());
    // SAFETY: all strings are NUL-terminated and outlive the calls; NVRTC is loaded.
    unsafe {
        check(
            "nvrtcCreateProgram",
            sys::nvrtcCreateProgram(
                &mut prog.0,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            ),
        )?;
        let status = sys::nvrtcCompileProgram(prog.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr());
        let log = program_log(prog.0)?;
        match status {
            sys::nvrtcResult::NVRTC_SUCCESS => {}
            sys::nvrtcResult::NVRTC_ERROR_COMPILATION
            | sys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION => {
                return Ok(Output {
                    cubin: None,
                    log: if log.is_empty() {
                        describe(status)
                    } else {
                        log
                    },
                })
            }
            other => check("nvrtcCompileProgram", other).map(|_| ())?,
        }
        let mut size = 0usize;
        let (size_of, get, [size_call, get_call]): (SizeFn, GetFn, _) = match emit {
            Emit::Cubin => (
                sys::nvrtcGetCUBINSize,
                sys::nvrtcGetCUBIN,
                ["nvrtcGetCUBINSize", "nvrtcGetCUBIN"],
            ),
            Emit::LtoIr => (
                sys::nvrtcGetLTOIRSize,
                sys::nvrtcGetLTOIR,
                ["nvrtcGetLTOIRSize", "nvrtcGetLTOIR"],
            ),
            Emit::Ptx => (
                sys::nvrtcGetPTXSize,
                sys::nvrtcGetPTX,
                ["nvrtcGetPTXSize", "nvrtcGetPTX"],
            ),
        };
        check(size_call, size_of(prog.0, &mut size))?;
        let mut cubin = vec![0u8; size];
        check(get_call, get(prog.0, cubin.as_mut_ptr().cast()))?;
        Ok(Output {
            cubin: Some(cubin),
            log,
        })
    }
}

/// The program's log, without its trailing NUL.
unsafe fn program_log(prog: sys::nvrtcProgram) -> Result<String> {
    let mut size = 0usize;
    // SAFETY: `prog` is a live program (the caller's contract); `size` is a valid out-pointer.
    check("nvrtcGetProgramLogSize", unsafe {
        sys::nvrtcGetProgramLogSize(prog, &mut size)
    })?;
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: `buf` holds the `size` bytes NVRTC just said the log takes.
    check("nvrtcGetProgramLog", unsafe {
        sys::nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast())
    })?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).trim_end().to_owned())
}

fn describe(status: sys::nvrtcResult) -> String {
    // SAFETY: nvrtcGetErrorString returns a static string for every status.
    let s = unsafe { std::ffi::CStr::from_ptr(sys::nvrtcGetErrorString(status)) };
    s.to_string_lossy().into_owned()
}

fn check(call: &'static str, status: sys::nvrtcResult) -> Result<()> {
    if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::Nvrtc {
            call,
            detail: describe(status),
        })
    }
}
