"""Results that must match numpy where values wrap, divide as floats, or shift too far.

- The simplifier may not fold ``x + 1 > x`` or ``(x * 2) // 2`` when x is data of a type
  that wraps (SPEC §1: ``u8 + 1`` wraps like C), while index arithmetic keeps folding.
- Float ``//`` and ``%`` are numpy's (``npy_divmod``): ``1.0 // 0.1 == 9.0``.
- Shifts by the width or more, or by a negative amount, give numpy's results.
Each case runs a scalar and a 16-lane vectorized schedule.
"""
import numpy as np
import pytest

import schedlang as sl

INT_TYPES = [(sl.int8, np.int8), (sl.int16, np.int16), (sl.int32, np.int32),
             (sl.int64, np.int64), (sl.uint8, np.uint8), (sl.uint16, np.uint16),
             (sl.uint32, np.uint32), (sl.uint64, np.uint64)]
FLOAT_TYPES = [(sl.float16, np.float16), (sl.float32, np.float32), (sl.float64, np.float64)]


def run_elementwise(fn, inputs, vectorize, target="llvm"):
    """Compile ``f[i] = fn(*reads)`` over 1-D inputs {name: (sl dtype, array)} and run it."""
    n = len(next(iter(inputs.values()))[1])
    i = sl.Var("i")
    reads = [sl.Input(name, dt, (n,))[i] for name, (dt, _) in inputs.items()]
    f = sl.Func("f", shape=(n,))
    f[i] = fn(*reads)
    s = sl.Schedule(f)
    if vectorize:
        s[f].vectorize(i, 16)
    kern = sl.compile(f, s, target=target)
    return kern(**{name: a for name, (_, a) in inputs.items()}), kern


def edge_values(npdt, n_random=200, seed=0):
    info = np.iinfo(npdt)
    edges = [info.max, info.max - 1, info.max - 2, info.min, info.min + 1, 0, 1, 2, 3,
             info.max // 2, info.max // 2 + 1, info.max // 3 + 1]
    if info.min < 0:
        edges += [-1, -2, -3, info.min // 2, info.min // 2 - 1]
    rng = np.random.default_rng(seed)
    rand = rng.integers(info.min, info.max, n_random, dtype=npdt, endpoint=True)
    return np.concatenate([np.array(edges, dtype=npdt), rand])


# ======================================================================= wrapping data

# (algorithm, numpy reference) pairs whose naive fold is wrong once x + c or x * c wraps
WRAP_CASES = {
    "add_gt": (lambda x: (x + 1) > x, lambda x: (x + x.dtype.type(1)) > x),
    "add_ge": (lambda x: (x + 3) >= x, lambda x: (x + x.dtype.type(3)) >= x),
    "sub_lt": (lambda x: (x - 1) < x, lambda x: (x - x.dtype.type(1)) < x),
    "mul_floordiv": (lambda x: (x * 2) // 2, lambda x: (x * x.dtype.type(2)) // x.dtype.type(2)),
    "mul_add_floordiv": (lambda x: (x * 4 + 3) // 4,
                         lambda x: (x * x.dtype.type(4) + x.dtype.type(3)) // x.dtype.type(4)),
    "mul_add_mod3": (lambda x: (x * 3 + 1) % 3,
                     lambda x: (x * x.dtype.type(3) + x.dtype.type(1)) % x.dtype.type(3)),
    "mul_add_mod4": (lambda x: (x * 4 + 6) % 4,
                     lambda x: (x * x.dtype.type(4) + x.dtype.type(6)) % x.dtype.type(4)),
    "min": (lambda x: sl.min(x, x + 3), lambda x: np.minimum(x, x + x.dtype.type(3))),
    "max": (lambda x: sl.max(x + 1, x), lambda x: np.maximum(x + x.dtype.type(1), x)),
    "select": (lambda x: sl.select(x + 1 > x, x + 1, x),
               lambda x: np.where(x + x.dtype.type(1) > x, x + x.dtype.type(1), x)),
    # these hold modulo 2**bits and must stay right (and may fold)
    "sub_cancels": (lambda x: (x + 1) - x, lambda x: (x + x.dtype.type(1)) - x),
    "eq": (lambda x: (x + 1) == x, lambda x: (x + x.dtype.type(1)) == x),
    "ne": (lambda x: (x + 2) != x, lambda x: (x + x.dtype.type(2)) != x),
}


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dt,npdt", INT_TYPES, ids=[t[1].__name__ for t in INT_TYPES])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_folds_respect_wrapping_of_loaded_values(dt, npdt, vectorize):
    x = edge_values(npdt)
    for name, (algo, ref) in WRAP_CASES.items():
        out, _ = run_elementwise(algo, {"X": (dt, x)}, vectorize)
        with np.errstate(all="ignore"):
            expected = ref(x)
        bad = np.nonzero(out != expected)[0]
        assert bad.size == 0, (name, x[bad[:4]], out[bad[:4]], expected[bad[:4]])


def test_wrapping_compare_is_not_folded_to_true():
    x = sl.Input("X", sl.uint8, (2,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(2,))
    f[i] = (x[i] + 1) > x[i]
    assert "X[" in str(sl.lower(f, sl.Schedule(f)))
    out, _ = run_elementwise(lambda v: (v + 1) > v, {"X": (sl.uint8, np.array([255, 3], np.uint8))},
                             False)
    np.testing.assert_array_equal(out, [False, True])


def test_index_arithmetic_still_folds():
    """Loop variables are int32 indices bounded by extents: their order folds."""
    n = 64
    x = sl.Input("X", sl.float32, (n,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(n,))
    f[i] = sl.select(i + 1 > i, x[(i * 4 + 3) // 4], 0.0) + x[sl.min(i, i + 3)]
    text = str(sl.lower(f, sl.Schedule(f)))
    assert "select" not in text and "//" not in text and "min(" not in text, text


# ======================================================================= float // and %

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 0.3, 0.5, 1.5, 2.5, 2.0, 3.0, -3.0, 5.0, -5.0,
           6.0, 7.0, -0.7, 1e-3, 1e10, -1e10, 123456.789, 1e30, -1e30, 1e-40, 6e-8,
           np.inf, -np.inf, np.nan]


def float_operands(npdt, seed=1, n_random=3000):
    rng = np.random.default_rng(seed)
    sp = np.array(SPECIAL, dtype=np.float64)
    scale = lambda: 10.0 ** rng.integers(-5, 6, n_random)  # noqa: E731
    a = np.concatenate([np.repeat(sp, sp.size), rng.standard_normal(n_random) * scale()])
    b = np.concatenate([np.tile(sp, sp.size), rng.standard_normal(n_random) * scale()])
    # quotients at and a few ulps around integers, where fmod is easy to get wrong
    k = rng.integers(-2000, 2000, n_random).astype(np.float64)
    near_b = (rng.standard_normal(n_random) * 10.0 ** rng.integers(-3, 4, n_random)).astype(npdt)
    with np.errstate(over="ignore"):     # float16 overflows to inf: a case like any other
        near_a = (k * near_b).astype(npdt)
        step = rng.integers(-2, 3, n_random)
        near_a = np.where(step > 0, np.nextafter(near_a, npdt(np.inf)),
                          np.where(step < 0, np.nextafter(near_a, npdt(-np.inf)), near_a))
        return (np.concatenate([a.astype(npdt), near_a.astype(npdt)]),
                np.concatenate([b.astype(npdt), near_b]))


def same_floats(out, expected):
    """Equal values with equal signs (0.0 vs -0.0 counts), any NaN equal to any NaN."""
    both_nan = np.isnan(out) & np.isnan(expected)
    return both_nan | ((out == expected) & (np.signbit(out) == np.signbit(expected)))


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dt,npdt", FLOAT_TYPES, ids=[t[1].__name__ for t in FLOAT_TYPES])
def test_float_floordiv_and_mod_match_numpy(dt, npdt, vectorize):
    a, b = float_operands(npdt)
    for op, ref in (("floordiv", np.floor_divide), ("mod", np.remainder)):
        algo = (lambda p, q: p // q) if op == "floordiv" else (lambda p, q: p % q)
        out, _ = run_elementwise(algo, {"X": (dt, a), "Y": (dt, b)}, vectorize)
        with np.errstate(all="ignore"):
            expected = ref(a, b)
        ok = same_floats(out, expected)
        assert ok.all(), (op, a[~ok][:4], b[~ok][:4], out[~ok][:4], expected[~ok][:4])


def test_float_floordiv_and_mod_probe_values():
    a = np.array([1.0, 7.0, 0.3, 5.0, -5.0, np.inf])
    b = np.array([0.1, 0.1, 0.1, np.inf, np.inf, 2.0])
    operands = {"X": (sl.float64, a), "Y": (sl.float64, b)}
    div, _ = run_elementwise(lambda p, q: p // q, operands, False)
    mod, _ = run_elementwise(lambda p, q: p % q, operands, False)
    np.testing.assert_array_equal(div, [9.0, 69.0, 2.0, 0.0, -1.0, np.nan])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(mod, np.remainder(a, b))  # 1.0 % 0.1 is 0.0999...
    np.testing.assert_array_equal(mod[3:], [5.0, np.inf, np.nan])


@pytest.mark.parametrize("target", ["llvm", "llvm:x86-64"])  # with and without FMA
def test_float_mod_is_exact_near_integer_quotients(target):
    a, b = float_operands(np.float32, seed=7)
    for dt, npdt in ((sl.float32, np.float32), (sl.float64, np.float64)):
        a_, b_ = a.astype(npdt), b.astype(npdt)
        out, _ = run_elementwise(lambda p, q: p % q, {"X": (dt, a_), "Y": (dt, b_)}, True,
                                 target=target)
        with np.errstate(all="ignore"):
            assert same_floats(out, np.remainder(a_, b_)).all()


def test_vectorized_float_mod_stays_in_vector_instructions():
    a, b = float_operands(np.float32)
    _, kern = run_elementwise(lambda p, q: p % q, {"X": (sl.float32, a), "Y": (sl.float32, b)},
                              True)
    fmas = kern.source.count("call <16 x float> @llvm.fma.v16f32")
    # libm's fmod (frem) only behind the branch for quotients of 2**22 and more, one per
    # copy of the exact vector path (LLVM may peel the loop)
    assert fmas >= 1 and kern.source.count("frem <16 x float>") <= fmas


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN kept quiet)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


@pytest.mark.parametrize("vectorize", [False, True])
def test_bfloat16_floordiv_and_mod_round_numpys_float32_result(vectorize):
    torch = pytest.importorskip("torch")
    a, b = float_operands(np.float32, seed=3)
    a_bits, b_bits = bf16_bits(a), bf16_bits(b)
    widen = lambda bits: (bits.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
    as_torch = lambda bits: torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)  # noqa
    for algo, ref in (((lambda p, q: p // q), np.floor_divide),
                      ((lambda p, q: p % q), np.remainder)):
        out, _ = run_elementwise(algo, {"X": (sl.bfloat16, as_torch(a_bits)),
                                        "Y": (sl.bfloat16, as_torch(b_bits))}, vectorize)
        with np.errstate(all="ignore"):
            expected = ref(widen(a_bits), widen(b_bits))
        ok = same_floats(widen(np.asarray(out).view(np.uint16)), widen(bf16_bits(expected)))
        assert ok.all()


# ======================================================================= shifts

def shift_operands(npdt):
    info = np.iinfo(npdt)
    bits = info.bits
    amounts = list(range(-3, 2 * bits + 3)) + [info.min, info.max, bits - 1, bits, bits + 1]
    amounts = np.array([v % (1 << bits) if info.min == 0 else v for v in amounts], dtype=npdt)
    values = np.array([1, 5, 3, info.max, info.min, info.max // 3]
                      + ([-1, -77, info.min + 1] if info.min < 0 else [200 % info.max]),
                      dtype=npdt)
    return np.repeat(values, amounts.size), np.tile(amounts, values.size)


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dt,npdt", INT_TYPES, ids=[t[1].__name__ for t in INT_TYPES])
def test_shifts_by_any_amount_match_numpy(dt, npdt, vectorize):
    a, amount = shift_operands(npdt)
    for algo, ref in (((lambda p, q: p << q), np.left_shift),
                      ((lambda p, q: p >> q), np.right_shift)):
        out, _ = run_elementwise(algo, {"X": (dt, a), "Y": (dt, amount)}, vectorize)
        expected = ref(a, amount)
        bad = np.nonzero(out != expected)[0]
        assert bad.size == 0, (a[bad[:4]], amount[bad[:4]], out[bad[:4]], expected[bad[:4]])


@pytest.mark.parametrize("dt,npdt", INT_TYPES, ids=[t[1].__name__ for t in INT_TYPES])
def test_shifts_by_constant_amounts_fold_like_numpy(dt, npdt):
    a, _ = shift_operands(npdt)
    info = np.iinfo(npdt)
    for c in (info.bits - 1, info.bits, info.bits + 1, info.max) + ((-1,) if info.min else ()):
        out, _ = run_elementwise(lambda p: (p << sl.cast(dt, c)) | (p >> sl.cast(dt, c)),
                                 {"X": (dt, a)}, False)
        expected = np.left_shift(a, npdt(c)) | np.right_shift(a, npdt(c))
        np.testing.assert_array_equal(out, expected, err_msg=f"amount {c}")
    # both operands constant: folded by the simplifier
    for c in (info.bits, info.bits + 8):
        out, _ = run_elementwise(lambda p: p + (sl.cast(dt, 1) << sl.cast(dt, c)), {"X": (dt, a)},
                                 False)
        np.testing.assert_array_equal(out, a)


def test_probe_shift_values():
    a = np.array([1, 1, 1, 1, -8], np.int32)
    amount = np.array([32, 33, 40, -1, 40], np.int32)
    shl, _ = run_elementwise(lambda p, q: p << q, {"X": (sl.int32, a), "Y": (sl.int32, amount)},
                             True)
    shr, _ = run_elementwise(lambda p, q: p >> q, {"X": (sl.int32, a), "Y": (sl.int32, amount)},
                             True)
    np.testing.assert_array_equal(shl, [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(shr, [0, 0, 0, 0, -1])


@pytest.mark.parametrize("vectorize", [False, True])
def test_adding_zero_keeps_numpys_sign_of_zero(vectorize):
    x = np.array([-0.0, 0.0, 1.0, -2.0] * 8, np.float32)
    out, _ = run_elementwise(lambda p: p + 0.0, {"X": (sl.float32, x)}, vectorize)
    assert same_floats(out, x + np.float32(0.0)).all()      # -0.0 + 0.0 is 0.0
    out, _ = run_elementwise(lambda p: p + -0.0, {"X": (sl.float32, x)}, vectorize)
    assert same_floats(out, x + np.float32(-0.0)).all()


@pytest.mark.parametrize("num, den", [(1.0, -0.0), (-1.0, -0.0), (1.0, 0.0), (0.0, -0.0),
                                      (float("nan"), 0.0)])
def test_folded_float_division_by_a_signed_zero_matches_the_run_time_result(num, den):
    # the constant folder took -0.0 for +0.0 (1.0 / -0.0 gave +inf); numpy gives -inf
    i = sl.Var("i")
    folded = sl.Func("folded", shape=(1,))
    folded[i] = sl.cast(sl.float32, num) / sl.cast(sl.float32, den) * sl.cast(sl.float32, i + 1)
    with np.errstate(all="ignore"):
        want = np.float32(num) / np.float32(den)
    np.testing.assert_array_equal(sl.compile(folded)(), [want])
    p = sl.Param("p", sl.float32)
    run = sl.Func("run", shape=(1,))
    run[i] = sl.cast(sl.float32, num) / p * sl.cast(sl.float32, i + 1)
    np.testing.assert_array_equal(sl.compile(run)(p=den), [want])


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("a, b", [(0.0, -0.0), (-0.0, 0.0), (1.0, float("nan")),
                                  (float("nan"), 1.0)])
def test_folded_float_min_max_follow_numpy_for_nan_and_signed_zero(op, a, b):
    i = sl.Var("i")
    f = sl.Func("f", shape=(1,))
    f[i] = getattr(sl, op)(sl.cast(sl.float32, a), sl.cast(sl.float32, b)) \
        * sl.cast(sl.float32, i + 1)
    got = sl.compile(f)()
    want = getattr(np, {"min": "minimum", "max": "maximum"}[op])(np.float32(a), np.float32(b))
    np.testing.assert_array_equal(got, [want])
    assert np.signbit(got[0]) == np.signbit(want)


def test_an_assume_with_a_division_by_negative_zero_is_checked_with_its_sign():
    A = sl.Input("A", sl.float32, (2,))
    alpha = sl.Param("alpha", sl.float32)
    i = sl.Var("i")
    C = sl.Func("C", shape=(2,))
    C[i] = A[i] * alpha
    sl.assume(1.0 / alpha > 0.0)
    kern = sl.compile(C)
    kern(A=np.ones(2, np.float32), alpha=0.0)          # 1 / +0 is +inf
    with pytest.raises(sl.ArgumentError, match=r"assume\(1\.0 / alpha > 0\.0\)"):
        kern(A=np.ones(2, np.float32), alpha=-0.0)     # 1 / -0 is -inf
