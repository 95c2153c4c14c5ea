"""Sizes that cannot be allocated, and indices that are safe only for non-empty inputs:
each is a clear ``sl.ArgumentError`` (``sl.OutOfMemoryError`` for memory, which is also
a ``MemoryError``), never a crash or a read outside an array (SPEC §3)."""
import numpy as np
import pytest

import schedlang as sl


def _cube_of(A, index):
    """``C[i] = f[c, c, c]`` with f, a 3-D Func of A, stored whole (compute_root): f's
    storage is cubic in the range of ``c``."""
    x, y, z, i = sl.vars("x y z i")
    f = sl.Func("f")
    f[x, y, z] = A[x] + A[y] + A[z]
    C = sl.Func("C", shape=(index.shape[0],))
    c = sl.clamp(index[i], 0, A.shape[0] - 1)
    C[i] = f[c, c, c]
    s = sl.Schedule(C)
    s[f].compute_root()
    return sl.compile(C, s)


def test_an_intermediate_whose_byte_size_overflows_int64_is_out_of_memory_not_a_crash():
    # N**3 float32 with N = 2**21 is 2**65 bytes: wrapped to 0, it used to get a one-byte
    # block and the nest wrote past it
    A = sl.Input("A", sl.float32, ("N",))
    idx = sl.Input("idx", sl.int32, ("M",))
    kern = _cube_of(A, idx)
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a, idx=np.array([1, 3], np.int32)), [3, 9])
    with pytest.raises(sl.OutOfMemoryError, match="intermediate Func") as info:
        kern(A=np.zeros(2 ** 21, np.float32), idx=np.array([1, 3], np.int32))
    assert isinstance(info.value, sl.ArgumentError) and isinstance(info.value, MemoryError)
    # the kernel is still usable
    np.testing.assert_array_equal(kern(A=a, idx=np.array([2], np.int32)), [6])


def test_an_intermediate_of_constant_overflowing_size_is_out_of_memory():
    A = sl.Input("A", sl.float32, ("M",))
    idx = sl.Input("idx", sl.int32, ("M",))
    x, y, z, i = sl.vars("x y z i")
    f = sl.Func("f")
    f[x, y, z] = sl.cast(sl.float32, x + y + z)
    c = sl.clamp(idx[i], 0, 2 ** 30)            # f is (2**30 + 1)**3 floats
    C = sl.Func("C", shape=(A.shape[0],))
    C[i] = f[c, c, c] + A[i]
    s = sl.Schedule(C)
    s[f].compute_root()
    kern = sl.compile(C, s)
    with pytest.raises(sl.OutOfMemoryError):
        kern(A=np.zeros(2, np.float32), idx=np.zeros(2, np.int32))


@pytest.mark.parametrize("n", [2 ** 16, 2 ** 21])
def test_an_output_too_large_to_allocate_names_the_output(n):
    A = sl.Input("A", sl.float32, ("N",))
    x, y, z = sl.vars("x y z")
    C = sl.Func("C", shape=(A.shape[0],) * 3)
    C[x, y, z] = A[x] + A[y] + A[z]
    kern = sl.compile(C)
    for call in (kern, kern.time):
        with pytest.raises(sl.OutOfMemoryError, match=r"output C: its shape \(\d+, \d+, \d+\)"):
            call(A=np.zeros(n, np.float32))


def test_a_broadcast_input_too_large_to_copy_names_the_input():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=A.shape)
    C[i, j] = A[i, j] + 1
    kern = sl.compile(C)
    with pytest.raises(sl.OutOfMemoryError, match="input A: the array is not contiguous"):
        kern(A=np.broadcast_to(np.float32(1), (2 ** 30, 2 ** 30)))


@pytest.mark.parametrize("index", [
    lambda i, N: i % N, lambda i, N: (i + 1) % N, lambda i, N: (N - 1 - i) % N,
    lambda i, N: (i * 7) % N])
def test_an_index_taken_modulo_the_size_of_an_empty_input_is_refused(index):
    # i % 0 is 0, which is outside an empty input: the call is refused, as for clamps
    A = sl.Input("A", sl.float32, ("N",))
    B = sl.Input("B", sl.float32, ("M",))
    i = sl.Var("i")
    C = sl.Func("C", shape=(B.shape[0],))
    C[i] = A[index(i, A.shape[0])] + B[i]
    kern = sl.compile(C)
    a, b = np.arange(4, dtype=np.float32), np.ones(3, np.float32)
    np.testing.assert_array_equal(kern(A=a, B=b), a[[index(k, 4) for k in range(3)]] + 1)
    with pytest.raises(sl.ArgumentError, match="in bounds only when N >= 1.*modulo a size"):
        kern(A=np.zeros(0, np.float32), B=b)


@pytest.mark.parametrize("scale, bad", [(1, 2 ** 31 - 1), (2, 2 ** 30), (2, 1500000000)])
def test_an_assume_is_checked_without_wrapping(scale, bad):
    # p + 4 wrapped to a negative int32 at the call, so the fact held and the kernel read
    # 2**31 elements past the array (the compiler proved the read safe over the integers)
    A = sl.Input("A", sl.float32, ("N",))
    p = sl.Param("p", sl.int32)
    i = sl.Var("i")
    f = sl.Func("f", shape=(4,))
    f[i] = A[p * scale + i]
    s = sl.Schedule(f)
    s.assume(p >= 0)
    s.assume(p * scale + 4 <= A.shape[0])
    kern = sl.compile(f, s)
    a = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a, p=2), a[2 * scale:2 * scale + 4])
    with pytest.raises(sl.ArgumentError, match="violate assume"):
        kern(A=a, p=bad)


def test_an_output_size_past_int64_is_reported_as_too_large_not_negative():
    A = sl.Input("A", sl.float32, ("N",))
    x, y = sl.vars("x y")
    C = sl.Func("C", shape=(A.shape[0] * 2 ** 40, 2 ** 30))
    C[x, y] = A[0] + 0.0
    kern = sl.compile(C)
    with pytest.raises(sl.ArgumentError, match=r"N \* 1099511627776 = 9223373136366403584 >"):
        kern(A=np.zeros(2 ** 23 + 1, np.float32))
