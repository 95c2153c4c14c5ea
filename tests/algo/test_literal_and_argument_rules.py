"""Weak-literal typing of ``**``, shifts, ``select`` and float operands (SPEC §1), and the
kernel's arguments: Inputs and Params as written, reserved names, what sl.compile takes."""
import re
import warnings

import numpy as np
import pytest

import schedlang as sl

x = sl.Var("x")


def compile_1d(dtype, fn, name="f", **schedule):
    """A kernel computing ``fn(A[x])`` over a 1-D Input ``A`` of ``dtype``."""
    A = sl.Input("A", dtype, ("N",))
    f = sl.Func(name, shape=(A.shape[0],))
    f[x] = fn(A[x])
    s = sl.Schedule(f)
    if schedule.get("vectorize"):
        s[f].vectorize(x, schedule["vectorize"])
    return sl.compile(f, s)


INT32_VALUES = np.array([3, -2, 5, 0, 1, -1, 7, 2, 11, -13, 2, 6, 9, 4, -3, 8], np.int32)


# ----------------------------------------------------------------------------- int ** int

@pytest.mark.parametrize("exponent", [0, 1, 2, 16, 17, 31, 40, 1000])
def test_int_power_of_literal_is_int_like_numpy(exponent):
    kern = compile_1d(sl.int32, lambda a: a ** exponent)
    got = kern(A=INT32_VALUES)
    with np.errstate(all="ignore"):
        want = INT32_VALUES ** np.int32(exponent)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_literal_base_to_int_power_is_int():
    exponents = np.arange(16, dtype=np.int32)
    got = compile_1d(sl.int32, lambda a: 2 ** a)(A=exponents)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, 2 ** exponents)


@pytest.mark.parametrize("vector_width", [None, 8])
def test_typed_int_power_matches_numpy(vector_width):
    A = sl.Input("A", sl.int32, ("N",))
    B = sl.Input("B", sl.int32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.pow(A[x], B[x])
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = A[x] ** B[x]
    assert f.dtype == sl.int32 and g.dtype == sl.int32
    b = np.array([3, 5, 2, 31, 0, 7, 11, 30, 1, 4, 63, 2, 9, 12, 5, 40], np.int32)
    for func in (f, g):
        s = sl.Schedule(func)
        if vector_width:
            s[func].vectorize(x, vector_width)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(sl.compile(func, s)(A=INT32_VALUES, B=b),
                                          INT32_VALUES ** b)


def test_int_power_promotes_like_numpy():
    A8 = sl.Input("A8", sl.uint8, ("N",))
    B8 = sl.Input("B8", sl.int8, ("N",))
    C = sl.Input("C", sl.bool, ("N",))
    I = sl.Input("I", sl.int32, ("N",))
    assert (A8[x] ** B8[x]).dtype == sl.int16              # numpy: uint8 ** int8 -> int16
    assert (C[x] ** I[x]).dtype == sl.int32                # bool ** int32 -> int32
    assert (C[x] ** C[x]).dtype == sl.int8                 # bool ** bool -> int8
    assert (C[x] ** 2).dtype == sl.int32                   # a literal next to a bool: int32
    assert (I[x] ** 2.5).dtype == sl.float32


def test_bool_floor_division_and_modulo_are_int8_like_numpy():
    C = sl.Input("C", sl.bool, ("N",))
    D = sl.Input("D", sl.bool, ("N",))
    assert (C[x] // D[x]).dtype == sl.int8
    assert (C[x] % D[x]).dtype == sl.int8
    c = np.array([True, False, True, False])
    d = np.array([True, True, True, True])
    f = sl.Func("f", shape=("N",))
    f[x] = C[x] // D[x] + C[x] % D[x]
    got = sl.compile(f, sl.Schedule(f))(C=c, D=d)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, c // d + c % d)


def test_int8_power_wraps_like_numpy():
    a = np.arange(-4, 4, dtype=np.int8)
    got = compile_1d(sl.int8, lambda v: v ** 100)(A=a)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, a ** np.int8(100))


def test_negative_literal_exponent_of_int_is_an_error():
    A = sl.Input("A", sl.int32, ("N",))
    with pytest.raises(sl.AlgorithmError, match=r"A\[x\] \*\* -1: an integer to a negative "
                                                r"integer power.*sl.cast\(sl.float32, A\[x\]\)"):
        A[x] ** -1
    F = sl.Input("F", sl.float32, ("N",))
    assert (F[x] ** -1).dtype == sl.float32                # a float base takes it


def test_exponent_literal_must_fit_the_base_type():
    A = sl.Input("A", sl.int8, ("N",))
    with pytest.raises(sl.AlgorithmError, match=r"the literal 300 does not fit sl.int8 "
                                                r"\(the type of the other operand of '\*\*'\)"):
        A[x] ** 300


# ------------------------------------------------------- int literals next to float operands

@pytest.mark.parametrize("dtype, literal", [(sl.float16, 100000), (sl.float32, 2 ** 200),
                                            (sl.bfloat16, 2 ** 130)])
def test_int_literal_that_overflows_a_float_type_is_an_error(dtype, literal):
    A = sl.Input("A", dtype, ("N",))
    with pytest.raises(sl.AlgorithmError, match=rf"the int literal {literal} does not fit "
                                                rf"{dtype!r}.*round to inf"):
        A[x] + literal


def test_int_literal_that_rounds_to_the_largest_float16_is_kept():
    got = compile_1d(sl.float16, lambda a: a + 65519)(A=np.zeros(2, np.float16))
    np.testing.assert_array_equal(got, np.float16(65504))


def test_float_literal_that_overflows_gives_inf_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = compile_1d(sl.float32, lambda a: a + 1e300)(A=np.ones(2, np.float32))
    np.testing.assert_array_equal(got, np.full(2, np.inf, np.float32))


# ----------------------------------------------------------------------------- shifts

def test_shifts_promote_like_numpy():
    U8 = sl.Input("U8", sl.uint8, ("N",))
    I64 = sl.Input("I64", sl.int64, ("N",))
    I32 = sl.Input("I32", sl.int32, ("N",))
    C = sl.Input("C", sl.bool, ("N",))
    assert (U8[x] << I64[x]).dtype == sl.int64
    assert (C[x] << I32[x]).dtype == sl.int32
    assert (C[x] >> C[x]).dtype == sl.int8
    assert (1 << U8[x]).dtype == sl.uint8
    assert (U8[x] >> 1).dtype == sl.uint8


def test_uint8_shifted_by_int64_matches_numpy():
    A = sl.Input("A", sl.uint8, ("N",))
    B = sl.Input("B", sl.int64, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] << B[x]
    a = np.array([1, 255, 3, 128], np.uint8)
    b = np.array([1, 8, 20, 40], np.int64)
    got = sl.compile(f)(A=a, B=b)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, a << b)


def test_literal_shifted_by_uint8_is_uint8():
    a = np.arange(8, dtype=np.uint8)
    got = compile_1d(sl.uint8, lambda v: 1 << v)(A=a)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.uint8(1) << a)


def test_shift_literal_rules():
    U8 = sl.Input("U8", sl.uint8, ("N",))
    I8 = sl.Input("I8", sl.int8, ("N",))
    T = sl.Input("T", sl.int32, ("N",))
    with pytest.raises(sl.AlgorithmError, match=r"the literal 300 does not fit sl.uint8"):
        U8[x] << 300
    with pytest.raises(sl.AlgorithmError, match=r"U8\[x\] >> -1': a shift amount cannot be "
                                                r"negative; use << 1"):
        U8[x] >> -1
    with pytest.raises(sl.AlgorithmError, match=r"shift amount cannot be negative"):
        I8[x] << -2
    with pytest.raises(sl.AlgorithmError, match=r"'<<' needs integer or bool operands, got the "
                                                r"float literal 2.5 << sl.int32"):
        2.5 << T[x]
    with pytest.raises(sl.AlgorithmError, match=r"got sl.int32 << the float literal 2.5"):
        T[x] << 2.5


# --------------------------------------------------------------- the kernel's arguments

def test_power_zero_keeps_the_input_as_an_argument():
    # a fixed output shape: only the read of A makes A an argument
    A = sl.Input("A", sl.int32, (4,))
    f = sl.Func("f", shape=(4,))
    f[x] = A[x] ** 0
    kern = sl.compile(f)
    a = INT32_VALUES[:4]
    np.testing.assert_array_equal(kern(A=a), a ** 0)
    with pytest.raises(sl.ArgumentError, match=r"missing argument\(s\): A; the kernel takes A$"):
        kern()
    F = sl.Input("F", sl.float32, (3,))
    g = sl.Func("g", shape=(3,))
    g[x] = F[x] ** 0
    b = np.array([np.nan, 2.0, -np.inf], np.float32)
    np.testing.assert_array_equal(sl.compile(g)(F=b), b ** 0)


def test_param_whose_reads_fold_away_is_still_an_argument():
    A = sl.Input("A", sl.float32, ("N",))
    p = sl.Param("p", sl.float32)
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + p ** 0
    got = sl.compile(f)(A=np.ones(3, np.float32), p=5.0)
    np.testing.assert_array_equal(got, np.full(3, 2.0, np.float32))


def test_kernel_without_arguments_says_so():
    f = sl.Func("f", shape=(3,))
    f[x] = x + 1
    kern = sl.compile(f)
    with pytest.raises(sl.ArgumentError, match=r"unexpected argument\(s\): Z; the kernel takes "
                                               r"no arguments$"):
        kern(Z=1)


def test_func_shape_with_a_param_is_an_error():
    p = sl.Param("p", sl.int32)
    with pytest.raises(sl.AlgorithmError, match=r"Func h shape: p uses the Param p, which cannot "
                                                r"set a size; sizes are ints or str names of "
                                                r"symbolic sizes"):
        sl.Func("h", shape=(p,))
    A = sl.Input("A", sl.float32, ("N",))
    with pytest.raises(sl.AlgorithmError, match=r"Func h shape: .* uses the Param p"):
        sl.Func("h", shape=(A.shape[0] + p,))
    with pytest.raises(sl.AlgorithmError, match=r"Input B shape: p uses the Param p, which "
                                                r"cannot set a size"):
        sl.Input("B", sl.float32, (p,))
    with pytest.raises(sl.AlgorithmError, match=r"Func h shape: x uses the Var x"):
        sl.Func("h", shape=(x,))


@pytest.mark.parametrize("make", [lambda: sl.Input("out", sl.float32, ("N",)),
                                  lambda: sl.Param("out", sl.int32)])
def test_out_is_a_reserved_argument_name(make):
    with pytest.raises(sl.AlgorithmError, match=r"name 'out' is reserved: a kernel takes the "
                                                r"output array as out=\.\.\.; pick another name"):
        make()


@pytest.mark.parametrize("what, match", [
    (5, r"takes an output Func \(or a list of them, or a frontend Tensor\), got 5 \(int\)"),
    ([], r"got an empty list"),
    ("input", r"got the Input A; an Input is an argument of the kernel"),
])
def test_compile_of_something_else_than_funcs_is_a_compile_error(what, match):
    if what == "input":
        what = sl.Input("A", sl.float32, ("M", "N"))
    with pytest.raises(sl.CompileError, match=match):
        sl.compile(what)
    with pytest.raises(sl.CompileError, match=match):
        sl.lower(what)


# ----------------------------------------------------------------- select, error messages

def test_select_of_two_literals_is_int32_and_must_fit():
    C = sl.Input("C", sl.bool, ("N",))
    assert sl.select(C[x], 2, 0).dtype == sl.int32
    with pytest.raises(sl.AlgorithmError, match=r"the literal 1099511627776 stands alone, so it "
                                                r"is sl.int32"):
        sl.select(C[x], 2 ** 40, 0)


def test_frontend_where_of_two_int_literals_is_int64_and_past_it_an_error():
    import schedlang.frontend as F
    cond = F.Tensor(np.array([True, False]))
    got = F.where(cond, 2 ** 40, 0).numpy()     # as np.where: int64
    assert got.dtype == np.int64 and got.tolist() == [2 ** 40, 0]
    with pytest.raises(sl.AlgorithmError, match=r"the literal 1180591620717411303424 stands "
                                                r"alone"):
        F.where(cond, 2 ** 70, 0)


def test_literal_error_names_no_internal_placeholder():
    import schedlang.frontend as F
    t = F.Tensor(np.zeros(3, np.uint8))
    with pytest.raises(sl.AlgorithmError) as err:
        t + 256
    message = str(err.value)
    assert "_p" not in message
    assert "the literal 256 does not fit sl.uint8 (the type of the other operand of '+')" \
        in message


def test_a_misspelled_argument_is_named_with_the_one_it_may_mean():
    A = sl.Input("A", sl.float32, (3,))
    alpha = sl.Param("alpha", sl.float32)
    f = sl.Func("f", shape=(3,))
    f[x] = A[x] * alpha
    kern = sl.compile(f)
    with pytest.raises(sl.ArgumentError, match=re.escape(
            "missing argument(s): alpha; unexpected argument(s): alpa (did you mean alpha?); "
            "the kernel takes A, alpha")):
        kern(A=np.ones(3, np.float32), alpa=2.0)
    with pytest.raises(sl.ArgumentError, match=re.escape(
            "unexpected argument(s): B, alphaa (did you mean alpha?); the kernel takes A, alpha")):
        kern(A=np.ones(3, np.float32), alpha=2.0, alphaa=1.0, B=1)


@pytest.mark.parametrize("build, says", [
    (lambda A, U, I, i, k: sl.sum(A[i, k]) / A.shape[1],
     r"'/' of sum\(A\[i, k\] over k\) \(sl.float32\) and K \(sl.int64\): no type holds both "
     r"without loss; .*sl.cast\(sl.float32, K\)"),
    (lambda A, U, I, i, k: U[i] + I[i], r"'\+' of U\[i\] .* sl.cast\(sl.int64, U\[i\]\)"),
])
def test_a_lossy_mix_names_the_operator_and_operands_and_the_cast_to_write(build, says):
    A = sl.Input("A", sl.float32, ("M", "K"))
    U = sl.Input("U", sl.uint64, ("M",))
    I = sl.Input("I", sl.int64, ("M",))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    with pytest.raises(sl.AlgorithmError, match=says):
        build(A, U, I, i, k)


@pytest.mark.parametrize("build, says", [
    (lambda A, x: sl.clamp_edge(A[x]), "sl.clamp_edge: the source must be an Input or a Func, "
                                       "got the expression A[x]; pass the Func itself"),
    (lambda A, x: sl.mirror(3), "sl.mirror: the source must be an Input or a Func, got an int"),
    (lambda A, x: sl.cast(A[x], sl.float32), "sl.cast: the type comes first"),
    (lambda A, x: sl.Input("B", None, (3,)), "Input B: None is not a schedlang type"),
    (lambda A, x: sl.Input("B", sl.float32, None), "Input B: the shape must be a tuple of sizes"),
    (lambda A, x: sl.vars(3), "sl.vars: give the names as one str"),
])
def test_constructor_mistakes_are_algorithm_errors_that_say_what_to_pass(build, says):
    A, x = sl.Input("A", sl.float32, ("N",)), sl.Var("x")
    with pytest.raises(sl.AlgorithmError) as err:
        build(A, x)
    assert says in str(err.value)


def test_two_params_of_one_name_and_two_types_are_refused_one_type_is_one_argument():
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = sl.cast(sl.int32, sl.Param("p", sl.uint8)) * 1000 + sl.cast(sl.int32,
                                                                      sl.Param("p", sl.int8))
    with pytest.raises(sl.AlgorithmError, match="two Params are named 'p', one sl.int8 and one "
                                                "sl.uint8; give each Param its own name"):
        sl.compile(f)
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = sl.Param("q", sl.int32) + sl.Param("q", sl.int32) + A[x]
    np.testing.assert_array_equal(sl.compile(g)(A=np.ones(2, np.float32), q=3), [7, 7])


def test_floor_and_ceil_of_integers_are_the_integers_as_numpy():
    x = sl.Var("x")
    A = sl.Input("A", sl.int16, (4,))
    f = sl.Func("f", shape=(4,))
    f[x] = sl.floor(A[x]) + sl.ceil(A[x])
    a = np.array([-3, 2, 5, 32000], np.int16)
    got = sl.compile(f)(A=a)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, np.floor(a) + np.ceil(a))


@pytest.mark.parametrize("make", [
    lambda F, D: F[x] + 2 ** 1100, lambda F, D: D[x] + 2 ** 1024,
    lambda F, D: sl.min(D[x], 2 ** 1024), lambda F, D: D[x] < 2 ** 1024,
    lambda F, D: sl.select(D[x] > 0, D[x], 2 ** 1024), lambda F, D: x * 1.0 + 2 ** 1024])
def test_an_int_literal_past_every_double_is_an_algorithm_error(make):
    # the message itself used float(literal), which raised a bare OverflowError
    F = sl.Input("F", sl.float32, ("N",))
    D = sl.Input("D", sl.float64, ("N",))
    with pytest.raises(sl.AlgorithmError, match=r"the int literal (of \d+ digits )?does not "
                                                r"fit .*float\('inf'\)"):
        make(F, D)


@pytest.mark.parametrize("dtype", [sl.float64, sl.float32, sl.float16, sl.bfloat16])
def test_casting_an_int_literal_past_every_double_gives_inf(dtype):
    assert sl.cast(dtype, 10 ** 400).value == float("inf")
    assert sl.cast(dtype, -10 ** 400).value == -float("inf")


@pytest.mark.parametrize("dtype, npdt", [(sl.float16, np.float16), (sl.float32, np.float32),
                                         (sl.bfloat16, None)])
def test_casting_negative_zero_keeps_its_sign(dtype, npdt):
    v = sl.cast(dtype, -0.0).value
    assert v == 0 and np.signbit(v)


def test_a_bfloat16_literal_is_rounded_once_from_the_double():
    # 1.00390625000001 is just above the midpoint of 1.0 and 1.0078125; through float32
    # it became the midpoint, and then rounded to even (1.0)
    B = sl.Input("B", sl.bfloat16, ("N",))
    f = sl.Func("f", shape=(B.shape[0],))
    f[x] = sl.cast(sl.float32, B[x] + 1.00390625000001)
    g = sl.Func("g", shape=(B.shape[0],))
    g[x] = sl.cast(sl.float32, B[x] + sl.cast(sl.bfloat16, 1.00390625000001))
    zero = np.zeros(2, np.uint16)       # bfloat16 0.0 as its bits
    np.testing.assert_array_equal(sl.compile(f)(B=zero), 1.0078125)
    np.testing.assert_array_equal(sl.compile(g)(B=zero), 1.0078125)


def test_select_between_zeros_of_both_signs_keeps_each():
    # 0.0 == -0.0, so a structural key by value made select(c, -0.0, 0.0) one constant
    A = sl.Input("A", sl.float32, (4,))
    f = sl.Func("f", shape=(4,))
    f[x] = 1.0 / sl.select(A[x] < 0, -0.0, 0.0)
    with np.errstate(divide="ignore"):
        got = sl.compile(f)(A=np.array([-1, 1, -1, 1], np.float32))
    np.testing.assert_array_equal(got, [-np.inf, np.inf, -np.inf, np.inf])


@pytest.mark.parametrize("dtype", [sl.float32, sl.float64, sl.bfloat16])
def test_a_zero_dimensional_bfloat16_torch_tensor_is_read_as_its_value(dtype):
    torch = pytest.importorskip("torch")
    P = sl.Param("p", dtype)
    h = sl.Func("h", shape=(1,))
    h[x] = sl.cast(sl.float32, P) * sl.cast(sl.float32, x + 1)
    got = sl.compile(h)(p=torch.tensor(1.5, dtype=torch.bfloat16))
    np.testing.assert_array_equal(got, [1.5])
