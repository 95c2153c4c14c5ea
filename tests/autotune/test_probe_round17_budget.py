"""Tuning budgets and symbolic sizes (SPEC §4), from a seventeenth round of testing:
- ``autotune(C, budget_s=10)`` of a GEMM with symbolic sizes (tuned at the estimated
  1024^3, where the default takes seconds a run) took 29 s: a candidate as slow as the
  default was timed by three cold runs after its checked one, whatever the budget;
- with symbolic sizes the start-point templates found no extents and proposed nothing,
  and the search's actions knew no loop's length: they now size by the sizes tuned at."""
import numpy as np

import schedlang as sl
from schedlang.autotune import measure
from schedlang.autotune.space import extents_of, size_estimates
from schedlang.autotune.templates import seed_schedules


def _symbolic_blur():
    img = sl.Input("img", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = img[y, x] + img[y, x + 1] + img[y, x + 2]
    by = sl.Func("by", shape=(img.shape[0] - 2, img.shape[1] - 2))
    by[y, x] = bx[y, x] + bx[y + 1, x] + bx[y + 2, x]
    return by


class _SlowKernel:
    """Stands for a compiled kernel whose every run takes ``seconds``; counts its runs."""

    def __init__(self, inner, seconds):
        self.inner, self.seconds, self.runs = inner, seconds, 0

    def __call__(self, **kw):
        import time
        self.runs += 1
        time.sleep(self.seconds)
        return self.inner(**kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_candidate_slower_than_the_timing_budget_is_timed_by_its_checked_run(monkeypatch):
    by = _symbolic_blur()
    bench = measure.Bench([by], "llvm", 1, {"img": (20, 30)})
    monkeypatch.setattr(measure, "_check_runnable", lambda kern: None)
    slow = _SlowKernel(bench.default_kernel, 0.3)
    status, seconds = bench.check_and_time(slow, None, budget_s=0.25)
    assert status == "ok" and seconds >= 0.3
    assert slow.runs == 1           # no warm-up and no repeats past the budget


def test_extents_follow_the_sizes_tuned_at():
    by = _symbolic_blur()
    s = sl.Schedule(by)
    assert extents_of(s)["by"] == {"y": None, "x": None}
    with size_estimates({"H": 66, "W": 130}):
        assert extents_of(s)["by"] == {"y": 64, "x": 128}
        names = [n for n, _ in seed_schedules([by], 2)]
    assert any(n.startswith("stencil_tile(by") for n in names), names
    assert extents_of(s)["by"] == {"y": None, "x": None}     # reset after the search


def test_tuning_a_symbolic_blur_starts_from_templates_and_runs_at_any_size():
    by = _symbolic_blur()
    result = sl.autotune(by, beam=2, budget_s=3, sizes={"H": 66, "W": 130})
    kern = sl.compile(by, result)
    rng = np.random.default_rng(0)
    for h, w in ((3, 3), (17, 41), (70, 131)):
        img = rng.random((h, w), dtype=np.float32)
        bx = img[:, :-2] + img[:, 1:-1] + img[:, 2:]
        np.testing.assert_allclose(kern(img=img), bx[:-2] + bx[1:-1] + bx[2:], rtol=1e-5)

