"""rfactor and double_buffer: results against numpy, the loop IR they produce, and errors."""
import re

import numpy as np
import pytest

import schedlang as sl


def _row_sum(scale=2):
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[i, k]) * scale
    return A, i, k, f


@pytest.mark.parametrize("K", [32, 37, 1, 8])
def test_rfactor_of_split_inner_loop(K):
    A, i, k, f = _row_sum()
    s = sl.Schedule(f)
    s[f].split(k, 8)
    intm = s[f].rfactor("k.i")
    s[intm].compute_at(f, i).vectorize("k.i")
    a = np.random.default_rng(0).random((5, K), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(1) * 2, rtol=1e-5)
    assert "rfactor('k.i'" in str(s)


@pytest.mark.parametrize("K", [7, 8, 1])
def test_an_input_staged_for_an_rfactor_of_a_guarded_split_covers_only_the_input(K):
    # the guard k.o * 4 + k.i < K bounds what the partial sums read, so the staged copy of
    # A is A's own extent (K), not K rounded up to the split
    A, B, i, j, k, C = _gemm()
    s = sl.Schedule(C)
    _, ki = s[C].split(k, 4, tail="guard")
    partial = s[C].rfactor(ki)
    s[A].cache_read(partial)
    rng = np.random.default_rng(K)
    a, b = rng.random((5, K), dtype=np.float32), rng.random((K, 3), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-5)
    again = sl.Schedule.from_json(s.to_json(), C)
    np.testing.assert_allclose(sl.compile(C, again)(A=a, B=b), a @ b, rtol=1e-5)


def test_rfactor_of_the_second_rdom_of_a_reduction_over_two_uses_that_rdoms_extent():
    # sl.sum over two RDoms reduces over both; a split of the second (48, not the first's
    # 64) is what the partial sums run over
    A = sl.Input("A", sl.float32, (64, 48))
    r1, r2 = sl.RDom(64, name="r1"), sl.RDom(48, name="r2")
    f = sl.Func("f", shape=())
    f[()] = sl.sum(A[r1, r2])
    s = sl.Schedule(f)
    s[f].split(r2, 16, tail="guard")
    part = s[f].rfactor("r2.i")
    s[part].vectorize("r2.i")
    a = np.random.default_rng(5).random((64, 48), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(), rtol=1e-5)


@pytest.mark.parametrize("K", [7, 8, 1])
def test_rfactor_of_both_parts_of_a_guarded_split_reads_only_where_the_guard_holds(
        K, monkeypatch):
    # the second rfactor leaves no reduction loop: its one point exists only under the
    # guard, so B and the staged A are read inside it (checked access by access)
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    A, B, i, j, k, C = _gemm()
    s = sl.Schedule(C)
    s[C].split(k, 4, tail="guard")
    partial = s[C].rfactor("k.i")
    s[A].cache_read(partial, memory="local")
    s[partial].rfactor("k.o")
    rng = np.random.default_rng(K)
    a, b = rng.random((3, K), dtype=np.float32), rng.random((K, 2), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-5)


def test_rfactor_whole_reduction_variable_parallel_and_vectorized():
    A, i, k, f = _row_sum(1)
    s = sl.Schedule(f)
    intm = s[f].rfactor(k)
    s[intm].vectorize("k", 8)
    s[f].parallel(i)
    a = np.random.default_rng(1).random((7, 50), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(1), rtol=1e-5)


def test_rfactor_of_outer_loop_with_maximum():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.maximum(A[i, k])
    s = sl.Schedule(f)
    s[f].split(k, 4)
    intm = s[f].rfactor("k.o")
    s[intm].parallel("k.o")
    a = np.random.default_rng(2).random((3, 21), dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a.max(1))


def test_rfactor_replays_from_json_and_python():
    A, i, k, f = _row_sum()
    s = sl.Schedule(f)
    s[f].split(k, 8)
    s[f].rfactor("k.i", name="partial")
    s2 = sl.Schedule.from_json(s.to_json(), f)
    assert str(s2) == str(s)
    s3 = sl.Schedule(f)
    exec(str(s), {"sl": sl, "s": s3, "f": f, "A": A, "i": i, "k": k})
    assert str(s3) == str(s)


def test_rfactor_keeps_what_was_scheduled_on_the_pure_loops():
    # parallel / split / vectorize on the pure loops before rfactor stay in force after it
    A, B, i, j, k, C = _gemm()
    s = sl.Schedule(C)
    s[C].parallel(i).vectorize(j, 8)
    s[C].split(k, 4, tail="guard")
    part = s[C].rfactor("k.o")
    assert s[C].loop_names() == ["i", "j.o", "j.i", "k.o"]
    s[part].compute_at(C, i)
    ir = str(sl.lower(C, s))
    assert "parallel for C.s0.i" in ir and "ramp(" in ir
    rng = np.random.default_rng(3)
    a, b = rng.random((6, 9), dtype=np.float32), rng.random((9, 20), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-5)
    # and a nested rfactor keeps the parallel loop of the first intermediate
    X = sl.Input("X", sl.float32, ("N",))
    r = sl.RDom(X.shape[0], name="r")
    f = sl.Func("f", shape=())
    f[()] = sl.sum(X[r])
    s = sl.Schedule(f)
    s[f].split(r, 1000, tail="guard")
    outer = s[f].rfactor("r.o")
    s[outer].compute_root().parallel("r.o")
    s[outer].split("r.i", 16, tail="guard")
    lanes = s[outer].rfactor("r.i.i")
    s[lanes].compute_at(outer, "r.o").vectorize("r.i.i")
    assert "parallel for f_intm.s0.r.o" in str(sl.lower(f, s))
    x = rng.random(12345, dtype=np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(X=x), x.sum(dtype=np.float64), rtol=1e-5)


def test_rfactor_errors():
    A, i, k, f = _row_sum()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=r"rfactor\(i\) on f: i is not a reduction loop"):
        s[f].rfactor(i)
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = sl.argmax(A[i, k])
    with pytest.raises(sl.ScheduleError, match="argmax"):
        sl.Schedule(g)[g].rfactor(k)


def _gemm(K_assume=None):
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return A, B, i, j, k, C


@pytest.mark.parametrize("K", [32, 29])
def test_double_buffer_staged_operand(K):
    A, B, i, j, k, C = _gemm()
    s = sl.Schedule(C)
    s[C].split(k, 8)
    s[C].reorder("k.o", i, "k.i", j)
    Bc = s[B].cache_read(C, memory="local")
    s[Bc].compute_at(C, "k.o").double_buffer()
    kern = sl.compile(C, s)
    rng = np.random.default_rng(3)
    a = rng.random((5, K), dtype=np.float32)
    b = rng.random((K, 7), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)
    # two copies of the staged panel, the next one filled ahead of its use
    assert f"allocate {Bc.name}[float32; 2 x" in kern.loop_ir
    assert "C.s0.k.o + 1" in kern.loop_ir


def test_double_buffer_needs_a_serial_compute_loop():
    A, B, i, j, k, C = _gemm()
    s = sl.Schedule(C)
    Bc = s[B].cache_read(C)
    s[Bc].double_buffer()
    with pytest.raises(sl.ScheduleError, match=f"double_buffer on {Bc.name}: .*compute_at"):
        sl.compile(C, s)
    s = sl.Schedule(C)
    s[C].parallel(i)
    Bc = s[B].cache_read(C)
    with pytest.raises(sl.ScheduleError, match="serial loop"):
        s[Bc].compute_at(C, i).double_buffer()      # refused at the directive


def test_double_buffer_on_an_output_is_refused_at_the_directive():
    A, B, i, j, k, C = _gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError, match="double_buffer on C: C is an output of the "
                       "schedule.*cache_read"):
        s[C].double_buffer()
    assert "double_buffer" not in str(s)


def _row_update(combine, dtype=sl.float32, where=None):
    """f[i] = identity, then the update f[i] = combine(f[i], A[i, r]) (Halide's form)."""
    A = sl.Input("A", dtype, ("M", "K"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    if where is not None:
        r = r.where(where(r))
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.cast(dtype, 1 if combine == "mul" else 0)
    e = A[i, r]
    f[i] = {"add": lambda: f[i] + e, "mul": lambda: e * f[i], "min": lambda: sl.min(e, f[i]),
            "max": lambda: sl.max(f[i], e)}[combine]()
    return A, i, r, f


@pytest.mark.parametrize("combine", ["add", "mul", "min", "max"])
@pytest.mark.parametrize("dtype", [sl.float32, sl.int32])
@pytest.mark.parametrize("split", [None, 8])
def test_rfactor_of_an_update_stage(combine, dtype, split):
    A, i, r, f = _row_update(combine, dtype, where=lambda r: r % 3 != 1)
    s = sl.Schedule(f)
    st = s[f].update(0)
    rv = st.split(r, split)[1] if split else r
    part = st.rfactor(rv, name="partial")
    s[part].compute_at(f, i).vectorize(rv.name if split else "r", 8 if not split else None)
    rng = np.random.default_rng(1)
    a = (rng.random((5, 37)) + 0.5).astype(np.float32) if dtype == sl.float32 else \
        rng.integers(-4, 5, (5, 37)).astype(np.int32)
    kept = a[:, [c for c in range(37) if c % 3 != 1]]
    want = {"add": kept.sum(1), "mul": kept.prod(1), "min": np.minimum(kept.min(1), 0),
            "max": np.maximum(kept.max(1), 0)}[combine]
    np.testing.assert_allclose(sl.compile(f, s)(A=a), want, rtol=1e-5)
    assert "s[f].update(0).rfactor(" in str(s)


def test_rfactor_of_an_update_parallel_over_the_factored_dimension_and_replayed():
    A, i, r, f = _row_update("add")
    s = sl.Schedule(f)
    ro, ri = s[f].update(0).split(r, 4)
    part = s[f].update(0).rfactor(ro)       # the outer loop: 4-wide partial sums per r.o
    s[part].compute_root().parallel("r.o")
    a = np.random.default_rng(2).random((3, 103), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(1), rtol=1e-5)
    loop_ir = sl.lower(f, s)
    A2, i2, r2, f2 = _row_update("add")
    replay = sl.Schedule(f2)
    exec(str(s), {"sl": sl, "s": replay, "A": A2, "i": i2, "r": r2, "f": f2})
    assert str(sl.lower(f2, replay)) == str(loop_ir)
    assert str(sl.lower(f2, sl.Schedule.from_json(s.to_json(), f2))) == str(loop_ir)


def test_rfactor_of_an_update_with_a_constant_index_and_two_rdoms():
    A = sl.Input("A", sl.float32, (6, 10))
    r = sl.RDom(6, 10, name="r")
    total = sl.Func("total", shape=(2,))
    x = sl.Var("x")
    total[x] = 0.0
    total[1] = total[1] + A[r.x, r.y] * 2      # only element 1 is updated
    s = sl.Schedule(total)
    part = s[total].update(0).rfactor(r.y)
    s[part].compute_root().vectorize("r.y", 8)
    a = np.random.default_rng(3).random((6, 10), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(total, s)(A=a), [0, 2 * a.sum()], rtol=1e-5)


def test_rfactor_of_an_update_that_is_not_an_associative_self_update_is_refused():
    x = sl.Var("x")
    A = sl.Input("A", sl.int32, ("N",))
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    scan = sl.Func("scan", shape=(A.shape[0],))
    scan[x] = A[x]
    scan[r] = scan[r - 1] + A[r]
    with pytest.raises(sl.ScheduleError, match=re.escape(
            "rfactor(r) on scan.update(0): rfactor applies to an update of the form "
            "scan[...] = scan[...] + e (or *, sl.min, sl.max), and its left-hand side depends on "
            "the reduction variables")):
        sl.Schedule(scan)[scan].update(0).rfactor(r)
    # a reduction loop of a scan runs in order: the advice is a pure loop, not rfactor
    sub = sl.Func("sub", shape=(4,))
    q = sl.RDom(A.shape[0], name="q")
    sub[x] = 0
    sub[x] = sub[x] - A[q]
    s = sl.Schedule(sub)
    with pytest.raises(sl.ScheduleError, match=r"sub\[\.\.\.\] \+ e \(or \*, sl.min, sl.max\), and its value combines them by another"):
        s[sub].update(0).rfactor(q)
    with pytest.raises(sl.ScheduleError, match=r"update stage runs in order; use one of its "
                                               r"pure loops \(x\)"):
        s[sub].update(0).vectorize(q, 4)
    twice = sl.Func("twice", shape=(4,))
    twice[x] = 1
    twice[x] = twice[x] + twice[x] * A[q]
    with pytest.raises(sl.ScheduleError, match="the rest of its value reads twice again"):
        sl.Schedule(twice)[twice].update(0).rfactor(q)


def test_vectorizing_the_reduction_loop_of_a_summing_update_points_to_rfactor():
    A, i, r, f = _row_update("add")
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(r\) on f\.update\(0\): r is a "
                                               r"reduction variable.*use rfactor first"):
        sl.Schedule(f)[f].update(0).vectorize(r, 8)


@pytest.mark.parametrize("tail", ["pad", "guard", "shift", "auto"])
def test_double_buffer_copies_hold_what_a_padded_producer_writes(tail):
    # one row of P per iteration of C's i, rounded up to 2 rows by tail='pad': each copy
    # must hold 2 rows, or the second copy is overwritten (and the heap past the last)
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    P = sl.Func("P")
    P[i, j] = sl.clamp_edge(A)[i, j] * 2.0
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(P[i, k] * B[k, j])
    s = sl.Schedule(C)
    s[P].split(i, 2, tail=tail)
    s[P].compute_at(C, i).double_buffer()
    kern = sl.compile(C, s)
    rng = np.random.default_rng(4)
    a, b = rng.random((5, 3), dtype=np.float32), rng.random((3, 7), dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(kern(A=a, B=b), 2 * a @ b, rtol=1e-5)
    if tail == "pad":
        assert "allocate P[float32; 2 x 2 x " in str(sl.lower(C, s))


def test_a_producer_placed_in_a_double_buffered_funcs_loop_is_told_why_it_cannot():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3
    by = sl.Func("by", shape=(A.shape[0] - 2, A.shape[1] - 2))
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3
    s = sl.Schedule(by)
    yo, yi = s[by].split(y, 2)
    s[bx].compute_at(by, yo)
    s[bx].double_buffer()
    copy = s[A].cache_read(bx, memory="local")
    s[copy].compute_at(bx, y)
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(bx, y\) on A_bx: bx's loop y does "
                       r"not enclose every use of A_bx: bx is double-buffered, so it is computed "
                       r"in two places .* or leave bx single-buffered\. Legal locations for "
                       r"A_bx are: root"):
        sl.lower(by, s)


@pytest.mark.parametrize("order", ["parallel, compute_at, double_buffer",
                                   "parallel, double_buffer, compute_at"])
def test_double_buffering_at_a_parallel_loop_is_refused_at_the_directive(order):
    # it was accepted and refused only when the pipeline was lowered
    A = sl.Input("A", sl.float32, (64, 64))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    out = sl.Func("out", shape=(64, 64))
    out[y, x] = g[y, x] + 1
    s = sl.Schedule(out)
    s[out].parallel(y)
    steps = {"compute_at": lambda: s[g].compute_at(out, y),
             "double_buffer": lambda: s[g].double_buffer()}
    first, last = order.split(", ")[1:]
    steps[first]()
    with pytest.raises(sl.ScheduleError, match=r"g would be double-buffered and computed at "
                                               r"out\.y, a parallel loop"):
        steps[last]()
    assert len(s.trace) == 2
    if first == "compute_at":       # the refused double_buffer left no mark
        np.testing.assert_array_equal(sl.compile(out, s)(A=np.ones((64, 64), np.float32)), 3.0)


def test_errors_about_an_rfactor_intermediate_print_its_reads_as_written():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    rowsum = sl.Func("rowsum", shape=(A.shape[0],))
    rowsum[i] = sl.sum(A[i, r])
    s = sl.Schedule(rowsum)
    part = s[rowsum].rfactor(r)
    s[part].split(r, 4, tail="pad")
    with pytest.raises(sl.ScheduleError, match=r"makes rowsum_intm read A\[i, r\] outside A's "
                       "extent"):
        sl.compile(rowsum, s)


def test_rfactor_of_a_loop_split_twice_says_which_loops_it_takes():
    A = sl.Input("A", sl.float32, (64,))
    k = sl.RDom(64, name="k")
    f = sl.Func("f", shape=())
    f[()] = sl.sum(A[k])
    s = sl.Schedule(f)
    s[f].split(k, 16, names=("k.o", "k.i"))
    s[f].split("k.i", 4, names=("k.i.o", "k.i.i"))
    with pytest.raises(sl.ScheduleError, match=r"rfactor\(k\.i\.o\) on f: k\.i\.o comes from "
                       r"splitting a loop that was itself split.*\(k\.o, k\.i, k\)"):
        s[f].rfactor("k.i.o")
    s[f].rfactor("k.i")   # one of the loops the message offers
    a = np.arange(64, dtype=np.float32)
    assert sl.compile(f, s)(A=a) == a.sum()
