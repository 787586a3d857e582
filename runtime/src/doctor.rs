//! `pgas doctor`: what this machine has for pgas, and the exact fix for each missing piece.
//! Runs anywhere, including machines without a GPU (it says so).

use std::fmt;
use std::path::PathBuf;

use cudarc::driver::{result as cu, sys as cusys};

use crate::bootstrap;
use crate::heap;
use crate::nvshmem::{self, version, Nvshmem};

/// How one check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Present and usable.
    Ok,
    /// Usable, but worth a look.
    Warn,
    /// Missing or broken: pgas cannot run kernels until it is fixed.
    Missing,
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do, when not [`Status::Ok`].
    pub fix: Option<String>,
}

/// Everything `pgas doctor` found.
#[derive(Clone, Debug)]
pub struct Report {
    /// The checks, in display order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether nothing is [`Status::Missing`].
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Missing)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "pgas doctor")?;
        for c in &self.checks {
            let tag = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Missing => "MISSING",
            };
            writeln!(f, "  [{tag:>7}] {}: {}", c.name, c.detail)?;
            if let Some(fix) = &c.fix {
                writeln!(
                    f,
                    "            fix: {}",
                    fix.replace('\n', "\n                 ")
                )?;
            }
        }
        if self.ready() {
            writeln!(f, "Everything pgas needs is here.")
        } else {
            writeln!(f, "Some pieces are missing; pgas builds and compiles kernels without them but cannot run them.")
        }
    }
}

fn ok(name: &'static str, detail: impl Into<String>) -> Check {
    Check {
        name,
        status: Status::Ok,
        detail: detail.into(),
        fix: None,
    }
}

fn bad(
    name: &'static str, status: Status, detail: impl Into<String>, fix: impl Into<String>,
) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

/// Runs every check.
pub fn run() -> Report {
    let mut checks = cuda_checks();
    checks.push(nvrtc_check());
    checks.push(nvshmem_check());
    checks.push(remote_transport_check());
    checks.push(mpi_check());
    checks.push(ok(
        "bootstrap",
        format!("init() would use {}", bootstrap::describe_auto()),
    ));
    checks.extend(env_checks());
    checks.push(jit_helpers_check());
    Report { checks }
}

/// Whether this program's JIT builds start helper processes (`crate::jit::helpers`).
fn jit_helpers_check() -> Check {
    const NAME: &str = "JIT helpers";
    let count = crate::jit::helpers::helper_count(1);
    match crate::jit::helpers::helper_exe() {
        Some(exe) if count > 0 => ok(
            NAME,
            format!(
                "up to {count} `pgas jit-helper` process(es) compile beside a build of several \
                 programs ({})",
                exe.display()
            ),
        ),
        Some(_) => ok(NAME, "off (PGAS_JIT_HELPERS=0, or one CPU)"),
        None if std::env::var_os("PGAS_JIT_HELPER").is_some_and(|v| v == "off") => {
            ok(NAME, "off (PGAS_JIT_HELPER=off)")
        }
        None => bad(
            NAME,
            Status::Warn,
            "no `pgas` CLI beside this program or on PATH: a cold build compiles its NVRTC \
             programs one at a time",
            "`cargo install pgas` (or build the pgas package's binaries beside your program), or \
             set PGAS_JIT_HELPER to the pgas CLI",
        ),
    }
}

fn cuda_checks() -> Vec<Check> {
    // SAFETY: only probes dlopen; cudarc panics on a missing driver, so check first.
    if !unsafe { cusys::is_culib_present() } {
        return vec![bad(
            "NVIDIA driver",
            Status::Missing,
            "libcuda.so.1 not found: this machine has no NVIDIA driver, so no GPU to run on",
            "run on a machine with an NVIDIA GPU and its driver installed (libcuda.so.1 on the loader path)",
        )];
    }
    if let Err(e) = cu::init() {
        return vec![bad(
            "NVIDIA driver",
            Status::Missing,
            format!("cuInit failed: {e}"),
            "check `nvidia-smi`; CUDA_ERROR_NO_DEVICE means no GPU is visible (CUDA_VISIBLE_DEVICES?)",
        )];
    }
    let mut v = 0;
    // SAFETY: the driver library is present (checked above); `v` is a live local.
    let _ = unsafe { cusys::cuDriverGetVersion(&mut v) };
    let mut checks = vec![ok(
        "NVIDIA driver",
        format!("CUDA driver API {}.{}", v / 1000, (v % 1000) / 10),
    )];
    let count = cu::device::get_count().unwrap_or(0);
    if count == 0 {
        checks.push(bad(
            "GPUs",
            Status::Missing,
            "none visible",
            "check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        ));
    }
    for i in 0..count {
        checks.push(match describe_gpu(i) {
            Ok(d) => ok("GPU", format!("{i}: {d}")),
            Err(e) => bad(
                "GPU",
                Status::Warn,
                format!("{i}: cannot query ({e})"),
                "check `nvidia-smi`",
            ),
        });
    }
    checks
}

fn describe_gpu(ordinal: i32) -> Result<String, cu::DriverError> {
    use cusys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as MAJOR,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as MINOR,
    };
    let dev = cu::device::get(ordinal)?;
    let name = cu::device::get_name(dev)?;
    // SAFETY: `dev` is a device handle the driver just returned.
    let mem = unsafe { cu::device::total_mem(dev)? };
    // SAFETY: as above; both attributes exist on every device.
    let (major, minor) = unsafe {
        (
            cu::device::get_attribute(dev, MAJOR)?,
            cu::device::get_attribute(dev, MINOR)?,
        )
    };
    Ok(format!(
        "{name}, sm_{major}{minor}, {:.0} GiB",
        mem as f64 / (1u64 << 30) as f64
    ))
}

fn nvrtc_check() -> Check {
    // The JIT's own discovery, so doctor reports exactly what a launch would find.
    match crate::jit::Toolchain::discover() {
        Ok(tc) => {
            let (major, minor) = tc.nvrtc_version();
            let link = match tc.linker() {
                Some(path) => format!(
                    "; {} kernels link with nvJitLink ({})",
                    if tc.links_collectives() {
                        "point-to-point, barrier, sm_90a and collective"
                    } else {
                        "point-to-point, barrier and sm_90a"
                    },
                    path.display()
                ),
                None => "; every kernel compiles against NVSHMEM's headers (PGAS_JIT_LTO=off, or \
                         no libnvJitLink.so.13 beside NVRTC: first compiles take ~1.2 s instead of \
                         ~0.2 s)"
                    .to_owned(),
            };
            ok(
                "NVRTC",
                format!("{major}.{minor} in {}{link}", tc.cuda().lib_dir.display()),
            )
        }
        Err(e) => bad(
            "NVRTC",
            Status::Missing,
            "the JIT cannot compile kernels here",
            e.to_string(),
        ),
    }
}

fn nvshmem_check() -> Check {
    let install = match nvshmem::find() {
        Ok(i) => i,
        Err(e) => return bad("NVSHMEM", Status::Missing, "not found", e.to_string()),
    };
    let header = version::display(install.header_version);
    let where_ = format!(
        "{} (found via {}), headers {header}",
        install.root.display(),
        install.found_via
    );
    match Nvshmem::load(&install) {
        Ok(nv) => ok(
            "NVSHMEM",
            format!("{where_}, library {}", version::display(nv.version())),
        ),
        Err(e) => bad("NVSHMEM", Status::Missing, where_, e.to_string()),
    }
}

/// What NVSHMEM's remote transport needs here (`nvshmem::transport`): a warning at most, since
/// one node needs none of it.
fn remote_transport_check() -> Check {
    let Ok(install) = nvshmem::find() else {
        return bad(
            "remote transport",
            Status::Warn,
            "not checked (no NVSHMEM)",
            "install NVSHMEM first (see the NVSHMEM line)",
        );
    };
    let facts = nvshmem::transport::Facts::probe(&install.lib_dir);
    match nvshmem::transport::assess(&facts) {
        (found, None) => ok("remote transport", found),
        (found, Some(fix)) => bad("remote transport", Status::Warn, found, fix),
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}

fn mpi_check() -> Check {
    let mpirun = on_path("mpirun")
        .map(|p| format!("; mpirun at {}", p.display()))
        .unwrap_or_default();
    if cfg!(feature = "mpi") {
        ok("MPI", format!("built with the `mpi` feature{mpirun}"))
    } else {
        bad(
            "MPI",
            Status::Warn,
            format!("built without the `mpi` feature{mpirun}"),
            "only needed for mpirun/srun jobs: build with `--features mpi` (needs an MPI library, e.g. \
             apt-get install libopenmpi-dev), or keep this build and set NVSHMEM_BOOTSTRAP=MPI; \
             single-node jobs can use pgas-run",
        )
    }
}

fn env_checks() -> Vec<Check> {
    let mut checks = Vec::new();
    match bootstrap::env::process(heap::HEAP_SIZE_VAR) {
        None => checks.push(ok(
            "symmetric heap",
            format!(
                "{} (NVSHMEM default)",
                heap::format_size(heap::DEFAULT_HEAP_SIZE)
            ),
        )),
        Some(v) => checks.push(match heap::parse_size(&v) {
            Ok(b) => ok(
                "symmetric heap",
                format!("{} from {}", heap::format_size(b), heap::HEAP_SIZE_VAR),
            ),
            Err(e) => bad(
                "symmetric heap",
                Status::Missing,
                e.to_string(),
                format!("set {} to e.g. 4G", heap::HEAP_SIZE_VAR),
            ),
        }),
    }
    let nvls = bootstrap::env::process("NVSHMEM_DISABLE_NVLS");
    checks.push(ok(
        "NVLink multicast",
        match nvls.as_deref() {
            Some("1") => "disabled (NVSHMEM_DISABLE_NVLS=1); pgas-run passes it on",
            Some(_) => "NVSHMEM_DISABLE_NVLS set; pgas-run passes it on",
            None => "NVSHMEM_DISABLE_NVLS not set (NVSHMEM decides)",
        },
    ));
    checks
}
