"""Autotuning arguments at their extremes and of the wrong kind: a huge but finite budget, a
beam wider than SQLite's integers, and the extra options (jobs, seeds, sizes, database)
given something that is not what they take. Each either works or raises a SchedlangError
naming the option."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.autotune import TuningDatabase, tune
from schedlang.autotune.integration import choose_schedule
from schedlang.autotune.keys import workload_key

from .conftest import matmul


def doubled(n=16):
    X = sl.Input("X", sl.float32, (n,))
    i = sl.Var("i")
    o = sl.Func("o", shape=(n,))
    o[i] = X[i] * 2
    return o


def test_a_huge_finite_budget_searches_until_the_gains_stop():
    # 1e308 s is finite, so it is a legal budget; the search must not overflow turning
    # "time left / time per candidate" into a count
    o = doubled()
    r = tune(o, beam=2, budget_s=1e308, threads=1, jobs=1, progress=False, store=False)
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(o, r.schedule)(X=x), 2 * x)


def test_a_beam_wider_than_sqlite_integers_is_stored_and_found(monkeypatch):
    o = doubled()
    r = tune(o, beam=10 ** 30, budget_s=1, threads=1, jobs=1, progress=False)
    assert r.report.stored
    monkeypatch.setenv("BEAM", str(10 ** 30))
    s, origin = choose_schedule([o], threads=1)
    assert origin != "default" and s is not None     # loaded, no search, no OverflowError


def test_the_database_takes_a_huge_beam(tmp_path):
    C = matmul(8)
    db = TuningDatabase(tmp_path / "t.sqlite3")
    key = workload_key([C], threads=1)
    assert db.store_best(key, sl.Schedule(C), 1e-3, beam=10 ** 30)
    assert db.best_row(key, min_beam=10 ** 40) is not None
    # a stored wider and faster search is kept against a narrower, slower one
    assert not db.store_best(key, sl.Schedule(C), 2e-3, beam=4)


@pytest.mark.parametrize("option, value", [
    ("jobs", 0), ("jobs", -1), ("jobs", "x"), ("jobs", 2.5),
    ("seeds", 5), ("seeds", "s"),
    ("sizes", 5), ("sizes", {"N": "big"}), ("sizes", [("N", 4)]),
    ("database", 5),
    ("progress", "yes"), ("progress", 1), ("summary", None), ("store", "no"),
    ("rng_seed", 1.5), ("rng_seed", "abc"), ("rng_seed", True),
])
def test_a_wrong_kind_of_option_is_a_schedule_error_naming_it(option, value):
    C = matmul(8)
    options = {"progress": False, option: value}
    with pytest.raises(sl.ScheduleError, match=rf"autotune\({option}="):
        sl.autotune(C, beam=1, budget_s=1, **options)


def test_a_single_schedule_as_seeds_says_to_pass_a_list():
    C = matmul(8)
    with pytest.raises(sl.ScheduleError, match=r"seeds=\[s\]"):
        sl.autotune(C, beam=1, budget_s=1, progress=False, seeds=sl.Schedule(C))
