"""Command-line mistakes found by a tenth independent round of testing (SPEC §6, §7): a
``--threads`` count above what a kernel can run on is refused up front, naming the option,
by ``bench`` and ``tune`` (it used to reach the kernel and fail there, after measuring
other rows, as ``ArgumentError: num_threads must be ...``)."""
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
