"""Round 14 probes of the tensor frontend (SPEC section 5): numpy's functions on Tensors,
0-d inputs given Python numbers, and ``s[tensor]`` on Tensors inside and outside a schedule."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor


def test_numpys_reduction_functions_take_a_tensor_as_its_methods_do():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    t = Tensor(a)
    # numpy calls t.sum(axis=..., out=None) / t.mean(axis=..., dtype=None, out=None)
    for fn in (np.sum, np.mean, np.max, np.min, np.amax):
        got = fn(t, axis=1)
        assert isinstance(got, Tensor)
        np.testing.assert_allclose(got.numpy(), fn(a, axis=1), rtol=1e-6)
        np.testing.assert_allclose(fn(t).numpy(), fn(a), rtol=1e-6)
    np.testing.assert_array_equal(np.max(t, axis=0, keepdims=True).numpy(),
                                  np.max(a, axis=0, keepdims=True))
    u = np.arange(200, dtype=np.uint8)
    got = np.sum(Tensor(u), dtype=np.uint8).numpy()           # accumulates in uint8: wraps
    assert got.dtype == np.uint8 and got == np.sum(u, dtype=np.uint8)
    got = np.mean(Tensor(np.arange(5)), dtype=np.float32).numpy()
    assert got.dtype == np.float32 and got == 2.0
    assert Tensor(a).sum(0, dtype=sl.float64).numpy().dtype == np.float64
    with pytest.raises(sl.AlgorithmError) as info:
        np.sum(t, out=np.zeros((), np.float32))
    msg = str(info.value)
    assert "sum" in msg and "out=" in msg and "returned Tensor" in msg
    with pytest.raises(sl.AlgorithmError, match="max: out= is not supported"):
        t.max(out=np.zeros(()))
    with pytest.raises(sl.AlgorithmError, match="mean: dtype=: 'foo'"):
        t.mean(dtype="foo")


def test_np_reshape_of_a_tensor_is_its_row_major_reshape():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = np.reshape(Tensor(a), (4, 6))          # numpy passes order="C"
    assert isinstance(got, Tensor)
    np.testing.assert_array_equal(got.numpy(), a.reshape(4, 6))
    with pytest.raises(sl.AlgorithmError) as info:
        np.reshape(Tensor(a), (4, 6), order="F")
    assert "order='F'" in str(info.value) and "transpose first" in str(info.value)


def test_a_zero_d_input_takes_a_python_number_as_a_weak_literal():
    s = Tensor.input("s", ())
    x = Tensor.input("x", (4,))
    kern = sl.compile(x * s)
    ones = np.ones(4, np.float32)
    np.testing.assert_array_equal(kern(x=ones, s=2.5), np.full(4, 2.5, np.float32))
    np.testing.assert_array_equal(kern(x=ones, s=3), np.full(4, 3, np.float32))
    # a typed numpy float64 is still the wrong dtype, as a float64 array is
    with pytest.raises(sl.ArgumentError, match="expected dtype float32, got float64"):
        kern(x=ones, s=np.float64(2.0))
    with pytest.raises(sl.ArgumentError, match="input s: 1e[+]300 is beyond the range of float32"):
        kern(x=ones, s=1e300)
    n = Tensor.input("n", (), sl.int8)
    k8 = sl.compile(Tensor.input("v", (3,), sl.int8) + n)
    v = np.array([1, 2, 127], np.int8)
    np.testing.assert_array_equal(k8(v=v, n=1), v + np.int8(1))
    with pytest.raises(sl.ArgumentError, match="input n: 300 does not fit int8"):
        k8(v=v, n=300)
    with pytest.raises(sl.ArgumentError, match=r"input n: expected an integer \(int8\), got 2.5"):
        k8(v=v, n=2.5)
    b = Tensor.input("b", (), sl.bool)
    kb = sl.compile(F.where(b, Tensor.input("y", (2,)), 0.0))
    np.testing.assert_array_equal(kb(b=True, y=np.ones(2, np.float32)), [1, 1])
    np.testing.assert_array_equal(kb(b=False, y=np.ones(2, np.float32)), [0, 0])


def test_indexing_a_schedule_with_a_tensor_of_another_graph_names_the_tensor():
    x = Tensor.input("x", (1, 4, 8, 8))
    w = Tensor.input("w", (4, 4, 3, 3))
    y = F.conv2d(x, w, padding=1)
    z = (x * 2).sum(-1)
    s = sl.Schedule(z)
    with pytest.raises(sl.ScheduleError) as info:
        s[y]
    msg = str(info.value)
    assert "op=conv2d" in msg and "not part of the pipeline" in msg and "sl.Schedule(y)" in msg
    assert "winograd" not in msg and "conv2d1" not in msg


@pytest.mark.parametrize("make", [lambda x: x.sum(-1), lambda x: x.sum(-1, keepdims=True),
                                  lambda x: x.max(1, keepdims=True)])
def test_a_float_sum_or_a_keepdims_reduction_has_the_schedule_of_its_func(make):
    x = Tensor.input("x", (64, 32))
    r = make(x)
    y = (r * 2).exp()
    s = sl.Schedule(y)
    stage = s[r]            # was: "computed inline ... has no schedule"
    assert stage.func.definitions[0].reductions
    stage.compute_root()
    a = np.random.default_rng(0).random((64, 32), dtype=np.float32)
    ref = np.exp(2 * (a.sum(-1, keepdims=True) if "sum" in stage.func.name
                      else a.max(1, keepdims=True)))
    np.testing.assert_allclose(sl.compile(y, s)(x=a).reshape(ref.shape), ref, rtol=1e-5)


def test_a_type_error_of_an_operator_says_to_cast_the_tensor():
    with pytest.raises(sl.AlgorithmError) as info:
        ~Tensor(np.ones(2, np.float32))
    msg = str(info.value)
    assert "bitwise_not" in msg and "Tensor.cast" in msg and "sl.cast" not in msg
    with pytest.raises(sl.AlgorithmError) as info:
        Tensor(np.ones(2, np.uint8)) * 256
    msg = str(info.value)
    assert "256 does not fit" in msg and "Tensor.cast" in msg and "sl.cast" not in msg


def test_np_squeeze_with_an_axis_squeezes_the_tensor():
    a = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    t = Tensor(a)
    for axis in (0, -1, (0, 2)):
        got = np.squeeze(t, axis=axis)         # numpy calls t.squeeze(axis=axis)
        assert isinstance(got, Tensor)
        np.testing.assert_array_equal(got.numpy(), np.squeeze(a, axis=axis))
    assert t.squeeze(axis=0).shape == (3, 1)
    with pytest.raises(sl.AlgorithmError, match="squeeze: give dim= or axis=, not both"):
        t.squeeze(0, axis=0)


def test_a_boolean_mask_index_says_it_is_not_supported_and_what_to_use():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(sl.AlgorithmError) as info:
        Tensor(a)[a > 5]
    msg = str(info.value)
    assert "getitem" in msg and "boolean mask" in msg and "(3, 4)" in msg
    assert "F.where(mask, x, 0)" in msg and "[[" not in msg      # not the whole array
    with pytest.raises(sl.AlgorithmError, match="index array .list of shape .2,.."):
        Tensor(a)[[0, 2]]
