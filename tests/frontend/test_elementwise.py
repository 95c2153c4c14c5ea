"""Elementwise ops, broadcasting and dtypes of the tensor frontend against numpy."""
import math

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

from .conftest import check

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 10)).astype(np.float32)
B = rng.standard_normal((10,)).astype(np.float32)
C = rng.standard_normal((3, 1)).astype(np.float32)
I = rng.integers(-20, 20, (3, 10)).astype(np.int32)
J = rng.integers(1, 7, (10,)).astype(np.int32)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_broadcast(op):
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    pyop = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
            "mul": lambda a, b: a * b, "div": lambda a, b: a / b}[op]
    check(pyop(Tensor(A), Tensor(B)), fn(A, B))
    check(getattr(F, op)(Tensor(C), Tensor(B)), fn(C, B))      # (3,1) x (10,) -> (3,10)


def test_scalars_both_sides():
    x = Tensor(A)
    check(2 * x + 1, 2 * A + 1)
    check(1 - x, 1 - A)
    check(1.0 / (x * x + 1), 1.0 / (A * A + 1))
    check(x ** 2, A ** 2)


def test_numpy_array_on_the_left():
    check(B + Tensor(A), B + A)


def test_int_ops_follow_python_floor_semantics():
    x, y = Tensor(I), Tensor(J)
    check(x // y, I // J)
    check(x % y, I % J)
    check(x // 3, I // 3)
    check(-x, -I)
    check(abs(x), np.abs(I))


def test_int_true_division_gives_float32():
    check(Tensor(I) / Tensor(J), (I / J).astype(np.float32), rtol=1e-6)


def test_weak_scalar_promotion():
    u8 = np.arange(250, 256, dtype=np.uint8)
    check(Tensor(u8) + 10, u8 + np.uint8(10))          # wraps like numpy 2
    check(Tensor(I) * 1.5, I.astype(np.float32) * np.float32(1.5))  # int * float literal: float32
    check(Tensor(u8) + Tensor(I[0, :6]), u8.astype(np.int32) + I[0, :6])


@pytest.mark.parametrize("op,ref", [("lt", np.less), ("le", np.less_equal),
                                    ("gt", np.greater), ("ge", np.greater_equal),
                                    ("eq", np.equal), ("ne", np.not_equal)])
def test_comparisons_give_bool(op, ref):
    x, y = Tensor(I), Tensor(J)
    check(getattr(F, op)(x, y), ref(I, J))


def test_comparison_operators():
    x = Tensor(A)
    check(x > 0, A > 0)
    check(x == Tensor(A), np.ones(A.shape, bool))
    check((x > 0) & (x < 1), (A > 0) & (A < 1))
    check(~(x > 0), ~(A > 0))


@pytest.mark.parametrize("name", ["exp", "sin", "cos", "tanh"])
def test_math(name):
    check(getattr(Tensor(A), name)(), getattr(np, name)(A), rtol=1e-5, atol=1e-6)


def test_log_sqrt_rsqrt():
    p = np.abs(A) + 0.5
    check(Tensor(p).log(), np.log(p), atol=1e-6)
    check(F.sqrt(Tensor(p)), np.sqrt(p))
    check(Tensor(p).rsqrt(), 1 / np.sqrt(p), rtol=1e-4)


def test_activations():
    x = Tensor(A)
    check(x.relu(), np.maximum(A, 0))
    check(F.relu(Tensor(I)), np.maximum(I, 0))
    check(x.sigmoid(), 1 / (1 + np.exp(-A)), atol=1e-6)
    erf = np.vectorize(math.erf)
    ref = (0.5 * A.astype(np.float64) * (1 + erf(A / math.sqrt(2)))).astype(np.float32)
    check(F.gelu(x), ref, rtol=1e-5, atol=1e-6)


def test_cast():
    check(Tensor(A * 10).cast(sl.int32), (A * 10).astype(np.int32))
    check(F.cast(Tensor(I), sl.float64), I.astype(np.float64))
    check(Tensor(I).cast(sl.bool), I != 0)


def test_where():
    x = Tensor(A)
    check(F.where(x > 0, x, 0.1 * x), np.where(A > 0, A, np.float32(0.1) * A))
    check(F.where(Tensor(C) > 0, Tensor(B), 0.0), np.where(C > 0, B, np.float32(0)))
    with pytest.raises(sl.AlgorithmError, match="bool"):
        F.where(x, x, 0)


def test_broadcast_mismatch_names_shapes():
    with pytest.raises(sl.AlgorithmError, match=r"\(3, 10\).*\(4,\)"):
        Tensor(A) + Tensor(np.zeros(4, np.float32))


def test_broadcast_shapes_helper():
    assert F.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert F.broadcast_shapes((1,), ()) == (1,)
