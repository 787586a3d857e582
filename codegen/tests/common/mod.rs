//! What the codegen tests that compile Rust kernel text share: the kernels of a source that
//! must compile, and the errors of one that must not.

use pgas_codegen::{compile_file, CompiledKernel};

/// The kernels of `src`, or a panic listing why it did not compile.
pub fn compile(src: &str) -> Vec<CompiledKernel> {
    match compile_file(src, "k.rs") {
        Ok(k) => k,
        Err(errors) => panic!("does not compile:\n{}", lines(&errors)),
    }
}

/// The errors of `src`, one a line, or a panic if it compiled.
pub fn errors(src: &str) -> String {
    match compile_file(src, "k.rs") {
        Ok(_) => panic!("compiled, but should not have"),
        Err(errors) => lines(&errors),
    }
}

fn lines(errors: &[impl ToString]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
