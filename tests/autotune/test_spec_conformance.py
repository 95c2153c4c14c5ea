"""SPEC §4 (autotuning) and the ``schedule=None`` rule of SPEC §3, sentence by sentence, as
a user sees them: through ``sl.autotune`` and ``sl.compile``, the environment, the files on
disk and what is printed. Problems are 32x32 matmuls, budgets a few seconds.

Sentences other tests already check are not repeated here:
- "safe for concurrent writers": test_database.py::test_two_processes_write_at_once and
  ::test_a_writer_killed_mid_run_leaves_a_usable_database.
- "a wrong candidate is dropped and counted", for a miscompile any data shows:
  test_search.py::test_wrong_candidates_are_dropped_and_counted (here: one that only
  random data shows).
- "later runs load it without searching", in the same process:
  test_database.py::test_beam_env_tunes_once_then_loads_without_searching (here: in a
  second process); a stored BEAM=N result narrower than a new N: ::test_wider_beam_retunes.
- "A cost model predicts run time from loop-IR features": test_cost_model.py.
- "keyed by algorithm hash + sizes + target": test_database.py::
  test_key_ignores_names_but_not_structure_sizes_or_dtypes; by thread count:
  ::test_a_schedule_is_served_only_for_the_thread_count_it_was_tuned_for.
- "unless output is not a terminal": test_search.py::test_silent_off_a_terminal; the
  terminal line and tqdm forms: ::test_progress_on_a_terminal_without_tqdm_prints_a_line_per_round,
  ::test_progress_uses_tqdm_when_installed.
- Bad ``beam`` / ``budget_s`` / ``strategy`` / ``BEAM``: test_search.py::
  test_bad_options_name_the_argument_and_say_what_to_pass and
  ::test_bad_beam_environment_is_an_error_naming_the_variable.
- ``schedule=None`` with a stored schedule: test_database.py::
  test_compile_without_schedule_uses_the_stored_one; for a frontend Tensor, eager
  ``.numpy()`` included: test_eager.py.
"""
import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

import schedlang as sl
from schedlang.autotune import keys, measure, progress, search
from schedlang.autotune.database import TuningDatabase
from schedlang.autotune.keys import workload_key
from schedlang.targets.kernel import default_threads

from .conftest import FakeTerminal, check_matmul, matmul

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_files(folder):
    """Every SQLite database file under ``folder``."""
    found = []
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                if fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                    found.append(path)
    return found


@contextlib.contextmanager
def read_only(path):
    """A read-only connection to the SQLite file at ``path``, closed afterwards."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


class Tuned:
    """The outcome of the shared tuning run: the algorithm ``C``, the returned
    ``schedule``, the ``cache`` and ``home`` folders it ran with, the ``database`` file
    and the ``stderr`` text (a terminal)."""

    def __init__(self, C, schedule, cache, home, stderr):
        self.C, self.schedule, self.cache, self.home = C, schedule, cache, home
        self.stderr = stderr
        files = sqlite_files(cache)
        self.database = files[0] if len(files) == 1 else None


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One ``sl.autotune(C, target="llvm", beam=4, budget_s=...)`` exactly as SPEC §4 writes
    it, with stderr a terminal, SCHEDLANG_CACHE and HOME in fresh folders; the tests that
    only read its outcome share it."""
    root = tmp_path_factory.mktemp("tuned")
    cache, home = root / "cache", root / "home"
    home.mkdir()
    term = FakeTerminal()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCHEDLANG_CACHE", str(cache))
        mp.setenv("HOME", str(home))
        mp.delenv("BEAM", raising=False)
        mp.setattr(sys, "stderr", term)
        C = matmul(32)
        s = sl.autotune(C, target="llvm", beam=4, budget_s=4)
    return Tuned(C, s, str(cache), str(home), term.text)


@pytest.fixture
def warm_code(tuned, tmp_path):
    """This test's cache shares the machine code the shared run compiled (its tuning
    database stays its own), so its small budget is not spent compiling the seeds anew."""
    os.makedirs(tmp_path / "cache", exist_ok=True)
    os.symlink(os.path.join(tuned.cache, "llvm"), tmp_path / "cache" / "llvm")


def summary_counts(text):
    """``{"measured": n, "failed": n, "wrong": n}`` from the final summary line."""
    m = re.search(r"(\d+) measured, (\d+) failed, (\d+) wrong.*, (\d+) finalists timed again",
                  text)
    assert m, text
    return dict(zip(("measured", "failed", "wrong", "retimed"), map(int, m.groups())))


# ---------------------------------------------------------------------- sl.autotune(...)

def test_autotune_returns_a_schedule_that_compiles_to_the_right_result(tuned):
    assert isinstance(tuned.schedule, sl.Schedule)
    check_matmul(sl.compile(tuned.C, tuned.schedule, target="llvm"), 32)
    # a fresh build of the same algorithm takes it too (the schedule is data, by name)
    C2 = matmul(32)
    check_matmul(sl.compile(C2, sl.Schedule.from_json(tuned.schedule.to_json(), C2)), 32)


def test_autotune_returns_the_best_schedule_it_found(tuned):
    with read_only(tuned.database) as conn:
        best_json, best_s, beam = conn.execute("SELECT schedule, time_s, beam FROM best"
                                               ).fetchone()
        times = [t for (t,) in conn.execute(
            "SELECT time_s FROM measurements WHERE status = 'ok'")]
        finals = [t for (t,) in conn.execute(
            "SELECT time_s FROM measurements WHERE status = 'ok' AND schedule = ?",
            (best_json,))]
    assert best_json == tuned.schedule.to_json() and beam == 4
    # the finalists are timed again in turns; that timing is recorded and decides
    assert len(finals) >= 1 and best_s in finals
    assert len(times) > 1, "the search measured nothing but the default schedule"


def test_progress_is_shown_on_a_terminal(tuned):
    # the shared run had a terminal as stderr and no progress= argument
    lines = [line for line in tuned.stderr.splitlines() if "round" in line and "tried" in line]
    assert lines, tuned.stderr
    assert re.search(r"\d+ tried", lines[-1]) and re.search(r"best \d+\.\d+ ms", lines[-1])


# ---------------------------------------------------------------------- the tuning database

def test_database_is_on_disk_under_schedlang_cache(tuned):
    assert tuned.database is not None and tuned.database.startswith(tuned.cache + os.sep)
    with read_only(tuned.database) as conn:
        assert conn.execute("SELECT COUNT(*) FROM best").fetchone()[0] == 1
    assert sqlite_files(tuned.home) == []      # SCHEDLANG_CACHE overrides the default


def test_database_default_is_the_user_cache_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("SCHEDLANG_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    A = sl.Input("A", sl.float32, (64,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(64,))
    f[x] = A[x] * 2
    sl.autotune(f, beam=1, budget_s=0.5)
    found = sqlite_files(tmp_path / "home")
    assert len(found) == 1
    assert found[0].startswith(str(tmp_path / "home" / ".cache") + os.sep)


def test_schedules_are_stored_as_json_data_never_pickled(tuned):
    with read_only(tuned.database) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'table'")]
        for table in tables:
            cur = conn.execute(f"SELECT * FROM {table}")
            cols = [c[0] for c in cur.description]
            for row in cur:
                for col, value in zip(cols, row):
                    # pickled code would be bytes (a BLOB); nothing here is
                    assert not isinstance(value, (bytes, memoryview)), (table, col)
                    if col == "schedule":
                        data = json.loads(value)
                        assert isinstance(data["directives"], list)
        (best_json,) = conn.execute("SELECT schedule FROM best").fetchone()
    C2 = matmul(32)
    assert str(sl.Schedule.from_json(best_json, C2)) == str(tuned.schedule)


def test_every_measurement_is_stored(tuned):
    counts = summary_counts(tuned.stderr)
    with read_only(tuned.database) as conn:
        rows = conn.execute("SELECT status, time_s, features FROM measurements").fetchall()
    # every measured candidate, the default schedule measured as the reference, and the
    # finalists timed again at the end
    assert len(rows) == counts["measured"] + 1 + counts["retimed"]
    assert sum(1 for status, _, _ in rows if status == "wrong") == counts["wrong"]
    for status, time_s, features in rows:
        if status == "ok":
            assert time_s > 0 and len(json.loads(features)) > 0     # each timed


def test_database_is_keyed_by_sizes_target_machine_and_threads(monkeypatch):
    # a stored schedule unlike the default one, as a tuning run on this machine leaves it
    C = matmul(32)
    s = sl.Schedule(C)
    s[C].vectorize("j", 8)
    assert TuningDatabase().store_best(workload_key(C), s, 1e-5, beam=4)
    same = sl.compile(matmul(32))
    assert str(same.schedule) == str(s)
    assert sl.compile(matmul(16)).schedule.trace == []                       # sizes
    assert sl.compile(matmul(32), target="llvm:x86-64").schedule.trace == []  # target
    other = 1 if default_threads() != 1 else 2
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", str(other))
    assert sl.compile(matmul(32)).schedule.trace == []                       # threads
    monkeypatch.delenv("SCHEDLANG_NUM_THREADS")
    monkeypatch.setattr(keys, "machine_id", lambda target="llvm": "another CPU | x | 0")
    assert sl.compile(matmul(32)).schedule.trace == []                       # machine


# ---------------------------------------------------------------------- schedule=None

def test_without_database_or_beam_compile_uses_the_default_schedule(tmp_path):
    kern = sl.compile(matmul(32))
    assert kern.schedule.trace == []
    check_matmul(kern, 32)
    assert sqlite_files(tmp_path) == []            # nothing tuned, nothing stored


_LATER_RUN = """
import json, sys
sys.path.insert(0, {root!r})
import schedlang as sl
from tests.autotune.conftest import matmul
kern = sl.compile(matmul(32))
print(json.dumps(str(kern.schedule)))
"""


def test_beam_env_searches_with_width_n_then_a_later_run_loads_without_searching(
        warm_code, tmp_path, monkeypatch):
    monkeypatch.setenv("BEAM", "3")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    kern = sl.compile(matmul(32))                  # no schedule: searches now
    check_matmul(kern, 32)
    (db,) = sqlite_files(tmp_path)

    def snapshot():
        with read_only(db) as conn:
            return (conn.execute("SELECT beam, created, schedule FROM best").fetchall(),
                    conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])
    best, measured = snapshot()
    assert len(best) == 1 and best[0][0] == 3 and measured >= 1
    later = subprocess.run([sys.executable, "-c", _LATER_RUN.format(root=ROOT)],
                           capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout.strip().splitlines()[-1]) == str(kern.schedule)
    # a search always stores its measurements (the default's at least): none were added
    assert snapshot() == (best, measured)


# ---------------------------------------------------------------------- the search

def test_candidates_compile_in_parallel_processes(warm_code, tmp_path, monkeypatch):
    log = tmp_path / "compiles.txt"
    real = measure.lower_candidate

    def logged(*args, **kwargs):
        start = time.monotonic()
        out = real(*args, **kwargs)
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()} {start} {time.monotonic()}\n")
        return out
    monkeypatch.setattr(measure, "lower_candidate", logged)
    C = matmul(32)
    check_matmul(sl.compile(C, sl.autotune(C, beam=2, budget_s=2, jobs=2)), 32)
    spans = [line.split() for line in log.read_text().splitlines()]
    workers = [(pid, float(a), float(b)) for pid, a, b in spans if int(pid) != os.getpid()]
    assert len({pid for pid, _, _ in workers}) >= 2
    overlap = any(p != q and a < d and c < b for p, a, b in workers for q, c, d in workers)
    assert overlap, "no two candidates compiled at the same time"


def test_a_candidate_wrong_only_on_random_data_is_dropped_and_counted(warm_code, tmp_path,
                                                                      monkeypatch, capsys):
    real = measure.build_kernel

    class Transposed:
        """Returns the result transposed: right on constant inputs, wrong on random ones."""

        def __init__(self, kern):
            self.kern, self.num_threads = kern, kern.num_threads

        def __call__(self, **kw):
            return np.ascontiguousarray(self.kern(**kw).T)

        def time(self, **kw):
            return self.kern.time(**kw)
    monkeypatch.setattr(measure, "build_kernel", lambda *a: Transposed(real(*a)))
    C = matmul(32)
    s = sl.autotune(C, beam=2, budget_s=2, progress=True)
    counts = summary_counts(capsys.readouterr().err)
    assert counts["measured"] >= 1 and counts["wrong"] == counts["measured"]
    assert s.trace == []                         # only the default schedule is right
    check_matmul(sl.compile(C, s), 32)
    (db,) = sqlite_files(tmp_path)
    with read_only(db) as conn:
        wrong = conn.execute("SELECT COUNT(*) FROM measurements WHERE status = 'wrong'"
                             ).fetchone()[0]
    assert wrong == counts["wrong"]


def test_model_strategy_trains_on_the_database_and_measures_only_what_it_ranks_best(
        tuned, warm_code, tmp_path, monkeypatch):
    # start from the shared run's database: measurements of this workload, none of this run
    dst = sqlite3.connect(tmp_path / "cache" / os.path.basename(tuned.database))
    with read_only(tuned.database) as src:
        src.backup(dst)
    stored = dst.execute("SELECT COUNT(*) FROM measurements WHERE status = 'ok'").fetchone()[0]
    dst.close()
    events, trained_on = [], []
    real_train, real_build = search.train_from_measurements, measure.build_kernel
    real_round = progress.Progress.round

    def score(features):
        # a stand-in ranking, unrelated to speed, that the test can recompute
        return (hash(tuple(round(x, 6) for x in features)) % 1000003) / 1000003.0

    def train(rows, **kw):
        trained_on.append(len(rows))
        model = real_train(rows, **kw)

        def predict(feature_rows):
            scores = [score(f) for f in feature_rows]
            events.append(("ranked", [tuple(round(x, 6) for x in f) for f in feature_rows],
                           scores))
            return np.array(scores)
        model.predict = predict
        return model

    def build(outputs, schedule, result, target):
        events.append(("measured", tuple(round(x, 6) for x in result.features)))
        return real_build(outputs, schedule, result, target)

    def round_done(self, *args, **kwargs):
        events.append(("round done",))
        return real_round(self, *args, **kwargs)
    monkeypatch.setattr(search, "train_from_measurements", train)
    monkeypatch.setattr(measure, "build_kernel", build)
    monkeypatch.setattr(progress.Progress, "round", round_done)
    C = matmul(32)
    # a budget that leaves room for ranked rounds on a loaded machine (the search ends
    # early once two rounds gain less than 1%, so a quiet one does not spend it all)
    s = sl.autotune(C, beam=2, budget_s=8, strategy="model")
    check_matmul(sl.compile(C, s), 32)
    assert stored > 0 and trained_on and max(trained_on) >= stored

    # split the run into rounds; the seeds (round 0) are left out, as some of them are
    # measured whatever their rank, and so are rounds too small to need a ranking
    rounds, current, seen = [], {"ranked": None, "measured": []}, set()
    for ev in events:
        if ev[0] == "round done":
            rounds.append(current)
            current = {"ranked": None, "measured": []}
        elif ev[0] == "ranked":
            current["ranked"] = ev[1:]
        else:
            if ev[1] not in seen:                  # not a finalist timed again
                current["measured"].append(ev[1])
            seen.add(ev[1])
    checked = 0
    for r in rounds[1:]:
        if r["ranked"] is None:
            continue
        features, scores = r["ranked"]
        by_features = dict(zip(features, scores))
        limit = max(2, len(features) // 2)
        for f in r["measured"]:
            rank = sum(1 for x in scores if x < by_features[f])
            assert rank < limit, (rank, len(features))
            checked += 1
    assert checked >= 1, "no round of the model strategy measured anything"


def test_database_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("SCHEDLANG_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    A = sl.Input("A", sl.float32, (64,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(64,))
    f[x] = A[x] * 3
    sl.autotune(f, beam=1, budget_s=0.5)
    found = sqlite_files(tmp_path / "xdg")
    assert len(found) == 1 and found[0].startswith(str(tmp_path / "xdg" / "schedlang") + os.sep)
    assert sqlite_files(tmp_path / "home") == []
