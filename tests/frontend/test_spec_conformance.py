"""SPEC §5 (tensor frontend), sentence by sentence, where the other frontend tests leave a
gap: every op as both a method and a function (comparisons, slicing and concat included),
``Tensor.input``'s default dtype, ``sl.compile(tensor)`` called by input name (eager
constants bound), torch semantics checked against torch (layernorm's eps, conv2d's
options and padding forms, max_pool2d's -inf border), views that copy nothing, the
frontend's layering, and user mistakes reported as ``sl.SchedlangError``."""
import ast
import importlib.util
import pathlib

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

from .conftest import check

rng = np.random.default_rng(5)
X = rng.standard_normal((2, 3, 4)).astype(np.float32)
Y = rng.standard_normal((3, 1)).astype(np.float32)          # broadcasts against X
M = rng.standard_normal((4, 5)).astype(np.float32)
IMG = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
WGT = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
XI = rng.integers(-9, 9, (2, 3, 4)).astype(np.int32)


def np_softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# (name, input array, extra positional args, keyword args, numpy reference)
OPS = [
    ("eq", XI, (Tensor(XI[0, :, :1]),), {}, XI == XI[0, :, :1]),
    ("ne", XI, (0,), {}, XI != 0),
    ("lt", X, (Tensor(Y),), {}, X < Y),
    ("le", XI, (2,), {}, XI <= 2),
    ("gt", X, (Tensor(Y),), {}, X > Y),
    ("ge", XI, (Tensor(XI[1]),), {}, XI >= XI[1]),
    ("add", X, (Tensor(Y),), {}, X + Y),
    ("maximum", X, (Tensor(Y),), {}, np.maximum(X, Y)),
    ("floordiv", XI, (4,), {}, XI // 4),
    ("mod", XI, (4,), {}, XI % 4),
    ("pow", X, (2,), {}, X ** 2),
    ("neg", X, (), {}, -X),
    ("abs", X, (), {}, np.abs(X)),
    ("exp", X, (), {}, np.exp(X)),
    ("sum", X, (1,), {"keepdims": True}, X.sum(1, keepdims=True)),
    ("max", X, ((0, 2),), {}, X.max((0, 2))),
    ("min", X, (-1,), {"keepdims": True}, X.min(-1, keepdims=True)),
    ("mean", X, (0,), {}, X.mean(0)),
    ("reshape", X, ((4, 6),), {}, X.reshape(4, 6)),
    ("permute", X, ((2, 0, 1),), {}, X.transpose(2, 0, 1)),
    ("transpose", X, (0, 2), {}, X.swapaxes(0, 2)),
    ("expand", X[:, :1], ((5, 2, 3, 4),), {}, np.broadcast_to(X[:, :1], (5, 2, 3, 4))),
    ("pad", X, (((0, 0), (2, 1), (0, 3)),), {}, np.pad(X, ((0, 0), (2, 1), (0, 3)))),
    ("getitem", X, ((1, slice(None, None, -1), slice(1, 3)),), {}, X[1, ::-1, 1:3]),
    ("slice", X, ((slice(None), 2),), {}, X[:, 2]),
    ("concat", X, ([Tensor(X[:, :1] * 2)],), {"axis": 1},
     np.concatenate([X, X[:, :1] * 2], axis=1)),
    ("matmul", X, (Tensor(M),), {}, X @ M),
    ("softmax", X, (1,), {}, np_softmax(X, 1)),
    ("log_softmax", X, (0,), {}, np.log(np_softmax(X, 0))),
    ("cast", X * 4, (sl.int32,), {}, (X * 4).astype(np.int32)),
    ("max_pool2d", IMG, (2,), {}, IMG.reshape(1, 4, 3, 2, 3, 2).max((3, 5))),
    ("avg_pool2d", IMG, (3,), {"stride": 3}, IMG.reshape(1, 4, 2, 3, 2, 3).mean((3, 5))),
]


@pytest.mark.parametrize("name,arr,args,kw,ref", OPS, ids=[o[0] for o in OPS])
def test_every_op_is_a_method_and_a_function_with_one_meaning(name, arr, args, kw, ref):
    by_function = getattr(F, name)(Tensor(arr), *args, **kw)
    by_method = getattr(Tensor(arr), name)(*args, **kw)
    out = check(by_function, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(by_method.numpy(), out)


def test_conv2d_method_and_function_agree():
    ref = F.conv2d(Tensor(IMG), Tensor(WGT), padding=1).numpy()
    np.testing.assert_array_equal(Tensor(IMG).conv2d(Tensor(WGT), padding=1).numpy(), ref)
    assert ref.shape == (1, 4, 6, 6)


def test_where_is_a_function_only():
    assert callable(F.where)
    assert not hasattr(Tensor(X), "where")


def test_every_exported_op_has_a_method():
    helpers = {"Tensor", "as_tensor", "broadcast_shapes", "cache_info", "clear_cache", "where"}
    ops = [n for n in F.__all__ if n not in helpers]
    assert len(ops) > 40
    assert [n for n in ops if not callable(getattr(Tensor, n, None))] == []


def test_slice_forms_and_getitem_are_the_same_op():
    check(F.slice(Tensor(X), 2, 1, 4), X[:, :, 1:4])                        # axis, start, stop
    check(F.slice(Tensor(X), axis=1, start=0, stop=3, step=2), X[:, 0:3:2])
    check(Tensor(X).slice((0, 1), (2, 3)), X[0:2, 1:3])                    # starts, stops
    check(Tensor(X).getitem((Ellipsis, -1)), X[..., -1])


def test_tensor_input_dtype_defaults_to_float32():
    x = Tensor.input("x", (2, 3))
    assert x.dtype == sl.float32 and x.shape == (2, 3)
    n = Tensor.input("n", (2, 3), dtype=sl.int32)
    assert n.dtype == sl.int32
    kern = sl.compile(x * 2 + F.cast(n, sl.float32))
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.integers(-5, 5, (2, 3)).astype(np.int32)
    out = kern(x=a, n=b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)
    with pytest.raises(sl.ArgumentError):
        kern(x=a, n=b.astype(np.float32))          # n was declared int32


def test_compile_takes_only_the_named_inputs_when_constants_are_mixed_in():
    x = Tensor.input("x", (3, 4))
    kern = sl.compile((x @ Tensor(M)).relu() + Tensor(np.float32(0.5)))
    a = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(kern(x=a), np.maximum(a @ M, 0) + 0.5, rtol=1e-5, atol=1e-6)


def test_zero_dim_tensors_keep_their_shape():
    s = Tensor(np.float32(2.5))
    assert s.shape == () and s.numpy().shape == ()
    check(s * 2, np.float32(5.0))


def test_reductions_with_keepdims_over_several_axes():
    check(F.sum(Tensor(X), (0, -1), keepdims=True), X.sum((0, 2), keepdims=True))
    check(Tensor(X).mean(dim=1, keepdim=True), X.mean(1, keepdims=True))   # torch spelling
    check(F.softmax(Tensor(X), dim=0), np_softmax(X, 0))


# ---------------------------------------------------------------------- torch semantics

def test_layernorm_default_eps_is_1e_5_like_torch():
    torch = pytest.importorskip("torch")
    small = (rng.standard_normal((3, 16)) * 1e-3).astype(np.float32)   # var ~1e-6 < eps
    ref = torch.nn.functional.layer_norm(torch.from_numpy(small), (16,)).numpy()
    check(Tensor(small).layernorm(), ref, rtol=1e-4, atol=1e-5)


def test_layernorm_weight_and_bias_are_each_optional():
    torch = pytest.importorskip("torch")
    w = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    t = torch.from_numpy(X)
    ln = torch.nn.functional.layer_norm
    check(F.layernorm(Tensor(X), Tensor(w)), ln(t, (4,), torch.from_numpy(w)).numpy(),
          rtol=1e-4, atol=1e-5)
    check(Tensor(X).layernorm(bias=Tensor(b)), ln(t, (4,), None, torch.from_numpy(b)).numpy(),
          rtol=1e-4, atol=1e-5)


def test_max_pool2d_border_windows_see_minus_inf_not_zero():
    neg = -1.0 - rng.random((1, 2, 5, 5)).astype(np.float32)      # every value < -1
    out = check(F.max_pool2d(Tensor(neg), 3, stride=2, padding=1),
                _torch_pool(neg, 3, 2, 1) if _has_torch() else _np_maxpool(neg, 3, 2, 1))
    assert (out < -1).all()                                       # zero padding would give 0
    out = Tensor(neg).max_pool2d(2, padding=1).numpy()
    assert out.shape == (1, 2, 3, 3) and (out < -1).all()


def _has_torch():
    return importlib.util.find_spec("torch") is not None


def _torch_pool(a, k, s, p):
    import torch
    return torch.nn.functional.max_pool2d(torch.from_numpy(a), k, s, p).numpy()


def _np_maxpool(a, k, s, p):
    ap = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    ho, wo = (a.shape[2] + 2 * p - k) // s + 1, (a.shape[3] + 2 * p - k) // s + 1
    return np.stack([ap[:, :, i:i + s * (ho - 1) + 1:s, j:j + s * (wo - 1) + 1:s]
                     for i in range(k) for j in range(k)]).max(0)


def test_gelu_is_the_exact_erf_form_not_the_tanh_approximation():
    torch = pytest.importorskip("torch")
    v = np.linspace(-4, 4, 81, dtype=np.float32)
    exact = torch.nn.functional.gelu(torch.from_numpy(v)).numpy()
    approx = torch.nn.functional.gelu(torch.from_numpy(v), approximate="tanh").numpy()
    out = check(F.gelu(Tensor(v)), exact, rtol=1e-5, atol=2e-6)
    assert np.abs(out - approx).max() > 1e-4


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("kw", [
    dict(stride=2, padding=2, dilation=2, groups=2),
    dict(stride=(2, 1), padding=(0, 1), groups=4),
    dict(padding="same", dilation=(1, 2)),
    dict(padding="valid"),
])
def test_conv2d_options_against_torch(kw):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    groups = kw.get("groups", 1)
    w = rng.standard_normal((8, 4 // groups, 2, 4)).astype(np.float32)    # even kernel
    b = rng.standard_normal(8).astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                     torch.from_numpy(b), **kw).numpy()
    check(F.conv2d(Tensor(x), Tensor(w), Tensor(b), **kw), ref, rtol=1e-4, atol=1e-4)


def test_softmax_family_is_stable_for_large_inputs():
    torch = pytest.importorskip("torch")
    big = (X * 1000).astype(np.float32)
    t = torch.from_numpy(big)
    check(Tensor(big).softmax(-1), torch.softmax(t, -1).numpy(), atol=1e-6)
    check(Tensor(big).log_softmax(1), torch.log_softmax(t, 1).numpy(), rtol=1e-5, atol=1e-3)


# ---------------------------------------------------------------------- index maps, layering

# name -> (the view on a Tensor, the same view in numpy)
VIEWS = {
    "reshape": (lambda t: t.reshape(3, 8), lambda a: a.reshape(3, 8)),
    "permute": (lambda t: t.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0)),
    "transpose": (lambda t: F.transpose(t, 1, 2), lambda a: a.swapaxes(1, 2)),
    "expand": (lambda t: t[:, :1].expand(3, 2, 1, 4),
               lambda a: np.broadcast_to(a[:, :1], (3, 2, 1, 4))),
    "pad": (lambda t: F.pad(t, ((1, 0), (0, 0), (2, 2)), value=-1.0),
            lambda a: np.pad(a, ((1, 0), (0, 0), (2, 2)), constant_values=-1.0)),
    "getitem": (lambda t: t[1, ::2, 1:], lambda a: a[1, ::2, 1:]),
    "slice": (lambda t: F.slice(t, 2, 1, 3), lambda a: a[:, :, 1:3]),
    "concat": (lambda t: F.concat([t, t[:, :1]], axis=1),
               lambda a: np.concatenate([a, a[:, :1]], axis=1)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_index_maps_copy_nothing(name):
    """reshape / permute / ... read the input directly: no buffer is allocated."""
    view, ref = VIEWS[name]
    kern = sl.compile(view(Tensor.input("t", X.shape)))
    assert "allocate" not in kern.loop_ir
    np.testing.assert_array_equal(kern(t=X), ref(X))


def test_ops_lower_to_algorithm_funcs_only():
    """A Tensor lowers to an output Func and a Schedule; the frontend's modules never reach
    for the loop IR or a code generator."""
    y = F.conv2d(Tensor.input("x", (1, 4, 6, 6)), Tensor.input("w", (4, 4, 3, 3)), padding=1)
    out, sched = y.__schedlang_pipeline__()
    assert isinstance(out, sl.Func) and isinstance(sched, sl.Schedule)
    src_dir = pathlib.Path(F.__file__).parent
    for path in sorted(src_dir.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for n in names:
                assert not n.startswith(("schedlang.lower", "schedlang.targets.llvm",
                                         "llvmlite")), \
                    f"{path.name} imports {n}"


# ---------------------------------------------------------------------- user mistakes

MISTAKES = [
    ("getitem", lambda: Tensor(X)[::0]),
    ("getitem", lambda: Tensor(X)[0, 0, 0, 0]),
    ("slice", lambda: F.slice(Tensor(X), 3, 0, 1)),
    ("item", lambda: Tensor(X).item()),
    ("conv2d", lambda: F.conv2d(Tensor(IMG), Tensor(WGT), padding="full")),
    ("conv2d", lambda: F.conv2d(Tensor(IMG), Tensor(WGT), stride=2, padding="same")),
    ("conv2d", lambda: F.conv2d(Tensor(IMG), Tensor(WGT), groups=3)),
    ("matmul", lambda: F.matmul(Tensor(M), 3)),
    ("softmax", lambda: Tensor(X).softmax(3)),
    ("cast", lambda: Tensor(X).cast("float31")),
    ("Tensor.input", lambda: Tensor.input("x", (2, 3), dtype="float31")),
    ("add", lambda: Tensor(X) + "1"),
    ("concat", lambda: F.concat([Tensor(X), Tensor(M)])),
    ("max_pool2d", lambda: Tensor(IMG).max_pool2d(9)),
    ("layernorm", lambda: Tensor(X).layernorm(Tensor(np.ones(3, np.float32)))),
]


@pytest.mark.parametrize("op,make", MISTAKES, ids=[f"{m[0]}{n}" for n, m in enumerate(MISTAKES)])
def test_user_mistakes_are_schedlang_errors_naming_the_op(op, make):
    with pytest.raises(sl.SchedlangError) as info:
        make()
    assert op in str(info.value)


def test_iterating_a_tensor_gives_its_rows():
    rows = [r.numpy() for r in Tensor(X[:, 0])]
    assert len(rows) == 2
    np.testing.assert_array_equal(np.stack(rows), X[:, 0])
    check(Tensor(X).concat(Tensor(X[:1]), axis=0), np.concatenate([X, X[:1]]))
    check(F.concat([Tensor(X), Tensor(X[:, :2])], 1), np.concatenate([X, X[:, :2]], 1))
