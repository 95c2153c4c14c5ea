"""The GPU targets (cuda, hip, metal) through the public API: results against numpy (on a
GPU where one is present, else in the CPU emulator: the same test code), the generated
source compiled by the real compilers (nvcc + ptxas, clang for HIP) where they are
installed, the shape of the generated code, the errors, and random schedules."""
import math
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

from gpu_matmul import stage_in_shared, tiled_matmul

pytestmark = pytest.mark.filterwarnings("ignore:no .* device here")

NVCC, PTXAS = shutil.which("nvcc"), shutil.which("ptxas")
CLANG = shutil.which("clang-19")
needs_nvcc = pytest.mark.skipif(NVCC is None or PTXAS is None, reason="nvcc/ptxas absent")
needs_clang = pytest.mark.skipif(CLANG is None, reason="clang-19 absent")


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory):
    """A private machine-code cache and tuning database for this module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def rng(seed=0):
    return np.random.default_rng(seed)


def nvcc_compiles(source, tmp_path, name="k"):
    """Compile CUDA source to PTX and the PTX to a cubin for sm_90; fail with the log."""
    cu, ptx = tmp_path / f"{name}.cu", tmp_path / f"{name}.ptx"
    cu.write_text(source)
    r = subprocess.run([NVCC, "-ptx", "-arch=sm_90", str(cu), "-o", str(ptx)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([PTXAS, "-arch=sm_90", str(ptx), "-o", str(tmp_path / f"{name}.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    return ptx.read_text()


def hip_compiles(source, tmp_path, name="k"):
    if "#include <hip/hip_runtime.h>" in source:
        # without ROCm's headers: the compile-only check supplies a stand-in header
        from schedlang.targets.gpu_compilers import check_compiles
        return check_compiles(source, "hip", "gfx942")
    src, asm = tmp_path / f"{name}.hip", tmp_path / f"{name}.s"
    src.write_text(source)
    r = subprocess.run([CLANG, "-x", "hip", "--offload-arch=gfx942", "-nogpulib", "-nogpuinc",
                        "--cuda-device-only", "-O3", "-S", str(src), "-o", str(asm)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    return asm.read_text()


# ======================================================================= pipelines


def matmul_shared(tile=16):
    """The shared-memory matmul: A's tile staged per k-step with its own gpu_threads."""
    A, B, C, s, ko = tiled_matmul(tile, tile)
    stage_in_shared(s, A, C, ko)
    return C, s


def elementwise_2d(tile=(8, 16)):
    A = sl.Input("A", sl.float32, ("H", "W"))
    B = sl.Input("B", sl.float32, ("H", "W"))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=A.shape)
    C[i, j] = A[i, j] * 2.0 + B[i, j] - A[i, j] * B[i, j]
    s = sl.Schedule(C)
    s[C].gpu_tile(i, j, *tile)
    return C, s


def row_reductions():
    """Sum, max and argmax of each row, one thread per row."""
    X = sl.Input("X", sl.float32, ("R", "N"))
    i = sl.Var("i")
    r = sl.RDom(X.shape[1], name="r")
    S = sl.Func("S", shape=(X.shape[0],))
    S[i] = sl.sum(X[i, r])
    Mx = sl.Func("Mx", shape=(X.shape[0],))
    Mx[i] = sl.maximum(X[i, r])
    Am = sl.Func("Am", shape=(X.shape[0],))
    Am[i] = sl.argmax(X[i, r])
    s = sl.Schedule(S, Mx, Am)
    for f in (S, Mx, Am):
        s[f].gpu_tile(i, 32)
    return [S, Mx, Am], s


def row_scan():
    """A prefix sum along each row: the scan's update runs serially inside one thread."""
    X = sl.Input("Xs", sl.int32, ("R", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom((1, X.shape[1] - 1), name="r")
    P = sl.Func("P", shape=X.shape)
    P[i, j] = X[i, j]
    P[i, r] = P[i, r - 1] + X[i, r]
    s = sl.Schedule(P)
    s[P].gpu_tile(i, j, 4, 32)
    s[P].update(0).gpu_tile(i, 64)
    return P, s


def blur_clamped():
    """A 3x3 box blur with clamp_edge boundaries; the horizontal pass computed per tile."""
    A = sl.Input("Img", sl.float32, ("H", "W"))
    Ac = sl.clamp_edge(A)
    i, j = sl.vars("i j")
    bx = sl.Func("bx")
    bx[i, j] = Ac[i, j - 1] + Ac[i, j] + Ac[i, j + 1]
    out = sl.Func("out", shape=A.shape)
    out[i, j] = (bx[i - 1, j] + bx[i, j] + bx[i + 1, j]) / 9.0
    s = sl.Schedule(out)
    io, jo, ii, ji = s[out].tile(i, j, 8, 16)
    s[out].gpu_blocks(jo, io).gpu_threads(ji, ii)
    s[bx].compute_at(out, jo)
    s[bx].gpu_threads(*reversed([d.name for d in s[bx].dims]))
    return out, s


def blur_oracle(a):
    p = np.pad(a, 1, mode="edge")
    bx = p[:, :-2] + p[:, 1:-1] + p[:, 2:]
    return (bx[:-2] + bx[1:-1] + bx[2:]) / np.float32(9.0)


# ======================================================================= results


def test_gpu_tile_2d_with_tails():
    C, s = elementwise_2d((8, 16))
    kern = sl.compile(C, s, target="cuda")
    a, b = rng().standard_normal((2, 37, 53), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a * 2 + b - a * b, rtol=1e-6, atol=1e-6)
    # a size smaller than one tile, and one of exact tiles
    for h, w in ((3, 5), (16, 32)):
        a, b = rng(h).standard_normal((2, h, w), dtype=np.float32)
        np.testing.assert_allclose(kern(A=a, B=b), a * 2 + b - a * b, rtol=1e-6, atol=1e-6)


def test_gpu_tile_1d():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    C = sl.Func("C", shape=A.shape)
    C[x] = sl.sqrt(sl.abs(A[x])) + 1.0
    s = sl.Schedule(C)
    s[C].gpu_tile(x, 128)
    kern = sl.compile(C, s, target="cuda")
    a = rng().standard_normal(1000, dtype=np.float32)
    np.testing.assert_allclose(kern(A=a), np.sqrt(np.abs(a)) + 1, rtol=1e-6)


def test_gpu_blocks_on_three_dims():
    A = sl.Input("A", sl.int32, ("P", "Q", "R"))
    p, q, r = sl.vars("p q r")
    C = sl.Func("C", shape=A.shape)
    C[p, q, r] = A[p, q, r] * 3 + p * 100 + q * 10 + r
    s = sl.Schedule(C)
    s[C].gpu_blocks(r, q, p)
    kern = sl.compile(C, s, target="cuda")
    a = rng().integers(-50, 50, (3, 4, 5), dtype=np.int32)
    P, Q, R = np.meshgrid(np.arange(3), np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(kern(A=a), a * 3 + P * 100 + Q * 10 + R)
    assert "blockIdx.z" in kern.source and "blockIdx.x" in kern.source


def test_gpu_blocks_and_threads_on_three_dims():
    A = sl.Input("A", sl.float32, ("P", "Q", "R"))
    p, q, r = sl.vars("p q r")
    C = sl.Func("C", shape=A.shape)
    C[p, q, r] = A[p, q, r] + 1.0
    s = sl.Schedule(C)
    s[C].gpu_tile(p, q, r, 2, 4, 8)
    kern = sl.compile(C, s, target="cuda")
    a = rng().standard_normal((5, 7, 19), dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a), a + 1)


@pytest.mark.parametrize("shape", [(37, 45, 29), (32, 16, 48), (1, 1, 1)])
def test_matmul_shared_memory(shape):
    M, K, N = shape
    C, s = matmul_shared()
    kern = sl.compile(C, s, target="cuda")
    a = rng().standard_normal((M, K), dtype=np.float32)
    b = rng(1).standard_normal((K, N), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_both_operands_shared():
    A, B, C, s, ko = tiled_matmul()
    for X in (A, B):
        stage_in_shared(s, X, C, ko)
    kern = sl.compile(C, s, target="cuda")
    a = rng().standard_normal((19, 23), dtype=np.float32)
    b = rng(1).standard_normal((23, 17), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)
    assert kern.source.count("__shared__") == 2


def test_row_reductions_one_thread_per_row():
    fs, s = row_reductions()
    kern = sl.compile(fs, s, target="cuda")
    x = rng().standard_normal((45, 33), dtype=np.float32)
    x[3, 7] = x[3, 20] = 50.0     # ties: argmax is the first
    sm, mx, am = kern(X=x)
    np.testing.assert_allclose(sm, x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mx, x.max(1))
    np.testing.assert_array_equal(am, x.argmax(1).astype(np.int32))
    assert am.dtype == np.int32


def test_row_scan_update_stage():
    P, s = row_scan()
    kern = sl.compile(P, s, target="cuda")
    x = rng().integers(-100, 100, (70, 37), dtype=np.int32)
    np.testing.assert_array_equal(kern(Xs=x), np.cumsum(x, axis=1, dtype=np.int32))


def test_update_with_pure_vars_and_constant_index():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=A.shape)
    f[x] = A[x]
    f[x] = f[x] * 2.0
    f[0] = f[0] + 100.0
    s = sl.Schedule(f)
    s[f].gpu_tile(x, 64)
    s[f].update(0).gpu_tile(x, 32)
    kern = sl.compile(f, s, target="hip")
    a = rng().standard_normal(100, dtype=np.float32)
    want = a * 2
    want[0] += 100
    np.testing.assert_allclose(kern(A=a), want, rtol=1e-6)


def test_histogram_scatter_runs_in_one_thread():
    img = sl.Input("img", sl.int32, ("H", "W"))
    r = sl.RDom((0, img.shape[0]), (0, img.shape[1]), name="r")
    b = sl.Var("b")
    hist = sl.Func("hist", shape=(16,))
    hist[b] = 0
    hist[sl.clamp(img[r.x, r.y], 0, 15)] += 1
    s = sl.Schedule(hist)
    s[hist].gpu_tile(b, 16)
    kern = sl.compile(hist, s, target="cuda")
    im = rng().integers(-3, 20, (9, 11), dtype=np.int32)
    np.testing.assert_array_equal(kern(img=im),
                                  np.bincount(np.clip(im, 0, 15).ravel(), minlength=16))


def test_clamp_edge_blur_with_producer_in_shared_memory():
    out, s = blur_clamped()
    kern = sl.compile(out, s, target="cuda")
    a = rng().standard_normal((21, 35), dtype=np.float32)
    np.testing.assert_allclose(kern(Img=a), blur_oracle(a), rtol=1e-5, atol=1e-5)
    assert "__shared__" in kern.source


def test_producer_in_local_memory_inside_threads():
    A = sl.Input("A", sl.float32, ("H", "W"))
    i, j = sl.vars("i j")
    g = sl.Func("g")
    g[i, j] = sl.exp(A[i, j])
    out = sl.Func("out", shape=A.shape)
    out[i, j] = g[i, j] + 1.0
    s = sl.Schedule(out)
    io, jo, ii, ji = s[out].gpu_tile(i, j, 4, 8)
    s[g].compute_at(out, ji)
    kern = sl.compile(out, s, target="cuda")
    a = rng().standard_normal((9, 13), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a), np.exp(a) + 1, rtol=1e-5)


def test_params_of_several_dtypes():
    A = sl.Input("A", sl.float32, ("N",))
    alpha = sl.Param("alpha", sl.float32)
    beta = sl.Param("beta", sl.float64)
    n = sl.Param("n", sl.int64)
    m = sl.Param("m", sl.uint8)
    h = sl.Param("h", sl.float16)
    flag = sl.Param("flag", sl.bool)
    x = sl.Var("x")
    C = sl.Func("C", shape=A.shape)
    C[x] = sl.select(flag, sl.cast(sl.float64, A[x] * alpha + sl.cast(sl.float32, h))
                     * beta + sl.cast(sl.float64, n) + sl.cast(sl.float64, m), 0.0)
    s = sl.Schedule(C)
    s[C].gpu_tile(x, 64)
    kern = sl.compile(C, s, target="cuda")
    a = rng().standard_normal(77, dtype=np.float32)
    got = kern(A=a, alpha=1.5, beta=-2.25, n=-(1 << 40), m=250, h=0.5, flag=True)
    want = (a * np.float32(1.5) + np.float32(0.5)).astype(np.float64) * -2.25 \
        - float(1 << 40) + 250
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(
        kern(A=a, alpha=1.5, beta=-2.25, n=0, m=0, h=0.5, flag=False), np.zeros(77))


def test_default_schedule_matmul_no_schedule_given():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    kern = sl.compile(C, target="cuda")
    a = rng().standard_normal((33, 20), dtype=np.float32)
    b = rng(1).standard_normal((20, 18), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)
    assert "blockIdx.x" in kern.source and "threadIdx.y" in kern.source


def test_default_schedule_4d_and_scalar_reduction():
    A = sl.Input("A", sl.float32, ("P", "Q", "R", "S"))
    p, q, r, t = sl.vars("p q r t")
    C = sl.Func("C", shape=A.shape)
    C[p, q, r, t] = A[p, q, r, t] * 2.0
    rd = sl.RDom((0, A.shape[0]), (0, A.shape[1]), name="rd")
    T = sl.Func("T", shape=())
    T[()] = sl.sum(A[rd.x, rd.y, 0, 0])
    kern = sl.compile([C, T], target="hip")
    a = rng().standard_normal((3, 2, 17, 19), dtype=np.float32)
    c, tot = kern(A=a)
    np.testing.assert_array_equal(c, a * 2)
    np.testing.assert_allclose(tot, a[:, :, 0, 0].sum(), rtol=1e-5)


def test_frontend_softmax_default_schedule():
    x = Tensor.input("x", (13, 37))
    kern = sl.compile(F.softmax(x, -1), target="cuda")
    a = rng().standard_normal((13, 37), dtype=np.float32)
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(kern(x=a), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_frontend_matmul_layernorm_gelu():
    x = Tensor.input("x", (6, 20))
    w = Tensor.input("w", (20, 12))
    y = F.layernorm(x @ w).gelu()
    kern = sl.compile(y, target="cuda")
    a = rng().standard_normal((6, 20), dtype=np.float32)
    b = rng(1).standard_normal((20, 12), dtype=np.float32)
    h = (a @ b).astype(np.float64)
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    erf = np.vectorize(math.erf)
    want = 0.5 * h * (1 + erf(h / math.sqrt(2)))
    np.testing.assert_allclose(kern(x=a, w=b), want, rtol=1e-4, atol=1e-4)


def test_frontend_conv2d_relu_and_pool():
    x = Tensor.input("x", (1, 3, 9, 9))
    w = Tensor.input("w", (4, 3, 3, 3))
    y = F.max_pool2d(F.conv2d(x, w, padding=1).relu(), 2)
    kern = sl.compile(y, target="metal")
    a = rng().standard_normal((1, 3, 9, 9), dtype=np.float32)
    b = rng(1).standard_normal((4, 3, 3, 3), dtype=np.float32)
    p = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 4, 9, 9), np.float64)
    for dy in range(3):
        for dx in range(3):
            conv += np.einsum("nchw,oc->nohw", p[:, :, dy:dy + 9, dx:dx + 9], b[:, :, dy, dx])
    r = np.maximum(conv, 0)[:, :, :8, :8]
    want = r.reshape(1, 4, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(kern(x=a, w=b), want, rtol=1e-4, atol=1e-4)


# ======================================================================= dtypes

INT_TYPES = [sl.int8, sl.int16, sl.int32, sl.int64, sl.uint8, sl.uint16, sl.uint32, sl.uint64]
FLOAT_TYPES = [sl.float16, sl.float32, sl.float64]


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays quiet)."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_value(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def int_inputs(dt, n=61, seed=0):
    """Values over the whole range of ``dt`` with the extremes, zero and -1 mixed in."""
    info = np.iinfo(dt.numpy)
    g = rng(seed)
    a = g.integers(info.min, info.max, n, dtype=dt.numpy, endpoint=True)
    b = g.integers(info.min, info.max, n, dtype=dt.numpy, endpoint=True)
    small = g.integers(max(info.min, -9), 10, n).astype(dt.numpy)
    a[:6] = [info.min, info.max, 0, 7, info.min, 5]
    b[:6] = np.array([-1 if info.min < 0 else 1, 1, 3, 0, info.max, info.min]).astype(dt.numpy) \
        if info.min < 0 else np.array([1, 1, 3, 0, info.max, 0], dt.numpy)
    b[6:20] = small[6:20]       # small divisors: floor division and modulo of negatives
    shift = g.integers(0, dt.bits + 3, n).astype(dt.numpy)
    return a, b, shift


def int_pipeline(dt, prefix=""):
    """Funcs of integer inputs a, b, s of ``dt`` and their numpy oracles."""
    a = sl.Input(prefix + "a", dt, ("N",))
    b = sl.Input(prefix + "b", dt, ("N",))
    sh = sl.Input(prefix + "s", dt, ("N",))
    x = sl.Var("x")
    ops = {
        "add": (lambda a, b, s: a + b, lambda a, b, s: a + b),
        "sub": (lambda a, b, s: a - b, lambda a, b, s: a - b),
        "mul": (lambda a, b, s: a * b, lambda a, b, s: a * b),
        "floordiv": (lambda a, b, s: a // b, lambda a, b, s: a // b),
        "mod": (lambda a, b, s: a % b, lambda a, b, s: a % b),
        "bits": (lambda a, b, s: (a & b) | (a ^ ~b), lambda a, b, s: (a & b) | (a ^ ~b)),
        "shl": (lambda a, b, s: a << s, lambda a, b, s: np.left_shift(a, s)),
        "shr": (lambda a, b, s: a >> s, lambda a, b, s: np.right_shift(a, s)),
        "minmax": (lambda a, b, s: sl.min(a, b) - sl.max(a, s),
                   lambda a, b, s: np.minimum(a, b) - np.maximum(a, s)),
        "cmp": (lambda a, b, s: (a < b) & (b >= s), lambda a, b, s: (a < b) & (b >= s)),
        "select": (lambda a, b, s: sl.select(a > b, a, b + 1),
                   lambda a, b, s: np.where(a > b, a, b + dt.numpy.type(1))),
        "tof32": (lambda a, b, s: sl.cast(sl.float32, a) * 0.5,
                  lambda a, b, s: a.astype(np.float32) * np.float32(0.5)),
        "toi8": (lambda a, b, s: sl.cast(sl.int8, a), lambda a, b, s: a.astype(np.int8)),
        "tou64": (lambda a, b, s: sl.cast(sl.uint64, a), lambda a, b, s: a.astype(np.uint64)),
        "abs": (lambda a, b, s: sl.abs(a), lambda a, b, s: np.abs(a)),
    }
    funcs, oracles = [], []
    for name, (fn, ref) in ops.items():
        f = sl.Func(f"{prefix}{dt.name}_{name}", shape=a.shape)
        f[x] = fn(a[x], b[x], sh[x])
        funcs.append(f)
        oracles.append(ref)
    return funcs, oracles


def float_inputs(dt, n=61, seed=0):
    g = rng(seed)
    a = (g.standard_normal(n) * 3).astype(np.float32)
    b = (g.standard_normal(n) * 3).astype(np.float32)
    a[:8] = [np.nan, 1.0, -0.0, np.inf, -7.5, 7.5, 2.0, -3.0]
    b[:8] = [1.0, np.nan, 2.0, 3.0, 2.0, -2.0, -np.inf, 0.0]
    if dt == sl.bfloat16:
        return bf16_bits(a), bf16_bits(b)
    return a.astype(dt.numpy), b.astype(dt.numpy)


MATH = {
    "exp": (lambda a: sl.exp(a), np.exp), "log": (lambda a: sl.log(sl.abs(a) + 0.5),
                                                  lambda a: np.log(np.abs(a) + 0.5)),
    "sqrt": (lambda a: sl.sqrt(sl.abs(a)), lambda a: np.sqrt(np.abs(a))),
    "rsqrt": (lambda a: sl.rsqrt(sl.abs(a) + 0.25), lambda a: 1 / np.sqrt(np.abs(a) + 0.25)),
    "sin": (sl.sin, np.sin), "cos": (sl.cos, np.cos), "tanh": (sl.tanh, np.tanh),
    "floor": (sl.floor, np.floor), "ceil": (sl.ceil, np.ceil),
    "erf": (sl.erf, np.vectorize(lambda v: math.erf(v) if not math.isnan(v) else v)),
    "abs": (sl.abs, np.abs),
    "pow": (lambda a: sl.pow(sl.abs(a), 1.5), lambda a: np.power(np.abs(a), 1.5)),
}


def float_pipeline(dt, prefix=""):
    """Funcs of float inputs a, b of ``dt``; oracles take float64 values and return
    float64 (exact results rounded to ``dt`` by the caller)."""
    a = sl.Input(prefix + "a", dt, ("N",))
    b = sl.Input(prefix + "b", dt, ("N",))
    x = sl.Var("x")
    ops = {
        "arith": (lambda a, b: (a + b) * a - b / (a - 0.5), None),
        "floordiv": (lambda a, b: a // b, None),
        "mod": (lambda a, b: a % b, None),
        "min": (lambda a, b: sl.min(a, b), lambda a, b: np.minimum(a, b)),
        "max": (lambda a, b: sl.max(a, b), lambda a, b: np.maximum(a, b)),
        "cmp": (lambda a, b: (a < b) | (a != a), lambda a, b: (a < b) | np.isnan(a)),
        "toi32": (lambda a, b: sl.cast(sl.int32, sl.clamp(a, -100.0, 100.0)), None),
    }
    for name, (fn, ref) in MATH.items():
        ops[name] = (lambda a, b, fn=fn: fn(a), lambda a, b, ref=ref: ref(a))
    funcs, oracles = [], []
    for name, (fn, ref) in ops.items():
        f = sl.Func(f"{prefix}{dt.name}_{name}", shape=a.shape)
        f[x] = fn(a[x], b[x])
        funcs.append(f)
        oracles.append((name, ref))
    return funcs, oracles


def gpu_tile_all(funcs, factor=32):
    s = sl.Schedule(*funcs)
    for f in funcs:
        s[f].gpu_tile("x", factor)
    return s


def rounder(dt):
    """Rounds float64 values to ``dt``'s values (as float64)."""
    if dt == sl.bfloat16:
        return lambda v: bf16_value(bf16_bits(np.asarray(v, np.float32))).astype(np.float64)
    return lambda v: np.asarray(v).astype(dt.numpy).astype(np.float64)


def float_oracle(name, ref, dt, a, b):
    rd = rounder(dt)
    with np.errstate(all="ignore"):
        if name == "arith":
            return rd(rd(rd(a + b) * a) - rd(b / rd(a - 0.5)))
        if name == "floordiv":      # numpy's: inf // 3 is nan, 2 // -inf is -1
            return rd(np.floor_divide(a, b))
        if name == "mod":
            return rd(np.mod(a, b))
        if name == "toi32":
            return np.trunc(np.clip(a, -100, 100)).astype(np.int32)
        if name == "cmp":
            return ref(a, b)
        return rd(ref(a, b))


@pytest.mark.parametrize("dt", INT_TYPES, ids=lambda d: d.name)
def test_integer_dtypes(dt):
    funcs, oracles = int_pipeline(dt)
    kern = sl.compile(funcs, gpu_tile_all(funcs), target="cuda")
    a, b, sh = int_inputs(dt)
    outs = kern(a=a, b=b, s=sh)
    with np.errstate(all="ignore"):
        for f, ref, got in zip(funcs, oracles, outs):
            want = ref(a, b, sh)
            assert got.dtype == want.dtype, f.name
            np.testing.assert_array_equal(got, want, err_msg=f.name)


@pytest.mark.parametrize("dt", FLOAT_TYPES + [sl.bfloat16], ids=lambda d: d.name)
def test_float_dtypes_arithmetic_nan_and_math(dt):
    funcs, oracles = float_pipeline(dt)
    kern = sl.compile(funcs, gpu_tile_all(funcs, 16), target="cuda")
    a, b = float_inputs(dt)
    outs = kern(a=a, b=b)
    fa, fb = (bf16_value(v).astype(np.float64) if dt == sl.bfloat16 else v.astype(np.float64)
              for v in (a, b))
    exact = ("arith", "floordiv", "mod", "min", "max", "cmp", "toi32", "floor", "ceil", "abs")
    tol = {sl.float16: 2e-3, sl.bfloat16: 1.6e-2, sl.float32: 2e-6, sl.float64: 1e-13}[dt]
    for f, (name, ref), got in zip(funcs, oracles, outs):
        want = float_oracle(name, ref, dt, fa, fb)
        if dt == sl.bfloat16 and got.dtype == np.uint16:
            got = bf16_value(got)
        got = got.astype(np.float64) if got.dtype.kind == "f" else got
        if name in exact:
            np.testing.assert_array_equal(got, want, err_msg=f.name)
        else:
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f.name)


def test_bool_dtype():
    a = sl.Input("a", sl.bool, ("N",))
    b = sl.Input("b", sl.bool, ("N",))
    x = sl.Var("x")
    L = sl.Func("L", shape=a.shape)
    L[x] = (a[x] & ~b[x]) | (a[x] ^ b[x])
    S = sl.Func("S", shape=a.shape)
    S[x] = sl.select(a[x], sl.cast(sl.int32, b[x]) + 2, sl.cast(sl.int32, a[x]))
    Bc = sl.Func("Bc", shape=a.shape)
    Bc[x] = sl.cast(sl.bool, sl.cast(sl.float32, b[x]) * 3.0) == a[x]
    kern = sl.compile([L, S, Bc], gpu_tile_all([L, S, Bc]), target="cuda")
    va, vb = rng().integers(0, 2, (2, 45)).astype(bool)
    l, s_, bc = kern(a=va, b=vb)
    assert l.dtype == np.bool_ and bc.dtype == np.bool_
    np.testing.assert_array_equal(l, (va & ~vb) | (va ^ vb))
    np.testing.assert_array_equal(s_, np.where(va, vb.astype(np.int32) + 2, va.astype(np.int32)))
    np.testing.assert_array_equal(bc, vb == va)


def test_float_casts_round_and_truncate():
    a = sl.Input("a", sl.float32, ("N",))
    x = sl.Var("x")
    outs = {}
    for dt in (sl.int8, sl.uint8, sl.int64, sl.float16, sl.bfloat16, sl.float64):
        f = sl.Func(f"to_{dt.name}", shape=a.shape)
        f[x] = sl.cast(dt, a[x])
        outs[dt] = f
    kern = sl.compile(list(outs.values()), gpu_tile_all(list(outs.values())), target="hip")
    v = np.array([0.5, -0.5, 1.5, -1.9, 100.7, -100.7, 2.5, 65519.0, 1.0009765625,
                  3.0e-8, 1.00390625, -0.0], np.float32)
    got = dict(zip(outs, kern(a=v)))
    np.testing.assert_array_equal(got[sl.int8], np.trunc(v).astype(np.int64).astype(np.int8))
    small = np.abs(v) < 200
    np.testing.assert_array_equal(got[sl.uint8][small & (v >= 0)],
                                  np.trunc(v[small & (v >= 0)]).astype(np.uint8))
    np.testing.assert_array_equal(got[sl.int64], np.trunc(v).astype(np.int64))
    np.testing.assert_array_equal(got[sl.float16], v.astype(np.float16))
    np.testing.assert_array_equal(got[sl.bfloat16], bf16_bits(v))
    np.testing.assert_array_equal(got[sl.float64], v.astype(np.float64))


# ======================================================================= real compilers


def int_group():
    funcs = []
    for dt in INT_TYPES:
        funcs += int_pipeline(dt, prefix=f"{dt.name}_")[0]
    return funcs, gpu_tile_all(funcs, 64)


def float_group():
    funcs = []
    for dt in FLOAT_TYPES + [sl.bfloat16]:
        funcs += float_pipeline(dt, prefix=f"{dt.name}_")[0]
    return funcs, gpu_tile_all(funcs, 64)


def structure_group():
    """A shared-memory matmul, row reductions, a scan and a clamped blur in one pipeline,
    with the schedules of the pipelines above re-applied."""
    C, _ = matmul_shared()
    reds, _ = row_reductions()
    P, _ = row_scan()
    blur, _ = blur_clamped()
    outs = [C] + reds + [P, blur]
    s = sl.Schedule(*outs)
    io, jo, ii, ji = s[C].tile("i", "j", 16, 16)
    ko, ki = s[C].split("k", 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].gpu_blocks(jo, io).gpu_threads(ji, ii)
    As = s[_input_of(s, "A")].cache_read(C, memory="shared")
    s[As].compute_at(C, ko)
    s[As].gpu_threads(*reversed([d.name for d in s[As].dims]))
    for f in reds:
        s[f].gpu_tile("i", 32)
    s[P].gpu_tile("i", "j", 4, 32)
    s[P].update(0).gpu_tile("i", 64)
    io, jo, ii, ji = s[blur].tile("i", "j", 8, 16)
    s[blur].gpu_blocks(jo, io).gpu_threads(ji, ii)
    bx = next(f for f in s.funcs if f.name == "bx")
    s[bx].compute_at(blur, jo)
    s[bx].gpu_threads(*reversed([d.name for d in s[bx].dims]))
    return outs, s


GROUPS = {"ints": int_group, "floats": float_group, "structures": structure_group}


@needs_nvcc
@pytest.mark.parametrize("group", GROUPS)
def test_cuda_source_compiles_with_nvcc_and_ptxas(group, tmp_path):
    outs, s = GROUPS[group]()
    src = sl.compile(outs, s, target="cuda:sm_90").source
    ptx = nvcc_compiles(src, tmp_path)
    assert ".entry" in ptx
    if group == "structures":
        assert "bar.sync" in ptx and ".shared" in ptx


@needs_clang
@pytest.mark.parametrize("group", GROUPS)
def test_hip_source_compiles_with_clang(group, tmp_path):
    outs, s = GROUPS[group]()
    asm = hip_compiles(sl.compile(outs, s, target="hip:gfx942").source, tmp_path)
    assert "amdhsa" in asm
    if group == "structures":
        assert "s_barrier" in asm


def _input_of(s, name):
    return next(i for i in s.inputs if i.name == name)
# ======================================================================= generated code


def test_cuda_code_shape_of_the_shared_matmul():
    C, s = matmul_shared()
    src = sl.compile(C, s, target="cuda").source
    assert 'extern "C" __global__ __launch_bounds__(256) void' in src
    assert "__shared__ float A_C[256];" in src
    # the barrier stands between the fill of the shared tile and the loop that reads it
    body = src[src.index("__global__"):]
    fill = body.index("A_C[(")
    use = re.search(r"A_C\[\(+C_s0_i_i", body).start()
    assert "__syncthreads();" in body[fill:use]
    # gpu_blocks(jo, io): the first var is .x; gpu_threads(ji, ii) likewise
    assert re.search(r"C_s0_j_o = \(long long\)blockIdx\.x", body)
    assert re.search(r"C_s0_i_o = \(long long\)blockIdx\.y", body)
    assert re.search(r"C_s0_j_i = \(long long\)threadIdx\.x", body)
    assert re.search(r"C_s0_i_i = \(long long\)threadIdx\.y", body)


def test_hip_code_uses_amdgcn_builtins():
    C, s = matmul_shared()
    src = sl.compile(C, s, target="hip:gfx942").source
    body = src[src.index("void sl_C_kernel0"):]
    # AMD's barrier, spelled as the builtin or through HIP's __syncthreads
    barrier = "__builtin_amdgcn_s_barrier()" if "__builtin_amdgcn_s_barrier()" in body \
        else "__syncthreads()"
    assert barrier in body[body.index("A_C[("):re.search(r"A_C\[\(+C_s0_i_i", body).start()]
    assert re.search(r"(__builtin_amdgcn_workgroup_id_x\(\)|blockIdx\.x)", body)
    assert re.search(r"(amdgpu_flat_work_group_size\(1, 256\)|__launch_bounds__\(256\))", src)
    assert re.search(r"(__attribute__\(\(shared\)\)|__shared__) float A_C\[256\];", src)


@needs_clang
def test_hip_barrier_is_an_amdgcn_s_barrier(tmp_path):
    C, s = matmul_shared()
    asm = hip_compiles(sl.compile(C, s, target="hip").source, tmp_path)
    assert "s_barrier" in asm and "ds_write" in asm and "ds_read" in asm


def test_metal_code_shape():
    C, s = matmul_shared()
    src = sl.compile(C, s, target="metal").source
    assert "kernel void" in src and "#include <metal_stdlib>" in src
    assert "threadgroup float A_C[256];" in src
    assert "[[buffer(0)]]" in src and "[[threadgroup_position_in_grid]]" in src
    assert "threadgroup_barrier(" in src
    assert "__global__" not in src and "double" not in src


def test_metal_runs_in_the_emulator_and_refuses_float64():
    C, s = elementwise_2d((4, 8))
    kern = sl.compile(C, s, target="metal")
    a, b = rng().standard_normal((2, 5, 9), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a * 2 + b - a * b, rtol=1e-6)
    A = sl.Input("A", sl.float64, ("N",))
    x = sl.Var("x")
    D = sl.Func("D", shape=A.shape)
    D[x] = A[x] * 2.0
    s = sl.Schedule(D)
    s[D].gpu_tile(x, 32)
    with pytest.raises(sl.CompileError, match="float64"):
        sl.compile(D, s, target="metal")


def test_local_memory_and_single_thread_kernel_in_source():
    P, s = row_scan()
    src = sl.compile(P, s, target="cuda").source
    assert src.count("__global__") == 2
    assert "__launch_bounds__(128)" in src and "__launch_bounds__(64)" in src


# ======================================================================= errors


def test_too_many_threads_per_block():
    C, _ = elementwise_2d()
    s = sl.Schedule(C)
    s[C].gpu_tile("i", "j", 64, 64)
    with pytest.raises(sl.CompileError, match=r"64 x 64 x 1 = 4096 threads; a GPU block "
                                              r"holds at most 1024"):
        sl.compile(C, s, target="cuda")


def test_too_many_threads_along_z():
    A = sl.Input("A", sl.float32, ("P", "Q", "R"))
    p, q, r = sl.vars("p q r")
    C = sl.Func("C", shape=A.shape)
    C[p, q, r] = A[p, q, r]
    s = sl.Schedule(C)
    s[C].gpu_tile(p, q, r, 128, 1, 2)
    with pytest.raises(sl.CompileError, match="128 threads along z in one block; a GPU "
                                              "block holds at most 64 there"):
        sl.compile(C, s, target="cuda")


def test_shared_memory_over_48_kib():
    C, _ = matmul_shared()
    s2 = sl.Schedule(C)
    io, jo, ii, ji = s2[C].tile("i", "j", 16, 16)
    ko, ki = s2[C].split("k", 1024)
    s2[C].reorder(io, jo, ko, ii, ji, ki)
    s2[C].gpu_blocks(jo, io).gpu_threads(ji, ii)
    As = s2[_input_of(s2, "A")].cache_read(C, memory="shared")
    s2[As].compute_at(C, ko)
    s2[As].gpu_threads(s2[As].dims[0].name)      # rows on threads, each copies its row
    with pytest.raises(sl.CompileError, match=r"A_C needs up to 65536 bytes of shared memory, "
                                              r"more than the 49152 a GPU block may use"):
        sl.compile(C, s2, target="cuda")


def test_thread_loop_without_constant_extent():
    A = sl.Input("A", sl.float32, ("H", "W"))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=A.shape)
    C[i, j] = A[i, j] + 1.0
    s = sl.Schedule(C)
    s[C].gpu_blocks(i).gpu_threads(j)
    with pytest.raises(sl.CompileError, match=r"the gpu_threads loop j of C.* has extent W, "
                                              r"which has no upper bound known when compiling"):
        sl.compile(C, s, target="cuda")


@pytest.mark.parametrize("target, msg", [
    ("cuda:80", "target 'cuda:80': '80' is not a cuda architecture; use 'cuda' (the device's "
                "own) or e.g. 'cuda:sm_90'"),
    ("hip:sm_90", "target 'hip:sm_90': 'sm_90' is not a hip architecture; use 'hip' (the "
                  "device's own) or e.g. 'hip:gfx942'"),
    ("metal:x", "target 'metal:x': metal takes no architecture; use 'metal'"),
    ("cuda:", "target 'cuda:': '' is not a cuda architecture"),
])
def test_malformed_gpu_targets(target, msg):
    C, s = elementwise_2d()
    with pytest.raises(sl.CompileError, match=re.escape(msg)):
        sl.compile(C, s, target=target)
    with pytest.raises(sl.CompileError, match=re.escape(msg)):
        sl.lower(C, s, target=target)


def test_gpu_schedule_on_the_llvm_target():
    C, s = elementwise_2d()
    with pytest.raises(sl.CompileError, match=re.escape(
            "gpu_tile(i, j, 8, 16) (which binds i.o) on C needs a GPU target (cuda, hip or "
            "metal); the llvm target runs on the CPU")):
        sl.compile(C, s, target="llvm")
    s = sl.Schedule(C)
    s[C].gpu_blocks("i")
    with pytest.raises(sl.CompileError, match=re.escape("gpu_blocks(i) on C needs a GPU target")):
        sl.compile(C, s)


def test_valid_architectures_compile():
    C, s = elementwise_2d()
    for t in ("cuda:sm_80", "cuda:sm_90a", "hip:gfx90a", "hip:gfx1100"):
        assert "void sl_C_kernel0(" in sl.compile(C, s, target=t).source


# ======================================================================= random schedules


def fuzz_pipeline():
    A = sl.Input("A", sl.float32, ("H", "W"))
    Ac = sl.clamp_edge(A)
    i, j = sl.vars("i j")
    g = sl.Func("g")
    g[i, j] = Ac[i, j + 1] * 2.0 - Ac[i, j]
    out = sl.Func("out", shape=A.shape)
    out[i, j] = g[i, j] + g[i + 1, j] * 0.5
    return A, g, out


def fuzz_oracle(a):
    p = np.pad(a, 1, mode="edge")[1:, 1:]       # p[i, j] = a[clamp(i), clamp(j)], i, j >= 0
    g = p[:, 1:] * np.float32(2) - p[:, :-1]    # g[i, j] for i in [0, H], j in [0, W)
    return g[:-1] + g[1:] * np.float32(0.5)


FACTORS = st.sampled_from([1, 2, 3, 4, 8, 16])


@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_gpu_schedules_match_numpy_or_are_refused(data):
    A, g, out = fuzz_pipeline()
    s = sl.Schedule(out)
    try:
        kind = data.draw(st.sampled_from(["gpu_tile", "split", "blocks_only", "one_dim"]))
        if kind == "gpu_tile":
            io, jo, ii, ji = s[out].gpu_tile("i", "j", data.draw(FACTORS), data.draw(FACTORS))
            loops = [io, jo, ii, ji]
        elif kind == "split":
            io, ii = s[out].split("i", data.draw(FACTORS))
            jo, ji = s[out].split("j", data.draw(FACTORS))
            outer = data.draw(st.permutations([io, jo]))
            inner = data.draw(st.permutations([ii, ji]))
            s[out].reorder(*outer, *inner)
            s[out].gpu_blocks(*data.draw(st.permutations(outer)))
            n = data.draw(st.integers(1, 2))
            s[out].gpu_threads(*data.draw(st.permutations(inner))[:n])
            loops = list(outer) + list(inner)
        elif kind == "blocks_only":
            s[out].gpu_blocks(*data.draw(st.permutations(["i", "j"])))
            loops = ["i", "j"]
        else:
            jo, ji = s[out].split("j", data.draw(FACTORS))
            s[out].reorder("i", jo, ji)
            s[out].gpu_blocks(jo, "i").gpu_threads(ji)
            loops = ["i", jo, ji]
        where = data.draw(st.sampled_from(["inline", "root", "at"]))
        if where == "root":
            s[g].compute_root()
            if data.draw(st.booleans()):
                s[g].gpu_tile("i", "j", data.draw(FACTORS), data.draw(FACTORS))
        elif where == "at":
            s[g].compute_at(out, data.draw(st.sampled_from(loops)))
            if data.draw(st.booleans()):
                dims = [d.name for d in s[g].dims if not d.is_rvar]
                s[g].gpu_threads(*reversed(dims[-data.draw(st.integers(1, 2)):]))
        kern = sl.compile(out, s, target="cuda")
    except sl.SchedlangError:
        return
    for shape in ((7, 11), (16, 3)):
        a = rng(shape[0]).standard_normal(shape, dtype=np.float32)
        np.testing.assert_allclose(kern(A=a), fuzz_oracle(a), rtol=1e-5, atol=1e-5,
                                   err_msg=str(s))
