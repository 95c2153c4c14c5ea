"""Conformance tests for compiling and calling kernels (SPEC sections 3 and 7)."""
import re

import numpy as np
import pytest

import schedlang as sl


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """No tuning database or BEAM search leaks into these tests: a private cache dir."""
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.getbasetemp() / "sl_cache"))
    monkeypatch.delenv("BEAM", raising=False)


def rng_for(seed):
    return np.random.default_rng(seed)


def matmul_algorithm(m="M", k="K", n="N"):
    A = sl.Input("A", sl.float32, (m, k))
    B = sl.Input("B", sl.float32, (k, n))
    alpha = sl.Param("alpha", sl.float32)
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = alpha * sl.sum(A[i, r] * B[r, j])
    return C


@pytest.fixture(scope="module")
def gemm():
    return sl.compile(matmul_algorithm())


@pytest.fixture
def ab():
    rng = rng_for(1)
    return (rng.standard_normal((6, 5)).astype(np.float32),
            rng.standard_normal((5, 4)).astype(np.float32))


def test_basic_call_returns_numpy_array(gemm, ab):
    a, b = ab
    c = gemm(A=a, B=b, alpha=2.0)
    assert isinstance(c, np.ndarray)
    assert c.shape == (6, 4) and c.dtype == np.float32
    np.testing.assert_allclose(c, 2 * a @ b, rtol=1e-5, atol=1e-5)


def test_sizes_are_bound_per_call(gemm):
    rng = rng_for(2)
    for m, k, n in [(1, 1, 1), (3, 7, 2), (9, 2, 5)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = gemm(A=a, B=b, alpha=1.0)
        assert c.shape == (m, n)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_out_preallocated_is_written(gemm, ab):
    a, b = ab
    c = np.full((6, 4), np.nan, dtype=np.float32)
    res = gemm(A=a, B=b, alpha=0.5, out=c)
    np.testing.assert_allclose(c, 0.5 * a @ b, rtol=1e-5, atol=1e-5)
    if res is not None:
        assert np.shares_memory(res, c)
        np.testing.assert_array_equal(res, c)


def test_out_is_returned(gemm, ab):
    a, b = ab
    c = np.zeros((6, 4), dtype=np.float32)
    res = gemm(A=a, B=b, alpha=0.5, out=c)
    assert res is c


# --- array protocols --------------------------------------------------------------------------

class ArrayInterfaceOnly:
    """Exposes only __array_interface__ (no buffer protocol, no __array__)."""

    def __init__(self, a):
        self._a = a  # keep the memory alive
        self.__array_interface__ = a.__array_interface__


class DLPackOnly:
    """Exposes only the DLPack protocol."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_input_via_array_interface(gemm, ab):
    a, b = ab
    c = gemm(A=ArrayInterfaceOnly(a), B=ArrayInterfaceOnly(b), alpha=1.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_input_via_dlpack(gemm, ab):
    a, b = ab
    c = gemm(A=DLPackOnly(a), B=DLPackOnly(b), alpha=1.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_mixed_protocols(gemm, ab):
    a, b = ab
    c = gemm(A=DLPackOnly(a), B=ArrayInterfaceOnly(b), alpha=3.0)
    np.testing.assert_allclose(c, 3 * a @ b, rtol=1e-5, atol=1e-5)


def test_array_interface_with_wrong_dtype_is_argument_error(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="A"):
        gemm(A=ArrayInterfaceOnly(a.astype(np.float64)), B=b, alpha=1.0)


def test_out_via_array_interface_is_written(gemm, ab):
    a, b = ab
    c = np.zeros((6, 4), dtype=np.float32)
    gemm(A=a, B=b, alpha=1.0, out=ArrayInterfaceOnly(c))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# --- non-contiguous inputs ------------------------------------------------------------------------

def test_transposed_view_input(gemm):
    rng = rng_for(3)
    at = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    a = at.T  # (6, 5), not C-contiguous
    assert not a.flags.c_contiguous
    c = gemm(A=a, B=b, alpha=1.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_strided_and_reversed_view_inputs(gemm):
    rng = rng_for(4)
    big = rng.standard_normal((12, 10)).astype(np.float32)
    a = big[::2, 1:6]         # step-2 rows, column slice
    b = big[:5, ::-1][:, :4]  # negative column stride
    c = gemm(A=a, B=b, alpha=1.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_fortran_order_input(gemm, ab):
    a, b = ab
    c = gemm(A=np.asfortranarray(a), B=b, alpha=1.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# --- bad calls: ArgumentError with a useful message ------------------------------------------------

def test_missing_argument(gemm, ab):
    a, _ = ab
    with pytest.raises(sl.ArgumentError, match="B"):
        gemm(A=a, alpha=1.0)


def test_missing_param(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="alpha"):
        gemm(A=a, B=b)


def test_extra_argument(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="bogus"):
        gemm(A=a, B=b, alpha=1.0, bogus=a)


def test_wrong_dtype(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError) as ei:
        gemm(A=a.astype(np.float64), B=b, alpha=1.0)
    msg = str(ei.value)
    assert "A" in msg and "float32" in msg, msg


def test_wrong_dtype_int(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="B"):
        gemm(A=a, B=b.astype(np.int32), alpha=1.0)


def test_wrong_rank(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="A"):
        gemm(A=a.reshape(-1), B=b, alpha=1.0)
    with pytest.raises(sl.ArgumentError, match="B"):
        gemm(A=a, B=b[None], alpha=1.0)


def test_inconsistent_sizes_names_the_size_and_both_sources(gemm):
    a = np.zeros((3, 64), np.float32)
    b = np.zeros((32, 2), np.float32)
    with pytest.raises(sl.ArgumentError) as ei:
        gemm(A=a, B=b, alpha=1.0)
    msg = str(ei.value)
    # as SPEC section 3 words it, in the order of the call, with the dimensions
    assert msg == "K is 64 from A (dimension 1) but 32 from B (dimension 0)", msg
    with pytest.raises(sl.ArgumentError, match=r"^K is 32 from B \(dimension 0\) but 64 from A"):
        gemm(B=b, A=a, alpha=1.0)


def test_fixed_size_mismatch():
    X = sl.Input("X", sl.float32, (4,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(4,))
    f[i] = X[i] + 1.0
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(X=np.zeros(4, np.float32)), np.ones(4, np.float32))
    with pytest.raises(sl.ArgumentError, match="X"):
        kern(X=np.zeros(5, np.float32))


def test_param_of_wrong_kind(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="alpha"):
        gemm(A=a, B=b, alpha="two")
    with pytest.raises(sl.ArgumentError, match="alpha"):
        gemm(A=a, B=b, alpha=np.ones(3, np.float32))


def test_param_value_checks():
    p = sl.Param("p8", sl.uint8)
    q = sl.Param("q32", sl.int32)
    i = sl.Var("i")
    f = sl.Func("f", shape=(2,))
    f[i] = sl.cast(sl.int32, p) + q + i
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(p8=3, q32=np.int64(5)), [8, 9])
    with pytest.raises(sl.ArgumentError, match="p8"):
        kern(p8=300, q32=1)  # does not fit uint8
    with pytest.raises(sl.ArgumentError, match="p8"):
        kern(p8=-1, q32=1)
    with pytest.raises(sl.ArgumentError, match="q32"):
        kern(p8=1, q32=2.5)  # not an integer
    with pytest.raises(sl.ArgumentError, match="q32"):
        kern(p8=1, q32=2**31)


def test_input_used_only_for_its_shape_binds_the_size():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.cast(sl.float32, i)
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(A=np.zeros(4, np.float32)), np.arange(4, dtype=np.float32))


def test_array_where_param_expected_or_scalar_where_array_expected(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="A"):
        gemm(A=1.0, B=b, alpha=1.0)


def test_out_with_wrong_shape(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="out|C"):  # the output is Func C
        gemm(A=a, B=b, alpha=1.0, out=np.zeros((6, 5), np.float32))


def test_wrong_size_message_gives_the_expected_shape():
    X = sl.Input("X", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(X.shape[0] - 2,))
    f[i] = X[i] + X[i + 2]
    kern = sl.compile(f)
    with pytest.raises(sl.ArgumentError) as ei:
        kern(X=np.zeros(10, np.float32), out=np.zeros(9, np.float32))
    assert str(ei.value) == ("out=: dimension 0 should be N - 2 = 8, got 9 (shape (9,)); "
                             "pass an array of shape (8,)"), str(ei.value)
    g = sl.Func("g", shape=(2, 3))
    j = sl.Var("j")
    g[i, j] = sl.cast(sl.float32, i + j)
    with pytest.raises(sl.ArgumentError) as ei:
        sl.compile(g)(out=np.zeros((3, 3), np.float32))
    # a fixed size is not written twice ("should be 2 = 2")
    assert str(ei.value) == ("out=: dimension 0 should be 2, got 3 (shape (3, 3)); "
                             "pass an array of shape (2, 3)"), str(ei.value)


def test_out_with_wrong_dtype(gemm, ab):
    a, b = ab
    with pytest.raises(sl.ArgumentError, match="out"):
        gemm(A=a, B=b, alpha=1.0, out=np.zeros((6, 4), np.float64))


def test_non_contiguous_out_is_argument_error(gemm, ab):
    a, b = ab
    big = np.zeros((6, 8), np.float32)
    view = big[:, ::2]
    with pytest.raises(sl.ArgumentError, match="out"):
        gemm(A=a, B=b, alpha=1.0, out=view)
    assert not big.any()  # nothing was written
    t = np.zeros((4, 6), np.float32).T
    with pytest.raises(sl.ArgumentError, match="out"):
        gemm(A=a, B=b, alpha=1.0, out=t)


def test_readonly_out_is_argument_error(gemm, ab):
    a, b = ab
    c = np.zeros((6, 4), np.float32)
    c.setflags(write=False)
    with pytest.raises(sl.ArgumentError, match="out"):
        gemm(A=a, B=b, alpha=1.0, out=c)
    assert not c.any()


def test_violated_assume():
    A = sl.Input("A", sl.float32, ("Rows_assume4", "Cols_assume4"))
    sl.assume(A.shape[0] % 4 == 0)
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j] * 2.0
    kern = sl.compile(f)
    a = np.ones((8, 3), np.float32)
    np.testing.assert_array_equal(kern(A=a), a * 2)
    with pytest.raises(sl.ArgumentError) as ei:
        kern(A=np.ones((6, 3), np.float32))
    msg = str(ei.value)
    assert "Rows_assume4" in msg or "assume" in msg, msg


def test_violated_assume_on_param():
    A = sl.Input("A", sl.float32, ("Nparam_assume",))
    scale = sl.Param("scale_assume", sl.int32)
    sl.assume(scale > 0)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] * sl.cast(sl.float32, scale)
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(A=np.ones(3, np.float32), scale_assume=3), [3, 3, 3])
    with pytest.raises(sl.ArgumentError, match="scale_assume"):
        kern(A=np.ones(3, np.float32), scale_assume=0)
    # sizes and values that passed are remembered, others are still checked, every time
    for _ in range(2):
        np.testing.assert_array_equal(kern(A=np.ones(3, np.float32), scale_assume=3), [3, 3, 3])
        with pytest.raises(sl.ArgumentError, match="scale_assume"):
            kern(A=np.ones(3, np.float32), scale_assume=-1)


def test_argument_errors_leave_kernel_usable(gemm, ab):
    a, b = ab
    for bad in (dict(A=a), dict(A=a, B=b.T, alpha=1.0), dict(A=a, B=b, alpha=1.0, zzz=1)):
        with pytest.raises(sl.ArgumentError):
            gemm(**bad)
    np.testing.assert_allclose(gemm(A=a, B=b, alpha=1.0), a @ b, rtol=1e-5, atol=1e-5)


def test_empty_reduction_and_empty_output(gemm):
    c = gemm(A=np.zeros((3, 0), np.float32), B=np.zeros((0, 2), np.float32), alpha=1.0)
    np.testing.assert_array_equal(c, np.zeros((3, 2), np.float32))
    c = gemm(A=np.zeros((0, 4), np.float32), B=np.ones((4, 2), np.float32), alpha=1.0)
    assert c.shape == (0, 2)


def test_numpy_scalar_param(gemm, ab):
    a, b = ab
    c = gemm(A=a, B=b, alpha=np.float32(2.0))
    np.testing.assert_allclose(c, 2 * a @ b, rtol=1e-5, atol=1e-5)


def test_bool_input_rejects_other_dtypes():
    M = sl.Input("M", sl.bool, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(M.shape[0],))
    f[i] = sl.select(M[i], 1, 0)
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(M=np.array([True, False, True])), [1, 0, 1])
    with pytest.raises(sl.ArgumentError, match="M"):
        kern(M=np.array([1, 0, 1], dtype=np.uint8))


def test_bfloat16_input_takes_uint16_bits_only():
    X = sl.Input("X", sl.bfloat16, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(X.shape[0],))
    f[i] = sl.cast(sl.float32, X[i])
    kern = sl.compile(f)
    bits = np.array([0x3F80, 0xC000], dtype=np.uint16)  # 1.0, -2.0
    np.testing.assert_array_equal(kern(X=bits), [1.0, -2.0])
    with pytest.raises(sl.ArgumentError, match="X"):
        kern(X=np.array([1.0, -2.0], dtype=np.float16))


def test_non_native_byte_order_is_rejected_or_correct(gemm, ab):
    a, b = ab
    a_be = a.astype(">f4")
    try:
        c = gemm(A=a_be, B=b, alpha=1.0)
    except sl.ArgumentError:
        return
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_out_aliasing_an_input_gives_the_unaliased_result():
    A = sl.Input("A", sl.float32, ("Nalias",))
    sl.assume(A.shape[0] >= 1)
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    B = sl.clamp_edge(A)
    f[i] = B[i - 1] + 10.0 * B[i + 1]
    kern = sl.compile(f)
    a = np.arange(1, 9, dtype=np.float32)
    expect = kern(A=a.copy())
    p = np.pad(a, 1, mode="edge")
    np.testing.assert_array_equal(expect, p[:-2] + 10 * p[2:])
    res = kern(A=a, out=a)  # in place
    np.testing.assert_array_equal(a, expect)
    if res is not None:
        np.testing.assert_array_equal(res, expect)


# --- targets ----------------------------------------------------------------------------------------

def test_explicit_llvm_target(ab):
    C = matmul_algorithm()
    a, b = ab
    kern = sl.compile(C, target="llvm")
    np.testing.assert_allclose(kern(A=a, B=b, alpha=1.0), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"),
                    reason="x86-64 CPU name")
def test_llvm_target_with_cpu_name(ab):
    C = matmul_algorithm()
    a, b = ab
    kern = sl.compile(C, target="llvm:x86-64")
    np.testing.assert_allclose(kern(A=a, B=b, alpha=1.0), a @ b, rtol=1e-5, atol=1e-5)


def test_unknown_target_is_a_schedlang_error():
    C = matmul_algorithm()
    with pytest.raises(sl.SchedlangError, match="bogus"):
        sl.compile(C, target="bogus")
    with pytest.raises(sl.SchedlangError, match="nosuchcpu"):
        sl.compile(C, target="llvm:nosuchcpu")


# --- introspection --------------------------------------------------------------------------------

def test_source_is_llvm_ir(gemm):
    src = gemm.source
    assert isinstance(src, str)
    assert "define" in src


def test_loop_ir_is_pseudocode_with_loops(gemm):
    ir = gemm.loop_ir
    assert isinstance(ir, str)
    assert "for" in ir
    assert "C" in ir


def test_default_loop_nest_is_numpy_order():
    A = sl.Input("A", sl.float32, ("R", "S"))
    row, col = sl.vars("row col")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[row, col] = A[row, col] * 2.0
    kern = sl.compile(f)
    loops = [ln.strip() for ln in kern.loop_ir.splitlines() if ln.strip().startswith("for")]
    assert len(loops) >= 2, kern.loop_ir
    assert "row" in loops[0] and "col" not in loops[0], kern.loop_ir
    assert "col" in loops[1], kern.loop_ir
    a = rng_for(6).standard_normal((3, 5)).astype(np.float32)
    out = kern(A=a)
    assert out.shape == (3, 5) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, a * 2)


def test_time_returns_statistics(gemm, ab):
    a, b = ab
    t = gemm.time(A=a, B=b, alpha=1.0)
    assert t.runs >= 1
    assert 0 < t.min <= t.median


def test_time_checks_arguments_too(gemm, ab):
    a, _ = ab
    with pytest.raises(sl.ArgumentError):
        gemm.time(A=a, alpha=1.0)


def test_lower_is_printable_without_compiling():
    C = matmul_algorithm()
    s = sl.Schedule(C)
    text = str(sl.lower(C, s))
    assert "for" in text
    assert "C" in text


def test_lower_follows_the_schedule():
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[i, j] = A[i, j] + 1.0
    plain = str(sl.lower(f, sl.Schedule(f)))
    s = sl.Schedule(f)
    s[f].split(i, 4, names=("isplit_outer", "isplit_inner"))
    split = str(sl.lower(f, s))
    assert "isplit_outer" in split and "isplit_inner" in split
    assert "isplit_outer" not in plain


def test_compile_with_explicit_default_schedule(ab):
    C = matmul_algorithm()
    kern = sl.compile(C, sl.Schedule(C), target="llvm")
    a, b = ab
    np.testing.assert_allclose(kern(A=a, B=b, alpha=1.0), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options, says", [
    ({"budget_s": float("nan")}, "time(budget_s=nan): give a finite number of seconds >= 0"),
    ({"budget_s": "x"}, "time(budget_s='x')"),
    ({"repeats": 0}, "time(repeats=0): give the number of timed runs, an int >= 1"),
    ({"repeats": "3"}, "time(repeats='3')"),
    ({"warmup": 1.5}, "time(warmup=1.5): give the number of untimed runs, an int >= 0"),
])
def test_time_options_are_checked_a_nan_budget_does_not_run_forever(gemm, ab, options, says):
    a, b = ab
    with pytest.raises(sl.ArgumentError) as err:
        gemm.time(A=a, B=b, alpha=1.0, **options)
    assert says in str(err.value)
    with pytest.raises(sl.ArgumentError, match=r"time\(\) takes keyword arguments only: "
                                               r"kern.time\(.*A=\.\.\."):
        gemm.time(a, b, 1.0)


def test_kernel_can_be_called_many_times(gemm):
    rng = rng_for(5)
    for _ in range(5):
        a = rng.standard_normal((2, 3)).astype(np.float32)
        b = rng.standard_normal((3, 2)).astype(np.float32)
        np.testing.assert_allclose(gemm(A=a, B=b, alpha=1.0), a @ b, rtol=1e-5, atol=1e-6)


def test_inputs_are_not_modified(gemm, ab):
    a, b = ab
    a0, b0 = a.copy(), b.copy()
    gemm(A=a, B=b, alpha=1.0)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


# --- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", ["AlgorithmError", "ScheduleError", "CompileError",
                                 "ArgumentError"])
def test_error_hierarchy(cls):
    err = getattr(sl, cls)
    assert issubclass(err, sl.SchedlangError)
    assert issubclass(sl.SchedlangError, Exception)


def test_raised_errors_are_catchable_as_schedlang_error(gemm, ab):
    a, b = ab
    with pytest.raises(sl.SchedlangError):
        gemm(A=a, alpha=1.0)
    X = sl.Input("X", sl.uint8, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(X.shape[0],))
    with pytest.raises(sl.SchedlangError):
        f[i] = X[i + 1]
        sl.compile(f)


def test_several_outputs_compile_into_one_kernel():
    A = sl.Input("Amulti", sl.float32, ("Nmulti",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * 2
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = f[x] + A[x]
    s = sl.Schedule(f, g)
    s[g].vectorize(x, 8)
    kern = sl.compile([f, g], s)
    a = np.arange(10, dtype=np.float32)
    o1, o2 = kern(Amulti=a)
    np.testing.assert_array_equal(o1, a * 2)
    np.testing.assert_array_equal(o2, a * 3)
    with pytest.raises(sl.ArgumentError, match="overlap"):
        kern(Amulti=a, out=(o1, o1))


def test_large_outputs_reuse_memory_only_when_the_caller_dropped_it():
    A = sl.Input("Areuse", sl.float32, ("Nreuse",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * 2
    kern = sl.compile(f)
    a = np.ones(1 << 19, np.float32)           # 2 MiB output
    kept = kern(Areuse=a)
    other = kern(Areuse=a * 3)
    assert not np.shares_memory(kept, other)  # both still held: distinct arrays
    view = other[5:]
    del other
    again = kern(Areuse=a * 5)
    assert not np.shares_memory(view, again)  # a view keeps its base alive
    np.testing.assert_array_equal(view[:3], [6, 6, 6])
    np.testing.assert_array_equal(kept[:3], [2, 2, 2])
    del view, again
    last = kern(Areuse=a * 7)
    np.testing.assert_array_equal(last[:3], [14, 14, 14])


@pytest.mark.parametrize("dtype", [sl.int32, sl.float32])
def test_a_param_named_like_a_symbolic_size_is_rejected(dtype):
    # one kernel argument cannot be both; trusting the Param as the size would let a call
    # read past the input
    x = sl.Var("x")
    A = sl.Input("A_clash", sl.float32, ("n_clash",))
    p = sl.Param("n_clash", dtype)
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + sl.cast(sl.float32, p) * 0
    with pytest.raises(sl.AlgorithmError, match="Param 'n_clash'.*symbolic size 'n_clash' of "
                                                "Input A_clash; rename the Param"):
        sl.compile(f, sl.Schedule(f))


def test_positional_arguments_are_an_argument_error_and_an_input_may_be_named_self():
    x = sl.Var("x")
    A = sl.Input("self", sl.float32, (3,))
    f = sl.Func("f", shape=(3,))
    f[x] = A[x] + 1
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(self=np.ones(3, np.float32)), [2, 2, 2])
    with pytest.raises(sl.ArgumentError, match=r"keyword arguments only \(self=\.\.\.\)"):
        kern(np.ones(3, np.float32))


def test_zero_dimensional_input_takes_a_0d_array_or_numpy_scalar():
    S = sl.Input("s", sl.float32, ())
    A = sl.Input("A", sl.float32, (8,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(8,))
    f[i] = A[i] * S[()]
    kern = sl.compile(f)
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a, s=np.float32(2.5)), a * np.float32(2.5))
    np.testing.assert_array_equal(kern(A=a, s=np.array(3, np.float32)), a * 3)
    with pytest.raises(sl.ArgumentError, match="input s: expected 0 dimensions, got 1"):
        kern(A=a, s=np.ones(1, np.float32))
    with pytest.raises(sl.ArgumentError, match="s: expected dtype float32"):
        kern(A=a, s=np.float64(1))
    with pytest.raises(sl.AlgorithmError, match="s has 0 dimensions but is indexed with 1"):
        S[0]
    g = sl.Func("g", shape=())
    g[()] = S[()] + 1
    assert sl.compile(g)(s=np.float32(1)) == 2


class BFloat16DLPack:
    """A CPU bfloat16 tensor offered only through ``__dlpack__`` (a legacy ``dltensor``
    capsule), built by hand: numpy itself cannot export or import bfloat16."""

    def __init__(self, bits, shape=None, strides=None):
        import ctypes

        from schedlang.targets.kernel import _DELETER, _DLManagedTensor
        self.bits, self.deleted = bits, []
        self._shape = (ctypes.c_int64 * bits.ndim)(*(shape or bits.shape))
        self._strides = None if strides is None else (ctypes.c_int64 * bits.ndim)(*strides)
        self._deleter = _DELETER(lambda m: self.deleted.append(True))
        m = _DLManagedTensor()
        t = m.dl_tensor
        t.data, t.device_type, t.ndim = bits.ctypes.data, 1, bits.ndim
        t.code, t.bits, t.lanes = 4, 16, 1
        t.shape = self._shape
        if self._strides is not None:
            t.strides = self._strides
        m.deleter = ctypes.cast(self._deleter, ctypes.c_void_p)
        self._managed = m
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
        self._new = lambda: new(ctypes.addressof(m), b"dltensor", None)

    def __dlpack__(self, *args, **kwargs):
        return self._new()

    def __dlpack_device__(self):
        return (1, 0)


def _bf16_bits(values):
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_a_bfloat16_tensor_is_read_through_dlpack():
    import gc
    A = sl.Input("A", sl.bfloat16, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.cast(sl.float32, A[x]) * 2
    kern = sl.compile(f)
    t = BFloat16DLPack(_bf16_bits([1.5, 2.0, -3.25, 0.0]))
    np.testing.assert_array_equal(kern(A=t), [3.0, 4.0, -6.5, 0.0])
    gc.collect()
    assert t.deleted == [True]            # the consumed tensor was handed back
    # strides count elements, as DLPack says: every other value of six
    every_other = BFloat16DLPack(_bf16_bits([1, 9, 2, 9, 3, 9]), shape=(3,), strides=(2,))
    np.testing.assert_array_equal(kern(A=every_other), [2.0, 4.0, 6.0])
    with pytest.raises(sl.ArgumentError, match=r"input A: expected dtype bfloat16.*"
                       r"\(f\.view\(np\.uint32\) >> 16\)"):
        kern(A=np.ones(3, np.float32))


def test_an_empty_bfloat16_tensor_without_memory_and_a_bfloat16_tensor_for_a_float_input():
    A = sl.Input("A", sl.bfloat16, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.cast(sl.float32, A[x]) * 2
    empty = BFloat16DLPack(np.zeros(0, np.uint16))
    empty._managed.dl_tensor.data = None          # an empty tensor may own no memory
    assert sl.compile(f)(A=empty).shape == (0,)
    B = sl.Input("B", sl.float32, ("N",))
    g = sl.Func("g", shape=(B.shape[0],))
    g[x] = B[x] * 2
    with pytest.raises(sl.ArgumentError, match=re.escape(
            "input B: expected dtype float32, got bfloat16; convert it to float32 first")):
        sl.compile(g)(B=BFloat16DLPack(_bf16_bits([1.0, 2.0])))


class _Interface:
    def __init__(self, interface):
        self.__array_interface__ = interface


class _BadDLPack:
    def __dlpack__(self, *args, **kwargs):
        return 5                                   # not a capsule

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("arg, how", [
    (_Interface({"shape": (3,), "typestr": "<f4", "data": (0, False), "version": 3}),
     "__array_interface__"),
    (_Interface({"shape": (3,), "typestr": "<f4", "version": 3}), "__array_interface__"),
    (_Interface(None), "__array_interface__"),
    (_BadDLPack(), "__dlpack__")])
def test_a_malformed_array_protocol_is_an_argument_error(arg, how):
    B = sl.Input("B", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g", shape=(B.shape[0],))
    g[x] = B[x] * 2
    with pytest.raises(sl.ArgumentError, match=re.escape(f"argument B: cannot read it through "
                                                         f"{how} (")):
        sl.compile(g)(B=arg)


def test_a_torch_bfloat16_tensor_is_accepted():
    torch = pytest.importorskip("torch")
    A = sl.Input("A", sl.bfloat16, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.cast(sl.float32, A[x]) + 1
    got = sl.compile(f)(A=torch.tensor([1.5, -2.0, 256.0], dtype=torch.bfloat16))
    np.testing.assert_array_equal(got, [2.5, -1.0, 257.0])


def test_time_takes_arguments_named_like_its_own_options():
    # an Input named repeats / warmup / budget_s is the kernel's argument, not the option
    X = sl.Input("repeats", sl.float32, (8,))
    x = sl.Var("x")
    C = sl.Func("C", shape=(8,))
    C[x] = X[x] * 2.0
    kern = sl.compile(C)
    a = np.ones(8, np.float32)
    stats = kern.time(repeats=a, budget_s=0.01)
    assert stats.runs >= 3 and stats.median > 0
    assert kern.time_arguments({"repeats": a}, warmup=0, repeats=2).runs == 2
    with pytest.raises(sl.ArgumentError, match="missing argument"):
        kern.time(budget_s=0.01)


def test_funcs_with_unicode_names_compile_and_run():
    # Python names may be Unicode; the kernel's machine-level names must still be ASCII
    A = sl.Input("données", sl.float32, ("N",))
    x = sl.Var("идx")
    g = sl.Func("名前")
    g[x] = A[x] * 2
    out = sl.Func("é", shape=(A.shape[0],))
    out[x] = g[x] + 1
    s = sl.Schedule(out)
    xo, xi = s[out].split(x, 16)
    s[out].parallel(xo).vectorize(xi)
    s[g].compute_at(out, xo)
    kern = sl.compile(out, s)
    a = np.arange(40, dtype=np.float32)
    np.testing.assert_array_equal(kern(données=a), a * 2 + 1)


def test_out_messages_name_the_output_only_when_there_are_several():
    X = sl.Input("X", sl.float32, (4,))
    i = sl.Var("i")
    f, g = sl.Func("f", shape=(4,)), sl.Func("g", shape=(4,))
    f[i] = X[i] + 1
    g[i] = X[i] * 2
    kern = sl.compile([f, g])
    x = np.zeros(4, np.float32)
    with pytest.raises(sl.ArgumentError, match=r"^out= for output g: expected dtype float32"):
        kern(X=x, out=(np.zeros(4, np.float32), np.zeros(4, np.float64)))
    from schedlang.frontend import Tensor
    y = Tensor.input("y", (4,))
    with pytest.raises(sl.ArgumentError, match=r"^out=: the array must be C-contiguous"):
        sl.compile(y.relu())(y=x, out=np.zeros(8, np.float32)[::2])


def test_extents_past_the_int32_loop_range_are_refused():
    # Vars are int32 (SPEC §1): a dimension of 2**31 elements would wrap them
    for shape in ((2 ** 31,), (10 ** 23,)):
        with pytest.raises(sl.AlgorithmError, match=re.escape(
                f"Input A shape: {shape[0]} is more than 2147483647, the largest extent of one "
                "dimension (loop variables are int32)")):
            sl.Input("A", sl.float32, shape)
    with pytest.raises(sl.AlgorithmError, match="RDom r extent: 8589934592 is more than"):
        sl.RDom((0, 2 ** 33), name="r")
    A = sl.Input("A", sl.uint8, ("N",))
    i = sl.Var("i")
    g = sl.Func("g", shape=(A.shape[0] * 4096,))
    g[i] = A[i // 4096]
    kern = sl.compile(g)
    # arrays of those sizes without the memory: every element is the same byte
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=(2 ** 31 + 16,),
                                          strides=(0,))
    with pytest.raises(sl.ArgumentError, match=re.escape(
            "input A: dimension 0 has 2147483664 elements, more than 2147483647")):
        kern(A=big)
    with pytest.raises(sl.ArgumentError, match=re.escape(
            "output g: dimension 0 would be N * 4096 = 2147487744 > 2147483647")):
        kern(A=np.zeros(2 ** 19 + 1, np.uint8))


@pytest.mark.parametrize("dtype, value, shown", [(sl.float16, 1e6, "1000000.0"),
                                                 (sl.bfloat16, 1e300, "1e+300"),
                                                 (sl.float32, 10 ** 400, "an int of 401 digits")])
def test_a_float_param_beyond_its_type_is_an_argument_error(dtype, value, shown):
    p = sl.Param("p", dtype)
    i = sl.Var("i")
    f = sl.Func("f", shape=(2,))
    f[i] = sl.cast(sl.float64, p)
    kern = sl.compile(f)
    with pytest.raises(sl.ArgumentError, match=re.escape(
            f"Param p: {shown} is beyond the range of {dtype.name} (it would be infinite)")):
        kern(p=value)
    np.testing.assert_array_equal(kern(p=float("-inf")), [-np.inf, -np.inf])
    np.testing.assert_array_equal(kern(p=1.5), [1.5, 1.5])


def test_a_bool_param_takes_true_false_or_one_zero_only():
    p = sl.Param("p", sl.bool)
    i = sl.Var("i")
    f = sl.Func("f", shape=(2,))
    f[i] = sl.select(p, 1, 2)
    kern = sl.compile(f)
    for v, want in ((True, 1), (np.bool_(False), 2), (1, 1), (0, 2)):
        np.testing.assert_array_equal(kern(p=v), [want, want])
    for bad in (2, -1, 0.5, "x"):
        with pytest.raises(sl.ArgumentError, match=re.escape(
                f"Param p: expected a bool (True / False, or 1 / 0), got {bad!r}")):
            kern(p=bad)


def test_from_json_of_something_else_says_what_it_got():
    A = sl.Input("A", sl.float32, (8,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(8,))
    f[i] = A[i]
    for text, got in (('{"a": 1}', 'it has no "directives"'), ("[]", "an array, not an object"),
                      ('"x"', "a string, not an object"), ("nope", "not JSON")):
        with pytest.raises(sl.ScheduleError, match=re.escape(got) + ".*give the text that "
                           r"Schedule\.to_json\(\) writes"):
            sl.Schedule.from_json(text, f)


def test_torch_tensors_with_a_negation_bit_or_requiring_grad():
    """A pending negation (x.conj().imag) would be dropped by __dlpack__: refused. An input
    that requires grad is read (its values); as out= it is refused, torch would not export
    it."""
    torch = pytest.importorskip("torch")
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * 2
    kern = sl.compile(f)
    a = np.arange(4, dtype=np.float32)
    ta = torch.from_numpy(a)
    negated = torch.complex(ta, ta).conj().imag
    assert negated.is_neg()
    with pytest.raises(sl.ArgumentError, match="argument A: the tensor carries a pending "
                                               "negation.*resolve_neg"):
        kern(A=negated)
    np.testing.assert_array_equal(kern(A=negated.resolve_neg()), -2 * a)
    np.testing.assert_array_equal(kern(A=ta.clone().requires_grad_()), 2 * a)
    with pytest.raises(sl.ArgumentError, match="out=.*require gradient"):
        kern(A=a, out=torch.zeros(4, requires_grad=True))


def test_an_rdom_range_set_by_a_param_must_fit_int32():
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, (4,))
    p = sl.Param("p", sl.int64)
    r = sl.RDom((p, 3), name="r")
    f = sl.Func("f", shape=(4,))
    f[x] = A[x] + sl.cast(sl.float32, sl.sum(r + 0))
    kern = sl.compile(f)
    np.testing.assert_array_equal(kern(A=np.zeros(4, np.float32), p=5), [18] * 4)
    with pytest.raises(sl.ArgumentError, match=r"RDom r: its range \[p, p \+ 3\) must lie "
                                               r"within int32.*got p = 1099511627776"):
        kern(A=np.zeros(4, np.float32), p=2 ** 40)


def test_violated_assume_reads_as_written():
    """The fact is shown in the user's spelling (no widening casts) with what to do."""
    A = sl.Input("A", sl.float32, ("M_assume_text",))
    p = sl.Param("p_assume_text", sl.int32)
    sl.assume(p <= A.shape[0])
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] + sl.cast(sl.float32, p)
    kern = sl.compile(f)
    with pytest.raises(sl.ArgumentError) as ei:
        kern(A=np.ones(4, np.float32), p_assume_text=5)
    msg = str(ei.value)
    assert "assume(p_assume_text <= M_assume_text)" in msg, msg
    assert "M_assume_text=4, p_assume_text=5" in msg and "satisfy" in msg, msg


def _plus_one_then_double():
    """f = A + 1 and g = 2 f, both outputs of symbolic length N."""
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = f[x] * 2
    return f, g


def test_an_output_listed_twice_is_refused():
    f, g = _plus_one_then_double()
    with pytest.raises(sl.CompileError, match=r"sl.compile: the output f is listed twice"):
        sl.compile([f, g, f])
    with pytest.raises(sl.CompileError, match=r"sl.lower: the output f is listed twice"):
        sl.lower([f, f])
    with pytest.raises(sl.ScheduleError, match=r"the output f is listed twice"):
        sl.Schedule(f, f)
    with pytest.raises(sl.CompileError, match=r"^sl.lower: schedule must be an sl.Schedule"):
        sl.lower(f, 5)


def test_out_must_hold_one_array_per_output():
    f, g = _plus_one_then_double()
    kern = sl.compile([f, g])
    a = np.zeros(4, np.float32)
    o1, o2 = np.empty(4, np.float32), np.empty(4, np.float32)
    for out, kind in (({"f": o1, "g": o2}, "dict"), (iter([o1, o2]), "list_iterator"),
                      ({1, 2}, "set")):
        with pytest.raises(sl.ArgumentError, match=rf"2 outputs \(f, g\); pass a tuple or list "
                           rf"of their arrays in that order, not a {kind}"):
            kern(A=a, out=out)
    with pytest.raises(sl.ArgumentError, match=r"2 outputs \(f, g\) and out= holds 1"):
        kern(A=a, out=[o1])
    r1, r2 = kern(A=a, out=[o1, o2])
    assert r1 is o1 and r2 is o2 and (o2 == 2).all()
    one = sl.compile(f)
    with pytest.raises(sl.ArgumentError, match=r"one output \(f\); pass its array \(a list is "
                       r"read as one array per output"):
        one(A=np.zeros(3, np.float32), out=[[0] * 3] * 5)


def test_unknown_keywords_and_broken_array_producers_are_schedlang_errors():
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    with pytest.raises(sl.CompileError, match=r"sl.compile: no argument named 'bogus'; its "
                       r"arguments are \(outputs, schedule=None, target='llvm'\)"):
        sl.compile(f, bogus=1)
    with pytest.raises(sl.CompileError, match=r"sl.lower: no argument named 'tagret'"):
        sl.lower(f, tagret="llvm")

    class BrokenInterface:
        @property
        def __array_interface__(self):
            raise RuntimeError("boom")
    with pytest.raises(sl.ArgumentError, match=r"argument A: cannot read it through "
                       r"__array_interface__ \(boom\)"):
        sl.compile(f)(A=BrokenInterface())


def test_a_zero_d_tensor_is_a_param_value_like_a_zero_d_array():
    torch = pytest.importorskip("torch")
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    scale = sl.Param("scale_0d", sl.float32)
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * scale
    kern = sl.compile(f)
    a = np.arange(3, dtype=np.float32)
    for v in (np.array(2.0), torch.tensor(2.0), torch.tensor(2.0, requires_grad=True)):
        np.testing.assert_array_equal(kern(A=a, scale_0d=v), a * 2)
    with pytest.raises(sl.ArgumentError, match="Param scale_0d"):
        kern(A=a, scale_0d=torch.tensor([2.0]))


def plus_one_kernel(input_name="A"):
    """``C[i] = <input>[i] + 1`` over a 1-D float32 Input of symbolic size, compiled."""
    A = sl.Input(input_name, sl.float32, ("N",))
    i = sl.Var("i")
    C = sl.Func("C", shape=(A.shape[0],))
    C[i] = A[i] + 1
    return sl.compile(C)


def test_time_takes_an_input_named_self_like_a_call():
    kern = plus_one_kernel("self")
    a = np.ones(8, np.float32)
    np.testing.assert_array_equal(kern(self=a), a + 1)
    assert kern.time(self=a, repeats=2).runs == 2


def test_a_misspelled_timing_option_is_pointed_out():
    kern = plus_one_kernel()
    with pytest.raises(sl.ArgumentError, match=r"time\(\): unexpected argument repeat \(did you "
                                               r"mean the timing option repeats=\?\)"):
        kern.time(A=np.ones(4, np.float32), repeat=3)


def test_some_outputs_empty_is_refused_by_call_and_time_alike():
    # the code relies on every output size being >= 1 when it runs; time() ran it anyway
    A = sl.Input("A", sl.float32, ("M", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    C = sl.Func("C", shape=(A.shape[0], A.shape[1]))
    C[i, j] = A[i, j] + 1.0
    D = sl.Func("D", shape=(A.shape[0],))
    D[i] = sl.sum(A[i, r])
    kern = sl.compile([C, D])
    for call in (kern, kern.time):
        with pytest.raises(sl.ArgumentError, match="output.s. C would be empty while others are "
                                                   "not.*compile the outputs as separate"):
            call(A=np.zeros((3, 0), np.float32))
    c, d = kern(A=np.zeros((0, 4), np.float32))          # all empty: nothing to run
    assert c.shape == (0, 4) and d.shape == (0,)
    assert kern.time(A=np.zeros((0, 4), np.float32), repeats=3).runs == 3
    np.testing.assert_array_equal(sl.compile(D)(A=np.zeros((3, 0), np.float32)), 0)


def test_argument_lists_in_messages_are_in_name_order():
    A = sl.Input("A", sl.float32, ("N",))
    B = sl.Input("B", sl.float32, ("N",))
    i = sl.Var("i")
    C = sl.Func("C", shape=(A.shape[0],))
    C[i] = B[i] + A[i]
    kern = sl.compile(C)
    with pytest.raises(sl.ArgumentError, match=r"keyword arguments only \(A=\.\.\., B=\.\.\.\)"):
        kern(np.ones(4, np.float32))


def test_a_wrong_dtype_says_how_to_convert_numpy_and_torch_arrays():
    with pytest.raises(sl.ArgumentError, match=r"\.astype\(np\.float32\) \(a torch tensor: "
                                               r"\.to\(torch\.float32\)\)"):
        plus_one_kernel()(A=np.ones(4, np.float64))
