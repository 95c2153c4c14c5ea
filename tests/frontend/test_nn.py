"""Reductions, matmul, softmax family, layernorm, conv2d and pooling against numpy
references (torch semantics written out in numpy where numpy has no op)."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

from .conftest import check

rng = np.random.default_rng(1)
X = rng.standard_normal((2, 3, 9)).astype(np.float32)
XI = rng.integers(-50, 50, (2, 3, 9)).astype(np.int32)


@pytest.mark.parametrize("axis", [None, 0, -1, 1, (0, 2), (-1, -3)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum(axis, keepdims):
    check(Tensor(X).sum(axis, keepdims=keepdims), X.sum(axis, keepdims=keepdims), atol=1e-5)


@pytest.mark.parametrize("op", ["max", "min", "mean"])
@pytest.mark.parametrize("axis", [None, -1, (0, 1)])
def test_max_min_mean(op, axis):
    check(getattr(F, op)(Tensor(X), axis), getattr(X, op)(axis), atol=1e-5)
    check(getattr(Tensor(X), op)(axis=axis, keepdims=True), getattr(X, op)(axis, keepdims=True),
          atol=1e-5)


def test_integer_and_bool_reductions():
    check(Tensor(XI).sum(-1), XI.sum(-1))                  # int64, as numpy and torch
    check(Tensor(XI).max(0), XI.max(0))
    check(Tensor(XI).mean(-1), XI.mean(-1).astype(np.float32))    # ints average to float32
    check((Tensor(XI) > 0).sum(1), (XI > 0).sum(1))       # bool counts are int64 too


def test_reduction_axis_errors():
    with pytest.raises(sl.AlgorithmError, match="axis 3"):
        Tensor(X).sum(3)
    with pytest.raises(sl.AlgorithmError, match="repeated"):
        Tensor(X).sum((1, -2))


def test_matmul_2d_and_vectors():
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 11)).astype(np.float32)
    v = rng.standard_normal(7).astype(np.float32)
    check(Tensor(a) @ Tensor(b), a @ b, rtol=1e-4)
    check(F.matmul(Tensor(a), Tensor(v)), a @ v, rtol=1e-4)
    check(Tensor(v) @ Tensor(b), v @ b, rtol=1e-4)
    check(Tensor(v) @ Tensor(v), np.asarray(v @ v), rtol=1e-4)
    check(Tensor(b).T @ Tensor(a).T, b.T @ a.T, rtol=1e-4)


def test_matmul_batched_broadcast():
    a = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
    b = rng.standard_normal((5, 4, 6)).astype(np.float32)
    check(Tensor(a) @ Tensor(b), a @ b, rtol=1e-4, atol=1e-5)
    ai = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    check(Tensor(ai) @ Tensor(ai.T.copy()), ai @ ai.T)


def test_matmul_shape_errors_name_the_shapes():
    with pytest.raises(sl.AlgorithmError, match=r"\(5, 7\) and \(6, 2\)"):
        Tensor(np.zeros((5, 7), np.float32)) @ Tensor(np.zeros((6, 2), np.float32))
    with pytest.raises(sl.AlgorithmError, match=r"\(2, 3, 4\).*\(5, 4, 6\)"):
        Tensor(np.zeros((2, 3, 4), np.float32)) @ Tensor(np.zeros((5, 4, 6), np.float32))


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_log_softmax(axis):
    check(Tensor(X).softmax(axis), np_softmax(X, axis), atol=1e-6)
    ref = X - X.max(axis, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(axis, keepdims=True))
    check(F.log_softmax(Tensor(X), axis), ref, atol=1e-5)


def np_layernorm(x, w=None, b=None, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(np.float32)


def test_layernorm():
    w = rng.standard_normal(9).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    check(Tensor(X).layernorm(), np_layernorm(X), atol=1e-5)
    check(F.layernorm(Tensor(X), Tensor(w), Tensor(b)), np_layernorm(X, w, b), atol=1e-5)
    check(Tensor(X).layernorm(eps=0.5), np_layernorm(X, eps=0.5), atol=1e-5)
    with pytest.raises(sl.AlgorithmError, match="weight"):
        Tensor(X).layernorm(Tensor(np.ones(4, np.float32)))


def np_conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d written out in numpy (float64 accumulation)."""
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    Ho = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    Wo = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    out = np.zeros((N, O, Ho, Wo))
    Og = O // groups
    for o in range(O):
        g = o // Og
        for kh in range(KH):
            for kw in range(KW):
                patch = xp[:, g * Cg:(g + 1) * Cg, kh * dh:kh * dh + sh * (Ho - 1) + 1:sh,
                           kw * dw:kw * dw + sw * (Wo - 1) + 1:sw]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, kh, kw])
    if bias is not None:
        out += bias[None, :, None, None]
    return out.astype(np.float32)


@pytest.mark.parametrize("kw", [dict(), dict(padding=1), dict(stride=2, padding=1),
                                dict(dilation=2, padding=(2, 1)), dict(groups=2, padding=1),
                                dict(stride=(1, 2), groups=4)])
def test_conv2d(kw):
    x = rng.standard_normal((2, 4, 7, 8)).astype(np.float32)
    groups = kw.get("groups", 1)
    w = rng.standard_normal((4, 4 // groups, 3, 3)).astype(np.float32)
    check(F.conv2d(Tensor(x), Tensor(w), **kw), np_conv2d(x, w, **kw), rtol=1e-4, atol=1e-4)


def test_conv2d_bias_method_and_errors():
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    check(Tensor(x).conv2d(Tensor(w), Tensor(b)), np_conv2d(x, w, b), rtol=1e-4, atol=1e-5)
    with pytest.raises(sl.AlgorithmError, match=r"\(1, 2, 5, 5\).*\(3, 4, 1, 1\)"):
        F.conv2d(Tensor(x), Tensor(np.zeros((3, 4, 1, 1), np.float32)))


def np_pool(x, k, s, p, kind):
    """torch max_pool2d (pad -inf) / avg_pool2d (count_include_pad=True) in numpy."""
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    Ho = (x.shape[2] + 2 * p - k) // s + 1
    Wo = (x.shape[3] + 2 * p - k) // s + 1
    wins = np.stack([xp[:, :, i:i + s * (Ho - 1) + 1:s, j:j + s * (Wo - 1) + 1:s]
                     for i in range(k) for j in range(k)])
    return (wins.max(0) if kind == "max" else wins.mean(0)).astype(x.dtype)


@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1), (3, 1, 1)])
def test_pools(k, s, p):
    x = rng.standard_normal((1, 2, 7, 6)).astype(np.float32)
    check(F.max_pool2d(Tensor(x), k, s, p), np_pool(x, k, s or k, p, "max"))
    check(Tensor(x).avg_pool2d(k, stride=s, padding=p), np_pool(x, k, s or k, p, "avg"),
          atol=1e-6)


def test_max_pool_int_and_padding_error():
    x = rng.integers(-9, 9, (1, 1, 4, 4)).astype(np.int32)
    check(Tensor(x).max_pool2d(3, 1, 1), np_pool(x, 3, 1, 1, "max"))
    with pytest.raises(sl.AlgorithmError, match="padding"):
        Tensor(x).max_pool2d(2, padding=2)
