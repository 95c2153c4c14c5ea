"""Command-line mistakes and interruptions a user runs into (SPEC §6, §7): a bad gemm
``--dtype`` or a shape its instruction cannot take is refused before anything is measured,
``--csv`` and ``--plot`` naming one file is refused (the plot would overwrite the rows),
Ctrl-C during ``tune`` or ``bench`` ends with one line and exit status 130 (no traceback,
from the parent or its compile workers), and a warning (a tuning database that cannot be
written) is one line, not the library file and source line it came from."""
import os
import signal
import subprocess
import sys
import time

import pytest

from schedlang import cli


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BEAM", raising=False)


@pytest.fixture
def children(monkeypatch):
    """The measurements ``bench`` starts, recorded instead of run."""
    calls = []

    def fake_rows(args, workload, size, threads, dtype="float32", beam_schedule_json=None):
        calls.append((workload, size, dtype))
        return []
    monkeypatch.setattr(cli, "_child_rows", fake_rows)
    return calls


@pytest.mark.parametrize("extra, message", [
    (("--dtype", "float32,float16"), "--dtype 'float16': gemm runs float32, int8, bfloat16"),
    (("--dtype", "float32,int8", "--size", "64x64x30"), "needs K a multiple of 4"),
    (("--dtype", ","), "--dtype: name at least one gemm type"),
])
def test_bad_gemm_dtype_is_refused_before_any_row_is_measured(children, capsys, extra, message):
    argv = ["bench", "gemm", "--size", "64", "--threads", "1", "--compare", "numpy", *extra]
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert message in str(e.value.code)
    assert children == []       # the float32 row was not measured first, then thrown away


def test_csv_and_plot_naming_one_file_is_refused(children, tmp_path):
    path = tmp_path / "out.png"
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "blur", "--size", "16", "--threads", "1", "--compare", "numpy",
                  "--csv", str(path), "--plot", os.path.join(str(tmp_path), ".", "out.png")])
    assert "name the same file" in str(e.value.code)
    assert children == [] and not path.exists()


def _interrupt_after(args, marker, delay_s=1.5, timeout=120):
    """Run ``python -m schedlang ARGS`` in its own process group, wait for ``marker`` on
    its stderr plus ``delay_s``, then send SIGINT to the whole group (as Ctrl-C in a
    terminal does: the compile workers get it too). Returns (returncode, stderr)."""
    p = subprocess.Popen([sys.executable, "-m", "schedlang", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if marker in line:
            break
    time.sleep(delay_s)
    try:
        os.killpg(p.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    out, err = p.communicate(timeout=timeout)
    return p.returncode, "".join(seen) + err


def test_ctrl_c_during_tune_is_one_line_and_exit_130():
    rc, err = _interrupt_after(["tune", "gemm", "--size", "48", "--beam", "2", "--budget-s",
                                "60", "--threads", "1"], "tuning gemm")
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "schedlang tune: interrupted; nothing was stored" in err


def test_ctrl_c_during_bench_is_one_line_and_exit_130():
    rc, err = _interrupt_after(["bench", "blur", "--size", "32", "--beam", "2", "--threads",
                                "1", "--compare", "numpy"], "for the schedlang-beam row")
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.rstrip().endswith("schedlang bench: interrupted")


def test_warning_on_the_command_line_is_one_line(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    monkeypatch.setenv("SCHEDLANG_CACHE", str(not_a_folder))
    r = subprocess.run([sys.executable, "-m", "schedlang", "tune", "blur", "--size", "16",
                        "--beam", "1", "--budget-s", "1", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if "not stored" in x]
    assert len(lines) == 1 and lines[0].startswith("schedlang: the tuning result of blur_y")
    assert "UserWarning" not in r.stderr and "cli.py" not in r.stderr, r.stderr
