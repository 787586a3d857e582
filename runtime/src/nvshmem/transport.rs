//! What NVSHMEM's remote transport (the one that carries peers on other nodes) needs on this
//! machine, for `pgas doctor`: the transport `NVSHMEM_REMOTE_TRANSPORT` names (`ibrc` by
//! default), its plugin beside the host library, the user-space library the plugin loads, a NIC,
//! GPUDirect RDMA and GDRCopy. Single-node jobs need none of it, so nothing here is fatal.
//! The facts are gathered by [`Facts::probe`] and judged by [`assess`], which tests feed.

use std::path::Path;

/// The variable that picks NVSHMEM's remote transport.
pub const REMOTE_TRANSPORT_VAR: &str = "NVSHMEM_REMOTE_TRANSPORT";

/// The oldest UCX whose API NVSHMEM 3.4's UCX plugin accepts ("UCP API version is
/// incompatible: required >= 1.19" with the system UCX 1.16 of the test machines).
pub const UCX_MIN: (u32, u32) = (1, 19);

/// What was found on this machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The transport asked for (lower case), or `ibrc` when unset.
    pub transport: String,
    /// Whether `nvshmem_transport_<transport>.so*` is in NVSHMEM's `lib/`.
    pub plugin: bool,
    /// Whether the plugin's user-space library loads (`libibverbs.so.1`, `libucp.so.0`,
    /// `libfabric.so.1`).
    pub user_lib: bool,
    /// The UCX version, where `libucp.so.0` loads and says.
    pub ucx_version: Option<(u32, u32, u32)>,
    /// RDMA devices (`/sys/class/infiniband`).
    pub nics: Vec<String>,
    /// Whether the `nvidia_peermem` module is loaded (GPUDirect RDMA for verbs NICs).
    pub peermem: bool,
    /// Whether GDRCopy's `libgdrapi.so.2` loads.
    pub gdrcopy: bool,
}

/// The user-space library a transport's plugin loads, by transport name.
fn user_library(transport: &str) -> Option<&'static str> {
    match transport {
        "ibrc" | "ibdevx" | "ibgda" => Some("libibverbs.so.1"),
        "ucx" => Some("libucp.so.0"),
        "libfabric" => Some("libfabric.so.1"),
        _ => None,
    }
}

fn loads(name: &str) -> bool {
    // SAFETY: loading a system library by name runs its initializers, which for these
    // (libibverbs, UCX, libfabric, GDRCopy) only set up their own state; it is unloaded again.
    unsafe { libloading::Library::new(name) }.is_ok()
}

/// UCX's version through `ucp_get_version`, where `libucp.so.0` loads.
fn ucx_version() -> Option<(u32, u32, u32)> {
    // SAFETY: as in `loads`; `ucp_get_version(unsigned *, unsigned *, unsigned *)` only writes
    // its three outputs.
    unsafe {
        let lib = libloading::Library::new("libucp.so.0").ok()?;
        let f: libloading::Symbol<unsafe extern "C" fn(*mut u32, *mut u32, *mut u32)> =
            lib.get(b"ucp_get_version\0").ok()?;
        let (mut a, mut b, mut c) = (0, 0, 0);
        f(&mut a, &mut b, &mut c);
        Some((a, b, c))
    }
}

impl Facts {
    /// Looks at this machine, with NVSHMEM's plugins in `lib_dir`.
    pub fn probe(lib_dir: &Path) -> Facts {
        let transport = std::env::var(REMOTE_TRANSPORT_VAR)
            .ok()
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "ibrc".to_owned());
        let prefix = format!("nvshmem_transport_{transport}.so");
        let plugin = std::fs::read_dir(lib_dir).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        });
        let user_lib = user_library(&transport).is_some_and(loads);
        let mut nics: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        nics.sort();
        Facts {
            ucx_version: if transport == "ucx" {
                ucx_version()
            } else {
                None
            },
            transport,
            plugin,
            user_lib,
            nics,
            peermem: Path::new("/sys/module/nvidia_peermem").exists(),
            gdrcopy: loads("libgdrapi.so.2"),
        }
    }
}

/// The verdict on `facts`: a line saying what was found, and what is missing for jobs across
/// nodes (`None` when nothing is).
pub fn assess(facts: &Facts) -> (String, Option<String>) {
    let t = facts.transport.as_str();
    let mut found = vec![format!("{REMOTE_TRANSPORT_VAR}={t}")];
    let mut missing = Vec::new();
    let Some(lib) = user_library(t) else {
        return (
            found.join(", "),
            Some(format!(
                "'{t}' is not one of NVSHMEM's remote transports: set {REMOTE_TRANSPORT_VAR} to \
                 ibrc, ucx, libfabric or ibdevx (or unset it for ibrc)"
            )),
        );
    };
    if facts.plugin {
        found.push(format!("plugin nvshmem_transport_{t}.so"));
    } else {
        missing.push(format!(
            "its plugin nvshmem_transport_{t}.so is not beside NVSHMEM's host library (the pip \
             wheel ships ibrc, ucx, libfabric, ibdevx and ibgda)"
        ));
    }
    if facts.user_lib {
        found.push(lib.to_owned());
    } else {
        missing.push(format!(
            "{lib} does not load (install its package: {})",
            match t {
                "ucx" => "UCX >= 1.19, e.g. the libucx-cu13 wheel's, on LD_LIBRARY_PATH",
                "libfabric" => "libfabric1",
                _ => "libibverbs1 / rdma-core",
            }
        ));
    }
    if let Some((a, b, c)) = facts.ucx_version {
        found.push(format!("UCX {a}.{b}.{c}"));
        if (a, b) < UCX_MIN {
            missing.push(format!(
                "UCX {a}.{b} is older than NVSHMEM's UCX transport accepts ({}.{}): put a newer \
                 libucp.so.0 first on LD_LIBRARY_PATH",
                UCX_MIN.0, UCX_MIN.1
            ));
        }
    }
    let verbs = matches!(t, "ibrc" | "ibdevx" | "ibgda");
    if facts.nics.is_empty() {
        if verbs {
            missing.push("no RDMA NIC (/sys/class/infiniband is empty)".to_owned());
        } else {
            found.push("no RDMA NIC (TCP only)".to_owned());
        }
    } else {
        found.push(format!("NICs {}", facts.nics.join(" ")));
    }
    if verbs && !facts.peermem {
        missing.push(
            "GPUDirect RDMA: the nvidia_peermem module is not loaded (modprobe nvidia_peermem, \
             or a dma-buf capable kernel and driver)"
                .to_owned(),
        );
    }
    if facts.gdrcopy {
        found.push("GDRCopy".to_owned());
    } else {
        missing.push(
            "GDRCopy (libgdrapi.so.2): without it a proxied transport refuses remote atomics \
             (\"AMO ... not supported with the current configuration (GDRCopy Disabled)\"); \
             pgas's off-node collectives use puts, signals and NVSHMEM's collectives instead"
                .to_owned(),
        );
    }
    let fix = (!missing.is_empty()).then(|| {
        format!(
            "only for jobs across nodes (one node needs none of it): {}",
            missing.join("; ")
        )
    });
    (found.join(", "), fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(transport: &str) -> Facts {
        Facts {
            transport: transport.to_owned(),
            plugin: true,
            user_lib: true,
            ucx_version: (transport == "ucx").then_some((1, 22, 0)),
            nics: vec!["mlx5_0".to_owned()],
            peermem: true,
            gdrcopy: true,
        }
    }

    #[test]
    fn a_complete_machine_has_nothing_missing() {
        for t in ["ibrc", "ucx", "libfabric", "ibdevx"] {
            let (found, fix) = assess(&ready(t));
            assert_eq!(fix, None, "{t}: {found}");
            assert!(found.contains(t) && found.contains("mlx5_0"), "{found}");
        }
    }

    #[test]
    fn the_test_machines_ucx_is_named_with_each_missing_piece() {
        // What issue 21 found on 2 x H200: system UCX 1.16, no NIC, no GDRCopy.
        let facts = Facts {
            ucx_version: Some((1, 16, 0)),
            nics: vec![],
            peermem: false,
            gdrcopy: false,
            ..ready("ucx")
        };
        let (found, fix) = assess(&facts);
        let fix = fix.expect("something is missing");
        assert!(
            found.contains("UCX 1.16.0") && found.contains("TCP only"),
            "{found}"
        );
        assert!(fix.contains("older than") && fix.contains("1.19"), "{fix}");
        assert!(fix.contains("GDRCopy") && fix.starts_with("only for jobs across nodes"));
        // UCX needs no RDMA NIC and no peermem.
        assert!(
            !fix.contains("RDMA NIC") && !fix.contains("nvidia_peermem"),
            "{fix}"
        );
    }

    #[test]
    fn verbs_transports_need_a_nic_and_gpudirect_and_unknown_ones_are_named() {
        let facts = Facts {
            nics: vec![],
            peermem: false,
            plugin: false,
            user_lib: false,
            ..ready("ibrc")
        };
        let fix = assess(&facts).1.unwrap();
        for word in [
            "nvshmem_transport_ibrc.so",
            "libibverbs.so.1",
            "RDMA NIC",
            "nvidia_peermem",
        ] {
            assert!(fix.contains(word), "{word}: {fix}");
        }
        let fix = assess(&ready("tcp")).1.unwrap();
        assert!(
            fix.contains("'tcp' is not one of NVSHMEM's remote transports"),
            "{fix}"
        );
    }
}
