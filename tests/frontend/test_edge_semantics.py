"""Edge cases of the frontend's ops against numpy / torch: 0-d tensors, axis spellings,
half-precision statistics, other libraries' arrays as operands, and the errors for
misuse (each message names the op and the argument)."""
import re

import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

rng = np.random.default_rng(41)


def _erf(a):
    import math
    return np.vectorize(math.erf)(a)


def test_reductions_of_a_0d_tensor_take_axis_0_or_minus_1_as_numpy():
    z = Tensor(np.float32(3.0))
    for got in (z.sum(0), z.max(-1), z.min(0), z.mean((0,)), F.sum(z, axis=-1, keepdims=True)):
        assert got.shape == () and got.numpy() == 3.0
    with pytest.raises(sl.AlgorithmError, match="sum: axis 1 is out of range"):
        z.sum(1)


def test_softmax_of_a_0d_tensor_is_one_as_torch():
    z = Tensor(np.float32(-7.5))
    assert z.softmax(-1).numpy() == 1.0 and F.softmax(z, 0).shape == ()
    assert z.log_softmax(0).numpy() == 0.0
    with pytest.raises(sl.AlgorithmError, match="softmax: axis 1 is out of range"):
        z.softmax(1)


def test_softmax_takes_axis_or_dim_not_both():
    x = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(F.softmax(Tensor(x), dim=0).numpy().sum(0), 1, rtol=1e-6)
    np.testing.assert_allclose(Tensor(x).softmax(0).numpy().sum(0), 1, rtol=1e-6)
    np.testing.assert_allclose(Tensor(x).softmax().numpy().sum(1), 1, rtol=1e-6)
    for op in (F.softmax, F.log_softmax):
        with pytest.raises(sl.AlgorithmError, match=f"{op.__name__}: give axis= or dim=, not "
                                                    "both"):
            op(Tensor(x), 0, dim=1)


def test_concat_of_0d_tensors_is_refused_and_axis_none_joins_them_flattened():
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    got = F.concat([Tensor(a), Tensor(b)], axis=None).numpy()
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=None))
    z = Tensor(np.float32(1.0))
    np.testing.assert_array_equal(F.concat([z, z], axis=None).numpy(), [1.0, 1.0])
    with pytest.raises(sl.AlgorithmError, match="concat: 0-d tensors cannot be joined"):
        F.concat([z, z])
    # the default is still axis 0
    assert F.concat([Tensor(a), Tensor(a)]).shape == (4, 3)


def test_a_0d_integer_array_indexes_as_an_int():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(Tensor(x)[np.array(1), np.int64(-1)].numpy(),
                                  x[np.array(1), np.int64(-1)])
    with pytest.raises(sl.AlgorithmError, match="getitem: unsupported index"):
        Tensor(x)[np.array([1])]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_layernorm_and_softmax_compute_in_float32_as_torch(dtype):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, dtype)
    # values far from 0: the mean in 16 bits loses the digits the deviations live in
    x64 = rng.standard_normal((2, 256)) + 100
    xt = torch.from_numpy(x64).to(tdt)
    w = torch.from_numpy(rng.random(256)).to(tdt)
    sdt = getattr(sl, dtype)
    X, W = Tensor.input("x", (2, 256), sdt), Tensor.input("w", (256,), sdt)

    def back(out):
        # kernels return bfloat16 as its bits (numpy has no bfloat16)
        t = torch.from_numpy(out.view(np.int16) if dtype == "bfloat16" else out)
        return (t.view(tdt) if dtype == "bfloat16" else t).double()
    ref = torch.nn.functional.layer_norm(xt.double(), (256,), w.double(), w.double())
    got = back(sl.compile(F.layernorm(X, W, W))(x=xt, w=w))
    theirs = torch.nn.functional.layer_norm(xt, (256,), w, w).double()
    # as close as torch's own half-precision result (it was 60x further before)
    assert (got - ref).abs().max() <= 1.5 * (theirs - ref).abs().max() + 1e-3
    xs = (xt.double() - 100).to(tdt)
    s_ref = torch.softmax(xs.double(), -1)
    s_got = back(sl.compile(F.softmax(X))(x=xs))
    s_theirs = torch.softmax(xs, -1).double()
    assert (s_got - s_ref).abs().max() <= 1.5 * (s_theirs - s_ref).abs().max() + 1e-4


def _half_values(dtype):
    """Every finite float16 / bfloat16 value in (-20, 20), as float16 / float32 data."""
    bits = np.arange(2**16, dtype=np.uint32)
    x = bits.astype(np.uint16).view(np.float16) if dtype == "float16" else \
        (bits << 16).view(np.float32)
    return x[np.isfinite(x) & (np.abs(x) < 20)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["gelu", "sigmoid"])
def test_half_precision_gelu_and_sigmoid_compute_in_float32_and_round_once(op, dtype):
    x = _half_values(dtype)
    x64 = x.astype(np.float64)
    exact = 0.5 * x64 * (1 + _erf(x64 / np.sqrt(2))) if op == "gelu" else 1 / (1 + np.exp(-x64))
    got = getattr(Tensor(x).cast(getattr(sl, dtype)), op)()
    assert got.dtype == getattr(sl, dtype)
    got = got.numpy().astype(np.float64)
    # one unit in the last place of the exact value (10 / 7 fraction bits; subnormals' below)
    fraction_bits, min_exponent = (10, -14) if dtype == "float16" else (7, -126)
    exponent = np.floor(np.log2(np.maximum(np.abs(exact), 2.0 ** min_exponent)))
    ulps = np.abs(got - exact) / 2.0 ** (exponent - fraction_bits)
    if op == "gelu":
        # below -3.8, 1 + erf(x / sqrt(2)) cancels in float32, as in torch's float32 gelu
        ulps = ulps[x > -3.8]
    assert ulps.max() <= 1       # in 16 bits: up to 2042 float16 ulps, sigmoid(-11.1) = 0


def test_other_libraries_arrays_are_operands_like_numpy_arrays():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose((Tensor(a) @ torch.from_numpy(b)).numpy(), a @ b, rtol=1e-5)
    np.testing.assert_allclose(F.relu(torch.from_numpy(a)).numpy(), np.maximum(a, 0))
    np.testing.assert_allclose((Tensor(a) + torch.from_numpy(a)).numpy(), 2 * a)


@pytest.mark.parametrize("call, message", [
    (lambda x: F.relu("a"), "relu: cannot use a str as a Tensor operand"),
    (lambda x: F.sum("a"), "sum: expected a Tensor or an array, got a str"),
    (lambda x: x + {1: 2}, "add: cannot use a dict as a Tensor operand"),
    (lambda x: F.layernorm(x, eps="a"), "layernorm: eps must be a number, got 'a'"),
    (lambda x: F.conv2d(x.reshape(1, 3, 4, 1), np.ones((3, 3, 1, 1), np.float32), groups=0),
     "conv2d: groups must be an int >= 1, got 0"),
    (lambda x: F.cast(sl.int8, x), "cast: the Tensor comes first, then the dtype"),
    # arguments an op's signature cannot take: the op and its signature, not a TypeError
    (lambda x: x.pad(1, foo=1), "pad: got an unexpected keyword argument 'foo'; it takes "
                                "pad(x, pad_width, value=0, mode='constant'"),
    (lambda x: F.concat([x, x], foo=1), "concat: got an unexpected keyword argument 'foo'; "
                                        "it takes concat(tensors, *more, axis=0, dim=None)"),
    (lambda x: F.matmul(x, x, x), "matmul: too many positional arguments; it takes matmul(a, b)"),
    (lambda x: F.matmul(x), "matmul: missing a required argument: 'b'"),
    (lambda x: F.getitem(x, 0, 1), "getitem: too many positional arguments"),
    (lambda x: x.transpose(0, 1, foo=1), "transpose: got an unexpected keyword argument"),
    (lambda x: x.relu(1), "relu: too many positional arguments; it takes relu(x)"),
    (lambda x: Tensor.input("y"), "Tensor.input: missing a required argument: 'shape'; it "
                                  "takes Tensor.input(name, shape, dtype=sl.float32)"),
    (lambda x: Tensor(), "Tensor: missing a required argument: 'data'; it takes Tensor(data)"),
])
def test_misuse_names_the_op_and_the_argument(call, message):
    x = Tensor(np.ones((3, 4), np.float32))
    with pytest.raises(sl.AlgorithmError) as info:
        call(x)
    assert message in str(info.value)


def test_an_input_named_like_a_generated_func_does_not_clash():
    # the frontend names its Funcs sum<N>, out<N>, ...: those names skip the inputs'
    from schedlang.frontend import tensor as tensor_module
    n = next(tensor_module._names) + 1
    for name in (f"sum{n}", f"out{n + 1}", f"sum{n + 2}"):
        x = Tensor.input(name, (2, 3))
        kern = sl.compile(x.sum(1) + 1)
        np.testing.assert_array_equal(kern(**{name: np.ones((2, 3), np.float32)}), [4.0, 4.0])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32, np.int64])
def test_math_of_integers_gives_numpys_float_type_and_torchs_where_numpy_has_none(dtype):
    a = np.array([1, 0, 1, 1], dtype) if dtype is np.bool_ else np.array([1, 2, 3, 9], dtype)
    for name in ("exp", "log", "sqrt", "sin", "cos", "tanh"):
        with np.errstate(divide="ignore"):          # log(0) of a False
            got, ref = getattr(Tensor(a), name)().numpy(), getattr(np, name)(a)
        assert got.dtype == ref.dtype, (name, got.dtype, ref.dtype)
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=1e-3)
    # erf, rsqrt and sigmoid are not numpy's: integers give float32, as torch
    assert {Tensor(a).erf().dtype, Tensor(a).rsqrt().dtype, Tensor(a).sigmoid().dtype} == \
        {sl.float32}


def test_softmax_over_an_empty_axis_is_empty_as_torch():
    z = np.zeros((2, 0), np.float32)
    for op in (F.softmax, F.log_softmax):
        for axis in (1, -1, 0):
            got = op(Tensor(z), axis).numpy()
            assert got.shape == (2, 0) and got.dtype == np.float32


def test_integer_pow_is_exact_and_wraps_as_numpy():
    a = np.array([2, 3, -5, 7, 0, 1, -1], np.int32)
    b = np.array([3, 20, 13, 31, 0, 5, 7], np.int32)
    np.testing.assert_array_equal((Tensor(a) ** Tensor(b)).numpy(), a ** b)
    np.testing.assert_array_equal((2 ** Tensor(b)).numpy(), 2 ** b)
    u = np.array([200, 3], np.uint8)
    got = (Tensor(u) ** 3).numpy()
    assert got.dtype == np.uint8 and got.tolist() == (u ** 3).tolist()
    with pytest.raises(sl.AlgorithmError, match="pow: an integer tensor to the negative power -1"):
        Tensor(a) ** -1


def test_concat_promotes_over_every_operand_even_empty_ones():
    a = np.ones((2, 3), np.int8)
    for parts, axis in [([a, np.zeros((2, 0), np.int64)], 1),
                        ([np.ones((2, 3), np.float32), np.zeros((0, 3))], 0),
                        ([np.zeros((0, 3), np.float32), np.zeros((0, 3))], 0),
                        ([a, np.ones((2, 1), np.uint8)], 1)]:
        got = F.concat([Tensor(p) for p in parts], axis=axis).numpy()
        ref = np.concatenate(parts, axis=axis)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)


def test_constant_pad_of_an_empty_dimension_is_the_fill():
    z = np.zeros((0, 3), np.float32)
    got = F.pad(Tensor(z), ((1, 1), (0, 1)), constant_values=2).numpy()
    np.testing.assert_array_equal(got, np.pad(z, ((1, 1), (0, 1)), constant_values=2))
    with pytest.raises(sl.AlgorithmError, match="pad: mode 'edge' cannot extend the empty"):
        F.pad(Tensor(z), ((1, 1), (0, 0)), mode="edge")
    # a fill per dim and side, as numpy: where several axes pad an element, the last wins
    for width in (1, ((0, 1), (2, 0))):
        fills = ((1, 2), (3, 4))
        got = Tensor(z).pad(width, constant_values=fills).numpy()
        np.testing.assert_array_equal(got, np.pad(z, width, constant_values=fills))


def test_integer_avg_pool_divides_in_float64_whatever_the_options():
    x = np.arange(36, dtype=np.int32).reshape(1, 1, 6, 6)
    for kw in [{}, dict(padding=1), dict(padding=1, count_include_pad=False),
               dict(stride=4, ceil_mode=True), dict(divisor_override=2)]:
        got = F.avg_pool2d(Tensor(x), 3, **kw).numpy()
        assert got.dtype == np.float64, kw
        torch = pytest.importorskip("torch")
        ref = torch.nn.functional.avg_pool2d(torch.from_numpy(x).double(), 3, **kw).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_float_and_int_of_a_one_element_tensor_and_clear_misuse_errors():
    assert float(Tensor(np.float32(2)) * 3) == 6.0 and int(Tensor(np.int32(7))) == 7
    with pytest.raises(sl.AlgorithmError, match="item\\(\\): the Tensor has 3 elements"):
        float(Tensor(np.ones(3)))
    for bad in (None, 5):
        with pytest.raises(sl.AlgorithmError, match="concat: pass the tensors as one list"):
            F.concat(bad)
    with pytest.raises(sl.AlgorithmError, match="flatten: start_dim 2 comes after end_dim 0"):
        Tensor(np.zeros((2, 3, 4), np.float32)).flatten(2, 0)


def test_an_input_read_only_through_an_empty_slice_stays_a_kernel_argument():
    # the user passes the inputs the graph was built from; one whose every read is an empty
    # slice is still an argument, checked like the others
    y = Tensor.input("fy", (3,))
    k = sl.compile(y[:0].pad(((2, 0),), constant_values=1.0))
    np.testing.assert_array_equal(k(fy=np.zeros(3, np.float32)), [1, 1])
    with pytest.raises(sl.ArgumentError, match="fy"):
        k(fy=np.zeros(4, np.float32))
    with pytest.raises(sl.ArgumentError, match="fy"):
        k()
    x = Tensor.input("fz", (2, 3, 4))
    ones = np.ones((2, 1, 4), np.float32)
    for t in (F.concat([x[:, 3:], Tensor(ones)], axis=1),
              F.concat([x[:, 3:], x[:, :0], Tensor(ones)], axis=1)):
        k = sl.compile(t)
        np.testing.assert_array_equal(k(fz=np.zeros((2, 3, 4), np.float32)), ones)
    a, b = Tensor.input("a", (3, 0)), Tensor.input("b", (0, 4))
    k = sl.compile(a @ b)
    np.testing.assert_array_equal(k(a=np.ones((3, 0), np.float32), b=np.ones((0, 4), np.float32)),
                                  np.zeros((3, 4), np.float32))


def test_softmax_of_a_row_broadcast_to_every_row_as_torch():
    # every row reads the same input row: the default schedule's prefetch of the next row
    # does not apply, and must not be made
    torch = pytest.importorskip("torch")
    a = np.arange(3, dtype=np.float32)
    want = torch.softmax(torch.tensor(a), -1).numpy()
    for got in (Tensor(a)[None].softmax(-1), Tensor(a).reshape(1, 3).softmax(-1),
                Tensor(a).expand(4, 3).softmax(-1)):
        np.testing.assert_allclose(got.numpy(), np.broadcast_to(want, got.shape), rtol=1e-6)
    kern = sl.compile(Tensor.input("x", (3,))[None].softmax(-1))
    np.testing.assert_allclose(kern(x=a), want[None], rtol=1e-6)
    # a one-row operand of a concat is read at one row too
    for shape, axis in (((1, 3), 0), ((3, 1, 3), 1), ((2, 3), 0)):
        b = rng.random(shape, dtype=np.float32)
        tb = torch.tensor(b)
        want = torch.softmax(torch.cat([tb, 2 * tb], axis), -1).numpy()
        np.testing.assert_allclose(F.concat([Tensor(b), Tensor(b) * 2], axis).softmax(-1).numpy(),
                                   want, rtol=1e-6)


def test_a_result_dimension_past_the_int32_loop_range_names_the_op():
    v = np.arange(7, dtype=np.int32)
    big = "elements, more than 2147483647, the largest extent of one dimension"
    with pytest.raises(sl.AlgorithmError, match=r"expand: dimension 1 of the result would have "
                                                r"2147483651 " + big):
        Tensor(v).reshape(7, 1).expand(7, 2 ** 31 + 3)
    with pytest.raises(sl.AlgorithmError, match=r"pad: dimension 0 of the result would have "
                                                r"2147483655 " + big):
        Tensor(v).pad(((2 ** 31, 0),))
    with pytest.raises(sl.AlgorithmError, match=r"2147483648 is more than 2147483647"):
        Tensor.input("x", (2 ** 31,))


def test_two_tensor_inputs_of_one_name_are_refused_with_what_to_do():
    with pytest.raises(sl.AlgorithmError, match=re.escape(
            "two different Tensor.input('x') meet in this graph; give each Tensor.input its own "
            "name")):
        sl.compile(Tensor.input("x", (3,)) + Tensor.input("x", (3,)))
    with pytest.raises(sl.ScheduleError, match=re.escape(
            "both named 'y'; give each a unique name: sl.Input(\"name\", ...) (or "
            "Tensor.input(\"name\", ...))")):
        sl.compile((Tensor.input("y", (3,)), Tensor.input("y", (3,)) * 2))
    x = Tensor.input("x", (3,))          # one input used twice is one argument
    np.testing.assert_array_equal(sl.compile(x + x)(x=np.ones(3, np.float32)), [2, 2, 2])


def test_an_empty_slice_of_a_stored_tensor_padded_or_concatenated():
    # the long chain and softmax's exponentials are stored Funcs of their own; an empty
    # slice reads none of them, and the pipeline leaves them out
    a = np.ones(3, np.float32)
    x = Tensor(a)
    big = x
    for _ in range(8):
        big = big * 1.1 + big
    np.testing.assert_array_equal(F.pad(big[3:], ((1, 1),)).numpy(), np.zeros(2, np.float32))
    np.testing.assert_array_equal(F.concat([big[3:], x], 0).numpy(), a)
    np.testing.assert_array_equal(F.pad(x.softmax(-1)[3:], ((1, 0),)).numpy(), [0.0])
    xin = Tensor.input("xin", (3,))
    kern = sl.compile(F.concat([xin.softmax(-1)[3:], xin], 0))
    np.testing.assert_array_equal(kern(xin=a), a)


def test_an_input_named_like_an_earlier_ops_result_is_told_to_rename_the_input():
    m = Tensor(np.ones((2, 3), np.float32)).max(1)
    x = Tensor.input(m.func.name, (2,))
    with pytest.raises(sl.ScheduleError, match=rf"both named '{m.func.name}'; give each a unique "
                                               r"name: rename the Input: .*Tensor.input"):
        sl.compile(x * m)


def test_shape_errors_name_the_users_inputs():
    A, B = Tensor.input("A", (3, 4)), Tensor.input("B", (5, 6))
    with pytest.raises(sl.AlgorithmError, match=re.escape(
            "matmul: shapes (3, 4) of A and (5, 6) of B do not match")):
        A @ B
    with pytest.raises(sl.AlgorithmError, match=re.escape(
            "add: shapes (3, 4) of A, (5, 6) of B do not broadcast")):
        A + B
    with pytest.raises(sl.AlgorithmError, match=re.escape(
            "reshape: cannot reshape a tensor of shape (3, 4) of A (12 elements) into (5, 5)")):
        A.reshape(5, 5)
    # an intermediate result has no name the user knows: its shape alone
    with pytest.raises(sl.AlgorithmError, match=re.escape(
            "matmul: shapes (3, 4) and (5, 6) of B do not match")):
        (A * 2) @ B


@pytest.mark.parametrize("cond", [np.array([0, 2, -3], np.int32), np.array([0.0, np.nan, 1.5]),
                                  np.array([True, False, True])])
def test_where_as_numpys(cond):
    """A number condition holds where nonzero and takes no part in the result's type;
    two int literals give int64, as np.where (and torch.where) do."""
    x = np.array([5, -6, 7], np.int8)
    for a, b in ((1, 0), (Tensor(x), 0), (Tensor(x), Tensor(x.astype(np.float32)))):
        got = F.where(Tensor(cond), a, b).numpy()
        want = np.where(cond, *(v.numpy() if isinstance(v, Tensor) else v for v in (a, b)))
        assert got.dtype == want.dtype, (a, b)
        np.testing.assert_array_equal(got, want)


def test_abs_of_bools_and_divmod_as_numpy():
    b = np.array([True, False])
    got = abs(Tensor(b)).numpy()
    assert got.dtype == np.bool_ and (got == np.abs(b)).all()
    i = np.array([7, -7, 3], np.int32)
    q, r = divmod(Tensor(i), 2)
    np.testing.assert_array_equal(q.numpy(), i // 2)
    np.testing.assert_array_equal(r.numpy(), i % 2)
    q, r = divmod(9, Tensor(i))
    np.testing.assert_array_equal(q.numpy(), 9 // i)
    np.testing.assert_array_equal(r.numpy(), 9 % i)


def test_integer_ops_without_a_common_integer_type_name_the_operands():
    i64 = Tensor(np.array([-1, 8], np.int64))
    u64 = Tensor(np.array([1, 2], np.uint64))
    for fn, sym, op in ((lambda a, b: a >> b, ">>", "right_shift"),
                        (lambda a, b: a << b, "<<", "left_shift"),
                        (lambda a, b: a | b, "|", "bitwise_or"),
                        (lambda a, b: a & b, "&", "bitwise_and"),
                        (F.bitwise_xor, "^", "bitwise_xor")):
        with pytest.raises(sl.AlgorithmError, match=re.escape(
                f"{op}: int64 {sym} uint64 has no common integer type (numpy refuses it too); "
                "cast one side first")):
            fn(i64, u64)
    # types that do have one still work, as in numpy
    a, b = np.array([8, -3], np.int8), np.array([3, 200], np.uint8)
    np.testing.assert_array_equal((Tensor(a) | Tensor(b)).numpy(), a | b)
    np.testing.assert_array_equal((Tensor(b) >> 1).numpy(), b >> 1)


def test_concat_takes_a_positional_none_axis_as_numpy():
    a, b = rng.random((2, 3)), rng.random(4)
    got = F.concat([Tensor(a), Tensor(b)], None).numpy()
    np.testing.assert_array_equal(got, np.concatenate([a, b], None))
    np.testing.assert_array_equal(F.concat(Tensor(a), Tensor(b), None).numpy(),
                                  np.concatenate([a, b], None))


def test_pools_and_convs_of_inputs_that_do_not_vary_over_the_window_as_torch():
    # a broadcast (expand) or size-1 view reads the same element at every tap: the
    # reduction's domain must still count every tap (it was refused as "uses no RDom")
    torch = pytest.importorskip("torch")
    a = np.array([1.0, -2.0], np.float32).reshape(1, 2, 1, 1)
    ta = torch.from_numpy(a).expand(1, 2, 5, 5)
    np.testing.assert_array_equal(F.max_pool2d(Tensor(a).expand(1, 2, 5, 5), 3).numpy(),
                                  torch.nn.functional.max_pool2d(ta, 3).numpy())
    np.testing.assert_allclose(F.avg_pool2d(Tensor(a).expand(1, 2, 5, 5), 3, 1, 1).numpy(),
                               torch.nn.functional.avg_pool2d(ta, 3, 1, 1).numpy(), rtol=1e-6)
    x = np.arange(24, dtype=np.float32)
    kern = sl.compile(F.max_pool2d(Tensor.input("x", (24,))[None, :, None, None], 1))
    np.testing.assert_array_equal(kern(x=x), x.reshape(1, 24, 1, 1))
    xs = np.random.default_rng(2).standard_normal((2, 8, 8)).astype(np.float32)
    ws = np.array([1.0, 2.0, -3.0, 0.5], np.float32)
    kern = sl.compile(F.conv2d(Tensor.input("x", (2, 8, 8)).unsqueeze(1),
                               Tensor.input("w", (4,)).reshape(4, 1, 1, 1)))
    np.testing.assert_allclose(kern(x=xs, w=ws), xs[:, None] * ws[None, :, None, None],
                               rtol=1e-6)
    # a 3x3 conv of an input constant over the plane
    w3 = np.random.default_rng(3).standard_normal((4, 2, 3, 3)).astype(np.float32)
    got = F.conv2d(Tensor(a).expand(1, 2, 6, 6), Tensor(w3), padding=1).numpy()
    ref = torch.nn.functional.conv2d(ta[:, :, :1, :1].expand(1, 2, 6, 6), torch.from_numpy(w3),
                                     padding=1).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
