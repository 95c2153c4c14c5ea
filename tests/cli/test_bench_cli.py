"""``schedlang bench`` / ``show``: the CSV has exactly the SPEC's columns and every
schedlang row was checked against numpy before it was timed. The commands run in this
process (``cli_run``); bench still measures in its child processes."""
import csv
import re
import subprocess
import sys

from schedlang.cli import CSV_COLUMNS


def test_bench_writes_csv_with_spec_columns(tmp_path, cli_run):
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "gemm", "--size", "64", "--size", "48x40x24", "--threads", "1",
                "--compare", "numpy", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert tuple(rows[0].keys()) == CSV_COLUMNS == (
        "workload", "shape", "system", "threads", "median_s", "min_s", "rate", "unit")
    systems = {(r["shape"], r["system"]) for r in rows}
    assert systems == {("64x64x64", "schedlang"), ("64x64x64", "numpy"),
                       ("48x40x24", "schedlang"), ("48x40x24", "numpy")}
    for row in rows:
        assert float(row["median_s"]) > 0 and float(row["min_s"]) <= float(row["median_s"])
        assert row["unit"] == "GFLOP/s" and row["threads"] == "1"
    assert "vs numpy" in r.stdout
    assert "vs torch" not in r.stdout and "vs halide" not in r.stdout   # not measured


def test_bench_blur_and_unknown_workload(cli_run):
    r = cli_run("bench", "blur", "--size", "64x80", "--threads", "1", "--compare", "numpy")
    assert r.returncode == 0, r.stderr
    assert "GB/s" in r.stdout
    r = cli_run("bench", "nosuch")
    assert r.returncode != 0 and "nosuch" in (r.stderr + r.stdout)


def test_bad_sizes_and_targets_are_refused_with_a_message_before_anything_runs(cli_run):
    for args, said in [(("--size", "0"), "--size '0': every size must be at least 1"),
                       (("--size", "-5"), "--size '-5': every size must be at least 1"),
                       (("--size", "16", "--target", "bogus"), "unknown target 'bogus'")]:
        r = cli_run("bench", "gemm", "--threads", "1", *args)
        assert r.returncode != 0 and said in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_options_of_another_workload_or_a_wrong_size_form_are_refused(cli_run):
    for args, said in [(("gemm", "--size", "16x16"),
                        "--size '16x16' does not fit workload gemm, which takes N or MxNxK"),
                       (("conv", "--size", "1x8x8x8"),
                        "does not fit workload conv, which takes C or NxCxHxWxK"),
                       (("gemm", "--size", "16", "--stride", "2"),
                        "--stride / --kernel choose the conv layer; bench gemm has no conv"),
                       (("softmax", "--size", "16", "--dtype", "int8"),
                        "--dtype int8 chooses the gemm's types; bench softmax has no gemm")]:
        r = cli_run("bench", *args, "--threads", "1")
        assert r.returncode == 1 and said in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_show_prints_schedule_loop_ir_and_code(cli_run):
    r = cli_run("show", "gemm", "--size", "64")
    assert r.returncode == 0, r.stderr
    assert "# schedule" in r.stdout and "cache_write" in r.stdout
    assert "# loop IR" in r.stdout and "for " in r.stdout
    assert "define" in r.stdout


def test_bench_conv_variants_and_softmax_are_checked_and_timed(tmp_path, cli_run):
    out = tmp_path / "rows.csv"
    # the last: a 1x1 conv whose plane (8 x 16) is whole tiles of 64, the matrix-product form
    for size, extra in (("1x8x10x12x8", []), ("1x8x10x12x8", ["--stride", "2"]),
                        ("1x8x10x12x8", ["--kernel", "1"]), ("1x8x8x16x8", ["--kernel", "1"])):
        r = cli_run("bench", "conv", "--size", size, "--threads", "1", "--compare", "numpy",
                    *extra)
        assert r.returncode == 0, r.stderr
        assert "conv" in r.stdout and "GFLOP/s" in r.stdout
        assert "conv rates count the direct sum's 2*N*K*C*kh*kw*Ho*Wo operations" in r.stdout
    r = cli_run("bench", "softmax", "--size", "6x40", "--threads", "1", "--compare", "numpy",
                "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert {row["system"] for row in rows} == {"schedlang", "numpy"}
    assert all(row["unit"] == "GB/s" and row["shape"] == "6x40" for row in rows)
    assert "conv rates" not in r.stdout


def test_bench_plot_writes_a_png(tmp_path, cli_run):
    import pytest
    pytest.importorskip("matplotlib")
    png = tmp_path / "rates.png"
    r = cli_run("bench", "gemm", "--size", "32", "--threads", "1", "--compare", "numpy",
                "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_low_precision_gemm_rows(tmp_path, cli_run):
    from schedlang.targets.llvm_jit import _resolve_target
    features = _resolve_target("llvm")[1].split(",")
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "gemm", "--size", "64", "--threads", "1", "--compare", "numpy",
                "--dtype", "float32,int8,bfloat16", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = {(x["shape"], x["system"]): x for x in csv.DictReader(out.open())}
    for dtype, feature, unit in (("int8", "avx512vnni", "GOP/s"),
                                 ("bfloat16", "avx512bf16", "GFLOP/s")):
        key = (f"64x64x64/{dtype}", "schedlang")
        if "+" + feature in features:
            assert rows[key]["unit"] == unit
            assert f"64x64x64 {dtype}: " in r.stdout and "the fp32 schedlang GEMM" in r.stdout
            # timed in turns with the fp32 GEMM of the same shape: one moment, one regime
            assert re.search(rf"64x64x64 {dtype}: [\d.]+x the fp32 schedlang GEMM's rate "
                             r"\(1 thread; the two timed in turns\)", r.stdout), r.stdout
        else:   # the instruction is missing: a note names it, the other rows still run
            assert key not in rows
            assert f"skipping gemm 64x64x64/{dtype}" in r.stderr and feature in r.stderr
    assert ("64x64x64", "numpy") in rows
    r = cli_run("bench", "gemm", "--size", "64x64x30", "--dtype", "int8", "--threads", "1")
    assert r.returncode != 0 and "K a multiple of 4" in (r.stderr + r.stdout)


def test_cold_cache_timing_is_chosen_by_the_workload_data_for_every_system(monkeypatch):
    # a workload whose data fits in the caches is flushed before every repeat, whatever
    # the speed of the system being timed; one larger than the caches never is
    import numpy as np

    import schedlang.bench.timing as timing
    flushes = []
    monkeypatch.setattr(timing, "flush_cache", lambda: flushes.append(1))
    small = {"A": np.zeros((256, 256), np.float32)}
    big = {"img": np.zeros((4096, 4096), np.float32)}
    assert timing.runs_start_cold(small, np.zeros((256, 256), np.float32))
    assert not timing.runs_start_cold(big, np.zeros((4096, 4096), np.float32))
    m = timing.measure(lambda: None, cold=True, budget_s=0.0, min_runs=5)
    assert m.runs == 5 and len(flushes) == 5
    timing.measure(lambda: None, cold=False, budget_s=0.0, min_runs=5)
    assert len(flushes) == 5


def test_the_systems_of_a_row_are_timed_in_turns(monkeypatch):
    import schedlang.bench.timing as timing
    order, flushes = [], []
    monkeypatch.setattr(timing, "flush_cache", lambda: flushes.append(len(order)))
    fns = {name: (lambda name=name: order.append(name)) for name in ("a", "b", "c")}
    got = timing.measure_in_turns(fns, cold=True, budget_s=0.0, warmup=1, min_runs=4, turns=2)
    assert order[:3] == ["a", "b", "c"]                          # the warm-up runs
    # two turns; each burst: one untimed run, then timed runs with the cache flushed
    # before each (the last turn makes up min_runs)
    assert order[3:] == ["a"] * 2 + ["b"] * 2 + ["c"] * 2 + ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    assert all(m.runs == 4 for m in got.values()) and len(flushes) == 12
    got = timing.measure_in_turns(fns, cold=False, budget_s=0.0, warmup=0, min_runs=2,
                                  max_runs=2, turns=1)
    assert len(flushes) == 12 and [m.runs for m in got.values()] == [2, 2, 2]


def test_show_into_a_pipe_closed_early_stops_without_a_traceback():
    # ``schedlang show gemm | head -1``: the reader leaves after one line
    # (conv prints ~150 KB, more than a pipe holds, so later writes find it closed)
    p = subprocess.Popen([sys.executable, "-m", "schedlang.cli", "show", "conv"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().startswith(b"#")
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_bench_refuses_an_output_file_it_cannot_write_before_measuring(tmp_path, cli_run):
    for flag, path, why in (("--csv", tmp_path / "no" / "x.csv", "does not exist"),
                            ("--plot", tmp_path, "is a directory")):
        r = cli_run("bench", "gemm", "--size", "32", "--compare", "numpy", flag, str(path))
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert f"{flag} {path}: " in r.stderr and why in r.stderr
        assert "GFLOP/s" not in r.stdout            # refused before anything was measured
