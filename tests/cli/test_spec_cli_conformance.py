"""SPEC §6 (command line), sentence by sentence, where the other CLI tests leave a gap:
``python -m schedlang`` and the ``schedlang`` script, ``bench`` rows with torch and with the
default thread count, ``--threads N``, the conv shape text with ``--stride`` / ``--kernel``,
every ``--size`` form, ``bench all``, the check against numpy before timing, ``show``'s
four sections with ``--schedule FILE.json`` and ``--target``, and ``tune``'s options.
Sizes are tiny so that the whole file runs in seconds."""
import re
import csv
import os
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

import schedlang as sl
from schedlang import cli

SPEC_COLUMNS = ["workload", "shape", "system", "threads", "median_s", "min_s", "rate", "unit"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sl_cache")


@pytest.fixture(autouse=True)
def _private_cache(cache_dir, monkeypatch):
    """No tuning database or BEAM setting from outside leaks into these runs."""
    monkeypatch.setenv("SCHEDLANG_CACHE", str(cache_dir))
    monkeypatch.delenv("BEAM", raising=False)


def _schedlang(*args, timeout=300):
    """Run ``python -m schedlang ARGS`` (the package's own entry point)."""
    return subprocess.run([sys.executable, "-m", "schedlang", *args], capture_output=True,
                          text=True, timeout=timeout)


def _rows(path):
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == SPEC_COLUMNS
        return list(reader)


def _check_numbers(rows):
    for r in rows:
        median, least, rate = float(r["median_s"]), float(r["min_s"]), float(r["rate"])
        assert 0 < least <= median and rate > 0


# ---------------------------------------------------------------------- bench

def test_bench_softmax_rows_with_torch_at_the_default_thread_count(tmp_path, cli_run):
    """``--compare numpy,torch``: one row per system, the ratio columns, and without
    ``--threads`` every system runs on all cores; ``softmax N`` is an N x N input."""
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "softmax", "--size", "32", "--compare", "numpy,torch",
                "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = _rows(out)
    have_torch = _has("torch")
    assert [x["system"] for x in rows] == ["schedlang", "numpy"] + (["torch"] if have_torch
                                                                    else [])
    assert {x["workload"] for x in rows} == {"softmax"}
    assert {x["shape"] for x in rows} == {"32x32"}
    assert {x["threads"] for x in rows} == {str(os.cpu_count())}
    assert {x["unit"] for x in rows} == {"GB/s"}
    _check_numbers(rows)
    table = [ln for ln in r.stdout.splitlines() if ln.startswith("softmax")]
    assert len(table) == len(rows)                      # one printed row per CSV row
    assert "vs numpy" in r.stdout and "GB/s" in r.stdout
    if have_torch:
        assert "vs torch" in r.stdout


def test_bench_conv_threads_stride_kernel_and_shape_text(tmp_path, cli_run):
    """``--threads 2`` reaches every row; the shape is the ``NxCxHxWxK`` size exactly, and
    a stride or kernel other than the default 3x3 / 1 is said once above the table."""
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "conv", "--size", "1x8x10x10x8", "--stride", "2", "--kernel", "1",
                "--threads", "2", "--compare", "numpy", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = _rows(out)
    assert "conv layers: stride 2, 1x1" in r.stdout
    assert [(x["workload"], x["shape"], x["system"], x["threads"], x["unit"])
            for x in rows] == [("conv", "1x8x10x10x8", "schedlang", "2", "GFLOP/s"),
                               ("conv", "1x8x10x10x8", "numpy", "2", "GFLOP/s")]
    _check_numbers(rows)


@pytest.mark.parametrize("workload,size,shape", [
    ("gemm", "64", "64x64x64"), ("gemm", "48x40x24", "48x40x24"),
    ("conv", "1x8x10x10x8", "1x8x10x10x8"),
    ("blur", "64", "64x64"), ("blur", "64x80", "64x80"),
    ("softmax", "32", "32x32"), ("softmax", "6x40", "6x40"),
])
def test_size_forms(workload, size, shape):
    w = cli.make_workload(workload, size)
    assert w.shape_text == shape


@pytest.mark.parametrize("workload,size", [("gemm", "64x64"), ("conv", "1x8x10"),
                                           ("blur", "4x4x4"), ("softmax", "big"),
                                           ("blur", "2"), ("blur", "64x2")])
def test_size_forms_that_do_not_fit_are_refused(workload, size):
    with pytest.raises(SystemExit) as info:
        cli.make_workload(workload, size)
    assert size in str(info.value)


def test_bench_all_runs_every_workload_and_threads_apply_to_each(monkeypatch):
    calls = []

    def fake_rows(args, workload, size, threads, dtype="float32", beam_schedule_json=None):
        calls.append((workload, size, threads))
        return [{"workload": workload, "shape": size, "system": s, "threads": threads,
                 "median_s": 1e-3, "min_s": 1e-3, "rate": 1.0, "unit": "GFLOP/s"}
                for s in ["schedlang", *args.compare]]
    monkeypatch.setattr(cli, "_child_rows", fake_rows)
    assert cli.main(["bench", "all", "--size", "16", "--threads", "1,2",
                     "--compare", "numpy"]) == 0
    assert {c[0] for c in calls} == {"gemm", "conv", "blur", "softmax"}
    assert sorted(calls) == sorted((w, "16", t) for w in ("gemm", "conv", "blur", "softmax")
                                   for t in (1, 2))
    calls.clear()
    assert cli.main(["bench", "--size", "16", "--compare", "numpy"]) == 0   # all by default
    assert {c[0] for c in calls} == {"gemm", "conv", "blur", "softmax"}
    assert {c[2] for c in calls} == {os.cpu_count()}


@pytest.mark.parametrize("argv,word", [
    (["bench", "gemm", "--compare", "numpy,nosuch"], "nosuch"),
    (["bench", "gemm", "--threads", "0"], "--threads"),
    (["bench", "gemm", "--threads", "two"], "--threads"),
    (["bench", "nosuch"], "nosuch"),
])
def test_bench_refuses_bad_options_with_a_message(argv, word, monkeypatch):
    monkeypatch.setattr(cli, "_child_rows", lambda *a, **k: pytest.fail("measured anyway"))
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert word in str(info.value.code)


def test_schedlang_rows_are_checked_against_numpy_before_timing(monkeypatch):
    from schedlang.bench import timing
    from schedlang.bench.workloads import WORKLOADS
    monkeypatch.setattr(timing, "measure_in_turns",
                        lambda *a, **k: pytest.fail("timed a wrong kernel"))
    monkeypatch.setattr(WORKLOADS["gemm"], "numpy",
                        lambda self, **v: np.zeros(self.size[:2]) + 1.0)
    with pytest.raises(SystemExit) as info:
        cli.run_one("gemm", "16", 1, ["numpy"], "llvm")
    assert "differs from numpy" in str(info.value)


# ---------------------------------------------------------------------- show

def test_python_m_schedlang_show_prints_algorithm_schedule_loop_ir_and_code():
    r = _schedlang("show", "blur", "--size", "16")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    heads = ["# algorithm", "# schedule", "# loop IR", "# generated code"]
    at = [text.find(h) for h in heads]
    assert -1 not in at and at == sorted(at), at        # all four, in this order
    algorithm = text[at[0]:at[1]]
    assert "img" in algorithm and "blur_x[" in algorithm and "blur_y[" in algorithm
    assert "s[blur_y]" in text[at[1]:at[2]]
    assert "for " in text[at[2]:at[3]]
    assert "define" in text[at[3]:]


def test_the_schedlang_script_is_installed():
    script = pathlib.Path(sys.executable).parent / "schedlang"
    if not script.exists():
        pytest.skip("no schedlang script next to this Python")
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert all(cmd in r.stdout for cmd in ("bench", "show", "tune"))


def test_show_with_a_schedule_file_and_a_target(tmp_path, capsys):
    w = cli.make_workload("blur", "16")
    outs, _ = w.algorithm()
    s = sl.Schedule(outs)
    s[outs].split("x", 4, names=("xo", "xi"))
    path = tmp_path / "blur.json"
    path.write_text(s.to_json())
    assert cli.main(["show", "blur", "--size", "16", "--schedule", str(path),
                     "--target", "llvm"]) == 0
    out = capsys.readouterr().out
    schedule = out[out.index("# schedule"):out.index("# loop IR")]
    assert "split('x', 4" in schedule and "tile" not in schedule   # the file's, not bench's
    assert "xi" in out[out.index("# loop IR"):out.index("# generated code")]


@pytest.mark.parametrize("argv,word", [
    (["show", "blur", "--size", "16", "--target", "nosuch"], "nosuch"),
    (["show", "blur", "--size", "16", "--schedule", "/nonexistent/s.json"], "s.json"),
    (["show", "nosuch"], "nosuch"),
])
def test_show_mistakes_end_with_a_message_not_a_traceback(argv, word, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert isinstance(info.value.code, str) and word in info.value.code


def test_show_refuses_a_schedule_of_another_algorithm(tmp_path):
    other = sl.Func("other", shape=(4,))
    i = sl.Var("i")
    other[i] = sl.Input("q", sl.float32, (4,))[i] * 2
    path = tmp_path / "other.json"
    path.write_text(sl.Schedule(other).to_json())
    with pytest.raises(SystemExit) as info:
        cli.main(["show", "blur", "--size", "16", "--schedule", str(path)])
    assert isinstance(info.value.code, str) and str(path) in info.value.code


def test_show_refuses_a_schedule_file_that_is_not_text_in_one_line(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SystemExit) as info:
        cli.main(["show", "blur", "--size", "16", "--schedule", str(path)])
    assert info.value.code == f"--schedule {path}: not a text file; give the JSON text that " \
        "Schedule.to_json() wrote"


# ---------------------------------------------------------------------- tune

def test_tune_options_reach_the_search(monkeypatch, capsys):
    from schedlang.autotune import search
    seen = {}

    def fake_tune(outs, **kw):
        seen.update(kw, outs=outs)
        report = search.TuningReport()
        report.best_s, report.default_s, report.measured, report.rounds = 1e-3, 2e-3, 3, 1
        return types.SimpleNamespace(report=report, schedule="# the schedule\n")
    monkeypatch.setattr(search, "tune", fake_tune)
    assert cli.main(["tune", "gemm", "--size", "32", "--beam", "3", "--budget-s", "2.5",
                     "--threads", "1", "--strategy", "model"]) == 0
    assert (seen["beam"], seen["budget_s"], seen["threads"], seen["strategy"]) == \
        (3, 2.5, 1, "model")
    assert seen["target"] == "llvm"
    assert [int(d.value) for d in seen["outs"].shape] == [32, 32]
    # the search starts from the bench's own schedule too, so it finds nothing slower
    (hand,) = seen["seeds"]
    assert isinstance(hand, sl.Schedule) and "cache_write" in str(hand)
    out = capsys.readouterr().out
    assert out.startswith("# gemm 32x32x32: best ") and "# the schedule" in out


@pytest.mark.parametrize("argv", [
    ["tune", "gemm", "--strategy", "random"],
    ["tune", "gemm", "--beam", "0"],
    ["tune", "gemm", "--budget-s", "0"],
    ["tune", "nosuch"],
])
def test_tune_refuses_bad_options(argv, monkeypatch, capsys):
    from schedlang.autotune import search
    monkeypatch.setattr(search, "tune", lambda *a, **k: pytest.fail("searched anyway"))
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code not in (0, None)


def _has(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize("argv", [["tune", "gemm", "--size", "3000000"],
                                  ["bench", "gemm", "--size", "99999999999"],
                                  ["bench", "softmax", "--size", "4000000"]])
def test_sizes_whose_arrays_cannot_fit_in_memory_are_refused_before_allocating(argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert re.fullmatch(rf"--size '{argv[3]}': the {argv[1]} arrays need about [\d,.]+ GiB, "
                        r"more than half of this machine's [\d,.]+ GiB; choose a smaller size",
                        info.value.code), info.value.code


def test_show_of_a_size_too_big_to_run_still_prints_its_code(capsys):
    assert cli.main(["show", "gemm", "--size", "2000000000"]) == 0
    assert "# loop IR" in capsys.readouterr().out


def test_plot_names_matplotlib_cannot_write_are_refused_before_measuring(tmp_path):
    pytest.importorskip("matplotlib")
    for name, says in (("rates.txt", "matplotlib cannot write .txt files; use one of "),
                       ("rates", "give the file an image extension, e.g. ")):
        path = tmp_path / name
        with pytest.raises(SystemExit) as info:
            cli.main(["bench", "gemm", "--size", "8", "--compare", "numpy", "--plot", str(path)])
        assert info.value.code.startswith(f"--plot {path}: {says}"), info.value.code
        assert not path.exists()


@pytest.mark.parametrize("argv, says", [
    (["tune", "gemm", "--beam", "0"], "--beam 0: the beam width must be >= 1"),
    (["tune", "gemm", "--budget-s", "-3"], "--budget-s -3: the budget must be a number of seconds"),
    (["tune", "gemm", "--budget-s", "inf"], "--budget-s inf: the budget must be"),
])
def test_tune_says_which_option_is_wrong(argv, says, monkeypatch):
    from schedlang.autotune import search
    monkeypatch.setattr(search, "tune", lambda *a, **k: pytest.fail("searched anyway"))
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert str(info.value.code).startswith(says)


def test_the_schedlang_row_uses_a_stored_tuned_schedule_when_it_is_faster(monkeypatch):
    """SPEC section 6: the schedlang rows use the best schedule known, tuned or
    hand-written. The two are timed briefly against each other (faked here)."""
    from schedlang.autotune.database import TuningDatabase
    from schedlang.autotune.keys import workload_key
    from schedlang.bench import timing
    w = cli.make_workload("gemm", "32")
    values = w.inputs()
    outs, hand = w.algorithm()
    hand_kern = sl.compile(outs, hand)
    assert cli._best_known_kernel(w, outs, hand_kern, values, 1, "llvm", False) is hand_kern
    tuned = sl.Schedule(outs)
    tuned[outs].split("j", 16, names=("jo", "ji"))
    tuned[outs].vectorize("ji")
    TuningDatabase().store_best(workload_key([outs], "llvm", threads=1), tuned, 1e-5, beam=2)

    def fake(times):
        return lambda fns, cold, budget_s: {n: types.SimpleNamespace(median=times[n])
                                             for n in fns}
    monkeypatch.setattr(timing, "measure_in_turns", fake({"hand": 2.0, "tuned": 1.0}))
    got = cli._best_known_kernel(w, outs, hand_kern, values, 1, "llvm", False)
    assert got is not hand_kern and "C.s0.jo in [0, 2)" in got.loop_ir
    monkeypatch.setattr(timing, "measure_in_turns", fake({"hand": 1.0, "tuned": 2.0}))
    assert cli._best_known_kernel(w, outs, hand_kern, values, 1, "llvm", False) is hand_kern


def test_bench_measures_a_repeated_thread_count_or_size_once(tmp_path, cli_run):
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "gemm", "--size", "32", "--size", "32", "--threads", "1,1",
                "--compare", "numpy", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert [(x["system"], x["threads"]) for x in _rows(out)] == [("schedlang", "1"),
                                                                ("numpy", "1")]


def test_bench_takes_several_sizes_as_a_comma_list(tmp_path, cli_run):
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "gemm", "--size", "16,24", "--size", "16", "--threads", "1",
                "--compare", "numpy", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert [(x["shape"], x["system"]) for x in _rows(out)] == [
        ("16x16x16", "schedlang"), ("16x16x16", "numpy"),
        ("24x24x24", "schedlang"), ("24x24x24", "numpy")]


def test_a_csv_file_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path, cli_run):
    """The check opens the file for real: as root, os.access says every path is writable."""
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    r = cli_run("bench", "gemm", "--size", "16", "--threads", "1", "--compare", "numpy",
                "--csv", str(blocked / "rows.csv"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"--csv {blocked / 'rows.csv'}: " in r.stderr
    if os.path.exists("/dev/full"):     # opens, but every write fails: after the table
        r = cli_run("bench", "gemm", "--size", "16", "--threads", "1", "--compare",
                    "numpy", "--csv", "/dev/full")
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "--csv /dev/full: cannot write it (No space left on device)" in r.stderr
        assert "gemm" in r.stdout


def test_a_stride_2_conv_run_does_not_mention_winograd(cli_run):
    r = cli_run("bench", "conv", "--size", "1x8x10x10x8", "--stride", "2", "--threads", "1",
                "--compare", "numpy")
    assert r.returncode == 0, r.stderr
    assert "conv rates count the direct sum's" in r.stdout and "Winograd" not in r.stdout


def test_plot_without_matplotlib_writes_the_csv_then_fails(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # as if not installed
    out = tmp_path / "rows.csv"
    with pytest.raises(SystemExit, match="--plot needs matplotlib: pip install matplotlib"):
        cli.main(["bench", "gemm", "--size", "16", "--threads", "1", "--compare", "numpy",
                  "--csv", str(out), "--plot", str(tmp_path / "rates.png")])
    assert len(_rows(out)) == 2 and not (tmp_path / "rates.png").exists()


@pytest.mark.parametrize("target, says", [("bogus", "unknown target 'bogus'"),
                                          ("llvm:nope", "nope")])
def test_show_with_a_bad_target_prints_nothing_first(target, says, capsys):
    with pytest.raises(SystemExit, match=says):
        cli.main(["show", "gemm", "--size", "16", "--target", target])
    assert capsys.readouterr().out == ""
