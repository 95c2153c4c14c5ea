"""Command-line mistakes found by a tenth independent round of testing (SPEC §6, §7): a
``--threads`` count above what a kernel can run on is refused up front, naming the option,
by ``bench`` and ``tune`` (it used to reach the kernel and fail there, after measuring
other rows, as ``ArgumentError: num_threads must be ...``); a bad
``SCHEDLANG_BENCH_BUDGET_S`` is refused the same way."""
import pytest

from schedlang import cli


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BEAM", raising=False)


@pytest.mark.parametrize("argv, message", [
    (["bench", "gemm", "--size", "16", "--compare", "numpy", "--threads", "1,5000"],
     "--threads 1,5000: at most 1024 threads; give a smaller count"),
    (["tune", "gemm", "--size", "16", "--budget-s", "1", "--threads", "5000"],
     "--threads 5000: the thread count must be from 1 to 1024"),
    (["tune", "gemm", "--size", "16", "--budget-s", "1", "--threads", "0"],
     "--threads 0: the thread count must be from 1 to 1024"),
])
def test_too_many_threads_are_refused_before_anything_runs(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert message in str(e.value.code)
    captured = capsys.readouterr()
    assert captured.out == "" and "tuning" not in captured.err


@pytest.mark.parametrize("value", ["abc", "0", "-1", "inf", "nan"])
def test_a_bad_bench_timing_budget_is_refused_before_anything_runs(value, monkeypatch, capsys):
    monkeypatch.setenv("SCHEDLANG_BENCH_BUDGET_S", value)
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "gemm", "--size", "16", "--compare", "numpy"])
    assert (f"SCHEDLANG_BENCH_BUDGET_S={value!r}: the timing budget of a bench row must be "
            "a finite number of seconds > 0") in str(e.value.code)
    assert capsys.readouterr().out == ""


def test_the_bench_timing_budget_is_read_from_the_environment(monkeypatch):
    from schedlang.bench.timing import DEFAULT_ROW_BUDGET_S, row_budget_s
    monkeypatch.setenv("SCHEDLANG_BENCH_BUDGET_S", " 0.25 ")
    assert row_budget_s() == 0.25
    monkeypatch.delenv("SCHEDLANG_BENCH_BUDGET_S")
    assert row_budget_s() == DEFAULT_ROW_BUDGET_S == 1.0
