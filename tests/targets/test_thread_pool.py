"""The process-wide thread pool behind ``parallel`` loops on the LLVM CPU target: threads
are reused across calls, results stay right under any thread count, with kernels running
at once on several Python threads (the pool is busy: a kernel starts its own threads), and
in a forked child (which has none of the parent's threads)."""
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import schedlang as sl
from schedlang.targets.llvm_thread_pool import POOL_RUN


def _row_kernel(rows=64, cols=40):
    A = sl.Input("A", sl.float32, (rows, cols))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(rows, cols))
    f[y, x] = A[y, x] * 2.0 + sl.cast(sl.float32, y)
    s = sl.Schedule(f)
    s[f].parallel(y).vectorize(x, 8)
    return sl.compile(f, s)


def _want(a):
    return a * 2 + np.arange(a.shape[0], dtype=np.float32)[:, None]


def test_parallel_kernels_call_the_pool_and_stay_correct_for_any_thread_count():
    kern = _row_kernel()
    assert POOL_RUN in kern.source
    a = np.random.default_rng(0).standard_normal((64, 40), dtype=np.float32)
    for nthreads in (2, 1, 4, 3, 64, 2):
        kern.num_threads = nthreads
        for _ in range(20):
            np.testing.assert_array_equal(kern(A=a), _want(a))


_REUSE_SCRIPT = """
import os, numpy as np, schedlang as sl
from tests.targets.test_thread_pool import _row_kernel, _want
kern = _row_kernel(); kern.num_threads = 3
a = np.ones((64, 40), np.float32)
tasks = lambda: set(os.listdir("/proc/self/task"))
before = tasks()
kern(A=a)
after_one = tasks()
for _ in range(200):
    kern(A=a)
assert np.array_equal(kern(A=a), _want(a))
print(len(after_one - before), after_one == tasks())
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_threads_are_started_once_and_reused():
    # in a fresh process: the first 3-thread call leaves 2 helper threads behind, and
    # 200 more calls run on exactly those (no thread started, none ended)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _REUSE_SCRIPT], capture_output=True,
                         text=True, timeout=300, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "True"]


def test_kernels_running_at_once_on_python_threads_are_all_correct():
    # the GIL is released while a kernel runs, so these overlap: one owns the pool, the
    # others find it busy and start threads of their own
    kern = _row_kernel(rows=256, cols=96)
    kern.num_threads = 2
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((256, 96), dtype=np.float32) for _ in range(4)]
    failures = []

    def work(a):
        for _ in range(60):
            if not np.array_equal(kern(A=a), _want(a)):
                failures.append(1)

    threads = [threading.Thread(target=work, args=(a,)) for a in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not failures


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_parallel_kernels_without_the_parents_threads():
    kern = _row_kernel()
    kern.num_threads = 2
    a = np.random.default_rng(2).standard_normal((64, 40), dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a), _want(a))   # the parent's pool has a thread
    pid = os.fork()
    if pid == 0:   # the child: a hang would wait forever for a helper that is not there
        signal.alarm(60)
        ok = all(np.array_equal(kern(A=a), _want(a)) for _ in range(20))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    np.testing.assert_array_equal(kern(A=a), _want(a))


_PAGE_FAULT_SCRIPT = """
import ctypes, resource
import numpy as np
# glibc's default: blocks over 128 KB are mapped fresh and unmapped on free
ctypes.CDLL(None).mallopt(-3, 128 * 1024)
import schedlang as sl
X = sl.Input("X", sl.float32, (512, 1024))
i, j = sl.vars("i j")
a, b = sl.Func("a"), sl.Func("b")
a[i, j] = X[i, j] * 2.0
b[i, j] = a[i, j] + 1.0
out = sl.Func("out", shape=(512, 1024))
out[i, j] = b[i, j] - X[i, j]
s = sl.Schedule(out)
s[a].compute_root()
s[b].compute_root()
kern = sl.compile(out, s)
x = np.ones((512, 1024), np.float32)
res = np.empty_like(x)
for _ in range(3):
    kern(X=x, out=res)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    kern(X=x, out=res)
assert (res == 2.0).all()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_stored_intermediates_do_not_page_fault_on_every_call():
    # two 2 MB stored Funcs per call: glibc's malloc must hand back the blocks freed by
    # the call before (keep_freed_buffers), not map fresh zero pages (2 x 512 page faults
    # per call, 3x the run time of a batched attention matmul in some processes)
    from schedlang.targets.llvm_jit import keep_freed_buffers
    if not keep_freed_buffers():
        pytest.skip("glibc's malloc thresholds only")
    r = subprocess.run([sys.executable, "-c", _PAGE_FAULT_SCRIPT], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    faults = int(r.stdout.split()[-1])
    assert faults < 20 * 100, faults
