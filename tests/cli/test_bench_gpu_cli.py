"""``schedlang bench --target cuda|hip|metal``: the GPU rows (schedlang timed on the device,
numpy on the CPU, torch on the GPU), checked here through the CPU emulator
(``SCHEDLANG_GPU=emulate``), and what such a run refuses before measuring anything."""
import csv

import pytest

from schedlang.targets.gpu_driver import GpuDriver


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv("SCHEDLANG_GPU", "emulate")
    monkeypatch.setenv("SCHEDLANG_BENCH_BUDGET_S", "0.05")


@pytest.mark.filterwarnings("ignore:no .* device here")
def test_gpu_rows_are_checked_timed_and_written_like_cpu_rows(tmp_path, cli_run, emulated):
    out = tmp_path / "rows.csv"
    r = cli_run("bench", "gemm", "--target", "cuda", "--size", "48x40x24", "--threads", "1",
                "--compare", "numpy", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [(x["workload"], x["shape"], x["system"]) for x in rows] == [
        ("gemm", "48x40x24", "schedlang"), ("gemm", "48x40x24", "numpy")]
    assert all(float(x["median_s"]) > 0 and x["unit"] == "GFLOP/s" for x in rows)
    r = cli_run("bench", "softmax", "--target", "hip", "--size", "32x48", "--threads", "1",
                "--compare", "numpy")
    assert r.returncode == 0, r.stderr
    assert "softmax  32x48" in r.stdout and "GB/s" in r.stdout


def test_gpu_bench_refuses_what_only_the_cpu_does(cli_run, emulated):
    for args, said in [(("--beam", "2"), "the autotuner times CPU code only"),
                       (("--dtype", "int8"), "tensorize onto CPU instructions")]:
        r = cli_run("bench", "gemm", "--target", "cuda", "--size", "16", *args)
        assert r.returncode != 0 and said in r.stderr, (args, r.stderr)
    r = cli_run("bench", "blur", "--target", "cuda", "--size", "16", "--threads", "1",
                "--compare", "numpy,halide")
    assert "no halide rows with --target cuda" in r.stderr


@pytest.mark.skipif(GpuDriver.available("cuda"), reason="a CUDA device is here")
def test_gpu_bench_without_a_device_says_so_and_how_to_emulate(cli_run, monkeypatch):
    monkeypatch.delenv("SCHEDLANG_GPU", raising=False)
    r = cli_run("bench", "gemm", "--target", "cuda", "--size", "16")
    assert r.returncode != 0
    assert "no CUDA driver" in r.stderr and "SCHEDLANG_GPU=emulate" in r.stderr
    r = cli_run("bench", "gemm", "--target", "metal", "--size", "16")
    assert "Metal kernels only in its CPU emulator" in r.stderr
