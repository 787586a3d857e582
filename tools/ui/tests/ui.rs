//! Pins the kernel language's compile errors (messages and spans, `tests/ui/fail`, through
//! trybuild) and checks that valid kernels expand to modules whose launchers type-check
//! (`tests/ui/pass`, compiled into this test: each is a module, and its `check` reads what the
//! macros generated). Only failing cases go through trybuild, which then checks them all in one
//! `cargo check` instead of building and running each case apart.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}

// The valid kernels; items that only have to type-check are never called.
#[allow(dead_code)]
#[path = "ui/pass/device_helpers.rs"]
mod device_helpers;
#[allow(dead_code)]
#[path = "ui/pass/device_helpers_other_module.rs"]
mod device_helpers_other_module;
#[allow(dead_code)]
#[path = "ui/pass/fp8_params.rs"]
mod fp8_params;
#[allow(dead_code)]
#[path = "ui/pass/generic_launchers.rs"]
mod generic_launchers;
#[allow(dead_code)]
#[path = "ui/pass/launchers.rs"]
mod launchers;
#[allow(dead_code)]
#[path = "ui/pass/max_threads.rs"]
mod max_threads;
#[allow(dead_code)]
#[path = "ui/pass/param_groups.rs"]
mod param_groups;
#[allow(dead_code)]
#[path = "ui/pass/tensor_map_param.rs"]
mod tensor_map_param;

#[test]
fn device_helpers_reach_kernels_in_any_order() {
    device_helpers::check();
}

#[test]
fn a_device_function_from_another_module() {
    device_helpers_other_module::check();
}

#[test]
fn a_kernel_becomes_a_spec_and_typed_launchers() {
    launchers::check();
}

#[test]
fn a_generic_kernel_becomes_one_instance_a_type() {
    generic_launchers::check();
}

#[test]
fn max_threads_reaches_the_spec_and_the_source() {
    max_threads::check();
}

#[test]
fn a_parameter_group_stands_for_its_fields() {
    param_groups::check();
}
