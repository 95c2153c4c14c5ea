"""Fifteenth round of probing, robustness: kernels, compiles and the eager frontend used
from several threads at once, thread counts out of range, and deep work on several
threads (SPEC §3: a kernel never crashes the process; §5: eager results are cached)."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BEAM", raising=False)
    monkeypatch.delenv("SCHEDLANG_NUM_THREADS", raising=False)


def _on_threads(work, n):
    """Run ``work(k)`` on ``n`` threads at once, switching between them very often; the
    exceptions they raised."""
    errors = []

    def run(k):
        try:
            work(k)
        except BaseException as e:     # reported by the test, not lost with the thread
            errors.append(e)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return errors


class _SwitchingInt(int):
    """An int whose hashing lets other threads run (as a dict operation may, at any point):
    each use of the eager cache key then interleaves with the other threads' ones."""

    def __hash__(self):
        time.sleep(0)
        return int.__hash__(self)


def test_eager_cache_hits_from_several_threads_at_once_neither_fail_nor_recompile(monkeypatch):
    # moving an entry to the recent end (pop, then insert) on one thread while another
    # looked it up or moved it too raised KeyError, or compiled the graph again
    tensor_module = sys.modules[Tensor.__module__]
    n = tensor_module.default_threads()
    monkeypatch.setattr(tensor_module, "default_threads", lambda: _SwitchingInt(n))
    F.clear_cache()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for k in range(6):
        (Tensor(a) + float(k)).numpy()
    assert F.cache_info()["compiles"] == 6

    def work(seed):
        for it in range(200):
            k = (seed + it) % 6
            np.testing.assert_array_equal((Tensor(a) + float(k)).numpy(), a + k)
    errors = _on_threads(work, 4)
    assert not errors, errors[0]
    info = F.cache_info()
    assert info["compiles"] == 6 and info["hits"] == 800, info


def test_numpy_of_one_deferred_conv_on_several_threads_builds_its_funcs_once():
    # the Winograd conv2d defines its Funcs on first use: two threads defining them at
    # once gave "two different Funcs/Inputs are both named ..." or "has 2 definition(s)"
    rng = np.random.default_rng(0)
    x = rng.random((1, 16, 14, 14), dtype=np.float32)
    w = rng.random((16, 16, 3, 3), dtype=np.float32)
    y = F.conv2d(Tensor(x), Tensor(w), padding=1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    ref = np.einsum("nchwij,ocij->nohw", windows, w)
    results = []
    errors = _on_threads(lambda k: results.append(y.numpy()), 3)
    assert not errors, errors[0]
    assert len(results) == 3
    for r in results:
        np.testing.assert_allclose(r, ref, rtol=1e-4, atol=1e-4)


def test_schedlang_num_threads_above_the_maximum_runs_on_the_most_threads(monkeypatch):
    # every kernel compiled under it was refused: "num_threads must be between 1 and 1024"
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "5000")
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=A.shape)
    f[i] = A[i] * 2.0
    s = sl.Schedule(f)
    s[f].parallel(i)
    kern = sl.compile(f, s)
    assert kern.num_threads == 1024
    a = np.arange(100, dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a), a * 2)
    np.testing.assert_array_equal((Tensor(a) * 3.0).numpy(), a * 3)


def test_autotune_threads_above_the_maximum_names_the_argument():
    A = sl.Input("A", sl.float32, (64,))
    i = sl.Var("i")
    f = sl.Func("f", shape=A.shape)
    f[i] = A[i] * 2.0
    with pytest.raises(sl.ScheduleError) as e:
        sl.autotune(f, beam=1, budget_s=1, threads=5000)
    msg = str(e.value)
    assert "autotune(threads=5000)" in msg and "1024" in msg


def _run_script(script):
    """Run ``script`` in a fresh interpreter (a crash there is a failed test, not a dead
    test run); its stdout, split into words."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    return r.stdout.split()


def test_concurrent_deep_work_puts_the_recursion_limit_back_when_the_last_ends():
    # the first of two overlapping runs on the large stack put back the user's limit while
    # the second was still deep (Python then aborted the process: a stack overflow it
    # cannot recover from), and the second put back the raised limit for good
    out = _run_script("""
        import sys, threading
        from schedlang.deep_recursion import call_deep_if

        def plain(n):
            return 0 if n == 0 else plain(n - 1) + 1

        def dive(n, inside, go):
            # n calls deep, wait there for go, then 2000 calls deeper
            if n == 0:
                inside.set()
                assert go.wait(60)
                return plain(2000)
            return dive(n - 1, inside, go) + 1

        limit = sys.getrecursionlimit()
        events = [(threading.Event(), threading.Event()) for _ in range(2)]
        out = {}

        def run(k):
            try:
                out[k] = call_deep_if(True, dive, 3000, *events[k])
            except RecursionError:
                out[k] = "RecursionError"
        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        threads[0].start()
        events[0][0].wait(60)
        threads[1].start()
        events[1][0].wait(60)
        events[0][1].set()
        threads[0].join()
        events[1][1].set()
        threads[1].join()
        print(out[0], out[1], sys.getrecursionlimit() == limit)
    """)
    assert out == ["5000", "5000", "True"]


def test_a_deep_expression_on_one_thread_while_another_is_deep_does_not_crash():
    # while one thread's deep work had raised the process's recursion limit, a deep
    # expression defined on another thread recursed on its ordinary stack: SIGSEGV
    script = textwrap.dedent("""
        import sys, threading
        import schedlang as sl
        from schedlang.deep_recursion import deep_recursion
        hold, inside = threading.Event(), threading.Event()

        @deep_recursion(sl.CompileError, "probe")
        def dive(n):
            if n == 0:
                inside.set()
                hold.wait(60)
                return 0
            return dive(n - 1) + 1

        t = threading.Thread(target=dive, args=(3000,))
        t.start()
        inside.wait(60)
        A = sl.Input("A", sl.float32, (4,))
        x = sl.Var("x")
        e = A[x]
        for _ in range(15000):
            e = e * 0.5 + 0.25
        f = sl.Func("f", shape=(4,))
        f[x] = e
        hold.set()
        t.join()
        print("defined", sys.getrecursionlimit())
    """)
    assert _run_script(script) == ["defined", "1000"]
