"""Round-14 probes of SPEC section 1 (the algorithm language) against numpy: a call-time
check of a boundary condition names the empty input, constant_exterior and update type
errors say what to write, constant RDom ranges stay inside int32, a negative constant index
is explained, and float16 / bfloat16 sums and products accumulate in float32."""
import numpy as np
import pytest

import schedlang as sl


def test_an_empty_input_read_through_a_boundary_condition_is_named_not_its_neighbour():
    # a concatenation: both clamped reads happen, so each input must be non-empty; the
    # call-time check names the input that is empty and its own size, not the other one
    A = sl.Input("A", sl.float32, ("N",))
    B = sl.Input("B", sl.float32, ("M",))
    i = sl.Var("i")
    h = sl.Func("h", shape=(A.shape[0] + B.shape[0],))
    h[i] = sl.select(i < A.shape[0], sl.clamp_edge(A)[i], sl.clamp_edge(B)[i - A.shape[0]])
    kern = sl.compile(h)
    np.testing.assert_array_equal(kern(A=np.ones(2, np.float32), B=np.zeros(1, np.float32)),
                                  [1.0, 1.0, 0.0])
    with pytest.raises(sl.ArgumentError) as err:
        kern(A=np.ones(0, np.float32), B=np.zeros(2, np.float32))
    msg = str(err.value)
    assert "reads A" in msg and "N >= 1" in msg and "non-empty" in msg, msg
    assert "B" not in msg and "M" not in msg, msg
    with pytest.raises(sl.ArgumentError) as err:
        kern(A=np.ones(2, np.float32), B=np.zeros(0, np.float32))
    msg = str(err.value)
    assert "reads B" in msg and "M >= 1" in msg, msg


def test_a_constant_exterior_value_that_does_not_fit_an_integer_input_says_how_to_pad_wider():
    A = sl.Input("A", sl.uint8, ("N",))
    with pytest.raises(sl.AlgorithmError) as err:
        sl.constant_exterior(A, 300)
    msg = str(err.value)
    # named as the user wrote it, and no advice to cast the Input itself (it cannot be)
    assert "sl.constant_exterior(A, 300)" in msg and "sl.uint8" in msg, msg
    assert "widen the operand" not in msg and "sl.cast(" in msg and "shape=" in msg, msg
    # the advice works: pad a Func that widens A
    i = sl.Var("i")
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = sl.cast(sl.int16, A[i])
    f = sl.Func("f", shape=(A.shape[0] + 2,))
    f[i] = sl.constant_exterior(g, 300)[i - 1]
    out = sl.compile(f)(A=np.array([1, 255], np.uint8))
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, [300, 1, 255, 300])


@pytest.mark.parametrize("lo,extent,reaches", [(2 ** 31 - 5, 10, 2 ** 31 + 4),
                                               (-2 ** 31 - 1, 3, -2 ** 31 - 1),
                                               (2 ** 40, 1, 2 ** 40)])
def test_a_constant_rdom_range_outside_int32_is_refused_not_wrapped(lo, extent, reaches):
    # RDom variables are int32: r over [2**31 - 5, 2**31 + 5) wrapped to negative values
    with pytest.raises(sl.AlgorithmError) as err:
        sl.RDom((lo, extent), name="r")
    msg = str(err.value)
    assert "RDom r" in msg and "int32" in msg and str(reaches) in msg, msg


def test_a_constant_rdom_range_at_the_ends_of_int32_is_exact():
    i = sl.Var("i")
    for lo, extent in [(-2 ** 31, 3), (2 ** 31 - 3, 3)]:
        r = sl.RDom((lo, extent), name="r")
        f = sl.Func("f", shape=(1,))
        f[i] = sl.sum(sl.cast(sl.float64, r))
        np.testing.assert_array_equal(sl.compile(f)(), [3.0 * lo + 3.0])


def test_an_int_initial_value_then_a_float_accumulation_suggests_a_float_initial_value():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = 0
    with pytest.raises(sl.AlgorithmError) as err:
        f[i] += A[i, k]
    msg = str(err.value)
    assert "f update 0" in msg and "sl.int32" in msg and "sl.cast(sl.int32" in msg, msg
    assert "f[...] = 0.0 (not 0)" in msg, msg
    # the suggested definition works
    g = sl.Func("g", shape=(A.shape[0],))
    g[i] = 0.0
    g[i] += A[i, k]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(sl.compile(g)(A=a), a.sum(1))


def test_a_negative_constant_index_says_it_does_not_count_from_the_end():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j] - A[i, -1]       # numpy: the last column; here: position -1
    with pytest.raises(sl.AlgorithmError) as err:
        sl.compile(f)
    msg = str(err.value)
    assert "f reads A[i, -1]" in msg and "[-1, -1]" in msg, msg
    assert "does not count from the end" in msg and "A[i, N - 1]" in msg, msg
    # the written-out index it suggests is in bounds
    g = sl.Func("g", shape=(A.shape[0], A.shape[1]))
    g[i, j] = A[i, j] - A[i, A.shape[1] - 1]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(sl.compile(g)(A=a), a - a[:, -1:])


def test_an_index_that_is_only_sometimes_negative_gets_no_end_counting_hint():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i - 1]
    with pytest.raises(sl.AlgorithmError) as err:
        sl.compile(f)
    assert "count from the end" not in str(err.value)


def _bf16_from_f32(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_float_sum_and_product_accumulate_in_float32_like_numpy_and_torch(dtype):
    # a float16 accumulator stalls at 2048 (2048 + 1 rounds back to 2048), a bfloat16 one
    # at 256; numpy's and torch's sum accumulate in float32 and round once
    A = sl.Input("A", getattr(sl, dtype), ("M", "K"))
    i = sl.Var("i")
    r = sl.RDom(A.shape[1], name="r")
    s_ = sl.Func("s", shape=(A.shape[0],))
    s_[i] = sl.sum(A[i, r])
    p = sl.Func("p", shape=(A.shape[0],))
    p[i] = sl.product(A[i, r])
    rows = np.ones((4, 4096), np.float32)
    rows[1] = 0.1
    rows[2, :100] = 1.01
    rows[2, 100:] = 1.0
    rows[3] = np.linspace(-1, 3, 4096)
    if dtype == "float16":
        a = rows.astype(np.float16)
        wide = a.astype(np.float32)
    else:
        a = _bf16_from_f32(rows)
        wide = (a.astype(np.uint32) << 16).view(np.float32)
    outs = []
    vec = sl.Schedule(s_)
    vec[s_].vectorize(i, 4)
    for f, sched in ((s_, None), (p, None), (s_, vec)):
        out = sl.compile(f, sched)(A=a)
        if dtype == "bfloat16":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        outs.append(out.astype(np.float64))
    np.testing.assert_allclose(outs[0], wide.astype(np.float64).sum(1), rtol=1e-2)
    np.testing.assert_allclose(outs[1][:3], wide[:3].astype(np.float64).prod(1), rtol=1e-2)
    np.testing.assert_array_equal(outs[2], outs[0])     # vectorized: the same
    assert outs[0][0] == 4096.0
