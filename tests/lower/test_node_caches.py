"""The per-node caches that let lowering passes skip work: ``node_flags`` (does an
expression hold an integer clamp / a Func read) and the simplifier's fixed-point mark.
A cache that outlived a rewrite would make a pass skip an expression it must change."""
import importlib

import schedlang as sl
from schedlang.algo import expr as E

simplify = importlib.import_module("schedlang.lower.simplify")


def test_node_flags_see_int_clamps_and_reads_only():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    clamp = sl.min(x, 3) + 1
    assert E.node_flags(clamp) & E.INT_MINMAX
    assert not E.node_flags(clamp) & E.FUNC_READ
    fmin = sl.min(sl.cast(sl.float32, x), 2.5)      # float min: NaN rules, never a clamp
    assert not E.node_flags(fmin) & E.INT_MINMAX
    read = A[sl.clamp(x, 0, 7)] * 2.0
    assert E.node_flags(read) == E.INT_MINMAX | E.FUNC_READ
    assert E.node_flags(x + 1) == 0


def test_a_rewritten_node_recomputes_its_flags():
    x = sl.Var("x")
    e = sl.min(x, 3) * 2
    assert E.node_flags(e) & E.INT_MINMAX
    plain = e.with_kids((x + 1, e.b))      # the clamp replaced: the copy has none
    assert not E.node_flags(plain) & E.INT_MINMAX
    back = plain.with_kids((sl.max(x, 0), plain.b))
    assert E.node_flags(back) & E.INT_MINMAX


def test_simplifier_fixed_point_mark_is_exact():
    x, y = sl.vars("x y")
    done = simplify.simplify((x + 0) * 1 + (y - y))
    assert str(done) == "x"
    e = (x + 1) * 4 + y
    once = simplify.Simplifier()(e)
    assert simplify.Simplifier()(once) is once        # a fixed point: returned as is
    # a copy with a new child is not a fixed point just because its parent was
    changed = once.with_kids(tuple(k + 0 if k.dtype.is_int else k for k in once.kids()))
    assert changed is not once
    assert str(simplify.Simplifier()(changed)) == str(once)


def test_compiled_results_unchanged_by_the_caches():
    """The same clamped, gathered pipeline compiled twice (the second time every node is
    already marked) gives the numpy result both times."""
    import numpy as np
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[sl.clamp(x - 1, 0, A.shape[0] - 1)] + A[sl.min(x + 1, A.shape[0] - 1)]
    a = np.arange(11, dtype=np.float32)
    want = a[np.clip(np.arange(11) - 1, 0, 10)] + a[np.minimum(np.arange(11) + 1, 10)]
    for _ in range(2):
        s = sl.Schedule(f)
        s[f].vectorize(x, 4)
        np.testing.assert_array_equal(sl.compile(f, s)(A=a), want)


def test_a_guarded_splits_steady_extent_prints_as_one_quotient():
    """min((K + 7) // 8, K // 8) is K // 8 (floor division keeps order), and max(K // 8, 0)
    is K // 8 (sizes are never negative): the README's GEMM printed a nine-deep min chain."""
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    io, ii = s[C].split(i, 32)
    jo, ji = s[C].split(j, 64)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji, 16).unroll(ki)
    text = str(sl.lower(C, s))
    assert "for C.s0.k.o in [0, K // 8):" in text
    assert "min(" not in text.split("K // 8")[0].splitlines()[-1]


def test_order_folds_keep_their_conditions():
    x = sl.Var("x")
    K = sl.Input("A", sl.float32, ("K",)).shape[0]
    s = simplify.simplify
    assert str(s(sl.min((K + 7) // 8, K // 8))) == "K // 8"
    assert str(s(sl.max((K + 7) // 8, K // 8))) == "(K + 7) // 8"
    # a loop variable may be negative: max(x // 8, 0) stays
    assert "max" in str(s(sl.max(x // 8, 0)))
    # different divisors: no order known
    assert "min" in str(s(sl.min(K // 8, K // 4)))
