//! Local arrays (`[0f32; 8]`, `[a, b, c]`): what the emitted CUDA holds beyond the corpus
//! snapshots: the loops that unroll, the element type inference fixes, the fill value evaluated
//! once, the checked variant's named index check, and errors that need no trybuild fixture.

mod common;

use common::{compile, errors};

/// The line of `text` and the one before it.
fn line_before(src: &str, text: &str) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no line with {text:?} in\n{src}"));
    format!("{}\n{}", lines[i.saturating_sub(1)].trim(), lines[i].trim())
}

/// The example of docs/dsl.md, "Local arrays".
const DOC_EXAMPLE: &str = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn column_sums(out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, rows: usize) {
    let t = global_thread_idx();
    let mut acc = [0.0f32; 8];
    let w = [1.0f32, 0.5, 2.0, -1.0];
    for r in (t..rows).step_by(4096) {
        for j in 0..acc.len() {
            acc[j] += x[r * 8 + j];
        }
    }
    for j in 0..8 {
        out[t * 8 + j] = acc[j] * w[j % 4];
    }
}
"#;

#[test]
fn the_doc_example_is_a_register_array_with_unrolled_loops() {
    let k = &compile(DOC_EXAMPLE)[0];
    let plain = &k.plain;
    assert!(plain.contains("float acc[8];"), "{plain}");
    assert!(
        plain.contains("float w[4] = {1.0f, 0.5f, 2.0f, -1.0f};"),
        "{plain}"
    );
    // Both loops over `j` unroll; the row loop does not.
    assert_eq!(
        line_before(plain, "for (size_t j = "),
        "#pragma unroll\nfor (size_t j = (size_t)0, j_end = ((size_t)8); j < j_end; ++j) {"
    );
    assert!(line_before(plain, "for (size_t j_1 = ").starts_with("#pragma unroll"));
    assert!(!line_before(plain, "for (size_t r = ").starts_with("#pragma unroll"));
    assert!(!plain.contains("pgas_check_local_index"));
    let checked = &k.checked;
    assert!(checked.contains("long long pgas_check_local_index("));
    assert!(checked.contains("acc[pgas_check_local_index(j, 8, \"acc\", "));
}

#[test]
fn sources_without_arrays_do_not_carry_the_check() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    x[0] = 1.0;
}
"#;
    assert!(!compile(src)[0].checked.contains("pgas_check_local_index"));
}

#[test]
fn unsuffixed_elements_take_their_type_from_uses() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, i: u32) {
    let mut a = [0.0; 4];
    let b = [0.0; 2];
    let c = [1, 2, 3];
    let d = [7; 2];
    for j in 0..4 {
        a[j] += x[j];
    }
    x[0] = a[1] + b[0] as f32 + c[i] as f32 + d[i as usize % 2] as f32;
}
"#;
    let plain = &compile(src)[0].plain;
    assert!(plain.contains("float a[4];"), "{plain}");
    assert!(plain.contains("double b[2];"), "{plain}");
    assert!(plain.contains("int32_t c[3] = {1, 2, 3};"), "{plain}");
    assert!(plain.contains("int32_t d[2];"), "{plain}");
    // Any integer indexes a local array, as it is.
    assert!(plain.contains("c[i]"), "{plain}");
}

#[test]
fn the_fill_value_is_evaluated_once_and_an_index_through_a_let_unrolls() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    let mut a = [x[0] * 2.0; 16];
    for j in 0..8 {
        let k2 = j * 2;
        a[k2] = 1.0;
    }
    x[1] = a[3];
}
"#;
    let plain = &compile(src)[0].plain;
    assert!(
        plain.contains("const float pgas_fill = x[(size_t)0] * 2.0f;"),
        "{plain}"
    );
    assert!(plain.contains("a[pgas_k] = pgas_fill;"), "{plain}");
    assert!(
        line_before(plain, "for (size_t j = ").starts_with("#pragma unroll"),
        "{plain}"
    );
}

#[test]
fn a_device_function_with_an_array_brings_the_check_into_the_kernel() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn pick(i: usize) -> f32 {
    let t = [1.0f32, 2.0, 4.0];
    t[i]
}
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    x[0] = pick(2);
}
"#;
    let k = &compile(src)[0];
    assert!(k.checked.contains("long long pgas_check_local_index("));
    assert!(k.checked.contains("t[pgas_check_local_index(i, 3, \"t\", "));
}

#[test]
fn a_comptime_length_is_a_constant_with_a_static_assert() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, #[comptime] n: usize) {
    let mut a = [0f32; n * 2];
    for j in 0..a.len() {
        a[j] = x[j];
    }
    x[0] = a[0];
}
"#;
    let plain = &compile(src)[0].plain;
    assert!(
        plain.contains("const unsigned long long a_len = n * (size_t)2;"),
        "{plain}"
    );
    assert!(
        plain.contains("static_assert(a_len >= 1 && a_len <= 256, "),
        "{plain}"
    );
    assert!(plain.contains("float a[a_len];"), "{plain}");
    assert!(plain.contains("j_end = ((size_t)a_len)"), "{plain}");
}

#[test]
fn arrays_are_not_values() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, c: bool) {
    let a = [1.0f32; 2];
    let b = [2.0f32; 2];
    let big = [0u8; 300];
    x[0] = if c { a } else { b }[0];
    x[1] = a + b;
    x[2] = a.len() + big[0];
}
"#;
    let e = errors(src);
    assert!(
        e.contains("a local array of 300 elements is too large"),
        "{e}"
    );
    assert!(e.contains("cannot apply `+` to type `[f32; 2]`"), "{e}");
}

/// A device function borrows its caller's register arrays as slices: the address and the
/// length go in, the function is always inlined (so the arrays stay in registers), and a loop
/// over the borrowed array unrolls as over one of its own.
#[test]
fn a_device_function_borrows_register_arrays() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn scale(acc: &mut [f32], o: &mut [FragC<f32>], by: &[f32]) {
    for j in 0..8 {
        acc[j] *= by[j % 2];
    }
    for i in 0..4 {
        o[i][0] *= by[0];
    }
}
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, #[comptime] n: usize) {
    let mut acc = [1.0; 8];
    let by = [2.0f32; n];
    let mut o = frag_c::<f32, 4>();
    scale(&mut acc, &mut o, &by);
    x[0] = acc[7] + o[3][0];
}
"#;
    let k = &compile(src)[0];
    let plain = &k.plain;
    assert!(
        plain.contains("static __device__ __forceinline__ void pgas_fn_scale(float *acc, unsigned long long acc_len, pgas_frag_c *o, unsigned long long o_len, float *by, unsigned long long by_len)"),
        "{plain}"
    );
    // The caller's lengths: a literal, the fragment array's and the comptime one's.
    assert!(
        plain.contains("pgas_fn_scale(acc, 8, o, o_len, by, by_len);"),
        "{plain}"
    );
    // `[1.0; 8]` took its element type from the parameter.
    assert!(plain.contains("float acc[8];"), "{plain}");
    assert_eq!(plain.matches("#pragma unroll").count(), 4, "{plain}");
    assert!(
        k.checked.contains("acc[pgas_check_local_index("),
        "{}",
        k.checked
    );
}

/// Arrays of 16-byte vectors are borrowed the same way (`uint4` in C), and a `Vec16` slice of
/// one element type does not take another's.
#[test]
fn a_device_function_borrows_vector_arrays() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn widen(a: &mut [f32], u: &[Vec16<bf16>]) {
    for h in 0..2 {
        for j in 0..8 {
            a[h * 8 + j] += vec16_get(u[h], j as u32) as f32;
        }
    }
}
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, y: &CudaSlice<bf16>) {
    let mut a = [0.0f32; 16];
    let u = [load_vec16(&y[0]), load_vec16(&y[8])];
    widen(&mut a, &u);
    x[0] = a[15];
}
"#;
    let plain = &compile(src)[0].plain;
    assert!(
        plain.contains(
            "pgas_fn_widen(float *a, unsigned long long a_len, uint4 *u, unsigned long long u_len)"
        ),
        "{plain}"
    );
    assert!(plain.contains("pgas_fn_widen(a, 16, u, 2);"), "{plain}");
    let wrong = src.replace(
        "[load_vec16(&y[0]), load_vec16(&y[8])]",
        "[load_vec16(&x[0]); 2]",
    );
    let e = errors(&wrong);
    assert!(
        e.contains("borrows `&[Vec16<bf16>]`, found `[Vec16<f32>; 2]`"),
        "{e}"
    );
}

#[test]
fn a_borrowed_array_must_match_the_parameter() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn fill(acc: &mut [f32], a: &[FragA<bf16>]) {
    acc[0] = 0.0;
}
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    let acc = [1.0f32; 8];
    let mut d = [1.0f64; 8];
    let mut a = frag_a::<f16, 1>();
    let mut c = frag_c::<f32, 1>();
    fill(&mut acc, &a);
    fill(&mut d, &c);
    fill(x, &a);
    x[0] = acc[0] + d[0] as f32;
}
"#;
    let e = errors(src);
    let borrows = |want: &str, got: &str| {
        format!("mismatched types: `fill` borrows `{want}`, found `{got}` (a `&mut` slice takes a `let mut` array)")
    };
    let frags = |kind: &str, elem: &str| format!("array of {kind} fragment of {elem}s");
    assert!(e.contains(&borrows("&mut [f32]", "[f32; 8]")), "{e}");
    assert!(
        e.contains(&borrows("&[FragA<bf16>]", &frags("A", "f16"))),
        "{e}"
    );
    assert!(e.contains(&borrows("&mut [f32]", "[f64; 8]")), "{e}");
    assert!(
        e.contains(&borrows("&[FragA<bf16>]", &frags("C", "f32"))),
        "{e}"
    );
    assert!(
        e.contains(&borrows("&mut [f32]", "&mut CudaSlice<f32>")),
        "{e}"
    );
}

/// Register arrays are borrowed as slices by device functions only, of scalars or of the
/// fragments each kind may hold.
#[test]
fn register_array_parameters_are_device_slices() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, y: &[f32]) {
    x[0] = y[0];
}
#[pgas_device]
fn bad(a: &mut [FragC<bf16>], v: &[u32; 4]) {}
"#;
    let e = errors(src);
    assert!(
        e.contains("a kernel's parameters come from the host"),
        "{e}"
    );
    assert!(
        e.contains("a register array parameter is a slice of a scalar type"),
        "{e}"
    );
    assert!(
        e.contains("a #[pgas_device] function borrows one as a slice"),
        "{e}"
    );
}
