//! The built module imported by `python3` (no GPU, no torch needed): it loads into an
//! interpreter other than the one it was built for (abi3, no libpython linked), and `pgas.init()`
//! on a machine without a GPU raises `pgas.PgasError` with pgas's message instead of crashing
//! the interpreter. The checks are in `python/tests/check_import.py`; on a machine where init
//! succeeds it checks a one-PE allocation instead.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `libpgas_python.so`, which cargo builds (the package's library) before this test, into the
/// `deps/` folder that holds this executable too (a cdylib's name carries no hash).
fn built_module() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let lib = exe
        .parent()
        .expect("the test executable lies in <target>/<profile>/deps")
        .join(format!(
            "{}pgas_python{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        ));
    assert!(
        lib.is_file(),
        "{} is missing: cargo builds it with this test",
        lib.display()
    );
    lib
}

/// Copies the `.py`, `.pyi` and `py.typed` files under `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_dir() {
            if name != "__pycache__" {
                copy_tree(&path, &to.join(name));
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "py" || e == "pyi" || e == "typed")
        {
            std::fs::copy(&path, to.join(name)).unwrap();
        }
    }
}

#[test]
fn python_imports_the_module_and_init_raises_without_a_gpu() {
    // The package as a wheel lays it out: python/pgas (its Python files) with the native module
    // beside them as `_pgas.abi3.so` (the module name, then the stable ABI tag), in a fresh
    // folder that holds only it.
    let dir = std::env::temp_dir().join(format!("pgas-python-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("pgas"),
        &dir.join("pgas"),
    );
    std::fs::copy(built_module(), dir.join("pgas/_pgas.abi3.so")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_import.py");
    let out = Command::new("python3")
        .arg(&script)
        .env("PYTHONPATH", &dir)
        .env("PGAS_EXPECTED_VERSION", env!("CARGO_PKG_VERSION"))
        .output()
        .expect("running python3 (the CPU tests need a python3 on PATH)");
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "python3 {} exited with {}:\n{text}",
        script.display(),
        out.status
    );
    assert!(text.contains("check_import: ok"), "{text}");
}
