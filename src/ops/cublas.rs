//! cuBLAS, loaded at run time, with a small safe bf16 GEMM on row-major matrices.
//!
//! pgas does not link cuBLAS: cudarc opens it by name (`libcublas.so.13`, ...) on first use
//! (`dynamic-loading`). Where the loader's path lacks it, [`load`] opens libcublasLt and libcublas
//! by path from [`search_dirs`] (`PGAS_CUBLAS_DIR`, the CUDA toolkit, the `nvidia-cublas` wheel of
//! the `python3` on `PATH`), globally, so that cudarc's lookup by name finds the loaded library
//! (the loader matches a loaded library's soname). It happens once per process.
//!
//! ```no_run
//! use pgas::ops::cublas::{BLayout, Cublas};
//! use pgas::prelude::*;
//!
//! # fn main() -> pgas::Result<()> {
//! let pgas = pgas::init()?;
//! let (m, n, k) = (256, 128, 64);
//! let stream = pgas.stream();
//! let a = stream.clone_htod(&vec![bf16::ONE; m * k])?; // m x k, row-major
//! let bt = stream.clone_htod(&vec![bf16::ONE; n * k])?; // B transposed: n x k, row-major
//! let mut c = stream.alloc_zeros::<bf16>(m * n)?;
//! let blas = Cublas::new(pgas.cuda())?;
//! blas.gemm_bf16(stream, &mut c, &a, &bt, (m, n, k), BLayout::Transposed)?; // C = A Bt^T: 64s
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cudarc::cublas::result as blas;
use cudarc::cublas::sys::{self, cublasOperation_t};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;

use crate::{Error, Result};

/// Where libcublas came from, or why it could not be loaded: decided once per process.
static LOADED: OnceLock<std::result::Result<String, String>> = OnceLock::new();

/// Directories that may hold libcublas, in the order [`load`] tries them: `PGAS_CUBLAS_DIR`,
/// `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`,
/// `/usr/local/cuda/targets/x86_64-linux/lib`, then the `nvidia-cublas` wheel (PyTorch's
/// dependency) of the `python3` on `PATH`.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("PGAS_CUBLAS_DIR") {
        dirs.push(d.into());
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(Path::new(&d).join("lib64"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    let wheel = std::process::Command::new("python3")
        .args([
            "-c",
            "import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], 'lib'))",
        ])
        .output();
    if let Ok(out) = wheel {
        if out.status.success() {
            dirs.push(String::from_utf8_lossy(&out.stdout).trim().into());
        }
    }
    dirs
}

/// Makes libcublas loadable (see the module documentation) and says where it came from
/// ("found by the loader" or the file's path). The first call decides for the whole process.
///
/// # Errors
/// [`Error::Unavailable`] naming every directory looked in (and how to point pgas at cuBLAS)
/// when no libcublas loads.
pub fn load() -> Result<&'static str> {
    match LOADED.get_or_init(load_uncached) {
        Ok(from) => Ok(from),
        Err(why) => Err(Error::Unavailable {
            what: "cuBLAS",
            reason: format!(
                "{why}. Fix: set PGAS_CUBLAS_DIR to the directory holding libcublas.so.13 and \
                 libcublasLt.so.13 (a CUDA 13 toolkit's lib64, or `pip install nvidia-cublas`)"
            ),
        }),
    }
}

fn load_uncached() -> std::result::Result<String, String> {
    // SAFETY: only probes whether the library can be opened.
    if unsafe { sys::is_culib_present() } {
        return Ok("found by the loader".into());
    }
    let dirs = search_dirs();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        let pick = |prefix: &str| names.iter().rev().find(|n| n.starts_with(prefix)).cloned();
        let (Some(lt), Some(lib)) = (pick("libcublasLt.so"), pick("libcublas.so")) else {
            continue;
        };
        let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL;
        for name in [&lt, &lib] {
            // SAFETY: loading NVIDIA's libraries runs only their initializers.
            match unsafe { libloading::os::unix::Library::open(Some(dir.join(name)), flags) } {
                // Kept loaded for the life of the process: cudarc resolves symbols from it.
                Ok(l) => std::mem::forget(l),
                Err(e) => return Err(format!("{} did not load: {e}", dir.join(name).display())),
            }
        }
        // SAFETY: as above.
        if unsafe { sys::is_culib_present() } {
            return Ok(format!("{}", dir.join(lib).display()));
        }
    }
    Err(format!(
        "no libcublas on the loader's path or in {}",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// A cuBLAS handle on a CUDA context, for bf16 GEMMs on row-major matrices with f32 compute
/// (`cublasGemmEx`, `CUBLAS_COMPUTE_32F`). Each call names its stream. One handle serves one
/// thread at a time (it is `Send`, not `Sync`), as cuBLAS requires; give each stream that runs
/// GEMMs concurrently its own handle (they share the handle's workspace otherwise).
pub struct Cublas {
    handle: sys::cublasHandle_t,
    // Keeps the context alive as long as the handle.
    ctx: Arc<CudaContext>,
}

// SAFETY: a cuBLAS handle may move between threads; `&self` methods are not shared (no `Sync`).
unsafe impl Send for Cublas {}

crate::debug::debug_fields!(|_: Cublas| ..);

/// How [`Cublas::gemm_bf16`]'s B is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// Bt, n x k row-major: the layout of a linear layer's weight and of pgas's wgmma GEMM.
    Transposed,
    /// B, k x n row-major.
    Plain,
}

impl Cublas {
    /// Loads cuBLAS ([`load`]) and creates a handle on `ctx`.
    ///
    /// # Errors
    /// [`Error::Unavailable`] without cuBLAS, [`Error::Cublas`] when the handle cannot be made.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Cublas> {
        load()?;
        ctx.bind_to_thread().map_err(Error::from)?;
        let handle = blas::create_handle().map_err(|e| cublas_err("cublasCreate", e))?;
        Ok(Cublas {
            handle,
            ctx: ctx.clone(),
        })
    }

    /// `C = A · op(B)` on `stream`, all bf16, row-major, accumulated in f32: A is m x k, C
    /// m x n, and `b` is Bt (n x k: `op(B) = Bᵀ`, a linear layer's weight) or B (k x n) as
    /// `layout` says.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when a buffer does not hold its matrix exactly,
    /// [`Error::InvalidConfig`] for a zero or too large dimension, [`Error::Cublas`] when cuBLAS
    /// refuses.
    pub fn gemm_bf16(
        &self, stream: &CudaStream, c: &mut impl DevicePtrMut<bf16>, a: &impl DevicePtr<bf16>,
        b: &impl DevicePtr<bf16>, (m, n, k): (usize, usize, usize), layout: BLayout,
    ) -> Result<()> {
        let dims = dims((m, n, k))?;
        crate::ops::lengths::exactly(&[
            ("the GEMM's A (m x k)", a.len(), m * k),
            ("the GEMM's B (k x n)", b.len(), k * n),
            ("the GEMM's C (m x n)", c.len(), m * n),
        ])?;
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        // SAFETY: the lengths are checked above; cudarc orders the buffers on `stream` and the
        // guards above record their use until the GEMM is enqueued.
        unsafe { self.gemm_ex(stream, pc, pa, pb, dims, layout) }
    }

    /// [`Cublas::gemm_bf16`] with Bt ([`BLayout::Transposed`]) on raw device addresses, with no cudarc stream ordering: the
    /// caller orders the buffers' producers and consumers itself (events), which lets parts
    /// of one allocation be written on one stream while other parts are read on another
    /// (cudarc would order the whole allocation).
    ///
    /// # Safety
    /// `a`, `bt` and `c` hold at least `m * k`, `n * k` and `m * n` bf16 on this handle's
    /// device and stay valid until `stream` has run the GEMM; nothing else writes them
    /// meanwhile.
    pub unsafe fn gemm_bf16_nt_raw(
        &self, stream: &CudaStream, c: CUdeviceptr, a: CUdeviceptr, bt: CUdeviceptr,
        shape: (usize, usize, usize),
    ) -> Result<()> {
        let dims = dims(shape)?;
        // SAFETY: the caller's contract.
        unsafe { self.gemm_ex(stream, c, a, bt, dims, BLayout::Transposed) }
    }

    /// Row-major `C = A · op(B)` in cuBLAS's column-major terms: row-major C (m x n) is
    /// column-major Cᵀ (n x m), and `Cᵀ = op(B)ᵀ · Aᵀ`, so B goes first. Row-major A is
    /// column-major Aᵀ (k x m, leading dimension k), taken as is. Row-major Bt (n x k) is
    /// column-major B (k x n, ld k), transposed by cuBLAS ("TN", its fastest layout); row-major
    /// B (k x n) is column-major Bᵀ (n x k, ld n), taken as is.
    unsafe fn gemm_ex(
        &self, stream: &CudaStream, c: CUdeviceptr, a: CUdeviceptr, b: CUdeviceptr,
        (m, n, k): (i32, i32, i32), layout: BLayout,
    ) -> Result<()> {
        let (transa, lda) = match layout {
            BLayout::Transposed => (cublasOperation_t::CUBLAS_OP_T, k),
            BLayout::Plain => (cublasOperation_t::CUBLAS_OP_N, n),
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        self.ctx.bind_to_thread().map_err(Error::from)?;
        // SAFETY: the handle is live; the caller vouches for the buffers.
        unsafe {
            blas::set_stream(self.handle, stream.cu_stream() as _)
                .map_err(|e| cublas_err("cublasSetStream", e))?;
            blas::gemm_ex(
                self.handle,
                transa,
                cublasOperation_t::CUBLAS_OP_N,
                n,
                m,
                k,
                (&alpha as *const f32).cast(),
                b as *const _,
                sys::cudaDataType_t::CUDA_R_16BF,
                lda,
                a as *const _,
                sys::cudaDataType_t::CUDA_R_16BF,
                k,
                (&beta as *const f32).cast(),
                c as *mut _,
                sys::cudaDataType_t::CUDA_R_16BF,
                n,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
            .map_err(|e| cublas_err("cublasGemmEx", e))
        }
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: created in `new`, destroyed once; a failure leaves nothing to clean up.
        let _ = unsafe { blas::destroy_handle(self.handle) };
    }
}

/// The dimensions as cuBLAS's `int`s: each at least 1 and below 2^31.
fn dims((m, n, k): (usize, usize, usize)) -> Result<(i32, i32, i32)> {
    let one = |name: &'static str, v: usize| -> Result<i32> {
        match i32::try_from(v) {
            Ok(x) if x > 0 => Ok(x),
            _ => Err(Error::InvalidConfig {
                name,
                value: v.to_string(),
                reason: "a GEMM dimension must be at least 1 and below 2^31 (cuBLAS's int)".into(),
            }),
        }
    };
    Ok((one("GEMM m", m)?, one("GEMM n", n)?, one("GEMM k", k)?))
}

/// A cuBLASLt handle and workspace on a CUDA context, for FP8 GEMMs (the comparison of
/// `pgas::gemm::gemm_fp8`): `C = A · Btᵀ` with A (m x k) and Bt (n x k) `e4m3`, row-major, C
/// (m x n) bf16, f32 compute, unit scales, fast accumulation (the tensor cores' own, as
/// `wgmma` accumulates). cuBLASLt picks its algorithm by its default heuristics.
pub struct CublasLt {
    handle: cudarc::cublaslt::sys::cublasLtHandle_t,
    workspace: cudarc::driver::CudaSlice<u8>,
    _ctx: Arc<CudaContext>,
}

// SAFETY: a cuBLASLt handle may move between threads; `&self` methods are not shared.
unsafe impl Send for CublasLt {}

crate::debug::debug_fields!(|_: CublasLt| ..);

impl Drop for CublasLt {
    fn drop(&mut self) {
        // SAFETY: the handle is this value's, destroyed once.
        unsafe {
            let _ = cudarc::cublaslt::result::destroy_handle(self.handle);
        }
    }
}

/// Bytes of cuBLASLt's workspace (its guidance for Hopper: 32 MiB).
const LT_WORKSPACE: usize = 32 << 20;

impl CublasLt {
    /// Loads cuBLAS ([`load`], which opens libcublasLt too), creates a handle and a workspace
    /// on `stream`'s context.
    ///
    /// # Errors
    /// [`Error::Unavailable`] without cuBLAS, [`Error::Cublas`] when the handle cannot be made.
    pub fn new(stream: &Arc<CudaStream>) -> Result<CublasLt> {
        load()?;
        let ctx = stream.context().clone();
        ctx.bind_to_thread().map_err(Error::from)?;
        let handle = cudarc::cublaslt::result::create_handle().map_err(|e| Error::Cublas {
            call: "cublasLtCreate",
            status: format!("{e:?}"),
        })?;
        let workspace = stream
            .alloc_zeros::<u8>(LT_WORKSPACE)
            .map_err(Error::cuda("allocating cuBLASLt's workspace"))?;
        Ok(CublasLt {
            handle,
            workspace,
            _ctx: ctx,
        })
    }

    /// `C = A · Btᵀ` on `stream` in FP8 (see the type's documentation).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when a buffer does not hold its matrix, [`Error::Cublas`] when
    /// cuBLASLt refuses (it takes K a multiple of 16 and 16-byte aligned rows for FP8).
    pub fn gemm_fp8_e4m3_nt(
        &mut self, stream: &CudaStream, c: &mut impl DevicePtrMut<bf16>,
        a: &impl DevicePtr<crate::e4m3>, bt: &impl DevicePtr<crate::e4m3>,
        (m, n, k): (usize, usize, usize),
    ) -> Result<()> {
        use cudarc::cublaslt::result as lt;
        use cudarc::cublaslt::sys as ltsys;
        crate::ops::lengths::exactly(&[
            ("the FP8 GEMM's A (m x k)", a.len(), m * k),
            ("the FP8 GEMM's Bt (n x k)", bt.len(), n * k),
            ("the FP8 GEMM's C (m x n)", c.len(), m * n),
        ])?;
        let err = |call: &'static str| {
            move |e: lt::CublasError| Error::Cublas {
                call,
                status: format!("{e:?}"),
            }
        };
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = bt.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        let (pw, _rw) = self.workspace.device_ptr_mut(stream);
        // Column-major terms, as `Cublas::gemm_ex`: row-major C (m x n) is Cᵀ (n x m) =
        // Bt · Aᵀ; row-major Bt (n x k) is column-major k x n, transposed ("T"); row-major A
        // is column-major k x m, as is ("N"): the "TN" layout FP8 requires.
        let (e4m3, bf) = (
            ltsys::cudaDataType::CUDA_R_8F_E4M3,
            ltsys::cudaDataType::CUDA_R_16BF,
        );
        let layouts = [
            lt::create_matrix_layout(e4m3, k as u64, n as u64, k as i64),
            lt::create_matrix_layout(e4m3, k as u64, m as u64, k as i64),
            lt::create_matrix_layout(bf, n as u64, m as u64, n as i64),
        ];
        let desc = lt::create_matmul_desc(
            ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ltsys::cudaDataType::CUDA_R_32F,
        )
        .map_err(err("cublasLtMatmulDescCreate"))?;
        let result = (|| -> Result<()> {
            let [la, lb, lc] = [&layouts[0], &layouts[1], &layouts[2]].map(|l| l.as_ref().ok());
            let (Some(&la), Some(&lb), Some(&lc)) = (la, lb, lc) else {
                return Err(Error::Cublas {
                    call: "cublasLtMatrixLayoutCreate",
                    status: "a layout was refused".into(),
                });
            };
            let op_t = cublasOperation_t::CUBLAS_OP_T;
            let fast: i8 = 1;
            // SAFETY: the descriptor is live; each value has the attribute's type and size.
            unsafe {
                lt::set_matmul_desc_attribute(
                    desc,
                    ltsys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                    (&op_t as *const cublasOperation_t).cast(),
                    std::mem::size_of::<cublasOperation_t>(),
                )
                .map_err(err("cublasLtMatmulDescSetAttribute(TRANSA)"))?;
                lt::set_matmul_desc_attribute(
                    desc,
                    ltsys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                    (&fast as *const i8).cast(),
                    1,
                )
                .map_err(err("cublasLtMatmulDescSetAttribute(FAST_ACCUM)"))?;
            }
            let (alpha, beta) = (1.0f32, 0.0f32);
            // SAFETY: the lengths are checked above; cudarc orders the buffers on `stream` and
            // the guards record their use until the GEMM is enqueued; the layouts describe them.
            unsafe {
                lt::matmul(
                    self.handle,
                    desc,
                    (&alpha as *const f32).cast(),
                    (&beta as *const f32).cast(),
                    pb as *const std::ffi::c_void,
                    la,
                    pa as *const std::ffi::c_void,
                    lb,
                    pc as *const std::ffi::c_void,
                    lc,
                    pc as *mut std::ffi::c_void,
                    lc,
                    std::ptr::null(),
                    pw as *mut std::ffi::c_void,
                    LT_WORKSPACE,
                    stream.cu_stream() as ltsys::cudaStream_t,
                )
                .map_err(err("cublasLtMatmul"))
            }
        })();
        // SAFETY: created above, destroyed once.
        unsafe {
            let _ = lt::destroy_matmul_desc(desc);
            for l in layouts.into_iter().flatten() {
                let _ = lt::destroy_matrix_layout(l);
            }
        }
        result
    }
}

fn cublas_err(call: &'static str, e: blas::CublasError) -> Error {
    Error::Cublas {
        call,
        status: format!("{e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_must_fit_cublas_ints() {
        assert_eq!(dims((1, 2, 3)).unwrap(), (1, 2, 3));
        let e = dims((0, 2, 3)).unwrap_err().to_string();
        assert!(e.contains("GEMM m") && e.contains("at least 1"), "{e}");
        let e = dims((1, 1 << 31, 3)).unwrap_err().to_string();
        assert!(e.contains("GEMM n") && e.contains("2^31"), "{e}");
    }

    #[test]
    fn the_search_starts_at_pgas_cublas_dir() {
        // Only this test touches the variable in this process.
        std::env::set_var("PGAS_CUBLAS_DIR", "/nonexistent/cublas-here");
        let dirs = search_dirs();
        std::env::remove_var("PGAS_CUBLAS_DIR");
        assert_eq!(dirs[0], PathBuf::from("/nonexistent/cublas-here"));
        assert!(dirs.contains(&PathBuf::from("/usr/local/cuda/lib64")));
    }
}
