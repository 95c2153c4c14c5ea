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


def test_int_true_division_gives_float64_as_numpy():
    check(Tensor(I) / Tensor(J), I / J, rtol=1e-12)
    big = np.array([16777217, -16777219, 7], np.int32)
    check(Tensor(big) / 1, big / 1, rtol=0)          # float32 would round these
    check(3 / Tensor(big), 3 / big, rtol=1e-15)
    u8 = np.array([200, 3, 7], np.uint8)
    check(Tensor(u8) / Tensor(u8[::-1].copy()), u8 / u8[::-1], rtol=1e-15)
    flags = np.array([True, False])
    check(Tensor(flags) / Tensor(np.array([True, True])), flags / np.array([True, True]))
    check(Tensor(I) / 2.0, I.astype(np.float32) / np.float32(2.0))   # a float literal: float32


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
    check(F.where(x, x, 0), np.where(A, A, np.float32(0)))     # nonzero holds, as numpy


def test_broadcast_mismatch_names_shapes():
    with pytest.raises(sl.AlgorithmError, match=r"\(3, 10\).*\(4,\)"):
        Tensor(A) + Tensor(np.zeros(4, np.float32))


def test_broadcast_shapes_helper():
    assert F.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert F.broadcast_shapes((1,), ()) == (1,)


# ---------------------------------------------------------------------- conformance fixes

def test_int64_mixed_with_floats_promotes_to_float64_as_numpy():
    # np.arange gives int64, which has no lossless common type with a float: numpy
    # computes in float64 (the algorithm language alone would ask for a cast)
    n = np.arange(10, dtype=np.int64)
    h = B.astype(np.float16)
    check(Tensor(n) * Tensor(B), n * B)
    check(Tensor(n) + Tensor(B.astype(np.float64)), n + B.astype(np.float64))
    check(Tensor(n) < Tensor(h), n < h)
    check(F.maximum(Tensor(n.astype(np.uint64)), Tensor(n - 5)),
          np.maximum(n.astype(np.uint64), n - 5))
    check(F.where(Tensor(B > 0), Tensor(n), Tensor(B)), np.where(B > 0, n, B))
    check(Tensor(n) * np.float32(0.5), n * np.float32(0.5))


def test_mixed_promotion_in_a_compiled_kernel():
    x = Tensor.input("x", (10,), sl.int64)
    y = Tensor.input("y", (3, 10))
    out = sl.compile(x * y)(x=np.arange(10), y=A)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.arange(10) * A)


def test_integer_pow_stays_integer():
    base = np.array([2, 3, -2, 5, 0, 1], np.int32)
    exp_ = np.array([3, 2, 3, 0, 4, 30], np.int32)
    check(Tensor(base) ** Tensor(exp_), base ** exp_)
    check(2 ** Tensor(exp_[:4]), 2 ** exp_[:4])
    check(F.pow(Tensor(base.astype(np.int64)), 20), base.astype(np.int64) ** 20)
    check(Tensor(np.array([3, 2], np.uint8)) ** Tensor(np.array([5, 9], np.uint8)),
          np.array([3, 2], np.uint8) ** np.array([5, 9], np.uint8))      # wraps, as numpy
    k = np.arange(70, dtype=np.int64)
    check(2 ** Tensor(k), 2 ** k)           # 2**63 wraps, and beyond 64 bits it is 0
    x = Tensor.input("x", (6,), sl.int32)
    np.testing.assert_array_equal(sl.compile(x ** 3)(x=base), base ** 3)


def test_integer_pow_with_negative_exponents():
    # a tensor exponent below zero gives torch's result: 0 unless the base is 1 or -1
    base = np.array([2, 1, -1, -1, 3], np.int32)
    exp_ = np.array([-1, -3, -3, -2, -2], np.int32)
    check(Tensor(base) ** Tensor(exp_), np.array([0, 1, -1, 1, 0], np.int32))
    with pytest.raises(sl.AlgorithmError, match="pow.*negative power -1"):
        Tensor(base) ** -1


def test_floor_and_ceil_keep_integers():
    check(F.floor(Tensor(I)), np.floor(I))          # numpy 2 and torch keep int32
    check(Tensor(I).ceil(), np.ceil(I))
    check(Tensor(A).floor(), np.floor(A))


def test_logical_ops_give_bool_bitwise_ops_keep_ints():
    check(F.logical_not(Tensor(I)), np.logical_not(I))
    check(F.logical_and(Tensor(I), Tensor(J)), np.logical_and(I, J))
    check(Tensor(I).logical_or(Tensor(A)), np.logical_or(I, A))
    check(F.logical_xor(Tensor(I > 0), Tensor(A > 0)), np.logical_xor(I > 0, A > 0))
    check(Tensor(I) & Tensor(J), I & J)
    check(Tensor(I) | 3, I | 3)
    check(Tensor(I) ^ Tensor(J), I ^ J)
    check(~Tensor(I), ~I)
    check(~(Tensor(A) > 0), ~(A > 0))
    check(Tensor(J) << 2, J << 2)
    check(Tensor(I) >> 1, I >> 1)


def test_nan_propagates_through_relu_maximum_minimum_clamp():
    v = np.array([np.nan, -1.0, 2.0, np.nan], np.float32)
    w = np.array([0.0, np.nan, 1.0, np.nan], np.float32)
    check(F.relu(Tensor(v)), np.where(np.isnan(v), v, np.maximum(v, 0)))
    check(F.maximum(Tensor(v), Tensor(w)), np.maximum(v, w))
    check(F.minimum(Tensor(v), Tensor(w)), np.minimum(v, w))
    check(Tensor(v).clamp(0, 1), np.clip(v, 0, 1))


def test_clamp_with_one_bound():
    check(Tensor(A).clamp(min=0), np.maximum(A, 0))
    check(F.clamp(Tensor(I), max=3), np.minimum(I, 3))
    check(Tensor(A).clamp(-0.5, 0.5), np.clip(A, -0.5, 0.5))
    with pytest.raises(sl.AlgorithmError, match="clamp"):
        F.clamp(Tensor(A))


def test_bad_data_is_an_error_naming_the_op():
    with pytest.raises(sl.AlgorithmError, match="mul.*rectangular"):
        Tensor(A) * [[1, 2], [3]]
    with pytest.raises(sl.AlgorithmError, match="Tensor"):
        Tensor([[1, 2], [3]])


def test_bool_arithmetic_follows_numpy():
    b = np.array([True, False, True])
    check(Tensor(b) + Tensor(b), b + b)                  # logical or, bool
    check(Tensor(b) * Tensor(~b), b * ~b)                # logical and, bool
    check(Tensor(b) + True, b + True)
    one = np.ones(3, bool)
    check(Tensor(b) // Tensor(one), b // one)             # int8, as numpy
    check(Tensor(b) % Tensor(one), b % one)
    for bad in (lambda: -Tensor(b), lambda: Tensor(b) - Tensor(b), lambda: F.sub(b, True)):
        with pytest.raises(sl.AlgorithmError, match=r"(neg|sub): bool operands cannot be"):
            bad()


def test_numpy_scalars_are_typed_not_weak():
    x = np.ones(3, np.float32)
    check(Tensor(x) + np.float64(2), x + np.float64(2))          # float64, as numpy 2
    check(Tensor(x) + 2.0, x + 2.0)                              # a Python float is weak
    check(Tensor(np.ones(3, np.int8)) + np.int64(2), np.ones(3, np.int8) + np.int64(2))


@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%", "**", "&", "|", "^", "<<", ">>"])
def test_numpy_scalars_on_the_left_are_typed_too(op):
    # np.uint8(2) + int8 data is int16 in numpy, whichever side the scalar is on
    i8 = np.arange(1, 4, dtype=np.int8)
    a = np.uint8(2)
    check(eval(f"a {op} Tensor(i8)"), eval(f"a {op} i8"))
    check(eval(f"np.int64(300) {op} Tensor(i8)") if op not in ("**", "<<") else Tensor(i8),
          eval(f"np.int64(300) {op} i8") if op not in ("**", "<<") else i8)


def test_numpy_float_scalar_on_the_left_keeps_float64():
    x = np.linspace(0.5, 2, 4, dtype=np.float32)
    check(np.float64(2) + Tensor(x), np.float64(2) + x)
    check(F.add(np.float64(2), Tensor(x)), np.float64(2) + x)
    check(np.float64(2.5) ** Tensor(x), np.float64(2.5) ** x)
    # the algorithm language agrees: a numpy scalar is typed on either side
    A = sl.Input("A", sl.float32, (4,))
    assert (np.float64(2) * A[0]).dtype == sl.float64 == (A[0] * np.float64(2)).dtype


def test_big_endian_data_is_read_by_value():
    check(Tensor(np.arange(6, dtype=">f4")) * 2, np.arange(6, dtype=np.float32) * 2)


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_uint64_against_signed_integers_compares_exactly(op):
    # no integer type holds both; numpy compares them exactly, not through float64
    # (which would make 2**62 equal to 2**62 + 1)
    u = np.array([2**62, 2**63, 5, 0, 2**64 - 1], np.uint64)
    s = np.array([2**62 + 1, -1, 5, -5, -1], np.int64)
    check(eval(f"Tensor(u) {op} Tensor(s)"), eval(f"u {op} s"))
    check(eval(f"Tensor(s) {op} Tensor(u)"), eval(f"s {op} u"))
    i8 = np.array([-1, 3, 5, 0, -128], np.int8)
    check(eval(f"Tensor(u) {op} Tensor(i8)"), eval(f"u {op} i8"))
    check(eval(f"Tensor(u) {op} np.int64(-3)"), eval(f"u {op} np.int64(-3)"))


@pytest.mark.parametrize("make, expected", [
    (lambda u8, c: u8 << -1, "left_shift: 'a << -1': a shift amount cannot be negative"),
    (lambda u8, c: F.where(c, u8, -1), "where: the literal -1 does not fit sl.uint8"),
    (lambda u8, c: F.maximum(u8, 300), "maximum: the literal 300 does not fit sl.uint8"),
    (lambda u8, c: u8.clamp(-1, 5), "clamp: the literal -1 does not fit sl.uint8"),
])
def test_errors_of_an_elementwise_op_name_the_op_the_user_called(make, expected):
    u8 = Tensor(np.array([1, 2], np.uint8))
    c = Tensor(np.array([True, False]))
    with pytest.raises(sl.AlgorithmError) as e:
        make(u8, c)
    assert str(e.value).startswith(expected), str(e.value)
    assert "_p" not in str(e.value)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_bools_asks_for_a_cast(op):
    b = Tensor(np.ones((2, 3), bool))
    with pytest.raises(sl.AlgorithmError) as e:
        getattr(b, op)(-1)
    assert str(e.value).startswith(f"{op}: the input is bool") and "cast" in str(e.value)


@pytest.mark.parametrize("expr", ["X + 2", "X * 1", "X & 1", "X - 3", "2 ** X", "X // 2",
                                  "X << 1", "F.maximum(X, 3)"])
def test_bool_data_next_to_an_int_literal_is_int64_as_numpy_and_torch(expr):
    b = np.array([True, False, True])
    ref = eval(expr.replace("X", "b").replace("F.maximum", "np.maximum"))
    check(eval(expr.replace("X", "Tensor(b)")), ref)


def test_torch_bfloat16_data_and_int_array_shapes_are_accepted():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, -2.25, 3.0e3], dtype=torch.bfloat16)
    x = Tensor(t)
    assert x.dtype == sl.bfloat16 and x.shape == (3,)
    check(x.cast(sl.float32) * 2, (t.float() * 2).numpy())
    assert Tensor(np.zeros((2, 3, 4), np.float32)).reshape(np.array([4, 6])).shape == (4, 6)


def test_bfloat16_results_come_back_as_float32_values():
    # numpy has no bfloat16: .numpy() widens it exactly, as torch's x.float().numpy()
    v = np.array([1.0, 2.5, -3.0], np.float32)
    t = Tensor(v).cast(sl.bfloat16)
    check(t, v, rtol=0, atol=0)
    check(t + 1, v + 1, rtol=0, atol=0)
    check(t.max(), np.float32(2.5), rtol=0, atol=0)                  # 0-d
    # a compiled kernel still returns the bits
    bits = sl.compile(t * 2)()
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal((bits.astype(np.uint32) << 16).view(np.float32), 2 * v)


def test_where_of_bool_data_and_an_int_literal_is_int64_as_numpy():
    c = np.array([True, False, True])
    b = np.array([True, True, False])
    check(F.where(Tensor(c), Tensor(b), 0), np.where(c, b, 0))
    check(F.where(Tensor(c), 2, Tensor(b)), np.where(c, 2, b))
    check(F.where(Tensor(c), Tensor(b), False), np.where(c, b, False))     # stays bool


def test_relu_of_bool_is_refused_as_torch_does():
    with pytest.raises(sl.AlgorithmError, match=r"relu: bool input is not supported .*cast"):
        Tensor(np.array([True, False])).relu()
