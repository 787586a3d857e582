//! Two problems the thread-block cluster rows had (683c214), kept as regression tests: a batch's
//! `#undef` of a function-like macro, and `stmatrix_x4` refusing read-only accumulators.

use pgas_codegen::{batch, compile_file, specialize};

const STMATRIX: &str = r#"
use pgas::prelude::*;
#[pgas_kernel(max_threads = 32)]
fn k(out: &mut CudaSlice<bf16>) {
    let smem = dyn_shared::<bf16>();
    let lane = lane_id() as usize;
    let acc = frag_c::<f32, 2>();
    stmatrix_x4(&mut smem[(lane % 16) * 16 + 8 * (lane / 16)], &acc[0]);
    sync_warp();
    out[lane] = smem[lane];
}
"#;

/// `batch` resets each macro a source defines with `#undef NAME`; for a function-like macro
/// (the sm_90a support once had `PGAS_STMATRIX_X4(T)`) it wrote `#undef PGAS_STMATRIX_X4(T)`,
/// on which NVRTC warns (#14-D, extra text after the directive). Here a source with such a
/// macro, added by hand.
#[test]
fn batch_resets_function_like_macros_by_name() {
    let k = &compile_file(
        STMATRIX
            .replace("&acc[0]", "&mut acc[0]")
            .replace("let acc", "let mut acc")
            .as_str(),
        "k.rs",
    )
    .expect("compiles")[0];
    let sources: Vec<String> = [("plain", false), ("checked", true)]
        .iter()
        .map(|&(v, checked)| {
            let src = specialize(k.source(checked), &k.cuda_name, v, &[]).0;
            // A function-like macro after the prelude, as support code may define one.
            src.replacen(
                "#define PGAS_RUST_FILE",
                "#define PGAS_TWICE(x) ((x) + (x))\n#define PGAS_RUST_FILE",
                1,
            )
        })
        .collect();
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let program = batch(k.prelude.text(), &refs).expect("sources start with their prelude");
    let bad: Vec<&str> = program
        .lines()
        .filter(|l| l.starts_with("#undef ") && l.contains('('))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(program.matches("#undef PGAS_TWICE\n").count(), 2);
}

/// `stmatrix_x4` only reads its accumulators (`Arg::AccIn`): `&acc[j]` of an array without
/// `let mut` is accepted (it was taken as a wgmma accumulator, written, and refused).
#[test]
fn stmatrix_x4_reads_its_accumulators() {
    if let Err(e) = compile_file(STMATRIX, "k.rs") {
        let msgs: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        panic!("{}", msgs.join("\n"));
    }
}
