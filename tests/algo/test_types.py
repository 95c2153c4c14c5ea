"""Conformance tests for the type rules of the algorithm language (SPEC section 1).

Covers: every dtype, weak Python literals (NEP 50 style), lossless implicit widening,
lossy mixes being AlgorithmError, floor // and %, sl.cast with C semantics and the
bool / bfloat16 array conventions, and the numpy dtype of compiled results.
"""
import numpy as np
import pytest

import schedlang as sl

N = 16

ALL_DTYPES = [
    ("bool", np.bool_),
    ("int8", np.int8),
    ("int16", np.int16),
    ("int32", np.int32),
    ("int64", np.int64),
    ("uint8", np.uint8),
    ("uint16", np.uint16),
    ("uint32", np.uint32),
    ("uint64", np.uint64),
    ("float16", np.float16),
    ("bfloat16", np.uint16),  # bfloat16 arrays travel as their uint16 bit patterns
    ("float32", np.float32),
    ("float64", np.float64),
]
NUMPY_LIKE = [(n, t) for n, t in ALL_DTYPES if n not in ("bool", "bfloat16")]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def dt(name):
    return getattr(sl, name)


def elementwise(fn, *arrays, dtypes):
    """Compile f[i] = fn(X0[i], X1[i], ...) over 1-D inputs of the given sl dtypes and run it."""
    n = len(arrays[0])
    inputs = [sl.Input(f"X{k}", dtypes[k], ("N",)) for k in range(len(arrays))]
    i = sl.Var("i")
    f = sl.Func("f", shape=(inputs[0].shape[0],))
    f[i] = fn(*[X[i] for X in inputs])
    out = sl.compile(f)(**{f"X{k}": a for k, a in enumerate(arrays)})
    assert out.shape == (n,)
    return out


def random_array(name, rng, n=N):
    np_t = dict(ALL_DTYPES)[name]
    if name == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if name == "bfloat16":
        return f32_to_bf16_bits(rng.standard_normal(n).astype(np.float32) * 10)
    if np.issubdtype(np_t, np.integer):
        info = np.iinfo(np_t)
        return rng.integers(info.min, info.max, n, dtype=np_t, endpoint=True)
    return (rng.standard_normal(n) * 100).astype(np_t)


# --- bfloat16 reference (round to nearest even on the float32 bit pattern) ------------

def f32_to_bf16_bits(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


# --- every dtype ---------------------------------------------------------------------

def test_all_dtypes_exported():
    for name, _ in ALL_DTYPES:
        assert hasattr(sl, name), name


@pytest.mark.parametrize("name,np_t", ALL_DTYPES, ids=[n for n, _ in ALL_DTYPES])
def test_identity_roundtrip_every_dtype(name, np_t):
    rng = np.random.default_rng(1)
    a = random_array(name, rng)
    out = elementwise(lambda x: x, a, dtypes=[dt(name)])
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("name,np_t", NUMPY_LIKE, ids=[n for n, _ in NUMPY_LIKE])
def test_add_same_dtype_matches_numpy(name, np_t):
    rng = np.random.default_rng(2)
    a = random_array(name, rng)
    b = random_array(name, rng)
    out = elementwise(lambda x, y: x + y, a, b, dtypes=[dt(name), dt(name)])
    assert out.dtype == np.dtype(np_t)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a + b)  # integers wrap like C


@pytest.mark.parametrize("name,np_t", NUMPY_LIKE, ids=[n for n, _ in NUMPY_LIKE])
def test_mul_same_dtype_matches_numpy(name, np_t):
    rng = np.random.default_rng(3)
    a = random_array(name, rng)
    b = random_array(name, rng)
    out = elementwise(lambda x, y: x * y, a, b, dtypes=[dt(name), dt(name)])
    assert out.dtype == np.dtype(np_t)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a * b)


def test_bfloat16_add_result_is_bfloat16_bits():
    rng = np.random.default_rng(4)
    a = random_array("bfloat16", rng)
    b = random_array("bfloat16", rng)
    out = elementwise(lambda x, y: x + y, a, b, dtypes=[sl.bfloat16, sl.bfloat16])
    assert out.dtype == np.uint16
    # the exact sum of two bf16 values fits float32 here (|x| < 2**10, 8-bit mantissas)
    ref = f32_to_bf16_bits(bf16_bits_to_f32(a) + bf16_bits_to_f32(b))
    np.testing.assert_array_equal(out, ref)


def test_bool_input_and_result():
    m = np.array([True, False, True, True, False, False, True, False])
    out = elementwise(lambda x: x, m, dtypes=[sl.bool])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, m)
    a = np.arange(8, dtype=np.float32)
    out = elementwise(lambda c, x: sl.select(c, x, -x), m, a, dtypes=[sl.bool, sl.float32])
    np.testing.assert_array_equal(out, np.where(m, a, -a))


def test_comparison_result_is_numpy_bool():
    rng = np.random.default_rng(5)
    a = rng.integers(-5, 5, N).astype(np.int32)
    b = rng.integers(-5, 5, N).astype(np.int32)
    out = elementwise(lambda x, y: x < y, a, b, dtypes=[sl.int32, sl.int32])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, a < b)


# --- weak literals ---------------------------------------------------------------------

def test_uint8_plus_int_literal_is_uint8_and_wraps():
    a = np.array([0, 1, 100, 254, 255], dtype=np.uint8)
    out = elementwise(lambda x: x + 1, a, dtypes=[sl.uint8])
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, np.array([1, 2, 101, 255, 0], dtype=np.uint8))


def test_int_literal_on_the_left_is_weak_too():
    a = np.array([0, 1, 100, 200, 255], dtype=np.uint8)
    out = elementwise(lambda x: 100 + x, a, dtypes=[sl.uint8])
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, (a + np.uint8(100)))
    out = elementwise(lambda x: 3 - x, a, dtypes=[sl.uint8])
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, np.uint8(3) - a)


@pytest.mark.parametrize("name", ["int8", "int16", "uint16", "int64", "uint32"])
def test_int_literal_takes_the_integer_type(name):
    np_t = dict(ALL_DTYPES)[name]
    a = np.array([0, 1, 5, np.iinfo(np_t).max], dtype=np_t)
    out = elementwise(lambda x: x * 3 + 2, a, dtypes=[dt(name)])
    assert out.dtype == np.dtype(np_t)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a * np_t(3) + np_t(2))


def test_int64_plus_large_literal_stays_int64():
    a = np.array([1, -2, 3], dtype=np.int64)
    out = elementwise(lambda x: x + 2**40, a, dtypes=[sl.int64])
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, a + 2**40)


@pytest.mark.parametrize("name,lit", [("uint8", 300), ("uint8", 256), ("uint8", -1),
                                      ("int8", 128), ("int8", -129), ("uint16", 70000),
                                      ("int32", 2**31)])
def test_int_literal_that_does_not_fit_is_algorithm_error(name, lit):
    X = sl.Input("X", dt(name), ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(X.shape[0],))
    with pytest.raises(sl.AlgorithmError) as ei:
        f[i] = X[i] + lit
        sl.compile(f)
    msg = str(ei.value)
    assert str(lit) in msg, msg
    assert name in msg, msg




@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16",
                                  "int32",
                                  "uint32",
                                  "int64",
                                  "uint64"])
def test_float_literal_next_to_int_is_float32(name):
    np_t = dict(ALL_DTYPES)[name]
    a = np.array([0, 1, 2, 7, 100], dtype=np_t)
    out = elementwise(lambda x: x * 0.5, a, dtypes=[dt(name)])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a.astype(np.float32) * np.float32(0.5))
    out = elementwise(lambda x: 0.25 + x, a, dtypes=[dt(name)])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a.astype(np.float32) + np.float32(0.25))


@pytest.mark.parametrize("name", ["int8", "uint16",
                                  "int32"])
def test_float_literal_in_select_next_to_int_is_float32(name):
    np_t = dict(ALL_DTYPES)[name]
    a = np.array([3, 0, 7, 1], dtype=np_t)
    out = elementwise(lambda x: sl.select(x > 2, 1.5, x), a, dtypes=[dt(name)])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.where(a > 2, 1.5, a).astype(np.float32))


def test_float_literal_next_to_float16_keeps_float16():
    rng = np.random.default_rng(6)
    a = (rng.standard_normal(N) * 10).astype(np.float16)
    out = elementwise(lambda x: x * 0.25 + 1.5, a, dtypes=[sl.float16])
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, a * np.float16(0.25) + np.float16(1.5))


def test_float_literal_next_to_float64_keeps_float64_precision():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(N)
    out = elementwise(lambda x: x + 0.1, a, dtypes=[sl.float64])
    assert out.dtype == np.float64
    # 0.1 must stay a float64 constant (rounding it to float32 would change these sums)
    np.testing.assert_array_equal(out, a + 0.1)
    out = elementwise(lambda x: x * (1.0 / 3.0), a, dtypes=[sl.float64])
    np.testing.assert_array_equal(out, a * (1.0 / 3.0))


def test_float_literal_next_to_bfloat16_keeps_bfloat16():
    a = f32_to_bf16_bits(np.array([1.0, 2.0, -3.0, 0.5], dtype=np.float32))
    out = elementwise(lambda x: x * 2.0, a, dtypes=[sl.bfloat16])
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, f32_to_bf16_bits(np.array([2.0, 4.0, -6.0, 1.0],
                                                                  dtype=np.float32)))


@pytest.mark.parametrize("name,np_t", [("float16", np.float16), ("float32", np.float32),
                                       ("float64", np.float64)])
def test_int_literal_next_to_float_keeps_float_type(name, np_t):
    a = np.array([0.5, -1.25, 3.0], dtype=np_t)
    out = elementwise(lambda x: x + 1, a, dtypes=[dt(name)])
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(out, a + np_t(1))


def test_int_literal_alone_is_int32():
    i = sl.Var("i")
    f = sl.Func("f", shape=(5,))
    f[i] = 7
    out = sl.compile(f)()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.full(5, 7, dtype=np.int32))


def test_float_literal_alone_is_float32():
    i = sl.Var("i")
    f = sl.Func("f", shape=(5,))
    f[i] = 2.5
    out = sl.compile(f)()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.full(5, 2.5, dtype=np.float32))


def test_vars_are_int32():
    i = sl.Var("i")
    f = sl.Func("f", shape=(6,))
    f[i] = i * 3 - 4
    out = sl.compile(f)()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.arange(6, dtype=np.int32) * 3 - 4)


def test_var_times_float_literal_is_float32():
    i = sl.Var("i")
    g = sl.Func("g", shape=(6,))
    g[i] = i * 0.5
    out = sl.compile(g)()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.arange(6, dtype=np.float32) * 0.5)


# --- lossless widening -------------------------------------------------------------------

WIDENING = [
    ("uint8", "int32", np.int32),
    ("int8", "uint8", np.int16),
    ("uint8", "int8", np.int16),
    ("uint8", "uint16", np.uint16),
    ("int16", "int32", np.int32),
    ("int32", "int64", np.int64),
    ("uint16", "uint32", np.uint32),
    ("uint32", "int32", np.int64),
    ("float16", "float32", np.float32),
    ("float32", "float64", np.float64),
    ("uint8", "float16", np.float16),
    ("int8", "float16", np.float16),
    ("int16", "float32", np.float32),
    ("uint16", "float32", np.float32),
    ("int32", "float64", np.float64),
]


@pytest.mark.parametrize("a_name,b_name,res_t", WIDENING,
                         ids=[f"{a}+{b}" for a, b, _ in WIDENING])
def test_lossless_widening_is_implicit(a_name, b_name, res_t):
    rng = np.random.default_rng(8)
    a = random_array(a_name, rng)
    b = random_array(b_name, rng)
    if np.issubdtype(res_t, np.floating):
        a = np.clip(a, -100, 100).astype(a.dtype) if a.dtype.kind in "iu" else a
        b = np.clip(b, -100, 100).astype(b.dtype) if b.dtype.kind in "iu" else b
    out = elementwise(lambda x, y: x + y, a, b, dtypes=[dt(a_name), dt(b_name)])
    assert out.dtype == np.dtype(res_t)
    np.testing.assert_array_equal(out, a.astype(res_t) + b.astype(res_t))


def test_int8_plus_uint8_does_not_wrap_in_8_bits():
    a = np.array([-128, 127, -1, 100], dtype=np.int8)
    b = np.array([255, 255, 0, 200], dtype=np.uint8)
    out = elementwise(lambda x, y: x + y, a, b, dtypes=[sl.int8, sl.uint8])
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, np.array([127, 382, -1, 300], dtype=np.int16))


def test_bfloat16_plus_float32_is_float32():
    a = f32_to_bf16_bits(np.array([1.0, 2.5, -3.0], dtype=np.float32))
    b = np.array([0.125, 1e-3, 7.0], dtype=np.float32)
    out = elementwise(lambda x, y: x + y, a, b, dtypes=[sl.bfloat16, sl.float32])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, bf16_bits_to_f32(a) + b)


def test_uint64_plus_int64_is_algorithm_error():
    X = sl.Input("X", sl.uint64, ("N",))
    Y = sl.Input("Y", sl.int64, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(X.shape[0],))
    with pytest.raises(sl.AlgorithmError, match="int64"):
        f[i] = X[i] + Y[i]
        sl.compile(f)


def test_storing_float64_into_float32_func_via_update_is_algorithm_error():
    A = sl.Input("A", sl.float32, ("N",))
    D = sl.Input("D", sl.float64, ("N",))
    i = sl.Var("i")
    acc = sl.Func("acc", shape=(A.shape[0],))
    acc[i] = A[i]
    with pytest.raises(sl.AlgorithmError) as ei:
        acc[i] = D[i]
        sl.compile(acc)
    msg = str(ei.value)
    assert "float64" in msg and "float32" in msg, msg
    assert "acc" in msg, msg


def test_update_whose_arithmetic_widens_to_float64_is_algorithm_error():
    A = sl.Input("A", sl.float32, ("N",))
    D = sl.Input("D", sl.float64, ("N",))
    i = sl.Var("i")
    acc = sl.Func("acc", shape=(A.shape[0],))
    acc[i] = A[i]
    with pytest.raises(sl.AlgorithmError, match="float64"):
        acc[i] = acc[i] + D[i]
        sl.compile(acc)


def test_storing_int32_into_uint8_func_via_update_is_algorithm_error():
    A = sl.Input("A", sl.uint8, ("N",))
    B = sl.Input("B", sl.int32, ("N",))
    i = sl.Var("i")
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = A[i]
    with pytest.raises(sl.AlgorithmError, match="int32"):
        g[i] = B[i]
        sl.compile(g)


def test_storing_float_into_int_func_via_update_is_algorithm_error():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    f = sl.Func("scaled", shape=(A.shape[0],))
    f[i] = A[i]
    with pytest.raises(sl.AlgorithmError) as ei:
        f[i] = f[i] * 2.5
        sl.compile(f)
    msg = str(ei.value)
    assert "scaled" in msg and "int32" in msg and "float" in msg, msg


def test_storing_float_literal_into_int_func_is_algorithm_error():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i]
    with pytest.raises(sl.AlgorithmError, match="int32"):
        f[i] = 2.5
        sl.compile(f)


def test_explicit_cast_makes_a_lossy_update_legal():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i]
    f[i] = sl.cast(sl.float32, sl.cast(sl.float64, f[i]) * 2.0)
    a = np.array([0.5, 1.0, -3.0], np.float32)
    out = sl.compile(f)(A=a)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a * 2)


def test_storing_int16_into_float32_func_is_lossless():
    A = sl.Input("A", sl.float32, ("N",))
    I = sl.Input("I", sl.int16, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i]
    f[i] = I[i]
    out = sl.compile(f)(A=np.zeros(3, np.float32), I=np.array([7, -8, 32767], np.int16))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [7, -8, 32767])


def test_update_storing_a_narrower_type_widens_implicitly():
    A = sl.Input("A", sl.float64, ("N",))
    B = sl.Input("B", sl.float32, ("N",))
    i = sl.Var("i")
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = A[i]
    g[i] = B[i]
    a = np.arange(4, dtype=np.float64) + 0.1
    b = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    out = sl.compile(g)(A=a, B=b)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, b.astype(np.float64))


def test_update_of_int32_func_with_uint8_values_widens():
    A = sl.Input("A", sl.int32, ("N",))
    U = sl.Input("U", sl.uint8, ("N",))
    i = sl.Var("i")
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = A[i]
    g[i] = g[i] + U[i]
    a = np.array([-1000, 0, 5, 2**30], dtype=np.int32)
    u = np.array([255, 200, 1, 0], dtype=np.uint8)
    out = sl.compile(g)(A=a, U=u)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, a + u.astype(np.int32))


# --- floor division and modulo ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["int8", "int16", "int32", "int64"])
def test_floor_div_and_mod_match_python_on_negatives(name):
    np_t = dict(ALL_DTYPES)[name]
    rng = np.random.default_rng(9)
    a = rng.integers(-50, 51, 64).astype(np_t)
    b = rng.integers(-9, 10, 64)
    b[b == 0] = 3
    b = b.astype(np_t)
    q = elementwise(lambda x, y: x // y, a, b, dtypes=[dt(name), dt(name)])
    r = elementwise(lambda x, y: x % y, a, b, dtypes=[dt(name), dt(name)])
    assert q.dtype == np.dtype(np_t) and r.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)


@pytest.mark.parametrize("d", [1, 2, 3, 7, -1, -3, -8])
def test_floor_div_and_mod_by_literal(d):
    a = np.arange(-20, 21, dtype=np.int32)
    q = elementwise(lambda x: x // d, a, dtypes=[sl.int32])
    r = elementwise(lambda x: x % d, a, dtypes=[sl.int32])
    np.testing.assert_array_equal(q, a // d)
    np.testing.assert_array_equal(r, a % d)


def test_literal_floor_div_and_mod_by_array():
    b = np.array([-7, -3, -2, -1, 1, 2, 3, 7], dtype=np.int32)
    q = elementwise(lambda y: 17 // y, b, dtypes=[sl.int32])
    r = elementwise(lambda y: -17 % y, b, dtypes=[sl.int32])
    np.testing.assert_array_equal(q, np.int32(17) // b)
    np.testing.assert_array_equal(r, np.int32(-17) % b)


def test_unsigned_floor_div_and_mod():
    rng = np.random.default_rng(10)
    a = rng.integers(0, 256, 32).astype(np.uint8)
    b = rng.integers(1, 256, 32).astype(np.uint8)
    q = elementwise(lambda x, y: x // y, a, b, dtypes=[sl.uint8, sl.uint8])
    r = elementwise(lambda x, y: x % y, a, b, dtypes=[sl.uint8, sl.uint8])
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)


def test_floor_div_and_mod_on_vars():
    i = sl.Var("i")
    f = sl.Func("f", shape=(12,))
    f[i] = (i - 6) // 4 * 100 + (i - 6) % 4
    out = sl.compile(f)()
    x = np.arange(12, dtype=np.int32) - 6
    np.testing.assert_array_equal(out, x // 4 * 100 + x % 4)


# --- sl.cast -----------------------------------------------------------------------------------

def cast_kernel(src, dst, a):
    return elementwise(lambda x: sl.cast(dst, x), a, dtypes=[src])


@pytest.mark.parametrize("dst,np_t", [("int32", np.int32), ("int8", np.int8), ("int64", np.int64),
                                      ("int16", np.int16)])
def test_cast_float_to_signed_int_truncates_toward_zero(dst, np_t):
    a = np.array([-2.7, -2.5, -1.5, -0.5, -0.0, 0.4, 0.5, 1.5, 2.5, 2.7, 99.99, -99.99],
                 dtype=np.float32)
    out = cast_kernel(sl.float32, dt(dst), a)
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(out, np.trunc(a).astype(np_t))


def test_cast_float64_to_int64_truncates_toward_zero():
    a = np.array([-1e12 - 0.75, 1e12 + 0.75, -3.999, 3.999], dtype=np.float64)
    out = cast_kernel(sl.float64, sl.int64, a)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.trunc(a).astype(np.int64))


def test_cast_float_to_unsigned_truncates():
    a = np.array([0.0, 0.9, 1.5, 127.7, 200.2, 255.9], dtype=np.float32)
    out = cast_kernel(sl.float32, sl.uint8, a)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, np.array([0, 0, 1, 127, 200, 255], dtype=np.uint8))


NARROWING = [("int32", "int8"), ("int32", "uint8"), ("int32", "int16"), ("int32", "uint16"),
             ("int64", "int32"), ("int64", "uint32"), ("uint16", "int8"), ("uint32", "int32"),
             ("uint64", "uint8"), ("int16", "uint8")]


@pytest.mark.parametrize("src,dst", NARROWING, ids=[f"{s}->{d}" for s, d in NARROWING])
def test_cast_narrowing_ints_wraps(src, dst):
    rng = np.random.default_rng(11)
    a = random_array(src, rng, 64)
    out = cast_kernel(dt(src), dt(dst), a)
    np_dst = dict(ALL_DTYPES)[dst]
    assert out.dtype == np.dtype(np_dst)
    np.testing.assert_array_equal(out, a.astype(np_dst))


def test_cast_narrowing_specific_values():
    a = np.array([300, -129, 127, 128, 255, 256, -1, 65535, -32768], dtype=np.int32)
    np.testing.assert_array_equal(cast_kernel(sl.int32, sl.int8, a),
                                  np.array([44, 127, 127, -128, -1, 0, -1, -1, 0], np.int8))
    np.testing.assert_array_equal(cast_kernel(sl.int32, sl.uint8, a),
                                  np.array([44, 127, 127, 128, 255, 0, 255, 255, 0], np.uint8))


WIDENING_CASTS = [("int8", "int32"), ("uint8", "int32"), ("int8", "uint16"), ("int16", "int64"),
                  ("uint32", "int64"), ("int32", "uint64"), ("uint8", "float32"),
                  ("int32", "float64"), ("float16", "float32"), ("float32", "float64")]


@pytest.mark.parametrize("src,dst", WIDENING_CASTS, ids=[f"{s}->{d}" for s, d in WIDENING_CASTS])
def test_cast_widening_matches_numpy(src, dst):
    rng = np.random.default_rng(12)
    a = random_array(src, rng, 64)
    out = cast_kernel(dt(src), dt(dst), a)
    np_dst = dict(ALL_DTYPES)[dst]
    assert out.dtype == np.dtype(np_dst)
    np.testing.assert_array_equal(out, a.astype(np_dst))


def test_cast_int_to_float32_rounds_to_nearest_even():
    a = np.array([16777217, 16777219, -16777217, 2**31 - 1, 123], dtype=np.int32)
    out = cast_kernel(sl.int32, sl.float32, a)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a.astype(np.float32))


def test_cast_float64_to_float32_rounds_to_nearest_even():
    rng = np.random.default_rng(13)
    a = rng.standard_normal(64) * 1e3
    a = np.concatenate([a, [1 + 2.0**-24, 1 + 3 * 2.0**-24, -(1 + 2.0**-24)]])
    out = cast_kernel(sl.float64, sl.float32, a)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a.astype(np.float32))


def test_cast_float32_to_float16_rounds_to_nearest_even():
    rng = np.random.default_rng(14)
    a = (rng.standard_normal(64) * 100).astype(np.float32)
    # exact halfway cases between float16 neighbours: ties go to the even mantissa
    ties = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 5 * 2.0**-11, -(1 + 2.0**-11),
                     2048 + 1, 2048 + 3, 1e-6, -3e-7, 6.1e-5], dtype=np.float32)
    a = np.concatenate([a, ties])
    out = cast_kernel(sl.float32, sl.float16, a)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, a.astype(np.float16))


def test_cast_float32_overflowing_float16_gives_inf():
    a = np.array([65504.0, 65519.0, 65520.0, 1e6, -1e6], dtype=np.float32)
    out = cast_kernel(sl.float32, sl.float16, a)
    with np.errstate(over="ignore"):
        ref = a.astype(np.float16)
    np.testing.assert_array_equal(out, ref)


def test_cast_float32_to_bfloat16_rounds_to_nearest_even():
    rng = np.random.default_rng(15)
    a = (rng.standard_normal(64) * 1e3).astype(np.float32)
    base = np.array([1.0, 1.0078125, -1.0, 3.0, 256.0], dtype=np.float32).view(np.uint32)
    # bit patterns whose low 16 bits are exactly half an ulp (ties), just below and just above
    ties = np.concatenate([base | 0x8000, base | 0x7FFF, base | 0x8001, base | 0x18000]
                          ).astype(np.uint32).view(np.float32)
    a = np.concatenate([a, ties])
    out = cast_kernel(sl.float32, sl.bfloat16, a)
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, f32_to_bf16_bits(a))


def test_cast_bfloat16_to_float32_is_exact():
    bits = f32_to_bf16_bits(np.array([1.0, -2.5, 3.140625, 1e30, -1e-30], dtype=np.float32))
    out = cast_kernel(sl.bfloat16, sl.float32, bits)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, bf16_bits_to_f32(bits))


def test_cast_float64_to_bfloat16():
    a = np.array([1.0, 0.1, -7.3, 1234.5678], dtype=np.float64)
    out = cast_kernel(sl.float64, sl.bfloat16, a)
    assert out.dtype == np.uint16
    # for these values rounding through float32 first does not change the result
    np.testing.assert_array_equal(out, f32_to_bf16_bits(a.astype(np.float32)))


def test_cast_of_literal_wraps():
    i = sl.Var("i")
    f = sl.Func("f", shape=(2,))
    f[i] = sl.cast(sl.uint8, 300) + sl.cast(sl.uint8, i)
    out = sl.compile(f)()
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [44, 45])


def test_literal_that_does_not_fit_in_min_is_algorithm_error():
    X = sl.Input("X", sl.uint8, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(X.shape[0],))
    with pytest.raises(sl.AlgorithmError, match="300"):
        f[i] = sl.min(X[i], 300)
        sl.compile(f)


def test_cast_large_float_to_unsigned():
    a = np.array([3e9, 4.2e9, 1.5], np.float32)
    out = cast_kernel(sl.float32, sl.uint32, a)
    np.testing.assert_array_equal(out, np.array([3000000000, 4200000000, 1], np.uint32))
    b = np.array([1e19, 1.5e19, 2.5], np.float64)
    out = cast_kernel(sl.float64, sl.uint64, b)
    np.testing.assert_array_equal(out, np.array([10**19, 15 * 10**18, 2], np.uint64))


def test_cast_large_unsigned_to_float():
    a = np.array([2**64 - 1, 2**63 + 2**11, 5], np.uint64)
    np.testing.assert_array_equal(cast_kernel(sl.uint64, sl.float64, a), a.astype(np.float64))
    np.testing.assert_array_equal(cast_kernel(sl.uint64, sl.float32, a), a.astype(np.float32))


def test_cast_float64_to_float16_rounds_once():
    # 1 + 2**-11 + 2**-40 lies just above a float16 tie: rounding directly gives 1 + 2**-10,
    # rounding through float32 first would lose the 2**-40 and tie down to 1.0
    a = np.array([1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11, 3 + 2.0**-10 + 2.0**-45])
    out = cast_kernel(sl.float64, sl.float16, a)
    np.testing.assert_array_equal(out, np.array([1 + 2.0**-10, 1.0, 3 + 2.0**-9], np.float16))


def test_cast_float64_to_bfloat16_rounds_once():
    a = np.array([1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-8, 1 + 3 * 2.0**-8])
    out = cast_kernel(sl.float64, sl.bfloat16, a)
    np.testing.assert_array_equal(out, np.array([0x3F81, 0x3F80, 0x3F82], np.uint16))


def test_cast_between_float16_and_bfloat16():
    h = np.array([1.0, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 65504], np.float16)
    out = cast_kernel(sl.float16, sl.bfloat16, h)
    np.testing.assert_array_equal(out, f32_to_bf16_bits(h.astype(np.float32)))
    bits = np.array([0x3F81, 0x4780, 0x3F80], np.uint16)  # 1.0078125, 65536, 1.0
    out = cast_kernel(sl.bfloat16, sl.float16, bits)
    assert out.dtype == np.float16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, bf16_bits_to_f32(bits).astype(np.float16))


def test_cast_int_to_float16():
    a = np.array([2049, 2051, 70000, -65520, 65519, -7], np.int32)
    out = cast_kernel(sl.int32, sl.float16, a)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a.astype(np.float16))


def test_cast_float16_to_int_truncates():
    a = np.array([-2.5, 2.75, 1000.5, -0.75], np.float16)
    np.testing.assert_array_equal(cast_kernel(sl.float16, sl.int32, a), [-2, 2, 1000, 0])


def test_cast_float_to_bool_is_nonzero():
    a = np.array([0.0, -0.0, 0.5, -2.0], np.float32)
    out = cast_kernel(sl.float32, sl.bool, a)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, [False, False, True, True])


def test_cast_int_to_bool_is_nonzero():
    a = np.array([0, 1, -1, 2, 256, 0], dtype=np.int32)
    out = cast_kernel(sl.int32, sl.bool, a)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, a != 0)


def test_cast_bool_to_int32():
    m = np.array([True, False, True])
    out = cast_kernel(sl.bool, sl.int32, m)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, m.astype(np.int32))


@pytest.mark.parametrize("literal", [2**31, -2**31 - 1, 2**40, 2**63])
def test_an_int_literal_alone_that_does_not_fit_int32_is_an_error(literal):
    x = sl.Var("x")
    f = sl.Func("f_alone", shape=(2,))
    with pytest.raises(sl.AlgorithmError, match=f"literal {literal} stands alone.*sl.cast"):
        f[x] = literal
    g = sl.Func("g_alone", shape=(2,))
    g[x] = 2**31 - 1                       # the largest int32 still fits
    assert sl.compile(g)().tolist() == [2**31 - 1] * 2


def _round_bf16_exactly(v):
    """v rounded to bfloat16 (8 significant bits, nearest, ties to even), exactly."""
    from fractions import Fraction
    x = abs(Fraction(v))
    if x == 0:
        return 0.0
    e = x.numerator.bit_length() - x.denominator.bit_length()
    e -= Fraction(2) ** e > x
    quantum = Fraction(2) ** (e - 7)
    n, rest = divmod(x / quantum, 1)
    n += rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1)
    return float(n * quantum) * (1 if v >= 0 else -1)


@pytest.mark.parametrize("name, values", [
    ("int32", [2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**24 + 2**16, 2**31 - 1, -2**31, 77]),
    ("uint32", [2**24 + 2**16 + 1, 2**32 - 1, 2**25 + 2**17 + 3, 5]),
    ("int64", [2**40 + 2**32 + 1, 2**60 + 2**52 + 1, -(2**60 + 2**52 + 1), 2**63 - 1, -2**63,
               2**24 + 2**16 + 1]),
    ("uint64", [2**64 - 1, 2**63 + 2**55 + 1, 2**60 + 2**52 + 1, 3]),
])
@pytest.mark.parametrize("lanes", [1, 4])
def test_int_to_bfloat16_is_rounded_once(name, values, lanes):
    # through float32 first, 2**24 + 2**16 + 1 would land on a tie and round down
    x = sl.Var("x")
    A = sl.Input("A", dt(name), (len(values),))
    f = sl.Func("f", shape=(len(values),))
    f[x] = sl.cast(sl.bfloat16, A[x])
    s = sl.Schedule(f)
    if lanes > 1:
        s[f].vectorize(x, lanes)
    got = bf16_bits_to_f32(sl.compile(f, s)(A=np.array(values, dtype=dict(ALL_DTYPES)[name])))
    want = [_round_bf16_exactly(v) for v in values]
    np.testing.assert_array_equal(got.astype(np.float64), want)
    # a constant folds the same way
    for v, w in zip(values, want):
        assert sl.cast(sl.bfloat16, sl.cast(dt(name), v)).value == w


def test_float_literals_and_params_are_rounded_to_bfloat16_once():
    v = 1 + 2**-8 + 2**-30           # just above a tie: float32 would drop the 2**-30
    assert sl.cast(sl.bfloat16, v).value == 1 + 2**-7
    assert sl.cast(sl.float32, 2**60 + 2**36 + 1).value == float(2**60 + 2**37)
    x = sl.Var("x")
    P = sl.Param("P", sl.bfloat16)
    f = sl.Func("f", shape=(1,))
    f[x] = sl.cast(sl.float32, P)
    kern = sl.compile(f)
    assert kern(P=v)[0] == 1 + 2**-7
    assert kern(P=np.float64(v))[0] == 1 + 2**-7
