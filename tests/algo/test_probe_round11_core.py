"""Round-11 conformance probes of SPEC sections 1 and 7: ``x ** n`` on float16 / bfloat16
is rounded once (as numpy's and torch's pow), size expressions with ``//``, ``%`` and
shifts bound the loops they shape, a name shared by a Param / size and an Input / output
is an AlgorithmError naming both, and a refused tail='pad' on a reduction suggests only a
tail that is legal there."""
import numpy as np
import pytest

import schedlang as sl


def _bf16_bits(x):
    """float32 -> bfloat16 bit patterns, rounded to nearest even (finite inputs)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [3, 8, 16])
def test_a_16_bit_float_to_an_int_literal_power_is_rounded_once(dtype, n):
    x = np.random.default_rng(0).uniform(0.5, 1.5, 512).astype(np.float32)
    if dtype == "float16":
        a = x.astype(np.float16)
        exact = a.astype(np.float64) ** n
        expect = exact.astype(np.float32).astype(np.float16)
    else:
        a = _bf16_bits(x)
        exact = _bf16_value(a).astype(np.float64) ** n
        expect = _bf16_bits(exact.astype(np.float32))
    A = sl.Input("A", getattr(sl, dtype), ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] ** n
    out = sl.compile(f)(A=a)
    assert out.dtype == expect.dtype
    # each product rounded to 16 bits would be several ulps off (x ** 16 in bfloat16: 2%)
    np.testing.assert_array_equal(out.view(np.uint16), expect.view(np.uint16))


def test_a_16_bit_float_power_still_overflows_to_inf_and_keeps_its_type():
    A = sl.Input("A", sl.float16, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] ** 16
    out = sl.compile(f)(A=np.array([3.0, -1.0, 0.5], np.float16))
    assert out.dtype == np.float16
    with np.errstate(over="ignore"):
        expect = np.array([3.0, -1.0, 0.5], np.float16) ** 16
    np.testing.assert_array_equal(out, expect)


def test_a_reshape_through_a_size_quotient_is_proven_in_bounds():
    B = sl.Input("B", sl.int32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(B.shape[0] * 2, B.shape[1] // 2))
    f[i, j] = B[i // 2, (i % 2) * (B.shape[1] // 2) + j]
    s = sl.Schedule(f)
    s[f].vectorize(j, 4)
    b = np.arange(24, dtype=np.int32).reshape(3, 8)
    np.testing.assert_array_equal(sl.compile(f, s)(B=b), b.reshape(6, 4))


def test_a_read_one_past_a_size_quotient_is_still_refused():
    B = sl.Input("B", sl.int32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(B.shape[0] * 2, B.shape[1] // 2))
    f[i, j] = B[i // 2, (i % 2) * (B.shape[1] // 2) + j + 1]
    with pytest.raises(sl.AlgorithmError) as e:
        sl.compile(f)
    msg = str(e.value)
    assert msg.startswith("f reads B[") and "dimension 1 ranges over" in msg
    assert "B's extent 0..N - 1" in msg


def test_a_shifted_size_bounds_its_loop():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0] << 1,))
    f[i] = A[i >> 1, 0]
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(sl.compile(f)(A=a), np.repeat(a[:, 0], 2))
    g = sl.Func("g", shape=(A.shape[0] << 1,))
    g[i] = A[i, 0]
    with pytest.raises(sl.AlgorithmError) as e:
        sl.compile(g)
    msg = str(e.value)
    # the read is blamed with its range, not as "a value with no bound" of g's own write
    assert msg.startswith("g reads A[i, 0]") and "(M << 1) - 1" in msg


@pytest.mark.parametrize("op", ["//", "%"])
def test_a_size_divided_by_zero_is_zero_not_a_crash(op):
    A = sl.Input("A", sl.float32, ("M", "N"))
    i = sl.Var("i")
    size = A.shape[0] // 0 if op == "//" else A.shape[0] % 0
    f = sl.Func("f", shape=(size,))
    f[i] = 1.0
    out = sl.compile(f)(A=np.ones((3, 2), np.float32))
    assert out.shape == (0,) and out.dtype == np.float32
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = A[i + 1 + (A.shape[1] // 0 if op == "//" else A.shape[1] % 0), 0]
    with pytest.raises(sl.AlgorithmError) as e:
        sl.compile(g)
    assert "g reads A[" in str(e.value) and "ranges over [1, M]" in str(e.value)


def _clash(kind):
    i = sl.Var("i")
    if kind == "param-input":
        A = sl.Input("A", sl.float32, ("N",))
        f = sl.Func("f", shape=(A.shape[0],))
        f[i] = A[i] * sl.Param("A", sl.float32)
    elif kind == "param-output":
        A = sl.Input("A", sl.float32, ("N",))
        f = sl.Func("f", shape=(A.shape[0],))
        f[i] = A[i] * sl.Param("f", sl.float32)
    else:
        A = sl.Input("A", sl.float32, ("f",))
        f = sl.Func("f", shape=(A.shape[0],))
        f[i] = A[i]
    return f


@pytest.mark.parametrize("kind, words", [
    ("param-input", ["the Param 'A'", "the Input A"]),
    ("param-output", ["the Param 'f'", "the output Func f"]),
    ("size-output", ["the symbolic size 'f' of Input A", "the output Func f"]),
])
def test_a_param_or_size_named_like_a_buffer_is_an_algorithm_error_naming_both(kind, words):
    with pytest.raises(sl.AlgorithmError) as e:
        sl.compile(_clash(kind))
    msg = str(e.value)
    for w in words:
        assert w in msg
    assert "rename one of them" in msg


def test_pad_on_a_reduction_output_suggests_only_guard():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1])
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[i, r])
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].split(i, 4, tail="pad")
    msg = str(e.value)
    assert "split(i, 4) on f: tail='pad'" in msg and msg.endswith("use tail='guard'")
    # and the suggestion holds
    s[f].split(i, 4, tail="guard")
    a = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(1))


def test_pad_on_a_pure_output_still_suggests_shift():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] * 2
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule(f)[f].split(i, 4, tail="pad")
    assert str(e.value).endswith("use tail='guard' or 'shift'")


@pytest.mark.parametrize("where", ["body", "predicate"])
def test_an_inline_reduction_in_an_update_reading_its_own_func_is_refused_at_once(where):
    A = sl.Input("A", sl.int32, ("M", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j]
    with pytest.raises(sl.AlgorithmError) as e:
        if where == "body":
            f[i, 0] = sl.maximum(f[i, r])
        else:
            f[i, 0] = sl.sum(A[i, r.where(f[i, r] > 1)])
    msg = str(e.value)
    op = "maximum" if where == "body" else "sum"
    assert msg.startswith(f"f update 0: the inline sl.{op}(...) reads f itself")
    assert "own Func" in msg and "sl.max(f[i, 0], f[i, r])" in msg


def test_the_rewrites_the_self_reduction_message_suggests_compute_the_result():
    A = sl.Input("A", sl.int32, ("M", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    a = np.array([[1, 5, 2], [7, 0, 3]], np.int32)
    expect = a.copy()
    expect[:, 0] = a.max(1)
    f0 = sl.Func("f0")
    f0[i, j] = A[i, j]
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = f0[i, j]
    f[i, 0] = sl.maximum(f0[i, r])
    np.testing.assert_array_equal(sl.compile(f)(A=a), expect)
    g = sl.Func("g", shape=(A.shape[0], A.shape[1]))
    g[i, j] = A[i, j]
    g[i, 0] = sl.max(g[i, 0], g[i, r])
    np.testing.assert_array_equal(sl.compile(g)(A=a), expect)
