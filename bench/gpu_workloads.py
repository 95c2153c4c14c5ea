"""GPU schedules of the bench workloads, in the public schedule language, and a same-run
comparison with torch on the GPU. ``python -m bench.gpu_workloads`` prints the table on a
machine with an NVIDIA GPU (kernels timed by device events, inputs already on the device,
as torch's are).

Example: ``C, s = gemm_gpu(1024, 1024, 1024)``; ``sl.compile(C, s, target="cuda")``.
"""
from __future__ import annotations

import numpy as np

import schedlang as sl
from schedlang.bench.workloads import gemm_algorithm


def gemm_gpu(m, n, k, block=(64, 64), reg=(4, 4), k_tile=16, registers_over_k=False):
    """C = A @ B: each block computes a ``block`` tile of C from ``k_tile``-deep slices of A
    and B staged in shared memory; each thread keeps a ``reg`` tile of C in registers
    within a slice. With ``registers_over_k``, the slices are taken inside the thread
    loops: each thread keeps its tile in registers over the whole of k, and the block's
    threads fill the shared slices together between barriers."""
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
    _stage_slices(s, C, A, B, ko, block, reg, k_tile)
    return C, s


def _stage_slices(s, C, A, B, ko, block, reg, k_tile):
    """Copy the k slices of A and B to shared memory at ``ko``, with the block's threads:
    x over contiguous elements, y over rows."""
    threads_y, threads_x = block[0] // reg[0], block[1] // reg[1]
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
    """Row softmax, one thread per row (the frontend's op under the GPU default schedule)."""
    from schedlang.frontend import Tensor
    x = Tensor.input("x", (rows, cols))
    return x.softmax(-1)


def _torch_ms(fn, reps=50):
    import torch
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times))


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
            theirs = _torch_ms(lambda: ta @ tb)
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
        theirs = _torch_ms(lambda: torch.softmax(ta, -1))
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
