"""Regression tests from differential fuzzing of lowering: random small pipelines (index
arithmetic with ``//`` and ``%`` by constants, boundary conditions, updates over RDoms
with nonzero minimums) under random schedules, compared with a numpy evaluation."""
import numpy as np

import schedlang as sl


def test_a_computed_producer_read_at_floor_div_and_mod_by_negative_constants():
    # SPEC: integer // and % are Python's; x % -3 is in [-2, 0] and (3x + 1) // -2 is
    # bounded whenever x is, so bounds inference must find g's region
    x = sl.Var("x")
    g = sl.Func("g")
    g[x] = x * 10
    g[x] = g[x] + 1                      # an update: g is computed, not inlined
    f = sl.Func("f", shape=(7,))
    f[x] = g[(x + 4) % -3] + g[(x * 3 + 1) // -2]
    got = sl.compile(f, sl.Schedule(f))()
    xs = np.arange(7)
    np.testing.assert_array_equal(got, ((xs + 4) % -3) * 10 + ((xs * 3 + 1) // -2) * 10 + 2)


def test_a_loop_tail_past_every_guard_is_dropped():
    # x (extent 4) split by 8 and moved outermost: partitioning x.i at the tail guard
    # x.i < 4 leaves [4, 8), where the guard never holds; that tail is dead code (with
    # SCHEDLANG_DEBUG=bounds such dead nests made LLVM's unroller take seconds)
    x, y = sl.vars("x y")
    f = sl.Func("f", shape=(4, 5))
    f[x, y] = x * 10 + y
    s = sl.Schedule(f)
    s[f].split(y, 8, tail="guard")
    s[f].split(x, 8, tail="guard")
    s[f].reorder("x.i", "x.o", "y.o", "y.i")
    kern = sl.compile(f, s)
    np.testing.assert_array_equal(kern(), np.arange(4)[:, None] * 10 + np.arange(5))
    assert "[4, 8)" not in kern.loop_ir, kern.loop_ir
    assert "x.i < 4" not in kern.loop_ir, kern.loop_ir
