"""The tuning database: keys, storing and loading, BEAM through sl.compile, frontend
Tensors, damaged and foreign rows, and concurrent / killed writers."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

import schedlang as sl
from schedlang.autotune import search
from schedlang.autotune.database import Measurement, TuningDatabase, default_path
from schedlang.autotune.keys import algorithm_hash, workload_key

from .conftest import check_matmul, matmul

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_database_lives_under_schedlang_cache(tmp_path):
    assert default_path() == str(tmp_path / "cache" / "tuning.sqlite3")


def test_key_ignores_names_but_not_structure_sizes_or_dtypes():
    assert workload_key(matmul(32)).digest == workload_key(matmul(32, name="D")).digest
    assert workload_key(matmul(32)).digest != workload_key(matmul(64)).digest
    A = sl.Input("A", sl.float64, (32, 32))
    B = sl.Input("B", sl.float64, (32, 32))
    i, j = sl.vars("i j")
    k = sl.RDom(32, name="k")
    C = sl.Func("C", shape=(32, 32))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    assert algorithm_hash(C)[0] != algorithm_hash(matmul(32))[0]
    assert workload_key(matmul(32), "llvm").digest != workload_key(matmul(32),
                                                                   "llvm:skylake").digest


def _store(C, s, time_s=1e-3, beam=2):
    db = TuningDatabase()
    key = workload_key(C)
    assert db.store_best(key, s, time_s, beam)
    return db, key


def test_compile_without_schedule_uses_the_stored_one():
    C = matmul(32)
    s = sl.Schedule(C)
    s[C].vectorize("j", 8).parallel("i")
    _store(C, s)
    C2 = matmul(32)
    kern = sl.compile(C2)
    assert str(kern.schedule) == str(s)
    check_matmul(kern, 32)
    assert "parallel" in kern.loop_ir
    assert str(sl.lower(matmul(32))).count("parallel") == 1


def test_beam_env_tunes_once_then_loads_without_searching(monkeypatch):
    monkeypatch.setenv("BEAM", "2")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    kern = sl.compile(matmul(32))
    check_matmul(kern, 32)
    assert TuningDatabase().best_row(workload_key(matmul(32)))["beam"] == 2

    def no_search(*a, **k):
        raise AssertionError("the second compile searched again")
    monkeypatch.setattr(search, "tune", no_search)
    t0 = time.perf_counter()
    kern2 = sl.compile(matmul(32))
    assert time.perf_counter() - t0 < 1.0
    assert str(kern2.schedule) == str(kern.schedule)


def _symbolic_scale():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x] * 2 + 1
    return f


def test_beam_tunes_a_symbolic_size_pipeline_at_estimated_sizes_then_loads(monkeypatch):
    from schedlang.autotune.keys import estimated_sizes
    assert estimated_sizes(_symbolic_scale()) == {"H": 1024, "W": 1024}
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    with pytest.warns(UserWarning, match="estimated sizes H=1024, W=1024"):
        kern = sl.compile(_symbolic_scale())
    key = workload_key(_symbolic_scale(), sizes={"H": 1024, "W": 1024})
    assert TuningDatabase().best_row(key)["beam"] == 1

    def no_search(*a, **k):
        raise AssertionError("the second compile searched again")
    monkeypatch.setattr(search, "tune", no_search)
    kern2 = sl.compile(_symbolic_scale())
    assert str(kern2.schedule) == str(kern.schedule)
    for shape in ((1, 1), (37, 101), (64, 16)):   # any size, tails included
        a = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        np.testing.assert_array_equal(kern2(A=a), a * 2 + 1)


def test_a_schedule_is_served_only_for_the_thread_count_it_was_tuned_for(monkeypatch):
    C = matmul(32)
    one = sl.Schedule(C)
    one[C].vectorize("j", 8)
    two = sl.Schedule(C)
    two[C].vectorize("j", 8).parallel("i")
    db = TuningDatabase()
    assert workload_key(C, threads=1).digest != workload_key(C, threads=2).digest
    assert db.store_best(workload_key(C, threads=1), one, 1e-3, 2)
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "2")
    assert sl.compile(matmul(32)).schedule.trace == []        # nothing tuned for 2 threads
    assert db.store_best(workload_key(C, threads=2), two, 1e-3, 2)
    kern = sl.compile(matmul(32))
    assert str(kern.schedule) == str(two) and kern.num_threads == 2
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "1")
    kern = sl.compile(matmul(32))
    assert str(kern.schedule) == str(one) and kern.num_threads == 1
    assert db.best_row(workload_key(C, threads=1))["threads"] == 1
    assert db.best_row(workload_key(C, threads=2))["threads"] == 2


def test_beam_tunes_again_for_another_thread_count(monkeypatch):
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "1")
    first = sl.compile(matmul(32))
    assert TuningDatabase().best_row(workload_key(matmul(32), threads=1))["threads"] == 1
    searched = []

    class Searched(Exception):
        pass

    def recording_tune(*a, **k):
        searched.append(k.get("threads"))
        raise Searched
    monkeypatch.setattr(search, "tune", recording_tune)
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "2")
    with pytest.raises(Searched):
        sl.compile(matmul(32))                   # the 1-thread schedule is not served
    assert searched == [2]
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "1")
    assert str(sl.compile(matmul(32)).schedule) == str(first.schedule)
    assert searched == [2]                       # loaded for 1 thread, no search


def test_wider_beam_retunes(monkeypatch):
    C = matmul(32)
    _store(C, sl.Schedule(C), beam=1)
    calls = []
    real = search.tune

    def counting(*a, **k):
        calls.append(k.get("beam"))
        return real(*a, **k)
    monkeypatch.setattr(search, "tune", counting)
    monkeypatch.setenv("BEAM", "2")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    sl.compile(matmul(32))
    assert calls == [2]


def test_frontend_tensor_tunes_and_a_rebuilt_graph_loads(monkeypatch):
    from schedlang.frontend import Tensor
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    t = Tensor.input("x", (32, 32)) @ Tensor.input("w", (32, 32))
    kern = sl.compile(t)
    monkeypatch.setattr(search, "tune", lambda *a, **k: pytest.fail("searched again"))
    t2 = Tensor.input("x", (32, 32)) @ Tensor.input("w", (32, 32))   # new Func / RDom names
    kern2 = sl.compile(t2)
    assert kern2.outputs[0].name != kern.outputs[0].name
    assert len(kern2.schedule.trace) == len(kern.schedule.trace)
    rng = np.random.default_rng(0)
    x, w = rng.random((32, 32), dtype=np.float32), rng.random((32, 32), dtype=np.float32)
    np.testing.assert_allclose(kern2(x=x, w=w), x @ w, rtol=1e-4, atol=1e-4)


def _corrupt(sql, params=()):
    conn = sqlite3.connect(default_path())
    conn.execute(sql, params)
    conn.commit()
    conn.close()


def test_bad_json_row_is_ignored_with_a_warning():
    C = matmul(32)
    _store(C, sl.Schedule(C))
    _corrupt("UPDATE best SET schedule = '{not json'")
    with pytest.warns(UserWarning, match="cannot be replayed"):
        kern = sl.compile(matmul(32))
    assert kern.schedule.trace == []
    check_matmul(kern, 32)


def test_foreign_schedule_that_no_longer_replays_is_ignored_with_a_warning():
    C = matmul(32)
    _store(C, sl.Schedule(C))
    foreign = {"schedlang_schedule": 1, "outputs": ["C"], "directives": [
        {"func": "C", "stage": 0, "op": "split", "args": ["no_such_loop", 8], "kwargs": {}}]}
    _corrupt("UPDATE best SET schedule = ?", (json.dumps(foreign),))
    with pytest.warns(UserWarning, match="no_such_loop"):
        kern = sl.compile(matmul(32))
    check_matmul(kern, 32)


def test_damaged_measurement_rows_are_skipped_with_a_warning():
    C = matmul(32)
    db, key = _store(C, sl.Schedule(C))
    db.add_measurements(key, [Measurement("{}", 1e-3, "ok", [1.0, 2.0], 1),
                              Measurement("{}", 2e-3, "ok", [1.5, 2.5], 1)])
    _corrupt("UPDATE measurements SET features = 'garbage' WHERE id = 1")
    with pytest.warns(UserWarning, match="damaged features"):
        rows = TuningDatabase().measurements(key.machine, 1)
    assert len(rows) == 1 and rows[0].features == [1.5, 2.5]


def test_a_file_that_is_not_a_database_is_ignored_with_a_warning():
    os.makedirs(os.path.dirname(default_path()), exist_ok=True)
    with open(default_path(), "wb") as fh:
        fh.write(b"this is not sqlite" * 100)
    with pytest.warns(UserWarning, match="cannot be read"):
        kern = sl.compile(matmul(32))
    check_matmul(kern, 32)


_WRITER = """
import sys, time
sys.path.insert(0, {root!r})
import schedlang as sl
from schedlang.autotune.database import Measurement, TuningDatabase
from schedlang.autotune.keys import workload_key
from tests.autotune.conftest import matmul
C = matmul(16)
key = workload_key(C)
db = TuningDatabase()
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
for n in range(int(sys.argv[1])):
    db.add_measurements(key, [Measurement("{{}}", 1e-3 * (n + 1), "ok", [float(n)], 1)
                              for _ in range(5)])
    db.store_best(key, sl.Schedule(C), 1e-3, 1)
print("done")
"""


def _writer(n, start):
    return subprocess.Popen([sys.executable, "-c", _WRITER.format(root=ROOT), str(n), str(start)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))


def test_two_processes_write_at_once():
    start = time.time() + 1.5            # both start writing at the same moment
    procs = [_writer(40, start), _writer(40, start)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "done" in out
    db = TuningDatabase()
    assert db.count_measurements() == 2 * 40 * 5
    conn = sqlite3.connect(default_path())
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM best").fetchone()[0] == 1


def test_a_writer_killed_mid_run_leaves_a_usable_database():
    p = _writer(100000, time.time())
    time.sleep(2.5)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    conn = sqlite3.connect(default_path())
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
    assert n % 5 == 0                  # whole transactions only
    C = matmul(16)
    db, key = _store(C, sl.Schedule(C))
    db.add_measurements(key, [Measurement("{}", 1e-3, "ok", [1.0], 1)])
    assert db.count_measurements() == n + 1


def test_beam_with_a_target_this_machine_cannot_run_compiles_the_default(monkeypatch):
    # the candidates of a search are timed here; code for a CPU with instructions this one
    # lacks cannot be, and sl.compile raised instead of giving a kernel to inspect
    monkeypatch.setenv("BEAM", "2")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    A = sl.Input("A", sl.float16, (64, 64))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=(64, 64))
    C[i, j] = A[i, j] * A[j, i] + A[i, j]
    try:
        sl.compile(C, sl.Schedule(C), target="llvm:sapphirerapids")(A=np.ones((64, 64), np.float16))
        pytest.skip("this machine runs sapphirerapids code (it has avx512fp16)")
    except sl.CompileError:
        pass
    with pytest.warns(UserWarning, match="candidates for llvm:sapphirerapids cannot be timed"):
        kern = sl.compile(C, target="llvm:sapphirerapids")
    assert "vmovsh" in kern.source or "half" in kern.source


@pytest.mark.parametrize("sql", ["UPDATE best SET beam = 'abc'", "UPDATE best SET time_s = 'fast'"])
def test_a_best_row_with_fields_of_the_wrong_type_is_ignored_and_overwritten(sql):
    C = matmul(32)
    db, key = _store(C, sl.Schedule(C))
    _corrupt(sql)
    with pytest.warns(UserWarning, match="damaged entry"):
        kern = sl.compile(matmul(32))
    check_matmul(kern, 32)
    s = sl.Schedule(C)
    s[C].parallel("i")
    assert TuningDatabase().store_best(key, s, 1e-3, 2)      # compared no strings
    assert str(sl.compile(matmul(32)).schedule) == str(s)


def test_a_database_of_a_newer_schema_is_neither_read_nor_written():
    C = matmul(32)
    s = sl.Schedule(C)
    s[C].parallel("i")
    _, key = _store(C, s)
    _corrupt("UPDATE meta SET value = '99' WHERE name = 'schema'")
    with pytest.warns(UserWarning, match="schema '99', newer than this schedlang"):
        kern = sl.compile(matmul(32))
    assert kern.schedule.trace == []
    with pytest.raises(sl.SchedlangError, match="newer than this schedlang"):
        TuningDatabase().store_best(key, sl.Schedule(C), 1e-4, 8)


def test_a_locked_database_says_to_wait_not_to_delete(monkeypatch):
    import sqlite3
    from schedlang.autotune import database
    C = matmul(16)
    _store(C, sl.Schedule(C))
    monkeypatch.setattr(database, "BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(default_path(), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.time()
        with pytest.raises(sl.SchedlangError, match="another process holds its write lock") as e:
            TuningDatabase().store_best(workload_key(C), sl.Schedule(C), 1e-4, 8)
        assert "delete" not in str(e.value)
        assert time.time() - t0 < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_database_that_can_only_be_read_is_read(monkeypatch):
    # a WAL database in a directory this process may not write: the normal connection
    # fails to make its -shm file; the stored schedule is still served
    import sqlite3
    C = matmul(32)
    s = sl.Schedule(C)
    s[C].parallel("i")
    _store(C, s)[0].close()
    real_connect = sqlite3.connect

    class NoWrite:
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *a):
            if sql.startswith("SELECT"):
                raise sqlite3.OperationalError("attempt to write a readonly database")
            return self.conn.execute(sql, *a)

        def close(self):
            self.conn.close()

    def connect(target, *a, **kw):
        conn = real_connect(target, *a, **kw)
        return conn if kw.get("uri") else NoWrite(conn)
    monkeypatch.setattr(sqlite3, "connect", connect)
    assert str(sl.compile(matmul(32)).schedule) == str(s)


def test_a_schedule_tuned_at_given_sizes_is_used_by_compile_of_the_symbolic_pipeline():
    # the estimated-sizes note says to tune with sizes={...}; compile looked only at its
    # estimated sizes and never found that schedule
    def build():
        A = sl.Input("A", sl.float32, ("N",))
        i = sl.Var("i")
        C = sl.Func("C", shape=(A.shape[0],))
        C[i] = A[i] * 2
        return C
    C = build()
    s = sl.Schedule(C)
    s[C].vectorize("i", 8)
    key = workload_key([C], sizes={"N": 96})
    assert TuningDatabase().store_best(key, s, 1e-4, 2)
    kern = sl.compile(build())
    assert str(kern.schedule) == str(s)
    np.testing.assert_array_equal(kern(A=np.ones(10, np.float32)), 2.0)
