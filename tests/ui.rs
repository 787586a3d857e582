//! Pins the kernel language's compile errors (messages and spans) and checks that valid
//! kernels expand to modules whose launchers type-check.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
