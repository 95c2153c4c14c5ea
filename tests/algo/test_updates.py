"""Conformance tests for update definitions (Halide-style stages, SPEC section 1)."""
import numpy as np
import pytest

import schedlang as sl


def rng_for(seed):
    return np.random.default_rng(seed)


# --- scans ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sl_t,np_t", [(sl.float32, np.float32), (sl.int32, np.int32),
                                       (sl.float64, np.float64)], ids=["f32", "i32", "f64"])
def test_scan_is_cumsum(sl_t, np_t):
    g = sl.Input("g", sl_t, ("N",))
    N = g.shape[0]
    x = sl.Var("x")
    f = sl.Func("f", shape=(N,))
    f[x] = g[x]
    r = sl.RDom((1, N - 1), name="r")
    f[r] = f[r - 1] + g[r]
    a = rng_for(1).integers(-50, 50, 23).astype(np_t)
    out = sl.compile(f)(g=a)
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_allclose(out, np.cumsum(a), rtol=1e-6)


def test_scan_length_one_and_two():
    g = sl.Input("g", sl.int32, ("N",))
    N = g.shape[0]
    x = sl.Var("x")
    f = sl.Func("f", shape=(N,))
    f[x] = g[x]
    r = sl.RDom((1, N - 1), name="r")
    f[r] = f[r - 1] + g[r]
    kern = sl.compile(f)
    for n in (1, 2, 3):
        a = np.arange(1, n + 1, dtype=np.int32) * 7
        np.testing.assert_array_equal(kern(g=a), np.cumsum(a))


def test_scan_along_rows_of_2d():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j]
    r = sl.RDom((1, A.shape[1] - 1), name="r")
    f[i, r] = f[i, r - 1] + A[i, r]
    a = rng_for(2).standard_normal((4, 9)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), np.cumsum(a, axis=1), rtol=1e-5, atol=1e-6)


def test_scan_along_columns_of_2d():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j]
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    f[r, j] = f[r - 1, j] * 0.5 + A[r, j]
    a = rng_for(3).standard_normal((6, 5)).astype(np.float32)
    ref = a.copy()
    for k in range(1, 6):
        ref[k] = ref[k - 1] * 0.5 + a[k]
    np.testing.assert_allclose(sl.compile(f)(A=a), ref, rtol=1e-5, atol=1e-6)


def test_recurrence_reading_two_previous_values_fibonacci():
    x = sl.Var("x")
    f = sl.Func("fib", shape=(15,))
    f[x] = 1
    r = sl.RDom((2, 13), name="r")
    f[r] = f[r - 1] + f[r - 2]
    ref = [1, 1]
    for _ in range(13):
        ref.append(ref[-1] + ref[-2])
    out = sl.compile(f)()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref)


def test_reverse_scan_suffix_sum():
    g = sl.Input("g", sl.int32, ("N",))
    N = g.shape[0]
    x = sl.Var("x")
    f = sl.Func("f", shape=(N,))
    f[x] = g[x]
    r = sl.RDom((1, N - 1), name="r")
    f[N - 1 - r] = f[N - r] + g[N - 1 - r]  # walks from the end towards 0
    a = np.arange(1, 9, dtype=np.int32) ** 2
    np.testing.assert_array_equal(sl.compile(f)(g=a), np.cumsum(a[::-1])[::-1])


# --- scatter / histogram ----------------------------------------------------------------------------

def test_histogram_with_clamp():
    img = sl.Input("img", sl.int32, ("H", "W"))
    i = sl.Var("i")
    hist = sl.Func("hist", shape=(256,))
    hist[i] = 0
    r = sl.RDom((0, img.shape[0]), (0, img.shape[1]), name="r")
    hist[sl.clamp(img[r.x, r.y], 0, 255)] += 1
    im = rng_for(4).integers(-20, 280, (9, 13)).astype(np.int32)
    out = sl.compile(hist)(img=im)
    assert out.dtype == np.int32 and out.shape == (256,)
    np.testing.assert_array_equal(out, np.bincount(np.clip(im, 0, 255).ravel(), minlength=256))


def test_histogram_of_uint8_image():
    img = sl.Input("img", sl.uint8, ("H", "W"))
    i = sl.Var("i")
    hist = sl.Func("hist", shape=(256,))
    hist[i] = 0
    r = sl.RDom((0, img.shape[0]), (0, img.shape[1]), name="r")
    hist[sl.clamp(img[r.x, r.y], 0, 255)] += 1
    im = rng_for(5).integers(0, 256, (16, 16)).astype(np.uint8)
    out = sl.compile(hist)(img=im)
    np.testing.assert_array_equal(out, np.bincount(im.ravel(), minlength=256))


def test_weighted_scatter_add():
    idx = sl.Input("idx", sl.int32, ("N",))
    w = sl.Input("w", sl.float32, ("N",))
    i = sl.Var("i")
    acc = sl.Func("acc", shape=(8,))
    acc[i] = 0.0
    r = sl.RDom(idx.shape[0], name="r")
    acc[sl.clamp(idx[r], 0, 7)] += w[r]
    rng = rng_for(6)
    ix = rng.integers(0, 8, 40).astype(np.int32)
    wt = rng.standard_normal(40).astype(np.float32)
    out = sl.compile(acc)(idx=ix, w=wt)
    np.testing.assert_allclose(out, np.bincount(ix, weights=wt, minlength=8), rtol=1e-5,
                               atol=1e-5)


def test_scatter_max():
    idx = sl.Input("idx", sl.int32, ("N",))
    v = sl.Input("v", sl.int32, ("N",))
    i = sl.Var("i")
    best = sl.Func("best", shape=(5,))
    best[i] = -1000
    r = sl.RDom(idx.shape[0], name="r")
    k = sl.clamp(idx[r], 0, 4)
    best[k] = sl.max(best[k], v[r])
    rng = rng_for(7)
    ix = rng.integers(0, 5, 30).astype(np.int32)
    vv = rng.integers(-100, 100, 30).astype(np.int32)
    ref = np.full(5, -1000, np.int32)
    np.maximum.at(ref, ix, vv)
    np.testing.assert_array_equal(sl.compile(best)(idx=ix, v=vv), ref)


# --- updates with pure vars, constant indices, several stages --------------------------------------

def test_update_with_pure_var():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[x] = f[x] * 2
    a = rng_for(8).standard_normal(10).astype(np.float32)
    out = sl.compile(f)(A=a)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a * 2)


def test_several_updates_apply_in_order():
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[x] = f[x] * 2
    f[x] = f[x] + 1
    f[x] = f[x] * f[x]
    a = np.arange(-5, 6, dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), (a * 2 + 1) ** 2)


def test_augmented_assignment_on_pure_var():
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[x] += 10
    f[x] *= 3
    f[x] -= A[x]
    a = np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), (a + 10) * 3 - a)


def test_constant_index_update():
    A = sl.Input("A", sl.float32, (6,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[0] = 100.0
    f[2] = f[1] + f[3]
    a = np.arange(1, 7, dtype=np.float32)
    ref = a.copy()
    ref[0] = 100
    ref[2] = ref[1] + ref[3]
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_constant_index_update_reading_the_last_element():
    A = sl.Input("A", sl.int32, ("Nlast",))
    N = A.shape[0]
    sl.assume(N >= 1)  # f[0] must exist
    x = sl.Var("x")
    f = sl.Func("f", shape=(N,))
    f[x] = A[x]
    f[0] = f[0] + f[N - 1]
    a = np.arange(1, 6, dtype=np.int32)
    ref = a.copy()
    ref[0] += ref[-1]
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_mixed_constant_and_pure_var_indices_2d():
    A = sl.Input("A", sl.int32, (3, 4))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j]
    f[i, 0] = -1          # first column
    f[1, j] = f[1, j] * 10  # second row, after the column update
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    ref = a.copy()
    ref[:, 0] = -1
    ref[1, :] *= 10
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_matmul_as_update_stage():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = 0.0
    C[i, j] += A[i, k] * B[k, j]
    rng = rng_for(9)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(C)(A=a, B=b), a @ b, rtol=1e-5, atol=1e-5)


def test_update_over_rdom_subset_leaves_other_points():
    A = sl.Input("A", sl.int32, ("Nsub",))
    sl.assume(A.shape[0] >= 5)
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    r = sl.RDom((2, 3), name="r")
    f[r] = f[r] * 100
    a = np.arange(1, 9, dtype=np.int32)
    ref = a.copy()
    ref[2:5] *= 100
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_update_with_where_rdom():
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    r = sl.RDom(A.shape[0], name="r")
    odd = r.where(r % 2 == 1)
    f[odd] = -f[odd]
    a = np.arange(1, 10, dtype=np.int32)
    ref = a.copy()
    ref[1::2] *= -1
    np.testing.assert_array_equal(sl.compile(f)(A=a), ref)


def test_intermediate_func_with_update_consumed_by_output():
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    cs = sl.Func("cs")
    cs[x] = A[x]
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    cs[r] = cs[r - 1] + A[r]
    out = sl.Func("out", shape=(A.shape[0],))
    out[x] = cs[x] * 2 - A[x]
    a = np.arange(1, 8, dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(out)(A=a), np.cumsum(a) * 2 - a)


def test_update_reading_an_intermediate_reduction():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    total = sl.Func("total")
    total[x] = sl.sum(A[r])
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[x] = f[x] / total[0]
    a = rng_for(10).uniform(1, 2, 7).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), a / a.sum(), rtol=1e-5)


def test_update_with_2d_rdom_on_the_left_transpose():
    A = sl.Input("A", sl.int32, (3, 5))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(5, 3))
    f[i, j] = 0
    r = sl.RDom((0, 3), (0, 5), name="r")
    f[r.y, r.x] = A[r.x, r.y] + f[r.y, r.x]
    a = np.arange(15, dtype=np.int32).reshape(3, 5)
    np.testing.assert_array_equal(sl.compile(f)(A=a), a.T)


def test_scan_intermediate_consumed_at_offset():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    cs = sl.Func("cs")
    cs[x] = A[x]
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    cs[r] = cs[r - 1] + A[r]
    g = sl.Func("g", shape=(A.shape[0] - 1,))
    g[x] = cs[x + 1] - cs[x]
    a = np.arange(1, 10, dtype=np.float32) ** 2
    np.testing.assert_allclose(sl.compile(g)(A=a), a[1:], rtol=1e-6)


def test_histogram_then_cumulative_histogram():
    img = sl.Input("img", sl.uint8, ("H", "W"))
    k = sl.Var("k")
    hist = sl.Func("hist")
    hist[k] = 0
    rd = sl.RDom((0, img.shape[0]), (0, img.shape[1]), name="rd")
    hist[sl.cast(sl.int32, img[rd.x, rd.y])] += 1
    cdf = sl.Func("cdf", shape=(256,))
    cdf[k] = hist[k]
    s = sl.RDom((1, 255), name="s")
    cdf[s] = cdf[s - 1] + hist[s]
    im = rng_for(11).integers(0, 256, (5, 7)).astype(np.uint8)
    np.testing.assert_array_equal(sl.compile(cdf)(img=im),
                                  np.cumsum(np.bincount(im.ravel(), minlength=256)))


def test_unclamped_scatter_is_rejected_not_written_out_of_bounds():
    img = sl.Input("img", sl.int32, ("N",))
    k = sl.Var("k")
    hist = sl.Func("hist8", shape=(8,))
    hist[k] = 0
    r = sl.RDom(img.shape[0], name="r")
    with pytest.raises(sl.SchedlangError) as ei:
        hist[img[r]] += 1
        sl.compile(hist)(img=np.array([1, 2, 100], np.int32))
    assert "hist8" in str(ei.value)


def test_an_output_shaped_by_a_product_of_sizes_and_its_flattening_read():
    """shape=(R * C,): the pure definition writes its own domain, and x // C, x % C of it
    stays inside a (R, C) input (a positive size divides a non-negative range)."""
    x = sl.Var("x")
    P = sl.Input("P", sl.float32, ("R_prod", "C_prod"))
    f = sl.Func("f", shape=(P.shape[0] * P.shape[1],))
    f[x] = sl.cast(sl.float32, x)
    np.testing.assert_array_equal(sl.compile(f)(P=np.zeros((3, 4), np.float32)),
                                  np.arange(12, dtype=np.float32))
    g = sl.Func("g", shape=(P.shape[0] * P.shape[1],))
    g[x] = P[x // P.shape[1], x % P.shape[1]]
    kern = sl.compile(g)
    p = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(kern(P=p), p.ravel())
    assert kern(P=np.zeros((0, 4), np.float32)).shape == (0,)
    assert kern(P=np.zeros((3, 0), np.float32)).shape == (0,)
    h = sl.Func("h", shape=(P.shape[0] * P.shape[1] + 1,))
    h[x] = P[x // P.shape[1], x % P.shape[1]]
    with pytest.raises(sl.AlgorithmError, match=r"h reads P\[x // C_prod, x % C_prod\]: "
                                                r"dimension 0 ranges over \[0, R_prod\]"):
        sl.compile(h)


def test_two_vars_of_one_name_in_a_definition_are_named_as_such():
    A = sl.Input("A", sl.float32, (3, 3))
    x1, x2 = sl.Var("x"), sl.Var("x")
    f = sl.Func("f")
    with pytest.raises(sl.AlgorithmError, match=r"f\[x, x\]: two different Vars are both named "
                                                r"x; give each Var its own name"):
        f[x1, x2] = A[x1, x2]
    with pytest.raises(sl.AlgorithmError, match=r"f\[x, x\]: each Var may appear once"):
        f[x1, x1] = A[x1, x1]
