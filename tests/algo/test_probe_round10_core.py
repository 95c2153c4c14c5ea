"""Round-10 conformance probes of SPEC sections 1, 3 and 7: a boundary-condition view is
indexed by integers like the Input it extends; sl.clamp names itself when a literal bound
does not fit the clamped value's type; and a Schedule built before a Func got another
definition is refused at compile time rather than silently dropping that definition."""
import numpy as np
import pytest

import schedlang as sl


@pytest.mark.parametrize("make", [sl.clamp_edge, sl.wrap, sl.mirror,
                                  lambda a: sl.constant_exterior(a, 0.0)])
def test_a_boundary_view_refuses_a_float_index_like_the_input_does(make):
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    with pytest.raises(sl.AlgorithmError) as e:
        make(A)[x * 0.5]
    msg = str(e.value)
    assert "(A)[float32(x) * 0.5]: index" in msg and "sl.float32" in msg
    assert "indices must be integers" in msg and "sl.cast(sl.int32" in msg


def test_a_boundary_view_refuses_a_slice():
    A = sl.Input("A", sl.float32, ("N",))
    with pytest.raises(sl.AlgorithmError) as e:
        sl.wrap(A)[1:2]
    assert "wrap(A)[...]: slices are not indices" in str(e.value)


def test_a_boundary_view_still_takes_integer_indices_of_any_width():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.mirror(A)[sl.cast(sl.int64, x) - 2] + sl.wrap(A)[sl.cast(sl.int16, x) + 3]
    a = np.arange(5, dtype=np.float32) * 10 + 1
    idx = np.arange(5)
    expect = np.pad(a, 8, mode="reflect")[idx - 2 + 8] + np.pad(a, 8, mode="wrap")[idx + 3 + 8]
    np.testing.assert_array_equal(sl.compile(f)(A=a), expect)


@pytest.mark.parametrize("lo, hi, bad", [(2, 1000, 1000), (-1, 10, -1)])
def test_clamp_names_itself_when_a_literal_bound_does_not_fit(lo, hi, bad):
    A = sl.Input("A", sl.uint8, ("N",))
    x = sl.Var("x")
    with pytest.raises(sl.AlgorithmError) as e:
        sl.clamp(A[x], lo, hi)
    msg = str(e.value)
    assert f"the literal {bad} does not fit sl.uint8" in msg
    assert "sl.clamp" in msg and "'min'" not in msg and "'max'" not in msg


def test_clamp_with_fitting_and_float_bounds_is_unchanged():
    A = sl.Input("A", sl.int8, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    g = sl.Func("g", shape=(A.shape[0],))
    f[x] = sl.clamp(A[x], -2, 3)
    g[x] = sl.clamp(A[x], 0.5, 3)           # a float bound next to an int8 gives float32
    a = np.array([-128, -3, 1, 9, 127], np.int8)
    out = sl.compile(f)(A=a)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, np.clip(a, -2, 3))
    out = sl.compile(g)(A=a)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.clip(a.astype(np.float32), 0.5, 3))


def test_a_schedule_built_before_an_update_is_refused_not_silently_used():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    s = sl.Schedule(f)
    f[x] = f[x] * 2                          # added after the schedule was built
    for call in (lambda: sl.compile(f, s), lambda: sl.lower(f, s)):
        with pytest.raises(sl.CompileError) as e:
            call()
        msg = str(e.value)
        assert "f has 2 definition(s) but had 1 when sl.Schedule(f) was built" in msg
        assert "build the Schedule after the algorithm is complete" in msg
    a = np.ones(3, np.float32)
    np.testing.assert_array_equal(sl.compile(f, sl.Schedule(f))(A=a), (a + 1) * 2)


def test_a_schedule_built_before_an_intermediate_got_an_update_is_refused():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g")
    g[x] = A[x] + 1
    h = sl.Func("h", shape=(A.shape[0],))
    h[x] = g[x] * 3
    s = sl.Schedule(h)
    g[x] = g[x] + 10
    with pytest.raises(sl.CompileError) as e:
        sl.compile(h, s)
    assert "g has 2 definition(s) but had 1 when sl.Schedule(h) was built" in str(e.value)
    a = np.ones(2, np.float32)
    np.testing.assert_array_equal(sl.compile(h)(A=a), (a + 1 + 10) * 3)


def test_a_schedule_with_directives_on_a_complete_algorithm_still_compiles():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[r] = f[r - 1] + A[r]
    s = sl.Schedule(f)
    s[f].split(x, 4)
    t = s.copy()
    a = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, t)(A=a), np.cumsum(a))


@pytest.mark.parametrize("ranges, part, var", [((("x",)), "extent", "x"),
                                               ((("y", 2),), "min", "y"),
                                               (((0, "y"),), "extent", "y")])
def test_an_rdom_whose_bounds_use_a_pure_var_is_refused_when_built(ranges, part, var):
    x, y = sl.vars("x y")
    names = {"x": x, "y": y}
    args = [tuple(names.get(v, v) for v in r) if isinstance(r, tuple) else names[r]
            for r in ranges]
    with pytest.raises(sl.AlgorithmError) as e:
        sl.RDom(*args, name="r")
    msg = str(e.value)
    assert msg.startswith(f"RDom r: its {part} uses the Var {var}")
    assert f"r.where(r < {var})" in msg


def test_an_rdom_whose_extent_uses_another_rdoms_variable_is_refused():
    r0 = sl.RDom(8, name="r0")
    with pytest.raises(sl.AlgorithmError) as e:
        sl.RDom((0, r0), name="r")
    msg = str(e.value)
    assert msg.startswith("RDom r: its extent uses the reduction variable r0")
    assert "r.where(r.y < r.x)" in msg


def test_rdom_bounds_may_use_sizes_and_params_and_a_triangle_is_a_where():
    A = sl.Input("A", sl.float32, ("N",))
    q = sl.Param("q", sl.int32)
    x = sl.Var("x")
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    rq = sl.RDom((0, q), name="rq")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.sum(A[r]) + sl.sum(sl.clamp_edge(A)[rq])
    a = np.arange(1, 6, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a, q=3), np.full(5, a[1:].sum() + a[:3].sum()))
    t = sl.RDom(A.shape[0], name="t")
    t = t.where(t < x)
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = sl.sum(A[t])
    np.testing.assert_array_equal(sl.compile(g)(A=a), np.concatenate([[0], np.cumsum(a)[:-1]]))
