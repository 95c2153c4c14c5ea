"""Calling a kernel with adversarial arrays and Params (SPEC section 3): every refusal is an
ArgumentError that names the argument, and no call crashes or touches memory it should not."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import schedlang as sl


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.getbasetemp() / "sl_cache"))
    monkeypatch.delenv("BEAM", raising=False)


@pytest.fixture(scope="module")
def axpy():
    i, j = sl.vars("i j")
    A = sl.Input("A", sl.float32, ("M", "N"))
    B = sl.Input("B", sl.float32, ("M", "N"))
    alpha = sl.Param("alpha", sl.float32)
    C = sl.Func("C", shape=(A.shape[0], A.shape[1]))
    C[i, j] = A[i, j] * alpha + B[i, j]
    return sl.compile(C, sl.Schedule(C))


@pytest.fixture(scope="module")
def doubler0d():
    S = sl.Input("S", sl.float32, ())
    T = sl.Func("T", shape=())
    T[()] = S[()] * 2
    return sl.compile(T, sl.Schedule(T))


def _huge_broadcast():
    # 2**60 elements: a contiguous copy can never be allocated (past any address space)
    return np.broadcast_to(np.float32(1), (2 ** 30, 2 ** 30))


def test_refused_call_reports_its_error_before_copying_a_broadcast_input(axpy):
    big = _huge_broadcast()
    with pytest.raises(sl.ArgumentError, match=r"Param alpha: expected a number \(float32\)"):
        axpy(A=big, B=big, alpha="x")
    with pytest.raises(sl.ArgumentError, match="input B: expected dtype float32, got float64"):
        axpy(A=big, B=np.zeros((1, 1)), alpha=1.0)
    with pytest.raises(sl.ArgumentError, match="M is 1073741824 from .* but 3 from out="):
        axpy(A=big, B=big, alpha=1.0, out=np.zeros((3, 3), np.float32))


def test_a_call_that_passes_the_checks_still_names_the_uncopyable_input():
    i = sl.Var("i")
    A = sl.Input("A", sl.float32, ("M", "N"))
    r = sl.RDom(A.shape[1], name="r")
    R = sl.Func("R", shape=(A.shape[0],))
    R[i] = sl.sum(A[i, r])
    kern = sl.compile(R, sl.Schedule(R))
    with pytest.raises(sl.ArgumentError, match="input A: the array is not contiguous and its "
                       "contiguous copy .* cannot be allocated"):
        kern(A=_huge_broadcast())


def test_out_numpy_scalar_is_refused_not_silently_lost(doubler0d):
    s = np.array(3, np.float32)
    for o in (np.float32(0), np.zeros((), np.float32)[()]):
        with pytest.raises(sl.ArgumentError, match=r"out=: a numpy scalar \(float32\) cannot be "
                           r"written into; pass a 0-d array"):
            doubler0d(S=s, out=o)
    o = np.zeros((), np.float32)
    doubler0d(S=s, out=o)
    assert o == 6.0
    # as an input a numpy scalar is fine (it is only read)
    assert doubler0d(S=np.float32(4)) == 8.0


def test_longdouble_param_is_a_number(axpy):
    a = np.ones((2, 3), np.float32)
    b = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(axpy(A=a, B=b, alpha=np.longdouble(2.5)), a * 2.5)
    np.testing.assert_array_equal(axpy(A=a, B=b, alpha=np.array(3, np.longdouble)), a * 3)
    with pytest.raises(sl.ArgumentError, match="Param alpha: .*1e\\+4000.* beyond the range"):
        axpy(A=a, B=b, alpha=np.longdouble("1e4000"))


_ADVERSARIAL = textwrap.dedent("""
    import numpy as np, schedlang as sl
    i, j = sl.vars("i j")
    A = sl.Input("A", sl.float32, ("M", "N"))
    B = sl.Input("B", sl.float32, ("M", "N"))
    C = sl.Func("C", shape=(A.shape[0], A.shape[1]))
    C[i, j] = A[i, j] * 2 + B[i, j]
    s = sl.Schedule(C)
    s[C].vectorize(j, 16).parallel(i)
    k = sl.compile(C, s)
    M, N = 8, 64
    rng = np.random.default_rng(0)
    a = rng.random((M, N), dtype=np.float32)
    b = rng.random((M, N), dtype=np.float32)

    def view(off):          # a float32 array at a byte offset of 1..3 (misaligned)
        buf = np.zeros(M * N * 4 + 128, np.uint8)
        pad = (-buf.ctypes.data) % 64
        return np.ndarray((M, N), np.float32, buffer=buf, offset=pad + off)

    for off in (1, 2, 3):
        x, o = view(off), view(off)
        x[...] = a
        k(A=x, B=b, out=o)
        assert np.array_equal(o, a * 2 + b), off
    # zero strides, Fortran order, a read-only memmap-like view, a structured field
    assert np.array_equal(k(A=np.broadcast_to(a[:1], (M, N)), B=b), a[:1] * 2 + b)
    assert np.array_equal(k(A=np.asfortranarray(a), B=b), a * 2 + b)
    st = np.zeros((M, N), dtype=[("x", np.float32), ("y", np.float32)])
    st["x"] = a
    assert np.array_equal(k(A=st["x"], B=b), a * 2 + b)
    for bad in (np.broadcast_to(np.zeros((1, N), np.float32), (M, N)),
                np.asfortranarray(np.zeros((M, N), np.float32)), st["y"]):
        try:
            k(A=a, B=b, out=bad)
        except sl.ArgumentError as e:
            assert "out=" in str(e) and "C-contiguous" in str(e), e
        else:
            raise AssertionError("a strided out= was accepted")
    # out= a shifted view of the same buffer as the input, both ways, twice (cached call)
    for _ in range(2):
        for lo, hi in ((0, 1), (1, 0)):
            buf = rng.random((M + 1) * N, dtype=np.float32)
            x = buf[lo * N:(lo + M) * N].reshape(M, N)
            o = buf[hi * N:(hi + M) * N].reshape(M, N)
            want = x * 2 + b
            k(A=x, B=b, out=o)
            assert np.array_equal(o, want)
    # the same array for both inputs and out=
    x = a.copy()
    k(A=x, B=x, out=x)
    assert np.array_equal(x, a * 3)
    print("done")
""")


def test_adversarial_arrays_compute_or_are_refused_without_crashing():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _ADVERSARIAL], capture_output=True, text=True,
                       timeout=120, cwd=root)
    assert r.returncode == 0 and r.stdout.strip() == "done", (r.returncode, r.stderr[-2000:])


def test_a_size_conflict_names_the_first_array_that_gave_the_size():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    w = sl.Input("w", sl.float32, ("K",))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j] * w[k])
    kern = sl.compile(C)
    with pytest.raises(sl.ArgumentError, match=r"K is 64 from A \(dimension 1\) but 32 from w"):
        kern(A=np.zeros((2, 64), np.float32), B=np.zeros((64, 3), np.float32),
             w=np.zeros(32, np.float32))
