"""Autotuning pipelines a user can compile but the search could not run (SPEC §4): a Param
constrained by ``sl.assume`` (the search ran every candidate with the Param at 2, which the
kernel refuses, so ``sl.autotune`` and ``BEAM=N sl.compile`` ended in an ArgumentError
about arguments the user never passed), negative ``sizes=`` (a numpy ValueError), and
candidates that compiled by the search's deadline being dropped unmeasured."""
import time

import numpy as np
import pytest

import schedlang as sl
from schedlang.autotune import tune
from schedlang.autotune.measure import random_inputs


def shifted(p):
    """``f[x] = A[x + min(p, 4)] * 2 + 1`` over 60 of A's 64 elements."""
    A = sl.Input("A", sl.float32, (64,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(60,))
    f[x] = A[x + sl.clamp(p, 0, 4)] * 2 + 1
    return f


def test_a_param_under_an_assume_is_tuned_with_a_value_that_keeps_it():
    p = sl.Param("p_r11_tuned", sl.int32)
    sl.assume(p >= 4)
    f = shifted(p)
    s = tune(f, beam=1, budget_s=0.5, threads=1, jobs=1, progress=False, store=False).schedule
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a, **{"p_r11_tuned": 5}), a[4:] * 2 + 1)


def test_beam_compile_of_a_pipeline_with_an_assumed_param(monkeypatch):
    p = sl.Param("p_r11_beam", sl.int32)
    sl.assume(p >= 3)
    f = shifted(p)
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "0.5")
    kern = sl.compile(f)
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a, **{"p_r11_beam": 3}), a[3:63] * 2 + 1)


def test_param_values_follow_the_constants_of_the_facts():
    p = sl.Param("p_r11_big", sl.int32)
    q = sl.Param("q_r11_big", sl.float32)
    r = sl.Param("r_r11_big", sl.uint8)
    sl.assume(p >= 1000)
    sl.assume(q < -50.0)
    sl.assume(r > 200)
    A = sl.Input("A", sl.float32, (8,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(8,))
    f[x] = A[x] * q + sl.cast(sl.float32, p + sl.cast(sl.int32, r))
    v = random_inputs(sl.Schedule(f), {"A": (8,)})
    assert v["p_r11_big"] >= 1000 and v["q_r11_big"] < -50 and 200 < v["r_r11_big"] <= 255


def test_a_param_no_value_can_satisfy_is_a_schedule_error_naming_it():
    p = sl.Param("p_r11_none", sl.int32)
    sl.assume(p > 10)
    sl.assume(p < 5)
    with pytest.raises(sl.ScheduleError, match=r"Param p_r11_none satisfies assume\(p_r11_none"):
        tune(shifted(p), beam=1, budget_s=0.5, threads=1, jobs=1, progress=False, store=False)


def test_negative_sizes_are_an_algorithm_error_naming_the_input():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    with pytest.raises(sl.AlgorithmError, match=r"Input A dimension 0 is -3 .*cannot be negative"):
        sl.autotune(f, budget_s=0.5, sizes={"N": -3}, progress=False)


def test_candidates_compiled_by_the_deadline_are_still_measured(monkeypatch):
    # a loaded machine: the round's compiles end at the search's deadline; what compiled
    # was thrown away, and the search returned the default schedule having measured nothing
    from schedlang.autotune import measure
    real_run = measure.CompilePool.run

    def slow_run(self, schedule_jsons, jit, deadline, **kw):
        out = real_run(self, schedule_jsons, jit, deadline, **kw)
        time.sleep(max(0.0, deadline - time.perf_counter()))
        return out
    monkeypatch.setattr(measure.CompilePool, "run", slow_run)
    X = sl.Input("X", sl.float32, (256,))
    i = sl.Var("i")
    o = sl.Func("o", shape=(256,))
    o[i] = X[i] * 2 + 1
    r = tune(o, beam=1, budget_s=2, threads=1, jobs=1, progress=False, store=False)
    assert r.report.measured >= 1 and r.report.elapsed_s < 2 + 1.0
