"""Loop partitioning of a tail guard that an inner serial loop re-tests unchanged: a
K-blocked matrix product whose row strips end in a guarded tail keeps the guard out of
its reduction loop (the steady strips run branch-free, their sums in registers), and the
last, partial strip keeps it."""
import re

import numpy as np
import pytest

import schedlang as sl


def _blocked_matmul(m, n, kk, order):
    A = sl.Input("A", sl.float32, (m, kk))
    B = sl.Input("B", sl.float32, (kk, n))
    i, j = sl.vars("i j")
    k = sl.RDom(kk, name="k")
    C = sl.Func("C", shape=(m, n))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    s[C].split(i, 6, tail="guard", names=("io", "ii"))
    s[C].split(k, 16, names=("ko", "ki"))
    s[C].split(j, 8, names=("jo", "jv"))
    s[C].reorder(*order)
    s[C].vectorize("jv").unroll("ii")
    return C, s


def _loop_bodies(ir_text, var):
    """The text of each ``for <var>`` loop of the printed loop IR (its header and body)."""
    lines = ir_text.splitlines()
    out = []
    for n, line in enumerate(lines):
        if re.match(rf"\s*for {re.escape(var)} in", line):
            depth = len(line) - len(line.lstrip())
            body = [line]
            for nxt in lines[n + 1:]:
                if len(nxt) - len(nxt.lstrip()) <= depth:
                    break
                body.append(nxt)
            out.append("\n".join(body))
    return out


@pytest.mark.parametrize("order", [("ko", "io", "jo", "ki", "ii", "jv"),
                                   ("ko", "jo", "io", "ki", "ii", "jv")])
def test_row_guard_leaves_the_reduction_loop_of_the_steady_strips(order, monkeypatch):
    m, n, kk = 20, 24, 48          # 20 rows: three whole strips of 6, then 2 rows
    C, s = _blocked_matmul(m, n, kk, order)
    # every access of the partial strip checked: it must stay inside its two rows
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    sl.compile(C, s)(A=np.ones((m, kk), np.float32), B=np.ones((kk, n), np.float32))
    monkeypatch.delenv("SCHEDLANG_DEBUG")
    kern = sl.compile(C, s)
    ir_text = kern.loop_ir
    steady = [b for b in _loop_bodies(ir_text, "C.s0.io") if "in [0, 3)" in b.splitlines()[0]]
    assert steady, ir_text
    for body in steady:
        for ki in _loop_bodies(body, "C.s0.ki"):
            assert "if " not in ki, ki
    rng = np.random.default_rng(3)
    a = rng.random((m, kk), dtype=np.float32)
    b = rng.random((kk, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)


def test_a_guard_that_changes_along_the_inner_loop_is_not_partitioned_there():
    # the rows of a fused, guarded plane: the guard reads the position the inner loop
    # steps, so there is nothing to hoist (the vector rule covers vectorized loops)
    X = sl.Input("X", sl.float32, (5, 7))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(5, 7))
    f[y, x] = X[y, x] * 2.0
    s = sl.Schedule(f)
    p = s[f].fuse(y, x, "p")
    s[f].split(p, 8, tail="guard")
    kern = sl.compile(f, s)
    assert len(_loop_bodies(kern.loop_ir, "f.s0.p.o")) == 1, kern.loop_ir
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    np.testing.assert_array_equal(kern(X=a), a * 2)
