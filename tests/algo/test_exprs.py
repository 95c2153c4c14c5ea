"""Conformance tests for the expression operators and math functions (SPEC section 1).

Every operator and intrinsic is compiled with the default schedule and compared to numpy.
"""
import math
import operator

import numpy as np
import pytest

import schedlang as sl

N = 37  # not a multiple of any vector width


def elementwise(fn, *arrays, dtypes):
    """Compile f[i] = fn(X0[i], X1[i], ...) over 1-D inputs and run it."""
    inputs = [sl.Input(f"X{k}", dtypes[k], ("N",)) for k in range(len(arrays))]
    i = sl.Var("i")
    f = sl.Func("f", shape=(inputs[0].shape[0],))
    f[i] = fn(*[X[i] for X in inputs])
    out = sl.compile(f)(**{f"X{k}": a for k, a in enumerate(arrays)})
    assert out.shape == arrays[0].shape
    return out


def rng_for(seed=0):
    return np.random.default_rng(seed)


def f32(rng, lo=-3.0, hi=3.0, n=N):
    return rng.uniform(lo, hi, n).astype(np.float32)


def i32(rng, lo=-100, hi=100, n=N):
    return rng.integers(lo, hi, n).astype(np.int32)


# --- binary arithmetic ----------------------------------------------------------------------

FLOAT_BINOPS = [
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("truediv", operator.truediv),
]


@pytest.mark.parametrize("name,op", FLOAT_BINOPS, ids=[n for n, _ in FLOAT_BINOPS])
@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.float64, np.float64)],
                         ids=["f32", "f64"])
def test_float_binary_ops(name, op, sl_t, np_t):
    rng = rng_for(1)
    a = rng.uniform(-3, 3, N).astype(np_t)
    b = rng.uniform(0.5, 3, N).astype(np_t) * rng.choice([-1, 1], N).astype(np_t)
    out = elementwise(op, a, b, dtypes=[sl_t, sl_t])
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_allclose(out, op(a, b), rtol=1e-6 if np_t is np.float32 else 1e-14)


INT_BINOPS = [
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("floordiv", operator.floordiv),
    ("mod", operator.mod),
    ("and", operator.and_),
    ("or", operator.or_),
    ("xor", operator.xor),
]


@pytest.mark.parametrize("name,op", INT_BINOPS, ids=[n for n, _ in INT_BINOPS])
def test_int32_binary_ops(name, op):
    rng = rng_for(2)
    a = i32(rng, -1000, 1000)
    b = i32(rng, 1, 50) * rng.choice([-1, 1], N).astype(np.int32)
    out = elementwise(op, a, b, dtypes=[sl.int32, sl.int32])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, op(a, b))


@pytest.mark.parametrize("name,op", INT_BINOPS, ids=[n for n, _ in INT_BINOPS])
def test_int_binary_ops_with_literal_both_sides(name, op):
    rng = rng_for(3)
    a = i32(rng, 1, 1000) * rng.choice([-1, 1], N).astype(np.int32)
    out = elementwise(lambda x: op(x, 7), a, dtypes=[sl.int32])
    np.testing.assert_array_equal(out, op(a, np.int32(7)))
    out = elementwise(lambda x: op(-13, x), a, dtypes=[sl.int32])
    np.testing.assert_array_equal(out, op(np.int32(-13), a))


@pytest.mark.parametrize("name,op", FLOAT_BINOPS, ids=[n for n, _ in FLOAT_BINOPS])
def test_float_binary_ops_with_literal_both_sides(name, op):
    rng = rng_for(4)
    a = rng.uniform(0.5, 3, N).astype(np.float32)
    out = elementwise(lambda x: op(x, 1.5), a, dtypes=[sl.float32])
    np.testing.assert_allclose(out, op(a, np.float32(1.5)), rtol=1e-6)
    out = elementwise(lambda x: op(2.5, x), a, dtypes=[sl.float32])
    np.testing.assert_allclose(out, op(np.float32(2.5), a), rtol=1e-6)


def test_unary_minus():
    rng = rng_for(5)
    a = f32(rng)
    np.testing.assert_array_equal(elementwise(lambda x: -x, a, dtypes=[sl.float32]), -a)
    b = i32(rng)
    np.testing.assert_array_equal(elementwise(lambda x: -x, b, dtypes=[sl.int32]), -b)


def test_pow_operator_float():
    rng = rng_for(6)
    a = rng.uniform(0.1, 3, N).astype(np.float32)
    b = rng.uniform(-2, 2, N).astype(np.float32)
    out = elementwise(lambda x, y: x ** y, a, b, dtypes=[sl.float32, sl.float32])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a ** b, rtol=1e-5)
    out2 = elementwise(lambda x: x ** 3, a, dtypes=[sl.float32])
    np.testing.assert_allclose(out2, a ** 3, rtol=1e-5)
    out3 = elementwise(lambda x: 2.0 ** x, b, dtypes=[sl.float32])
    np.testing.assert_allclose(out3, np.float32(2.0) ** b, rtol=1e-5)


def test_pow_operator_square_of_negative():
    a = np.array([-3.0, -1.5, 0.0, 2.0], dtype=np.float32)
    out = elementwise(lambda x: x ** 2.0, a, dtypes=[sl.float32])
    np.testing.assert_allclose(out, a * a, rtol=1e-6)


# --- bitwise ----------------------------------------------------------------------------------

def test_invert_signed_and_unsigned():
    rng = rng_for(7)
    a = i32(rng, -2**31, 2**31 - 1)
    out = elementwise(lambda x: ~x, a, dtypes=[sl.int32])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ~a)
    u = rng.integers(0, 256, N).astype(np.uint8)
    out = elementwise(lambda x: ~x, u, dtypes=[sl.uint8])
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, ~u)


@pytest.mark.parametrize("sl_t,np_t", [(sl.int32, np.int32), (sl.uint32, np.uint32),
                                       (sl.int64, np.int64), (sl.uint8, np.uint8)],
                         ids=["i32", "u32", "i64", "u8"])
def test_bitwise_and_or_xor(sl_t, np_t):
    rng = rng_for(8)
    info = np.iinfo(np_t)
    a = rng.integers(info.min, info.max, N, dtype=np_t, endpoint=True)
    b = rng.integers(info.min, info.max, N, dtype=np_t, endpoint=True)
    for op in (operator.and_, operator.or_, operator.xor):
        out = elementwise(op, a, b, dtypes=[sl_t, sl_t])
        assert out.dtype == np.dtype(np_t)
        np.testing.assert_array_equal(out, op(a, b))


@pytest.mark.parametrize("sl_t,np_t,bits", [(sl.int32, np.int32, 32), (sl.uint32, np.uint32, 32),
                                            (sl.int8, np.int8, 8), (sl.uint16, np.uint16, 16),
                                            (sl.int64, np.int64, 64)],
                         ids=["i32", "u32", "i8", "u16", "i64"])
def test_shifts(sl_t, np_t, bits):
    rng = rng_for(9)
    info = np.iinfo(np_t)
    a = rng.integers(info.min, info.max, N, dtype=np_t, endpoint=True)
    s = rng.integers(0, bits, N).astype(np_t)
    left = elementwise(lambda x, y: x << y, a, s, dtypes=[sl_t, sl_t])
    right = elementwise(lambda x, y: x >> y, a, s, dtypes=[sl_t, sl_t])
    assert left.dtype == np.dtype(np_t) and right.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(left, a << s)
    np.testing.assert_array_equal(right, a >> s)  # arithmetic for signed, logical for unsigned


def test_shift_by_literal():
    a = np.array([-8, -1, 0, 1, 5, 2**20], dtype=np.int32)
    np.testing.assert_array_equal(elementwise(lambda x: x << 3, a, dtypes=[sl.int32]), a << 3)
    np.testing.assert_array_equal(elementwise(lambda x: x >> 2, a, dtypes=[sl.int32]), a >> 2)
    np.testing.assert_array_equal(elementwise(lambda x: 1 << x, np.arange(10, dtype=np.int32),
                                              dtypes=[sl.int32]),
                                  np.int32(1) << np.arange(10, dtype=np.int32))


def test_bool_bitwise_ops():
    rng = rng_for(10)
    a = rng.integers(-5, 5, N).astype(np.int32)
    b = rng.integers(-5, 5, N).astype(np.int32)
    out = elementwise(lambda x, y: (x > 0) & (y < 0), a, b, dtypes=[sl.int32, sl.int32])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, (a > 0) & (b < 0))
    out = elementwise(lambda x, y: (x > 0) | (y < 0), a, b, dtypes=[sl.int32, sl.int32])
    np.testing.assert_array_equal(out, (a > 0) | (b < 0))
    out = elementwise(lambda x, y: (x > 0) ^ (y < 0), a, b, dtypes=[sl.int32, sl.int32])
    np.testing.assert_array_equal(out, (a > 0) ^ (b < 0))
    out = elementwise(lambda x: ~(x > 0), a, dtypes=[sl.int32])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, ~(a > 0))


# --- comparisons ---------------------------------------------------------------------------------

COMPARISONS = [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
               ("ge", operator.ge), ("eq", operator.eq), ("ne", operator.ne)]


@pytest.mark.parametrize("name,op", COMPARISONS, ids=[n for n, _ in COMPARISONS])
@pytest.mark.parametrize("sl_t,np_t", [(sl.int32, np.int32), (sl.float32, np.float32),
                                       (sl.uint8, np.uint8)], ids=["i32", "f32", "u8"])
def test_comparisons(name, op, sl_t, np_t):
    rng = rng_for(11)
    a = rng.integers(0, 5, N).astype(np_t)
    b = rng.integers(0, 5, N).astype(np_t)  # many equal pairs
    out = elementwise(op, a, b, dtypes=[sl_t, sl_t])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, op(a, b))
    out = elementwise(lambda x: op(x, 2), a, dtypes=[sl_t])
    np.testing.assert_array_equal(out, op(a, np_t(2)))


def test_signed_unsigned_comparison_is_by_value():
    a = np.array([-1, -128, 0, 127, 5], dtype=np.int8)
    b = np.array([255, 0, 0, 200, 4], dtype=np.uint8)
    out = elementwise(lambda x, y: x < y, a, b, dtypes=[sl.int8, sl.uint8])
    np.testing.assert_array_equal(out, a.astype(np.int16) < b.astype(np.int16))


# --- select / min / max / clamp / abs --------------------------------------------------------------

def test_select():
    rng = rng_for(12)
    a, b = f32(rng), f32(rng)
    out = elementwise(lambda x, y: sl.select(x > y, x * 2.0, y - 1.0), a, b,
                      dtypes=[sl.float32, sl.float32])
    np.testing.assert_allclose(out, np.where(a > b, a * 2, b - 1), rtol=1e-6)


def test_select_with_literal_branches():
    rng = rng_for(13)
    a = i32(rng)
    out = elementwise(lambda x: sl.select(x >= 0, 1, -1), a, dtypes=[sl.int32])
    np.testing.assert_array_equal(out, np.where(a >= 0, 1, -1))
    out = elementwise(lambda x: sl.select(x > 0, x, 0), a, dtypes=[sl.int32])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.maximum(a, 0))


def test_nested_select():
    a = np.arange(-6, 7, dtype=np.int32)
    out = elementwise(lambda x: sl.select(x < -2, -10, sl.select(x > 2, 10, x)), a,
                      dtypes=[sl.int32])
    np.testing.assert_array_equal(out, np.where(a < -2, -10, np.where(a > 2, 10, a)))


@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.int32, np.int32),
                                       (sl.uint16, np.uint16), (sl.float64, np.float64)],
                         ids=["f32", "i32", "u16", "f64"])
def test_min_max(sl_t, np_t):
    rng = rng_for(14)
    a = rng.integers(0, 1000, N).astype(np_t)
    b = rng.integers(0, 1000, N).astype(np_t)
    out = elementwise(sl.min, a, b, dtypes=[sl_t, sl_t])
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(out, np.minimum(a, b))
    out = elementwise(sl.max, a, b, dtypes=[sl_t, sl_t])
    np.testing.assert_array_equal(out, np.maximum(a, b))


def test_min_max_with_literal():
    rng = rng_for(15)
    a = f32(rng)
    np.testing.assert_array_equal(elementwise(lambda x: sl.max(x, 0.0), a, dtypes=[sl.float32]),
                                  np.maximum(a, 0))
    np.testing.assert_array_equal(elementwise(lambda x: sl.min(1.0, x), a, dtypes=[sl.float32]),
                                  np.minimum(a, 1))


@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.int32, np.int32),
                                       (sl.int8, np.int8)], ids=["f32", "i32", "i8"])
def test_clamp(sl_t, np_t):
    a = np.arange(-60, 60, 3).astype(np_t)
    out = elementwise(lambda x: sl.clamp(x, -20, 33), a, dtypes=[sl_t])
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(out, np.clip(a, -20, 33))


def test_clamp_with_expression_bounds():
    rng = rng_for(16)
    a, lo = f32(rng), f32(rng, -3, 0)
    hi = lo + f32(rng, 0, 2)
    out = elementwise(sl.clamp, a, lo, hi, dtypes=[sl.float32] * 3)
    np.testing.assert_array_equal(out, np.minimum(np.maximum(a, lo), hi))


@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.int32, np.int32),
                                       (sl.float64, np.float64), (sl.int16, np.int16)],
                         ids=["f32", "i32", "f64", "i16"])
def test_abs(sl_t, np_t):
    a = np.arange(-20, 20).astype(np_t) * np_t(3)
    out = elementwise(sl.abs, a, dtypes=[sl_t])
    np.testing.assert_array_equal(out, np.abs(a))


# --- math intrinsics -----------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])

MATH = [
    ("exp", sl.exp, np.exp, (-5, 5)),
    ("log", sl.log, np.log, (0.01, 100)),
    ("sqrt", sl.sqrt, np.sqrt, (0, 100)),
    ("rsqrt", sl.rsqrt, lambda x: 1 / np.sqrt(x), (0.01, 100)),
    ("sin", sl.sin, np.sin, (-10, 10)),
    ("cos", sl.cos, np.cos, (-10, 10)),
    ("tanh", sl.tanh, np.tanh, (-6, 6)),
    ("floor", sl.floor, np.floor, (-10, 10)),
    ("ceil", sl.ceil, np.ceil, (-10, 10)),
    ("erf", sl.erf, _erf, (-4, 4)),
]


@pytest.mark.parametrize("name,fn,ref,rng_", MATH, ids=[m[0] for m in MATH])
def test_math_float32(name, fn, ref, rng_):
    rng = rng_for(17)
    a = rng.uniform(*rng_, 64).astype(np.float32)
    out = elementwise(fn, a, dtypes=[sl.float32])
    assert out.dtype == np.float32
    expect = ref(a.astype(np.float64))
    np.testing.assert_allclose(out, expect, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name,fn,ref,rng_", MATH, ids=[m[0] for m in MATH])
def test_math_float64(name, fn, ref, rng_):
    rng = rng_for(18)
    a = rng.uniform(*rng_, 64)
    out = elementwise(fn, a, dtypes=[sl.float64])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, ref(a), rtol=1e-12, atol=1e-15)


def test_floor_ceil_on_exact_values():
    a = np.array([-2.0, -1.5, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.5], dtype=np.float32)
    np.testing.assert_array_equal(elementwise(sl.floor, a, dtypes=[sl.float32]), np.floor(a))
    np.testing.assert_array_equal(elementwise(sl.ceil, a, dtypes=[sl.float32]), np.ceil(a))


def test_math_special_values():
    a = np.array([0.0, 1.0, 4.0], dtype=np.float32)
    np.testing.assert_array_equal(elementwise(sl.sqrt, a, dtypes=[sl.float32]), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(elementwise(sl.exp, np.zeros(3, np.float32),
                                              dtypes=[sl.float32]), [1.0, 1.0, 1.0])
    out = elementwise(sl.log, np.array([1.0, 0.0], np.float32), dtypes=[sl.float32])
    assert out[0] == 0.0 and out[1] == -np.inf


def test_math_on_float16_computes_in_float16_result():
    a = np.linspace(-2, 2, 16).astype(np.float16)
    out = elementwise(sl.exp, a, dtypes=[sl.float16])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), np.exp(a.astype(np.float64)), rtol=2e-3)


def test_pow_function():
    rng = rng_for(19)
    a = rng.uniform(0.1, 4, N).astype(np.float32)
    b = rng.uniform(-3, 3, N).astype(np.float32)
    out = elementwise(sl.pow, a, b, dtypes=[sl.float32, sl.float32])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.power(a.astype(np.float64), b), rtol=2e-5)
    out = elementwise(lambda x: sl.pow(x, 0.5), a, dtypes=[sl.float32])
    np.testing.assert_allclose(out, np.sqrt(a), rtol=2e-6)


def test_math_on_integer_argument_gives_float32():
    a = np.array([0, 1, 4, 9, 100], dtype=np.int32)
    out = elementwise(lambda x: sl.sqrt(sl.cast(sl.float32, x)), a, dtypes=[sl.int32])
    np.testing.assert_allclose(out, np.sqrt(a), rtol=1e-6)


# --- composite expressions, Params, intermediate Funcs --------------------------------------------

def test_params_in_expression():
    A = sl.Input("A", sl.float32, ("N",))
    alpha = sl.Param("alpha", sl.float32)
    beta = sl.Param("beta", sl.float32)
    n = sl.Param("n", sl.int32)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.select(i < n, alpha * A[i] + beta, 0.0)
    a = rng_for(20).standard_normal(N).astype(np.float32)
    out = sl.compile(f)(A=a, alpha=2.0, beta=-0.5, n=10)
    expect = np.where(np.arange(N) < 10, 2 * a - 0.5, 0).astype(np.float32)
    np.testing.assert_allclose(out, expect, rtol=1e-6)


def test_intermediate_funcs_compose():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    g = sl.Func("g")
    g[i] = A[i] * A[i]
    h = sl.Func("h")
    h[i] = sl.sqrt(g[i] + 1.0)
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = h[i] - g[i]
    a = rng_for(21).standard_normal(N).astype(np.float32)
    out = sl.compile(f)(A=a)
    np.testing.assert_allclose(out, np.sqrt(a * a + 1) - a * a, rtol=1e-5, atol=1e-6)


def test_two_dimensional_elementwise_and_transpose():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[1], A.shape[0]))
    f[i, j] = A[j, i] * 2.0 + sl.cast(sl.float32, i * 10 + j)
    a = rng_for(22).standard_normal((3, 5)).astype(np.float32)
    out = sl.compile(f)(A=a)
    assert out.shape == (5, 3)
    ii, jj = np.meshgrid(np.arange(5), np.arange(3), indexing="ij")
    np.testing.assert_allclose(out, a.T * 2 + (ii * 10 + jj), rtol=1e-6)
