"""The eager path (.numpy), sl.compile(tensor) with named inputs, the kernel cache, the
default schedule and the method / function pairing of the tensor frontend."""
import re

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor
from schedlang.frontend.tensor import topo_order
from schedlang.targets.host_cpu import vector_lanes, vector_registers

from .conftest import check

rng = np.random.default_rng(2)


def test_eager_matmul_softmax():
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 12)).astype(np.float32)
    y = (Tensor(a) @ Tensor(b)).softmax(-1).numpy()
    ab = a @ b
    e = np.exp(ab - ab.max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_compile_with_named_inputs():
    x = Tensor.input("x", (1, 3, 8, 8))
    w = Tensor.input("w", (4, 3, 3, 3))
    y = F.conv2d(x, w, padding=1).relu()
    kern = sl.compile(y)
    xa = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    wa = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = kern(x=xa, w=wa)
    from .test_nn import np_conv2d
    np.testing.assert_allclose(out, np.maximum(np_conv2d(xa, wa, padding=1), 0), rtol=1e-4,
                               atol=1e-4)
    assert {i.name for i in kern.inputs} == {"x", "w"}


def test_compile_with_an_explicit_schedule():
    x = Tensor.input("x", (16, 32))
    y = (x * 2).sum(-1)
    xa = rng.standard_normal((16, 32)).astype(np.float32)
    # an unscheduled Schedule of the Tensor, scheduled by hand
    s = sl.Schedule(y)
    f = s.outputs[0]
    assert f is y.pipeline()[0]
    s[f].split(f.args[0], 4, names=("io", "ii"))
    s[f].parallel("io")
    kern = sl.compile(y, s)
    assert "parallel for" in kern.loop_ir
    np.testing.assert_allclose(kern(x=xa), (xa * 2).sum(-1), rtol=1e-5, atol=1e-5)
    # the default schedule, as a copy to change
    f, s = y.pipeline()
    before = str(y.pipeline()[1])
    s[f].parallel(s[f].loop_names()[0])
    assert str(y.pipeline()[1]) == before       # the Tensor's own default is untouched
    np.testing.assert_allclose(sl.compile(y, s)(x=xa), (xa * 2).sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sl.compile(f, s)(x=xa), (xa * 2).sum(-1), rtol=1e-5, atol=1e-5)


def test_input_without_data_cannot_run_eagerly():
    with pytest.raises(sl.AlgorithmError, match="sl.compile"):
        (Tensor.input("q", (4,)) + 1).numpy()


def test_kernel_cache_reuses_structurally_equal_graphs():
    F.clear_cache()
    a1, b1 = rng.standard_normal((4, 9)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    a2, b2 = rng.standard_normal((4, 9)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    check((Tensor(a1) + Tensor(b1)).relu(), np.maximum(a1 + b1, 0))
    assert F.cache_info()["compiles"] == 1
    check((Tensor(a2) + Tensor(b2)).relu(), np.maximum(a2 + b2, 0))   # new values, same graph
    assert F.cache_info() == {"compiles": 1, "hits": 1, "size": 1}
    check((Tensor(a2) + Tensor(a2[:, :1])).relu(), np.maximum(a2 + a2[:, :1], 0))  # new shapes
    assert F.cache_info()["compiles"] == 2
    x = Tensor(a1)
    check(x + x, a1 + a1)                           # sharing is part of the key
    check(Tensor(a1) + Tensor(a2), a1 + a2)
    check((Tensor(a1) + 1).relu(), np.maximum(a1 + 1, 0))
    check((Tensor(a1) + 2).relu(), np.maximum(a1 + 2, 0))   # scalars are part of the key
    assert F.cache_info()["compiles"] == 6


def test_the_eager_cache_is_bounded_and_old_kernels_give_back_their_output_buffers(
        monkeypatch):
    from schedlang.frontend import tensor as tensor_module
    monkeypatch.setattr(tensor_module, "MAX_EAGER_KERNELS", 6)
    F.clear_cache()
    n = 1 << 18      # 1 MiB of float32: a kernel keeps such an output for its next call
    for extra in range(9):
        a = np.ones(n + extra, np.float32)
        np.testing.assert_array_equal((Tensor(a) * 2).numpy(), a * 2)
    entries = list(tensor_module.KERNEL_CACHE.values())
    assert F.cache_info() == {"compiles": 9, "hits": 0, "size": 6}
    holding = [bool(e.kernel._spares) for e in entries]     # least recently used first
    assert holding == [False, False, True, True, True, True], holding
    a = np.ones(n + 3, np.float32)              # a hit moves its kernel to the recent end
    (Tensor(a) * 2).numpy()
    assert F.cache_info()["hits"] == 1
    # the kernel of extra=5 fell out of the four most recent; extra=3's keeps its new output
    assert [bool(e.kernel._spares) for e in tensor_module.KERNEL_CACHE.values()] == \
        [False, False, True, True, True, True]
    assert tensor_module.KERNEL_CACHE[next(reversed(tensor_module.KERNEL_CACHE))] is entries[0]
    F.clear_cache()


def test_default_schedule_parallel_and_vectorized():
    # 32 x 32 x 40 is past PARALLEL_WORK; an 8 x 8 product is not, and takes one thread
    # where its 8 columns are less than one register (AVX-512) and the reduction schedule
    x = Tensor.input("x", (32, 40))
    kern = sl.compile((x @ x.T).relu() + 1)
    ir = kern.loop_ir
    assert "parallel for" in ir and "ramp(" in ir
    xa = rng.standard_normal((32, 40)).astype(np.float32)
    np.testing.assert_allclose(kern(x=xa), np.maximum(xa @ xa.T, 0) + 1, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cols, width", [(40, 16), (16, 16), (15, 8), (8, 8), (7, None)])
def test_default_schedule_vectorizes_by_one_avx512_register_or_half_of_one(cols, width):
    # 16 float32 lanes: exp / sigmoid in 16 lanes took 0.41 -> 0.16 ms on 1M elements
    xa = rng.standard_normal((3, cols)).astype(np.float32)
    kern = sl.compile(Tensor.input("x", xa.shape).sigmoid())
    text = str(kern.schedule)
    if width is None:
        assert "vectorize" not in text, text
    else:
        assert re.search(rf"\.vectorize\('i1', {width}\)", text), text
    np.testing.assert_allclose(kern(x=xa), 1 / (1 + np.exp(-xa)), rtol=1e-6, atol=1e-7)


def test_zero_dim_tensors():
    check(Tensor(np.float32(3.0)) * Tensor(np.arange(4, dtype=np.float32)),
          np.float32(3) * np.arange(4, dtype=np.float32))
    s = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).sum()
    assert s.shape == () and s.item() == 15.0
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(Tensor(x) / Tensor(x).sum(), x / x.sum())


def test_float64_and_uint8_inputs():
    d = rng.standard_normal((3, 5))
    check(Tensor(d).exp().sum(-1), np.exp(d).sum(-1), rtol=1e-12)
    u = np.arange(200, 210, dtype=np.uint8)
    check(Tensor(u) * 2, u * np.uint8(2))


METHOD_AND_FUNCTION = ["relu", "gelu", "sigmoid", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
                       "tanh", "abs", "sum", "max", "min", "mean", "softmax", "log_softmax",
                       "layernorm", "reshape", "permute", "transpose", "expand", "pad",
                       "matmul", "conv2d", "max_pool2d", "avg_pool2d", "cast", "concat",
                       "getitem"]


@pytest.mark.parametrize("name", METHOD_AND_FUNCTION)
def test_every_op_is_a_function_and_a_method(name):
    assert callable(getattr(F, name))
    method = "__getitem__" if name == "getitem" else name
    assert callable(getattr(Tensor, method))


def test_method_and_function_agree():
    x = np.abs(rng.standard_normal((2, 8)).astype(np.float32)) + 0.1
    for name in ["relu", "gelu", "sigmoid", "log", "rsqrt", "softmax", "layernorm"]:
        np.testing.assert_allclose(getattr(Tensor(x), name)().numpy(),
                                   getattr(F, name)(Tensor(x)).numpy())
    assert not hasattr(Tensor, "where")


def test_deep_chains_stay_small():
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = Tensor(a)
    for _ in range(40):
        y = y + y                     # each level reads its operand twice
    np.testing.assert_allclose(y.numpy(), a * np.float32(2.0 ** 40), rtol=1e-6)
    assert any(n.op == "stored" for n in topo_order(y))   # stored in Funcs, not one huge tree


def test_a_chain_of_layernorms_is_stored_every_few_layers():
    # each layer reads the one before three times (mean, variance, normalize): inlined
    # all the way, layer k would recompute k layers per element and the loop IR (and the
    # work) would grow with the square of the depth
    x = Tensor.input("x", (8, 64))
    y = x
    for _ in range(15):
        y = F.layernorm(y)
    # (a last-axis layernorm is its own Func: every layer is stored)
    stored = [n for n in topo_order(y) if n.op in ("stored", "layernorm")]
    assert len(stored) >= 15 // 5, len(stored)
    kern = sl.compile(y)
    assert max(len(line) for line in kern.loop_ir.splitlines()) < 1500
    a = rng.standard_normal((8, 64)).astype(np.float32) * 3 + 1
    want = a.astype(np.float64)
    for _ in range(15):
        want = (want - want.mean(-1, keepdims=True)) / np.sqrt(want.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(kern(x=a), want, rtol=1e-3, atol=1e-3)


def test_matmul_gets_the_register_tiled_schedule():
    import schedlang as sl
    from schedlang.frontend import Tensor
    rng = np.random.default_rng(21)
    a = rng.random((70, 40), dtype=np.float32)
    b = rng.random((40, 100), dtype=np.float32)
    A, B = Tensor.input("A", (70, 40)), Tensor.input("B", (40, 100))
    for y, ref in ((A @ B, a @ b), ((A @ B).relu(), np.maximum(a @ b, 0))):
        kern = sl.compile(y)
        ir = kern.loop_ir
        assert "_cache" in ir and "parallel" in ir and "ramp(" in ir    # tiled, packed, vector
        np.testing.assert_allclose(kern(A=a, B=b), ref, rtol=1e-4, atol=1e-5)


def test_matmul_with_a_transposed_right_operand_copies_it_per_panel():
    # x @ w.T (a linear layer): w.T is filled per column panel, 16 columns at a time, so
    # the micro-kernel reads it with columns contiguous (it gathered from w's rows before,
    # 37x slower at 256 x 1024 x 1024); sizes that 6, 16 and 64 do not divide
    rng = np.random.default_rng(27)
    x = rng.standard_normal((45, 70), dtype=np.float32)
    w = rng.standard_normal((83, 70), dtype=np.float32)
    b = rng.standard_normal(83, dtype=np.float32)
    X, W, B = Tensor.input("x", x.shape), Tensor.input("w", w.shape), Tensor.input("b", (83,))
    kern = sl.compile(X @ W.transpose(0, 1) + B)
    text = str(kern.schedule)
    assert re.search(r"s\[matmul_rhs_t\d+\]\.compute_at\(matmul\d+, 'i1\.panel'\)", text), text
    assert re.search(r"matmul_rhs_t\d+\[ramp\(", kern.loop_ir)
    np.testing.assert_allclose(kern(x=x, w=w, b=b), x @ w.T + b, rtol=1e-4, atol=1e-4)
    # a right operand read straight keeps its packed copy, with no transposing Func
    assert "matmul_rhs" not in str(sl.compile(X @ Tensor.input("v", (70, 83))).schedule)


def test_matmul_with_a_transposed_left_operand_stores_it_transposed_once():
    # x.T @ v: read in place, each tile read x down its columns, a row apart, all in one
    # set of the caches (0.43x torch at 1024^3); it is stored transposed once, in 16 x 16
    # tiles, also batched; a vector times a matrix keeps reading in place
    rng = np.random.default_rng(31)
    x = rng.standard_normal((70, 45), dtype=np.float32)
    v = rng.standard_normal((70, 83), dtype=np.float32)
    y = rng.standard_normal((3, 70, 45), dtype=np.float32)
    X, V, Y = (Tensor.input(n, a.shape) for n, a in (("x", x), ("v", v), ("y", y)))
    for t, args, ref in [(X.transpose(0, 1) @ V, dict(x=x, v=v), x.T @ v),
                         (Y.transpose(-1, -2) @ V, dict(y=y, v=v), y.transpose(0, 2, 1) @ v)]:
        kern = sl.compile(t)
        assert re.search(r"s\[matmul_operand\d+\]\.compute_root\(\)", str(kern.schedule))
        assert re.search(r"matmul_operand\d+\[ramp\(.*\] = \w+\[ramp\(.*, 45, 16\)\]",
                         kern.loop_ir), kern.loop_ir
        np.testing.assert_allclose(kern(**args), ref, rtol=1e-4, atol=1e-4)
    w = rng.standard_normal(70, dtype=np.float32)
    kern = sl.compile(Tensor.input("w", (70,)) @ V)
    assert "matmul_operand" not in str(kern.schedule)
    np.testing.assert_allclose(kern(w=w, v=v), w @ v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride, groups", [(1, 2), (2, 4)])
def test_a_conv_of_a_few_groups_of_many_channels_runs_each_group_in_a_fast_form(stride, groups):
    # 16 or more channels a group: each group's conv is a whole conv of its own (Winograd
    # at stride 1, NHWC sums at stride 2), concatenated (the generic sum of all groups at
    # once was 0.6x torch); checked against numpy, with a bias
    rng = np.random.default_rng(33)
    cin = cout = 16 * groups
    x = rng.standard_normal((1, cin, 16, 16), dtype=np.float32)
    w = rng.standard_normal((cout, 16, 3, 3), dtype=np.float32)
    b = rng.standard_normal(cout, dtype=np.float32)
    X, W, B = Tensor.input("x", x.shape), Tensor.input("w", w.shape), Tensor.input("b", (cout,))
    kern = sl.compile(F.conv2d(X, W, B, stride=stride, padding=1, groups=groups))
    assert ("winograd" if stride == 1 else "conv2d_nhwc") in kern.loop_ir
    ref = np.concatenate([_conv3x3_pad1(x[:, 16 * g:16 * g + 16], w[16 * g:16 * g + 16])
                          for g in range(groups)], axis=1)[:, :, ::stride, ::stride]
    np.testing.assert_allclose(kern(x=x, w=w, b=b), ref + b[:, None, None], rtol=1e-4,
                               atol=1e-3)


def test_matmul_with_computed_operands_computes_them_once():
    # a right operand that is math over a read (v.gelu()) is a Func of its own, filled per
    # column panel (it was computed again in every tile of 6 rows before), in row order
    # since it is not transposed
    rng = np.random.default_rng(29)
    x = rng.standard_normal((45, 70), dtype=np.float32)
    v = rng.standard_normal((70, 83), dtype=np.float32)
    X, V = Tensor.input("x", x.shape), Tensor.input("v", v.shape)
    kern = sl.compile(X @ V.gelu())
    text = str(kern.schedule)
    assert re.search(r"s\[matmul_rhs\d+\]\.compute_at\(matmul\d+, 'i1\.panel'\)", text), text
    assert "matmul_rhs_t" not in text and ".reorder('i1.o'" not in text, text
    np.testing.assert_allclose(kern(x=x, v=v), x @ Tensor(v).gelu().numpy(), rtol=1e-4,
                               atol=1e-4)
    # an index map of a read (a slice) is read in place, with no copy
    assert "matmul_rhs" not in str(sl.compile(X @ V[:, 3:80]).schedule)
    # a computed left operand is stored once (it was scalar math in the inner loop, 15x
    # slower than torch), as is a computed right operand whose batch dims broadcast
    y = rng.standard_normal((2, 45, 70), dtype=np.float32)
    Y = Tensor.input("y", y.shape)
    gelu_x = Tensor(x).gelu().numpy()
    for t, args, ref in [(X.gelu() @ V, dict(x=x, v=v), gelu_x @ v),
                         (Y @ V.exp(), dict(y=y, v=v), y @ np.exp(v))]:
        kern = sl.compile(t)
        assert re.search(r"s\[matmul_operand\d+\]\.compute_root\(\)", str(kern.schedule))
        np.testing.assert_allclose(kern(**args), ref, rtol=1e-4, atol=1e-3)


def test_batched_matmul_gets_the_register_tiled_schedule_with_the_batch_in_parallel():
    rng = np.random.default_rng(28)
    q = rng.standard_normal((5, 37, 24), dtype=np.float32)
    k = rng.standard_normal((5, 50, 24), dtype=np.float32)
    Q, K = Tensor.input("q", q.shape), Tensor.input("k", k.shape)
    kern = sl.compile((Q @ K.transpose(1, 2)).softmax(-1))
    text = str(kern.schedule)
    assert "cache_write" in text and re.search(r"s\[matmul\d+\]\.parallel\('i0'\)", text), text
    assert "matmul_rhs" in text                           # k.transpose(1, 2), per panel
    s_ = q @ k.transpose(0, 2, 1)
    e = np.exp(s_ - s_.max(-1, keepdims=True))
    np.testing.assert_allclose(kern(q=q, k=k), e / e.sum(-1, keepdims=True), rtol=1e-4,
                               atol=1e-6)
    # one batch: the row tiles (or panels) take the parallel loop instead
    one = sl.compile(Tensor.input("a", (1, 64, 32)) @ Tensor.input("c", (1, 32, 40)))
    assert not re.search(r"\.parallel\('i0'\)", str(one.schedule)), str(one.schedule)
    a1 = rng.standard_normal((1, 64, 32), dtype=np.float32)
    c1 = rng.standard_normal((1, 32, 40), dtype=np.float32)
    np.testing.assert_allclose(one(a=a1, c=c1), a1 @ c1, rtol=1e-4, atol=1e-4)


def _conv3x3_pad1(a, w):
    """numpy reference: NCHW 3x3 convolution with zero padding 1."""
    ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = a.shape[2:]
    ref = np.zeros((a.shape[0], w.shape[0], h, wd), np.float32)
    for ry in range(3):
        for rx in range(3):
            ref += np.einsum("nchw,kc->nkhw", ap[:, :, ry:ry + h, rx:rx + wd], w[:, :, ry, rx])
    return ref


def test_conv2d_gets_the_register_tiled_schedule():
    import schedlang as sl
    import schedlang.frontend as F
    from schedlang.frontend import Tensor
    rng = np.random.default_rng(22)
    a = rng.standard_normal((1, 4, 9, 35), dtype=np.float32)
    w = rng.standard_normal((16, 4, 3, 3), dtype=np.float32)
    x, wt = Tensor.input("x", a.shape), Tensor.input("w", w.shape)
    ref = _conv3x3_pad1(a, w)
    # groups 1, 16 output channels: sums with channels innermost, vectorized over channels
    # (one vector register of float32: 16 lanes with AVX-512, 8 with AVX2), whether the
    # conv is the output (computed per row of it) or feeds a relu (stored)
    lanes = vector_lanes(4)
    for y, expect in ((F.conv2d(x, wt, padding=1), ref),
                      (F.conv2d(x, wt, padding=1).relu(), np.maximum(ref, 0))):
        kern = sl.compile(y)
        ir = kern.loop_ir
        assert "conv2d_nhwc" in ir and "conv2d_weights" in ir and "parallel" in ir
        # channel vectors, one register wide
        assert re.search(rf"conv2d_nhwc\w*\[ramp\([^\]]*, 1, {lanes}\)\]", ir), ir
        assert not re.search(rf"conv2d_nhwc\w*\[ramp\([^\]]*, 1, {2 * lanes}\)\]", ir), ir
        np.testing.assert_allclose(kern(x=a, w=w), expect, rtol=1e-4, atol=1e-4)


def test_conv2d_of_many_channels_runs_channel_tiles_outermost_with_their_weights():
    # 128 output channels are 4 register tiles of 32: the tiles run outermost in parallel,
    # each transposing its own slice of the weights (not the whole weights at root), and
    # the batch and rows inside; the same whether the conv is the output or feeds a relu
    rng = np.random.default_rng(24)
    a = rng.standard_normal((2, 16, 5, 7), dtype=np.float32)
    w = rng.standard_normal((128, 16, 3, 3), dtype=np.float32)
    b = rng.standard_normal(128, dtype=np.float32)
    x, wt, bias = Tensor.input("x", a.shape), Tensor.input("w", w.shape), Tensor.input("b", (128,))
    ref = _conv3x3_pad1(a, w)
    for y, expect, kw in ((F.conv2d(x, wt, padding=1), ref, {}),
                          (F.conv2d(x, wt, bias, padding=1).relu(),
                           np.maximum(ref + b[:, None, None], 0), {"b": b})):
        kern = sl.compile(y)
        text = str(kern.schedule)
        assert re.search(r"compute_at\(\w+, '\w+\.(o|tile)'\)", text), text
        ir = kern.loop_ir
        # the outermost loop is the parallel channel-tile loop, the weights inside it
        tiles = re.search(r"parallel for (conv2d\d+\.s0\.i1\.o|conv2d_nhwc\d+\.s0\.i3\.tile) "
                          r"in \[0, 4\)", ir)
        assert tiles, ir
        assert ir.index("allocate conv2d_weights") > tiles.start(), ir
        np.testing.assert_allclose(kern(x=a, w=w, **kw), expect, rtol=1e-4, atol=1e-4)
    # 64 channels (two tiles): rows in parallel, the weights transposed once at root
    w64 = w[:64]
    kern = sl.compile(F.conv2d(x, Tensor.input("w", w64.shape), padding=1))
    text = str(kern.schedule)
    assert not re.search(r"s\[conv2d_weights\d+\]\.compute_at", text), text
    assert re.search(r"s\[conv2d_weights\d+\]\.parallel", text), text
    np.testing.assert_allclose(kern(x=a, w=w64), _conv3x3_pad1(a, w64), rtol=1e-4, atol=1e-4)


def test_conv2d_of_a_prime_width_keeps_wide_register_tiles():
    # 23 columns have no divisor between 4 and 16: tiles of as many columns as the
    # accumulators hold for 16 channels (16 of AVX-512's 16-lane registers: 16 columns;
    # 12 of AVX2's 8-lane ones: 6), the last one shifted back over the one before, instead
    # of one column per tile
    import schedlang as sl
    import schedlang.frontend as F
    from schedlang.frontend import Tensor
    rng = np.random.default_rng(23)
    a = rng.standard_normal((2, 8, 5, 23), dtype=np.float32)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    x, wt = Tensor.input("x", a.shape), Tensor.input("w", w.shape)
    kern = sl.compile(F.conv2d(x, wt, padding=1))
    accumulators = 16 if vector_registers() >= 32 else 12
    cols = accumulators * vector_lanes(4) // 16
    assert re.search(rf"min\(\S+ \* {cols}, {23 - cols}\)", kern.loop_ir), kern.loop_ir
    np.testing.assert_allclose(kern(x=a, w=w), _conv3x3_pad1(a, w), rtol=1e-4, atol=1e-4)


def test_pointwise_conv2d_gets_the_fused_plane_schedule():
    import schedlang as sl
    import schedlang.frontend as F
    from schedlang.frontend import Tensor
    rng = np.random.default_rng(25)
    a = rng.standard_normal((2, 16, 8, 16), dtype=np.float32)
    w = rng.standard_normal((12, 16, 1, 1), dtype=np.float32)
    b = rng.standard_normal(12, dtype=np.float32)
    x, wt, bias = Tensor.input("x", a.shape), Tensor.input("w", w.shape), Tensor.input("b", (12,))
    ref = np.einsum("kc,nchw->nkhw", w[:, :, 0, 0], a)
    # a 1x1 conv is a matrix product over the image plane: one fused loop, register tiles
    # of 4 channels x 64 pixels (12 channels), the input's pixels copied to a panel per block
    for y, expect, kw in ((F.conv2d(x, wt), ref, {}),
                          (F.conv2d(x.relu(), wt, bias=bias).relu(),
                           np.maximum(np.einsum("kc,nchw->nkhw", w[:, :, 0, 0], np.maximum(a, 0))
                                      + b[:, None, None], 0), {"b": b})):
        kern = sl.compile(y)
        text = str(kern.schedule)
        assert "fuse('i2', 'i3'" in text and "cache_read" in text and "parallel" in text
        np.testing.assert_allclose(kern(x=a, w=w, **kw), expect, rtol=1e-4, atol=1e-4)
    # a plane that 64 does not divide, a stride or padding: the general forms
    odd = rng.standard_normal((1, 8, 5, 7), dtype=np.float32)
    w8 = rng.standard_normal((6, 8, 1, 1), dtype=np.float32)
    check(F.conv2d(Tensor(odd), Tensor(w8)), np.einsum("kc,nchw->nkhw", w8[:, :, 0, 0], odd),
          rtol=1e-4, atol=1e-4)
    check(F.conv2d(Tensor(odd), Tensor(w8), stride=2),
          np.einsum("kc,nchw->nkhw", w8[:, :, 0, 0], odd[:, :, ::2, ::2]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw", [(7, 7), (14, 14), (3, 20)])
def test_pointwise_conv2d_of_a_plane_64_does_not_divide_is_a_batched_matmul(hw):
    # 7 x 7 and 14 x 14 planes (ResNet's late 1x1 layers): the weights times each plane
    # through the matmul schedule (it was the generic schedule, 20-35x slower than torch);
    # the plane is read through a reshape whose index folds back to one dense index
    rng = np.random.default_rng(29)
    a = rng.standard_normal((2, 40) + hw, dtype=np.float32)
    w = rng.standard_normal((24, 40, 1, 1), dtype=np.float32)
    b = rng.standard_normal(24, dtype=np.float32)
    x, wt, bias = Tensor.input("x", a.shape), Tensor.input("w", w.shape), Tensor.input("b", (24,))
    kern = sl.compile(F.conv2d(x, wt, bias=bias).relu())
    assert "cache_write" in str(kern.schedule)
    inner = [ln for ln in kern.loop_ir.splitlines() if "_cache.acc" in ln and "x[" in ln]
    assert inner and not any("//" in ln or "%" in ln for ln in inner), inner[:2]
    ref = np.einsum("kc,nchw->nkhw", w[:, :, 0, 0], a) + b[:, None, None]
    np.testing.assert_allclose(kern(x=a, w=w, b=b), np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


def test_pointwise_conv2d_keeps_its_channels_by_pixels_register_tiles():
    import schedlang as sl
    import schedlang.frontend as F
    from schedlang.frontend import Tensor
    rng = np.random.default_rng(26)
    a = rng.standard_normal((1, 24, 8, 16), dtype=np.float32)
    w = rng.standard_normal((16, 24, 1, 1), dtype=np.float32)
    kern = sl.compile(F.conv2d(Tensor.input("x", a.shape), Tensor.input("w", w.shape)))
    text = str(kern.schedule)
    # 8 channels x 32 pixels with AVX-512's 32 registers; 6 channels x 2 registers of
    # pixels with AVX2's 16 (16 channels: two tiles of 6, then a guarded one of 4)
    if vector_registers() >= 32:
        regs, pixels = 8, 32
    else:
        regs, pixels = 6, 2 * vector_lanes(4)
    assert f"split('i1', {regs}," in text and f", {pixels}, " in text, text
    assert re.search(rf"split\('\w+\.in', {pixels},", text), text
    np.testing.assert_allclose(kern(x=a, w=w), np.einsum("kc,nchw->nkhw", w[:, :, 0, 0], a),
                               rtol=1e-4, atol=1e-4)


def test_grouped_conv2d_gets_the_column_tiled_schedule():
    import schedlang as sl
    import schedlang.frontend as F
    from schedlang.frontend import Tensor
    rng = np.random.default_rng(23)
    a = rng.standard_normal((1, 8, 6, 33), dtype=np.float32)
    w = rng.standard_normal((16, 4, 3, 3), dtype=np.float32)
    x, wt = Tensor.input("x", a.shape), Tensor.input("w", w.shape)
    kern = sl.compile(F.conv2d(x, wt, padding=1, groups=2))
    assert "_cache" in kern.loop_ir and "conv2d_nhwc" not in kern.loop_ir
    # groups=2: output channels 8g..8g+7 read input channels 4g..4g+3
    ref = np.concatenate([_conv3x3_pad1(a[:, 4 * g:4 * g + 4], w[8 * g:8 * g + 8])
                          for g in range(2)], axis=1)
    np.testing.assert_allclose(kern(x=a, w=w), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, dtype", [((5, 300), sl.float32), ((2, 3, 40), sl.float32),
                                          ((4, 7), sl.float32), ((5, 300), sl.float64),
                                          ((3, 12), sl.float64), ((40, 1000), sl.float32)])
def test_softmax_over_rows_is_computed_a_row_at_a_time(shape, dtype):
    from schedlang.frontend.reduction_schedule import PARALLEL_WORK
    rng = np.random.default_rng(24)
    a = (rng.standard_normal(shape) * 4).astype(dtype.name)
    x = Tensor.input("x", shape, dtype)
    kern = sl.compile(x.softmax(-1))
    ir = kern.loop_ir
    # the exponentials and both reductions live inside the row loop (on threads when the
    # matrix is large enough), with vector partial results (rfactor), not as whole-matrix
    # buffers
    first = ir.splitlines()[0].lstrip()
    want = "parallel for" if int(np.prod(shape)) >= PARALLEL_WORK else "for"
    assert first.startswith(want + " "), ir
    lanes = vector_lanes(dtype.bits // 8)       # one vector register of this CPU
    assert "_intm" in ir and ("ramp(" in ir) == (shape[-1] >= lanes)
    if shape[-1] >= lanes:
        assert f", 1, {lanes})" in ir and f", 1, {2 * lanes})" not in ir
    assert "prefetch x[" in ir and f"+ {shape[-1]}" in ir.split("prefetch x[")[1].split("\n")[0]
    e = np.exp(a.astype(np.float64) - a.max(-1, keepdims=True))
    tol = 1e-5 if dtype == sl.float32 else 1e-13
    np.testing.assert_allclose(kern(x=a), e / e.sum(-1, keepdims=True), rtol=tol, atol=tol / 100)
    # other axes keep the generic schedule and stay right
    y = sl.compile(x.softmax(0))
    e0 = np.exp(a - a.max(0, keepdims=True))
    np.testing.assert_allclose(y(x=a), e0 / e0.sum(0, keepdims=True), rtol=1e-5, atol=1e-7)


def _layernorm_ref(a, w=None, b=None):
    a = a.astype(np.float64)
    out = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    return out * (1 if w is None else w) + (0 if b is None else b)


@pytest.mark.parametrize("shape, dtype, affine", [((6, 300), sl.float32, True),
                                                  ((2, 3, 40), sl.float32, False),
                                                  ((4, 7), sl.float64, True),
                                                  ((64, 1024), sl.float32, False)])
def test_layernorm_over_rows_is_computed_a_row_at_a_time(shape, dtype, affine):
    from schedlang.frontend.reduction_schedule import PARALLEL_WORK
    rng = np.random.default_rng(25)
    a = (rng.standard_normal(shape) * 3 + 1).astype(dtype.name)
    w, b = (rng.standard_normal(shape[-1:]).astype(dtype.name) for _ in range(2))
    x = Tensor.input("x", shape, dtype)
    y = x.layernorm(Tensor.input("w", w.shape, dtype), Tensor.input("b", b.shape, dtype)) \
        if affine else x.layernorm()
    kern = sl.compile(y)
    ir = kern.loop_ir
    # both sums live inside the row loop (one pass over memory, not three), with vector
    # partial results, not as buffers of the whole matrix
    first = ir.splitlines()[0].lstrip()
    want = "parallel for" if int(np.prod(shape)) >= PARALLEL_WORK else "for"
    assert first.startswith(want + " "), ir
    assert ir.count("_intm[") > 0 and ir.count("\nfor") + ir.count("\nparallel for") == 0
    args = dict(x=a, w=w, b=b) if affine else dict(x=a)
    tol = 2e-5 if dtype == sl.float32 else 1e-12
    ref = _layernorm_ref(a, w, b) if affine else _layernorm_ref(a)
    np.testing.assert_allclose(kern(**args), ref, rtol=tol, atol=tol)


def test_a_layernorm_feeding_a_matmul_is_computed_once():
    rng = np.random.default_rng(26)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    m = rng.standard_normal((64, 32)).astype(np.float32)
    got = (Tensor(a).layernorm() @ Tensor(m)).numpy()
    np.testing.assert_allclose(got, _layernorm_ref(a) @ m, rtol=1e-4, atol=1e-4)
    x16 = rng.standard_normal((8, 48)).astype(np.float16)
    np.testing.assert_allclose(Tensor(x16).layernorm().numpy().astype(np.float64),
                               _layernorm_ref(x16), rtol=2e-3, atol=2e-3)


def test_input_name_and_shape_are_checked_naming_tensor_input():
    with pytest.raises(sl.AlgorithmError, match="Tensor.input"):
        Tensor.input(5, (2,))
    with pytest.raises(sl.AlgorithmError, match="Tensor.input"):
        Tensor.input("x", "ab")
    with pytest.raises(sl.AlgorithmError, match="Tensor.input"):
        Tensor.input("x", (2.0, 3))


def test_zero_dimensional_input_is_a_0d_kernel_argument():
    x = Tensor.input("x", (4,))
    s = Tensor.input("s", ())
    assert s.shape == () and s.ndim == 0
    kern = sl.compile((x * s + s).sum())
    assert kern(x=np.arange(4, dtype=np.float32), s=np.float32(2)) == 20
    with pytest.raises(sl.ArgumentError, match="expected 0 dimensions"):
        kern(x=np.ones(4, np.float32), s=np.ones(1, np.float32))


@pytest.mark.parametrize("shape, op", [((300007,), "sum"), ((512, 640), "sum"),
                                       ((512, 640), "max"), ((40, 3, 1000), "mean")])
def test_a_large_reduction_to_one_value_runs_in_parallel_pieces(shape, op):
    # no kept dimension to run in parallel: the default schedule rfactors the reduction
    # into pieces (rows, or chunks of a 1-D input, with a ragged last chunk) in parallel
    x = Tensor.input("x", shape)
    for keep in (False, True):
        kern = sl.compile(getattr(x, op)(keepdims=keep) if keep else getattr(x, op)())
        assert re.search(r"parallel for \S+_intm", kern.loop_ir), kern.loop_ir
        assert "ramp(" in kern.loop_ir
        a = rng.standard_normal(shape).astype(np.float32)
        want = getattr(a.astype(np.float64), op)(keepdims=keep)
        np.testing.assert_allclose(kern(x=a), want, rtol=1e-4, atol=1e-4)
        kern.num_threads = 1
        np.testing.assert_allclose(kern(x=a), want, rtol=1e-4, atol=1e-4)


def test_a_small_reduction_to_one_value_stays_on_one_thread():
    kern = sl.compile(Tensor.input("x", (5000,)).sum())
    assert "parallel" not in kern.loop_ir


def test_several_tensors_compile_into_one_kernel():
    x = Tensor.input("x", (4, 8))
    a, b = (x * 2).relu(), x.sum(-1)
    kern = sl.compile([a, b])
    xa = rng.standard_normal((4, 8)).astype(np.float32)
    got_a, got_b = kern(x=xa)
    np.testing.assert_allclose(got_a, np.maximum(xa * 2, 0))
    np.testing.assert_allclose(got_b, xa.sum(-1), rtol=1e-5, atol=1e-5)
    s = sl.Schedule(a, b)
    assert s.outputs == [a.pipeline()[0], b.pipeline()[0]]


@pytest.mark.parametrize("shape, perm", [((64, 48), (1, 0)), ((2, 32, 5, 40), (0, 2, 3, 1)),
                                         ((40, 24), (1, 0))])
def test_a_transposing_read_runs_in_tiles(shape, perm):
    # the output's last dim indexes the read's rows: 16 x 16 tiles, each line read whole
    x = Tensor.input("x", shape)
    kern = sl.compile(x.permute(*perm) * 2 + 1)
    loops = re.findall(r"for (\S+) in \[0, (\d+)\)", kern.loop_ir)
    assert sum(1 for _, n in loops if n == "16") >= 1 and "ramp(" in kern.loop_ir
    a = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(kern(x=a), np.transpose(a, perm) * 2 + 1)


def test_several_tensors_keep_their_default_schedules_unless_they_share_a_func():
    a, b = Tensor.input("a", (64, 96)), Tensor.input("b", (96, 80))
    y = a @ b
    A = rng.standard_normal((64, 96)).astype(np.float32)
    B = rng.standard_normal((96, 80)).astype(np.float32)
    kern = sl.compile([y, a.sum()])
    text = str(kern.schedule)
    assert "cache_write" in text and "rfactor" in text      # the matmul's and the sum's
    got_y, got_s = kern(a=A, b=B)
    np.testing.assert_allclose(got_y, A @ B, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_s, A.sum(dtype=np.float64), rtol=1e-5)
    # the softmax reads the matmul's Func, which the matmul's default already placed
    kern = sl.compile([y, y.softmax(-1)])
    got_y, got_p = kern(a=A, b=B)
    e = np.exp(A @ B - (A @ B).max(-1, keepdims=True))
    np.testing.assert_allclose(got_p, e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
    # ... and keeps its own loops' schedule: its reductions and output run in parallel
    x = Tensor.input("x", (256, 256))
    p = x.softmax(-1)
    loops = [line for line in str(sl.lower([p, p.sum(-1)])).splitlines() if "for " in line]
    assert sum(line.strip().startswith("parallel for sum") for line in loops) == 1, loops


def test_several_tensors_with_eager_constants_bind_them_in_one_kernel():
    x = Tensor.input("x", (4,))
    y = x + Tensor(np.arange(4, dtype=np.float32))
    ones = np.ones(4, np.float32)
    np.testing.assert_array_equal(sl.compile([y])(x=ones), [1, 2, 3, 4])
    got_y, got_z = sl.compile([y, x * 2])(x=ones)
    np.testing.assert_array_equal(got_y, [1, 2, 3, 4])
    np.testing.assert_array_equal(got_z, [2, 2, 2, 2])
    with pytest.raises(sl.CompileError, match=r"sl.compile: the outputs at positions 0 and 1 "
                                              r"are the same Tensor .*; list it once"):
        sl.compile([y, y])
    h = x.sum(-1, keepdims=True).reshape(-1)
    with pytest.raises(sl.CompileError, match=r"positions 0 and 1 are the same Tensor \(a view "
                                              r"that changes nothing, such as \.T of a 1-D"):
        sl.compile([h, h.T])


def test_a_schedule_is_indexed_by_a_tensor_for_its_output_func():
    x = Tensor.input("x", (64, 64))
    y = (x * 2).relu()
    f, s = y.pipeline()
    assert s[y] is s[f] and s[y].loop_names() == ["i0", "i1.o", "i1.i"]
    s = sl.Schedule(y)
    s[y].unroll(s[y].loop_names()[-1], 2)
    np.testing.assert_array_equal(sl.compile(y, s)(x=np.ones((64, 64), np.float32)), 2)


@pytest.mark.parametrize("shape", [(1 << 16,), (1 << 16, 1), (1, 1 << 16), (1 << 15, 1, 1)])
def test_a_long_one_dimensional_result_runs_in_parallel_vectorized_chunks(shape):
    z = Tensor.input("z", shape)
    kern = sl.compile((z * 2 + 1).relu())
    assert "parallel for" in kern.loop_ir and "ramp(" in kern.loop_ir, kern.loop_ir
    a = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(kern(z=a), np.maximum(a * 2 + 1, 0))


def test_autotune_takes_several_tensors(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path))
    x = Tensor.input("x", (16, 16))
    a, b = x * 2, x + 1
    s = sl.autotune([a, b], beam=1, budget_s=1, progress=False)
    assert s.outputs == [a.pipeline()[0], b.pipeline()[0]]
    xa = rng.standard_normal((16, 16)).astype(np.float32)
    got_a, got_b = sl.compile([a, b], s)(x=xa)
    np.testing.assert_array_equal(got_a, xa * 2)
    np.testing.assert_array_equal(got_b, xa + 1)


@pytest.mark.parametrize("index", [np.s_[3:5, 7:9], np.s_[3], np.s_[3:5], np.s_[:, 60:]])
def test_a_slice_of_a_matmul_compiles_with_the_default_schedule(index):
    # the product's region was what the slice needs, unknown to its register tile until
    # run time, and the frontend's own schedule was refused (unroll of a symbolic extent)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    y = (Tensor.input("a", (64, 64)) @ Tensor.input("b", (64, 64)))[index]
    kern = sl.compile(y)
    np.testing.assert_allclose(kern(a=a, b=b), (a @ b)[index], rtol=1e-4, atol=1e-4)
    z = (Tensor.input("a", (64, 64)) @ Tensor.input("b", (64, 64)).T)[index] + 1
    np.testing.assert_allclose(sl.compile(z)(a=a, b=b), (a @ b.T)[index] + 1, rtol=1e-4,
                               atol=1e-4)


def test_costly_math_broadcast_to_many_rows_is_computed_once():
    # a + row.exp().log().tanh() recomputed the row's math for every row (17x numpy)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    v = rng.standard_normal(48).astype(np.float32)
    y = Tensor.input("a", a.shape) + (Tensor.input("v", v.shape).exp() + 1).log().tanh()
    kern = sl.compile(y)
    assert "broadcast_operand" in kern.loop_ir
    reads_a = [ln for ln in kern.loop_ir.splitlines() if "a[" in ln]
    assert reads_a and not any("tanh" in ln for ln in reads_a), reads_a
    np.testing.assert_allclose(kern(a=a, v=v), a + np.tanh(np.log(np.exp(v) + 1)), rtol=1e-5,
                               atol=1e-6)
    cheap = Tensor.input("a", a.shape) + Tensor.input("v", v.shape) * 2
    assert "broadcast_operand" not in sl.compile(cheap).loop_ir


def test_softmax_of_a_transposed_input_takes_the_tiled_generic_schedule():
    # the row softmax schedule gathered a column per row (10x slower than torch)
    a = np.random.default_rng(6).standard_normal((64, 80)).astype(np.float32)
    kern = sl.compile(Tensor.input("a", a.shape).T.softmax(-1))
    e = np.exp(a.T - a.T.max(-1, keepdims=True))
    np.testing.assert_allclose(kern(a=a), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert ".compute_at(softmax" not in str(kern.schedule)     # not the row schedule


@pytest.mark.parametrize("sa, sb, dtype", [((64,), (64, 96), np.float32),
                                           ((96, 64), (64,), np.float32),
                                           ((4, 64), (64, 96), np.float32),
                                           ((4, 512), (512, 96), np.float32),
                                           ((1024,), (1024, 96), np.float32),
                                           ((40, 48), (48, 64), np.float64)])
def test_a_matmul_the_register_tiles_do_not_fit_runs_rows_in_parallel(sa, sb, dtype):
    # fewer than 6 rows, one column, or float64: the generic loop schedule had no parallel
    # loop and read the right operand down its columns (7-13x slower than torch); a small
    # one runs on one thread (PARALLEL_WORK)
    from schedlang.frontend.reduction_schedule import PARALLEL_WORK
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
    dt = sl.float64 if dtype == np.float64 else sl.float32
    kern = sl.compile(Tensor.input("a", sa, dt) @ Tensor.input("b", sb, dt))
    work = int(np.prod(sa)) * int(np.prod(sb)) // sa[-1]
    assert ("parallel for" in kern.loop_ir) == (work >= PARALLEL_WORK), kern.loop_ir
    strides = {int(m) for m in re.findall(r"ramp\([^()]*, (\d+), \d+\)", kern.loop_ir)}
    assert strides and strides <= {0, 1}, strides         # no reads down a column
    # float32 sums of up to 1024 products, in another order than numpy's
    np.testing.assert_allclose(kern(a=a, b=b), a @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("out_channels", [12, 20, 3])
def test_a_conv_whose_channels_8_does_not_divide_keeps_register_tiles(out_channels):
    # its last tile of 8 channels shifts back (or one tile holds them all); it was the
    # generic schedule, 12x slower than torch
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 16, 20, 20)).astype(np.float32)
    w = rng.standard_normal((out_channels, 16, 3, 3)).astype(np.float32)
    kern = sl.compile(F.conv2d(Tensor.input("x", x.shape), Tensor.input("w", w.shape), padding=1))
    assert "cache_write" in str(kern.schedule)
    ref = np.zeros((1, out_channels, 20, 20), np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for ky in range(3):
        for kx in range(3):
            ref += np.einsum("oc,nchw->nohw", w[:, :, ky, kx], xp[:, :, ky:ky + 20, kx:kx + 20])
    np.testing.assert_allclose(kern(x=x, w=w), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(64, 48, 96), (37, 70, 100), (6, 8, 8)])
def test_a_float64_matmul_takes_the_register_tiles_with_8_lanes(shape):
    # 6 rows x 4 registers of 8 doubles with AVX-512 (6 x 2 registers of 4 doubles with
    # AVX2); it was the generic schedule, 11x slower than torch
    M, K, N = shape
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    y = Tensor.input("a", (M, K), sl.float64) @ Tensor.input("b", (K, N), sl.float64)
    kern = sl.compile(y)
    lanes = vector_lanes(8)
    assert "cache_write" in str(kern.schedule) and f"vectorize('i1.v', {lanes})" in str(kern.schedule)
    np.testing.assert_allclose(kern(a=a, b=b), a @ b, rtol=1e-12, atol=1e-12)
    yt = Tensor.input("a", (M, K), sl.float64) @ Tensor.input("b", (N, K), sl.float64).T
    np.testing.assert_allclose(sl.compile(yt)(a=a, b=np.ascontiguousarray(b.T)), a @ b,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [((1, 16, 20, 37), (24, 16, 3, 3), 1, 1),
                                   ((2, 6, 19, 40), (12, 6, 3, 3), 2, 1),
                                   ((1, 8, 9, 33), (16, 4, 3, 3), 1, 2)])
def test_a_float64_conv_takes_the_register_tiles_with_8_lanes(shape):
    # 8 channels x 2 registers of 8 doubles with AVX-512 (6 x 2 registers of 4 doubles
    # with AVX2); it was the generic schedule (slower than torch)
    xs, ws, stride, groups = shape
    rng = np.random.default_rng(12)
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    kern = sl.compile(F.conv2d(Tensor.input("x", xs, sl.float64), Tensor.input("w", ws, sl.float64),
                               padding=1, stride=stride, groups=groups))
    assert "cache_write" in str(kern.schedule)
    tiles = [ln for ln in kern.loop_ir.splitlines() if "_cache[" in ln]
    lanes = vector_lanes(8)
    assert any(f", 1, {lanes})]" in ln for ln in tiles), tiles
    assert not any(f", 1, {2 * lanes})]" in ln for ln in tiles), tiles
    torch = pytest.importorskip("torch")
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1,
                                     stride=stride, groups=groups).numpy()
    np.testing.assert_allclose(kern(x=x, w=w), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, threads", [((4, 64), False), ((256, 256), True)])
def test_only_loops_with_enough_work_run_on_threads(shape, threads):
    # handing 256 elements to the thread pool costs more than computing them, and every
    # parallel loop is a function of its own for LLVM (30 small layernorms compiled in 13 s)
    from schedlang.frontend.reduction_schedule import PARALLEL_WORK
    assert (int(np.prod(shape)) >= PARALLEL_WORK) == threads
    a = rng.standard_normal(shape).astype(np.float32)
    x = Tensor.input("x", shape)
    for y, want in ((x.relu(), np.maximum(a, 0)), (x.sum(-1), a.sum(-1))):
        kern = sl.compile(y)
        assert ("parallel for" in kern.loop_ir) == threads, kern.loop_ir
        np.testing.assert_allclose(kern(x=a), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["softmax", "layernorm", "sum", "max"])
def test_row_partials_are_folded_into_one_register_before_the_scalar_chain(op):
    # a chain of one scalar op per partial result waits on each step: the partials of
    # four registers are first added (or max-ed) as vectors, so no scalar chain is longer
    # than one register's lanes
    x = Tensor.input("x", (64, 256))
    y = x.softmax(-1) if op == "softmax" else x.layernorm() if op == "layernorm" else \
        getattr(x, op)(-1)
    kern = sl.compile(y)
    chains = re.findall(r"for \S+ in \[0, (\d+)\):\n\s+(\S+)\[0\] = ", kern.loop_ir)
    assert chains and max(int(n) for n, _ in chains) <= vector_lanes(4), chains
    a = np.random.default_rng(27).standard_normal((64, 256)).astype(np.float32)
    ref = np.exp(a - a.max(-1, keepdims=True))
    ref = ref / ref.sum(-1, keepdims=True) if op == "softmax" else _layernorm_ref(a) \
        if op == "layernorm" else getattr(a, op)(-1)
    np.testing.assert_allclose(kern(x=a), ref, rtol=2e-5, atol=2e-5)
