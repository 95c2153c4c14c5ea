"""RDom.where predicates are part of the definition that reduces over the RDom (SPEC section 1:
"r.where(pred) returns a new RDom restricted by the predicate, which may use the RDom's
variables and pure Vars"). A predicate's variables are checked like the rest of the
definition, so a mistake is an sl.AlgorithmError naming the Func and the variable when the
definition is written, never an internal error while generating code; and a pure Var used
only in a predicate is a variable of the helper Func an inline reduction may become."""
import numpy as np
import pytest

import schedlang as sl


def _input():
    return sl.Input("A", sl.float32, ("N",))


def test_a_predicate_using_another_rdoms_variable_is_refused_at_where():
    A = _input()
    r = sl.RDom(A.shape[0], name="r")
    q = sl.RDom(3, name="q")
    with pytest.raises(sl.AlgorithmError) as e:
        r.where(q > 1)
    msg = str(e.value)
    assert "r.where(q > 1)" in msg
    assert "q is a variable of another RDom" in msg
    assert "internal" not in msg


def test_a_predicate_may_use_the_rdoms_own_variables_through_chained_wheres():
    A = _input()
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    r3 = r.where(r < 5).where(r > 1)        # r's variables, though r3 is derived from r.where
    f = sl.Func("f", shape=(1,))
    f[i] = sl.sum(A[r3])
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), [a[2:5].sum()])


def test_a_pure_var_in_a_predicate_must_be_an_argument_of_the_func():
    A = _input()
    x, z = sl.vars("x z")
    r = sl.RDom(A.shape[0], name="r")
    g = sl.Func("g", shape=(A.shape[0],))
    with pytest.raises(sl.AlgorithmError) as e:
        g[x] = sl.sum(A[r.where(r < z)])
    msg = str(e.value)
    assert msg.startswith("g[x] uses the Var z")
    assert "where(...) predicate" in msg


def test_a_pure_var_in_an_update_predicate_must_be_on_the_left_hand_side():
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    with pytest.raises(sl.AlgorithmError) as e:
        f[r.where(x > 1)] = f[r] * 2
    msg = str(e.value)
    assert msg.startswith("f update 0: the Var x")
    assert "bare argument of the left-hand side f[...]" in msg


def test_an_update_predicate_using_a_pure_var_of_the_left_hand_side_works():
    A = sl.Input("A", sl.float32, ("N", "N"))
    y = sl.Var("y")
    r = sl.RDom(A.shape[1], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[y] = 0.0
    f[y] += A[y, r.where(r <= y)]
    a = np.random.default_rng(0).standard_normal((5, 5)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f)(A=a), np.tril(a).sum(1), rtol=1e-5, atol=1e-5)


def test_a_pure_var_used_only_in_the_predicate_of_a_helper_reduction():
    # the second inline reduction becomes a helper Func: x, used only in its predicate,
    # must be one of the helper's variables
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    q = sl.RDom(A.shape[0], name="q")
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = A[x] + sl.sum(A[r]) * 0 + sl.maximum(A[q.where(q > x)])
    a = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.float32)
    want = np.array([a[k] + (a[k + 1:].max() if k + 1 < len(a) else -np.inf)
                     for k in range(len(a))], np.float32)
    np.testing.assert_array_equal(sl.compile(g)(A=a), want)


def test_r_and_r_where_in_one_reduction_are_refused():
    # they are one variable r restricted two ways: two loops of one name gave a wrong sum
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(1,))
    with pytest.raises(sl.AlgorithmError) as e:
        f[x] = sl.sum(A[r.where(r < 5)] + A[r])
    msg = str(e.value)
    assert msg.startswith("sl.sum(")
    assert "uses both r and a restricted version of it (r.where(...))" in msg


def test_r_and_r_where_in_one_update_are_refused():
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    with pytest.raises(sl.AlgorithmError) as e:
        f[r] = f[r] + A[r.where(r < 5)]
    assert str(e.value).startswith("f update 0: uses both r and a restricted version of it")


def test_r_and_r_where_in_separate_reductions_of_one_func_still_work():
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(2,))
    f[x] = sl.select(x == 0, sl.sum(A[r.where(r < 5)]), sl.sum(A[r]))
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), [a[:5].sum(), a.sum()])


@pytest.mark.parametrize("restricted_in", ["body", "over"])
def test_over_naming_another_version_of_the_rdom_says_to_use_one(restricted_in):
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    rw = r.where(r < 5)
    body, over = (A[rw], r) if restricted_in == "body" else (A[r], rw)
    f = sl.Func("f", shape=(1,))
    with pytest.raises(sl.AlgorithmError) as e:
        f[x] = sl.sum(body, over=over)
    msg = str(e.value)
    assert "uses a restricted version of r (r.where(...)) but over= names another" in msg
    assert "rw = r.where(...); sl.sum(A[rw], over=rw)" in msg


def test_over_naming_the_restricted_rdom_it_uses_sums_the_restricted_points():
    A = _input()
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    rw = r.where(r < 5)
    f = sl.Func("f", shape=(1,))
    f[x] = sl.sum(A[rw], over=rw)
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f)(A=a), [a[:5].sum()])
