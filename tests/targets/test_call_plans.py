"""Repeated kernel calls take a checked plan (only the array addresses change); every call
that differs in what was checked (shapes, strides, dtypes, Param values, a read-only or
overlapping out=) goes through the full checks again."""
import threading
import warnings

import numpy as np
import pytest

import schedlang as sl


def scaled_sum(n="N"):
    A = sl.Input("A", sl.float32, (n,))
    B = sl.Input("B", sl.float32, (n,))
    alpha = sl.Param("alpha", sl.float32)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = alpha * A[i] + B[i]
    sl.assume(alpha > 0)
    return f


@pytest.fixture(scope="module")
def kern():
    return sl.compile(scaled_sum())


def test_repeated_calls_use_the_new_arrays(kern):
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.random(33, dtype=np.float32), rng.random(33, dtype=np.float32)
        np.testing.assert_allclose(kern(A=a, B=b, alpha=2.0), 2 * a + b, rtol=1e-6)
    assert kern._plans                       # the repeats went through a plan


def test_each_checked_property_is_checked_again(kern):
    a, b = np.ones(16, np.float32), np.ones(16, np.float32)
    kern(A=a, B=b, alpha=1.5)
    with pytest.raises(sl.ArgumentError, match=r"N is 16 from A \(dimension 0\) but 8 from B"):
        kern(A=a, B=b[:8], alpha=1.5)
    with pytest.raises(sl.ArgumentError, match="dtype"):
        kern(A=a, B=b.astype(np.float64), alpha=1.5)
    with pytest.raises(sl.ArgumentError, match="assume"):
        kern(A=a, B=b, alpha=-1.0)
    out = np.empty(16, np.float32)
    kern(A=a, B=b, alpha=1.5, out=out)
    out.flags.writeable = False
    with pytest.raises(sl.ArgumentError, match="writeable"):
        kern(A=a, B=b, alpha=1.5, out=out)
    # a strided view has other strides: copied by the general path, still right
    wide = np.arange(32, dtype=np.float32)
    np.testing.assert_allclose(kern(A=wide[::2], B=b, alpha=2.0), 2 * wide[::2] + 1)
    np.testing.assert_allclose(kern(A=wide[::2], B=b, alpha=2.0), 2 * wide[::2] + 1)


def test_out_that_overlaps_an_input_after_a_plan_exists(kern):
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    out = np.empty(8, np.float32)
    kern(A=a, B=b, alpha=2.0, out=out)
    kern(A=a, B=b, alpha=2.0, out=out)          # now planned
    want = 2 * a + b
    got = kern(A=a, B=b, alpha=2.0, out=a)      # same shapes; the output is an input
    np.testing.assert_allclose(got, want)
    assert got is a


def test_a_result_passed_back_in_is_not_overwritten_while_read():
    x = sl.Input("x", sl.float32, (1 << 19,))   # large: the kernel reuses its output array
    i = sl.Var("i")
    f = sl.Func("f", shape=(1 << 19,))
    f[i] = x[i] + 1
    k = sl.compile(f)
    y = k(x=np.zeros(1 << 19, np.float32))
    z = k(x=y)
    assert z is not y and float(z[0]) == 2 and float(y[0]) == 1
    del y
    w = k(x=z)
    assert float(w[0]) == 3 and float(z[0]) == 2


def test_threads_calling_one_kernel_at_once(kern):
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(200):
                a, b = rng.random(64, dtype=np.float32), rng.random(64, dtype=np.float32)
                np.testing.assert_allclose(kern(A=a, B=b, alpha=3.0), 3 * a + b, rtol=1e-6)
        except AssertionError as e:      # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_the_last_calls_plan_matches_by_name_not_by_order(kern):
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    kern(A=a, B=b, alpha=2.0)
    np.testing.assert_allclose(kern(alpha=2.0, B=a, A=b), 2 * b + a)
    np.testing.assert_allclose(kern(B=b, A=a, alpha=np.float32(3.0)), 3 * a + b)


def test_a_call_unlike_the_last_one_is_checked_in_full(kern):
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    kern(A=a, B=b, alpha=2.0)
    kern(A=a, B=b, alpha=2.0)
    with pytest.raises(sl.ArgumentError, match="B"):
        kern(A=a, alpha=2.0)
    with pytest.raises(sl.ArgumentError, match="C"):
        kern(A=a, B=b, alpha=2.0, C=b)
    with pytest.raises(sl.ArgumentError, match="out=: expected dtype float32"):
        kern(A=a, B=b, alpha=2.0, out=np.empty(8, np.float64))
    with pytest.raises(sl.ArgumentError, match="argument A: expected an array"):
        kern(A=list(range(8)), B=b, alpha=2.0)
    big_endian = a.astype(">f4")
    with pytest.raises(sl.ArgumentError):
        kern(A=big_endian, B=b, alpha=2.0)


def test_out_overlapping_part_of_an_input_after_a_plan_exists(kern):
    buf = np.arange(12, dtype=np.float32)
    b = np.ones(8, np.float32)
    out = np.empty(8, np.float32)
    kern(A=buf[:8], B=b, alpha=2.0, out=out)
    kern(A=buf[:8], B=b, alpha=2.0, out=out)     # planned: contiguous, same kinds
    want = 2 * buf[:8] + 1
    got = kern(A=buf[:8], B=b, alpha=2.0, out=buf[4:])   # shares buf[4:8] with A
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(buf[4:], want)


def test_a_param_of_minus_zero_is_not_taken_for_plus_zero():
    A = sl.Input("A", sl.float32, ("N",))
    alpha = sl.Param("alpha", sl.float32)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] / alpha
    k = sl.compile(f)
    a = np.ones(4, np.float32)
    for _ in range(2):
        assert np.all(k(A=a, alpha=0.0) == np.inf)
    assert np.all(k(A=a, alpha=-0.0) == -np.inf)
    assert np.all(k(A=a, alpha=np.float32(-0.0)) == -np.inf)
    assert np.all(k(A=a, alpha=0.0) == np.inf)


@pytest.mark.parametrize("change", ["read_only", "dtype", "strides", "shape"])
def test_a_returned_array_changed_in_place_is_not_reused(change):
    n = 1 << 19                                   # large: the kernel would reuse it
    x = sl.Input("x", sl.float32, (n,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(n,))
    f[i] = x[i] + 1
    k = sl.compile(f)
    y = k(x=np.zeros(n, np.float32))
    if change == "read_only":
        y.flags.writeable = False
    elif change == "dtype":
        y.dtype = np.int32
    elif change == "strides":
        with warnings.catch_warnings():     # deprecated in numpy 2.4, still possible
            warnings.simplefilter("ignore", DeprecationWarning)
            y.strides = (0,)
    else:
        y.shape = (n // 2, 2)
    del y
    z = k(x=np.ones(n, np.float32))
    assert z.dtype == np.float32 and z.shape == (n,) and z.flags.writeable
    assert z.flags.c_contiguous and float(z[0]) == 2 and float(z[-1]) == 2


@pytest.mark.parametrize("bad", [None, "2", 2.5, 0, -1, True, float("nan"), 10 ** 9])
def test_num_threads_takes_a_positive_int_only(kern, bad):
    before = kern.num_threads
    with pytest.raises(sl.ArgumentError, match="num_threads must be"):
        kern.num_threads = bad
    assert kern.num_threads == before
    kern.num_threads = np.int64(1)
    a = np.ones(8, np.float32)
    np.testing.assert_allclose(kern(A=a, B=a, alpha=2.0), 3 * a)
    kern.num_threads = before
