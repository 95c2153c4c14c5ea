"""Winograd convolution F(m x m, 3 x 3): the transforms, the Funcs and their schedule, the
frontend's choice of it for conv2d, and the bench's conv workload."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor
from schedlang.frontend.winograd import (ROW_FILTER_TILE_BYTES, TRANSFORMS, find_winograd,
                                         schedule_winograd, winograd_conv3x3, winograd_tile)


def conv_reference(x, w, pad):
    """NCHW cross-correlation in float64 with symmetric zero padding ``pad``."""
    n, c, h, wd = x.shape
    k = w.shape[0]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - 2, wd + 2 * pad - 2
    out = np.zeros((n, k, ho, wo))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
    return out


@pytest.mark.parametrize("m", sorted(TRANSFORMS))
def test_transform_matrices_compute_a_tile_of_the_correlation(m):
    bt, g, at = (np.array(t, dtype=np.float64) for t in TRANSFORMS[m])
    rng = np.random.default_rng(m)
    d = rng.standard_normal((m + 2, m + 2))
    k = rng.standard_normal((3, 3))
    tile = at @ ((g @ k @ g.T) * (bt @ d @ bt.T)) @ at.T
    direct = np.array([[np.sum(d[y:y + 3, x:x + 3] * k) for x in range(m)] for y in range(m)])
    np.testing.assert_allclose(tile, direct, rtol=1e-12, atol=1e-12)


def build(shape, pad, m):
    n, c, h, w, k = shape
    ho, wo = h + 2 * pad - 2, w + 2 * pad - 2
    X = sl.Input("X", sl.float32, (n, c, h, w))
    W = sl.Input("W", sl.float32, (k, c, 3, 3))
    conv = winograd_conv3x3(
        lambda n_, c_, y, x: sl.constant_exterior(X, 0.0)[n_, c_, y - pad, x - pad],
        lambda k_, c_, i, j: W[k_, c_, i, j], (n, c, ho, wo, k), m=m)
    return conv


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("shape,pad", [((1, 16, 14, 14, 16), 1),     # whole tiles
                                       ((2, 16, 15, 17, 32), 1),     # partial last tiles
                                       ((1, 32, 13, 30, 16), 0)])    # no padding
def test_scheduled_winograd_matches_the_direct_sum(m, shape, pad):
    conv = build(shape, pad, m)
    s = sl.Schedule(conv.out)
    assert set(schedule_winograd(s, conv)) >= {conv.out, conv.prod, conv.tiles}
    kern = sl.compile(conv.out, s)
    rng = np.random.default_rng(1)
    n, c, h, w, k = shape
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, 3, 3), dtype=np.float32)
    ref = conv_reference(x, wt, pad)
    got = kern(X=x, W=wt)
    assert got.shape == ref.shape
    # F(2x2) rounds like the direct sum; F(4x4) about ten times more
    tol = (2e-6 if m == 2 else 2e-5) * np.abs(ref).max()
    assert np.abs(got - ref).max() <= tol


@pytest.mark.parametrize("m,shape", [(2, (1, 96, 14, 14, 96)),     # 3 blocks of 32
                                     (4, (2, 64, 11, 13, 64)),     # batch, partial tiles
                                     (4, (1, 96, 9, 9, 48))])      # blocks of 16
def test_large_filter_tiles_are_computed_per_block_of_output_channels(m, shape):
    # filter tiles past ROW_FILTER_TILE_BYTES: computed per block of output channels (the
    # outermost, parallel loop), with the products of every tile of the image
    conv = build(shape, 1, m)
    n, c, h, w, k = shape
    assert (m + 2) ** 2 * c * k * 4 > ROW_FILTER_TILE_BYTES
    s = sl.Schedule(conv.out)
    schedule_winograd(s, conv)
    text = str(s)
    for g in (conv.w_t, conv.u, conv.prod):
        assert f"s[{g.name}].compute_at({conv.out.name}, 'k.block')" in text, text
    assert f"s[{conv.v.name}].compute_root()" in text
    kern = sl.compile(conv.out, s)
    assert kern.loop_ir.lstrip().count("parallel for") >= 2
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, 3, 3), dtype=np.float32)
    ref = conv_reference(x, wt, 1)
    tol = (2e-6 if m == 2 else 2e-5) * np.abs(ref).max()
    assert np.abs(kern(X=x, W=wt) - ref).max() <= tol


def test_unscheduled_winograd_funcs_also_compute_the_conv():
    conv = build((1, 16, 9, 10, 16), 1, 2)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 9, 10), dtype=np.float32)
    wt = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    got = sl.compile(conv.out, sl.Schedule(conv.out))(X=x, W=wt)
    np.testing.assert_allclose(got, conv_reference(x, wt, 1), rtol=1e-4, atol=1e-4)


def test_schedule_unrolls_positions_into_constant_transforms():
    conv = build((1, 16, 16, 16, 32), 1, 4)
    s = sl.Schedule(conv.out)
    schedule_winograd(s, conv)
    ir = sl.lower(conv.out, s)
    text = str(ir)
    # no select of a position survives: every position's transform is its own expression
    stores = [ln for ln in text.splitlines()
              if ln.strip().startswith(("conv_input_tiles[", "conv_filter_tiles[", "conv_tiles"))]
    assert len(stores) >= 36 and not any("select" in ln for ln in stores)
    assert "parallel for conv.s0.y.tile" in text
    assert "conv_products" in text and "conv_input_tiles" in text


def test_find_winograd_recovers_the_funcs_and_rejects_other_funcs():
    conv = build((1, 16, 14, 14, 16), 1, 4)
    found = find_winograd(conv.out)
    assert found is not None and found.m == 4 and found.shape == (1, 16, 14, 14, 16)
    assert found.prod is conv.prod and found.x_t is conv.x_t
    A = sl.Input("A", sl.float32, (4, 4))
    i, j = sl.vars("i j")
    f = sl.Func("conv", shape=(4, 4))
    f[i, j] = A[i, j] * 2.0
    assert find_winograd(f) is None
    assert find_winograd(A) is None


def test_winograd_tile_choice():
    assert winograd_tile(64, 64, 56, 56) == 2                   # accurate by default
    assert winograd_tile(64, 64, 56, 56, accurate=False) == 4
    assert winograd_tile(256, 256, 14, 14, accurate=False) == 2  # rounding past 128 channels
    assert winograd_tile(128, 256, 28, 28, accurate=False) == 4  # blocked over outputs
    assert winograd_tile(64, 64, 7, 7) is None                  # small image: direct
    assert winograd_tile(3, 64, 56, 56) is None                 # channels not in vectors
    assert winograd_tile(64, 24, 56, 56) is None


def _loop_ir(y):
    return sl.lower(*_output_and_schedule(y))


def _output_and_schedule(y):
    from schedlang.frontend.tensor import default_schedule
    out = y.func if y.func is not None else None
    assert out is not None
    return out, default_schedule(y, out)


@pytest.mark.parametrize("pad,bias,relu", [(1, False, False), (1, True, True),
                                           ((2, 1), True, False), ("same", False, True)])
def test_frontend_conv2d_takes_the_winograd_form(pad, bias, relu):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 15, 17), dtype=np.float32)
    w = rng.standard_normal((32, 16, 3, 3), dtype=np.float32)
    b = rng.standard_normal(32, dtype=np.float32) if bias else None
    X, W = Tensor.input("x", x.shape), Tensor.input("w", w.shape)
    y = F.conv2d(X, W, None if b is None else Tensor(b), padding=pad)
    y = y.relu() if relu else y
    kern = sl.compile(y)
    assert "conv2d_winograd" in kern.loop_ir
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                     None if b is None else torch.from_numpy(b), padding=pad)
    ref = (ref.relu() if relu else ref).numpy()
    got = kern(x=x, w=w)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("x_shape,w_shape,kw", [
    ((1, 3, 16, 16), (16, 3, 3, 3), dict(padding=1)),             # 3 input channels
    ((1, 16, 16, 16), (16, 16, 3, 3), dict(padding=1, stride=2)),
    ((1, 16, 7, 7), (16, 16, 3, 3), dict(padding=1)),             # a small image
    ((1, 16, 16, 16), (16, 8, 3, 3), dict(padding=1, groups=2)),
    ((1, 16, 18, 18), (16, 16, 3, 3), dict(dilation=2)),
])
def test_frontend_conv2d_keeps_the_direct_sum_where_winograd_does_not_apply(
        x_shape, w_shape, kw):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    y = F.conv2d(Tensor.input("x", x_shape), Tensor.input("w", w_shape), **kw)
    kern = sl.compile(y)
    assert "winograd" not in kern.loop_ir
    eager = F.conv2d(Tensor(x), Tensor(w), **kw).numpy()
    np.testing.assert_allclose(kern(x=x, w=w), eager, rtol=1e-5, atol=1e-5)


def test_eager_winograd_conv_is_cached_by_structure():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    F.clear_cache()
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((1, 16, 14, 14), dtype=np.float32)
        y = F.conv2d(Tensor(x), Tensor(w), padding=1)
        got = (y + 1).numpy() - 1
        np.testing.assert_allclose(got, conv_reference(x, w, 1), rtol=1e-4,
                                   atol=1e-5 * np.abs(got).max())
        # its transform Funcs are built for the first graph only: the second one's kernel
        # comes from the cache, so they are never made (30 ms at 64 channels)
        assert (y.func.definitions == []) == (seed == 1)


def test_a_deferred_conv_is_built_when_its_graph_is_scheduled_or_compiled():
    x, w = Tensor.input("x", (1, 16, 14, 14)), Tensor.input("w", (16, 16, 3, 3))
    y = F.conv2d(x, w, padding=1)
    z = (y * 2).sum(axis=1)           # a stored consumer reads the conv before it is built
    assert not y.func.definitions
    s = sl.Schedule(z)
    assert y.func.definitions and find_winograd(y.func) is not None
    assert s[y].func is y.func
    rng = np.random.default_rng(6)
    a = rng.standard_normal((1, 16, 14, 14), dtype=np.float32)
    b = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    ref = (conv_reference(a, b, 1) * 2).sum(axis=1)
    np.testing.assert_allclose(sl.compile(z)(x=a, w=b), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_bench_conv_workload_runs_in_the_winograd_form():
    from schedlang.bench.workloads import Conv
    w = Conv((1, 16, 28, 28, 16))
    out, s = w.algorithm()
    conv = find_winograd(out)
    assert conv is not None and conv.m == 4
    vals = w.inputs()
    got = sl.compile(out, s)(**vals)
    assert np.abs(got - w.numpy(**vals)).max() <= w.tolerance()
    # the direct forms stay for stride 2 and for too few channels
    assert find_winograd(Conv((1, 16, 28, 28, 16), stride=2).algorithm()[0]) is None
    assert find_winograd(Conv((1, 8, 28, 28, 8)).algorithm()[0]) is None


@pytest.mark.parametrize("x_dtype,np_dtype", [(sl.float16, np.float16), (sl.int8, np.int8)])
def test_a_conv_of_mixed_operands_with_float32_products_takes_the_winograd_form(x_dtype, np_dtype):
    # a float16 or int8 image with float32 weights: each product is float32 anyway, so the
    # image is converted first and the conv runs in its fast form, with the same values
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((1, 16, 14, 14)) * 3).astype(np_dtype)
    b = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    y = F.conv2d(Tensor.input("x", a.shape, x_dtype), Tensor.input("w", b.shape), padding=1)
    kern = sl.compile(y)
    assert y.dtype == sl.float32 and "conv2d_winograd" in kern.loop_ir
    ref = conv_reference(a.astype(np.float32), b, 1)
    np.testing.assert_allclose(kern(x=a, w=b), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    eager = F.conv2d(Tensor(a), Tensor(b), padding=1).numpy()
    np.testing.assert_allclose(eager, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
