"""Tests of the LLVM CPU backend on hand-built loop IR, checked against numpy."""
import math
import re

import numpy as np
import pytest
import llvmlite.binding as llvm

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.algo import types as T
from schedlang.errors import CompileError
from schedlang.lower.ir import (Allocate, Assert, Barrier, Block, Broadcast, Evaluate, For,
                                IfThenElse, KernelArg, LetStmt, Load, Ramp, Store,
                                VectorReduce, i64)
from schedlang.targets import llvm as backend
from schedlang.targets.llvm import compile_llvm, pack_args


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own empty machine-code cache."""
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))


def V(name, dtype=T.int64):
    return E.Var(name, dtype)


def C(value, dtype):
    return E.Const(value, dtype)


def buf(name, dtype):
    return KernelArg(name, "buffer", dtype)


def scalar(name, dtype):
    return KernelArg(name, "scalar", dtype)


def run(stmt, args, values, nthreads=1, target="llvm", name="kernel"):
    """Compile and run; returns (status, module)."""
    mod = compile_llvm(stmt, args, name, target)
    argv = pack_args(args, values)
    return mod.call(argv.ctypes.data, nthreads), mod


def elementwise(fn, inputs, out_dtype, values, lanes=1, name="kernel", target="llvm"):
    """out[x] = fn(in0[x], in1[x], ...) over n elements (n a multiple of lanes).

    ``inputs`` is a list of (name, dtype); ``values`` maps the input names to arrays.
    Returns the output array.
    """
    n = len(next(iter(values.values())))
    assert n % lanes == 0
    x = V("x")
    index = x if lanes == 1 else Ramp(E.BinOp("mul", x, i64(lanes)), i64(1), lanes)
    loads = [Load(nm, index, dt) for nm, dt in inputs]
    stmt = For("x", i64(0), V("n"), "serial", Store("out", fn(*loads), index))
    args = [buf(nm, dt) for nm, dt in inputs] + [buf("out", out_dtype), scalar("n", T.int64)]
    out = np.zeros(n, dtype=out_dtype.numpy)
    rc, _ = run(stmt, args, dict(values, out=out, n=n // lanes), name=name, target=target)
    assert rc == 0
    return out


def binop(op):
    return lambda a, b: E.BinOp(op, a, b)


def bf16_reference(x):
    """float32 -> bfloat16 bits, round-to-nearest-even, written independently of the backend."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    lsb = (u >> 16) & 1
    out = ((u + 0x7FFF + lsb) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


# ======================================================================= elementwise


def test_float32_multiply_add():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))
    f32 = T.float32
    out = elementwise(lambda x, y, z: E.BinOp("add", E.BinOp("mul", x, y), z),
                      [("a", f32), ("b", f32), ("c", f32)], f32, dict(a=a, b=b, c=c))
    np.testing.assert_allclose(out, a * b + c, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("lanes", [1, 8])
def test_int32_arithmetic_wraps(lanes):
    a = np.array([2**31 - 1, -2**31, 5, -7, 123456789, 0, 1, -1] * 4, dtype=np.int32)
    b = np.array([1, -1, 3, 2, 987654321, 0, -1, 1] * 4, dtype=np.int32)
    i32 = T.int32.with_lanes(1)
    for op, ref in [("add", a + b), ("sub", a - b), ("mul", a * b),
                    ("min", np.minimum(a, b)), ("max", np.maximum(a, b)),
                    ("bitand", a & b), ("bitor", a | b), ("bitxor", a ^ b)]:
        with np.errstate(over="ignore"):
            out = elementwise(binop(op), [("a", i32), ("b", i32)], i32, dict(a=a, b=b),
                              lanes=lanes)
        np.testing.assert_array_equal(out, ref, err_msg=op)


def test_uint8_wraps_and_compares_unsigned():
    a = np.array([200, 255, 0, 128, 10, 250, 1, 77], dtype=np.uint8)
    b = np.array([100, 1, 1, 128, 20, 10, 255, 77], dtype=np.uint8)
    u8 = T.uint8
    np.testing.assert_array_equal(
        elementwise(binop("add"), [("a", u8), ("b", u8)], u8, dict(a=a, b=b)), a + b)
    np.testing.assert_array_equal(
        elementwise(binop("sub"), [("a", u8), ("b", u8)], u8, dict(a=a, b=b)), a - b)
    np.testing.assert_array_equal(
        elementwise(binop("max"), [("a", u8), ("b", u8)], u8, dict(a=a, b=b)), np.maximum(a, b))
    out = elementwise(binop("lt"), [("a", u8), ("b", u8)], T.bool_, dict(a=a, b=b))
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, a < b)


def test_bool_buffers_and_logic():
    a = np.array([True, False, True, False] * 4)
    b = np.array([True, True, False, False] * 4)
    bl = T.bool_
    for op, ref in [("and", a & b), ("or", a | b), ("ne", a != b), ("eq", a == b)]:
        out = elementwise(binop(op), [("a", bl), ("b", bl)], bl, dict(a=a, b=b))
        np.testing.assert_array_equal(out, ref, err_msg=op)
        out = elementwise(binop(op), [("a", bl), ("b", bl)], bl, dict(a=a, b=b), lanes=4)
        np.testing.assert_array_equal(out, ref, err_msg=op)
    out = elementwise(lambda x: E.UnOp("not", x), [("a", bl)], bl, dict(a=a))
    np.testing.assert_array_equal(out, ~a)


def test_float_compare_nan_and_min_max():
    a = np.array([1.0, np.nan, 3.0, -0.0, np.inf, 2.0, np.nan, -5.0], dtype=np.float32)
    b = np.array([2.0, 1.0, np.nan, 0.0, 1.0, 2.0, np.nan, -6.0], dtype=np.float32)
    f32 = T.float32
    for op, ref in [("lt", a < b), ("le", a <= b), ("eq", a == b), ("ne", a != b),
                    ("gt", a > b), ("ge", a >= b)]:
        out = elementwise(binop(op), [("a", f32), ("b", f32)], T.bool_, dict(a=a, b=b), lanes=8)
        np.testing.assert_array_equal(out, ref, err_msg=op)
    # min / max: a NaN in either operand is the result, as numpy's minimum / maximum
    out = elementwise(binop("min"), [("a", f32), ("b", f32)], f32, dict(a=a, b=b), lanes=8)
    np.testing.assert_array_equal(out, np.minimum(a, b))
    out = elementwise(binop("max"), [("a", f32), ("b", f32)], f32, dict(a=a, b=b))
    np.testing.assert_array_equal(out, np.maximum(a, b))


def test_negation_and_bitwise_not():
    a = np.array([1, -2, 2**31 - 1, -2**31], dtype=np.int32)
    i32 = T.int32
    np.testing.assert_array_equal(
        elementwise(lambda x: E.UnOp("neg", x), [("a", i32)], i32, dict(a=a)), -a)
    np.testing.assert_array_equal(
        elementwise(lambda x: E.UnOp("not", x), [("a", i32)], i32, dict(a=a)), ~a)
    f = np.array([1.5, -0.0, np.inf, 2.0], dtype=np.float32)
    out = elementwise(lambda x: E.UnOp("neg", x), [("a", T.float32)], T.float32, dict(a=f))
    np.testing.assert_array_equal(out.view(np.uint32), (-f).view(np.uint32))


# ========================================================================== division


def _py_floordiv(a, b):
    return 0 if b == 0 else a // b


def _py_mod(a, b):
    return 0 if b == 0 else a % b


def _wrap(v, bits, signed=True):
    v &= (1 << bits) - 1
    if signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("dtype", [T.int32, T.int8, T.int64])
def test_signed_floordiv_and_mod_follow_python(dtype, lanes):
    lo = dtype.min_value()
    vals = [7, -7, 0, 1, -1, 13, -13, lo, lo + 1, dtype.max_value(), 6, -6, 5, -5, 100, -100]
    divs = [2, 2, 3, -1, -1, -4, 4, -1, 0, 0, 3, -3, -5, 5, 7, -7]
    a = np.array(vals * 2, dtype=dtype.numpy)
    b = np.array(divs + divs[::-1], dtype=dtype.numpy)
    for op, ref_fn in [("floordiv", _py_floordiv), ("mod", _py_mod)]:
        out = elementwise(binop(op), [("a", dtype), ("b", dtype)], dtype, dict(a=a, b=b),
                          lanes=lanes)
        ref = [_wrap(ref_fn(int(x), int(y)), dtype.bits) for x, y in zip(a, b)]
        np.testing.assert_array_equal(out, np.array(ref, dtype=dtype.numpy), err_msg=op)


@pytest.mark.parametrize("divisor", [7, 1, -3, 0, -1, 16, -2**31])
@pytest.mark.parametrize("lanes", [1, 4])
def test_signed_division_by_constant(divisor, lanes):
    a = np.array([-2**31, -100, -8, -7, -1, 0, 1, 6, 7, 8, 100, 2**31 - 1], dtype=np.int32)
    i32 = T.int32
    for op, ref_fn in [("floordiv", _py_floordiv), ("mod", _py_mod)]:
        def fn(x, op=op):
            d = C(divisor, i32)
            return E.BinOp(op, x, d if lanes == 1 else Broadcast(d, lanes))
        out = elementwise(fn, [("a", i32)], i32, dict(a=a), lanes=lanes)
        ref = [_wrap(ref_fn(int(x), divisor), 32) for x in a]
        np.testing.assert_array_equal(out, np.array(ref, dtype=np.int32), err_msg=op)


def test_int_min_divided_by_minus_one_does_not_trap():
    a = np.full(8, -2**31, dtype=np.int32)
    b = np.full(8, -1, dtype=np.int32)
    i32 = T.int32
    out = elementwise(binop("floordiv"), [("a", i32), ("b", i32)], i32, dict(a=a, b=b))
    np.testing.assert_array_equal(out, a)  # wraps back to INT_MIN
    out = elementwise(binop("mod"), [("a", i32), ("b", i32)], i32, dict(a=a, b=b))
    np.testing.assert_array_equal(out, 0)


def test_unsigned_division_and_zero_divisor():
    a = np.array([0, 1, 200, 255, 17, 99, 3, 250], dtype=np.uint8)
    b = np.array([0, 0, 7, 16, 5, 0, 255, 1], dtype=np.uint8)
    u8 = T.uint8
    with np.errstate(divide="ignore"):
        out = elementwise(binop("floordiv"), [("a", u8), ("b", u8)], u8, dict(a=a, b=b))
        np.testing.assert_array_equal(out, np.where(b == 0, 0, a // np.maximum(b, 1)))
        out = elementwise(binop("mod"), [("a", u8), ("b", u8)], u8, dict(a=a, b=b), lanes=8)
        np.testing.assert_array_equal(out, np.where(b == 0, 0, a % np.maximum(b, 1)))


def test_float_div_floordiv_mod():
    a = np.array([7.0, -7.0, 7.5, -7.5, 1.0, 0.0, 3.0, -3.0], dtype=np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 0.5, 1.0, 3.0, 3.0], dtype=np.float32)
    f32 = T.float32
    np.testing.assert_allclose(
        elementwise(binop("div"), [("a", f32), ("b", f32)], f32, dict(a=a, b=b)), a / b)
    np.testing.assert_array_equal(
        elementwise(binop("floordiv"), [("a", f32), ("b", f32)], f32, dict(a=a, b=b)), a // b)
    np.testing.assert_allclose(
        elementwise(binop("mod"), [("a", f32), ("b", f32)], f32, dict(a=a, b=b)), a % b)


# ============================================================================ shifts


@pytest.mark.parametrize("lanes", [1, 8])
def test_shift_amounts_beyond_the_width_give_numpys_results(lanes):
    """An amount of the width or more, or a negative one (read as unsigned), shifts every
    bit out: 0, or -1 for ``>>`` of a negative signed value; never poison."""
    amounts = np.array([0, 1, 5, 31, 32, 33, 40, 63, 64, 100, -1, -31, 7, 8, 16, 200],
                       dtype=np.int32)
    a = np.array([1, -1, 12345, -12345, 0x40000000, -2**31, 3, 0x7FFFFFFF] * 2, dtype=np.int32)
    i32 = T.int32
    out = elementwise(binop("shl"), [("a", i32), ("b", i32)], i32, dict(a=a, b=amounts),
                      lanes=lanes)
    np.testing.assert_array_equal(out, np.left_shift(a, amounts))
    np.testing.assert_array_equal(out[[4, 10]], [0, 0])
    out = elementwise(binop("shr"), [("a", i32), ("b", i32)], i32, dict(a=a, b=amounts),
                      lanes=lanes)
    np.testing.assert_array_equal(out, np.right_shift(a, amounts))  # arithmetic
    np.testing.assert_array_equal(out[[4, 5]], [0, -1])
    u = a.view(np.uint32)
    out = elementwise(binop("shr"), [("a", T.uint32), ("b", T.uint32)], T.uint32,
                      dict(a=u, b=amounts.view(np.uint32)), lanes=lanes)
    np.testing.assert_array_equal(out, np.right_shift(u, amounts.view(np.uint32)))  # logical


# ============================================================================= casts


def cast_to(dtype):
    return lambda x: E.Cast(dtype.with_lanes(x.dtype.lanes), x)


def _numpy_cast_or_none(v, src, dst):
    """numpy's cast of one value, or None beyond the 32-bit range, where numpy's result
    depends on its code path (one element or a SIMD loop) and on the CPU."""
    if not -2.0 ** 31 <= v < 2.0 ** 31:
        return None
    return int(np.array([v], src).astype(dst)[0])


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("dst", [T.int8, T.uint8, T.int16, T.uint16, T.int32, T.uint32,
                                 T.int64, T.uint64])
def test_float_to_int_truncates_and_wraps_as_numpy_does(lanes, src, dst):
    # SPEC section 1: truncate toward zero, narrowing ints wrap: (x * 50).cast(int8) and
    # (-0.5 * 255).cast(uint8) agree with numpy's astype; values beyond the 32-bit (64-bit)
    # conversion and NaN follow E.float_to_int_bits, in the kernel and the constant folder
    f = np.array([1.7, -1.7, 2.5, -2.5, 1e10, -1e10, np.nan, np.inf, -np.inf, 0.99, -0.99,
                  2147483520.0, -2147483648.0, 300.0, -300.0, 255.5, 200.7, -1.5, 65535.9,
                  3e9, -3e9, 5e18, 1.2e19, 3e19, 40000.0, -40000.0, 128.5, -128.5, 32767.9,
                  -32768.9, 4294967040.0, -0.0], dtype=src)
    sdt = T.float32 if src is np.float32 else T.float64
    out = elementwise(cast_to(dst), [("a", sdt)], dst, dict(a=f), lanes=lanes)
    bits = [E.float_to_int_bits(v, dst) for v in f.tolist()]
    np.testing.assert_array_equal(out, np.array(bits).astype(np.uint64).astype(dst.numpy))
    folded = [E.cast(dst, E.Const(v, sdt)).value for v in f.tolist()]
    np.testing.assert_array_equal(out, np.array(folded, dtype=dst.numpy))
    for v, got in zip(f.tolist(), out.tolist()):
        want = _numpy_cast_or_none(v, src, dst.numpy)
        assert want is None or got == want, (v, got, want)


def test_int_casts_by_source_signedness():
    a = np.array([-1, 255, 128, -128, 0, 127, 1000, -1000], dtype=np.int32)
    out = elementwise(cast_to(T.uint8), [("a", T.int32)], T.uint8, dict(a=a))
    np.testing.assert_array_equal(out, a.astype(np.uint8))
    b = a.astype(np.int8)
    out = elementwise(cast_to(T.int64), [("a", T.int8)], T.int64, dict(a=b), lanes=8)
    np.testing.assert_array_equal(out, b.astype(np.int64))
    u = a.astype(np.uint8)
    out = elementwise(cast_to(T.int32), [("a", T.uint8)], T.int32, dict(a=u))
    np.testing.assert_array_equal(out, u.astype(np.int32))
    out = elementwise(cast_to(T.float64), [("a", T.uint8)], T.float64, dict(a=u))
    np.testing.assert_array_equal(out, u.astype(np.float64))
    out = elementwise(cast_to(T.float32), [("a", T.int32)], T.float32, dict(a=a), lanes=8)
    np.testing.assert_array_equal(out, a.astype(np.float32))


def test_bool_casts():
    a = np.array([0.0, -0.0, 1.5, np.nan, -2.0, 0.0, 3.0, 1e-30], dtype=np.float32)
    out = elementwise(cast_to(T.bool_), [("a", T.float32)], T.bool_, dict(a=a))
    np.testing.assert_array_equal(out, a.astype(bool))
    i = np.array([0, 1, -1, 2, 0, 0, 7, 256], dtype=np.int32)
    out = elementwise(cast_to(T.bool_), [("a", T.int32)], T.bool_, dict(a=i), lanes=8)
    np.testing.assert_array_equal(out, i.astype(bool))
    bl = i.astype(bool)
    out = elementwise(cast_to(T.float32), [("a", T.bool_)], T.float32, dict(a=bl))
    np.testing.assert_array_equal(out, bl.astype(np.float32))
    out = elementwise(cast_to(T.int32), [("a", T.bool_)], T.int32, dict(a=bl), lanes=8)
    np.testing.assert_array_equal(out, bl.astype(np.int32))


def _bf16_test_values():
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-40,
                        1.00390625,   # exactly halfway between bf16 1.0 and 1.0078125: to even
                        1.01171875,   # halfway between 1.0078125 and 1.015625: to even (up)
                        1.0039063,    # just above halfway: up
                        65504.0, 1e-45, 3.3961776e38], dtype=np.float32)
    rng = np.random.default_rng(1)
    rand = rng.standard_normal(240).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 240)
    bits = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([special, rand.astype(np.float32), bits])


@pytest.mark.parametrize("lanes", [1, 16])
def test_bfloat16_rounds_to_nearest_even(lanes):
    f = _bf16_test_values()
    out = elementwise(cast_to(T.bfloat16), [("a", T.float32)], T.bfloat16, dict(a=f),
                      lanes=lanes)
    assert out.dtype == np.uint16
    ref = bf16_reference(f)
    nan = np.isnan(f)
    np.testing.assert_array_equal(out[~nan], ref[~nan])
    # NaN stays NaN (exponent all ones, mantissa nonzero).
    assert np.all((out[nan] & 0x7F80) == 0x7F80) and np.all((out[nan] & 0x7F) != 0)
    # And back: bf16 -> f32 is exact.
    back = elementwise(cast_to(T.float32), [("a", T.bfloat16)], T.float32, dict(a=ref),
                       lanes=lanes)
    np.testing.assert_array_equal(back.view(np.uint32)[~nan],
                                  ref[~nan].astype(np.uint32) << 16)


def test_bfloat16_arithmetic_goes_through_float32():
    a = bf16_reference(np.array([1.5, 2.0, -3.25, 100.0], dtype=np.float32))
    b = bf16_reference(np.array([0.25, 3.0, 1.0, 0.01], dtype=np.float32))
    bf = T.bfloat16
    out = elementwise(binop("mul"), [("a", bf), ("b", bf)], bf, dict(a=a, b=b))
    fa = (a.astype(np.uint32) << 16).view(np.float32)
    fb = (b.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(out, bf16_reference(fa * fb))
    out = elementwise(lambda x: E.UnOp("neg", x), [("a", bf)], bf, dict(a=a))
    np.testing.assert_array_equal(out, a ^ 0x8000)


@pytest.mark.parametrize("target", ["llvm", "llvm:x86-64"])  # with and without F16C
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_float16_conversions_and_arithmetic(target):
    rng = np.random.default_rng(2)
    f = np.concatenate([
        np.array([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 2.98e-8,
                  np.inf, -np.inf, 0.1, 1.0009765625, 1.00048828125], dtype=np.float32),
        (rng.standard_normal(112) * 100).astype(np.float32)])
    out = elementwise(cast_to(T.float16), [("a", T.float32)], T.float16, dict(a=f), lanes=8,
                      target=target)
    np.testing.assert_array_equal(out.view(np.uint16), f.astype(np.float16).view(np.uint16))
    d = f.astype(np.float64) * (1 + 2.0 ** -30)  # values between float32 neighbours
    out = elementwise(cast_to(T.float16), [("a", T.float64)], T.float16, dict(a=d),
                      target=target)
    np.testing.assert_array_equal(out.view(np.uint16), d.astype(np.float16).view(np.uint16))
    h = f.astype(np.float16)
    out = elementwise(cast_to(T.float32), [("a", T.float16)], T.float32, dict(a=h),
                      target=target)
    np.testing.assert_array_equal(out, h.astype(np.float32))
    out = elementwise(cast_to(T.int32), [("a", T.float16)], T.int32, dict(a=h), target=target)
    # infinities convert as numpy's do on x86 (E.float_to_int_bits), not clamped
    np.testing.assert_array_equal(out, [E.float_to_int_bits(v, T.int32) for v in h.tolist()])
    a, b = h[16:], h[16:][::-1].copy()
    out = elementwise(binop("add"), [("a", T.float16), ("b", T.float16)], T.float16,
                      dict(a=a, b=b), lanes=8, target=target)
    np.testing.assert_array_equal(out, (a.astype(np.float32) + b.astype(np.float32))
                                  .astype(np.float16))


# ============================================================================== math


MATH_CASES = [
    ("exp", np.exp, (-5, 5)), ("log", np.log, (0.01, 100)), ("sqrt", np.sqrt, (0, 100)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (0.01, 100)), ("sin", np.sin, (-10, 10)),
    ("cos", np.cos, (-10, 10)), ("tanh", np.tanh, (-5, 5)), ("floor", np.floor, (-5, 5)),
    ("ceil", np.ceil, (-5, 5)), ("abs", np.abs, (-5, 5)),
    ("erf", np.vectorize(math.erf), (-3, 3)),
]


@pytest.mark.parametrize("name,ref,domain", MATH_CASES, ids=[c[0] for c in MATH_CASES])
@pytest.mark.parametrize("dtype", [T.float32, T.float64])
@pytest.mark.parametrize("lanes", [1, 8])
def test_math_functions(name, ref, domain, dtype, lanes):
    x = np.random.default_rng(3).uniform(*domain, 64).astype(dtype.numpy)
    out = elementwise(lambda v: E.Call(name, [v], v.dtype), [("a", dtype)], dtype, dict(a=x),
                      lanes=lanes)
    tol = 2e-6 if dtype == T.float32 else 1e-13
    np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=tol, atol=tol)


def test_pow_and_int_abs():
    x = np.random.default_rng(4).uniform(0.1, 4, 32).astype(np.float32)
    y = np.random.default_rng(5).uniform(-2, 2, 32).astype(np.float32)
    out = elementwise(lambda a, b: E.Call("pow", [a, b], a.dtype),
                      [("a", T.float32), ("b", T.float32)], T.float32, dict(a=x, b=y), lanes=8)
    np.testing.assert_allclose(out, x.astype(np.float64) ** y, rtol=1e-5)
    i = np.array([-3, 3, 0, -2**31, 7, -7, 1, -1], dtype=np.int32)
    out = elementwise(lambda a: E.Call("abs", [a], a.dtype), [("a", T.int32)], T.int32,
                      dict(a=i), lanes=8)
    np.testing.assert_array_equal(out, np.abs(i))


def test_math_on_bfloat16_and_float16():
    x = np.linspace(-2, 2, 16, dtype=np.float32)
    h = x.astype(np.float16)
    out = elementwise(lambda v: E.Call("exp", [v], v.dtype), [("a", T.float16)], T.float16,
                      dict(a=h))
    np.testing.assert_array_equal(out, np.exp(h.astype(np.float32)).astype(np.float16))
    b = bf16_reference(x)
    out = elementwise(lambda v: E.Call("tanh", [v], v.dtype), [("a", T.bfloat16)], T.bfloat16,
                      dict(a=b), lanes=8)
    xb = (b.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(out, bf16_reference(np.tanh(xb)))


# ============================================================================ vectors


def test_ramp_broadcast_vector_load_store_fma_in_source():
    n = 64
    x = V("x")
    idx = Ramp(E.BinOp("mul", x, i64(16)), i64(1), 16)
    f32x16 = T.float32.with_lanes(16)
    alpha = Broadcast(V("alpha", T.float32), 16)
    value = E.BinOp("add", E.BinOp("mul", Load("a", idx, T.float32), alpha),
                    Load("c", idx, T.float32))
    assert value.dtype == f32x16
    stmt = For("x", i64(0), i64(n // 16), "vectorized", Store("out", value, idx))
    args = [buf("a", T.float32), buf("c", T.float32), buf("out", T.float32),
            scalar("alpha", T.float32)]
    a = np.arange(n, dtype=np.float32)
    c = np.ones(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    rc, mod = run(stmt, args, dict(a=a, c=c, out=out, alpha=0.5))
    assert rc == 0
    np.testing.assert_allclose(out, a * 0.5 + c)
    assert "<16 x float>" in mod.source
    # elementwise: rounded as numpy rounds, a multiply then an add (accumulations may fuse)
    assert "fmul <16 x float>" in mod.source and "@llvm.fmuladd" not in mod.source


def test_gather_and_scatter_with_stride_two():
    n = 32
    x = V("x")
    src = Ramp(E.BinOp("mul", x, i64(16)), i64(2), 8)   # even elements of a 16-block
    dst = Ramp(E.BinOp("mul", x, i64(8)), i64(1), 8)
    odd = Ramp(E.BinOp("add", E.BinOp("mul", x, i64(16)), i64(1)), i64(2), 8)
    body = Block([Store("evens", Load("a", src, T.int32), dst),
                  Store("b", Load("a", dst, T.int32), odd)])   # scatter
    stmt = For("x", i64(0), i64(n // 16), "serial", body)
    args = [buf("a", T.int32), buf("evens", T.int32), buf("b", T.int32)]
    a = np.arange(n, dtype=np.int32) * 3
    evens = np.zeros(n // 2, dtype=np.int32)
    b = np.zeros(n, dtype=np.int32)
    rc, _ = run(stmt, args, dict(a=a, evens=evens, b=b))
    assert rc == 0
    np.testing.assert_array_equal(evens, a[::2])
    np.testing.assert_array_equal(b[1::2], a[:n // 2])
    np.testing.assert_array_equal(b[0::2], 0)


def test_let_bound_ramp_and_offset_ramp_are_dense():
    x = V("x")
    f32 = T.float32
    base = Ramp(E.BinOp("mul", x, i64(8)), i64(1), 8)
    shifted = E.BinOp("add", V("r", T.int64.with_lanes(8)), Broadcast(i64(1), 8))
    body = LetStmt("r", base, Store("out", Load("a", shifted, f32), V("r", T.int64.with_lanes(8))))
    stmt = For("x", i64(0), i64(4), "serial", body)
    args = [buf("a", f32), buf("out", f32)]
    a = np.arange(40, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    rc, mod = run(stmt, args, dict(a=a, out=out))
    assert rc == 0
    np.testing.assert_array_equal(out, a[1:33])
    assert "load <8 x float>" in mod.source


def test_vector_reduce_and_select():
    n = 64
    x = V("x")
    idx = Ramp(E.BinOp("mul", x, i64(16)), i64(1), 16)
    args = [buf("a", T.float32), buf("sums", T.float32), buf("mins", T.float32),
            buf("maxs", T.int32), buf("sel", T.float32)]
    la = Load("a", idx, T.float32)
    cond = E.BinOp("gt", la, Broadcast(C(0.0, T.float32), 16))
    body = Block([
        Store("sums", VectorReduce("add", la), x),
        Store("mins", VectorReduce("min", la), x),
        Store("maxs", VectorReduce("max", E.Cast(T.int32.with_lanes(16), la)), x),
        Store("sel", E.Select(cond, la, Broadcast(C(-1.0, T.float32), 16)), idx),
    ])
    stmt = For("x", i64(0), i64(n // 16), "serial", body)
    a = np.random.default_rng(6).uniform(-50, 50, n).astype(np.float32)
    sums, mins = np.zeros(4, np.float32), np.zeros(4, np.float32)
    maxs, sel = np.zeros(4, np.int32), np.zeros(n, np.float32)
    rc, _ = run(stmt, args, dict(a=a, sums=sums, mins=mins, maxs=maxs, sel=sel))
    assert rc == 0
    blocks = a.reshape(4, 16)
    np.testing.assert_allclose(sums, blocks.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(mins, blocks.min(1))
    np.testing.assert_array_equal(maxs, blocks.astype(np.int32).max(1))
    np.testing.assert_array_equal(sel, np.where(a > 0, a, -1.0))


def test_select_with_scalar_condition_and_vector_values():
    x = V("x")
    idx = Ramp(E.BinOp("mul", x, i64(4)), i64(1), 4)
    cond = E.BinOp("lt", x, i64(2))
    value = E.Select(cond, Load("a", idx, T.int32), Broadcast(C(-1, T.int32), 4))
    stmt = For("x", i64(0), i64(4), "serial", Store("out", value, idx))
    a = np.arange(16, dtype=np.int32)
    out = np.zeros(16, dtype=np.int32)
    rc, _ = run(stmt, [buf("a", T.int32), buf("out", T.int32)], dict(a=a, out=out))
    assert rc == 0
    np.testing.assert_array_equal(out, np.where(np.arange(16) < 8, a, -1))


# =================================================================== control flow


def test_if_then_else_let_and_scalar_params():
    x = V("x")
    args = [buf("out", T.float64), scalar("n", T.int64), scalar("scale", T.float64),
            scalar("k", T.int32), scalar("flag", T.bool_), scalar("small", T.uint8)]
    half = E.BinOp("lt", x, E.BinOp("floordiv", V("n"), i64(2)))
    then = Store("out", E.BinOp("mul", E.Cast(T.float64, x), V("scale", T.float64)), x)
    other = Store("out", E.Cast(T.float64, E.BinOp("add", V("kk", T.int32),
                                                   E.Cast(T.int32, V("small", T.uint8)))), x)
    body = LetStmt("kk", E.Select(V("flag", T.bool_), V("k", T.int32), C(0, T.int32)),
                   IfThenElse(half, then, other))
    stmt = For("x", i64(0), V("n"), "serial", body)
    out = np.zeros(10, np.float64)
    rc, _ = run(stmt, args, dict(out=out, n=10, scale=1.5, k=-7, flag=True, small=200))
    assert rc == 0
    np.testing.assert_array_equal(out, [0, 1.5, 3, 4.5, 6, 193, 193, 193, 193, 193])


def test_assert_returns_its_code():
    args = [buf("out", T.int32), scalar("n", T.int64)]
    stmt = Block([Assert(E.BinOp("le", V("n"), i64(4)), 1),
                  For("x", i64(0), V("n"), "serial", Store("out", C(5, T.int32), V("x")))])
    out = np.zeros(8, np.int32)
    rc, _ = run(stmt, args, dict(out=out, n=8))
    assert rc == 1
    assert not out.any()
    rc, _ = run(stmt, args, dict(out=out, n=3))
    assert rc == 0
    np.testing.assert_array_equal(out, [5, 5, 5, 0, 0, 0, 0, 0])


def test_evaluate_and_empty_loops():
    x = V("x")
    stmt = Block([Evaluate(C(0, T.int32)),
                  For("x", i64(5), i64(0), "serial", Store("out", C(1, T.int32), x)),
                  For("y", i64(0), i64(-3), "parallel", Store("out", C(1, T.int32), V("y")))])
    out = np.zeros(8, np.int32)
    rc, _ = run(stmt, [buf("out", T.int32)], dict(out=out), nthreads=4)
    assert rc == 0 and not out.any()


# ======================================================================= allocations


def test_heap_allocate_with_symbolic_size():
    # tmp[x] = a[x] * 2 over n, then out[x] = tmp[n - 1 - x]
    x, n = V("x"), V("n")
    fill = For("x", i64(0), n, "serial",
               Store("tmp", E.BinOp("mul", Load("a", x, T.float32), C(2.0, T.float32)), x))
    rev = For("x", i64(0), n, "serial",
              Store("out", Load("tmp", E.BinOp("sub", E.BinOp("sub", n, i64(1)), x), T.float32), x))
    stmt = Allocate("tmp", T.float32, [n], "global", Block([fill, rev]))
    args = [buf("a", T.float32), buf("out", T.float32), scalar("n", T.int64)]
    a = np.arange(1000, dtype=np.float32)
    out = np.zeros(1000, np.float32)
    rc, mod = run(stmt, args, dict(a=a, out=out, n=1000))
    assert rc == 0
    np.testing.assert_array_equal(out, (a * 2)[::-1])
    assert "posix_memalign" in mod.source and "@free" in mod.source


def test_local_allocate_inside_loop_is_hoisted_to_the_entry_block():
    # for y: allocate row[4] local; row[i] = a[y*4+i] + 1; out[y] = sum(row)
    y, i = V("y"), V("i")
    fill = For("i", i64(0), i64(4), "serial",
               Store("row", E.BinOp("add", Load("a", E.BinOp("add", E.BinOp("mul", y, i64(4)), i),
                                                T.int32), C(1, T.int32)), i))
    total = Store("out", VectorReduce("add", Load("row", Ramp(i64(0), i64(1), 4), T.int32)), y)
    body = Allocate("row", T.int32, [i64(4)], "local", Block([fill, total]))
    stmt = For("y", i64(0), i64(6), "serial", body)
    a = np.arange(24, dtype=np.int32)
    out = np.zeros(6, np.int32)
    rc, mod = run(stmt, [buf("a", T.int32), buf("out", T.int32)], dict(a=a, out=out))
    assert rc == 0
    np.testing.assert_array_equal(out, (a + 1).reshape(6, 4).sum(1))
    assert "posix_memalign" not in mod.source
    # The unoptimized code keeps its alloca in the entry block.
    gen = backend.LLVMCodegen("k", [buf("a", T.int32), buf("out", T.int32)])
    text = str(gen.generate(stmt))
    entry = text.split("entry:")[1].split("start:")[0]
    assert "alloca [4 x i32], align 64" in entry


def test_out_of_memory_returns_2_and_frees_the_rest():
    n = V("n")
    inner = Allocate("huge", T.float32, [n], "global",
                     Store("out", Load("huge", i64(0), T.float32), i64(0)))
    stmt = Allocate("small", T.float32, [i64(16)], "global", inner)
    args = [buf("out", T.float32), scalar("n", T.int64)]
    out = np.zeros(1, np.float32)
    rc, _ = run(stmt, args, dict(out=out, n=2**60))
    assert rc == 2


def test_assert_inside_allocation_frees_and_returns():
    n = V("n")
    stmt = Allocate("tmp", T.int32, [n], "global",
                    Block([Store("tmp", C(1, T.int32), i64(0)),
                           Assert(E.BinOp("lt", n, i64(5)), 7),
                           Store("out", Load("tmp", i64(0), T.int32), i64(0))]))
    args = [buf("out", T.int32), scalar("n", T.int64)]
    out = np.zeros(1, np.int32)
    assert run(stmt, args, dict(out=out, n=10))[0] == 7
    assert out[0] == 0
    assert run(stmt, args, dict(out=out, n=3))[0] == 0
    assert out[0] == 1


# ========================================================================== parallel


def _parallel_rows_kernel():
    # parallel for y in [0, rows): for x in [0, cols): out[y*cols+x] = a[y*cols+x]*scale + y
    y, x, cols = V("y"), V("x"), V("cols")
    idx = E.BinOp("add", E.BinOp("mul", y, cols), x)
    value = E.BinOp("add", E.BinOp("mul", Load("a", idx, T.float32), V("scale", T.float32)),
                    E.Cast(T.float32, y))
    inner = For("x", i64(0), cols, "serial", Store("out", value, idx))
    stmt = For("y", i64(0), V("rows"), "parallel", inner)
    args = [buf("a", T.float32), buf("out", T.float32), scalar("rows", T.int64),
            scalar("cols", T.int64), scalar("scale", T.float32)]
    return stmt, args


@pytest.mark.parametrize("nthreads", [1, 2, 4, 64])
def test_parallel_loop_is_correct_for_any_thread_count(nthreads):
    stmt, args = _parallel_rows_kernel()
    rows, cols = 37, 129
    a = np.random.default_rng(7).standard_normal(rows * cols).astype(np.float32)
    out = np.zeros_like(a)
    rc, mod = run(stmt, args, dict(a=a, out=out, rows=rows, cols=cols, scale=3.0),
                  nthreads=nthreads)
    assert rc == 0
    ref = a.reshape(rows, cols) * 3.0 + np.arange(rows, dtype=np.float32)[:, None]
    np.testing.assert_allclose(out.reshape(rows, cols), ref, rtol=1e-6, atol=1e-5)  # fused
    assert "pthread_create" in mod.source


def test_assert_inside_parallel_loop_returns_its_code():
    y = V("y")
    body = Block([Assert(E.BinOp("ne", y, i64(13)), 5), Store("out", C(1, T.int32), y)])
    stmt = For("y", i64(0), V("n"), "parallel", body)
    args = [buf("out", T.int32), scalar("n", T.int64)]
    for nthreads in (1, 4):
        out = np.zeros(100, np.int32)
        rc, _ = run(stmt, args, dict(out=out, n=100), nthreads=nthreads)
        assert rc == 5
        assert out[13] == 0
        rc, _ = run(stmt, args, dict(out=out, n=13), nthreads=nthreads)
        assert rc == 0 and out[:13].all()


def test_nested_parallel_with_allocations_and_lets():
    # parallel y: let base = y*8; allocate tmp[8] heap (per thread);
    #   parallel x (runs serially inside): tmp[x] = a[base + x] * off; out[base+x] = tmp[x]
    y, x = V("y"), V("x")
    base = V("base")
    tmp_fill = Store("tmp", E.BinOp("mul", Load("a", E.BinOp("add", base, x), T.int32),
                                    V("off", T.int32)), x)
    copy = Store("out", Load("tmp", x, T.int32), E.BinOp("add", base, x))
    inner = For("x", i64(0), i64(8), "parallel", Block([tmp_fill, copy]))
    body = LetStmt("base", E.BinOp("mul", y, i64(8)),
                   Allocate("tmp", T.int32, [V("w")], "global", inner))
    stmt = For("y", i64(0), i64(16), "parallel", body)
    args = [buf("a", T.int32), buf("out", T.int32), scalar("off", T.int32),
            scalar("w", T.int64)]
    a = np.arange(128, dtype=np.int32)
    out = np.zeros(128, np.int32)
    rc, mod = run(stmt, args, dict(a=a, out=out, off=-2, w=8), nthreads=4)
    assert rc == 0
    np.testing.assert_array_equal(out, a * -2)
    # Only the outer loop gets a thread runner: no threads are spawned recursively.
    text = str(backend.LLVMCodegen("kernel", args).generate(stmt))
    assert len(re.findall(r'define internal i32 @"[^"]*\.run"', text)) == 1
    assert "pthread_create" in mod.source


def test_parallel_loop_sharing_an_outer_allocation():
    # allocate acc[n]; parallel y: acc[y] = y*y; then serial: out[y] = acc[y] + 1
    y, n = V("y"), V("n")
    stmt = Allocate("acc", T.int64, [n], "global", Block([
        For("y", i64(0), n, "parallel", Store("acc", E.BinOp("mul", y, y), y)),
        For("y", i64(0), n, "serial", Store("out", E.BinOp("add", Load("acc", y, T.int64),
                                                          i64(1)), y))]))
    out = np.zeros(50, np.int64)
    rc, _ = run(stmt, [buf("out", T.int64), scalar("n", T.int64)], dict(out=out, n=50),
                nthreads=3)
    assert rc == 0
    np.testing.assert_array_equal(out, np.arange(50) ** 2 + 1)


# ==================================================================== targets, errors


def test_skylake_avx512_target():
    f32 = T.float32
    a = np.arange(64, dtype=np.float32)
    b = np.full(64, 2.0, np.float32)
    run_it = lambda: elementwise(binop("mul"), [("a", f32), ("b", f32)], f32,  # noqa: E731
                                 dict(a=a, b=b), lanes=16, target="llvm:skylake-avx512")
    if llvm.get_host_cpu_features().get("avx512f", False):
        np.testing.assert_array_equal(run_it(), a * 2)
    else:       # running it would kill the process (an illegal instruction): refused instead
        with pytest.raises(CompileError, match=r"compiled for skylake-avx512 and uses .*avx512f"):
            run_it()
    mod = compile_llvm(For("x", i64(0), i64(1), "serial", Evaluate(C(0, T.int32))), [], "k",
                       "llvm:skylake-avx512")
    assert mod.cpu == "skylake-avx512" and mod.features == ""


def test_unknown_targets_and_gpu_constructs_are_compile_errors():
    stmt = For("x", i64(0), i64(1), "serial", Evaluate(C(0, T.int32)))
    with pytest.raises(CompileError, match="not-a-cpu"):
        compile_llvm(stmt, [], "k", "llvm:not-a-cpu")
    with pytest.raises(CompileError):
        compile_llvm(stmt, [], "k", "cuda")
    gpu = For("x", i64(0), i64(4), "gpu_block", Evaluate(C(0, T.int32)))
    with pytest.raises(CompileError, match="gpu_blocks/gpu_threads need a GPU target"):
        compile_llvm(gpu, [], "k")
    with pytest.raises(CompileError):
        compile_llvm(Barrier(), [], "k")


def test_unknown_names_are_internal_errors():
    with pytest.raises(AssertionError, match="nope"):
        compile_llvm(Store("out", V("nope", T.int32), i64(0)), [buf("out", T.int32)], "k")
    with pytest.raises(AssertionError, match="ghost"):
        compile_llvm(Store("ghost", C(1, T.int32), i64(0)), [], "k")


def test_cache_hit_skips_the_optimizer(tmp_path, monkeypatch):
    from schedlang.targets.llvm_thread_pool import ensure_thread_pool
    ensure_thread_pool()   # once per process, cached too: built here when this test runs first
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "fresh"))
    stmt, args = _parallel_rows_kernel()
    first = compile_llvm(stmt, args, "cached")
    assert not first.from_cache
    files = sorted(p.suffix for p in (tmp_path / "fresh" / "llvm").iterdir())
    assert files == [".ll", ".o"]
    runs = backend.OPTIMIZER_RUNS
    second = compile_llvm(stmt, args, "cached")
    assert second.from_cache
    assert backend.OPTIMIZER_RUNS == runs
    assert second.source == first.source
    rows, cols = 5, 7
    a = np.arange(rows * cols, dtype=np.float32)
    out = np.zeros_like(a)
    argv = pack_args(args, dict(a=a, out=out, rows=rows, cols=cols, scale=2.0))
    assert second.call(argv.ctypes.data, 2) == 0
    np.testing.assert_array_equal(out.reshape(rows, cols),
                                  a.reshape(rows, cols) * 2 + np.arange(rows)[:, None])
    # A different target CPU is a different entry.
    third = compile_llvm(stmt, args, "cached", "llvm:x86-64")
    assert not third.from_cache


def test_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SCHEDLANG_CACHE", str(blocker))
    stmt = For("x", i64(0), i64(1), "serial", Evaluate(C(0, T.int32)))
    assert not compile_llvm(stmt, [], "k").from_cache
    assert not compile_llvm(stmt, [], "k").from_cache


def test_pack_args_scalar_convention():
    args = [scalar("f", T.float32), scalar("d", T.float64), scalar("i", T.int32),
            scalar("u", T.uint8), scalar("b", T.bool_), scalar("h", T.bfloat16),
            scalar("n", T.int64)]
    argv = pack_args(args, dict(f=1.5, d=-2.25, i=-3, u=250, b=True, h=1.0, n=-1))
    raw = argv.view(np.uint8).reshape(-1, 8)
    assert raw[0, :4].view(np.float32)[0] == 1.5
    assert raw[1].view(np.float64)[0] == -2.25
    assert raw[2, :4].view(np.int32)[0] == -3
    assert raw[3, 0] == 250
    assert raw[4, 0] == 1
    assert raw[5, :2].view(np.uint16)[0] == 0x3F80
    assert argv[6] == 2**64 - 1
    from schedlang.errors import ArgumentError
    with pytest.raises(ArgumentError):
        pack_args([buf("a", T.float32)], dict(a=np.zeros(3, np.float64)))
    with pytest.raises(ArgumentError):
        pack_args([scalar("u", T.uint8)], dict(u=300))
    with pytest.raises(ArgumentError):
        pack_args([scalar("u", T.uint8)], {})


def test_clamped_vector_loads_are_one_load_inside_the_bounds():
    # a boundary condition clamps the index; inside the image the clamp is a no-op, so the
    # code takes one vector load there and goes lane by lane only at the edges
    A = sl.Input("A", sl.float32, (40,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(48,))
    f[x] = sl.constant_exterior(A, -1.0)[x - 3]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    assert "load <16 x float>" in kern.source
    a = np.arange(40, dtype=np.float32)
    ref = np.concatenate([np.full(3, -1.0, np.float32), a, np.full(5, -1.0, np.float32)])
    np.testing.assert_array_equal(kern(A=a), ref)


@pytest.mark.parametrize("shift", [1, -1])
def test_one_sided_clamps_are_one_vector_load_inside_the_bounds(shift):
    # padding on one side only: the simplifier proves the other side of the clamp never
    # binds and drops it, leaving max(ramp, 0) (or min(ramp, hi)); that still takes one
    # vector load wherever the ramp lies inside, not a gather of 16 lanes
    n = 64
    A = sl.Input("A", sl.float32, (n,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(n + 1,))
    f[x] = sl.constant_exterior(A, 7.0)[x - 1 if shift == 1 else x]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    one_sided = "max(ramp(" if shift == 1 else "min(ramp("
    assert one_sided in kern.loop_ir and ("min(max(" not in kern.loop_ir
                                          and "max(min(" not in kern.loop_ir)
    # before LLVM's optimizer (which may peel the edge iteration either way): the load
    # branches at run time between one vector load and the lane-by-lane one
    text = str(backend.LLVMCodegen("k", kern.args).generate(kern.loop_ir_stmt))
    assert re.search(r"^dense[.\d]*:", text, re.M) and "load <16 x float>" in text
    a = np.arange(n, dtype=np.float32) + 1
    ref = np.concatenate([[7.0], a] if shift == 1 else [a, [7.0]]).astype(np.float32)
    np.testing.assert_array_equal(kern(A=a), ref)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("lanes", [4, 16])
@pytest.mark.parametrize("n", [3, 37])
def test_border_vectors_of_a_clamped_load_are_masked_loads_with_the_edges_filled(dtype, lanes, n):
    # vectors straddling one or both ends of the image (n = 3 < lanes: both in one vector)
    # load the lanes inside with one masked load and take the edge values for the rest;
    # lanes before the buffer and past its end are never touched
    A = sl.Input("A", getattr(sl, dtype), (n,))
    x = sl.Var("x")
    edge = sl.Func("edge", shape=(n + 9,))
    edge[x] = sl.clamp_edge(A)[x - 4]
    pad = sl.Func("pad", shape=(n + 9,))
    pad[x] = sl.constant_exterior(A, 5)[x - 4]
    a = (np.arange(n) * 3 + 1).astype(dtype)
    for f, ref in ((edge, np.pad(a, (4, 5), mode="edge")),
                   (pad, np.pad(a, (4, 5), constant_values=5))):
        s = sl.Schedule(f)
        s[f].vectorize(x, lanes)
        kern = sl.compile(f, s)
        # (an output shorter than one vector is not vectorized)
        assert ("llvm.masked.load" in kern.source) == (n + 9 >= lanes)
        np.testing.assert_array_equal(kern(A=a), ref)


def test_a_clamp_of_an_empty_range_reads_its_upper_bound_in_every_lane():
    # clamp(x, lo, hi) with lo > hi is hi (min of max): no lane is inside, so the border
    # vector is not a masked load of the lanes inside but the lane-by-lane load
    A = sl.Input("A", sl.float32, (20,))
    lo, hi = sl.Param("lo", sl.int32), sl.Param("hi", sl.int32)
    for p in (lo, hi):
        sl.assume(p >= 0)
        sl.assume(p < 20)
    x = sl.Var("x")
    f = sl.Func("f", shape=(16,))
    f[x] = A[sl.clamp(x, lo, hi)]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    a = np.arange(20, dtype=np.float32) * 2
    for l, h in ((9, 3), (4, 11), (0, 19), (18, 2)):
        ref = a[np.minimum(np.maximum(np.arange(16), l), h)]
        np.testing.assert_array_equal(kern(A=a, lo=l, hi=h), ref)


def test_x86_code_has_no_sse4a_instructions():
    # LLVM emits AMD's legacy-SSE insertq / extrq for some shuffles; between AVX
    # instructions each paid a state transition (a 16-lane padding copy ran 11x slower)
    if not llvm.get_default_triple().startswith("x86_64"):
        pytest.skip("x86 only")
    A = sl.Input("A", sl.float32, (8, 56, 56))
    c, y, x = sl.vars("c y x")
    f = sl.Func("f", shape=(8, 58, 58))
    f[c, y, x] = sl.constant_exterior(A, 0.0)[c, y - 1, x - 1]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    assert not re.search(r"\b(insertq|extrq)\b", kern.assembly)
    a = np.random.default_rng(5).random((8, 56, 56), dtype=np.float32)
    np.testing.assert_array_equal(kern(A=a), np.pad(a, ((0, 0), (1, 1), (1, 1))))


@pytest.mark.parametrize("stride", [-1, 3])
def test_constant_stride_vector_loads_and_stores(stride):
    n = 64
    A = sl.Input("A", sl.float32, (3 * n,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(n,))
    f[x] = A[n - 1 - x] if stride == -1 else A[3 * x + 1]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    a = np.random.default_rng(3).random(3 * n, dtype=np.float32)
    ref = a[n - 1::-1] if stride == -1 else a[1::3][:n]
    np.testing.assert_array_equal(kern(A=a), ref)
    # a transposed copy stores with a constant stride
    B = sl.Input("B", sl.float32, (16, 16))
    i, j = sl.vars("i j")
    t = sl.Func("t", shape=(16, 16))
    t[i, j] = B[j, i]
    st = sl.Schedule(t)
    st[t].reorder(j, i).vectorize(i)
    b = np.random.default_rng(4).random((16, 16), dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(t, st)(B=b), b.T)


def test_only_accumulations_fuse_a_multiply_with_an_add():
    # a reduction's a*b + acc may become one FMA (its order is the schedule's anyway), but an
    # elementwise y - y with y = a*b stays 0, as in numpy: no fusing outside accumulations
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * A[x] - A[x] * A[x] + (A[x] * 0.001 - A[x] * 0.001)
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    assert "fmuladd" not in kern.source
    a = np.array([1e10, 12345.678, 3.3, -7.1e-3] * 8, np.float32)
    np.testing.assert_array_equal(kern(A=a), np.zeros_like(a))
    r = sl.RDom(A.shape[0], name="r")
    dot = sl.Func("dot", shape=())
    dot[()] = sl.sum(A[r] * A[r])
    s = sl.Schedule(dot)
    s[dot].split(r, 16, tail="guard")
    part = s[dot].rfactor("r.i")
    s[part].vectorize("r.i")
    assert "fmuladd" in sl.compile(dot, s).source


def test_noalias_lists_name_only_the_buffers_of_their_function():
    # a list of every buffer of the kernel made LLVM's alias queries dominate optimization
    # in kernels of ~100 buffers; each parallel body's list names what that body touches
    import re
    A = sl.Input("A", sl.float32, (64, 64))
    y, x = sl.vars("y x")
    funcs, f = [], A
    for k in range(12):
        g = sl.Func(f"g{k}")
        g[y, x] = f[y, x] * 2.0 + 1.0
        funcs.append(g)
        f = g
    out = sl.Func("out", shape=(64, 64))
    out[y, x] = f[y, x]
    s = sl.Schedule(out)
    for g in funcs:
        s[g].compute_root().parallel(y)
    s[out].parallel(y)
    kern = sl.compile(out, s)
    src = kern.source
    lists = {m.group(1) for m in re.finditer(r"!noalias !(\d+)", src)}
    assert lists
    for n in lists:
        body = re.search(rf"^!{n} = !\{{(.*)\}}$", src, re.M).group(1)
        assert body.count("!") <= 2, body       # a body reads one buffer and writes another
    ref = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    want = ref.copy()
    for _ in range(12):
        want = want * 2 + 1
    np.testing.assert_allclose(kern(A=ref), want, rtol=1e-6)


def _one_op_kernel(op):
    A = sl.Input("A", sl.float32, (64,))
    i = sl.Var("i")
    C = sl.Func("C", shape=(64,))
    C[i] = A[i] + 1 if op == "add" else A[i] * 3
    return sl.compile(C, sl.Schedule(C))


@pytest.mark.parametrize("damage", ["truncate", "flip", "swap", "garbage"])
def test_a_damaged_or_swapped_cache_entry_is_recompiled_not_run(tmp_path, monkeypatch, damage):
    # loading such an object killed the process (truncated) or ran another kernel's code
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path))
    ones = np.ones(64, np.float32)
    _one_op_kernel("add")
    objects = sorted((tmp_path / "llvm").glob("*.o"))
    assert len(objects) == 1
    target = objects[0]
    data = target.read_bytes()
    if damage == "truncate":
        target.write_bytes(data[:len(data) // 2])
    elif damage == "flip":
        flipped = bytearray(data)
        for k in range(len(data) - 64, len(data) - 48):
            flipped[k] ^= 0xFF
        target.write_bytes(bytes(flipped))
    elif damage == "swap":
        _one_op_kernel("mul")
        other = next(p for p in (tmp_path / "llvm").glob("*.o") if p != target)
        target.write_bytes(other.read_bytes())
    else:
        target.write_bytes(b"\x7fELF" + bytes(range(256)) * 3)
    kern = _one_op_kernel("add")
    assert not kern.module.from_cache
    np.testing.assert_array_equal(kern(A=ones), 2.0)
    assert _one_op_kernel("add").module.from_cache      # rewritten whole
