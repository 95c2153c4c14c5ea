"""Conformance tests for inline reductions and RDoms (SPEC section 1)."""
import numpy as np
import pytest

import schedlang as sl


def rng_for(seed):
    return np.random.default_rng(seed)


def row_reduce(reducer, a, sl_t=sl.float32, **kw):
    """f[i] = reducer(A[i, r]) over r in [0, A.shape[1])."""
    A = sl.Input("A", sl_t, ("M", "N"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = reducer(A[i, r], **kw)
    return sl.compile(f)(A=a)


# --- the six reducers ------------------------------------------------------------------------

@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.float64, np.float64)],
                         ids=["f32", "f64"])
def test_sum_float(sl_t, np_t):
    a = rng_for(1).standard_normal((5, 13)).astype(np_t)
    out = row_reduce(sl.sum, a, sl_t)
    assert out.dtype == np.dtype(np_t) and out.shape == (5,)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_sum_int32():
    a = rng_for(2).integers(-1000, 1000, (4, 9)).astype(np.int32)
    out = row_reduce(sl.sum, a, sl.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, a.sum(axis=1))


def test_product():
    a = rng_for(3).uniform(0.5, 1.5, (4, 7)).astype(np.float32)
    out = row_reduce(sl.product, a)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a.prod(axis=1), rtol=1e-5)
    b = rng_for(4).integers(-3, 4, (4, 6)).astype(np.int32)
    out = row_reduce(sl.product, b, sl.int32)
    np.testing.assert_array_equal(out, b.prod(axis=1))


@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.int32, np.int32),
                                       (sl.uint8, np.uint8), (sl.int8, np.int8)],
                         ids=["f32", "i32", "u8", "i8"])
def test_maximum_minimum(sl_t, np_t):
    rng = rng_for(5)
    if np.issubdtype(np_t, np.integer):
        info = np.iinfo(np_t)
        a = rng.integers(info.min, info.max, (6, 11), endpoint=True).astype(np_t)
    else:
        a = (rng.standard_normal((6, 11)) * 1e3 - 5e3).astype(np_t)  # all-negative rows too
    mx = row_reduce(sl.maximum, a, sl_t)
    mn = row_reduce(sl.minimum, a, sl_t)
    assert mx.dtype == np.dtype(np_t) and mn.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_array_equal(mn, a.min(axis=1))


@pytest.mark.parametrize("vectorized", [False, True], ids=["scalar", "rfactor-vector"])
def test_maximum_minimum_keep_a_nan_wherever_it_is_read(vectorized):
    # as numpy's max / min: a NaN anywhere in the reduced range is the result
    a = np.arange(4 * 40, dtype=np.float32).reshape(4, 40) - 50
    a[0, 0] = a[1, 17] = a[2, 39] = np.nan          # first, middle, last; row 3 has none
    for reducer, want in ((sl.maximum, a.max(axis=1)), (sl.minimum, a.min(axis=1))):
        A = sl.Input("A", sl.float32, (4, 40))
        i = sl.Var("i")
        r = sl.RDom(40, name="r")
        f = sl.Func("f", shape=(4,))
        f[i] = reducer(A[i, r])
        s = sl.Schedule(f)
        if vectorized:
            ro, ri = s[f].split(r, 8)
            part = s[f].rfactor(ri)
            s[part].compute_at(f, i).vectorize(ri)
        np.testing.assert_array_equal(sl.compile(f, s)(A=a), want)


def test_elementwise_max_min_propagate_nan_from_either_operand():
    x = np.array([np.nan, 1.0, np.nan, 2.0, -np.inf] * 4, np.float32)
    y = np.array([1.0, np.nan, np.nan, 3.0, np.nan] * 4, np.float32)
    X = sl.Input("X", sl.float32, (20,))
    Y = sl.Input("Y", sl.float32, (20,))
    i = sl.Var("i")
    for op, ref in ((sl.max, np.maximum), (sl.min, np.minimum)):
        f = sl.Func("f", shape=(20,))
        f[i] = op(X[i], Y[i])
        for vec in (1, 4):
            s = sl.Schedule(f)
            if vec > 1:
                s[f].vectorize(i, vec)
            np.testing.assert_array_equal(sl.compile(f, s)(X=x, Y=y), ref(x, y))


def test_maximum_of_all_negative_and_minimum_of_all_large():
    a = np.full((2, 5), -1e30, dtype=np.float32)
    a[1, 3] = -1e29
    np.testing.assert_array_equal(row_reduce(sl.maximum, a), a.max(axis=1))
    b = np.full((2, 5), 3e38, dtype=np.float32)
    b[0, 0] = 2e38
    np.testing.assert_array_equal(row_reduce(sl.minimum, b), b.min(axis=1))


def test_maximum_minimum_identities_at_type_extremes():
    u = np.array([[2**64 - 1, 2**63 + 5], [2**63, 2**63 + 1]], np.uint64)
    np.testing.assert_array_equal(row_reduce(sl.minimum, u, sl.uint64), u.min(1))
    np.testing.assert_array_equal(row_reduce(sl.maximum, u, sl.uint64), u.max(1))
    s = np.array([[-2**63, -2**63 + 1], [2**63 - 1, 0]], np.int64)
    np.testing.assert_array_equal(row_reduce(sl.minimum, s, sl.int64), s.min(1))
    np.testing.assert_array_equal(row_reduce(sl.maximum, s, sl.int64), s.max(1))
    f = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, np.inf, np.inf], [-3e38, -np.inf, 1]],
                 np.float32)
    np.testing.assert_array_equal(row_reduce(sl.maximum, f), f.max(1))
    np.testing.assert_array_equal(row_reduce(sl.minimum, f), f.min(1))
    np.testing.assert_array_equal(row_reduce(sl.argmax, f), f.argmax(1))
    np.testing.assert_array_equal(row_reduce(sl.argmin, f), f.argmin(1))
    h = np.array([[-60000, -65504], [1, 2]], np.float16)
    np.testing.assert_array_equal(row_reduce(sl.maximum, h, sl.float16), h.max(1))
    np.testing.assert_array_equal(row_reduce(sl.minimum, -h, sl.float16), (-h).min(1))


def test_argmax_argmin_small_int_types():
    u = np.array([[0, 0, 0], [255, 255, 3], [1, 7, 7]], np.uint8)
    np.testing.assert_array_equal(row_reduce(sl.argmax, u, sl.uint8), u.argmax(1))
    s = np.array([[127, 127], [-128, -128], [5, -3]], np.int8)
    np.testing.assert_array_equal(row_reduce(sl.argmin, s, sl.int8), s.argmin(1))


@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.int32, np.int32)],
                         ids=["f32", "i32"])
def test_argmax_argmin_with_ties_pick_lowest_index(sl_t, np_t):
    rng = rng_for(6)
    a = rng.integers(0, 4, (20, 9)).astype(np_t)  # lots of ties
    am = row_reduce(sl.argmax, a, sl_t)
    an = row_reduce(sl.argmin, a, sl_t)
    assert am.dtype == np.int32 and an.dtype == np.int32
    np.testing.assert_array_equal(am, np.argmax(a, axis=1))
    np.testing.assert_array_equal(an, np.argmin(a, axis=1))


def test_argmax_all_equal_is_zero_and_last_position():
    a = np.zeros((3, 6), dtype=np.float32)
    a[1, 5] = 1.0
    a[2] = -np.arange(6)
    np.testing.assert_array_equal(row_reduce(sl.argmax, a), [0, 5, 0])
    np.testing.assert_array_equal(row_reduce(sl.argmin, a), [0, 0, 5])


def test_argmax_over_offset_rdom_returns_rdom_value():
    A = sl.Input("A", sl.float32, ("M", 10))
    i = sl.Var("i")
    r = sl.RDom((2, 5), name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.argmax(A[i, r])
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = sl.argmin(A[i, r])
    a = rng_for(7).integers(0, 3, (8, 10)).astype(np.float32)
    out = sl.compile(f)(A=a)
    np.testing.assert_array_equal(out, np.argmax(a[:, 2:7], axis=1) + 2)
    out = sl.compile(g)(A=a)
    np.testing.assert_array_equal(out, np.argmin(a[:, 2:7], axis=1) + 2)


def test_argmax_of_expression():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(3,))
    # distance of A[r] from i: the closest element to each i
    f[i] = sl.argmin(sl.abs(A[r] - sl.cast(sl.float32, i)))
    a = np.array([5.0, 0.2, 2.1, 1.1, 0.0], dtype=np.float32)
    out = sl.compile(f)(A=a)
    np.testing.assert_array_equal(out, [np.argmin(np.abs(a - k)) for k in range(3)])


# --- matmul-like and over= ------------------------------------------------------------------------

def test_matmul_with_param():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    alpha = sl.Param("alpha", sl.float32)
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = alpha * sl.sum(A[i, k] * B[k, j])
    rng = rng_for(8)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    out = sl.compile(C)(A=a, B=b, alpha=2.0)
    assert out.shape == (7, 3)
    np.testing.assert_allclose(out, 2 * a @ b, rtol=1e-5, atol=1e-5)


def test_over_names_the_reduced_rdom():
    A = sl.Input("A", sl.float32, ("B", "M", "N"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    s = sl.RDom(A.shape[2], name="s")
    f = sl.Func("f", shape=(A.shape[0],))
    # for each i: sum over r of (max over s)
    f[i] = sl.sum(sl.maximum(A[i, r, s], over=s), over=r)
    a = rng_for(9).standard_normal((3, 4, 5)).astype(np.float32)
    out = sl.compile(f)(A=a)
    np.testing.assert_allclose(out, a.max(axis=2).sum(axis=1), rtol=1e-5)


def test_over_inner_sum_outer_maximum():
    A = sl.Input("A", sl.float32, ("B", "M", "N"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    s = sl.RDom(A.shape[2], name="s")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.maximum(sl.sum(A[i, r, s], over=s), over=r)
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = sl.argmax(sl.sum(A[i, r, s], over=s), over=r)
    a = rng_for(10).standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), a.sum(axis=2).max(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(sl.compile(g)(A=a), a.sum(axis=2).argmax(axis=1))
    # without over=: a reduction is over the RDoms in its expression, and r appears there
    # (inside a sum over s only), so the maximum is over r
    h = sl.Func("h", shape=(A.shape[0],))
    h[i] = sl.maximum(sl.sum(A[i, r, s], over=s))
    np.testing.assert_allclose(sl.compile(h)(A=a), a.sum(axis=2).max(axis=1), rtol=1e-5)
    bad = sl.Func("bad", shape=(A.shape[0],))
    with pytest.raises(sl.AlgorithmError, match=r"bad: the reduction variable r appears outside "
                       r"a reduction over its RDom"):
        bad[i] = sl.sum(A[i, r, s], over=s)


def test_inline_reduction_over_two_rdoms_reduces_both():
    A = sl.Input("A", sl.float32, ("B", "M", "N"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    s = sl.RDom(A.shape[2], name="s")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.maximum(A[i, r, s] * 2.0)
    a = rng_for(11).standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), 2 * a.max(axis=(1, 2)), rtol=1e-6)


# --- multi-dimensional RDoms, offsets, where ------------------------------------------------------

def test_multidim_rdom_box_filter():
    A = sl.Input("A", sl.float32, ("H", "W"))
    i, j = sl.vars("i j")
    r = sl.RDom((0, 3), (0, 4), name="r")
    f = sl.Func("f", shape=(A.shape[0] - 2, A.shape[1] - 3))
    f[i, j] = sl.sum(A[i + r.x, j + r.y])
    a = rng_for(12).standard_normal((7, 9)).astype(np.float32)
    out = sl.compile(f)(A=a)
    assert out.shape == (5, 6)
    ref = np.zeros((5, 6), np.float32)
    for dx in range(3):
        for dy in range(4):
            ref += a[dx:dx + 5, dy:dy + 6]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_multidim_rdom_with_offsets_and_weights():
    A = sl.Input("A", sl.float32, ("H", "W"))
    K = sl.Input("K", sl.float32, (3, 3))
    i, j = sl.vars("i j")
    r = sl.RDom((-1, 3), (-1, 3), name="r")
    f = sl.Func("f", shape=(A.shape[0] - 2, A.shape[1] - 2))
    f[i, j] = sl.sum(K[r.x + 1, r.y + 1] * A[i + 1 + r.x, j + 1 + r.y])
    rng = rng_for(13)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    kk = rng.standard_normal((3, 3)).astype(np.float32)
    out = sl.compile(f)(A=a, K=kk)
    ref = np.zeros((4, 6), np.float32)
    for dx in range(3):
        for dy in range(3):
            ref += kk[dx, dy] * a[dx:dx + 4, dy:dy + 6]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_three_dim_rdom_xyz():
    A = sl.Input("A", sl.int32, (2, 3, 4, 5))
    i = sl.Var("i")
    r = sl.RDom((0, 3), (1, 3), (2, 3), name="r")
    f = sl.Func("f", shape=(2,))
    f[i] = sl.sum(A[i, r.x, r.y, r.z])
    a = rng_for(14).integers(-50, 50, (2, 3, 4, 5)).astype(np.int32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), a[:, 0:3, 1:4, 2:5].sum(axis=(1, 2, 3)))


def test_rdom_with_offset():
    A = sl.Input("A", sl.float32, ("M", 10))
    i = sl.Var("i")
    r = sl.RDom((3, 4), name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[i, r])
    a = rng_for(15).standard_normal((4, 10)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), a[:, 3:7].sum(axis=1), rtol=1e-5)


def test_rdom_variable_as_value():
    i = sl.Var("i")
    r = sl.RDom((2, 5), name="r")
    f = sl.Func("f", shape=(3,))
    f[i] = sl.sum(r * (i + 1))
    np.testing.assert_array_equal(sl.compile(f)(), [sum(range(2, 7)) * (k + 1) for k in range(3)])


def test_rdom_with_symbolic_lo_and_extent():
    A = sl.Input("A", sl.int32, ("Nsym",))
    sl.assume(A.shape[0] >= 3)
    i = sl.Var("i")
    r = sl.RDom((A.shape[0] - 3, 3), name="r")  # the last three elements
    f = sl.Func("f", shape=(2,))
    f[i] = sl.sum(A[r] * (i + 1))
    kern = sl.compile(f)
    a = np.arange(1, 11, dtype=np.int32)
    np.testing.assert_array_equal(kern(A=a), [a[-3:].sum(), 2 * a[-3:].sum()])
    b = np.arange(1, 4, dtype=np.int32)
    np.testing.assert_array_equal(kern(A=b), [b.sum(), 2 * b.sum()])


def test_rdom_with_param_lo_and_assume():
    A = sl.Input("A", sl.int32, ("Nlo",))
    lo = sl.Param("lo", sl.int32)
    sl.assume(lo >= 0)
    i = sl.Var("i")
    r = sl.RDom((lo, A.shape[0] - lo), name="r")
    f = sl.Func("f", shape=(1,))
    f[i] = sl.sum(A[r])
    a = np.arange(1, 11, dtype=np.int32)
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(A=a, lo=3), [a[3:].sum()])
    np.testing.assert_array_equal(kern(A=a, lo=0), [a.sum()])


def test_where_triangular_prefix_sum():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    rt = r.where(r <= i)
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[rt])
    a = rng_for(16).standard_normal(11).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), np.cumsum(a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pred", [lambda r, i: r <= i, lambda r, i: i >= r,
                                  lambda r, i: r < i + 1, lambda r, i: i - r >= 0])
def test_a_where_predicate_keeps_reads_in_bounds_however_it_is_written(pred):
    # A[i - r] with r <= i never reads below 0: each way of writing the predicate is
    # used by the bounds check, with symbolic sizes too
    A = sl.Input("A", sl.float64, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[i - r.where(pred(r, i))])
    a = rng_for(17).standard_normal(9)
    np.testing.assert_allclose(sl.compile(f)(A=a), np.cumsum(a), rtol=1e-12)


def test_where_empty_domain_gives_identity():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[r.where(r < i)])  # exclusive prefix sum: row 0 is empty
    a = np.arange(1, 9, dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), np.concatenate([[0], np.cumsum(a)[:-1]]))


def test_product_over_empty_where_is_one():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.product(A[r.where(r < i)])
    a = np.array([2, 3, -1, 4, 2], dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), np.concatenate([[1], np.cumprod(a)[:-1]]))


def test_where_does_not_modify_the_original_rdom():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    r_even = r.where(r % 2 == 0)
    f = sl.Func("f", shape=(2,))
    f[i] = sl.select(i == 0, sl.sum(A[r_even]), sl.sum(A[r]))
    a = np.arange(1, 10, dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), [a[::2].sum(), a.sum()])


def test_where_on_2d_rdom_upper_triangle():
    A = sl.Input("A", sl.float32, ("B", "N", "N"))
    b = sl.Var("b")
    r = sl.RDom((0, A.shape[1]), (0, A.shape[2]), name="r")
    upper = r.where(r.x < r.y)
    f = sl.Func("f", shape=(A.shape[0],))
    f[b] = sl.sum(A[b, upper.x, upper.y])
    a = rng_for(17).standard_normal((3, 5, 5)).astype(np.float32)
    ref = np.array([np.triu(m, k=1).sum() for m in a], np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), ref, rtol=1e-5, atol=1e-5)


def test_where_with_two_predicates_chained():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    band = r.where(r >= i - 1).where(r <= i + 1)
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[band])
    a = np.arange(1, 8, dtype=np.int32) ** 2
    ref = np.array([a[max(k - 1, 0):k + 2].sum() for k in range(len(a))])
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_argmax_over_where_rdom():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.argmax(A[r.where(r <= i)])  # running argmax
    a = np.array([1, 3, 2, 3, 5, 0, 5, 6], dtype=np.float32)
    ref = [int(np.argmax(a[:k + 1])) for k in range(len(a))]
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def _masked_argmax(op, vectorize):
    A = sl.Input("A", sl.float32, ("M", "N"))
    lim = sl.Input("lim", sl.int32, ("M",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    r = r.where(r >= lim[i])
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = getattr(sl, op)(A[i, r])
    s = sl.Schedule(f)
    if vectorize:
        s[f].reorder(r, i).vectorize(i, 8)
    return sl.compile(f, s)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_arg_reduction_under_where_gives_an_admitted_index_when_all_are_the_identity(
        op, vectorize):
    # every admitted value is the reduction's identity (-inf for argmax): the first admitted
    # index, not the domain's lo, which where() excludes
    kern = _masked_argmax(op, vectorize)
    a = np.full((11, 6), -np.inf if op == "argmax" else np.inf, np.float32)
    lim = np.arange(11, dtype=np.int32) % 6
    np.testing.assert_array_equal(kern(A=a, lim=lim), lim)
    a[3, 5] = 0.0
    assert kern(A=a, lim=lim)[3] == 5


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_arg_reduction_that_where_empties_at_a_point_raises(op, vectorize):
    kern = _masked_argmax(op, vectorize)
    a = np.random.default_rng(0).standard_normal((11, 6)).astype(np.float32)
    lim = np.zeros(11, np.int32)
    lim[7] = 6      # row 7 admits nothing, as numpy's argmax of an empty row
    with pytest.raises(sl.ArgumentError, match=rf"f: sl.{op} over r, whose where\(\) "
                       "predicate admits no element"):
        kern(A=a, lim=lim)
    lim[7] = 2
    ref = [getattr(np, op)(a[k, lim[k]:]) + lim[k] for k in range(11)]
    np.testing.assert_array_equal(kern(A=a, lim=lim), ref)


# --- several reductions in one expression ---------------------------------------------------------

def test_ratio_of_two_sums():
    X = sl.Input("X", sl.float32, ("M", "N"))
    Y = sl.Input("Y", sl.float32, ("M", "N"))
    i = sl.Var("i")
    r = sl.RDom(X.shape[1], name="r")
    f = sl.Func("f", shape=(X.shape[0],))
    f[i] = sl.sum(X[i, r]) / sl.sum(Y[i, r])
    rng = rng_for(18)
    x = rng.uniform(0, 1, (4, 6)).astype(np.float32)
    y = rng.uniform(1, 2, (4, 6)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(X=x, Y=y), x.sum(1) / y.sum(1), rtol=1e-5)


def test_subtract_global_maximum():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] - sl.maximum(A[r])
    a = rng_for(19).standard_normal(9).astype(np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), a - a.max())


def test_softmax_rows_nested_reductions():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    s = sl.RDom(A.shape[1], name="s")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    m = sl.maximum(A[i, s])
    f[i, j] = sl.exp(A[i, j] - m) / sl.sum(sl.exp(A[i, r] - sl.maximum(A[i, s])), over=r)
    a = rng_for(20).standard_normal((4, 7)).astype(np.float32) * 3
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(sl.compile(f)(A=a), e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_mean_and_variance():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    s = sl.RDom(A.shape[1], name="s")
    mean = sl.Func("mean")
    n = sl.cast(sl.float32, A.shape[1])
    mean[i] = sl.sum(A[i, r]) / n
    var = sl.Func("var", shape=(A.shape[0],))
    var[i] = sl.sum((A[i, s] - mean[i]) * (A[i, s] - mean[i])) / n
    a = rng_for(21).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(var)(A=a), a.var(axis=1), rtol=1e-4, atol=1e-6)


def test_reduction_inside_intermediate_func_used_twice():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    rowsum = sl.Func("rowsum")
    rowsum[i] = sl.sum(A[i, r])
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j] / rowsum[i] + rowsum[i]
    a = rng_for(22).uniform(1, 2, (3, 4)).astype(np.float32)
    rs = a.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(sl.compile(f)(A=a), a / rs + rs, rtol=1e-5)


def test_root_reduction_consumed_at_offsets():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    r = sl.RDom((0, 3), name="r")
    h = sl.Func("h")  # no shape: its region comes from bounds inference
    h[i] = sl.sum(A[i + r])
    f = sl.Func("f", shape=(A.shape[0] - 4,))
    f[i] = h[i] + h[i + 2] * 10.0
    a = np.arange(1, 10, dtype=np.float32) ** 2
    hh = np.convolve(a, np.ones(3), "valid")
    np.testing.assert_allclose(sl.compile(f)(A=a), hh[:-2] + 10 * hh[2:], rtol=1e-6)


# --- symbolic size arithmetic -----------------------------------------------------------------------

def test_shape_minus_constant():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] - 2,))
    f[i] = A[i] + A[i + 1] + A[i + 2]
    a = rng_for(23).standard_normal(10).astype(np.float32)
    out = sl.compile(f)(A=a)
    assert out.shape == (8,)
    np.testing.assert_allclose(out, a[:-2] + a[1:-1] + a[2:], rtol=1e-6)


def test_rdom_extent_with_arithmetic():
    A = sl.Input("A", sl.int32, ("N",))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0] - 2, name="r")
    f = sl.Func("f", shape=(3,))
    f[i] = sl.sum(A[r + i // 2])
    a = np.arange(1, 13, dtype=np.int32)
    ref = [a[k // 2:k // 2 + 10].sum() for k in range(3)]
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_shape_multiply_and_floordiv():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    up = sl.Func("up", shape=(A.shape[0] * 2,))
    up[i] = A[i // 2]
    a = rng_for(24).standard_normal(5).astype(np.float32)
    out = sl.compile(up)(A=a)
    assert out.shape == (10,)
    np.testing.assert_array_equal(out, np.repeat(a, 2))
    down = sl.Func("down", shape=(A.shape[0] // 2,))
    down[i] = A[2 * i] + A[2 * i + 1]
    b = rng_for(25).standard_normal(7).astype(np.float32)
    out = sl.compile(down)(A=b)
    assert out.shape == (3,)
    np.testing.assert_allclose(out, b[0:6:2] + b[1:6:2], rtol=1e-6)


def test_shape_from_two_inputs_sum():
    A = sl.Input("A", sl.int32, ("Mcat",))
    B = sl.Input("B", sl.int32, ("Ncat",))
    sl.assume(A.shape[0] >= 1)
    sl.assume(B.shape[0] >= 1)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] + B.shape[0],))
    f[i] = sl.select(i < A.shape[0], A[sl.min(i, A.shape[0] - 1)],
                     B[sl.clamp(i - A.shape[0], 0, B.shape[0] - 1)])
    a = np.arange(3, dtype=np.int32)
    b = np.arange(10, 15, dtype=np.int32)
    out = sl.compile(f)(A=a, B=b)
    np.testing.assert_array_equal(out, np.concatenate([a, b]))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_and_argmin_take_the_first_nan_as_numpy(op):
    # sl.maximum propagates a NaN; argmax / argmin point at the first one, as numpy's
    A = sl.Input("A", sl.float32, ("N",))
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=())
    f[()] = getattr(sl, op)(A[r])
    kern = sl.compile(f, sl.Schedule(f))
    for a in ([1, np.nan, 3, 3], [np.nan, 1, np.nan], [2, 1, np.nan, 0], [np.inf, np.nan],
              [3, 3, 1], [1, 2, 3]):
        a = np.array(a, np.float32)
        assert int(kern(A=a)) == getattr(np, op)(a), a


def test_a_var_and_an_rdom_variable_of_one_name_are_refused():
    # one loop name for both would sum the wrong elements (it gave [0, 35, 56, ...])
    A = sl.Input("A", sl.float32, (6, 6))
    x = sl.Var("x")
    C = sl.Func("C", shape=(6,))
    with pytest.raises(sl.AlgorithmError, match="C: a Var and an RDom variable are both "
                                                "named 'x'"):
        C[x] = sl.sum(A[x, sl.RDom(6, name="x")])


def test_two_rdoms_of_one_name_are_refused_but_one_rdom_twice_is_fine():
    B = sl.Input("B", sl.float32, (8, 8))
    x = sl.Var("x")
    C = sl.Func("C", shape=(8,))
    with pytest.raises(sl.AlgorithmError, match="two different RDoms' variables are both "
                                                "named 'r'"):
        C[x] = sl.sum(B[x, sl.RDom(8, name="r")]) + sl.maximum(B[sl.RDom(8, name="r"), x])
    r = sl.RDom(8, name="r")
    D = sl.Func("D", shape=(8,))
    D[x] = sl.sum(B[x, r]) + sl.maximum(B[sl.Var("x"), r])
    b = np.random.default_rng(3).random((8, 8)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(D)(B=b), b.sum(1) + b.max(1), rtol=1e-6)


def _arg_pipeline(b_width):
    """f[i] = A[i, argmax_k A[i, k]] - B[i, argmin_r B[i, r]] with r over [2, 5) and B
    ``b_width`` columns wide."""
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("M", b_width))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    r = sl.RDom((2, 3), name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i, sl.argmax(A[i, k])] - B[i, sl.argmin(B[i, r])]
    return f


def test_an_argmax_result_indexes_its_input_without_a_clamp():
    # the index an arg-reduction gives lies in its RDom: bounds inference knows it
    kern = sl.compile(_arg_pipeline(7))
    a = rng_for(21).standard_normal((5, 7)).astype(np.float32)
    b = rng_for(22).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_array_equal(kern(A=a, B=b), a.max(1) - b[:, 2:5].min(1))
    # with K = 0 the argmax has no index to give: said before any read is considered
    with pytest.raises(sl.ArgumentError, match=r"f: sl.argmax over k, whose extent K is 0 .*"
                                                r"; got K = 0"):
        kern(A=np.zeros((3, 0), np.float32), B=b[:3])


def test_a_read_outside_by_an_inline_reduction_names_its_func_not_a_helper():
    with pytest.raises(sl.AlgorithmError) as e:
        sl.compile(_arg_pipeline("W"))         # B may have fewer than 5 columns
    assert str(e.value).startswith("f (in its sl.argmin(...)) reads B[i, r]: dimension 1 ranges "
                                   "over [2, 4]"), str(e.value)


def test_an_arg_reduction_over_an_empty_range_is_refused_at_call_time():
    A = sl.Input("A", sl.float32, ("M_arg", "K_arg"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.argmin(A[i, k])
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(A=np.array([[1, 0, 0], [2, 5, -1]], np.float32)), [1, 2])
    assert kern(A=np.zeros((0, 0), np.float32)).shape == (0,)     # nothing to compute
    with pytest.raises(sl.ArgumentError, match=r"f: sl.argmin over k, whose extent K_arg is 0 "
                                               r"for these arguments; an arg-reduction of "
                                               r"nothing has no index"):
        kern(A=np.zeros((3, 0), np.float32))
