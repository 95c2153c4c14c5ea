"""One 2-D algorithm under many schedules, in the style of Halide's scheduling tutorial.

Every schedule must give the same result as numpy (SPEC section 2: a schedule never
changes results).
"""
import numpy as np
import pytest

import schedlang as sl

H, W = 24, 40          # divisible by the factors used below
HN, WN = 37, 53        # not divisible by any factor used below


def build():
    """f[y, x] = A[y, x] * 2 + x + y * 3 + sin(A[y, x])"""
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x] * 2 + sl.cast(sl.float32, x + y * 3) + sl.sin(A[y, x])
    return A, f, y, x


def reference(a):
    h, w = a.shape
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return a * 2 + (xx + yy * 3).astype(np.float32) + np.sin(a)


def data(h, w, seed=0):
    return np.random.default_rng(seed).standard_normal((h, w)).astype(np.float32)


def check(f, s, h=H, w=W):
    a = data(h, w)
    out = sl.compile(f, s)(A=a)
    assert out.shape == (h, w)
    np.testing.assert_allclose(out, reference(a), rtol=1e-5, atol=1e-5)


# Each schedule is a function (s, f, y, x) -> None applying directives.

def sch_default(s, f, y, x):
    pass


def sch_reorder(s, f, y, x):
    s[f].reorder(x, y)


def sch_split(s, f, y, x):
    xo, xi = s[f].split(x, 4)


def sch_split_reorder(s, f, y, x):
    yo, yi = s[f].split(y, 4)
    s[f].reorder(yi, yo, x)


def sch_fuse(s, f, y, x):
    s[f].fuse(y, x)


def sch_tile(s, f, y, x):
    yo, xo, yi, xi = s[f].tile(y, x, 4, 8)


def sch_tile_fuse_parallel(s, f, y, x):
    yo, xo, yi, xi = s[f].tile(y, x, 8, 8)
    t = s[f].fuse(yo, xo)
    s[f].parallel(t)


def sch_vectorize(s, f, y, x):
    xo, xi = s[f].split(x, 8)
    s[f].vectorize(xi)


def sch_vectorize_width(s, f, y, x):
    s[f].vectorize(x, 8)


def sch_unroll(s, f, y, x):
    xo, xi = s[f].split(x, 4)
    s[f].unroll(xi)


def sch_unroll_factor(s, f, y, x):
    s[f].unroll(x, 4)


def sch_split_vectorize_unroll(s, f, y, x):
    xo, xi = s[f].split(x, 16)
    xio, xii = s[f].split(xi, 4)
    s[f].vectorize(xii).unroll(xio)


def sch_tile_parallel(s, f, y, x):
    yo, xo, yi, xi = s[f].tile(y, x, 8, 8)
    s[f].parallel(yo).vectorize(xi)


def sch_fuse_parallel(s, f, y, x):
    t = s[f].fuse(y, x)
    s[f].parallel(t)


def sch_parallel_outer(s, f, y, x):
    s[f].parallel(y)


def sch_fuse_split_vectorize(s, f, y, x):
    # Halide tutorial: fuse, then split the fused loop and vectorize the inner one.
    t = s[f].fuse(y, x)
    to, ti = s[f].split(t, 8)
    s[f].vectorize(ti).parallel(to)


def sch_everything(s, f, y, x):
    # Halide tutorial lesson 5, "putting it all together".
    yo, xo, yi, xi = s[f].tile(y, x, 8, 16)
    tile_index = s[f].fuse(yo, xo)
    s[f].parallel(tile_index)
    xio, xii = s[f].split(xi, 4)
    s[f].vectorize(xii)
    s[f].unroll(yi)


def sch_string_names(s, f, y, x):
    s[f].split("x", 8)
    s[f].reorder("x.o", "y", "x.i")
    s[f].vectorize("x.i")


SCHEDULES = [
    sch_default, sch_reorder, sch_split, sch_split_reorder, sch_fuse, sch_tile,
    sch_tile_fuse_parallel, sch_vectorize, sch_vectorize_width, sch_unroll,
    sch_unroll_factor, sch_split_vectorize_unroll, sch_tile_parallel, sch_fuse_parallel,
    sch_parallel_outer, sch_fuse_split_vectorize, sch_everything, sch_string_names,
]


def _id(p):
    return p.__name__[4:] if callable(p) else None


@pytest.mark.parametrize("sched", SCHEDULES, ids=_id)
def test_schedule_divisible(sched):
    A, f, y, x = build()
    s = sl.Schedule(f)
    sched(s, f, y, x)
    check(f, s)


@pytest.mark.parametrize("sched", SCHEDULES, ids=_id)
def test_schedule_non_divisible(sched):
    A, f, y, x = build()
    s = sl.Schedule(f)
    sched(s, f, y, x)
    check(f, s, HN, WN)


@pytest.mark.parametrize("tail", ["guard", "shift", "auto"])
def test_split_tail_on_output(tail):
    A, f, y, x = build()
    s = sl.Schedule(f)
    yo, yi = s[f].split(y, 8, tail=tail)
    xo, xi = s[f].split(x, 16, tail=tail)
    s[f].reorder(yo, xo, yi, xi)
    s[f].vectorize(xi)
    check(f, s, HN, WN)


@pytest.mark.parametrize("tail", ["guard", "shift", "auto"])
def test_split_tail_divisible(tail):
    A, f, y, x = build()
    s = sl.Schedule(f)
    s[f].split(x, 8, tail=tail)
    check(f, s, H, W)


def build_two_stage(clamped=True):
    """g is an intermediate computing the tutorial expression, f = g + 1 is the output.

    With clamped=True g reads A through sl.clamp_edge, so that g may legally be computed
    over a larger region than f needs (tail="pad" rounds its region up)."""
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    Ain = sl.clamp_edge(A) if clamped else A
    g = sl.Func("g")
    g[y, x] = Ain[y, x] * 2 + sl.cast(sl.float32, x + y * 3) + sl.sin(Ain[y, x])
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    return A, g, f, y, x


@pytest.mark.parametrize("tail", ["guard", "shift", "pad", "auto"])
def test_split_tail_on_intermediate(tail):
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    s[g].compute_root()
    yo, yi = s[g].split(y, 8, tail=tail)
    xo, xi = s[g].split(x, 16, tail=tail)
    s[g].reorder(yo, xo, yi, xi).vectorize(xi)
    a = data(HN, WN)
    out = sl.compile(f, s)(A=a)
    np.testing.assert_allclose(out, reference(a) + 1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tail", ["guard", "shift", "pad", "auto"])
def test_split_tail_on_intermediate_computed_at(tail):
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    fyo, fyi = s[f].split(y, 4)
    s[g].compute_at(f, fyo)
    s[g].split(x, 16, tail=tail)
    a = data(HN, WN)
    out = sl.compile(f, s)(A=a)
    np.testing.assert_allclose(out, reference(a) + 1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("width", [2, 4, 8, 16, 32])
def test_vectorize_with_width(width):
    A, f, y, x = build()
    s = sl.Schedule(f)
    s[f].vectorize(x, width)
    check(f, s, HN, WN)


@pytest.mark.parametrize("factor", [2, 3, 4, 7])
def test_unroll_with_factor(factor):
    A, f, y, x = build()
    s = sl.Schedule(f)
    s[f].unroll(y, factor)
    check(f, s, HN, WN)


def test_full_unroll_of_constant_inner_loop():
    A, f, y, x = build()
    s = sl.Schedule(f)
    xo, xi = s[f].split(x, 5)
    yo, yi = s[f].split(y, 3)
    s[f].reorder(yo, xo, yi, xi).unroll(yi).unroll(xi)
    check(f, s, HN, WN)


def test_vectorize_returns_stage_for_chaining():
    A, f, y, x = build()
    s = sl.Schedule(f)
    st = s[f].vectorize(x, 8)
    assert st.parallel(y) is not None
    check(f, s)


def test_split_returns_named_vars():
    A, f, y, x = build()
    s = sl.Schedule(f)
    xo, xi = s[f].split(x, 8)
    assert str(xo.name if hasattr(xo, "name") else xo) == "x.o"
    assert str(xi.name if hasattr(xi, "name") else xi) == "x.i"


def test_tile_returns_four_vars_in_order():
    A, f, y, x = build()
    s = sl.Schedule(f)
    vs = s[f].tile(y, x, 4, 8)
    names = [v.name if hasattr(v, "name") else str(v) for v in vs]
    assert names == ["y.o", "x.o", "y.i", "x.i"]
    check(f, s, HN, WN)


def test_schedule_does_not_change_algorithm():
    # Compiling the same algorithm under two schedules in one process gives the same result.
    A, f, y, x = build()
    s1 = sl.Schedule(f)
    s2 = sl.Schedule(f)
    sch_tile_parallel(s2, f, y, x)
    a = data(HN, WN)
    np.testing.assert_array_equal(sl.compile(f, s1)(A=a), sl.compile(f, s2)(A=a))


def test_out_argument():
    A, f, y, x = build()
    s = sl.Schedule(f)
    sch_tile_parallel(s, f, y, x)
    a = data(HN, WN)
    out = np.zeros((HN, WN), np.float32)
    sl.compile(f, s)(A=a, out=out)
    np.testing.assert_allclose(out, reference(a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tail", ["guard", "shift", "auto"])
def test_split_tail_on_intermediate_reading_input_directly(tail):
    # guard / shift / auto never need g outside the region f reads, so reading A without a
    # boundary condition is fine.
    A, g, f, y, x = build_two_stage(clamped=False)
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].split(y, 8, tail=tail)
    s[g].split(x, 16, tail=tail)
    a = data(HN, WN)
    out = sl.compile(f, s)(A=a)
    np.testing.assert_allclose(out, reference(a) + 1, rtol=1e-5, atol=1e-5)


def test_pad_tail_reading_input_directly_is_a_schedule_error():
    # Rounding g's region up would read A out of bounds. Per SPEC the schedule is either
    # compiled correctly or rejected with a ScheduleError naming the directive.
    A, g, f, y, x = build_two_stage(clamped=False)
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].split(y, 8, tail="pad")
    a = data(HN, WN)
    try:
        out = sl.compile(f, s)(A=a)
    except sl.ScheduleError as e:
        msg = str(e)
        assert "split(y, 8" in msg and "pad" in msg and "on g" in msg, msg
    else:
        np.testing.assert_allclose(out, reference(a) + 1, rtol=1e-5, atol=1e-5)


def test_fuse_without_any_input():
    # fuse on a Func that reads no Input at all.
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(6, 7))
    f[y, x] = sl.cast(sl.float32, x + y * 3)
    s = sl.Schedule(f)
    s[f].fuse(y, x)
    yy, xx = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(sl.compile(f, s)(), (xx + yy * 3).astype(np.float32))


# The directives must reach the generated loop nest (not only give the right numbers):
# a vectorized loop shows as vector expressions (ramp / xN broadcasts) in kern.loop_ir.

@pytest.mark.parametrize("tail", ["guard", "auto", "shift"])
def test_vectorize_reaches_the_loop_nest(tail):
    A, f, y, x = build()
    s = sl.Schedule(f)
    xo, xi = s[f].split(x, 8, tail=tail)
    s[f].vectorize(xi)
    kern = sl.compile(f, s)
    assert "ramp(" in kern.loop_ir, kern.loop_ir
    a = data(HN, WN)
    np.testing.assert_allclose(kern(A=a), reference(a), rtol=1e-5, atol=1e-5)


def test_parallel_reaches_the_loop_nest():
    A, f, y, x = build()
    s = sl.Schedule(f)
    s[f].parallel(y)
    assert "parallel" in sl.compile(f, s).loop_ir
