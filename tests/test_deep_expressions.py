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


def test_a_pipeline_of_many_funcs_is_lowered_once_on_the_large_stack(monkeypatch):
    # its statement nests past the default recursion limit; lowering used to overflow after
    # seconds of work and then run again from the start on the large stack
    import importlib
    lower_mod = importlib.import_module("schedlang.lower.lower")
    compiler = importlib.import_module("schedlang.compiler")
    deep = importlib.import_module("schedlang.deep_recursion")
    runs = []
    real = lower_mod.lower_pipeline

    def counting(*args, **kwargs):
        runs.append(deep._local.__dict__.get("deep", False))
        return real(*args, **kwargs)
    monkeypatch.setattr(compiler, "lower_pipeline", counting)
    A = sl.Input("A", sl.float32, (16,))
    x = sl.Var("x")
    f, ref = A, np.linspace(0, 1, 16, dtype=np.float32)
    a = ref.copy()
    s_funcs = []
    for k in range(deep.DEEP_PIPELINE_FUNCS + 12):
        g = sl.Func(f"g{k}")
        g[x] = f[x] * 0.5 + 1.0
        s_funcs.append(g)
        f, ref = g, ref * np.float32(0.5) + np.float32(1.0)
    out = sl.Func("out", shape=(16,))
    out[x] = f[x]
    s = sl.Schedule(out)
    for g in s_funcs:
        s[g].compute_root()
    kern = sl.compile(out, s)
    assert runs == [True]
    np.testing.assert_allclose(kern(A=a), ref, rtol=1e-6)
