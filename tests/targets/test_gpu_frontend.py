"""Tensor frontend ops and chains of them compiled for the GPU targets with the default
schedule, through the public API: results against torch (on a GPU where one is present,
else in the CPU emulator) and a sample of the generated sources compiled for real where
nvcc / clang are installed."""
import re

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor
from schedlang.targets.gpu_compilers import check_compiles

torch = pytest.importorskip("torch")
tf = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore:no .* device here")

rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(out, ref, tol=1e-4):
    ref = ref.numpy() if hasattr(ref, "numpy") else np.asarray(ref)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=tol,
                               atol=tol)


def compiles(kern, vendor):
    if vendor != "metal":
        check_compiles(kern.source, vendor)


@pytest.mark.parametrize("n", [1, 5, 300])
@pytest.mark.parametrize("op", ["softmax", "layernorm", "sum_keepdims", "minus_max"])
def test_a_1d_tensor_reduced_inside_the_pipeline(op, n):
    # a reduction of a whole 1-d tensor read by another Func (softmax's max, layernorm's
    # mean) was taken for a row reduction with no row loop: gpu_blocks() of nothing raised
    x = Tensor.input("x", (n,))
    build, ref = {
        "softmax": (lambda t: t.softmax(-1), lambda t: t.softmax(-1)),
        "layernorm": (F.layernorm, lambda t: tf.layer_norm(t, (n,))),
        "sum_keepdims": (lambda t: t.sum(0, keepdims=True), lambda t: t.sum(0, keepdim=True)),
        "minus_max": (lambda t: t - t.max(), lambda t: t - t.max()),
    }[op]
    a = r(n)
    kern = sl.compile(build(x), target="cuda")
    close(kern(x=a), ref(torch.from_numpy(a)), 1e-3)
    if n == 300:
        compiles(kern, "cuda")


def _block_extents(loop_ir):
    return {(m.group(1), int(m.group(2))) for m in
            re.finditer(r"gpu_block\.([xyz]) for \S+ in \[0, (\d+)\)", loop_ir)}


@pytest.mark.parametrize("build, shape", [
    (lambda t: t.softmax(-1), (70000, 3, 8)),                 # a block per row
    (lambda t: t.sum(-1) * 2, (70000, 2, 2, 2, 8)),           # leading row loops fused
    (lambda t: t.sum(-1) * 2, (70000, 2, 8)),                 # a row reduction's own kernel
    (lambda t: t.relu(), (70000, 2, 16, 16)),                 # tiles, batch dims fused
    (lambda t: t.relu(), (1100000, 16)),                      # 68750 row tiles
    (lambda t: t @ t, (70000, 8, 8)),                         # a batched product
])
def test_the_default_grid_fits_the_device(build, shape):
    # the default schedule put batch / row loops on the grid's y or z, which hold 65535
    # blocks: a GPU refused the launch of these modest sizes (the emulator has no limit)
    kern = sl.compile(build(Tensor.input("x", shape)), target="cuda")
    grid = _block_extents(kern.loop_ir)
    assert grid and all(e <= 65535 for d, e in grid if d != "x"), grid


def test_a_softmax_over_many_rows_runs_right():
    a = r(70000, 3, 2)
    kern = sl.compile(Tensor.input("x", a.shape).softmax(-1), target="cuda")
    close(kern(x=a), torch.from_numpy(a).softmax(-1), 1e-5)


@pytest.mark.parametrize("target", ["cuda", "hip", "metal"])
def test_cnn_chain(target):
    x, w, w2 = r(2, 3, 8, 8), r(4, 3, 3, 3), r(64, 10)
    X, W, W2 = Tensor.input("x", x.shape), Tensor.input("w", w.shape), Tensor.input("w2", w2.shape)
    y = (F.max_pool2d(F.conv2d(X, W, padding=1).relu(), 2).reshape((2, 64)) @ W2).softmax(-1)
    kern = sl.compile(y, target=target)
    tx, tw, tw2 = map(torch.from_numpy, (x, w, w2))
    close(kern(x=x, w=w, w2=w2),
          (tf.max_pool2d(tf.conv2d(tx, tw, padding=1).relu(), 2).reshape(2, 64) @ tw2).softmax(-1))
    compiles(kern, target)


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_masked_attention_chain(target):
    q, k, v = r(2, 3, 9, 16), r(2, 3, 11, 16), r(2, 3, 11, 8)
    mask = np.tril(np.ones((9, 11), bool))
    Q, K, V = (Tensor.input(n, a.shape) for n, a in (("q", q), ("k", k), ("v", v)))
    y = F.where(Tensor(mask), Q @ K.transpose(-1, -2) / 4.0, -1e9).softmax(-1) @ V
    kern = sl.compile(y, target=target)
    tq, tk, tv = map(torch.from_numpy, (q, k, v))
    ref = torch.where(torch.from_numpy(mask), tq @ tk.transpose(-1, -2) / 4.0, -1e9)
    close(kern(q=q, k=k, v=v), ref.softmax(-1) @ tv)
    compiles(kern, target)


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_conv_variants_and_pools(target):
    x, w, wg, b = r(2, 4, 11, 9), r(6, 4, 3, 3), r(6, 2, 3, 3), r(6)
    X = Tensor.input("x", x.shape)
    y1 = F.conv2d(X, Tensor.input("w", w.shape), stride=2, padding=1, dilation=2)
    y2 = F.conv2d(X, Tensor.input("wg", wg.shape), Tensor.input("b", b.shape), padding=1,
                  groups=2)
    y3 = F.avg_pool2d(F.max_pool2d(X, 3, stride=2, padding=1), 2)
    kern = sl.compile([y1, y2, y3], target=target)
    o1, o2, o3 = kern(x=x, w=w, wg=wg, b=b)
    tx = torch.from_numpy(x)
    close(o1, tf.conv2d(tx, torch.from_numpy(w), stride=2, padding=1, dilation=2))
    close(o2, tf.conv2d(tx, torch.from_numpy(wg), torch.from_numpy(b), padding=1, groups=2))
    close(o3, tf.avg_pool2d(tf.max_pool2d(tx, 3, stride=2, padding=1), 2))
    compiles(kern, target)


def test_shape_ops_feeding_row_reductions():
    a, b = r(3, 5, 7), r(3, 5, 30)
    A, B = Tensor.input("a", a.shape), Tensor.input("b", b.shape)
    outs = [F.concat([A, B], -1).softmax(-1), F.layernorm(F.pad(A, ((0, 0), (1, 0), (2, 3)))),
            A.transpose(-1, -2).log_softmax(-1), A[1:, ::2].reshape((2, 21)).softmax(0),
            A.expand((2, 3, 5, 7)).mean((0, 2), keepdims=True)]
    kern = sl.compile(outs, target="cuda")
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    refs = [torch.cat([ta, tb], -1).softmax(-1), tf.layer_norm(tf.pad(ta, (2, 3, 1, 0)), (12,)),
            ta.transpose(-1, -2).log_softmax(-1), ta[1:, ::2].reshape(2, 21).softmax(0),
            ta.expand(2, 3, 5, 7).mean((0, 2), keepdim=True)]
    for o, ref in zip(kern(a=a, b=b), refs):
        close(o, ref, 1e-3)
    compiles(kern, "cuda")


@pytest.mark.parametrize("shape", [(1, 1), (1, 17), (17, 1), (1, 1, 257), (3, 1, 5),
                                   (1, 1, 1, 1)])
def test_sizes_one_and_odd(shape):
    a = r(*shape)
    X = Tensor.input("x", shape)
    kern = sl.compile([X.softmax(-1), F.layernorm(X), X.sum(0, keepdims=True), X.max(),
                       F.gelu(X, approximate="tanh").transpose(0, -1), X.softmax(0)],
                      target="cuda")
    t = torch.from_numpy(a)
    refs = [t.softmax(-1), tf.layer_norm(t, shape[-1:]), t.sum(0, keepdim=True), t.max(),
            tf.gelu(t, approximate="tanh").transpose(0, -1), t.softmax(0)]
    for o, ref in zip(kern(x=a), refs):
        close(o, ref, 1e-3)


@pytest.mark.parametrize("sa, sb", [((1, 1), (1, 1)), ((65, 1), (1, 67)),
                                    ((1, 3, 1, 7), (2, 1, 7, 1)), ((129, 63), (63, 130)),
                                    ((5, 1, 64, 16), (16, 64)), ((9, 17), (17,))])
def test_matmul_shapes(sa, sb):
    a, b = r(*sa), r(*sb)
    kern = sl.compile(Tensor.input("a", sa) @ Tensor.input("b", sb), target="cuda")
    close(kern(a=a, b=b), torch.from_numpy(a) @ torch.from_numpy(b))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_from_torch_tensors_matches_the_cpu(dtype):
    tdt, sdt = getattr(torch, dtype), getattr(sl, dtype)
    x, w = torch.randn(5, 37).to(tdt), torch.randn(37, 6).to(tdt)
    X, W = Tensor.input("x", (5, 37), sdt), Tensor.input("w", (37, 6), sdt)
    outs = [X.softmax(-1), X @ W, F.layernorm(X)]
    gpu = sl.compile(outs, target="cuda")(x=x, w=w)
    cpu = sl.compile(outs)(x=x, w=w)
    for g, c in zip(gpu, cpu):
        assert g.dtype == c.dtype and g.shape == c.shape
        if dtype == "bfloat16":     # kernels return bfloat16 as its bits
            g, c = (torch.from_numpy(v.view(np.int16)).view(tdt).float().numpy() for v in (g, c))
        np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), rtol=4e-3,
                                   atol=4e-3)


def test_int32_and_bool():
    a = rng.integers(-50, 50, (5, 37)).astype(np.int32)
    b = rng.integers(1, 50, (5, 37)).astype(np.int32)
    A, B = Tensor.input("a", a.shape, sl.int32), Tensor.input("b", b.shape, sl.int32)
    outs = [A // B, A % B, A @ B.transpose(0, 1), A.max(-1), A.sum(0), (A > 0) & (B < 25),
            F.where(A > B, A, B), (A > 0).sum(-1)]
    kern = sl.compile(outs, target="cuda")
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    refs = [ta // tb, ta % tb, ta @ tb.T, torch.amax(ta, -1), ta.sum(0), (ta > 0) & (tb < 25),
            torch.where(ta > tb, ta, tb), (ta > 0).sum(-1)]
    for o, ref in zip(kern(a=a, b=b), refs):
        np.testing.assert_array_equal(o, ref.numpy().astype(o.dtype))
    compiles(kern, "cuda")


def test_metal_refuses_the_float64_of_an_integer_mean():
    X = Tensor.input("x", (5, 7), sl.int32)
    with pytest.raises(sl.CompileError, match="float64.*float32"):
        sl.compile(X.mean(-1), target="metal")


def test_out_torch_inputs_time_and_lower():
    X, W = Tensor.input("x", (5, 33)), Tensor.input("w", (33, 7))
    y1, y2 = X.softmax(-1), (X @ W).gelu()
    kern = sl.compile([y1, y2], target="cuda")
    x, w = torch.randn(5, 33), torch.randn(7, 33).T      # one not contiguous
    o1, o2 = np.empty((5, 33), np.float32), torch.empty(5, 7)
    kern(x=x, w=w, out=(o1, o2))
    close(o1, x.softmax(-1))
    close(o2.numpy(), tf.gelu(x @ w))
    with pytest.raises(sl.ArgumentError, match="float32"):
        kern(x=x.double(), w=w)
    assert kern.time(x=x, w=w).median > 0
    assert "gpu_block" in str(sl.lower([y1, y2], target="cuda"))
