//! NVSHMEM's device API for kernels another compiler builds (Numba-CUDA, from Python's
//! `pgas.device.numba`): the pgas NVSHMEM library of the point-to-point and barrier rows
//! ([`nvcall::library`], the very functions link-time kernels call, `pgas_nv_<row>_<T>`) as
//! relocatable PTX that the other compiler links into its kernels. The module it loads must then
//! be readied for NVSHMEM: [`crate::Pgas::init_foreign_library`].

use crate::error::{Error, Result};
use crate::jit::disk::{DiskCache, Lookup};
use crate::jit::nvrtc::{self, Emit};
use crate::jit::toolchain::first_error_location;
use crate::jit::Toolchain;
use pgas_codegen::{nvcall, Prelude};

/// The name the library's compile errors and cache entry carry.
const NAME: &str = "pgas_device_library";

/// The library's wrappers: every NVSHMEM row of the point-to-point and barrier preludes, for
/// each element type (`pgas_nv_<row>_<T>`, with its C return type and parameters).
pub fn device_wrappers() -> Vec<nvcall::Wrapper> {
    nvcall::all_wrappers(Prelude::Barrier)
}

impl Toolchain {
    /// The pgas NVSHMEM library of the wrappers named in `wrappers` (of [`device_wrappers`]),
    /// with the module's NVSHMEM device state, as relocatable PTX for compute capability `arch`,
    /// from `disk` when it holds it (compiled and stored otherwise). Needs no GPU. A name that
    /// is no wrapper is [`Error::InvalidConfig`].
    pub fn device_library_ptx(
        &self, disk: Option<&DiskCache>, arch: (u32, u32), wrappers: &[&str],
    ) -> Result<String> {
        let known = device_wrappers();
        if let Some(bad) = wrappers
            .iter()
            .find(|w| !known.iter().any(|k| k.name == **w))
        {
            return Err(Error::InvalidConfig {
                name: "pgas device library",
                value: (*bad).to_owned(),
                reason: "no NVSHMEM wrapper of that name (pgas_nv_<row>_<T>, of the \
                         point-to-point and barrier rows of docs/dsl.md)"
                    .to_owned(),
            });
        }
        let source = nvcall::library_of(Prelude::Barrier, |name| wrappers.contains(&name));
        let options = self.relocatable_options(arch, "");
        let key = self.cache_key_with(&source, NAME, arch, &options);
        let ptx = match disk.map(|d| d.load_or_miss(&key)) {
            Some(Lookup::Hit(bytes)) => bytes,
            _ => {
                let out = nvrtc::compile(&source, &format!("{NAME}.cu"), &options, Emit::Ptx)?;
                let bytes = out.cubin.ok_or_else(|| Error::Compile {
                    kernel: "the pgas NVSHMEM library for other compilers (PTX)".to_owned(),
                    location: first_error_location(&out.log),
                    log: out.log,
                })?;
                if let Some(d) = disk {
                    d.store_or_warn(&key, &bytes);
                }
                bytes
            }
        };
        // NVRTC's PTX is text with a trailing NUL.
        let text = ptx.strip_suffix(&[0]).unwrap_or(&ptx);
        String::from_utf8(text.to_vec()).map_err(|_| Error::Compile {
            kernel: "the pgas NVSHMEM library for other compilers (PTX)".to_owned(),
            location: None,
            log: "NVRTC's PTX is not UTF-8 text".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::nvjitlink::Input;

    /// What Numba does with the library, with NVRTC standing in for Numba's NVVM: a kernel
    /// that calls wrappers by name (as `pgas.device.numba`'s intrinsics do), compiled to PTX,
    /// linked with the library's PTX into a CUBIN by nvJitLink. Needs NVRTC, NVSHMEM's headers
    /// and nvJitLink (CI's `scripts/deps.sh`); no GPU.
    #[test]
    fn library_ptx_links_into_a_callers_kernel() {
        let tc = Toolchain::discover().expect("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME");
        let dir = std::env::temp_dir().join(format!("pgas-foreign-{}", std::process::id()));
        let disk = DiskCache::open(&dir).unwrap();
        let used = [
            "pgas_nv_put_block_f32",
            "pgas_nv_signal_wait_until",
            "pgas_nv_barrier_all",
        ];
        let lib = tc.device_library_ptx(Some(&disk), (9, 0), &used).unwrap();
        for symbol in [
            "pgas_nv_put_block_f32(",
            "pgas_nv_signal_wait_until(",
            "pgas_nv_barrier_all(",
            "nvshmemi_device_state_d",
        ] {
            let line = lib.lines().find(|l| l.contains(symbol));
            assert!(
                line.is_some_and(|l| l.starts_with(".visible")),
                "the library's PTX lacks a visible {symbol}"
            );
        }
        let again = tc.device_library_ptx(Some(&disk), (9, 0), &used).unwrap();
        assert_eq!(lib, again, "the disk cache gives back what was compiled");
        let caller = r#"
extern "C" __device__ void pgas_nv_put_block_f32(float *, float *, size_t, int);
extern "C" __device__ unsigned long long pgas_nv_signal_wait_until(unsigned long long *, int,
                                                                   unsigned long long);
extern "C" __global__ void caller(float *d, float *s, unsigned long long *sig) {
    pgas_nv_put_block_f32(d, s, 4, 1);
    pgas_nv_signal_wait_until(sig, 0, 1);
}
"#;
        let mut options = tc.relocatable_options((9, 0), "");
        options.retain(|o| !o.starts_with("-I") && !o.starts_with("-D"));
        let out = nvrtc::compile(caller, "caller.cu", &options, Emit::Ptx).unwrap();
        let kernel = out.cubin.unwrap_or_else(|| panic!("{}", out.log));
        let kernel = kernel.strip_suffix(&[0]).unwrap_or(&kernel);
        let linker = tc.nvjitlink().expect("nvJitLink is found beside NVRTC");
        let t = std::time::Instant::now();
        let cubin = linker
            .link(
                &[
                    ("caller", kernel, Input::Ptx),
                    ("pgas_device_library", lib.as_bytes(), Input::Ptx),
                ],
                (9, 0),
                false,
                255,
                true,
            )
            .unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF");
        eprintln!("linked in {:.2} s", t.elapsed().as_secs_f64());
        assert!(
            !lib.contains("pgas_nv_get_block_f32("),
            "only the wrappers asked for are in the library"
        );
        let err = tc
            .device_library_ptx(None, (9, 0), &["pgas_nv_no_such_row"])
            .unwrap_err();
        assert!(err.to_string().contains("pgas_nv_no_such_row"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
