"""Halide versions of the ``schedlang bench`` workloads, for the ``halide`` comparison rows.

Each workload of ``bench/workloads.py`` (gemm, conv, blur, softmax) is written again with
Halide's Python bindings: the same algorithm, sizes and inputs, with a hand-written CPU
schedule modelled on Halide's own apps (the packed, register-blocked sgemm of
``apps/linear_algebra`` and the matrix-multiply tests for gemm, ``apps/conv_layer`` for
conv, ``apps/blur`` for blur; softmax has no app, so its schedule follows the same ideas),
with tile sizes measured on an AVX-512 machine. The pipeline is JIT-compiled once for the
host; the returned runner only executes it, writing into a preallocated numpy output.

Halide is optional (``pip install 'schedlang[halide]'``); ``halide`` itself is imported
only when a ``halide`` row is wanted. Halide's thread pool reads ``HL_NUM_THREADS`` when it starts, so
the thread count must be set before the first parallel run in a process (``schedlang
bench`` measures each thread count in a fresh child process).

Example::

    from schedlang.bench.workloads import WORKLOADS
    from schedlang.bench.halide_workloads import make_runner
    w = WORKLOADS["gemm"]((256, 256, 256))
    values = w.inputs()
    run = make_runner(w, values, threads=1)
    C = run()            # numpy array, the same one on every call
"""
from __future__ import annotations

import os

import numpy as np

from schedlang.targets.host_cpu import vector_lanes, vector_registers


def halide_available():
    """True when the ``halide`` package imports (the Halide rows are then possible).

    Example: ``if halide_available(): run = make_runner(w, w.inputs())``.
    """
    try:
        import halide  # noqa: F401
    except ImportError:
        return False
    return True


def make_runner(workload, values, threads=None):
    """Compile ``workload`` (a ``bench/workloads.py`` object) with Halide and return a
    zero-argument function that runs it on the numpy arrays in ``values`` (the dict of
    ``workload.inputs()``) and returns the output array, preallocated once and rewritten
    on every call. Compilation happens here, not in the returned function. ``threads``
    sets ``HL_NUM_THREADS`` (it takes effect when Halide's thread pool starts).

    Example: ``run = make_runner(w, values, threads=2); np.allclose(run(), w.numpy(**values))``.
    """
    if threads is not None:
        os.environ["HL_NUM_THREADS"] = str(threads)
    import halide as hl
    builders = {"gemm": _gemm, "conv": _conv, "blur": _blur, "softmax": _softmax}
    if workload.name not in builders or getattr(workload, "dtype", "float32") != "float32":
        raise ValueError(f"no Halide version of workload {workload.name} {workload.shape_text}")
    out_func, inputs, out_shape, result_shape = builders[workload.name](hl, workload)
    # Halide's vector code for partial tiles may use aligned (masked) loads, so every
    # buffer it sees is 64-byte aligned and declared so (numpy only promises 16 bytes);
    # an input may be seen through another shape of the same memory (a 1x1 conv as GEMM)
    arrays = [_aligned_copy(values[name]).reshape(shape) for name, _, shape in inputs]
    for (_, param, shape) in inputs:
        _set_dense_shape(param, shape)
    _set_dense_shape(out_func.output_buffer(), out_shape)
    kernel = out_func.compile_to_callable([param for _, param, _ in inputs],
                                          hl.get_jit_target_from_environment())
    out = _aligned_empty(out_shape)
    result = out.reshape(result_shape)
    # wrap once: hl.Buffer aliases the numpy memory, with the axes reversed (numpy's last
    # axis is Halide's dimension 0), which is how every pipeline below indexes them
    buffers = [hl.Buffer(a) for a in arrays] + [hl.Buffer(out)]

    def run():
        kernel(*buffers)
        return result
    return run


ALIGN = 64


def _aligned_empty(shape):
    """An uninitialised C-contiguous float32 array whose data starts on an ALIGN boundary."""
    count = int(np.prod(shape))
    raw = np.empty(count + ALIGN // 4, np.float32)
    start = (-raw.ctypes.data % ALIGN) // 4
    return raw[start:start + count].reshape(shape)


def _aligned_copy(array):
    """``array`` as float32, copied into ALIGN-aligned memory (done before timing)."""
    out = _aligned_empty(np.shape(array))
    out[...] = array
    return out


def _set_dense_shape(param, numpy_shape):
    """Declare a C-contiguous, ALIGN-aligned numpy shape on an ImageParam / output buffer,
    so Halide compiles for exactly these extents and strides (as schedlang does)."""
    param.set_host_alignment(ALIGN)
    stride = 1
    for d, extent in enumerate(reversed(numpy_shape)):
        param.dim(d).set_bounds(0, extent).set_stride(stride)
        stride *= extent


def _largest_tile(extent, options):
    """The largest tile in ``options`` that fits ``extent`` (or ``extent`` itself)."""
    for t in options:
        if extent >= t:
            return t
    return extent


def _gemm(hl, w):
    """fp32 C = A @ B (the ``gemm`` workload); the pipeline is ``_matmul``'s."""
    m, n, kk = w.size
    C, A, B = _matmul(hl, m, n, kk)
    return C, [("A", A, (m, kk)), ("B", B, (kk, n))], (m, n), (m, n)


def _matmul(hl, m, n, kk):
    """C = A @ B with A (M, K), B (K, N) as ImageParams; Halide indexes A(k, i), B(j, k),
    C(j, i). Returns (C, A, B).

    The GotoBLAS / BLIS blocking used by the sgemm schedules of Halide's apps, for AVX-512:
    a register tile of 64 columns x 6 rows (24 zmm accumulators, vectorize 16); per k block
    of 256, all rows of A are packed (6 rows interleaved, so the broadcasts read
    consecutive floats) and then, per cache tile of 512 columns, a packed 256 x 512 panel
    of B that stays in L2 while row tiles run over it in parallel. C is updated once per
    k block from the registers. (A 32 x 8 register tile with unblocked k, the other
    classic choice, measured up to 10% slower at 1024 and far slower at 2048.) Where the
    CPU has 16 vector registers (AVX2), the tile is 6 rows x 2 vectors (12 ymm
    accumulators), as in BLIS's Haswell kernel: the AVX-512 tile spills there."""
    lanes = vector_lanes(4)
    vecs = (4, 2, 1) if vector_registers() >= 32 else (2, 1)
    rj = _largest_tile(n, tuple(v * lanes for v in vecs))   # register tile: columns
    ri = min(6, m)                             # register tile: rows
    vw = min(lanes, rj)
    kc = min(256, kk)                          # k block
    nc = min(512, -(-n // rj) * rj)            # columns per packed panel of B
    A = hl.ImageParam(hl.Float(32), 2, "A")
    B = hl.ImageParam(hl.Float(32), 2, "B")
    j, i, kv, jj, iv_, p, q, kb = [hl.Var(v) for v in "j i kv jj iv p q kb".split()]
    # clamp the packing reads so that partial tiles at the edges stay inside the inputs;
    # columns or rows computed there are never stored, and k beyond K packs zeros
    col = p * rj + jj if n % rj == 0 else hl.min(p * rj + jj, n - 1)
    row = q * ri + iv_ if m % ri == 0 else hl.min(q * ri + iv_, m - 1)
    kin = kv if kk % kc == 0 else hl.min(kv, kk - 1)
    Bpack = hl.Func("B_packed")
    Apack = hl.Func("A_packed")
    Bpack[jj, kv, p] = B[col, kin] if kk % kc == 0 else hl.select(kv < kk, B[col, kin],
                                                                   hl.f32(0))
    Apack[iv_, kv, q] = A[kin, row]
    r = hl.RDom([(0, kc)], "r")
    blocks = hl.RDom([(0, -(-kk // kc))], "kblock")
    # the partial product of one k block, kept in registers
    acc = hl.Func("acc")
    kidx = kb * kc + r.x
    acc[j, i, kb] = hl.f32(0)
    acc[j, i, kb] += Apack[i % ri, kidx, i // ri] * Bpack[j % rj, kidx, j // rj]
    C = hl.Func("C")
    C[j, i] = hl.f32(0)
    C[j, i] += acc[j, i, blocks.x]

    jc, jr, jt, jv, it, iv = [hl.Var(v) for v in "jc jr jt jv it iv".split()]
    guard = hl.TailStrategy.GuardWithIf        # never write outside C at the edges
    C.bound(j, 0, n).bound(i, 0, m)
    C.vectorize(j, vw).parallel(i, min(8, m))
    C.update().split(j, jc, jr, nc, guard).split(jr, jt, jv, rj, guard) \
        .split(i, it, iv, ri, guard).reorder(jv, iv, jt, it, jc, blocks.x) \
        .vectorize(jv, vw).unroll(jv).unroll(iv).parallel(it)
    acc.compute_at(C, jt).vectorize(j, vw).unroll(j).unroll(i)
    acc.update().reorder(j, i, r.x).vectorize(j, vw).unroll(j).unroll(i)
    Bpack.compute_at(C, jc).vectorize(jj, vw).parallel(p)
    Apack.compute_at(C, blocks.x).reorder(kv, iv_, q).vectorize(kv, min(16, kc)).parallel(q)
    return C, A, B


def _conv(hl, w):
    """NCHW convolution; Halide indexes X(x, y, c, n), W(rx, ry, c, k), out(x, y, k, n).

    ``apps/conv_layer``'s CPU schedule for AVX-512: a register tile of 64 output channels
    (4 vectors of 16) x 4 columns (16 accumulators), so each step of the reduction over
    input channels and taps loads 4 weight vectors and broadcasts 4 input pixels; rows in
    parallel. The app's layout has channels innermost; here the weights are transposed
    once per call so that output channels are adjacent, the input is zero-padded once,
    and each finished tile is transposed into the NCHW output. A 1x1, stride-1
    convolution of one image is a GEMM (weights K x C times the image C x HW) and runs as
    ``_matmul``. Where the CPU has 16 vector registers (AVX2), the tile is 2 vectors of
    channels x 6 columns (12 accumulators)."""
    nb, cin, h, wd, kout = w.size
    kk, st, pad = w.kernel, w.stride, w.pad
    ho, wo = w.out_hw()
    if kk == 1 and st == 1 and nb == 1:
        C, A, B = _matmul(hl, kout, h * wd, cin)
        return C, [("W", A, (kout, cin)), ("X", B, (cin, h * wd))], (kout, h * wd), \
            (1, kout, ho, wo)
    lanes = vector_lanes(4)
    if vector_registers() >= 32:
        tk, tx = _largest_tile(kout, (4 * lanes, 3 * lanes, 2 * lanes, lanes)), min(4, wo)
    else:
        tk, tx = _largest_tile(kout, (2 * lanes, lanes)), min(6, wo)
    vw = min(lanes, tk)
    X = hl.ImageParam(hl.Float(32), 4, "X")
    W = hl.ImageParam(hl.Float(32), 4, "W")
    x, y, c, n, k, ki, ko, xi, xo, rx, ry = [
        hl.Var(v) for v in "x y c n k ki ko xi xo rx ry".split()]
    if pad:
        padded = hl.Func("padded")
        padded[x, y, c, n] = hl.BoundaryConditions.constant_exterior(
            X, hl.f32(0), [(0, wd), (0, h), (0, cin), (0, nb)])[x - pad, y - pad, c, n]
    else:
        padded = X
    Wt = hl.Func("W_transposed")
    Wt[k, rx, ry, c] = W[rx, ry, c, k]
    r = hl.RDom([(0, kk), (0, kk), (0, cin)], "r")
    conv = hl.Func("conv")                     # output channels innermost, like the app
    conv[k, x, y, n] = hl.f32(0)
    conv[k, x, y, n] += padded[x * st + r.x, y * st + r.y, r.z, n] * Wt[k, r.x, r.y, r.z]
    out = hl.Func("out")
    out[x, y, k, n] = conv[k, x, y, n]

    out.bound(x, 0, wo).bound(y, 0, ho).bound(k, 0, kout).bound(n, 0, nb)
    out.split(x, xo, xi, tx).split(k, ko, ki, tk).reorder(xi, ki, xo, ko, y, n) \
       .vectorize(xi).parallel(y)
    conv.compute_at(out, xo).vectorize(k, vw).unroll(k).unroll(x)
    conv.update().reorder(k, x, r.x, r.y, r.z).vectorize(k, vw).unroll(k).unroll(x) \
        .unroll(r.x)
    if pad:
        padded.compute_root().vectorize(x, _largest_tile(wd + 2 * pad, (16, 8))).parallel(c)
    Wt.compute_root().vectorize(k, vw)
    return out, [("X", X, (nb, cin, h, wd)), ("W", W, (kout, cin, kk, kk))], \
        (nb, kout, ho, wo), (nb, kout, ho, wo)


def _blur(hl, w):
    """3x3 separable box blur ('valid' region); Halide indexes img(x, y).

    The tiled schedule of ``apps/blur`` (tiles in parallel, vectorized by 16) combined
    with the sliding window of its current CPU schedule: ``blur_x`` is stored per tile
    and computed one row at a time as ``blur_y`` advances, so each input row is blurred
    once. Tiles of 512 x 32 measured best here (256 x 32, the classic size, reads rows
    in pieces too short for the prefetchers)."""
    hh, ww = w.size
    img = hl.ImageParam(hl.Float(32), 2, "img")
    x, y, xi, yi = [hl.Var(v) for v in "x y xi yi".split()]
    third = hl.f32(1.0 / 3)            # rounded to float32 like numpy's np.float32(1/3)
    blur_x = hl.Func("blur_x")
    blur_x[x, y] = (img[x, y] + img[x + 1, y] + img[x + 2, y]) * third
    blur_y = hl.Func("blur_y")
    blur_y[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) * third
    oh, ow = hh - 2, ww - 2
    tx, ty = _largest_tile(ow, (512, 16)), min(32, oh)
    vw = min(16, tx)
    blur_y.bound(x, 0, ow).bound(y, 0, oh)
    blur_y.tile(x, y, xi, yi, tx, ty).vectorize(xi, vw).parallel(y)
    blur_x.store_at(blur_y, x).compute_at(blur_y, yi).vectorize(x, vw)
    return blur_y, [("img", img, (hh, ww))], (oh, ow), (oh, ow)


def _softmax(hl, w):
    """Row softmax; Halide indexes X(j, i) (j along a row).

    One row per parallel task: the row maximum and the row sum are each split into 64
    partial results with ``rfactor`` (four 16-lane vector accumulators), ``exp`` of the
    row is stored once and reused by the sum and the normalisation, and one reciprocal
    per row replaces the divisions."""
    rows, cols = w.size
    X = hl.ImageParam(hl.Float(32), 2, "X")
    i, j, u = hl.Var("i"), hl.Var("j"), hl.Var("u")
    r = hl.RDom([(0, cols)], "r")
    vw = _largest_tile(cols, (16, 8, 4))
    lanes = min(4 * vw, cols)
    row_max = hl.Func("row_max")
    row_max[i] = hl.f32(float("-inf"))
    row_max[i] = hl.max(row_max[i], X[r.x, i])
    e = hl.Func("e")
    e[j, i] = hl.exp(X[j, i] - row_max[i])
    den = hl.Func("den")
    den[i] = hl.f32(0)
    den[i] += e[r.x, i]
    inv = hl.Func("inv_den")
    inv[i] = hl.f32(1) / den[i]
    out = hl.Func("softmax")
    out[j, i] = e[j, i] * inv[i]

    out.bound(j, 0, cols).bound(i, 0, rows)
    out.parallel(i).vectorize(j, vw)
    e.compute_at(out, i).vectorize(j, vw)
    inv.compute_at(out, i)
    for red in (row_max, den):
        red.compute_at(out, i)
        ro, ri = hl.RVar("ro"), hl.RVar("ri")
        red.update().split(r.x, ro, ri, lanes)
        partial = red.update().rfactor(ri, u)
        partial.compute_at(out, i).vectorize(u, vw)
        partial.update().reorder(u, ro).vectorize(u, vw)
    return out, [("X", X, (rows, cols))], (rows, cols), (rows, cols)
