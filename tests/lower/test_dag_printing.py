"""Expressions that share sub-expressions (DAGs) print in size linear in the DAG, not as
trees that grow exponentially with depth."""
import numpy as np

import schedlang as sl


def _chain(depth):
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    x = A[i]
    for _ in range(depth):
        x = sl.select(x > 0, x * 0.5, x + 1)     # three uses of x per level
    return A, i, x


def test_a_deep_dag_prints_its_shared_parts_once_in_the_loop_ir():
    A, i, x = _chain(40)         # 3**40 nodes as a tree
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = x
    kern = sl.compile(f)
    text = kern.loop_ir
    assert len(text) < 5000, len(text)
    lines = text.splitlines()
    assert lines[1].strip() == "let %0 = select(A[f.s0.i] > 0.0, A[f.s0.i] * 0.5, A[f.s0.i] + 1.0)"
    assert lines[-1].strip() == "f[f.s0.i] = select(%38 > 0.0, %38 * 0.5, %38 + 1.0)"
    a = np.linspace(-5, 5, 11).astype(np.float32)
    ref = a.copy()
    for _ in range(40):
        ref = np.where(ref > 0, ref * np.float32(0.5), ref + 1)
    np.testing.assert_array_equal(kern(A=a), ref)


def test_a_deep_dag_prints_with_where_in_expressions_and_errors():
    A, i, x = _chain(30)
    text = str(x)
    assert len(text) < 3000 and text.startswith("select(%28 > 0.0, %28 * 0.5, %28 + 1.0) where ")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[sl.cast(sl.int32, x)]
    try:
        sl.compile(f)
    except sl.AlgorithmError as e:
        msg = str(e)
    else:
        raise AssertionError("a read at a data-dependent index must be refused")
    assert "f reads A[" in msg and "%0 = select(A[i] > 0.0" in msg and len(msg) < 5000


def test_small_shared_expressions_print_in_place():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    y = A[i] + 1
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = y * y
    assert "%" not in sl.compile(f).loop_ir
    assert str(y * y) == "(A[i] + 1.0) * (A[i] + 1.0)"
