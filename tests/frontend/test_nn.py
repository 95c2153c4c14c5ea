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
    check(Tensor(XI).mean(-1), XI.mean(-1))    # ints average to float64, as numpy
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


# ---------------------------------------------------------------------- conformance fixes

def test_mean_of_small_ints_does_not_wrap():
    u8 = np.array([[200, 100, 250]], np.uint8)
    check(Tensor(u8).mean(1), u8.mean(1))
    big = np.full(1000, 2**30, np.int32)
    check(Tensor(big).mean(), big.mean())
    for huge in (np.full(4, 2**62, np.int64), np.full(2, 2**63, np.uint64)):
        check(Tensor(huge).mean(), huge.mean())           # a 64-bit sum would wrap


def test_half_precision_sums_accumulate_in_float32():
    h = np.full(4096, 0.1, np.float16)
    ref = np.float16(h.astype(np.float32).sum())
    check(Tensor(h).sum(), ref, rtol=1e-3)              # a float16 accumulator stalls at 256
    check(Tensor(h).mean(), np.float16(h.astype(np.float32).mean()), rtol=1e-3)


def test_max_min_with_a_tensor_are_elementwise_as_torch():
    y = X[::-1].copy()
    check(F.max(Tensor(X), Tensor(y)), np.maximum(X, y))
    check(Tensor(X).min(Tensor(y)), np.minimum(X, y))


def test_matmul_int64_with_float32_promotes_as_numpy():
    n = np.arange(6).reshape(2, 3)
    m = rng.standard_normal((3, 4)).astype(np.float32)
    check(Tensor(n) @ Tensor(m), n @ m, rtol=1e-6)


def test_matmul_of_bools_is_bool_as_numpy():
    # numpy's bool @ bool is the or of ands (a bool), not a count of true pairs
    a = rng.random((4, 7)) < 0.3
    b = rng.random((7, 5)) < 0.3
    check(Tensor(a) @ Tensor(b), a @ b)
    check(Tensor(a[0]) @ Tensor(b[:, 0]), a[0] @ b[:, 0])
    check(Tensor(a) @ Tensor(b.astype(np.int32)), a @ b.astype(np.int32))   # int stays a count


def test_conv2d_of_bools_is_bool_as_matmul():
    # the or of ands, as numpy's bool matmul, not a count of true pairs
    x = rng.random((2, 3, 6, 5)) < 0.3
    w = rng.random((4, 3, 2, 2)) < 0.3
    ref = np_conv2d(x, w, padding=1) > 0
    check(F.conv2d(Tensor(x), Tensor(w), padding=1), ref)
    bias = np.array([1, 2, 3, 4], np.int32)       # bool + int32 bias is int32, as numpy's
    check(F.conv2d(Tensor(x), Tensor(w), bias, padding=1),
          ref + bias[:, None, None])


@pytest.mark.parametrize("bias_dtype, result_dtype", [
    (np.float16, np.float16), (np.int8, np.float16), (np.float32, np.float32),
    (np.float64, np.float64)])
def test_half_precision_conv2d_promotes_with_its_bias_as_conv_plus_bias(bias_dtype,
                                                                        result_dtype):
    x = rng.random((1, 2, 4, 4)).astype(np.float16)
    w = rng.random((3, 2, 3, 3)).astype(np.float16)
    bias = (np.arange(3) + 0.1).astype(bias_dtype)
    ref = (np_conv2d(x, w).astype(np.float64) + bias[:, None, None]).astype(result_dtype)
    check(F.conv2d(Tensor(x), Tensor(w), bias=bias), ref, rtol=1e-3, atol=1e-3)
    # bfloat16 likewise: a float32 bias gives a float32 result
    xb = Tensor(x.astype(np.float32)).cast(sl.bfloat16)
    wb = Tensor(w.astype(np.float32)).cast(sl.bfloat16)
    assert F.conv2d(xb, wb, bias=np.ones(3, np.float32)).dtype == sl.float32


def test_conv2d_unbatched_input_and_groups_type():
    x = rng.standard_normal((2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    check(F.conv2d(Tensor(x), Tensor(w), padding=1), np_conv2d(x[None], w, None, 1, 1)[0],
          rtol=1e-4, atol=1e-5)
    xin, win = Tensor.input("x", (2, 5, 5)), Tensor.input("w", (3, 2, 3, 3))
    out = sl.compile(F.conv2d(xin, win))(x=x, w=w)
    np.testing.assert_allclose(out, np_conv2d(x[None], w)[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(sl.AlgorithmError, match="conv2d: groups"):
        F.conv2d(Tensor(x[None]), Tensor(w), groups=1.0)


def torch_pool_reference(x, k, s, p, d=1, ceil_mode=False, kind="max",
                         count_include_pad=True, divisor=None):
    """torch.nn.functional.max_pool2d / avg_pool2d written out with loops (float64)."""
    H, W = x.shape[-2:]

    def extent(n):
        out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        return out - 1 if ceil_mode and (out - 1) * s >= n + p else out
    Ho, Wo = extent(H), extent(W)
    out = np.zeros(x.shape[:-2] + (Ho, Wo))
    for i in range(Ho):
        for j in range(Wo):
            hs, ws = i * s - p, j * s - p
            rows = [hs + d * a for a in range(k) if 0 <= hs + d * a < H]
            cols = [ws + d * b for b in range(k) if 0 <= ws + d * b < W]
            win = x[..., rows, :][..., cols].astype(np.float64)
            if kind == "max":
                out[..., i, j] = win.max((-2, -1))
                continue
            if divisor is not None:
                n = divisor
            elif count_include_pad:
                n = (min(hs + k, H + p) - hs) * (min(ws + k, W + p) - ws)
            else:
                n = len(rows) * len(cols)
            out[..., i, j] = win.sum((-2, -1)) / n
    return out.astype(x.dtype)


@pytest.mark.parametrize("k,s,p,d,ceil_mode", [(3, 2, 1, 2, False), (2, 2, 0, 1, True),
                                               (3, 2, 1, 1, True), (2, 1, 1, 3, True)])
def test_max_pool2d_dilation_and_ceil_mode(k, s, p, d, ceil_mode):
    x = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    check(F.max_pool2d(Tensor(x), k, s, p, dilation=d, ceil_mode=ceil_mode),
          torch_pool_reference(x, k, s, p, d, ceil_mode))


@pytest.mark.parametrize("k,s,p,ceil_mode,include,divisor", [
    (3, 2, 1, False, False, None), (3, 2, 1, True, True, None), (3, 2, 1, True, False, None),
    (2, 2, 0, True, True, None), (3, 1, 1, False, True, 4)])
def test_avg_pool2d_torch_options(k, s, p, ceil_mode, include, divisor):
    x = rng.standard_normal((2, 7, 8)).astype(np.float32)
    ref = torch_pool_reference(x, k, s, p, 1, ceil_mode, "avg", include, divisor)
    check(Tensor(x).avg_pool2d(k, s, p, ceil_mode=ceil_mode, count_include_pad=include,
                               divisor_override=divisor), ref, atol=1e-6)


def test_pool_options_against_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((1, 2, 9, 7)).astype(np.float32)
    t = torch.from_numpy(x)
    check(F.max_pool2d(Tensor(x), 3, 2, 1, 2, True),
          torch.nn.functional.max_pool2d(t, 3, 2, 1, 2, True).numpy())
    check(F.avg_pool2d(Tensor(x), 3, 2, 1, True, False),
          torch.nn.functional.avg_pool2d(t, 3, 2, 1, True, False).numpy(), atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32])
def test_avg_pool2d_of_integers_sums_in_64_bits_as_mean(dtype):
    # values near the type's maximum: each window's sum is past it
    top = int(np.iinfo(dtype).max)
    x = rng.integers(top // 2, top, (1, 2, 5, 6), endpoint=True).astype(dtype)
    wide = x.astype(np.float64)
    check(F.avg_pool2d(Tensor(x), 2), torch_pool_reference(wide, 2, 2, 0, kind="avg"),
          rtol=1e-12)
    check(F.avg_pool2d(Tensor(x), 3, 2, 1, ceil_mode=True, count_include_pad=False),
          torch_pool_reference(wide, 3, 2, 1, 1, True, "avg", False), rtol=1e-12)


def test_pool_zero_kernel_or_stride_is_an_error():
    x = Tensor(np.zeros((1, 1, 4, 4), np.float32))
    with pytest.raises(sl.AlgorithmError, match="avg_pool2d.*kernel_size"):
        F.avg_pool2d(x, 0)
    with pytest.raises(sl.AlgorithmError, match="max_pool2d.*stride"):
        F.max_pool2d(x, 2, stride=0)
    with pytest.raises(sl.AlgorithmError, match="divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)


def test_layer_norm_takes_torchs_normalized_shape():
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w, b = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal(8)

    def ref(a, axes, eps=1e-5):
        mu = a.mean(axes, keepdims=True)
        return (a - mu) / np.sqrt(((a - mu) ** 2).mean(axes, keepdims=True) + eps)
    check(F.layer_norm(Tensor(x), (8,)), ref(x, -1), rtol=1e-4, atol=1e-5)
    check(F.layer_norm(Tensor(x), 8, None, Tensor(b.astype(np.float32))),
          ref(x, -1) + b.astype(np.float32), rtol=1e-4, atol=1e-5)
    check(Tensor(x).layer_norm((3, 8), Tensor(w)), ref(x, (1, 2)) * w, rtol=1e-4, atol=1e-5)
    check(F.layer_norm(Tensor(x), Tensor(w[0])), ref(x, -1) * w[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(sl.AlgorithmError, match="layer_norm.*normalized_shape"):
        F.layer_norm(Tensor(x), (4,))


def test_max_min_reductions_and_max_pool_keep_a_nan():
    # numpy's max / min and torch's max_pool2d return NaN where a NaN was read
    a = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7) - 40
    a[0, 0, 0] = a[1, 2, 3] = a[2, 4, 6] = np.nan
    for axis in (None, 0, 1, 2, (1, 2)):
        check(Tensor(a).max(axis=axis), a.max(axis=axis))
        check(Tensor(a).min(axis=axis, keepdims=True), a.min(axis=axis, keepdims=True))
    img = np.arange(1 * 2 * 6 * 6, dtype=np.float32).reshape(1, 2, 6, 6)
    img[0, 0, 1, 1] = img[0, 1, 5, 4] = np.nan
    got = F.max_pool2d(Tensor(img), 2).numpy()
    want = img.reshape(1, 2, 3, 2, 3, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[0, 0, 0, 0]) and np.isnan(got[0, 1, 2, 2])


def test_matmul_of_length_one_vectors_and_of_an_empty_inner_dimension():
    a, b = np.array([2.0], np.float32), np.array([3.0], np.float32)
    check(Tensor(a) @ Tensor(b), np.asarray(a @ b))                    # 0-d 6.0, as numpy
    kern = sl.compile(Tensor.input("a", (1,)) @ Tensor.input("b", (1,)))
    np.testing.assert_allclose(kern(a=a, b=b), 6.0)
    z = Tensor(np.ones((2, 0), np.float32)) @ Tensor(np.ones((0, 3), np.float32))
    check(z, np.zeros((2, 3), np.float32))


def test_half_precision_products_accumulate_in_float32_and_round_once():
    a, b = np.ones((1, 4096), np.float16), np.ones((4096, 1), np.float16)
    check(Tensor(a) @ Tensor(b), np.array([[4096]], np.float16))        # float16 stalls at 2048
    x, w = np.ones((1, 512, 3, 3), np.float16), np.ones((1, 512, 3, 3), np.float16)
    check(F.conv2d(Tensor(x), Tensor(w), bias=np.array([0.5], np.float16)),
          np.full((1, 1, 1, 1), 4608.5, np.float16).astype(np.float16), rtol=1e-3)
    check(F.avg_pool2d(Tensor(np.ones((1, 1, 64, 64), np.float16)), 64),
          np.ones((1, 1, 1, 1), np.float16))
    p = rng.random((8, 16)).astype(np.float16)
    q = rng.random((16, 5)).astype(np.float16)
    ref = (p.astype(np.float32) @ q.astype(np.float32)).astype(np.float16)
    check(Tensor(p) @ Tensor(q), ref, rtol=0, atol=0)


def test_long_float32_sums_and_means_do_not_drift():
    x = np.full(1 << 22, 0.1, np.float32)
    exact = x.astype(np.float64).sum()
    check(F.sum(Tensor(x)), np.float32(exact), rtol=1e-7)       # one accumulator: 4% low
    check(F.mean(Tensor(x[: 1 << 20])), np.float32(0.1), rtol=1e-7)
    y = np.full((2, 1 << 21), 0.1, np.float32)
    check(F.sum(Tensor(y), axis=1), np.float32(y.astype(np.float64).sum(1)), rtol=1e-7)


@pytest.mark.parametrize("shape", [(300, 1000), (37, 53), (5, 16), (1000, 7)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_of_every_shape_against_numpy(shape, op, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    check(getattr(F, op)(Tensor(x), axis), getattr(x, op)(axis), rtol=1e-5, atol=1e-4)


def test_row_reductions_use_vector_partials_and_column_reductions_vector_results():
    # a row reduction: 64 partial results (rfactor) in vectors; a column reduction: the
    # kept dimension in vectors with the reduction outside it
    rows = sl.compile(Tensor.input("x", (64, 1024)).max(1))
    assert "_intm" in rows.loop_ir and "ramp(" in rows.loop_ir, rows.loop_ir
    cols = sl.compile(Tensor.input("x", (64, 1024)).sum(0))
    assert "_intm" not in cols.loop_ir and "x16(" in cols.loop_ir, cols.loop_ir
    assert "double" not in cols.source     # a column sum keeps float32 accumulators, as numpy
    row_sums = sl.compile(Tensor.input("x", (64, 2048)).sum(1))
    assert "x double>" in row_sums.source   # long row sums accumulate in float64 vectors
    # up to 1024 values, the 64 partials' tree drifts no more than numpy's pairwise sum
    short_sums = sl.compile(Tensor.input("x", (64, 1024)).sum(1))
    assert "double" not in short_sums.source


def _gelu_tanh(a):
    a = a.astype(np.float64)
    return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))


def test_torch_keyword_names_and_options():
    """torch's spellings: ``input=`` / ``weight=``, ``gelu(approximate=...)``,
    ``softmax(dtype=...)``, ``max_pool2d(return_indices=False)``."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(F.conv2d(input=Tensor(x), weight=w, padding=1).numpy(),
                               F.conv2d(Tensor(x), w, padding=1).numpy())
    np.testing.assert_array_equal(F.relu(input=Tensor(x)).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(F.softmax(input=Tensor(x), dim=1).numpy(),
                               F.softmax(Tensor(x), 1).numpy())
    got = F.softmax(Tensor(x), dim=-1, dtype=sl.float64).numpy()
    assert got.dtype == np.float64
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-12)
    assert F.log_softmax(Tensor(x), -1, dtype=sl.float64).numpy().dtype == np.float64
    g = rng.standard_normal(500).astype(np.float32) * 4
    np.testing.assert_allclose(Tensor(g).gelu(approximate="tanh").numpy(), _gelu_tanh(g),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(F.gelu(Tensor(g), approximate="none").numpy(),
                                  F.gelu(Tensor(g)).numpy())
    assert F.max_pool2d(Tensor(x), 2, return_indices=False).numpy().shape == (1, 3, 4, 4)


@pytest.mark.parametrize("call, message", [
    (lambda x: F.conv2d(x, np.ones((4, 3, 0, 3), np.float32)),
     "conv2d: the kernel of w (shape (4, 3, 0, 3)) is 0x3; its height and width must be >= 1"),
    (lambda x: F.max_pool2d(x, 2, return_indices=True),
     "max_pool2d: return_indices=True is not supported"),
    (lambda x: F.gelu(x, approximate="fast"), "gelu: approximate must be 'none' or 'tanh'"),
])
def test_torch_options_out_of_reach_are_refused_by_name(call, message):
    x = Tensor(np.ones((1, 3, 8, 8), np.float32))
    with pytest.raises(sl.AlgorithmError) as info:
        call(x)
    assert message in str(info.value)


@pytest.mark.parametrize("n", [256, 1000, 1024])
def test_short_float32_row_sums_drift_no_more_than_numpys_pairwise_sums(n):
    # summed in float32 (64 partials, then a tree): the error relative to sum(|x|) stays
    # within twice numpy's own, and far inside one float32 rounding of the total
    rng = np.random.default_rng(n)
    a = (rng.standard_normal((256, n)) * 100 + 3).astype(np.float32)
    kern = sl.compile(Tensor.input("x", a.shape).sum(-1))
    exact = a.astype(np.float64).sum(-1)
    scale = np.abs(a).astype(np.float64).sum(-1)
    ours = np.max(np.abs(kern(x=a) - exact) / scale)
    numpy_err = np.max(np.abs(a.sum(-1) - exact) / scale)
    assert ours <= 2 * numpy_err + 1e-9 and ours < 2 ** -23, (ours, numpy_err)
