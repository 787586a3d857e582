//! NVSHMEM versions: read from the headers and compared with the loaded library.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// `major.minor.patch`.
pub type Version = (u32, u32, u32);

/// Path of the version header inside an include directory.
pub fn header_path(include_dir: &Path) -> PathBuf {
    include_dir.join("non_abi").join("nvshmem_version.h")
}

/// Reads `NVSHMEM_VENDOR_{MAJOR,MINOR,PATCH}_VERSION` from `include/non_abi/nvshmem_version.h`.
pub fn read_header_version(include_dir: &Path) -> Result<Version> {
    let path = header_path(include_dir);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::NvshmemHeader {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    parse_header_version(&text).map_err(|reason| Error::NvshmemHeader { path, reason })
}

/// Parses the three `#define`s out of the text of `nvshmem_version.h`.
pub fn parse_header_version(text: &str) -> std::result::Result<Version, String> {
    let get = |name: &str| -> std::result::Result<u32, String> {
        text.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("#define") && w.next() == Some(name)).then(|| w.next())
            })
            .flatten()
            .next()
            .ok_or_else(|| format!("no `#define {name}`"))?
            .parse()
            .map_err(|e| format!("{name} is not a number: {e}"))
    };
    Ok((
        get("NVSHMEM_VENDOR_MAJOR_VERSION")?,
        get("NVSHMEM_VENDOR_MINOR_VERSION")?,
        get("NVSHMEM_VENDOR_PATCH_VERSION")?,
    ))
}

/// Checks that the library's version equals the headers' (major, minor and patch: the device
/// state layout that JIT-compiled kernels share with the library may change in any release).
pub fn check(
    library: &Path, library_version: Version, include: &Path, header_version: Version,
) -> Result<()> {
    if library_version == header_version {
        Ok(())
    } else {
        Err(Error::NvshmemVersionMismatch {
            library: library.to_path_buf(),
            library_version,
            include: include.to_path_buf(),
            header_version,
        })
    }
}

/// The NVSHMEM releases pgas supports, by (major, minor): 3.4 to 3.8, each patch level.
/// 3.4.5 is what CI and the GPU machines run; 3.8.0 passed the GPU suite on 2 x H200 and its
/// headers compile the kernel corpus in CI (docs/runtime.md, "NVSHMEM versions").
pub const SUPPORTED: [(u32, u32); 2] = [(3, 4), (3, 8)];

/// Checks that `version` of the library at `library` is within [`SUPPORTED`].
pub fn check_supported(library: &Path, version: Version) -> Result<()> {
    let [oldest, newest] = SUPPORTED;
    if (oldest..=newest).contains(&(version.0, version.1)) {
        Ok(())
    } else {
        Err(Error::NvshmemUnsupported {
            library: library.to_path_buf(),
            version,
        })
    }
}

/// `3.4.5`.
pub fn display(v: Version) -> String {
    format!("{}.{}.{}", v.0, v.1, v.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_3_4_to_3_8_are_supported_and_others_refused_with_the_fix() {
        let lib = Path::new("/x/libnvshmem_host.so.3");
        for ok in [(3, 4, 0), (3, 4, 5), (3, 6, 1), (3, 8, 0), (3, 8, 9)] {
            assert!(check_supported(lib, ok).is_ok(), "{ok:?}");
        }
        for bad in [(3, 3, 9), (3, 9, 0), (2, 11, 0), (4, 0, 0)] {
            let e = check_supported(lib, bad).unwrap_err().to_string();
            assert!(e.contains("3.4 to 3.8") && e.contains("Fix:"), "{e}");
        }
    }

    #[test]
    fn parses_the_real_header_layout() {
        let text = "#pragma once\n#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n\
                    #define NVSHMEM_VENDOR_MINOR_VERSION 4\n#define NVSHMEM_VENDOR_PATCH_VERSION 5\n\
                    #define NVSHMEM_VENDOR_PACKAGE_VERSION 0\n";
        assert_eq!(parse_header_version(text), Ok((3, 4, 5)));
    }

    #[test]
    fn missing_define_is_reported() {
        let err = parse_header_version("#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n").unwrap_err();
        assert!(err.contains("NVSHMEM_VENDOR_MINOR_VERSION"), "{err}");
    }

    #[test]
    fn mismatch_names_both_versions_and_the_fix() {
        let err = check(
            Path::new("/x/lib/libnvshmem_host.so.3"),
            (3, 4, 5),
            Path::new("/y/include"),
            (3, 3, 9),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("3.4.5") && err.contains("3.3.9"), "{err}");
        assert!(
            err.contains("/x/lib/libnvshmem_host.so.3") && err.contains("/y/include"),
            "{err}"
        );
        assert!(err.contains("PGAS_NVSHMEM_HOME"), "{err}");
        assert!(check(Path::new("a"), (3, 4, 5), Path::new("b"), (3, 4, 5)).is_ok());
    }
}
