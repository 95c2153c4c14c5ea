"""Independent conformance tests for SPEC §5 (tensor frontend), §6 (command line) and §7
(errors), written from the public contract only.

Shapes are kept tiny; only one bench CLI run is made."""
import csv
import math
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

try:
    import torch
    torch.set_num_threads(1)
except ImportError:      # the cases compared with torch skip; the rest run without it
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

RTOL = 1e-4
ATOL = 1e-4


def rnd(*shape, seed=0, dtype=np.float32, lo=None, hi=None):
    r = np.random.default_rng(seed + 1000 * len(shape) + sum(shape))
    if lo is not None:
        return r.uniform(lo, hi, shape).astype(dtype)
    return r.standard_normal(shape).astype(dtype)


def ints(*shape, seed=0, lo=-9, hi=10, dtype=np.int32):
    r = np.random.default_rng(seed + 7 + sum(shape))
    return r.integers(lo, hi, shape).astype(dtype)


def out_of(t):
    return t.numpy() if isinstance(t, Tensor) else np.asarray(t)


def close(t, ref, rtol=RTOL, atol=ATOL, dtype=None):
    out = out_of(t)
    ref = np.asarray(ref)
    assert isinstance(out, np.ndarray), type(out)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if dtype is not None:
        assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size and ref.dtype.kind == "f" else 1.0
    if ref.dtype.kind in "fc":
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol * scale)
    else:
        np.testing.assert_array_equal(out, ref)
    return out


def tt(a):
    return torch.from_numpy(np.ascontiguousarray(a))


# ---------------------------------------------------------------------------------------------
# construction / eager use
# ---------------------------------------------------------------------------------------------

def test_eager_roundtrip_numpy():
    a = rnd(2, 3)
    out = Tensor(a).numpy()
    close(out, a, dtype=np.float32)


def test_eager_shape_attribute():
    t = Tensor(rnd(2, 3, 4))
    assert tuple(t.shape) == (2, 3, 4)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
def test_eager_dtype_preserved(dt):
    a = (ints(3, 4).astype(dt))
    out = (Tensor(a) + Tensor(a)).numpy()
    close(out, a + a, dtype=dt)


def test_input_default_dtype_float32_and_compile():
    x = Tensor.input("x", (3, 4))
    y = x * 2.0 + 1.0
    kern = sl.compile(y)
    a = rnd(3, 4)
    close(kern(x=a), a * 2 + 1, dtype=np.float32)


def test_input_explicit_dtype_int32_compile():
    x = Tensor.input("xi", (5,), sl.int32)
    kern = sl.compile(x * 3 - 1)
    a = ints(5)
    close(kern(xi=a), a * 3 - 1, dtype=np.int32)


def test_input_dtype_keyword_float64():
    x = Tensor.input("xd", (2, 2), dtype=sl.float64)
    kern = sl.compile(x.exp())
    a = rnd(2, 2, dtype=np.float64)
    close(kern(xd=a), np.exp(a), dtype=np.float64, rtol=1e-10, atol=1e-12)


def test_compile_two_named_inputs():
    a = Tensor.input("a", (2, 3))
    b = Tensor.input("b", (3, 4))
    kern = sl.compile((a @ b).relu())
    A, B = rnd(2, 3), rnd(3, 4, seed=1)
    close(kern(a=A, b=B), np.maximum(A @ B, 0))
    # called again with different data, same kernel
    A2, B2 = rnd(2, 3, seed=2), rnd(3, 4, seed=3)
    close(kern(a=A2, b=B2), np.maximum(A2 @ B2, 0))


def test_compile_input_mixed_with_eager_constant():
    x = Tensor.input("x", (2, 3))
    c = rnd(2, 3, seed=9)
    kern = sl.compile(x + Tensor(c))
    a = rnd(2, 3)
    close(kern(x=a), a + c)


@needs_torch
def test_compile_conv_relu_example():
    x = Tensor.input("x", (1, 2, 5, 5))
    w = Tensor.input("w", (3, 2, 3, 3))
    y = F.conv2d(x, w, padding=1).relu()
    kern = sl.compile(y)
    X, W = rnd(1, 2, 5, 5), rnd(3, 2, 3, 3, seed=1)
    ref = torch.relu(torch.nn.functional.conv2d(tt(X), tt(W), padding=1)).numpy()
    close(kern(x=X, w=W), ref)


def test_compiled_kernel_wrong_dtype_is_argument_error():
    x = Tensor.input("x", (3,))
    kern = sl.compile(x + 1.0)
    with pytest.raises(sl.ArgumentError):
        kern(x=np.zeros(3, np.float64))


def test_compiled_kernel_missing_argument_is_argument_error():
    a = Tensor.input("a", (3,))
    b = Tensor.input("b", (3,))
    kern = sl.compile(a + b)
    with pytest.raises(sl.ArgumentError):
        kern(a=np.zeros(3, np.float32))


def test_compiled_kernel_wrong_shape_is_argument_error():
    x = Tensor.input("x", (3, 4))
    kern = sl.compile(x + 1.0)
    with pytest.raises(sl.ArgumentError):
        kern(x=np.zeros((3, 5), np.float32))


@needs_torch
def test_readme_example_matmul_softmax():
    a, b = rnd(3, 4), rnd(4, 5, seed=1)
    y = (Tensor(a) @ Tensor(b)).softmax(-1).numpy()
    ref = torch.softmax(tt(a) @ tt(b), -1).numpy()
    close(y, ref)


def test_cached_structure_different_data():
    for seed in range(3):
        a, b = rnd(3, 4, seed=seed), rnd(4, seed=seed + 10)
        close((Tensor(a) * Tensor(b)).sum(-1), (a * b).sum(-1))


def test_cached_structure_same_tensor_twice():
    t = (Tensor(rnd(2, 3)) + 1.0)
    o1, o2 = t.numpy(), t.numpy()
    np.testing.assert_array_equal(o1, o2)


def test_cached_structure_differs_by_shape():
    close(Tensor(rnd(2, 3)).exp(), np.exp(rnd(2, 3)))
    close(Tensor(rnd(4, 2)).exp(), np.exp(rnd(4, 2)))


# ---------------------------------------------------------------------------------------------
# elementwise math: methods and functions
# ---------------------------------------------------------------------------------------------

POS = rnd(2, 3, 4, lo=0.1, hi=4.0)
ANY = rnd(2, 3, 4, seed=3)

UNARY = [
    ("exp", ANY, np.exp),
    ("log", POS, np.log),
    ("sqrt", POS, np.sqrt),
    ("rsqrt", POS, lambda a: 1 / np.sqrt(a)),
    ("abs", ANY, np.abs),
    ("sin", ANY, np.sin),
    ("cos", ANY, np.cos),
    ("tanh", ANY, np.tanh),
    ("floor", ANY * 3, np.floor),
    ("ceil", ANY * 3, np.ceil),
    ("erf", ANY, lambda a: torch.erf(tt(a)).numpy()),
    ("relu", ANY, lambda a: np.maximum(a, 0)),
    ("sigmoid", ANY, lambda a: torch.sigmoid(tt(a)).numpy()),
    ("gelu", ANY, lambda a: torch.nn.functional.gelu(tt(a)).numpy()),
]


@needs_torch
@pytest.mark.parametrize("name,a,ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary_method(name, a, ref):
    close(getattr(Tensor(a), name)(), ref(a), dtype=np.float32)


@needs_torch
@pytest.mark.parametrize("name,a,ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary_function(name, a, ref):
    close(getattr(F, name)(Tensor(a)), ref(a), dtype=np.float32)


def test_unary_float64_stays_float64():
    a = rnd(3, 4, dtype=np.float64)
    close(Tensor(a).exp(), np.exp(a), dtype=np.float64, rtol=1e-10, atol=1e-12)


def test_pow_method_function_operator():
    a = POS
    close(Tensor(a) ** 2, a ** 2)
    close(Tensor(a).pow(3), a ** 3, rtol=1e-4)
    close(F.pow(Tensor(a), 0.5), a ** 0.5)


BIN = [
    ("add", lambda x, y: x + y, np.add),
    ("sub", lambda x, y: x - y, np.subtract),
    ("mul", lambda x, y: x * y, np.multiply),
    ("div", lambda x, y: x / y, np.divide),
]


@pytest.mark.parametrize("name,op,ref", BIN, ids=[b[0] for b in BIN])
def test_binary_operator_same_shape(name, op, ref):
    a, b = rnd(3, 4), rnd(3, 4, seed=1, lo=0.5, hi=2)
    close(op(Tensor(a), Tensor(b)), ref(a, b), dtype=np.float32)


@pytest.mark.parametrize("name,op,ref", BIN, ids=[b[0] for b in BIN])
def test_binary_operator_scalar_both_sides(name, op, ref):
    a = rnd(3, 4, lo=0.5, hi=2)
    close(op(Tensor(a), 2.0), ref(a, np.float32(2.0)), dtype=np.float32)
    close(op(2.0, Tensor(a)), ref(np.float32(2.0), a), dtype=np.float32)


def test_negation():
    a = rnd(3, 4)
    close(-Tensor(a), -a, dtype=np.float32)


def test_int_literal_keeps_int32():
    a = ints(3, 4)
    close(Tensor(a) + 1, a + 1, dtype=np.int32)
    close(2 * Tensor(a), 2 * a, dtype=np.int32)


def test_float_literal_on_int_gives_float32():
    a = ints(3, 4)
    close(Tensor(a) * 0.5, a.astype(np.float32) * np.float32(0.5), dtype=np.float32)


def test_float_literal_on_float64_stays_float64():
    a = rnd(3, dtype=np.float64)
    close(Tensor(a) + 0.1, a + 0.1, dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_float32_plus_float64_widens():
    a, b = rnd(3), rnd(3, seed=1, dtype=np.float64)
    close(Tensor(a) + Tensor(b), a.astype(np.float64) + b, dtype=np.float64, rtol=1e-12,
          atol=1e-12)


def test_uint8_plus_int32_widens_to_int32():
    a = ints(4, lo=0, hi=255, dtype=np.uint8)
    b = ints(4, dtype=np.int32)
    close(Tensor(a) + Tensor(b), a.astype(np.int32) + b, dtype=np.int32)


def test_uint8_wraps_with_literal():
    a = np.array([250, 255, 3], np.uint8)
    close(Tensor(a) + 10, (a + np.uint8(10)), dtype=np.uint8)


def test_int_floordiv_mod_python_semantics():
    a = np.array([-7, -6, -1, 0, 5, 7], np.int32)
    b = np.array([2, -4, 3, 5, -3, 7], np.int32)
    close(Tensor(a) // Tensor(b), a // b, dtype=np.int32)
    close(Tensor(a) % Tensor(b), a % b, dtype=np.int32)


def test_int_bitwise_ops():
    a, b = ints(6, lo=0, hi=64), ints(6, seed=1, lo=0, hi=64)
    close(Tensor(a) & Tensor(b), a & b, dtype=np.int32)
    close(Tensor(a) | Tensor(b), a | b, dtype=np.int32)
    close(Tensor(a) ^ Tensor(b), a ^ b, dtype=np.int32)
    close(~Tensor(a), ~a, dtype=np.int32)
    close(Tensor(a) << 2, a << 2, dtype=np.int32)
    close(Tensor(a) >> 1, a >> 1, dtype=np.int32)


# ---------------------------------------------------------------------------------------------
# broadcasting
# ---------------------------------------------------------------------------------------------

BCAST = [
    ((3, 4), (4,)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (3, 1)),
    ((3, 1, 4), (5, 1)),
    ((1,), (2, 3, 4)),
    ((2, 1, 4, 1), (3, 1, 5)),
]


@pytest.mark.parametrize("sa,sb", BCAST, ids=[f"{a}-{b}" for a, b in BCAST])
def test_broadcast_add(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    close(Tensor(a) + Tensor(b), a + b)


@pytest.mark.parametrize("sa,sb", BCAST, ids=[f"{a}-{b}" for a, b in BCAST])
def test_broadcast_mul_reversed(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    close(Tensor(b) * Tensor(a), b * a)


def test_broadcast_shape_mismatch_error():
    with pytest.raises(sl.SchedlangError) as ei:
        (Tensor(rnd(3, 4)) + Tensor(rnd(3, 5))).numpy()
    msg = str(ei.value)
    assert "4" in msg and "5" in msg, msg


def test_broadcast_shape_mismatch_error_raised_at_build_time_with_inputs():
    a = Tensor.input("a", (2, 3))
    b = Tensor.input("b", (4,))
    with pytest.raises(sl.SchedlangError):
        sl.compile(a + b)


# ---------------------------------------------------------------------------------------------
# comparisons, where, cast
# ---------------------------------------------------------------------------------------------

CMP = [
    ("lt", lambda x, y: x < y),
    ("le", lambda x, y: x <= y),
    ("gt", lambda x, y: x > y),
    ("ge", lambda x, y: x >= y),
    ("eq", lambda x, y: x == y),
    ("ne", lambda x, y: x != y),
]


@pytest.mark.parametrize("name,op", CMP, ids=[c[0] for c in CMP])
def test_comparison_returns_bool_broadcast(name, op):
    a, b = ints(3, 4), ints(4, seed=1)
    close(op(Tensor(a), Tensor(b)), op(a, b), dtype=np.bool_)


@pytest.mark.parametrize("name,op", CMP, ids=[c[0] for c in CMP])
def test_comparison_with_scalar(name, op):
    a = ints(3, 4, lo=-2, hi=3).astype(np.float32)
    close(op(Tensor(a), 0.0), op(a, 0.0), dtype=np.bool_)


def test_bool_and_or_of_comparisons():
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    close((Tensor(a) > 0) & (Tensor(b) > 0), (a > 0) & (b > 0), dtype=np.bool_)
    close((Tensor(a) > 0) | (Tensor(b) > 0), (a > 0) | (b > 0), dtype=np.bool_)


def test_where_basic():
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    close(F.where(Tensor(a) > Tensor(b), Tensor(a), Tensor(b)), np.where(a > b, a, b))


def test_where_broadcast():
    c = rnd(3, 1) > 0
    a, b = rnd(1, 4), rnd(2, 1, 1, seed=2)
    close(F.where(Tensor(c), Tensor(a), Tensor(b)), np.where(c, a, b))


def test_where_scalar_branch():
    a = rnd(3, 4)
    close(F.where(Tensor(a) > 0, Tensor(a), 0.0), np.where(a > 0, a, np.float32(0)),
          dtype=np.float32)


def test_where_compiled():
    x = Tensor.input("x", (4,))
    kern = sl.compile(F.where(x > 0, x, x * 0.1))
    a = rnd(4)
    close(kern(x=a), np.where(a > 0, a, a * np.float32(0.1)))


def test_cast_float_to_int_truncates_method_and_function():
    a = np.array([-2.7, -0.5, 0.5, 1.9, 3.0], np.float32)
    close(Tensor(a).cast(sl.int32), a.astype(np.int32), dtype=np.int32)
    close(F.cast(Tensor(a), sl.int32), a.astype(np.int32), dtype=np.int32)


def test_cast_int_to_float64():
    a = ints(5)
    close(Tensor(a).cast(sl.float64), a.astype(np.float64), dtype=np.float64)


def test_cast_bool_to_float32():
    a = rnd(5)
    close((Tensor(a) > 0).cast(sl.float32), (a > 0).astype(np.float32), dtype=np.float32)


def test_cast_narrowing_int_wraps():
    a = np.array([0, 127, 128, 255, 256, -1, 300], np.int32)
    close(Tensor(a).cast(sl.uint8), a.astype(np.uint8), dtype=np.uint8)


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------

RED = ["sum", "max", "min", "mean"]
A3 = rnd(2, 3, 4, seed=4)
AXES = [0, 1, 2, -1, -2, (0, 2), (-1, 0), (0, 1, 2)]


@pytest.mark.parametrize("op", RED)
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_method(op, axis, keepdims):
    ref = getattr(np, op)(A3, axis=axis, keepdims=keepdims)
    close(getattr(Tensor(A3), op)(axis, keepdims=keepdims), ref, dtype=np.float32)


@pytest.mark.parametrize("op", RED)
@pytest.mark.parametrize("axis", [1, -1, (0, 2)], ids=str)
def test_reduce_function(op, axis):
    ref = getattr(np, op)(A3, axis=axis, keepdims=True)
    close(getattr(F, op)(Tensor(A3), axis, keepdims=True), ref, dtype=np.float32)
    close(getattr(F, op)(Tensor(A3), axis=axis), getattr(np, op)(A3, axis=axis))


@pytest.mark.parametrize("op", RED)
def test_reduce_all_axes_default(op):
    out = getattr(Tensor(A3), op)().numpy()
    ref = getattr(np, op)(A3)
    assert np.asarray(out).shape == ()
    np.testing.assert_allclose(np.asarray(out), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reduce_int32(op):
    a = ints(3, 4)
    out = getattr(Tensor(a), op)(1).numpy()
    np.testing.assert_array_equal(out, getattr(np, op)(a, axis=1))
    assert out.dtype.kind == "i"


def test_max_min_int32_keep_dtype():
    a = ints(3, 4)
    close(Tensor(a).max(0), a.max(0), dtype=np.int32)
    close(Tensor(a).min(-1), a.min(-1), dtype=np.int32)


def test_reduce_bad_axis_error():
    with pytest.raises(sl.SchedlangError) as ei:
        Tensor(A3).sum(3).numpy()
    assert "3" in str(ei.value)


def test_reduce_bad_negative_axis_error():
    with pytest.raises(sl.SchedlangError):
        Tensor(A3).sum(-4).numpy()


def test_reduce_of_broadcast_expression():
    a, b = rnd(3, 1), rnd(1, 4, seed=1)
    close((Tensor(a) * Tensor(b)).sum(0), (a * b).sum(0))


# ---------------------------------------------------------------------------------------------
# shape ops
# ---------------------------------------------------------------------------------------------

A24 = rnd(2, 3, 4, seed=5)


def test_reshape_method_tuple_and_varargs():
    close(Tensor(A24).reshape((6, 4)), A24.reshape(6, 4))
    close(Tensor(A24).reshape(4, 6), A24.reshape(4, 6))


def test_reshape_function():
    close(F.reshape(Tensor(A24), (24,)), A24.reshape(24))


def test_reshape_minus_one():
    close(Tensor(A24).reshape((-1, 4)), A24.reshape(-1, 4))
    close(Tensor(A24).reshape((2, -1)), A24.reshape(2, -1))


def test_reshape_after_permute_is_logical():
    t = Tensor(A24).permute(2, 0, 1).reshape((4, 6))
    close(t, A24.transpose(2, 0, 1).reshape(4, 6))


def test_reshape_bad_size_error():
    with pytest.raises(sl.SchedlangError):
        Tensor(A24).reshape((5, 5)).numpy()


def test_permute_varargs_and_tuple():
    close(Tensor(A24).permute(2, 0, 1), A24.transpose(2, 0, 1))
    close(Tensor(A24).permute((1, 2, 0)), A24.transpose(1, 2, 0))


def test_permute_function():
    close(F.permute(Tensor(A24), (2, 1, 0)), A24.transpose(2, 1, 0))


def test_transpose_2d_method_and_function():
    a = rnd(3, 5)
    close(Tensor(a).transpose(1, 0), a.T)
    close(F.transpose(Tensor(a), 1, 0), a.T)


def test_permute_then_elementwise_then_reduce():
    a = rnd(2, 3, 4)
    close((Tensor(a).permute(1, 0, 2) * 2.0).sum(-1), (a.transpose(1, 0, 2) * 2).sum(-1))


def test_expand_tuple():
    a = rnd(1, 4)
    close(Tensor(a).expand((3, 4)), np.broadcast_to(a, (3, 4)))


def test_expand_function_adds_leading_dims():
    a = rnd(3, 1)
    close(F.expand(Tensor(a), (2, 3, 5)), np.broadcast_to(a, (2, 3, 5)))


def test_expand_then_sum():
    a = rnd(3, 1)
    close(Tensor(a).expand((3, 4)).sum(1), np.broadcast_to(a, (3, 4)).sum(1))


def test_expand_incompatible_error():
    with pytest.raises(sl.SchedlangError):
        Tensor(rnd(2, 3)).expand((2, 4)).numpy()


def test_pad_numpy_style_method():
    a = rnd(2, 3)
    close(Tensor(a).pad(((1, 2), (0, 1))), np.pad(a, ((1, 2), (0, 1))))


def test_pad_numpy_style_function_3d():
    a = rnd(2, 2, 3)
    close(F.pad(Tensor(a), ((0, 0), (1, 1), (2, 0))), np.pad(a, ((0, 0), (1, 1), (2, 0))))


def test_pad_int_tensor_zero():
    a = ints(2, 3)
    close(F.pad(Tensor(a), ((1, 1), (1, 1))), np.pad(a, 1), dtype=np.int32)


def test_pad_then_sum():
    a = rnd(3, 3)
    close(Tensor(a).pad(((1, 1), (1, 1))).sum(), np.pad(a, 1).sum())


GETITEMS = [
    (1,),
    (-1,),
    (slice(1, 3),),
    (slice(None), 1),
    (slice(None), slice(None), -1),
    (0, slice(1, None), slice(None, 2)),
    (slice(None, None, 2),),
    (slice(None), slice(None), slice(1, None, 2)),
    (slice(-2, None),),
    (-2, -1),
    (slice(None), slice(-3, -1)),
]


@pytest.mark.parametrize("key", GETITEMS, ids=str)
def test_getitem(key):
    a = rnd(4, 5, 6, seed=6)
    close(Tensor(a)[key], a[key])


def test_getitem_int_index_scalar_key():
    a = rnd(4, 5)
    close(Tensor(a)[2], a[2])


def test_getitem_negative_step():
    a = rnd(5, 3)
    close(Tensor(a)[::-1], a[::-1])


def test_getitem_ellipsis():
    a = rnd(2, 3, 4)
    close(Tensor(a)[..., 1], a[..., 1])


def test_getitem_out_of_range_error():
    with pytest.raises((sl.SchedlangError, IndexError)):
        Tensor(rnd(3, 4))[5].numpy()


def test_getitem_compiled():
    x = Tensor.input("x", (4, 6))
    kern = sl.compile(x[1:3, ::2] * 2.0)
    a = rnd(4, 6)
    close(kern(x=a), a[1:3, ::2] * 2)


def test_concat_axis0_and_negative():
    a, b = rnd(2, 3), rnd(4, 3, seed=1)
    close(F.concat([Tensor(a), Tensor(b)], axis=0), np.concatenate([a, b], 0))
    c = rnd(2, 5, seed=2)
    close(F.concat([Tensor(a), Tensor(c)], axis=-1), np.concatenate([a, c], -1))


def test_concat_three():
    a, b, c = rnd(2, 1, 3), rnd(2, 2, 3, seed=1), rnd(2, 3, 3, seed=2)
    close(F.concat([Tensor(a), Tensor(b), Tensor(c)], 1), np.concatenate([a, b, c], 1))


def test_concat_mismatch_error():
    with pytest.raises(sl.SchedlangError):
        F.concat([Tensor(rnd(2, 3)), Tensor(rnd(3, 4))], axis=0).numpy()


def test_concat_compiled():
    a = Tensor.input("a", (2, 3))
    b = Tensor.input("b", (1, 3))
    kern = sl.compile(F.concat([a, b], axis=0).relu())
    A, B = rnd(2, 3), rnd(1, 3, seed=1)
    close(kern(a=A, b=B), np.maximum(np.concatenate([A, B]), 0))


# ---------------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------------

MM = [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (2, 4, 1)),
]


@pytest.mark.parametrize("sa,sb", MM, ids=[f"{a}@{b}" for a, b in MM])
def test_matmul_operator(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    close(Tensor(a) @ Tensor(b), np.matmul(a, b), dtype=np.float32)


@pytest.mark.parametrize("sa,sb", MM[:3], ids=[f"{a}@{b}" for a, b in MM[:3]])
def test_matmul_method_and_function(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    close(Tensor(a).matmul(Tensor(b)), np.matmul(a, b))
    close(F.matmul(Tensor(a), Tensor(b)), np.matmul(a, b))


def test_matmul_int32():
    a, b = ints(3, 4), ints(4, 2, seed=1)
    close(Tensor(a) @ Tensor(b), a @ b, dtype=np.int32)


def test_matmul_float64():
    a, b = rnd(3, 4, dtype=np.float64), rnd(4, 2, seed=1, dtype=np.float64)
    close(Tensor(a) @ Tensor(b), a @ b, dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_matmul_inner_mismatch_error():
    with pytest.raises(sl.SchedlangError) as ei:
        (Tensor(rnd(3, 4)) @ Tensor(rnd(5, 2))).numpy()
    msg = str(ei.value)
    assert "4" in msg and "5" in msg, msg


def test_matmul_batch_mismatch_error():
    with pytest.raises(sl.SchedlangError):
        (Tensor(rnd(2, 3, 4)) @ Tensor(rnd(3, 4, 5))).numpy()


def test_matmul_after_transpose():
    a, b = rnd(4, 3), rnd(4, 5, seed=1)
    close(Tensor(a).transpose(1, 0) @ Tensor(b), a.T @ b)


# ---------------------------------------------------------------------------------------------
# conv / pooling
# ---------------------------------------------------------------------------------------------

CONV = [
    dict(),
    dict(padding=1),
    dict(stride=2),
    dict(stride=2, padding=1),
    dict(dilation=2),
    dict(dilation=2, padding=2),
    dict(groups=2),
    dict(groups=4, padding=1),
    dict(stride=(1, 2), padding=(1, 0)),
    dict(stride=2, padding=1, dilation=2, groups=2),
]


def _conv_case(kw):
    groups = kw.get("groups", 1)
    x = rnd(2, 4, 7, 7, seed=11)
    w = rnd(4, 4 // groups, 3, 3, seed=12)
    ref = torch.nn.functional.conv2d(tt(x), tt(w), **kw).numpy()
    return x, w, ref


@needs_torch
@pytest.mark.parametrize("kw", CONV, ids=str)
def test_conv2d_function_vs_torch(kw):
    x, w, ref = _conv_case(kw)
    close(F.conv2d(Tensor(x), Tensor(w), **kw), ref)


@needs_torch
@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, groups=2)], ids=str)
def test_conv2d_method_vs_torch(kw):
    x, w, ref = _conv_case(kw)
    close(Tensor(x).conv2d(Tensor(w), **kw), ref)


@needs_torch
def test_conv2d_rect_kernel():
    x, w = rnd(1, 3, 6, 5, seed=1), rnd(2, 3, 1, 3, seed=2)
    ref = torch.nn.functional.conv2d(tt(x), tt(w), padding=(0, 1)).numpy()
    close(F.conv2d(Tensor(x), Tensor(w), padding=(0, 1)), ref)


def test_conv2d_channel_mismatch_error():
    with pytest.raises(sl.SchedlangError):
        F.conv2d(Tensor(rnd(1, 3, 5, 5)), Tensor(rnd(2, 4, 3, 3))).numpy()


POOL = [
    dict(kernel_size=2),
    dict(kernel_size=2, stride=1),
    dict(kernel_size=3, stride=2),
    dict(kernel_size=3, stride=1, padding=1),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(2, 1)),
]


@needs_torch
@pytest.mark.parametrize("kw", POOL, ids=str)
def test_max_pool2d_vs_torch(kw):
    x = rnd(1, 2, 7, 7, seed=3)
    ref = torch.nn.functional.max_pool2d(tt(x), **kw).numpy()
    close(F.max_pool2d(Tensor(x), **kw), ref)
    close(Tensor(x).max_pool2d(**kw), ref)


@needs_torch
def test_max_pool2d_pads_with_minus_inf():
    x = -np.abs(rnd(1, 1, 4, 4, seed=4)) - 1.0     # all negative
    ref = torch.nn.functional.max_pool2d(tt(x), 3, stride=1, padding=1).numpy()
    out = close(F.max_pool2d(Tensor(x), 3, stride=1, padding=1), ref)
    assert (out < 0).all()


@needs_torch
@pytest.mark.parametrize("kw", POOL[:3] + POOL[5:], ids=str)
def test_avg_pool2d_vs_torch(kw):
    x = rnd(1, 2, 7, 7, seed=5)
    ref = torch.nn.functional.avg_pool2d(tt(x), **kw).numpy()
    close(F.avg_pool2d(Tensor(x), **kw), ref)
    close(Tensor(x).avg_pool2d(**kw), ref)


@needs_torch
def test_avg_pool2d_padding_vs_torch_default():
    x = rnd(1, 2, 6, 6, seed=6)
    ref = torch.nn.functional.avg_pool2d(tt(x), 3, stride=2, padding=1).numpy()
    close(F.avg_pool2d(Tensor(x), 3, stride=2, padding=1), ref)


@needs_torch
def test_pool_positional_kernel():
    x = rnd(1, 1, 4, 4)
    close(F.max_pool2d(Tensor(x), 2), torch.nn.functional.max_pool2d(tt(x), 2).numpy())
    close(F.avg_pool2d(Tensor(x), 2), torch.nn.functional.avg_pool2d(tt(x), 2).numpy())


# ---------------------------------------------------------------------------------------------
# nn ops vs torch
# ---------------------------------------------------------------------------------------------

S = rnd(2, 3, 5, seed=8) * 3


@needs_torch
@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -2])
def test_softmax_vs_torch(axis):
    ref = torch.softmax(tt(S), axis).numpy()
    close(Tensor(S).softmax(axis), ref)
    close(F.softmax(Tensor(S), axis), ref)


@needs_torch
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax_vs_torch(axis):
    ref = torch.log_softmax(tt(S), axis).numpy()
    close(Tensor(S).log_softmax(axis), ref)
    close(F.log_softmax(Tensor(S), axis), ref)


@needs_torch
def test_softmax_large_logits_stable():
    a = np.array([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 50.0]], np.float32)
    ref = torch.softmax(tt(a), -1).numpy()
    out = close(Tensor(a).softmax(-1), ref)
    assert np.isfinite(out).all()


@needs_torch
def test_log_softmax_large_logits_stable():
    a = np.array([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 50.0]], np.float32)
    ref = torch.log_softmax(tt(a), -1).numpy()
    out = close(Tensor(a).log_softmax(-1), ref)
    assert np.isfinite(out).all()


def test_softmax_rows_sum_to_one():
    out = Tensor(S).softmax(-1).numpy()
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)


@needs_torch
def test_layernorm_no_affine_vs_torch():
    ref = torch.nn.functional.layer_norm(tt(S), (5,), eps=1e-5).numpy()
    close(Tensor(S).layernorm(), ref)
    close(F.layernorm(Tensor(S)), ref)


@needs_torch
def test_layernorm_weight_bias_vs_torch():
    w, b = rnd(5, seed=1), rnd(5, seed=2)
    ref = torch.nn.functional.layer_norm(tt(S), (5,), tt(w), tt(b), eps=1e-5).numpy()
    close(F.layernorm(Tensor(S), Tensor(w), Tensor(b)), ref)
    close(Tensor(S).layernorm(weight=Tensor(w), bias=Tensor(b)), ref)


@needs_torch
def test_layernorm_weight_only_vs_torch():
    w = rnd(5, seed=1)
    ref = torch.nn.functional.layer_norm(tt(S), (5,), tt(w), None, eps=1e-5).numpy()
    close(F.layernorm(Tensor(S), weight=Tensor(w)), ref)


@needs_torch
def test_layernorm_eps_is_1e5():
    # a near-constant row: the eps dominates the variance, so a wrong eps shows
    a = np.array([[1.0, 1.001, 0.999, 1.0]], np.float32)
    ref = torch.nn.functional.layer_norm(tt(a), (4,), eps=1e-5).numpy()
    close(Tensor(a).layernorm(), ref, rtol=1e-3, atol=1e-3)


@needs_torch
def test_gelu_is_exact_erf_not_tanh():
    a = np.linspace(-4, 4, 33).astype(np.float32)
    exact = torch.nn.functional.gelu(tt(a), approximate="none").numpy()
    out = close(Tensor(a).gelu(), exact, rtol=1e-5, atol=1e-6)
    tanh_ = torch.nn.functional.gelu(tt(a), approximate="tanh").numpy()
    assert np.abs(out - tanh_).max() > 1e-5


@needs_torch
def test_sigmoid_extremes():
    a = np.array([-100.0, -20.0, 0.0, 20.0, 100.0], np.float32)
    out = close(F.sigmoid(Tensor(a)), torch.sigmoid(tt(a)).numpy(), atol=1e-6)
    assert np.isfinite(out).all()


def test_relu_int32():
    a = ints(3, 4)
    close(Tensor(a).relu(), np.maximum(a, 0), dtype=np.int32)


@needs_torch
def test_nn_compiled_pipeline():
    x = Tensor.input("x", (2, 6))
    w = Tensor.input("w", (6, 4))
    y = (x @ w).gelu().softmax(-1)
    kern = sl.compile(y)
    X, W = rnd(2, 6), rnd(6, 4, seed=1)
    ref = torch.softmax(torch.nn.functional.gelu(tt(X) @ tt(W)), -1).numpy()
    close(kern(x=X, w=W), ref)


@needs_torch
def test_small_cnn_block_vs_torch():
    x, w = rnd(1, 2, 8, 8), rnd(4, 2, 3, 3, seed=1)
    y = F.max_pool2d(F.conv2d(Tensor(x), Tensor(w), padding=1).relu(), 2)
    ref = torch.nn.functional.max_pool2d(
        torch.relu(torch.nn.functional.conv2d(tt(x), tt(w), padding=1)), 2).numpy()
    close(y, ref)


# ---------------------------------------------------------------------------------------------
# more dtype / view / caching edge cases
# ---------------------------------------------------------------------------------------------

def test_eager_from_non_contiguous_arrays():
    a = rnd(4, 6)
    close(Tensor(a.T) + 0.0, a.T)
    close(Tensor(a[:, ::2]) * 1.0, a[:, ::2])
    close(Tensor(np.asfortranarray(a)) + 1.0, a + 1)


def test_float16_elementwise():
    h = np.linspace(-2, 2, 9).astype(np.float16)
    close(Tensor(h) + Tensor(h), h + h, dtype=np.float16, rtol=1e-3, atol=1e-3)


def test_int8_floordiv_mod_neg_literal():
    a = np.array([-128, -7, 7, 127], np.int8)
    close(Tensor(a) // 3, a // np.int8(3), dtype=np.int8)
    close(Tensor(a) % -3, a % np.int8(-3), dtype=np.int8)


def test_int_literal_not_fitting_is_algorithm_error():
    with pytest.raises(sl.AlgorithmError):
        (Tensor(np.zeros(3, np.uint8)) + 300).numpy()


def test_repeated_axis_error():
    with pytest.raises(sl.SchedlangError):
        Tensor(A3).sum((1, -2)).numpy()


def test_matmul_rank5_batch_broadcast():
    a, b = rnd(2, 3, 1, 3, 4), rnd(5, 4, 2, seed=1)
    close(Tensor(a) @ Tensor(b), a @ b)


def test_matmul_of_views():
    a = rnd(4, 4)
    close(Tensor(a)[:, 1:3].permute(1, 0) @ Tensor(a)[:, ::2], a[:, 1:3].T @ a[:, ::2])


@needs_torch
def test_softmax_layernorm_on_permuted_views():
    a = rnd(2, 3, 4)
    close(Tensor(a).permute(2, 0, 1).softmax(1),
          torch.softmax(tt(a).permute(2, 0, 1), 1).numpy())
    close(Tensor(a).permute(0, 2, 1).layernorm(),
          torch.nn.functional.layer_norm(tt(a).permute(0, 2, 1), (3,), eps=1e-5).numpy())


def test_pad_then_slice_and_expand_then_slice():
    a = rnd(4, 4)
    close(Tensor(a).pad(((2, 2), (2, 2)))[1:-1, ::3], np.pad(a, 2)[1:-1, ::3])
    close(Tensor(a[:1]).expand((5, 4))[1:4, ::-1], np.broadcast_to(a[:1], (5, 4))[1:4, ::-1])


@needs_torch
def test_conv2d_all_options_asymmetric():
    x, w = rnd(2, 4, 9, 7, seed=1), rnd(6, 2, 2, 3, seed=2)
    kw = dict(stride=(2, 3), padding=(1, 2), dilation=(3, 1), groups=2)
    close(F.conv2d(Tensor(x), Tensor(w), **kw),
          torch.nn.functional.conv2d(tt(x), tt(w), **kw).numpy())


@needs_torch
def test_pools_asymmetric_with_padding():
    x = rnd(2, 3, 7, 6, seed=4)
    kw = dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1))
    close(F.max_pool2d(Tensor(x), **kw), torch.nn.functional.max_pool2d(tt(x), **kw).numpy())
    close(F.avg_pool2d(Tensor(x), **kw), torch.nn.functional.avg_pool2d(tt(x), **kw).numpy())


@needs_torch
def test_nn_ops_float64():
    a = rnd(3, 5, dtype=np.float64)
    ta = torch.from_numpy(a)
    tol = dict(rtol=1e-9, atol=1e-9, dtype=np.float64)
    close(Tensor(a).softmax(-1), torch.softmax(ta, -1).numpy(), **tol)
    close(Tensor(a).gelu(), torch.nn.functional.gelu(ta).numpy(), **tol)
    close(Tensor(a).sigmoid(), torch.sigmoid(ta).numpy(), **tol)
    close(Tensor(a).layernorm(), torch.nn.functional.layer_norm(ta, (5,), eps=1e-5).numpy(),
          **tol)


def test_cache_same_tensor_twice_vs_two_tensors():
    a, b = rnd(2, 3), rnd(2, 3, seed=1)
    ta = Tensor(a)
    close(ta - ta, np.zeros_like(a))
    close(Tensor(a) - Tensor(b), a - b)
    close(Tensor(b) - Tensor(a), b - a)
    tb = Tensor(b)
    close(tb - tb, np.zeros_like(b))


def test_cache_literal_and_axis_are_part_of_structure():
    a = rnd(4, 4)
    close(Tensor(a) * 2.0, a * 2)
    close(Tensor(a) * 3.0, a * 3)
    close(Tensor(a).sum(0), a.sum(0))
    close(Tensor(a).sum(1), a.sum(1))
    close(Tensor(a)[1:3], a[1:3])
    close(Tensor(a)[2:4], a[2:4])
    close(Tensor(a).pad(((1, 0), (0, 0))), np.pad(a, ((1, 0), (0, 0))))
    close(Tensor(a).pad(((0, 1), (0, 0))), np.pad(a, ((0, 1), (0, 0))))


def test_compile_same_structure_different_input_names():
    k1 = sl.compile(Tensor.input("p", (2, 3)) + 1.0)
    k2 = sl.compile(Tensor.input("q", (2, 3)) + 1.0)
    a = rnd(2, 3)
    close(k1(p=a), a + 1)
    close(k2(q=a), a + 1)


def test_compile_same_structure_different_constants():
    x = Tensor.input("x", (2, 3))
    c1, c2 = rnd(2, 3, seed=1), rnd(2, 3, seed=2)
    k1, k2 = sl.compile(x + Tensor(c1)), sl.compile(x + Tensor(c2))
    a = rnd(2, 3)
    close(k1(x=a), a + c1)
    close(k2(x=a), a + c2)


def test_compile_operand_order_matters():
    x, y = Tensor.input("x", (2, 3)), Tensor.input("y", (2, 3))
    k1, k2 = sl.compile(x - y), sl.compile(y - x)
    a, b = rnd(2, 3), rnd(2, 3, seed=1)
    close(k1(x=a, y=b), a - b)
    close(k2(x=a, y=b), b - a)


def test_compiled_kernel_extra_argument_is_argument_error():
    kern = sl.compile(Tensor.input("x", (2,)) + 1.0)
    with pytest.raises(sl.ArgumentError):
        kern(x=np.zeros(2, np.float32), y=np.zeros(2, np.float32))


@needs_torch
def test_compiled_kernel_out_and_dlpack():
    kern = sl.compile(Tensor.input("x", (2, 3)) * 2.0)
    a = rnd(2, 3)
    o = np.empty((2, 3), np.float32)
    kern(x=a, out=o)
    close(o, a * 2)
    close(kern(x=torch.from_numpy(a)), a * 2)


def test_compiled_kernel_has_source_loop_ir_time():
    kern = sl.compile(Tensor.input("x", (2, 3)).exp(), target="llvm")
    assert kern.source and str(kern.loop_ir)
    assert kern.time(x=rnd(2, 3)) is not None


def test_duplicate_input_names_rejected():
    with pytest.raises(sl.SchedlangError):
        sl.compile(Tensor.input("x", (2,)) + Tensor.input("x", (2,)))


def test_numpy_on_symbolic_input_is_error():
    with pytest.raises(sl.SchedlangError):
        (Tensor.input("x", (2,)) + 1.0).numpy()


@pytest.mark.parametrize("make", [
    lambda: Tensor(rnd(2, 3)).softmax(2),
    lambda: F.concat([Tensor(rnd(2, 3))] * 2, axis=2),
    lambda: Tensor(rnd(2, 3)).permute(0, 0),
    lambda: Tensor(rnd(2, 3)).reshape(-1, -1),
    lambda: Tensor(rnd(2, 3)).pad(((-1, 0), (0, 0))),
    lambda: Tensor(rnd(2, 3))[0, 0, 0],
    lambda: F.conv2d(Tensor(rnd(1, 1, 2, 2)), Tensor(rnd(1, 1, 3, 3))),
    lambda: F.max_pool2d(Tensor(rnd(1, 1, 2, 2)), 3),
    lambda: Tensor(rnd(2, 3)).layernorm(Tensor(rnd(4))),
    lambda: F.where(Tensor(rnd(2, 3)) > 0, Tensor(rnd(4)), 0.0),
    lambda: Tensor(rnd(3)) << 1,
], ids=["softmax-axis", "concat-axis", "permute", "reshape-2x-1", "pad-neg", "getitem-rank",
        "conv-kernel-too-big", "pool-too-big", "layernorm-weight", "where-bcast",
        "float-shift"])
def test_user_mistakes_are_schedlang_errors(make):
    with pytest.raises(sl.SchedlangError) as ei:
        r = make()
        r.numpy()
    assert len(str(ei.value)) > 10


# ---------------------------------------------------------------------------------------------
# §7 errors
# ---------------------------------------------------------------------------------------------

def test_error_hierarchy():
    for name in ("AlgorithmError", "ScheduleError", "CompileError", "ArgumentError"):
        cls = getattr(sl, name)
        assert issubclass(cls, sl.SchedlangError)
    assert issubclass(sl.SchedlangError, Exception)


# ---------------------------------------------------------------------------------------------
# §6 command line
# ---------------------------------------------------------------------------------------------

def _cli():
    exe = pathlib.Path(sys.executable).parent / "schedlang"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "schedlang"]


def _env():
    env = dict(os.environ)
    env.pop("BEAM", None)
    return env


def _in_process(monkeypatch, tmp_path, cli_run):
    """``cli_run`` (the command's ``main`` in this process) with the environment and the
    working folder the subprocess runs of this section get."""
    monkeypatch.delenv("BEAM", raising=False)
    monkeypatch.chdir(tmp_path)
    return cli_run


@needs_torch
def test_cli_bench_gemm_csv(tmp_path, monkeypatch, cli_run):
    out = tmp_path / "r.csv"
    run = _in_process(monkeypatch, tmp_path, cli_run)
    p = run("bench", "gemm", "--size", "64", "--threads", "1", "--csv", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip(), "bench printed no table"
    text = out.read_text()
    lines = text.splitlines()
    assert lines[0] == "workload,shape,system,threads,median_s,min_s,rate,unit", lines[0]
    rows = list(csv.DictReader(text.splitlines()))
    assert rows
    systems = {r["system"] for r in rows}
    assert "schedlang" in systems
    assert systems <= {"schedlang", "schedlang-beam", "numpy", "torch", "halide"}, systems
    for r in rows:
        assert r["workload"] == "gemm"
        assert r["shape"] == "64x64x64", r["shape"]
        assert int(r["threads"]) == 1
        med, mn, rate = float(r["median_s"]), float(r["min_s"]), float(r["rate"])
        assert 0 < mn <= med < 10, r
        assert rate > 0 and math.isfinite(rate)
        assert r["unit"] == "GFLOP/s", r["unit"]
        # rate is consistent with 2*M*N*K flops over the median (or min) time
        flops = 2 * 64 ** 3
        assert any(abs(rate - flops / t / 1e9) <= 0.05 * rate for t in (med, mn)), r


def test_cli_show_gemm():
    p = subprocess.run(_cli() + ["show", "gemm"], capture_output=True, text=True, timeout=50,
                       env=_env())
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(p.stdout.strip()) > 20


def test_cli_python_dash_m():
    p = subprocess.run([sys.executable, "-m", "schedlang", "show", "gemm"], capture_output=True,
                       text=True, timeout=50, env=_env())
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip()


def test_cli_unknown_workload_fails_cleanly(tmp_path, monkeypatch, cli_run):
    p = _in_process(monkeypatch, tmp_path, cli_run)("show", "no_such_workload")
    assert p.returncode != 0
    assert "Traceback" not in p.stderr


def _bench_rows(run, tmp_path, args):
    out = tmp_path / "r.csv"
    p = run("bench", *args, "--threads", "1", "--csv", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    text = out.read_text()
    assert text.splitlines()[0] == "workload,shape,system,threads,median_s,min_s,rate,unit"
    return list(csv.DictReader(text.splitlines()))


def test_cli_bench_compare_selects_systems_softmax(tmp_path, monkeypatch, cli_run):
    rows = _bench_rows(_in_process(monkeypatch, tmp_path, cli_run), tmp_path,
                       ["softmax", "--size", "8x32", "--compare", "numpy"])
    assert {r["system"] for r in rows} == {"schedlang", "numpy"}
    for r in rows:
        assert r["workload"] == "softmax" and r["shape"] == "8x32"
        assert r["unit"] in ("GB/s", "GFLOP/s")
        assert float(r["rate"]) > 0 and 0 < float(r["min_s"]) <= float(r["median_s"])


@needs_torch
def test_cli_bench_conv_shape(tmp_path, monkeypatch, cli_run):
    rows = _bench_rows(_in_process(monkeypatch, tmp_path, cli_run), tmp_path,
                       ["conv", "--size", "1x4x8x8x4", "--compare", "torch"])
    assert {r["system"] for r in rows} == {"schedlang", "torch"}
    for r in rows:
        assert r["workload"] == "conv" and r["shape"] == "1x4x8x8x4"
        assert r["unit"] == "GFLOP/s"
        flops = 2 * 1 * 4 * 4 * 9 * 8 * 8
        rate = float(r["rate"])
        assert any(abs(rate - flops / float(r[k]) / 1e9) <= 0.05 * rate
                   for k in ("median_s", "min_s")), r


def test_cli_bench_gemm_mxnxk(tmp_path, monkeypatch, cli_run):
    rows = _bench_rows(_in_process(monkeypatch, tmp_path, cli_run), tmp_path,
                       ["gemm", "--size", "16x32x8", "--compare", "numpy"])
    assert {r["shape"] for r in rows} == {"16x32x8"}
