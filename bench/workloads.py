"""The workloads of ``schedlang bench``: each builds its algorithm, its best known
hand-written schedule (public schedule language only), random inputs, the numpy
reference, and optional torch / Halide versions for the same-run comparison.

Example: ``w = WORKLOADS["gemm"](parse_size("gemm", "1024"))``; ``outs, s = w.algorithm()``; ``sl.compile(outs, s)``.
"""
from __future__ import annotations

import numpy as np

import schedlang as sl
from schedlang.autotune.measure import too_big_to_allocate
from schedlang.frontend.matmul_schedule import conv_tiles, pointwise_block, pointwise_tile
from schedlang.frontend.winograd import schedule_winograd, winograd_conv3x3, winograd_tile
from schedlang.targets.host_cpu import l2_cache_bytes, vector_lanes, vector_registers


def gemm_algorithm(m, n, kk):
    """``C = A @ B`` in float32 for ``A`` m x kk and ``B`` kk x n: (A, B, C, i, j, k).
    Example: ``A, B, C, i, j, k = gemm_algorithm(64, 64, 64)``."""
    A = sl.Input("A", sl.float32, (m, kk))
    B = sl.Input("B", sl.float32, (kk, n))
    i, j = sl.vars("i j")
    k = sl.RDom(kk, name="k")
    C = sl.Func("C", shape=(m, n))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return A, B, C, i, j, k


def parse_size(workload, text, allocates=True):
    """``--size``: gemm ``N`` or ``MxNxK``; conv ``NxCxHxWxK``; blur ``N`` or ``HxW``;
    softmax ``N`` or ``RxC``. With ``allocates`` (bench, tune), a size whose arrays would not
    fit in memory is refused."""
    try:
        parts = [int(p) for p in str(text).lower().split("x")]
    except ValueError:
        raise SystemExit(f"--size {text!r}: expected integers separated by 'x'") from None
    if min(parts) < 1:
        raise SystemExit(f"--size {text!r}: every size must be at least 1")
    size = _size_of(workload, text, parts)
    if allocates:
        _check_fits_in_memory(workload, text, size)
    return size


def _size_of(workload, text, parts):
    if workload == "gemm":
        if len(parts) == 1:
            return (parts[0],) * 3
        if len(parts) == 3:
            return tuple(parts)
    if workload == "conv":
        if len(parts) == 5:
            return tuple(parts)
        if len(parts) == 1:   # N channels in and out on a 56 x 56 image
            return (1, parts[0], 56, 56, parts[0])
    if workload in ("blur", "softmax"):
        size = (parts[0], parts[0]) if len(parts) == 1 else tuple(parts)
        if len(size) == 2 and workload == "blur" and min(size) < 3:
            # the blur's output is the image less its 1-pixel border
            raise SystemExit(f"--size {text!r}: blur needs an image of at least 3x3")
        if len(size) == 2:
            return size
    forms = {"gemm": ("N or MxNxK", "1024"), "conv": ("C or NxCxHxWxK", "1x64x56x56x64"),
             "blur": ("N or HxW", "4096"), "softmax": ("N or RxC", "4096")}
    form, example = forms.get(workload, ("another form", "1024"))
    raise SystemExit(f"--size {text!r} does not fit workload {workload}, which takes "
                     f"{form} (e.g. --size {example})")


def _check_fits_in_memory(workload, text, size):
    """Refuse a size whose arrays (inputs, output, the references' copies: about four
    times the inputs and output, 8 bytes an element at most) need more than half of
    the machine's memory, before anything is allocated."""
    if workload == "gemm":
        m, n, k = size
        elements = m * k + k * n + m * n
    elif workload == "conv":
        n, c, h, w, k = size
        elements = n * c * h * w + k * c * 9 + n * k * h * w
    else:
        elements = 2 * size[0] * size[1]
    need = 4 * 8 * elements
    memory = too_big_to_allocate(need)
    if memory is not None:
        raise SystemExit(f"--size {text!r}: the {workload} arrays need about "
                         f"{need / 2**30:,.1f} GiB, more than half of this machine's "
                         f"{memory / 2**30:,.1f} GiB; choose a smaller size")


class Workload:
    name = ""
    unit = "GFLOP/s"

    def __init__(self, size):
        self.size = size
        self.rng = np.random.default_rng(0)

    @property
    def shape_text(self):
        return "x".join(str(s) for s in self.size)


class Gemm(Workload):
    """C = A @ B with a register-tiled, B-staged schedule: fp32 by default; ``dtype="int8"``
    (uint8 x int8 -> int32) and ``dtype="bfloat16"`` (-> fp32) use the CPU's dot-product
    instructions through ``tensorize``."""

    name = "gemm"
    default_sizes = ("1024", "2048")
    DTYPES = ("float32", "int8", "bfloat16")
    PREFETCH_K = 48      # values of k ahead: three cache lines of an fp32 row of A

    def __init__(self, size, dtype="float32"):
        super().__init__(size)
        if dtype not in self.DTYPES:
            raise SystemExit(f"--dtype {dtype!r}: gemm runs {', '.join(self.DTYPES)}; choose "
                             "from those, e.g. --dtype float32,int8")
        self.dtype = dtype
        self.unit = "GOP/s" if dtype == "int8" else "GFLOP/s"

    @property
    def shape_text(self):
        return super().shape_text + ("" if self.dtype == "float32" else f"/{self.dtype}")

    def amount(self):
        m, n, k = self.size
        return 2.0 * m * n * k

    def algorithm(self):
        if self.dtype != "float32":
            return self.low_precision_algorithm()
        m, n, kk = self.size
        A, B, C, i, j, k = gemm_algorithm(m, n, kk)
        s = sl.Schedule(C)
        # register tile: ti rows x tj columns of C, 6 rows x 4 registers with AVX-512's 32
        # registers (24 accumulators), 6 x 2 with AVX2's 16 (4 a row spill)
        lanes, wide = vector_lanes(4), vector_registers() >= 32
        tile = lanes * (4 if wide else 2)
        ti = min(6, m)
        tj = tile if n >= tile else max(lanes * (n // lanes), n if n < lanes else lanes)
        vw = min(lanes, tj)
        # panel of nc columns: its packed copy of B (k x nc floats) fills half the L2; a
        # quarter with the AVX2 tile (Zen 3, 2048: 69 against 60 GFLOP/s with half)
        nc = tj
        while nc * 2 <= n and kk * nc * 2 * 4 <= l2_cache_bytes() // (2 if wide else 4):
            nc *= 2
        # accumulate each tile in registers (the staged Func), then copy it out to C
        acc = s[C].cache_write("local")
        jo, jr = s[C].split(j, nc, names=("jo", "jr"))
        jt, jv = s[C].split(jr, tj, names=("jt", "jv"))
        io, ii = s[C].split(i, ti, names=("io", "ii"))
        s[C].reorder(jo, io, jt, ii, jv).vectorize(jv, vw).parallel(jo)
        s[acc].compute_at(C, jt)
        s[acc].reorder(k, i, j).vectorize(j, vw).unroll(i).unroll("j.o")
        # stage the panel of B contiguously (packing), once per panel
        Bp = s[B].cache_read(acc, memory="global")
        s[Bp].compute_at(C, jo).vectorize(s[Bp].loop_names()[-1], vw)
        # fetch ahead what the hardware prefetcher misses: each panel's rows of B and each
        # strip's rows of A start on a new page (1024: 1.03x cold, 2048: 1.05x, paired runs).
        # Not with the AVX2 tile: 6 prefetches per 12 FMAs cost more than they gained
        # (Zen 3, 1024: 72 against 78 GFLOP/s without)
        if wide:
            s[Bp].prefetch(B, "k", self.PREFETCH_K)
            s[acc].prefetch(A, k, self.PREFETCH_K)
        return C, s

    def low_precision_algorithm(self):
        """int8 / bfloat16 GEMM: B is packed per panel so that the ``depth`` consecutive k of
        one column are adjacent (the instruction's operand layout), and each 16-column row
        of the 6 x 64 register tile is one ``vpdpbusd`` / ``vdpbf16ps`` per ``depth`` k."""
        from schedlang.intrinsics import vdpbf16ps, vpdpbusd
        m, n, kk = self.size
        intr = vpdpbusd if self.dtype == "int8" else vdpbf16ps
        depth = intr.depth
        if kk % depth or n % 16:
            raise SystemExit(f"gemm --dtype {self.dtype} needs K a multiple of {depth} and N a "
                             f"multiple of 16 (got {self.shape_text})")
        a_t, b_t = (intr.a_dtype, intr.b_dtype)
        A = sl.Input("A", a_t, (m, kk))
        B = sl.Input("B", b_t, (kk, n))
        i, j, ko, ki = sl.vars("i j ko ki")
        Bp = sl.Func("B_packed")
        Bp[ko, j, ki] = B[depth * ko + ki, j]
        r = sl.RDom(kk // depth, depth, name="r")
        acc_t = intr.acc_dtype
        C = sl.Func("C", shape=(m, n))
        C[i, j] = sl.sum(sl.cast(acc_t, A[i, depth * r.x + r.y]) * sl.cast(acc_t, Bp[r.x, j, r.y]))
        s = sl.Schedule(C)
        tj = 64 if n % 64 == 0 else 16
        ti = min(6, m)
        # panel of nc columns: its packed copy of B stays within 256 KiB of L2, and each
        # 6-row strip of A is read once per panel rather than once per 64 columns
        # (int8 1024: 1.03x with 256 columns over 64)
        nc = tj
        while n % (nc * 2) == 0 and kk * nc * 2 * b_t.bytes <= 256 * 1024:
            nc *= 2
        acc = s[C].cache_write("local")
        jo, jr = s[C].split(j, nc, names=("jo", "jr"))
        jt, ji = s[C].split(jr, tj, names=("jt", "ji"))
        io, ii = s[C].split(i, ti)
        s[C].reorder(jo, io, jt, ii, ji).vectorize(ji, 16).parallel(jo)
        s[acc].compute_at(C, jt)
        s[acc].split(j, 16, names=("jq", "jv"))
        s[acc].reorder("r.x", i, "jq", "jv", "r.y").unroll(i).unroll("jq")
        s[acc].tensorize("jv", intr)
        # the packed panel of B (K x 64 values) is made once per column panel, in cache,
        # 16 columns at a time, fetching the rows of B 32 ahead (each starts a new line)
        s[Bp].compute_at(C, jo).vectorize(j, 16).unroll(ki)
        s[Bp].prefetch(B, ko, 32 // depth)
        return C, s

    def inputs(self):
        m, n, k = self.size
        if self.dtype == "int8":
            return {"A": self.rng.integers(0, 256, (m, k), dtype=np.uint8),
                    "B": self.rng.integers(-128, 128, (k, n), dtype=np.int8)}
        if self.dtype == "bfloat16":   # bfloat16 arrays travel as their uint16 bits
            return {"A": _bfloat16_bits(self.rng.random((m, k), dtype=np.float32)),
                    "B": _bfloat16_bits(self.rng.random((k, n), dtype=np.float32))}
        return {"A": self.rng.random((m, k), dtype=np.float32),
                "B": self.rng.random((k, n), dtype=np.float32)}

    def numpy(self, A, B):
        if self.dtype == "int8":   # exact: float64 holds these integer sums
            return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.int32)
        if self.dtype == "bfloat16":
            return _bfloat16_value(A) @ _bfloat16_value(B)
        return A @ B

    def tolerance(self):
        return 0 if self.dtype == "int8" else 1e-4 * self.size[2]


def _bfloat16_bits(x):
    """float32 -> bfloat16 bits (uint16), rounding to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bfloat16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class Blur(Workload):
    """3x3 box blur of an fp32 image, separable, 'valid' region (output (H-2) x (W-2))."""

    name = "blur"
    unit = "GB/s"
    default_sizes = ("4096",)

    def amount(self):
        h, w = self.size
        # GB/s of image read, like softmax (a memory-bound stencil); Gpix/s = GB/s / 4
        return 4.0 * h * w

    def algorithm(self):
        h, w = self.size
        img = sl.Input("img", sl.float32, (h, w))
        y, x = sl.vars("y x")
        bx = sl.Func("blur_x")
        bx[y, x] = (img[y, x] + img[y, x + 1] + img[y, x + 2]) * (1.0 / 3)
        by = sl.Func("blur_y", shape=(h - 2, w - 2))
        by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) * (1.0 / 3)
        s = sl.Schedule(by)
        # The blur is bound by memory: one streaming pass over the image. Per tile of 16
        # output rows, blur_x is stored for the tile and computed a row at a time as
        # blur_y advances (a sliding window: each row of blur_x is computed once, where
        # inline it was computed three times).
        vw = 16 if w - 2 >= 16 else 1
        yo, yi = s[by].split(y, 16 if h - 2 >= 16 else h - 2)
        s[by].vectorize(x, vw).parallel(yo)
        s[bx].store_at(by, yo).compute_at(by, yi).vectorize(x, vw)
        # each new row of blur_x reads one new input row: fetch it two rows ahead, so its
        # loads find it in cache instead of each waiting on memory (1.5x on one core: the
        # hardware prefetcher alone keeps too few lines in flight)
        s[bx].prefetch(img, y, 2)
        return by, s

    def inputs(self):
        h, w = self.size
        return {"img": self.rng.random((h, w), dtype=np.float32)}

    def numpy(self, img):
        bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) * np.float32(1.0 / 3)
        return (bx[:-2] + bx[1:-1] + bx[2:]) * np.float32(1.0 / 3)

    def tolerance(self):
        return 1e-5


class Conv(Workload):
    """fp32 NCHW convolution (ResNet-style layer): kernel 3x3 with padding 1 (or 1x1 with
    padding 0), stride 1 or 2, NCHW in and out, weights OIHW. A 3x3 stride-1 layer with
    channels in multiples of 16 runs in the Winograd form (``frontend/winograd.py``)."""

    name = "conv"
    default_sizes = ("1x64x56x56x64",)

    def __init__(self, size, stride=1, kernel=3):
        super().__init__(size)
        self.stride, self.kernel = stride, kernel
        self.pad = kernel // 2

    @property
    def variant(self):
        """The layer's stride and kernel when not the default 3x3 / 1: ``"stride 2, 1x1"``."""
        parts = ([f"stride {self.stride}"] if self.stride != 1 else []) + (
            [f"{self.kernel}x{self.kernel}"] if self.kernel != 3 else [])
        return ", ".join(parts)

    def out_hw(self):
        _, _, h, w, _ = self.size
        return ((h + 2 * self.pad - self.kernel) // self.stride + 1,
                (w + 2 * self.pad - self.kernel) // self.stride + 1)

    def amount(self):
        n, c, _, _, k = self.size
        ho, wo = self.out_hw()
        return 2.0 * n * k * c * self.kernel ** 2 * ho * wo

    def algorithm(self):
        n_, c_, h, w, k_ = self.size
        kk, st, p = self.kernel, self.stride, self.pad
        ho, wo = self.out_hw()
        X = sl.Input("X", sl.float32, (n_, c_, h, w))
        W = sl.Input("W", sl.float32, (k_, c_, kk, kk))
        n, k, y, x = sl.vars("n k y x")
        c, ry, rx = sl.vars("c ry rx")
        if kk == 1 and st == 1 and (ho * wo) % 64 == 0 and k_ % 4 == 0:
            return self._pointwise(X, W, ho * wo)
        m = winograd_tile(c_, k_, ho, wo, accurate=False) if kk == 3 and st == 1 else None
        if m:
            # F(4x4, 3x3) where its rounding error stays within the tolerance (measured
            # 7e-4 on outputs up to 120 at 64 channels), else F(2x2, 3x3)
            conv = winograd_conv3x3(
                lambda n, c, y, x: sl.constant_exterior(X, 0.0)[n, c, y - p, x - p],
                lambda k, c, i, j: W[k, c, i, j], (n_, c_, ho, wo, k_), m=m)
            s = sl.Schedule(conv.out)
            schedule_winograd(s, conv)
            return conv.out, s
        # the padding: the input rows one output row reads are copied, padded, per output
        # row (3 rows of all channels, 44 KB for 64 x 56). Read in place, each broadcast
        # of the inner loop was a select on the border (stride 2 on Zen 3: 1.83 -> 0.82
        # ms warm, 2.03 -> 1.60 after a cache flush); a padded copy of the whole image
        # costs its own pass over memory
        src = sl.Func("X_padded")
        src[n, c, y, x] = sl.constant_exterior(X, 0.0)[n, c, y, x]
        # weights transposed so that output channels are contiguous: the inner loop loads
        # 16 output channels' weights as one vector and broadcasts one input pixel
        wt = sl.Func("W_t")
        wt[c, ry, rx, k] = W[k, c, ry, rx]
        r = sl.RDom(c_, kk, kk, name="r")
        # the convolution with output channels innermost (NHWC), then written out as NCHW
        acc = sl.Func("conv_nhwc")
        acc[n, y, x, k] = sl.sum(src[n, r.x, y * st + r.y - p, x * st + r.z - p] *
                                 wt[r.x, r.y, r.z, k])
        out = sl.Func("conv", shape=(n_, k_, ho, wo))
        out[n, k, y, x] = acc[n, y, x, k]
        s = sl.Schedule(out)
        if k_ % 16:
            # too few channels for the channel-vectorized kernel: vectorize the columns
            s[out].parallel(y).vectorize(x, 16 if wo >= 16 else 1)
            s[acc].compute_at(out, y)
            s[src].compute_at(out, y).vectorize(x, vector_lanes(4))
            return out, s
        # register tile: tk output channels (tk / lanes vectors) x tx columns, 16
        # accumulators with AVX-512 (12 with AVX2's 16 registers); tx divides the output
        # width; where no divisor fits, the last tile shifts back over the one before
        lanes = vector_lanes(4)
        tk, tx, _ = conv_tiles(wo, k_, c_, kk * kk, shift_tail=True)
        # one tile is computed over the whole reduction in registers, then written out
        # transposed (its tx columns of each channel are adjacent in NCHW); measured 1.07x
        # over sums kept for a whole row of columns and input channels run in passes
        ko, ki = s[out].split(k, tk)
        xo, xi = s[out].split(x, tx)
        # threads take blocks of consecutive rows, so that the rows a prefetch fetches for
        # the next row are this thread's; four blocks where the height allows (two threads
        # get two each)
        ty = max([d for d in range(1, ho + 1) if ho % d == 0 and ho // d >= 4] or [1])
        s[out].split(y, ty, names=("yo", "yi"))
        s[out].reorder(n, "yo", "yi", ko, xo, ki, xi).parallel("yo").vectorize(xi)
        s[acc].compute_at(out, xo)
        # all kh x kw x tx x tk/lanes FMAs of one input channel and kernel row unrolled
        s[acc].reorder("r.x", "r.y", "r.z", x, k).vectorize(k, lanes).unroll(x).unroll("r.z")
        if tk > lanes:
            s[acc].unroll("k.o")
        s[src].compute_at(out, "yi").vectorize(x, lanes)
        # the rows the next output row adds are fetched while this one copies its rows: after
        # the bench's cache flush each copy waited on 128 short runs of lines from memory
        # (Zen 4, one thread: about 0.72 -> 0.65 ms, 1.1-1.2x -> 1.24-1.44x torch)
        s[src].prefetch(X, y, st)
        s[wt].compute_root().vectorize(k, lanes).parallel(c)
        return out, s

    def _pointwise(self, X, W, plane):
        """A 1x1 conv is a matrix product of the weights and the image plane: the plane is
        one fused loop (its rows folded back into one dense index), tiles of 8 output
        channels x 32 pixels (or 4 x 64; 6 x 16 with AVX2) accumulate in registers, and
        each block of pixels of all input channels is first copied to a contiguous panel
        (64 rows of a 12 KB-strided image would each touch another page)."""
        n_, c_, h, w, k_ = self.size
        n, k, y, x = sl.vars("n k y x")
        r = sl.RDom(c_, name="r")
        out = sl.Func("conv", shape=(n_, k_, h, w))
        out[n, k, y, x] = sl.sum(W[k, r, 0, 0] * X[n, r, y, x])
        # 8 channels x 32 pixels with AVX-512 (6 x 2 registers with AVX2, pointwise_tile)
        regs, pixels = pointwise_tile(k_)
        block = pointwise_block(plane, pixels)
        s = sl.Schedule(out)
        p = s[out].fuse(y, x, "p")
        s[out].split(p, block, names=("p.block", "p.in"))
        lanes = vector_lanes(4)
        s[out].split("p.in", pixels, names=("p.tile", "p.vec"))
        s[out].split(k, regs, names=("k.tile", "k.reg"))
        # the sums of a tile stay in registers over the whole reduction
        s[out].reorder(n, "p.block", "k.tile", "p.tile", "r", "k.reg", "p.vec")
        s[out].parallel("p.block").vectorize("p.vec", lanes).unroll("k.reg")
        s[out].unroll("p.vec.o")
        panel = s[X].cache_read(out, memory="global", name="X_panel")
        s[panel].compute_at(out, "p.block").vectorize(s[panel].loop_names()[-1], lanes)
        return out, s

    def inputs(self):
        n, c, h, w, k = self.size
        kk = self.kernel
        return {"X": self.rng.standard_normal((n, c, h, w), dtype=np.float32),
                "W": self.rng.standard_normal((k, c, kk, kk), dtype=np.float32)}

    def numpy(self, X, W):
        n, c, h, w, k = self.size
        kk, st, p = self.kernel, self.stride, self.pad
        ho, wo = self.out_hw()
        xp = np.pad(X, ((0, 0), (0, 0), (p, p), (p, p)))
        out = np.zeros((n, k, ho, wo), np.float32)
        for ry in range(kk):
            for rx in range(kk):
                win = xp[:, :, ry:ry + st * (ho - 1) + 1:st, rx:rx + st * (wo - 1) + 1:st]
                out += np.einsum("nchw,kc->nkhw", win, W[:, :, ry, rx])
        return out

    def tolerance(self):
        # float32 rounding of a sum grows with its length (C * kh * kw terms): 2.2e-3 for
        # 4096 channels (numpy's own float32 result is 1e-3 from the exact sum there)
        return max(2e-3, 3e-7 * self.size[1] * self.kernel ** 2)


class Softmax(Workload):
    """Row softmax of an fp32 R x C matrix; the rate is GB/s of input read."""

    name = "softmax"
    unit = "GB/s"
    default_sizes = ("4096",)

    def amount(self):
        r, c = self.size
        return 4.0 * r * c

    def algorithm(self):
        rows, cols = self.size
        X = sl.Input("X", sl.float32, (rows, cols))
        i, j = sl.vars("i j")
        r = sl.RDom(cols, name="r")
        row_max = sl.Func("row_max")
        row_max[i] = sl.maximum(X[i, r])
        e = sl.Func("e")
        e[i, j] = sl.exp(X[i, j] - row_max[i])
        den = sl.Func("den")
        den[i] = sl.sum(e[i, r])
        out = sl.Func("softmax", shape=(rows, cols))
        inv = sl.Func("inv_den")
        inv[i] = 1.0 / den[i]          # one division per row, then multiplies
        out[i, j] = e[i, j] * inv[i]
        s = sl.Schedule(out)
        vw = 16 if cols >= 16 else 1
        # 64 partial results per row (four vector accumulators, so the adds of one do not
        # wait on the previous one) when the row is long enough
        lanes = 64 if cols >= 256 else vw
        s[out].parallel(i).vectorize(j, vw)
        s[e].compute_at(out, i).vectorize(j, vw)
        # while row i's exponentials are computed, fetch row i + 1 of X: its first pass (the
        # row maximum) then finds it in cache instead of waiting on memory (1.2x)
        s[e].prefetch(X, i)
        s[inv].compute_at(out, i)
        for red in (row_max, den):
            s[red].compute_at(out, i)
            s[red].split(r, lanes)
            part = s[red].rfactor("r.i")
            s[part].compute_at(out, i).reorder("r.o", "r.i").vectorize("r.i", vw)
            if lanes > vw:
                s[part].unroll("r.i.o")
        return out, s

    def inputs(self):
        rows, cols = self.size
        return {"X": self.rng.standard_normal((rows, cols), dtype=np.float32)}

    def numpy(self, X):
        e = np.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def tolerance(self):
        return 1e-6


WORKLOADS = {"gemm": Gemm, "conv": Conv, "blur": Blur, "softmax": Softmax}
