//! A kernel's block bound as an expression of its comptime parameters
//! (`#[pgas_kernel(max_threads = 128 * (1 + wgs))]`): each specialization's `__launch_bounds__`
//! is written over its `PGAS_CT_` values.

mod common;

use common::{compile, errors};

#[test]
fn a_comptime_bound_is_each_specializations_own() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel(max_threads = 128 * (1 + wgs))]
fn k(x: &mut CudaSlice<f32>, #[comptime] wgs: u32) {
    if warpgroup_id() == 0 {
        setmaxnreg_dec(24);
    } else {
        setmaxnreg_inc(160);
        x[0] = wgs as f32;
    }
}
"#;
    let k = &compile(src)[0];
    assert_eq!(k.max_threads, None);
    assert!(
        k.plain
            .contains("__launch_bounds__((128 * (1 + PGAS_CT_wgs)), 1) PGAS_KERNEL_NAME("),
        "{}",
        k.plain
    );
    // The checked variant traps unless the block is the specialization's bound.
    assert!(
        k.checked
            .contains("pgas_check_block_threads((unsigned)(128 * (1 + PGAS_CT_wgs)), "),
        "{}",
        k.checked
    );
}

#[test]
fn a_bound_names_comptime_parameters_only() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel(max_threads = 64 * n)]
fn k(x: &mut CudaSlice<f32>, n: u32) {
    x[0] = 1.0;
}
"#;
    let e = errors(src);
    assert!(
        e.contains(
            "`max_threads` may name the kernel's `#[comptime]` parameters only, and `n` is not one"
        ),
        "{e}"
    );
}
