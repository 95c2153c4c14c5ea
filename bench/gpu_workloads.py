"""GPU schedules of the bench workloads, in the public schedule language, and a same-run
comparison with torch on the GPU: the rows of ``schedlang bench --target cuda`` (gemm with
``gemm_gpu``, the others with the GPU default schedule; kernels timed by device events,
inputs already on the device, as torch's are; numpy on the CPU). ``python -m
bench.gpu_workloads`` prints a table of GEMM and softmax forms on a machine with an
NVIDIA GPU.

Example: ``C, s = gemm_gpu(1024, 1024, 1024)``; ``sl.compile(C, s, target="cuda")``.
"""
from __future__ import annotations

import numpy as np

import schedlang as sl
from schedlang.bench.workloads import gemm_algorithm


def gemm_gpu(m, n, k, block=(64, 64), reg=(4, 4), k_tile=16, registers_over_k=False,
             fill_threads=None):
    """C = A @ B: each block computes a ``block`` tile of C from ``k_tile``-deep slices of A
    and B staged in shared memory; each thread keeps a ``reg`` tile of C in registers
    within a slice. With ``registers_over_k``, the slices are taken inside the thread
    loops: each thread keeps its tile in registers over the whole of k, and the block's
    threads fill the shared slices together between barriers. ``fill_threads``: the
    (y, x) threads that copy a slice (default: the block's)."""
    A, B, C, i, j, _ = gemm_algorithm(m, n, k)
    s = sl.Schedule(C)
    io, jo, ii, ji = s[C].tile(i, j, *block)
    ti, ri = s[C].split(ii, reg[0], names=("ti", "ri"))
    tj, rj = s[C].split(ji, reg[1], names=("tj", "rj"))
    ko, ki = s[C].split("k", k_tile)
    if registers_over_k:
        s[C].reorder(io, jo, ti, tj, ko, ki, ri, rj)
    else:
        s[C].reorder(io, jo, ko, ti, tj, ki, ri, rj)
    s[C].gpu_blocks(jo, io).gpu_threads(tj, ti)
    s[C].unroll(ri).unroll(rj)
    _stage_slices(s, C, A, B, ko, block, k_tile,
                  fill_threads or (block[0] // reg[0], block[1] // reg[1]))
    return C, s


def _stage_slices(s, C, A, B, ko, block, k_tile, threads):
    """Copy the k slices of A and B to shared memory at ``ko`` with ``threads`` (y, x): x
    over contiguous elements, y over rows."""
    threads_y, threads_x = threads
    for src, rows, cols in ((A, block[0], k_tile), (B, k_tile, block[1])):
        st = s[src].cache_read(C, memory="shared")
        s[st].compute_at(C, ko)
        y, x = [d.name for d in s[st].dims]
        tx, ty = min(cols, threads_x), min(rows, threads_y)
        xo, xi = s[st].split(x, tx)
        yo, yi = s[st].split(y, ty)
        s[st].reorder(yi, xi, yo, xo)
        s[st].gpu_threads(xi, yi)


def softmax_gpu(rows, cols):
    """Row softmax: the frontend's op, under the GPU default schedule."""
    from schedlang.frontend import Tensor
    x = Tensor.input("x", (rows, cols))
    return x.softmax(-1)


def check_gpu_bench(target, beam, dtypes, compare):
    """Refuse what ``schedlang bench --target cuda|hip|metal`` cannot do, before anything
    runs: no device here (unless ``SCHEDLANG_GPU=emulate``), a beam row (the autotuner
    times CPU code), low-precision GEMMs (their tensorize instructions are the CPU's)."""
    import os
    vendor = target.split(":", 1)[0]
    if os.environ.get("SCHEDLANG_GPU", "") != "emulate":
        from schedlang.targets.gpu_driver import DriverError, GpuDriver
        if vendor == "metal":
            raise SystemExit(f"--target {target}: schedlang runs Metal kernels only in its CPU "
                             "emulator; set SCHEDLANG_GPU=emulate to bench them there (CPU "
                             "times, not the GPU's)")
        try:
            GpuDriver.get(vendor)
        except DriverError as e:
            raise SystemExit(f"--target {target}: {e}; or set SCHEDLANG_GPU=emulate to run "
                             "the GPU kernels in the CPU emulator (CPU times, not the GPU's)")
    if beam:
        raise SystemExit(f"--beam {beam} with --target {target}: the autotuner times CPU "
                         "code only; leave --beam out")
    if list(dtypes) != ["float32"]:
        raise SystemExit(f"--dtype {','.join(dtypes)} with --target {target}: the int8 and "
                         "bfloat16 GEMMs tensorize onto CPU instructions; use --dtype float32")
    if "halide" in compare:
        import sys
        print(f"no halide rows with --target {target}: they run on the CPU", file=sys.stderr)
    return [c for c in compare if c != "halide"]


def gpu_rows(w, values, threads, compare, target, torch_row):
    """The bench rows of workload ``w`` on a GPU ``target``: schedlang checked against numpy
    then timed, numpy on the CPU, torch on the GPU (when torch has CUDA). ``torch_row``:
    the CLI's builder of torch versions of a workload."""
    from schedlang.bench.timing import row_budget_s
    from schedlang.schedule.gpu_default import gpu_default_schedule
    if w.name == "gemm":
        outs, s = gemm_gpu(*w.size)
    else:
        outs = w.algorithm()[0]
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        s = gpu_default_schedule(outs)
    kern = sl.compile(outs, s, target=target)
    got = kern(**values)
    want = w.numpy(**values)
    err = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
    if not err <= w.tolerance():
        raise SystemExit(f"schedlang {w.name} {w.shape_text} on {target}: result differs from "
                         f"numpy by {err:g} (tolerance {w.tolerance():g}); not timing a wrong "
                         "kernel")
    budget = row_budget_s()
    times = {"schedlang": kern.time(**values, budget_s=budget)}
    if "numpy" in compare:
        times["numpy"] = _wall_times(lambda: w.numpy(**values), budget)
    fn = None
    if "torch" in compare and target.startswith("cuda"):
        import importlib.util
        if importlib.util.find_spec("torch") is not None:
            import torch
            if torch.cuda.is_available():
                fn = torch_row(w, values, threads, device="cuda")
    if fn is not None:
        times["torch"] = _torch_times(fn, budget)
    return [{"workload": w.name, "shape": w.shape_text, "system": name, "threads": threads,
             "median_s": t.median, "min_s": t.min, "rate": w.amount() / t.median / 1e9,
             "unit": w.unit} for name, t in times.items()]


def _wall_times(fn, budget_s):
    """Wall-clock times of ``fn`` (numpy, on the CPU) after one warm-up call."""
    import time
    from schedlang.targets.kernel import _repeat_timing
    fn()

    def measure():
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return _repeat_timing(measure, None, budget_s)


def _torch_times(fn, budget_s):
    """Device times of torch ``fn`` by CUDA events, as ``kern.time`` takes schedlang's."""
    import torch
    from schedlang.targets.kernel import _repeat_timing
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def measure():
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3
    return _repeat_timing(measure, None, budget_s)


def main():
    import torch
    rows = []
    # (block tile, register tile per thread, k slice): gemm_gpu's defaults ran fastest on an
    # H200 (10-13 TFLOP/s); 128 x 128 tiles of 8 x 8 registers ran at 2.6-5 TFLOP/s
    configs = {"64x64/4x4/k16": ((64, 64), (4, 4), 16, False),
               "64x64/4x4/k16 registers over k": ((64, 64), (4, 4), 16, True)}
    for size in (1024, 2048, 4096):
        for label, cfg in configs.items():
            C, s = gemm_gpu(size, size, size, *cfg)
            kern = sl.compile(C, s, target="cuda")
            a = np.random.rand(size, size).astype(np.float32)
            b = np.random.rand(size, size).astype(np.float32)
            out = kern(A=a, B=b)
            err = float(np.abs(out - a @ b).max() / size)
            ours = kern.time(A=a, B=b, budget_s=0.3).median * 1e3
            ta, tb = torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda")
            torch.backends.cuda.matmul.allow_tf32 = False
            theirs = _torch_times(lambda: ta @ tb, 0.3).median * 1e3
            flops = 2 * size ** 3       # per millisecond, * 1e-9: TFLOP/s
            rows.append((f"gemm {size} {label}", ours, theirs, flops / ours * 1e-9,
                         flops / theirs * 1e-9, "TFLOP/s", err))
    for r, c in ((4096, 4096), (16384, 1024)):
        y = softmax_gpu(r, c)
        kern = sl.compile(y, target="cuda")
        a = np.random.rand(r, c).astype(np.float32)
        out = kern(x=a)
        e = np.exp(a - a.max(-1, keepdims=True))
        err = float(np.abs(out - e / e.sum(-1, keepdims=True)).max())
        ours = kern.time(x=a, budget_s=0.3).median * 1e3
        ta = torch.tensor(a, device="cuda")
        theirs = _torch_times(lambda: torch.softmax(ta, -1), 0.3).median * 1e3
        nbytes = 2 * r * c * 4      # per millisecond, * 1e-6: GB/s
        rows.append((f"softmax {r}x{c}", ours, theirs, nbytes / ours * 1e-6,
                     nbytes / theirs * 1e-6, "GB/s", err))
    print(f"{'workload':30s} {'schedlang ms':>12s} {'torch ms':>10s} {'schedlang':>10s} "
          f"{'torch':>10s} unit      max err   ratio")
    for name, ours, theirs, rate, trate, unit, err in rows:
        print(f"{name:30s} {ours:12.3f} {theirs:10.3f} {rate:10.2f} {trate:10.2f} "
              f"{unit:8s} {err:9.2e} {theirs / ours:6.2f}x")


if __name__ == "__main__":
    main()
