"""Expressions deeper than Python's default recursion limit compile and run; one too deep
for any stack is a SchedlangError, never a RecursionError or a crash."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.frontend import Tensor


def test_a_chain_of_400_operations_compiles_and_runs():
    A = sl.Input("A", sl.float32, (8,))
    x = sl.Var("x")
    e, ref = A[x], np.linspace(-1, 1, 8).astype(np.float32)
    a = ref.copy()
    for _ in range(400):
        e = sl.tanh(e) * 0.5 + 0.25
        ref = np.tanh(ref) * np.float32(0.5) + np.float32(0.25)
    f = sl.Func("f", shape=(8,))
    f[x] = e
    s = sl.Schedule(f)
    assert "tanh" in str(sl.lower(f, s))
    kern = sl.compile(f, s)
    assert len(kern.loop_ir) > 1000
    np.testing.assert_allclose(kern(A=a), ref, rtol=1e-5)


def test_a_long_frontend_chain_runs_eagerly_and_compiled():
    a = np.linspace(-2, 2, 16, dtype=np.float32).reshape(4, 4)
    y, ref = Tensor(a), a.astype(np.float64)
    x = Tensor.input("x", (4, 4))
    z = x
    for _ in range(300):
        y, z, ref = y.tanh(), z.tanh(), np.tanh(ref)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4)
    np.testing.assert_allclose(sl.compile(z)(x=a), ref, rtol=1e-4)


def test_an_expression_too_deep_for_any_stack_is_an_algorithm_error():
    A = sl.Input("A", sl.float32, (4,))
    x = sl.Var("x")
    e = A[x]
    for _ in range(80000):
        e = e * 0.5 + 0.25
    f = sl.Func("f", shape=(4,))
    with pytest.raises(sl.AlgorithmError, match="defining a Func: an expression is nested too "
                       "deeply.*split the chain into several Funcs"):
        f[x] = e
