"""The ``halide`` rows of ``schedlang bench``: each workload's Halide pipeline computes what
numpy computes (tiny sizes, so the JIT stays fast), the CLI writes a ``halide`` CSV row
with the SPEC's columns, and without the ``halide`` package the rows are simply absent."""
import csv
import sys

import numpy as np
import pytest

from schedlang.cli import CSV_COLUMNS


def _workload(name, size_text, **options):
    from schedlang.bench.workloads import WORKLOADS, parse_size
    return WORKLOADS[name](parse_size(name, size_text), **options)


@pytest.mark.parametrize("name, size, options", [
    ("gemm", "64", {}),
    ("gemm", "13x40x24", {}),            # edge tiles in every dimension
    ("conv", "1x8x10x12x8", {}),
    ("conv", "2x3x9x7x5", {"stride": 2}),
    ("conv", "1x8x10x12x8", {"kernel": 1}),
    ("blur", "64x80", {}),
    ("softmax", "6x40", {}),
])
def test_halide_pipeline_matches_numpy(name, size, options):
    pytest.importorskip("halide")
    from schedlang.bench.halide_workloads import make_runner
    w = _workload(name, size, **options)
    values = w.inputs()
    run = make_runner(w, values, threads=1)
    got = run()
    want = w.numpy(**values)
    assert got.shape == want.shape and got.dtype == np.float32
    assert float(np.max(np.abs(got.astype(np.float64) - want))) <= w.tolerance()
    assert run() is got                  # the output is preallocated and rewritten


def test_bench_writes_a_halide_row(tmp_path, cli_run):
    pytest.importorskip("halide")
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "gemm", "--size", "64", "--threads", "1", "--compare", "halide",
                "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert [row["system"] for row in rows] == ["schedlang", "halide"]
    halide = rows[1]
    assert halide["workload"] == "gemm" and halide["shape"] == "64x64x64"
    assert halide["threads"] == "1" and halide["unit"] == "GFLOP/s"
    assert 0 < float(halide["min_s"]) <= float(halide["median_s"]) and float(halide["rate"]) > 0
    assert "vs halide" in r.stdout


def test_without_halide_there_is_no_row_and_a_note_only_when_asked(monkeypatch, capsys):
    from schedlang import cli
    monkeypatch.setitem(sys.modules, "halide", None)     # makes `import halide` fail
    rows = cli.run_one("gemm", "16", 1, ["numpy", "halide"], "llvm")
    assert {r["system"] for r in rows} == {"schedlang", "numpy"}
    cli._note_missing_systems(cli.DEFAULT_COMPARE)
    assert capsys.readouterr().err == ""
    cli._note_missing_systems(["halide"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install halide" in err
