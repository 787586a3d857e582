//! Where NVSHMEM is. First hit wins:
//!
//! 1. `PGAS_NVSHMEM_HOME`
//! 2. `NVSHMEM_HOME`
//! 3. the `nvidia/nvshmem` folder of the Python packages `python3` sees (the
//!    `nvidia-nvshmem-cu12` / `nvidia-nvshmem-cu13` wheels)
//! 4. the usual system prefixes ([`SYSTEM_PREFIXES`])
//!
//! A root qualifies when it holds `include/nvshmem.h`, `include/non_abi/nvshmem_version.h` and
//! `libnvshmem_host.so.3` in `lib/`, `lib64/` or `lib/x86_64-linux-gnu/`. A root named by an
//! environment variable that does not qualify is an error rather than skipped: the user asked
//! for it, and silently using another install would hide the mistake.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::version::{self, Version};
use crate::error::{Error, Result};

/// File name of the host library.
pub const HOST_LIBRARY: &str = "libnvshmem_host.so.3";

/// System prefixes searched last, in order.
pub const SYSTEM_PREFIXES: &[&str] = &[
    "/usr/local/nvshmem",
    "/opt/nvidia/nvshmem",
    "/opt/nvshmem",
    "/usr/local",
    "/usr",
];

/// Library folders tried under a root, in order.
const LIB_DIRS: &[&str] = &["lib", "lib64", "lib/x86_64-linux-gnu"];

/// How an install was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FoundVia {
    /// `PGAS_NVSHMEM_HOME`.
    PgasNvshmemHome,
    /// `NVSHMEM_HOME`.
    NvshmemHome,
    /// The `nvidia.nvshmem` Python package (wheel) of the named interpreter.
    Python(String),
    /// A system prefix.
    SystemPrefix,
}

impl fmt::Display for FoundVia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoundVia::PgasNvshmemHome => f.write_str("PGAS_NVSHMEM_HOME"),
            FoundVia::NvshmemHome => f.write_str("NVSHMEM_HOME"),
            FoundVia::Python(py) => write!(f, "the nvidia.nvshmem package of {py}"),
            FoundVia::SystemPrefix => f.write_str("a system prefix"),
        }
    }
}

/// A usable NVSHMEM install: one root that gives both the host library and the headers the JIT
/// compiles against.
#[derive(Clone, Debug)]
pub struct NvshmemInstall {
    /// The root folder.
    pub root: PathBuf,
    /// `root/include`.
    pub include_dir: PathBuf,
    /// The folder holding `libnvshmem_host.so.3` and the bootstrap plugins.
    pub lib_dir: PathBuf,
    /// The version the headers declare.
    pub header_version: Version,
    /// How it was found.
    pub found_via: FoundVia,
}

impl NvshmemInstall {
    /// Full path of `libnvshmem_host.so.3`.
    pub fn host_library(&self) -> PathBuf {
        self.lib_dir.join(HOST_LIBRARY)
    }
}

/// The inputs of a search, separated from the process environment so tests can fake them.
#[derive(Clone, Debug, Default)]
pub struct Search {
    /// Value of `PGAS_NVSHMEM_HOME`.
    pub pgas_nvshmem_home: Option<PathBuf>,
    /// Value of `NVSHMEM_HOME`.
    pub nvshmem_home: Option<PathBuf>,
    /// Python interpreter to ask (`python3`); `None` skips the Python step.
    pub python: Option<String>,
    /// System prefixes to try.
    pub system_prefixes: Vec<PathBuf>,
}

impl Search {
    /// The search pgas does: environment variables, `python3`, [`SYSTEM_PREFIXES`].
    pub fn from_env() -> Self {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Search {
            pgas_nvshmem_home: var("PGAS_NVSHMEM_HOME"),
            nvshmem_home: var("NVSHMEM_HOME"),
            python: Some("python3".to_string()),
            system_prefixes: SYSTEM_PREFIXES.iter().map(PathBuf::from).collect(),
        }
    }

    /// Runs the search.
    pub fn find(&self) -> Result<NvshmemInstall> {
        let mut looked = Vec::new();
        for (var, value, via) in [
            (
                "PGAS_NVSHMEM_HOME",
                &self.pgas_nvshmem_home,
                FoundVia::PgasNvshmemHome,
            ),
            ("NVSHMEM_HOME", &self.nvshmem_home, FoundVia::NvshmemHome),
        ] {
            match value {
                None => looked.push(format!("  {var}: not set")),
                Some(root) => {
                    return check_root(root, via).map_err(|why| Error::NvshmemNotFound {
                        searched: format!(
                            "  {var}={}: {why} (fix or unset {var} to let pgas search elsewhere)",
                            root.display()
                        ),
                    });
                }
            }
        }
        if let Some(py) = &self.python {
            match python_nvshmem_root(py) {
                Ok(root) => match check_root(&root, FoundVia::Python(py.clone())) {
                    Ok(found) => return Ok(found),
                    Err(why) => looked.push(format!(
                        "  {py} (nvidia.nvshmem at {}): {why}",
                        root.display()
                    )),
                },
                Err(why) => looked.push(format!("  {py}: {why}")),
            }
        }
        for prefix in &self.system_prefixes {
            match check_root(prefix, FoundVia::SystemPrefix) {
                Ok(found) => return Ok(found),
                Err(why) => looked.push(format!("  {}: {why}", prefix.display())),
            }
        }
        Err(Error::NvshmemNotFound {
            searched: looked.join("\n"),
        })
    }
}

/// Finds NVSHMEM the way `pgas::init()` does (see the module documentation for the order).
pub fn find() -> Result<NvshmemInstall> {
    Search::from_env().find()
}

/// Checks that `root` is a complete install; on failure, says what is missing.
fn check_root(root: &Path, found_via: FoundVia) -> std::result::Result<NvshmemInstall, String> {
    if !root.is_dir() {
        return Err("no such folder".to_string());
    }
    let include_dir = root.join("include");
    if !include_dir.join("nvshmem.h").is_file() {
        return Err("no include/nvshmem.h".to_string());
    }
    let lib_dir = LIB_DIRS
        .iter()
        .map(|d| root.join(d))
        .find(|d| d.join(HOST_LIBRARY).is_file())
        .ok_or_else(|| format!("no {HOST_LIBRARY} in {}", LIB_DIRS.join(", ")))?;
    let header_version = version::read_header_version(&include_dir).map_err(|e| match e {
        Error::NvshmemHeader { reason, .. } => {
            format!("include/non_abi/nvshmem_version.h: {reason}")
        }
        other => other.to_string(),
    })?;
    Ok(NvshmemInstall {
        root: root.to_path_buf(),
        include_dir,
        lib_dir,
        header_version,
        found_via,
    })
}

/// Asks a Python interpreter where the `nvidia.nvshmem` package is.
fn python_nvshmem_root(python: &str) -> std::result::Result<PathBuf, String> {
    // `nvidia` is a namespace package, so `__path__` (not `__file__`) names the folder.
    let out = Command::new(python)
        .args([
            "-c",
            "import nvidia.nvshmem as m; print(list(m.__path__)[0])",
        ])
        .output()
        .map_err(|e| format!("could not run it ({e})"))?;
    if !out.status.success() {
        return Err(
            "no nvidia.nvshmem package (pip install nvidia-nvshmem-cu13==3.4.5)".to_string(),
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.trim();
    if line.is_empty() {
        return Err("nvidia.nvshmem has no folder".to_string());
    }
    Ok(PathBuf::from(OsString::from(line)))
}
