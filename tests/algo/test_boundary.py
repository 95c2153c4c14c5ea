"""Conformance tests for boundary conditions and the compile-time Input bounds check
(SPEC section 1)."""
import itertools
import re

import numpy as np
import pytest

import schedlang as sl

PAD = 2

MODES = [
    ("clamp_edge", lambda A: sl.clamp_edge(A), dict(mode="edge")),
    ("wrap", lambda A: sl.wrap(A), dict(mode="wrap")),
    ("mirror", lambda A: sl.mirror(A), dict(mode="reflect")),
    ("constant_exterior", lambda A: sl.constant_exterior(A, 7.5),
     dict(mode="constant", constant_values=7.5)),
]
IDS = [m[0] for m in MODES]


def rng_for(seed):
    return np.random.default_rng(seed)


_uid = itertools.count()


def nonempty_input(name, dtype, ndim):
    """An Input with fresh symbolic sizes, each stated to be >= 1 with sl.assume.

    A boundary condition of an empty input has no value to give (np.pad refuses it too), so
    the value tests state non-emptiness; test_boundary_views_need_no_assumptions covers the
    unassumed case. Fresh size names keep one test's assumptions out of other pipelines.
    """
    k = next(_uid)
    X = sl.Input(name, dtype, tuple(f"{name}_d{d}_{k}" for d in range(ndim)))
    for d in range(ndim):
        sl.assume(X.shape[d] >= 1)
    return X


@pytest.mark.parametrize("name,wrap,pad_kw", MODES, ids=IDS)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_1d_stencil_reading_two_past_each_edge(name, wrap, pad_kw, n):
    A = nonempty_input("A", sl.float32, 1)
    B = wrap(A)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    w = [1.0, 10.0, 100.0, 1000.0, 10000.0]
    f[i] = (w[0] * B[i - 2] + w[1] * B[i - 1] + w[2] * B[i] + w[3] * B[i + 1]
            + w[4] * B[i + 2])
    a = rng_for(1).integers(1, 9, n).astype(np.float32)
    p = np.pad(a, PAD, **pad_kw)
    ref = sum(w[k] * p[k:k + n] for k in range(5))
    out = sl.compile(f)(A=a)
    np.testing.assert_array_equal(out, ref.astype(np.float32))


@pytest.mark.parametrize("name,wrap,pad_kw", MODES, ids=IDS)
def test_fixed_size_input_needs_no_assumption(name, wrap, pad_kw):
    A = sl.Input("A", sl.float32, (4, 5))
    B = wrap(A)
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(8, 9))
    f[i, j] = B[i - 2, j - 2]
    a = rng_for(5).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), np.pad(a, 2, **pad_kw))


@pytest.mark.parametrize("name,wrap,pad_kw", MODES, ids=IDS)
def test_2d_5x5_stencil(name, wrap, pad_kw):
    A = nonempty_input("A", sl.float32, 2)
    K = sl.Input("K", sl.float32, (5, 5))
    B = wrap(A)
    i, j = sl.vars("i j")
    r = sl.RDom((0, 5), (0, 5), name="r")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = sl.sum(K[r.x, r.y] * B[i + r.x - 2, j + r.y - 2])
    rng = rng_for(2)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    k = rng.standard_normal((5, 5)).astype(np.float32)
    p = np.pad(a, PAD, **pad_kw)
    ref = np.zeros_like(a)
    for dx in range(5):
        for dy in range(5):
            ref += k[dx, dy] * p[dx:dx + 4, dy:dy + 6]
    out = sl.compile(f)(A=a, K=k)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,wrap,pad_kw", MODES, ids=IDS)
def test_padded_output_equals_np_pad(name, wrap, pad_kw):
    A = nonempty_input("A", sl.float32, 2)
    B = wrap(A)
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0] + 2 * PAD, A.shape[1] + 2 * PAD))
    f[i, j] = B[i - PAD, j - PAD]
    a = rng_for(3).standard_normal((3, 5)).astype(np.float32)
    out = sl.compile(f)(A=a)
    assert out.shape == (7, 9)
    np.testing.assert_array_equal(out, np.pad(a, PAD, **pad_kw))


@pytest.mark.parametrize("name,wrap,pad_kw", MODES, ids=IDS)
def test_reads_far_outside(name, wrap, pad_kw):
    # "may be read at any index": pad by more than the input's own size
    A = nonempty_input("A", sl.int32, 1)
    B = {"constant_exterior": lambda X: sl.constant_exterior(X, -7)}.get(name, wrap)(A)
    kw = dict(pad_kw)
    if name == "constant_exterior":
        kw["constant_values"] = -7
    far = 11
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] + 2 * far,))
    f[i] = B[i - far]
    a = np.array([3, 1, 4, 1, 5], dtype=np.int32)
    out = sl.compile(f)(A=a)
    np.testing.assert_array_equal(out, np.pad(a, far, **kw))


def test_constant_exterior_with_param_value():
    A = nonempty_input("A", sl.float32, 1)
    v = sl.Param("v", sl.float32)
    B = sl.constant_exterior(A, v)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] + 2,))
    f[i] = B[i - 1]
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a, v=-2.5), [-2.5, 1, 2, 3, -2.5])


def test_constant_exterior_keeps_input_dtype():
    A = nonempty_input("A", sl.uint8, 1)
    B = sl.constant_exterior(A, 0)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = B[i - 1] + B[i + 1]
    a = np.array([10, 200, 100, 7], dtype=np.uint8)
    out = sl.compile(f)(A=a)
    assert out.dtype == np.uint8
    p = np.pad(a, 1)
    np.testing.assert_array_equal(out, p[:-2] + p[2:])


@pytest.mark.parametrize("dtype, value, expect", [
    (sl.int32, 0.5, np.float32),     # a float literal next to an int: float32, as A[x] + 0.5
    (sl.uint8, 2.0, np.float32),
    (sl.uint8, 7, np.uint8),         # an int literal takes the image's type
    (sl.float16, 0.5, np.float16),
    (sl.bool, True, np.bool_),
])
def test_constant_exterior_value_types_follow_the_literal_rules(dtype, value, expect):
    A = nonempty_input("A", dtype, 1)
    B = sl.constant_exterior(A, value)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] + 2,))
    f[i] = B[i - 1]
    a = np.array([1, 0, 1], dtype=dtype.name if dtype != sl.bool else bool)
    out = sl.compile(f)(A=a)
    assert out.dtype == expect and B.dtype.name == np.dtype(expect).name
    np.testing.assert_array_equal(out, np.array([value, *a, value]).astype(expect))


def test_boundary_of_intermediate_func():
    A = nonempty_input("A", sl.float32, 1)
    i = sl.Var("i")
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = A[i] * 2.0
    G = sl.clamp_edge(g)
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = G[i - 1] + G[i + 1]
    a = np.array([1.0, 2.0, 4.0, 8.0], dtype=np.float32)
    p = np.pad(a * 2, 1, mode="edge")
    np.testing.assert_array_equal(sl.compile(f)(A=a), p[:-2] + p[2:])


def test_separable_blur_with_mirror():
    A = nonempty_input("A", sl.float32, 2)
    B = sl.mirror(A)
    i, j = sl.vars("i j")
    bx = sl.Func("bx")
    bx[i, j] = (B[i, j - 1] + B[i, j] + B[i, j + 1]) / 3.0
    by = sl.Func("by", shape=(A.shape[0], A.shape[1]))
    by[i, j] = (bx[i - 1, j] + bx[i, j] + bx[i + 1, j]) / 3.0
    a = rng_for(4).standard_normal((6, 7)).astype(np.float32)
    p = np.pad(a, 1, mode="reflect")
    ref = sum(p[dx:dx + 6, dy:dy + 7] for dx in range(3) for dy in range(3)) / 9.0
    np.testing.assert_allclose(sl.compile(by)(A=a), ref, rtol=1e-5, atol=1e-6)


# --- boundary views need no assumptions ("may be read at any index") -----------------------------


def _same_size(wrap):
    A = sl.Input("A", sl.float32, ("Nview",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    B = wrap(A)
    f[i] = B[i - 2] + B[i + 2]
    a = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    return f, a


def _bigger(wrap):
    A = sl.Input("A", sl.float32, ("Nview",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] + 4,))
    f[i] = wrap(A)[i - 2]
    a = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    return f, a


def _case(scenario, mode):
    return pytest.param(scenario, mode, id=f"{scenario}-{mode}")


@pytest.mark.parametrize("scenario,mode", [_case(sc, m) for sc in ("same_size", "bigger_output")
                                           for m in IDS])
def test_boundary_views_need_no_assumptions(scenario, mode):
    wrap, pad_kw = {m[0]: (m[1], m[2]) for m in MODES}[mode]
    f, a = (_same_size if scenario == "same_size" else _bigger)(wrap)
    out = sl.compile(f)(A=a)
    p = np.pad(a, 2, **pad_kw)
    if scenario == "same_size":
        np.testing.assert_array_equal(out, p[:-4] + p[4:])
    else:
        np.testing.assert_array_equal(out, p)


def test_constant_exterior_of_possibly_empty_input_compiles():
    table = sl.Input("table", sl.float32, ("Tce",))
    idx = sl.Input("idx", sl.int32, ("Nce",))
    i = sl.Var("i")
    f = sl.Func("g", shape=(idx.shape[0],))
    f[i] = sl.constant_exterior(table, -1.0)[idx[i]]
    kern = sl.compile(f)
    ix = np.array([0, 2, -5], dtype=np.int32)
    np.testing.assert_array_equal(kern(table=np.array([4.0, 5.0, 6.0], np.float32), idx=ix),
                                  [4, 6, -1])
    # an empty table has no element to read (even one whose value is then discarded):
    # rejected when the kernel is called, never read out of bounds
    with pytest.raises(sl.ArgumentError, match="Tce >= 1"):
        kern(table=np.zeros(0, np.float32), idx=ix)


# --- reads that may fall outside an Input ---------------------------------------------------------

def _compile_error(f):
    with pytest.raises(sl.AlgorithmError) as ei:
        sl.compile(f)
    return str(ei.value)


def test_read_past_end_is_compile_time_error_naming_func_and_input():
    img = sl.Input("img", sl.float32, ("N",))
    i = sl.Var("i")
    shifted = sl.Func("shifted", shape=(img.shape[0],))
    shifted[i] = img[i + 1]
    msg = _compile_error(shifted)
    assert "shifted" in msg, msg
    assert "img" in msg, msg
    assert "+ 1" in msg, msg  # the index
    assert re.search(r"range|\[", msg), msg  # the offending range is reported


def test_read_before_start_is_compile_time_error():
    img = sl.Input("img", sl.float32, ("N",))
    i = sl.Var("i")
    back = sl.Func("backdiff", shape=(img.shape[0],))
    back[i] = img[i] - img[i - 1]
    msg = _compile_error(back)
    assert "backdiff" in msg and "img" in msg, msg


def test_read_outside_fixed_size_input_reports_range():
    weights = sl.Input("weights", sl.float32, (8,))
    i = sl.Var("i")
    f = sl.Func("conv3", shape=(8,))
    f[i] = weights[i + 3]
    msg = _compile_error(f)
    assert "conv3" in msg and "weights" in msg, msg
    assert "3" in msg and ("10" in msg or "11" in msg), msg  # reads span [3, 10]


def test_read_outside_in_second_dimension_is_error():
    A = sl.Input("A2d", sl.float32, ("H", "W"))
    i, j = sl.vars("i j")
    f = sl.Func("colshift", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j + 2]
    msg = _compile_error(f)
    assert "colshift" in msg and "A2d" in msg, msg


def test_read_outside_from_an_intermediate_func_names_it():
    A = sl.Input("src", sl.float32, ("N",))
    i = sl.Var("i")
    inner = sl.Func("innerstage")
    inner[i] = A[i + 1] * 2.0
    f = sl.Func("outer", shape=(A.shape[0],))
    f[i] = inner[i]
    msg = _compile_error(f)
    assert "innerstage" in msg and "src" in msg, msg


def test_data_dependent_index_is_error_but_clamped_is_fine():
    table = sl.Input("table", sl.float32, ("Tgather",))
    idx = sl.Input("idx", sl.int32, ("N",))
    i = sl.Var("i")
    gather = sl.Func("gather", shape=(idx.shape[0],))
    gather[i] = table[idx[i]]
    msg = _compile_error(gather)
    assert "gather" in msg and "table" in msg, msg

    ok = sl.Func("gather_ok", shape=(idx.shape[0],))
    ok[i] = table[sl.clamp(idx[i], 0, table.shape[0] - 1)]
    sl.assume(table.shape[0] >= 1)  # "Tgather" is used by this test only
    t = np.array([10.0, 20.0, 30.0], dtype=np.float32)
    ix = np.array([0, 2, -5, 9, 1], dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(ok)(table=t, idx=ix), t[np.clip(ix, 0, 2)])


def test_data_dependent_index_through_boundary_condition_is_fine():
    table = nonempty_input("table", sl.float32, 1)
    idx = sl.Input("idx", sl.int32, ("N",))
    i = sl.Var("i")
    f = sl.Func("g", shape=(idx.shape[0],))
    f[i] = sl.constant_exterior(table, -1.0)[idx[i]]
    t = np.array([10.0, 20.0, 30.0], dtype=np.float32)
    ix = np.array([0, 2, -5, 9, 1], dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(f)(table=t, idx=ix), [10, 30, -1, -1, 20])


def test_in_bounds_stencil_with_shrunk_output_compiles():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] - 2,))
    f[i] = A[i] + A[i + 2]
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), a[:-2] + a[2:])


def test_error_is_raised_at_compile_time_not_at_call():
    # no arrays are needed to see the error: sl.compile alone raises it
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i + 1]
    with pytest.raises(sl.AlgorithmError):
        sl.compile(f)
    assert issubclass(sl.AlgorithmError, sl.SchedlangError)


def test_an_unclamped_scatter_says_it_updates_and_to_clamp():
    img = sl.Input("img", sl.int32, ("N",))
    r = sl.RDom(img.shape[0], name="r")
    x = sl.Var("x")
    hist = sl.Func("hist", shape=(256,))
    hist[x] = 0
    hist[img[r]] += 1
    msg = _compile_error(hist)
    assert msg.startswith("hist updates hist[img[r]]: dimension 0 is indexed by a value with no "
                          "bound"), msg
    assert msg.endswith("clamp the index (sl.clamp)"), msg
