"""Conformance probes of the tensor frontend's compiled path (SPEC sections 3 and 5) from an
eleventh independent round: graphs of several ``Tensor.input``s compiled with
``sl.compile(y)`` and ``sl.compile([y1, y2])``, outputs that are views of an input or
intermediates of another output, explicit ``sl.Schedule`` of Tensors, and the messages of
a schedule that was built for other outputs (or the same ones in another order)."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

torch = pytest.importorskip("torch")


def test_a_schedule_of_other_tensors_says_to_build_it_from_the_compiled_tensors():
    x = Tensor.input("x", (3, 4))
    y = x.exp()
    s = sl.Schedule(y)
    with pytest.raises(sl.CompileError) as info:
        sl.compile(x.exp(), s)          # a new Tensor, not the one s was built from
    msg = str(info.value)
    assert "Tensor" in msg and "s = sl.Schedule(y); sl.compile(y, s)" in msg
    kern = sl.compile(y, s)
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(kern(x=a), np.exp(a), rtol=1e-6)


def test_a_schedule_of_the_same_outputs_in_another_order_says_so():
    x = Tensor.input("x", (3, 4))
    y1, y2 = x.exp(), x.sum(0)
    s = sl.Schedule(y1, y2)
    with pytest.raises(sl.CompileError) as info:
        sl.compile([y2, y1], s)
    assert "same outputs in another order" in str(info.value)
    A = sl.Input("A", sl.float32, (4,))
    i = sl.Var("i")
    C, D = sl.Func("C", shape=(4,)), sl.Func("D", shape=(4,))
    C[i] = A[i]
    D[i] = A[i] * 2
    with pytest.raises(sl.CompileError, match="another order .C, D, not D, C."):
        sl.compile([D, C], sl.Schedule(C, D))
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    o1, o2 = sl.compile([y1, y2], s)(x=a)
    np.testing.assert_allclose(o1, np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(o2, a.sum(0), rtol=1e-5, atol=1e-6)


def test_outputs_that_are_views_of_an_input_compile_and_write_into_out():
    x = Tensor.input("x", (3, 4))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for y, ref in [(x, a), (x.permute(1, 0), a.T), (x[1:], a[1:])]:
        kern = sl.compile(y)
        got = kern(x=a)
        np.testing.assert_array_equal(got, ref)
        assert not np.shares_memory(got, a)
        out = np.empty(ref.shape, np.float32)
        kern(x=a, out=out)
        np.testing.assert_array_equal(out, ref)
    o0, o1, o2 = sl.compile([x, x.T, x[1:]])(x=a)
    np.testing.assert_array_equal(o0, a)
    np.testing.assert_array_equal(o1, a.T)
    np.testing.assert_array_equal(o2, a[1:])


def test_an_output_that_another_output_reads_is_right_in_either_order():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((17, 9)).astype(np.float32)
    b = rng.standard_normal((9, 33)).astype(np.float32)
    x, w = Tensor.input("x", (17, 9)), Tensor.input("w", (9, 33))
    m = x @ w
    p = m.softmax(-1)
    t = p.T + 1
    ref_m = a.astype(np.float64) @ b
    ref_p = torch.softmax(torch.tensor(ref_m), -1).numpy()
    for outs in ([t, p, m], [m, p, t]):
        got = dict(zip(map(id, outs), sl.compile(outs)(x=a, w=b)))
        np.testing.assert_allclose(got[id(m)], ref_m, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[id(p)], ref_p, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got[id(t)], ref_p.T + 1, rtol=1e-4, atol=1e-6)


def test_a_graph_of_mixed_dtypes_compiled_matches_eager_and_numpy():
    rng = np.random.default_rng(4)
    data = {"a": rng.integers(-20, 20, (4, 17)).astype(np.int32),
            "b": rng.integers(0, 255, (1, 17)).astype(np.uint8),
            "c": rng.random((4, 1)) < 0.5,
            "f": rng.standard_normal((4, 17)).astype(np.float16),
            "d": rng.standard_normal((17,)).astype(np.float64)}

    def build(leaf):
        a, b, c, f, d = (leaf(n) for n in "abcfd")
        return [F.concat([a, b.expand(4, 17)], axis=0), F.where(c, a, b), a // (b | 1),
                f.cast(sl.int32), (f * d).sum(1, keepdims=True), (a > 0) & c]

    refs = [np.concatenate([data["a"], np.broadcast_to(data["b"], (4, 17))], 0),
            np.where(data["c"], data["a"], data["b"]), data["a"] // (data["b"] | 1),
            np.trunc(data["f"]).astype(np.int32),
            (data["f"] * data["d"]).sum(1, keepdims=True), (data["a"] > 0) & data["c"]]
    dtypes = {n: sl.float16 if v.dtype == np.float16 else getattr(sl, v.dtype.name)
              for n, v in data.items()}
    compiled = sl.compile(build(lambda n: Tensor.input(n, data[n].shape, dtypes[n])))(**data)
    eager = [t.numpy() for t in build(lambda n: Tensor(data[n]))]
    for got, again, ref in zip(compiled, eager, refs):
        assert got.dtype == ref.dtype and again.dtype == ref.dtype
        np.testing.assert_allclose(got, ref, rtol=1e-9)
        np.testing.assert_array_equal(got, again)


def test_argument_errors_of_a_tensor_kernel_name_the_input():
    x, w = Tensor.input("x", (3, 4)), Tensor.input("w", (4, 5))
    kern = sl.compile(x @ w)
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(sl.ArgumentError, match=r"missing argument\(s\): w"):
        kern(x=a)
    with pytest.raises(sl.ArgumentError, match=r"xx \(did you mean x\?\)"):
        kern(xx=a, w=b)
    with pytest.raises(sl.ArgumentError, match=r"input w: dimension 0 should be 4, got 5"):
        kern(x=a, w=b.T)
    with pytest.raises(sl.ArgumentError, match="input x: expected dtype float32, got float64"):
        kern(x=a.astype(np.float64), w=b)
    np.testing.assert_allclose(kern(x=a, w=b), np.full((3, 5), 4.0))
