"""Index maps of the tensor frontend: reshape, permute, expand, pad, getitem, concat."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

from .conftest import check

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (24,), (2, 12), (3, 8), (4, 3, 2),
                                   (1, 24, 1), (2, 2, 6), (-1, 8)])
def test_reshape(shape):
    check(Tensor(X).reshape(*shape), X.reshape(shape))


def test_reshape_of_a_view_and_errors():
    check(Tensor(X).permute(2, 0, 1).reshape(4, 6), X.transpose(2, 0, 1).reshape(4, 6))
    check(F.reshape(Tensor(X), (3, -1)), X.reshape(3, -1))
    with pytest.raises(sl.AlgorithmError, match=r"\(2, 3, 4\).*\(5, 5\)"):
        Tensor(X).reshape(5, 5)


def test_permute_transpose_T():
    check(Tensor(X).permute(2, 0, 1), X.transpose(2, 0, 1))
    check(F.permute(Tensor(X), (1, -1, 0)), X.transpose(1, 2, 0))
    check(Tensor(X).transpose(0, 2), X.swapaxes(0, 2))
    check(Tensor(X[0]).T, X[0].T)
    with pytest.raises(sl.AlgorithmError, match="permutation"):
        Tensor(X).permute(0, 0, 1)


def test_expand_squeeze_unsqueeze_flatten():
    col = X[:, :1, :1]
    check(Tensor(col).expand(2, 3, 4), np.broadcast_to(col, (2, 3, 4)))
    check(Tensor(col).expand(5, -1, 3, 4), np.broadcast_to(col, (5, 2, 3, 4)))
    check(Tensor(col).squeeze(), col.squeeze())
    check(Tensor(X).unsqueeze(1), X[:, None])
    check(Tensor(X).flatten(1), X.reshape(2, 12))
    with pytest.raises(sl.AlgorithmError, match="cannot expand"):
        Tensor(X).expand(2, 5, 4)


def test_pad():
    check(Tensor(X).pad(((0, 0), (1, 2), (3, 0)), value=-1.5),
          np.pad(X, ((0, 0), (1, 2), (3, 0)), constant_values=-1.5))
    check(F.pad(Tensor(X), 1), np.pad(X, 1))
    xi = X.astype(np.int32)
    check(Tensor(xi).pad(((1, 1), (0, 0), (2, 2)), value=7),
          np.pad(xi, ((1, 1), (0, 0), (2, 2)), constant_values=7))
    with pytest.raises(sl.AlgorithmError, match="pad_width"):
        Tensor(X).pad(((1, 1), (1, 1)))


@pytest.mark.parametrize("key", [
    (0,), (-1,), (slice(1, None),), (slice(None), slice(0, 2), slice(None, None, 2)),
    (1, -2, slice(1, 3)), (Ellipsis, 3), (None, 0), (slice(None, None, -1),),
    (slice(None), slice(None, None, -2), slice(-3, -1)),
])
def test_getitem(key):
    check(Tensor(X)[key], X[key])


def test_getitem_errors():
    with pytest.raises(sl.AlgorithmError, match="out of range"):
        Tensor(X)[2]
    with pytest.raises(sl.AlgorithmError, match="too many"):
        Tensor(X)[0, 0, 0, 0]


def test_concat():
    a, b = X, np.ones((2, 5, 4), np.float32)
    check(F.concat([Tensor(a), Tensor(b)], axis=1), np.concatenate([a, b], 1))
    check(F.concat([Tensor(a), Tensor(a * 2), Tensor(a[:, :, :1])], axis=-1),
          np.concatenate([a, a * 2, a[:, :, :1]], -1))
    ai = X.astype(np.int32)
    check(Tensor(ai).concat([Tensor(a)], axis=0), np.concatenate([ai, a]))  # int32 + float32 -> float64
    with pytest.raises(sl.AlgorithmError, match="differ"):
        F.concat([Tensor(a), Tensor(b)], axis=0)


def test_chain_of_views_reads_the_source_directly():
    t = Tensor(X).reshape(6, 4).T[1:, ::2].pad(((1, 0), (0, 1)))
    check(t, np.pad(X.reshape(6, 4).T[1:, ::2], ((1, 0), (0, 1))))


# ---------------------------------------------------------------------- conformance fixes

def test_shape_arguments_must_be_ints():
    with pytest.raises(sl.AlgorithmError, match=r"reshape.*2\.5"):
        Tensor(X).reshape(2.5, 12)                 # was silently truncated to 2
    with pytest.raises(sl.AlgorithmError, match="expand"):
        Tensor(X[:, :1]).expand(2, "3", 4)
    with pytest.raises(sl.AlgorithmError, match="permute"):
        Tensor(X).permute(0, 1.0, 2)


def test_expand_with_a_negative_size_names_expand_and_the_size():
    with pytest.raises(sl.AlgorithmError, match=r"expand: size -2 in \(2, -2, 4\) is negative; "
                                                r"only -1 \(keep this dimension\) is allowed"):
        Tensor(np.zeros((2, 1, 4), np.float32)).expand(2, -2, 4)


def test_transpose_without_dims_reverses_them_as_numpy():
    check(Tensor(X).transpose(), X.transpose())
    check(F.transpose(Tensor(X[0])), X[0].T)
    check(Tensor(X).transpose(0, 2), X.swapaxes(0, 2))
    with pytest.raises(sl.AlgorithmError, match="transpose"):
        Tensor(X).transpose(1)


def test_pad_widths_broadcast_as_numpy():
    check(F.pad(Tensor(X), ((1, 2),)), np.pad(X, ((1, 2),)))
    check(Tensor(X).pad((0, 2)), np.pad(X, (0, 2)))
    check(Tensor(X).pad(1), np.pad(X, 1))
    with pytest.raises(sl.AlgorithmError, match="pad"):
        Tensor(X).pad(1.5)


def test_pad_numpy_keywords_and_dtype():
    w = ((0, 0), (1, 1), (2, 0))
    check(F.pad(Tensor(X), w, constant_values=-3.0), np.pad(X, w, constant_values=-3.0))
    check(Tensor(X).pad(w, mode="constant"), np.pad(X, w, mode="constant"))
    xi = X.astype(np.int32)
    check(Tensor(xi).pad(w, value=1.7), np.pad(xi, w, constant_values=1.7))   # stays int32
    check(Tensor(X).pad(w, value=np.float64(0.5)), np.pad(X, w, constant_values=0.5))
    with pytest.raises(sl.AlgorithmError, match="pad.*300"):
        Tensor(xi.astype(np.uint8)).pad(w, value=300)
    with pytest.raises(sl.AlgorithmError, match="pad.*mode"):
        Tensor(X).pad(w, mode="mean")


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
def test_pad_modes_as_numpy(mode):
    a = X[0]
    for w in (((1, 2), (3, 0)), ((5, 7), (9, 1))):      # the second wider than the array
        check(Tensor(a).pad(w, mode=mode), np.pad(a, w, mode=mode))
    check(Tensor(a[:, :1]).pad(((0, 0), (2, 3)), mode=mode),
          np.pad(a[:, :1], ((0, 0), (2, 3)), mode=mode))


def test_concat_dim_keyword_and_int64_promotion():
    check(F.concat([Tensor(X), Tensor(X[:, :1])], dim=1), np.concatenate([X, X[:, :1]], 1))
    n = np.arange(24).reshape(2, 3, 4)
    check(F.concat([Tensor(n), Tensor(X)], axis=-1), np.concatenate([n, X], -1))
    with pytest.raises(sl.AlgorithmError, match="concat"):
        F.concat([Tensor(X), Tensor(X)], axis=0, dim=0)


def test_getitem_with_a_tensor_key_names_getitem():
    with pytest.raises(sl.AlgorithmError, match="getitem"):
        Tensor(X)[Tensor(np.array([0]))]


@pytest.mark.parametrize("width", [((1,), (2,)), 1, (1,), (1, 2), ((1, 2),), ((0, 1), (2, 0))])
def test_pad_widths_broadcast_as_numpy(width):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(F.pad(Tensor(a), width), np.pad(a, width))


@pytest.mark.parametrize("fill", [((1, 2), (3, 4)), (5, 6), ((7,), (8,)), 9.5, ((1, 2),)])
def test_pad_fill_per_dim_and_side_as_numpy(fill):
    # numpy pads one axis after the other: a corner takes the last axis's fill
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(F.pad(Tensor(a), ((1, 1), (2, 1)), constant_values=fill),
          np.pad(a, ((1, 1), (2, 1)), constant_values=fill))
    i = np.arange(6, dtype=np.int16).reshape(2, 3)
    check(F.pad(Tensor(i), 1, constant_values=fill), np.pad(i, 1, constant_values=fill))


def test_shape_ops_take_numpy_and_torch_keywords():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = Tensor(a)
    check(F.transpose(t, axes=(2, 0, 1)), np.transpose(a, axes=(2, 0, 1)))
    check(t.permute(dims=(2, 0, 1)), a.transpose(2, 0, 1))
    check(t.reshape(shape=(4, 6)), a.reshape(4, 6))
    check(t[:, :1].expand(size=(2, 5, 4)), np.broadcast_to(a[:, :1], (2, 5, 4)))
    with pytest.raises(sl.AlgorithmError, match="reshape: give the shape either positionally"):
        t.reshape((4, 6), shape=(4, 6))
    with pytest.raises(sl.AlgorithmError, match="reshape: unexpected keyword argument 'shap'"):
        t.reshape(shap=(4, 6))


def test_long_chains_of_views_build_and_run():
    # each view is a call into its source's element: a chain longer than Python's
    # recursion limit is evaluated on a large stack, not a RecursionError
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    y = Tensor(a)
    for _ in range(601):
        y = y.T
    check(y, a.T)
    y = Tensor(a)
    for _ in range(250):
        y = y.T + 1
    check(y, a + 250)


@pytest.mark.parametrize("op, ref", [
    (lambda t: t.reshape(-1), lambda a: a.reshape(-1)),
    (lambda t: t.reshape(4, 0, 2), lambda a: a.reshape(4, 0, 2)),
    (lambda t: t.flatten(1), lambda a: a.reshape(2, 0)),
    (lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    (lambda t: t.log_softmax(-1), lambda a: a),
    (lambda t: t.layernorm(), lambda a: a),
    (lambda t: t.sum(-1), lambda a: a.sum(-1)),
])
def test_ops_on_tensors_with_an_empty_inner_dimension(op, ref):
    # a zero-sized dim that is not the first: nothing is read, and nothing may fail
    e = np.zeros((2, 0, 4), np.float32)
    check(op(Tensor(e)), ref(e))
    assert sl.compile(op(Tensor.input("e", (2, 0, 4))))(e=e).shape == ref(e).shape


@pytest.mark.parametrize("key", [np.s_[::2**31], np.s_[::-2**40], np.s_[1::2**40, ::-2**33],
                                 np.s_[:, 2::2**35]])
def test_slice_steps_beyond_int32_select_one_element_as_numpy(key):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(Tensor(a)[key], a[key])


def test_a_chain_of_reshapes_is_one_reshape_of_the_first_source():
    # each link used to add a div / mod; past 64 nodes the chain was stored link by link,
    # and 500 links took 30 s to compile
    x = Tensor(X)
    y = x
    for k in range(200):
        y = y.reshape(4, 6) if k % 2 == 0 else y.reshape(3, 8)
    assert y.op == "reshape" and y.srcs[0] is x
    check(y, X.reshape(3, 8))
    z = Tensor(X).permute(2, 0, 1).reshape(4, 6).reshape(24)
    assert z.srcs[0].op == "permute"
    check(z, X.transpose(2, 0, 1).reshape(24))


def test_a_permute_of_a_permute_is_one_permute():
    x = Tensor(X)
    assert x.T.T is x
    y = x.permute(2, 0, 1).permute(1, 2, 0).permute(0, 2, 1)
    assert y.op == "permute" and y.srcs[0] is x
    check(y, X.transpose(2, 0, 1).transpose(1, 2, 0).transpose(0, 2, 1))
    chain = x
    for _ in range(1001):
        chain = chain.T
    check(chain, X.T)


@pytest.mark.parametrize("widths", [(13, 7, 20), (16, 16), (1, 40, 3, 17)])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_concat_of_pieces_of_odd_widths_matches_numpy(widths, axis):
    # a vector of the concat's loop that lies wholly before or after a piece loads one
    # clamped element and broadcasts it (was a lane-by-lane gather per piece: 22x numpy)
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal((5, w) if axis != 0 else (w, 5)).astype(np.float32)
              for w in widths]
    ins = [Tensor.input(f"p{k}", a.shape) for k, a in enumerate(arrays)]
    kern = sl.compile(F.concat(ins, axis))
    np.testing.assert_array_equal(kern(**{f"p{k}": a for k, a in enumerate(arrays)}),
                                  np.concatenate(arrays, axis))


def test_clamp_edge_with_a_border_wider_than_a_vector():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    c = sl.clamp_edge(A)
    f = sl.Func("f", shape=(A.shape[0] + 80,))
    f[x] = c[x - 40]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    a = np.arange(23, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), np.pad(a, 40, mode="edge"))
