"""``schedlang tune`` and ``schedlang bench --beam`` on small sizes."""
import csv

import pytest

import schedlang as sl
from schedlang.autotune.database import TuningDatabase
from schedlang.autotune.keys import workload_key
from schedlang.cli import main, make_workload


def test_tune_cli_prints_the_best_schedule_and_stores_it(capsys):
    assert main(["tune", "gemm", "--size", "64", "--beam", "2", "--budget-s", "2",
                 "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# gemm 64x64x64: best ")
    body = out.split("\n", 1)[1]
    outs, _ = make_workload("gemm", "64").algorithm()
    s = sl.Schedule(outs)
    namespace = {"sl": sl, "s": s, "C": outs}
    for g in s.funcs + s.inputs:
        namespace[g.name] = g
    exec(body, namespace)                       # the printed schedule is runnable Python
    assert str(s) == body
    # stored for the thread count it was tuned for (--threads 1), and only for that one
    assert TuningDatabase().best_row(workload_key(outs, threads=1)) is not None
    assert TuningDatabase().best_row(workload_key(outs, threads=2)) is None


def test_bench_beam_adds_a_schedlang_beam_row(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1")
    path = tmp_path / "rows.csv"
    assert main(["bench", "blur", "--size", "64", "--beam", "1", "--compare", "numpy",
                 "--threads", "1", "--csv", str(path)]) == 0
    rows = list(csv.DictReader(open(path)))
    assert [r["system"] for r in rows] == ["schedlang", "schedlang-beam", "numpy"]
    assert "schedlang-beam" in capsys.readouterr().out


def test_tune_cli_rejects_a_thread_count_below_one():
    with pytest.raises(SystemExit, match="--threads 0: the thread count must be from 1 to 1024"):
        main(["tune", "gemm", "--size", "16", "--threads", "0"])


def test_bench_beam_tunes_once_when_the_database_cannot_store(tmp_path, monkeypatch, cli_run):
    """The measuring child gets the parent's tuned schedule, so a database that cannot
    store it (here: the cache path is a file) does not make the child tune again."""
    blocked = tmp_path / "not_a_folder"
    blocked.write_text("")
    monkeypatch.setenv("SCHEDLANG_CACHE", str(blocked))     # the child inherits both
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1")
    path = tmp_path / "rows.csv"
    with pytest.warns(UserWarning, match="was not stored"):
        r = cli_run("bench", "blur", "--size", "64", "--beam", "1", "--compare", "numpy",
                    "--threads", "1", "--csv", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("tuning blur 64x64 (beam 1, 1 thread)") == 1, r.stderr
    # a child that tuned again would say so and warn on its own stderr, passed on here
    assert "was not stored" not in r.stderr, r.stderr
    rows = list(csv.DictReader(open(path)))
    assert [r["system"] for r in rows] == ["schedlang", "schedlang-beam", "numpy"]
