"""pgas.kernel(source) without a GPU (CI): the kernel language compiled from a string by the
module itself, its parameters and CUDA shown, and every error in the source a
pgas.KernelSourceError naming the line and column in the string; bad launch arguments raise
before anything starts."""

import pytest

import pgas

SCALE = """
#[pgas_kernel]
fn scale(x: &mut SymTensor<f32>, a: f32, #[comptime] twice: bool) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = x[i] * a + 1.0;
        if twice {
            x[i] = x[i] * a;
        }
    }
}
"""

RING = """
#[pgas_kernel]
fn ring(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut SymTensor<u64>) {
    let peer = (my_pe() + 1) % n_pes();
    put_signal_block(dst, src, &mut sig[0], 1, SignalOp::Set, peer);
    signal_wait_until(&sig[0], Cmp::Eq, 1);
}

#[pgas_kernel]
fn fill(x: &mut SymTensor<u32>, v: u32) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = v;
    }
}
"""


def test_a_kernel_compiles_and_describes_itself():
    k = pgas.kernel(SCALE)
    assert k.name == "scale"
    assert k.params == [("x", "&mut SymTensor<f32>"), ("a", "f32"), ("twice", "comptime bool")]
    assert "__global__" in k.cuda_source() and "__global__" in k.cuda_source(checked=False)
    assert repr(k).startswith("pgas.Kernel(scale(x: &mut SymTensor<f32>")
    # The same source again is the same kernel, compiled once.
    assert pgas.kernel(SCALE).cuda_source() == k.cuda_source()


def test_a_source_with_several_kernels_needs_a_name():
    assert pgas.kernel(RING, "fill").name == "fill"
    with pytest.raises(pgas.ArgumentError, match="has 2 kernels"):
        pgas.kernel(RING)
    with pytest.raises(pgas.ArgumentError, match='no kernel "gather"'):
        pgas.kernel(RING, "gather")
    with pytest.raises(pgas.ArgumentError, match="no #\\[pgas_kernel\\] fn"):
        pgas.kernel("fn helper(x: u32) -> u32 { x }")


def where(source):
    with pytest.raises(pgas.KernelSourceError) as e:
        pgas.kernel(source)
    return e.value


def test_a_parameter_group_stands_for_its_fields():
    source = """
#[pgas_params]
struct Peers { pes: &SymTensor<i32>, n: u32, me: u32 }

#[pgas_kernel]
fn pass_on(x: &mut SymTensor<f32>, Peers { me, pes, n }: Peers) {
    x.peer(pes[((me + 1) % n) as usize])[0] = 1.0;
}
"""
    k = pgas.kernel(source)
    assert [p for p, _ in k.params] == ["x", "pes", "n", "me"]
    with pytest.raises(pgas.KernelSourceError, match="missing: me"):
        pgas.kernel(source.replace("{ me, pes, n }", "{ pes, n }"))


def test_a_device_function_borrows_the_callers_registers():
    source = """
#[pgas_device]
fn halve(acc: &mut [f32]) {
    for j in 0..4 {
        acc[j] *= 0.5;
    }
}

#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    let mut acc = [1.0f32; 4];
    halve(&mut acc);
    x[0] = acc[3];
}
"""
    cuda = pgas.kernel(source).cuda_source(checked=False)
    assert "pgas_fn_halve(acc, 4)" in cuda
    with pytest.raises(pgas.KernelSourceError, match="borrows `&mut \\[f32\\]`"):
        pgas.kernel(source.replace("let mut acc", "let acc"))


def test_a_syntax_error_names_its_line_and_column():
    src = "#[pgas_kernel]\nfn bad(x: &mut SymTensor<f32>) {\n    let i = ;\n}\n"
    e = where(src)
    assert (e.line, e.column) == (3, 13), (e.line, e.column, str(e))
    assert "line 3, column 13" in str(e) and "let i = ;" in str(e)


def test_a_type_error_names_its_line_and_column():
    src = (
        "#[pgas_kernel]\n"
        "fn bad(x: &mut SymTensor<f32>) {\n"
        "    let i = global_thread_idx();\n"
        "    x[i] = true;\n"
        "}\n"
    )
    e = where(src)
    assert e.line == 4, (e.line, str(e))
    assert isinstance(e, pgas.PgasError)


def test_an_unknown_intrinsic_is_refused_at_its_name():
    src = "#[pgas_kernel]\nfn bad(x: &mut SymTensor<f32>) {\n    teleport(x);\n}\n"
    e = where(src)
    assert (e.line, e.column) == (3, 5), (e.line, e.column, str(e))


def test_launch_arguments_are_checked_before_anything_starts():
    k = pgas.kernel(SCALE)
    with pytest.raises(pgas.ArgumentError, match="parameter a is missing"):
        k(1, 32, twice=False, x=None)
    with pytest.raises(pgas.ArgumentError, match="takes a pgas.Tensor"):
        k(1, 32, 1.0, 2.0, twice=True)
    with pytest.raises(pgas.ArgumentError, match="too many arguments"):
        k(1, 32, 1.0, 2.0, 3.0, twice=True)
    with pytest.raises(pgas.ArgumentError, match='no parameter "y"'):
        k(1, 32, y=1)
    with pytest.raises(pgas.ArgumentError, match="grid takes"):
        k("many", 32)


GENERIC = """
#[pgas_kernel]
fn fold<T: Float>(x: &mut SymTensor<T>, y: &SymTensor<T>, #[comptime] op: ReduceOp) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = combine(op, x[i] as T::Acc, y[i] as T::Acc) as T;
    }
}
"""


def test_a_generic_kernel_is_one_kernel_a_type():
    k = pgas.kernel(GENERIC, "fold::<bf16>")
    assert k.name == "fold::<bf16>"
    assert k.params == [
        ("x", "&mut SymTensor<bf16>"),
        ("y", "&SymTensor<bf16>"),
        ("op", "comptime ReduceOp"),
    ]
    # Computed in f32, the reduction a comptime code.
    assert "__nv_bfloat16 *x" in k.cuda_source() and "pgas_combine(op, " in k.cuda_source()
    with pytest.raises(pgas.ArgumentError, match="fold::<f32>"):
        pgas.kernel(GENERIC)
