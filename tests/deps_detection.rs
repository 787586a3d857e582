//! `scripts/deps.sh --check` decides what a fresh machine must install. It must look for the exact
//! file or command pgas needs: a look-alike (`libclang-cpp.so.14` without `libclang.so`, a stamp
//! over a half-deleted `.deps`) once made CI skip an install and fail later in a build script.
//! Each case builds a fake system root and runs the real script against it with an empty PATH.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const WHEELS: &str = "nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-nvshmem-cu13==3.4.5 nvidia-nvjitlink==13.0.88";
const WHEEL_FILES: [&str; 6] = [
    "nvidia/cu13/lib/libnvrtc.so.13",
    "nvidia/cu13/lib/libnvJitLink.so.13",
    "nvidia/cu13/include/cuda_runtime.h",
    "nvidia/cu13/include/cccl/cuda/std/type_traits",
    "nvidia/nvshmem/include/nvshmem.h",
    "nvidia/nvshmem/lib/libnvshmem_host.so.3",
];

struct FakeMachine {
    dir: PathBuf,
}

impl FakeMachine {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("pgas-deps-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("root")).unwrap();
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::create_dir_all(dir.join("deps")).unwrap();
        FakeMachine { dir }
    }

    fn touch(&self, rel: &str) {
        let path = self.dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "").unwrap();
    }

    fn add_mpicc(&self) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.join("bin/mpicc");
        fs::write(&path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn add_wheels(&self) {
        fs::write(self.dir.join("deps/.installed"), WHEELS).unwrap();
        for f in WHEEL_FILES {
            self.touch(&format!("deps/{f}"));
        }
        // NVSHMEM 3.8.0 beside them, in a directory of its own.
        self.touch("deps-nvshmem-3.8.0/nvidia/nvshmem/include/nvshmem.h");
        fs::write(
            self.dir.join("deps-nvshmem-3.8.0/.installed"),
            "nvidia-nvshmem-cu13==3.8.0",
        )
        .unwrap();
    }

    /// What `deps.sh --check` says is missing, sorted.
    fn missing(&self) -> Vec<String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
        let out = Command::new("/bin/bash")
            .arg(&script)
            .arg("--check")
            .env_clear()
            .env("PATH", self.dir.join("bin"))
            .env("PGAS_DEPS_SYSROOT", self.dir.join("root"))
            .env("PGAS_DEPS_DIR", self.dir.join("deps"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "deps.sh --check failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut items: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        items.sort();
        items
    }
}

impl Drop for FakeMachine {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_bare_machine_needs_everything() {
    let m = FakeMachine::new("bare");
    assert_eq!(
        m.missing(),
        [
            "libclang-dev",
            "libopenmpi-dev",
            "nvshmem-next",
            "openmpi-bin",
            "wheels"
        ]
    );
}

#[test]
fn nvshmem_3_8_is_its_own_install() {
    let m = FakeMachine::new("next");
    m.add_mpicc();
    m.touch("root/usr/lib/llvm-14/lib/libclang.so");
    m.add_wheels();
    assert!(m.missing().is_empty());
    fs::remove_file(
        m.dir
            .join("deps-nvshmem-3.8.0/nvidia/nvshmem/include/nvshmem.h"),
    )
    .unwrap();
    assert_eq!(
        m.missing(),
        ["nvshmem-next"],
        "a stamp over a missing header"
    );
    m.add_wheels();
    fs::write(
        m.dir.join("deps-nvshmem-3.8.0/.installed"),
        "nvidia-nvshmem-cu13==3.7.0",
    )
    .unwrap();
    assert_eq!(m.missing(), ["nvshmem-next"], "another version's stamp");
}

#[test]
fn libclang_cpp_alone_is_not_libclang() {
    let m = FakeMachine::new("clangcpp");
    m.add_mpicc();
    m.add_wheels();
    m.touch("root/usr/lib/llvm-14/lib/libclang-cpp.so.14");
    m.touch("root/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14");
    assert_eq!(m.missing(), ["libclang-dev"]);
}

#[test]
fn each_libclang_name_bindgen_loads_counts() {
    for file in [
        "root/usr/lib/llvm-14/lib/libclang.so",
        "root/usr/lib/llvm-16/lib/libclang.so.1",
        "root/usr/lib/x86_64-linux-gnu/libclang-14.so.1",
        "root/usr/local/lib/libclang-17.so",
    ] {
        let m = FakeMachine::new("clang");
        m.add_mpicc();
        m.add_wheels();
        m.touch(file);
        assert!(
            m.missing().is_empty(),
            "{file} should satisfy the libclang check"
        );
    }
}

#[test]
fn a_stamp_over_missing_files_reinstalls_the_wheels() {
    let m = FakeMachine::new("stamp");
    m.add_mpicc();
    m.touch("root/usr/lib/llvm-14/lib/libclang.so");
    m.add_wheels();
    assert!(m.missing().is_empty());
    fs::remove_file(m.dir.join("deps/nvidia/nvshmem/include/nvshmem.h")).unwrap();
    assert_eq!(m.missing(), ["wheels"]);
    m.add_wheels();
    fs::write(m.dir.join("deps/.installed"), "nvidia-nvshmem-cu13==3.4.4").unwrap();
    assert_eq!(
        m.missing(),
        ["wheels"],
        "a stamp of other versions is not an install"
    );
}

#[test]
fn mpicc_is_found_on_path_only() {
    let m = FakeMachine::new("mpi");
    m.add_wheels();
    m.touch("root/usr/lib/llvm-14/lib/libclang.so");
    // An MPI library without the compiler wrapper does not build mpi-sys.
    m.touch("root/usr/lib/x86_64-linux-gnu/libmpi.so.40");
    assert_eq!(m.missing(), ["libopenmpi-dev", "openmpi-bin"]);
    m.add_mpicc();
    assert!(m.missing().is_empty());
}
