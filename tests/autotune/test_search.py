"""The search: small problems under a tiny budget, templates, counted failures and wrong
candidates, the budget, and the Schedule it returns."""
import importlib
import re
import time

import numpy as np
import pytest

import schedlang as sl
from schedlang.autotune import measure, tune
from schedlang.autotune.keys import concrete_sizes
from schedlang.autotune.space import children, realize
from schedlang.autotune.templates import seed_schedules
from schedlang.targets.host_cpu import vector_lanes, vector_registers

from .conftest import FakeTerminal, blur, check_matmul, matmul


def test_autotune_small_matmul_returns_a_correct_faster_schedule():
    # 128: large enough that the default schedule's loops lose to every register-tiled
    # candidate by far more than the timing noise of a cold-cache run (at 64 the two could
    # swap places when the finalists were timed again)
    C = matmul(128)
    result = tune(C, beam=2, budget_s=5, progress=False)
    s, r = result.schedule, result.report
    assert isinstance(s, sl.Schedule)
    assert r.measured >= 2 and r.best_s <= r.default_s
    check_matmul(sl.compile(C, s), 128)
    # the best schedule prints as Python and survives JSON
    assert str(s).startswith("s[")
    again = sl.Schedule.from_json(s.to_json(), C)
    assert str(again) == str(s)


def test_autotune_blur_stores_the_result_and_compile_uses_it():
    by = blur()
    s = sl.autotune(by, beam=2, budget_s=2, progress=False)
    kern = sl.compile(blur())          # a freshly built identical algorithm, no schedule
    assert str(kern.schedule) == str(s)
    img = np.random.default_rng(0).random((34, 66), dtype=np.float32)
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) * np.float32(1 / 3)
    np.testing.assert_allclose(kern(img=img), (bx[:-2] + bx[1:-1] + bx[2:]) * np.float32(1 / 3),
                               rtol=1e-5, atol=1e-6)


def test_matmul_templates_are_derived_from_structure_not_names():
    # the same algorithm with other names gets the register-tiled seeds too
    X = sl.Input("lhs", sl.float32, (64, 64))
    Y = sl.Input("rhs", sl.float32, (64, 64))
    r, c = sl.vars("row col")
    t = sl.RDom(64, name="t")
    out = sl.Func("product", shape=(64, 64))
    out[r, c] = sl.sum(X[r, t] * Y[t, c])
    names = [n for n, _ in seed_schedules([out], 2)]
    assert any(n.startswith("register_tile(product") for n in names)
    s = dict(seed_schedules([out], 2))[names[0]]
    assert "cache_write" in str(s) and "rhs" in str(s)   # rhs is packed, lhs is not


def _nhwc_conv():
    """A conv whose sums have output channels innermost (NHWC) and are read out as NCHW by
    a pure output: ``(out, inputs, numpy result)``."""
    rng = np.random.default_rng(31)
    a = rng.standard_normal((1, 32, 10, 18), dtype=np.float32)
    w = rng.standard_normal((32, 32, 3, 3), dtype=np.float32)
    X = sl.Input("X", sl.float32, a.shape)
    W = sl.Input("W", sl.float32, w.shape)
    n, k, y, x, c, ry, rx = sl.vars("n k y x c ry rx")
    wt = sl.Func("wt")
    wt[c, ry, rx, k] = W[k, c, ry, rx]
    r = sl.RDom(32, 3, 3, name="r")
    sums = sl.Func("sums")
    sums[n, y, x, k] = sl.sum(X[n, r.x, y + r.y, x + r.z] * wt[r.x, r.y, r.z, k])
    out = sl.Func("out", shape=(1, 32, 8, 16))
    out[n, k, y, x] = sums[n, y, x, k]
    ref = np.zeros((1, 32, 8, 16), np.float32)
    for dy in range(3):
        for dx in range(3):
            ref += np.einsum("nchw,kc->nkhw", a[:, :, dy:dy + 8, dx:dx + 16], w[:, :, dy, dx])
    return out, {"X": a, "W": w}, ref


def test_register_tiles_apply_to_a_stored_reduction_with_channels_innermost():
    # the register tiles vectorize the channels, the chunked variant runs the input
    # channels in passes, and the NCHW copy is parallel and vectorized, each a vector
    # register of this CPU wide (16 float32 lanes with AVX-512, 8 with AVX2)
    lanes = vector_lanes(4)
    out, inputs, ref = _nhwc_conv()
    seeds = dict(seed_schedules([out], 2))
    chunked = [name for name in seeds if name.startswith("register_tile(sums") and "chunk" in name]
    assert chunked and any(n.startswith("register_tile(sums") and "pack" in n for n in seeds)
    for name in chunked[:2]:
        s = seeds[name]
        text = str(s)
        assert f"s[sums].vectorize('k.vec', {lanes})" in text and "r.x.chunk" in text, text
        assert "s[out].parallel('k')" in text and f"s[out].vectorize('x', {lanes})" in text, text
        np.testing.assert_allclose(sl.compile(out, s)(**inputs), ref, rtol=1e-4, atol=1e-3)


def test_a_reduction_read_as_a_transpose_is_tiled_inside_its_reader():
    # the NHWC sums are computed per channel tile of the NCHW output (no whole intermediate):
    # registers hold 8 columns x 32 channels with AVX-512 (16 accumulators of 16 lanes),
    # 4 columns x 16 channels with AVX2 (8 accumulators of 8 lanes), the output copies the
    # tile out vectorized
    lanes = vector_lanes(4)
    first = "8x2" if vector_registers() >= 32 else "4x2"
    out, inputs, ref = _nhwc_conv()
    seeds = dict(seed_schedules([out], 2))
    inside = [n for n in seeds if n.startswith(f"consumer_register_tile(sums, {first}")]
    assert inside
    # no tile wider than the 32 channels (4x4 with AVX-512: 64 > 32)
    consumers = [n for n in seeds if n.startswith("consumer")]
    widths = [int(re.search(r", \d+x(\d+),", n).group(1)) * lanes for n in consumers]
    assert widths and max(widths) <= 32, consumers
    for name in inside:
        text = str(seeds[name])
        assert "s[sums].compute_at(out, 'k.tile')" in text, text
        assert f"s[sums].vectorize('k', {lanes})" in text and "s[sums].unroll('x.reg')" in text, text
        assert "s[out].parallel('y')" in text and "s[wt].compute_root()" in text, text
        assert ("r.x.chunk" in text) == ("chunk=None" not in name), text
        np.testing.assert_allclose(sl.compile(out, seeds[name])(**inputs), ref, rtol=1e-4,
                                   atol=1e-3)


def test_children_are_named_actions_that_replay():
    C = matmul(32)
    s = sl.Schedule(C)
    kids = children(s, {"C"})
    ops = {k.directives[-1]["op"] for k in kids if k.kind == "append"}
    assert {"split", "vectorize", "parallel", "cache_write", "cache_read", "rfactor",
            "unroll", "reorder"} <= ops
    for k in kids:
        assert all(isinstance(a, (str, int)) for a in k.directives[-1]["args"])
    legal = 0
    for k in kids:
        try:
            realize(k, [C])
            legal += 1
        except sl.ScheduleError:
            pass
    assert legal > len(kids) // 2


def test_wrong_candidates_are_dropped_and_counted(monkeypatch):
    real = measure.build_kernel

    class Miscompiled:
        """A kernel that adds 1 to every result: what a miscompile looks like."""

        def __init__(self, kern):
            self.kern = kern
            self.num_threads = kern.num_threads

        def __call__(self, **kw):
            return self.kern(**kw) + 1

        def time(self, **kw):
            return self.kern.time(**kw)

    def build(outputs, schedule, result, target):
        kern = real(outputs, schedule, result, target)
        return Miscompiled(kern) if "cache_write" in str(schedule) else kern
    monkeypatch.setattr(measure, "build_kernel", build)
    C = matmul(64)
    r = tune(C, beam=2, budget_s=3, progress=False)   # round 0's tiled seeds cache_write
    assert r.report.wrong >= 1
    assert "cache_write" not in str(r.schedule)
    check_matmul(sl.compile(C, r.schedule))


def test_candidates_that_fail_to_compile_are_counted_not_fatal():
    C = matmul(32)
    bad = sl.Schedule(C)
    acc = bad[C].cache_write("local")
    copy = bad["B"].cache_read(acc, memory="global")
    bad[copy].compute_at(C, "i")     # legal when called, rejected when lowering
    with pytest.raises(sl.SchedlangError):
        sl.compile(C, bad)
    r = tune(C, beam=1, budget_s=1, seeds=[bad], progress=False)
    # a legality check refused it when the whole schedule was lowered: rejected, not failed
    assert any(a == "given seed" and "B" in msg for a, _, msg in r.report.rejections)
    assert not any(a == "given seed" for a, _, _ in r.report.errors)
    check_matmul(sl.compile(C, r.schedule), 32)


def test_a_given_seed_is_measured_even_when_the_budget_is_tiny():
    """A search cut short must not return the default schedule when the caller handed
    it a faster one: the known start points are timed past the budget."""
    C = matmul(96)
    hand = sl.Schedule(C)
    jo, ji = hand[C].split("j", 16, names=("jo", "ji"))
    hand[C].reorder("i", "jo", "k", "ji").vectorize(ji)
    r = tune(C, beam=2, budget_s=0.05, seeds=(hand,), threads=1, progress=False, store=False)
    assert r.report.measured >= 1
    assert r.schedule.to_json() != sl.Schedule(C).to_json()
    assert r.report.best_s < r.report.default_s
    check_matmul(sl.compile(C, r.schedule), 96)


def test_a_given_seed_that_compiles_slowly_is_not_given_up_as_hung(monkeypatch):
    """A known start point may take longer to compile than the wait after which a template
    candidate is given up as hung (a Winograd conv on a slow machine): it is waited for."""
    monkeypatch.setattr(measure, "HANG_MIN_S", 0.001)    # every compile is "slow"
    C = matmul(96)
    hand = sl.Schedule(C)
    jo, ji = hand[C].split("j", 16, names=("jo", "ji"))
    hand[C].reorder("i", "jo", "k", "ji").vectorize(ji)
    r = tune(C, beam=1, budget_s=0.05, seeds=(hand,), jobs=2, threads=1, progress=False,
             store=False)
    assert not any(a == "given seed" for a, _, _ in r.report.errors), r.report.errors
    assert r.report.measured >= 1 and r.report.best_s < r.report.default_s
    check_matmul(sl.compile(C, r.schedule), 96)


def test_candidates_that_crash_the_compiler_are_counted_as_failures(monkeypatch):
    real = measure.lower_pipeline

    def crashing(schedule, target):
        if "vectorize" in str(schedule):
            raise RuntimeError("the code generator fell over")
        return real(schedule, target)
    monkeypatch.setattr(measure, "lower_pipeline", crashing)
    C = matmul(32)
    r = tune(C, beam=1, budget_s=2, jobs=1, progress=False)
    assert r.report.failed >= 1
    assert all(kind == "crash" and "fell over" in msg for _, kind, msg in r.report.errors)
    check_matmul(sl.compile(C, r.schedule), 32)


def test_conv_seeds_share_out_the_stored_producers_by_their_inferred_extents():
    # wt is indexed by vars the output does not have (c, ry, rx); bounds inference gives
    # their extents, so its stored copy runs in parallel too
    from schedlang.autotune.space import extents_of
    out, _, _ = _nhwc_conv()
    ext = extents_of(sl.Schedule(out))
    assert (ext["wt"]["c"], ext["wt"]["ry"], ext["wt"]["rx"], ext["wt"]["k"]) == (32, 3, 3, 32)
    assert ext["sums"]["y"] == 8 and ext["sums"]["x"] == 16
    seeds = dict(seed_schedules([out], 2))
    rooted = [str(sd) for name, sd in seeds.items() if "producers_root=True" in name]
    assert rooted and all("s[wt].parallel('c')" in t for t in rooted)


def test_moves_the_legality_checks_refuse_are_skipped_not_counted_as_failures(monkeypatch):
    from schedlang.autotune import search as search_module
    real = search_module.realize
    refused, calls = [], []

    def realize(child, outputs):
        calls.append(child.action)
        if len(calls) % 2 == 1:         # every other move, the first included
            refused.append(child.action)
            raise sl.ScheduleError(f"{child.action}: refused by this test")
        return real(child, outputs)
    monkeypatch.setattr(search_module, "realize", realize)
    C = matmul(32)
    r = tune(C, beam=2, budget_s=5, progress=False)
    # (a move that replays but fails a check of the whole schedule is rejected as well)
    assert refused and r.report.rejected >= len(refused)
    assert r.report.failed == 0
    ours = [a for a, _, msg in r.report.rejections if "refused by this test" in msg]
    assert sorted(ours) == sorted(refused)
    check_matmul(sl.compile(C, r.schedule), 32)


def test_finalists_are_retimed_in_turns_and_the_new_medians_decide(monkeypatch):
    calls = []
    real = measure.Bench.retime_in_turns

    def retime(self, kernels, budget_s=0.9):
        times = real(self, kernels, budget_s)
        calls.append(times)
        return times
    monkeypatch.setattr(measure.Bench, "retime_in_turns", retime)
    C = matmul(32)
    r = tune(C, beam=2, budget_s=8, progress=False)     # its last 0.8 s re-time finalists
    assert len(calls) == 1 and len(calls[0]) >= 2
    assert r.report.best_s == min(calls[0])


def test_retime_in_turns_times_every_kernel_at_least_five_times():
    C = matmul(32)
    bench = measure.Bench([C], "llvm", 1, concrete_sizes([C], None))
    runs = []

    class Counting:
        def __init__(self, kern):
            self.kern = kern

        def __call__(self, **kw):
            return self.kern(**kw)

        def time_arguments(self, arguments, **kw):
            runs.append(id(self))
            return self.kern.time_arguments(arguments, **kw)
    a, b = Counting(bench.default_kernel), Counting(bench.default_kernel)
    times = bench.retime_in_turns([a, b], budget_s=0.0)
    assert len(times) == 2 and all(t > 0 for t in times)
    assert runs.count(id(a)) == runs.count(id(b)) >= 5
    assert bench.retime_in_turns([]) == []


def test_budget_is_respected():
    C = matmul(64)
    t0 = time.perf_counter()
    r = tune(C, beam=4, budget_s=1.5, progress=False)
    elapsed = time.perf_counter() - t0
    # slack: the process pool's start and the last kernel timing
    assert elapsed < 1.5 + 2.5, elapsed
    assert r.report.elapsed_s < 1.5 + 1.0


def test_model_strategy_measures_fewer_candidates():
    C = matmul(64)
    r = tune(C, beam=2, budget_s=3, strategy="model", progress=False)
    assert r.report.strategy == "model"
    assert r.report.measured >= 1
    assert r.report.measured <= r.report.proposed
    check_matmul(sl.compile(C, r.schedule))


def test_progress_lines_and_summary(capsys):
    C = matmul(32)
    s = sl.autotune(C, beam=1, budget_s=1.5, progress=True)
    err = capsys.readouterr().err
    assert "[autotune] C round 0:" in err and "tried" in err and "best" in err
    assert "best schedule:" in err
    assert (str(s).strip() or "# (default schedule)").splitlines()[0] in err


def test_silent_off_a_terminal(capsys):
    sl.autotune(matmul(32), beam=1, budget_s=1.5)        # pytest's stderr is not a terminal
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize("kwargs, named, todo", [
    ({"beam": 0}, "autotune(beam=0)", "pass e.g. beam=4"),
    ({"beam": -3}, "autotune(beam=-3)", "pass e.g. beam=4"),
    ({"beam": 2.5}, "autotune(beam=2.5)", "must be an int >= 1"),
    ({"beam": True}, "autotune(beam=True)", "must be an int >= 1"),
    ({"beam": "4"}, "autotune(beam='4')", "must be an int >= 1"),
    ({"budget_s": -1}, "autotune(budget_s=-1)", "pass e.g. budget_s=60"),
    ({"budget_s": 0}, "autotune(budget_s=0)", "pass e.g. budget_s=60"),
    ({"budget_s": float("nan")}, "autotune(budget_s=nan)", "finite number of seconds > 0"),
    ({"budget_s": float("inf")}, "autotune(budget_s=inf)", "finite number of seconds > 0"),
    ({"budget_s": "60"}, "autotune(budget_s='60')", "finite number of seconds > 0"),
    ({"strategy": "random"}, "autotune(strategy='random')", "'beam'"),
    ({"strategy": None}, "autotune(strategy=None)", "'model'"),
    ({"target": "cuda"}, "autotune(target='cuda')", "must be 'llvm'"),
    ({"threads": 0}, "autotune(threads=0)", "must be an int >= 1"),
])
def test_bad_options_name_the_argument_and_say_what_to_pass(kwargs, named, todo):
    with pytest.raises(sl.SchedlangError) as e:
        sl.autotune(matmul(16), **kwargs)
    assert named in str(e.value) and todo in str(e.value)


@pytest.mark.parametrize("env, value, todo", [
    ("BEAM", "four", "set e.g. BEAM=4"),
    ("BEAM", "-2", "set e.g. BEAM=4"),
    ("SCHEDLANG_BEAM_BUDGET_S", "soon", "set e.g. SCHEDLANG_BEAM_BUDGET_S=30"),
    ("SCHEDLANG_BEAM_BUDGET_S", "0", "set e.g. SCHEDLANG_BEAM_BUDGET_S=30"),
])
def test_bad_beam_environment_is_an_error_naming_the_variable(monkeypatch, env, value, todo):
    # a typo in BEAM must not silently compile with the default schedule
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.setenv(env, value)
    with pytest.raises(sl.SchedlangError) as e:
        sl.compile(matmul(16))
    assert f"{env}={value!r}" in str(e.value) and todo in str(e.value)


def test_symbolic_sizes_are_tuned_at_estimates_or_at_the_sizes_given():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * 2
    # the SPEC's call, as BEAM=N does it: estimated sizes, said in a warning
    with pytest.warns(UserWarning, match=r"estimated sizes N=1024 .*sizes=\{\.\.\.\}"):
        s = sl.autotune(f, budget_s=1.5, progress=False)
    a = np.arange(37, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 2)

    # stored where sl.compile(f) without a schedule looks (BEAM set: it would search)
    def no_search(*args, **kwargs):
        raise AssertionError("compile searched instead of loading the tuned schedule")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BEAM", "1")
        mp.setattr(importlib.import_module("schedlang.autotune.search"), "tune", no_search)
        assert str(sl.compile(f).schedule) == str(s)
    s = sl.autotune(f, budget_s=1.5, sizes={"N": 256}, progress=False)
    a = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 2)


def test_progress_on_a_terminal_without_tqdm_prints_a_line_per_round(monkeypatch):
    import sys
    from schedlang.autotune.progress import Progress
    monkeypatch.setitem(sys.modules, "tqdm", None)         # import tqdm fails
    term = FakeTerminal()
    p = Progress("C", 10, enabled=None, stream=term)
    p.round(1, tried=16, failed=2, wrong=1, best_s=0.002, default_s=0.2, left_s=5)
    assert "[autotune] C round 1: 16 tried, 2 failed, 1 wrong, best 2.000 ms (100.0x " \
        "default), 5 s left" in term.text


def test_progress_uses_tqdm_when_installed(monkeypatch):
    import sys
    import types
    from schedlang.autotune.progress import Progress
    bars = []

    class FakeBar:
        def __init__(self, total, **kw):
            self.total, self.n, self.postfix, self.closed = total, 0, "", False
            bars.append(self)

        def set_postfix_str(self, s):
            self.postfix = s

        def refresh(self):
            pass

        def close(self):
            self.closed = True
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    term = FakeTerminal()
    p = Progress("C", 10, enabled=None, stream=term)
    p.round(2, tried=5, failed=0, wrong=0, best_s=0.001, default_s=0.1, left_s=3, elapsed_s=7)
    assert bars and bars[0].n == 7 and "round 2, 5 tried" in bars[0].postfix
    assert term.text == ""                                  # the bar, not lines
    p.close()
    assert bars[0].closed


def test_candidates_of_a_workload_that_fits_in_cache_are_timed_cold(monkeypatch):
    # the choice is the data's (a few KB here), not a candidate's speed, so the default
    # and every candidate start each timed run with flushed caches
    one_mib = {"A": np.broadcast_to(np.float32(0), (1 << 18,))}
    one_gib = {"A": np.broadcast_to(np.float32(0), (1 << 28,))}   # no memory behind either
    assert measure.runs_start_cold(one_mib, np.zeros(1, np.float32))
    assert not measure.runs_start_cold(one_gib, np.zeros(1, np.float32))
    flushes = []
    monkeypatch.setattr(measure, "flush_caches", lambda: flushes.append(1))
    r = tune(matmul(32), beam=2, budget_s=2, progress=False)
    assert r.report.measured >= 1
    assert len(flushes) >= 3 * (r.report.measured + 1)


def test_given_seed_is_timed_before_the_templates_of_a_large_pipeline():
    # the templates of a Winograd conv take seconds each to compile (a 3 s budget covers
    # about one); a given schedule is compiled and timed first, even past the budget, so
    # the search ends with it or better, not with the default
    from schedlang.bench.workloads import Conv
    w = Conv((1, 16, 28, 28, 16))
    out, hand = w.algorithm()
    report = tune([out], beam=2, budget_s=3, threads=1, seeds=(hand,), progress=False,
                  store=False).report
    assert report.measured >= 1
    assert report.best_s < report.default_s / 10


def test_closing_a_compile_pool_whose_terminate_hangs_kills_its_workers(monkeypatch):
    # Pool.terminate can block for good on a task handler writing to gone workers:
    # close() gives it POOL_STOP_S, then kills the workers and leaves the pool behind
    import threading
    import time
    from schedlang.autotune import measure

    class Worker:
        killed = False

        def kill(self):
            self.killed = True

    class HangingPool:
        def __init__(self):
            self._pool = [Worker(), Worker()]
            self.release = threading.Event()

        def terminate(self):
            self.release.wait()

        def join(self):
            raise AssertionError("join after a terminate that did not return")

    monkeypatch.setattr(measure, "POOL_STOP_S", 0.2)
    cp = measure.CompilePool([], "llvm", jobs=2)
    cp._pool = pool = HangingPool()
    t0 = time.perf_counter()
    cp.close()
    assert time.perf_counter() - t0 < 5
    assert all(w.killed for w in pool._pool) and cp._pool is None
    pool.release.set()
    cp.close()                                    # closed: nothing left to stop


def test_pipelines_with_a_scalar_reduction_tune():
    # a 0-d Func has no loops to tile: its templates are skipped, not an IndexError
    A = sl.Input("A", sl.float32, (64,))
    x = sl.Var("x")
    r = sl.RDom(64, name="r")
    total = sl.Func("total", shape=())
    total[()] = sl.sum(A[r])
    a = np.arange(64, dtype=np.float32)
    s = tune([total], beam=2, budget_s=1, threads=1, progress=False, store=False).schedule
    assert sl.compile(total, s)(A=a) == a.sum()
    g = sl.Func("g", shape=(64,))
    g[x] = A[x] - total[()]
    s = tune([g], beam=2, budget_s=1, threads=1, progress=False, store=False).schedule
    np.testing.assert_allclose(sl.compile(g, s)(A=a), a - a.sum())


def test_autotune_refuses_inputs_too_big_to_measure_before_allocating(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path))
    x, y = sl.vars("x y")
    A = sl.Input("A", sl.float32, (3000000, 3000000))
    f = sl.Func("fhuge", shape=(3000000, 3000000))
    f[y, x] = A[y, x] * 2
    sl.compile(f)                       # compiling allocates nothing
    with pytest.raises(sl.CompileError, match=r"autotune of fhuge: measuring needs about "
                       r"[\d,.]+ GiB .*'A': \(3000000, 3000000\).*tune at smaller sizes"):
        sl.autotune(f, beam=2, budget_s=1)


def test_a_deeply_unrolled_candidate_is_lowered_not_counted_as_a_crash(monkeypatch):
    # 64 x 4 unrolled accumulator stores nest past Python's default recursion limit: the
    # pool worker lowers on the large stack sl.compile uses, so the legal schedule is kept
    deep = importlib.import_module("schedlang.deep_recursion")
    retried = []
    real = deep._on_deep_stack

    def on_deep_stack(fn, args, kwargs):
        retried.append(fn.__name__)
        return real(fn, args, kwargs)
    monkeypatch.setattr(deep, "_on_deep_stack", on_deep_stack)
    C = matmul(64)
    s = sl.Schedule(C)
    acc = s[C].cache_write("local")
    s[acc].reorder("k", "i", "j").vectorize("j", 16).unroll("i").unroll("j.o")
    r = measure.lower_candidate([C], "llvm", s.to_json(), False, 1)
    assert r.ok, (r.kind, r.message)
    assert retried, "the candidate did not need the large stack: unroll a larger one"


def test_autotune_names_an_unknown_option():
    with pytest.raises(sl.ScheduleError, match=r"autotune: no option named 'bogus'; the options "
                       r"are target, beam, budget_s, strategy, threads, sizes"):
        sl.autotune(matmul(16), budget_s=1, bogus=1)
