"""Expression arithmetic of the LLVM code generator, as a mixin of ``LLVMCodegen``.

``ArithmeticCodegen`` holds the ``expr_*`` methods for operators (``BinOp``, ``UnOp``,
``Select``), casts (``Cast``, float16 / bfloat16 through float32) and math calls
(``Call``: LLVM intrinsics, or libm once per lane). It relies on the host class for
``self.b`` (the current ``ir.IRBuilder``), ``self.module``, ``self.expr``,
``self._const_like``, ``self._splat``, ``self._intrinsic``, ``self._c_function`` and
``self.vector_scalef`` (whether the target has AVX-512's 16-lane ``vscalefps``).
Example::

    class LLVMCodegen(ArithmeticCodegen):
        ...
    gen = LLVMCodegen("k", args)
    v = gen._cast(value, T.float64, T.bfloat16)   # correctly rounded, inside generate()
"""
from __future__ import annotations

import math

from llvmlite import ir

from ..algo import expr as E
from ..algo import types as T
from ..algo.types import DType
from . import llvm_runtime as RT
from .llvm_types import F32, F64, I32, _const_int, _is_f32_or_f64, _mangle, reg_type


# erf(x) ~ x * P(x**2) / Q(x**2) on [-4, 4] (the float coefficients Eigen uses), highest
# power first
ERF_NUMERATOR = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                 -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                 -1.60960333262415e-02)
ERF_DENOMINATOR = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                   -7.37332916720468e-03, -1.42647390514189e-02)
# log(1 + f) = f - f**2 / 2 + f**3 * P(f) on [sqrt(1/2) - 1, sqrt(2) - 1] (Cephes' logf)
LOG_POLYNOMIAL = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                  1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                  3.3333331174e-1)
# tanh(x) = x * T(x**2): the Taylor coefficients of x, x**3, ..., x**21, highest first
TANH_TAYLOR = (9.691537956929451e-05, -0.00023912911424355248, 0.000590027440945586,
               -0.0014558343870513183, 0.003592128036572481, -0.008863235529902197,
               0.021869488536155203, -0.05396825396825397, 0.13333333333333333,
               -0.3333333333333333, 1.0)


# tanh(x) = x + x g P(g) / Q(g), g = x**2, for |x| < ln(3)/2 (Cody and Waite's float64
# coefficients), highest power first; Q is monic
TANH64_NUMERATOR = (-0.96437492777225469787e0, -0.99225929672236083313e2,
                    -0.16134119023996228053e4)
TANH64_DENOMINATOR = (1.0, 0.11274474380534949335e3, 0.22337720718962312926e4,
                      0.48402357071988688686e4)


def _element(ty):
    return ty.element if isinstance(ty, ir.VectorType) else ty


class ArithmeticCodegen:
    """``expr_BinOp`` / ``expr_UnOp`` / ``expr_Select`` / ``expr_Cast`` / ``expr_Call`` and
    their helpers (``_cast``, ``_to_f32``, ``_from_f32``, ``_minmax``, ``_math`` ...)."""

    # ------------------------------------------------------------------ operators

    def expr_BinOp(self, e):
        op, dt = e.op, e.a.dtype
        if op in ("and", "or"):
            a, b = self.expr(e.a), self.expr(e.b)
            return self.b.and_(a, b) if op == "and" else self.b.or_(a, b)
        if dt.is_float and _is_f32_or_f64(dt) and op in ("add", "sub") and \
                e is self.accumulation:
            fused = self._try_fmuladd(e)
            if fused is not None:
                return fused
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.name in ("float16", "bfloat16"):
            # Narrow floats compute in float32 and round once per operation.
            wide = T.float32.with_lanes(dt.lanes)
            out = self._float_binop(op, self._to_f32(a, dt), self._to_f32(b, dt), wide)
            return out if op in E.CMP_OPS else self._from_f32(out, dt)
        if dt.is_float:
            return self._float_binop(op, a, b, dt)
        return self._int_binop(op, a, b, dt, e.b)

    def _try_fmuladd(self, e):
        """``a*b + c`` (and the sub forms) as ``llvm.fmuladd``, so LLVM may fuse them. Only
        for the value of an accumulating store (``acc = acc + a*b``, see ``stmt_Store``):
        a sum's order is already the schedule's to choose, while fusing an elementwise
        ``y - y`` with y = a*b would give the rounding error of a*b instead of numpy's 0."""
        def is_mul(x):
            return isinstance(x, E.BinOp) and x.op == "mul" and x.a.dtype == e.a.dtype

        if is_mul(e.a):
            mul, other, mul_first = e.a, e.b, True
        elif is_mul(e.b):
            mul, other, mul_first = e.b, e.a, False
        else:
            return None
        x, y, c = self.expr(mul.a), self.expr(mul.b), self.expr(other)
        if e.op == "sub":
            if mul_first:
                c = self.b.fneg(c)          # x*y - c
            else:
                x = self.b.fneg(x)          # c - x*y
        fn = self._intrinsic(f"llvm.fmuladd.{_mangle(x.type)}", x.type, [x.type] * 3)
        return self.b.call(fn, [x, y, c])

    _FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

    def _float_binop(self, op, a, b, dt):
        bld = self.b
        if op == "add":
            return bld.fadd(a, b)
        if op == "sub":
            return bld.fsub(a, b)
        if op == "mul":
            return bld.fmul(a, b)
        if op == "div":
            return bld.fdiv(a, b)
        if op in ("floordiv", "mod"):
            return self._float_divmod(op == "mod", a, b)
        if op in ("min", "max"):
            return self._minmax(op, a, b, dt)
        if op == "ne":
            return bld.fcmp_unordered("!=", a, b)
        if op in self._FCMP:
            return bld.fcmp_ordered(self._FCMP[op], a, b)
        raise AssertionError(f"internal error: {op} on {dt}")

    def _float_divmod(self, want_mod, a, b):
        """numpy's float ``//`` / ``%`` (its ``npy_divmod``): the exact remainder fmod(a, b)
        moved to the divisor's sign, and the quotient (a - mod) / b snapped to the integer
        it nearly is. Unlike floor(a / b), this gives 1.0 // 0.1 == 9.0 (0.1 is a bit more
        than a tenth), -5.0 // inf == -1.0, -5.0 % inf == inf, and x // 0 == x / 0."""
        bld = self.b
        c = (lambda v: self._const_like(a.type, v))
        fmod = self._fmod(a, b)
        by_zero = bld.fcmp_ordered("==", b, c(0.0))
        # the remainder takes the divisor's sign (a NaN remainder is left as it is)
        adjust = self._nonzero_with_other_sign(fmod, b)
        if want_mod:
            mod = bld.select(adjust, bld.fadd(fmod, b), fmod)
            zero = self._math("copysign", [c(0.0), b])       # a zero remainder: b's sign
            mod = bld.select(bld.fcmp_ordered("==", fmod, c(0.0)), zero, mod)
            return bld.select(by_zero, fmod, mod)
        div = bld.fdiv(bld.fsub(a, fmod), b)
        div = bld.select(adjust, bld.fsub(div, c(1.0)), div)
        floor = self._math1("floor", div)
        floor = bld.select(bld.fcmp_ordered(">", bld.fsub(div, floor), c(0.5)),
                           bld.fadd(floor, c(1.0)), floor)
        quotient = bld.fdiv(a, b)
        zero = self._math("copysign", [c(0.0), quotient])    # a zero quotient: a / b's sign
        floor = bld.select(bld.fcmp_ordered("==", div, c(0.0)), zero, floor)
        return bld.select(by_zero, quotient, floor)

    def _nonzero_with_other_sign(self, r, s):
        """Whether ``r`` is non-zero and of the sign opposite to ``s`` (false for a NaN)."""
        bld, zero = self.b, self._const_like(r.type, 0.0)
        return bld.and_(bld.fcmp_ordered("!=", r, zero),
                        bld.xor(bld.fcmp_ordered("<", r, zero), bld.fcmp_ordered("<", s, zero)))

    def _fmod(self, a, b):
        """C's fmod(a, b), exact, in vector instructions: a - trunc(a / b) * b with one fused
        multiply-add. While |a / b| < 2**(p - 2) (p: the significand's bits), the rounded
        quotient truncates to the true one or one more, a - m * b is then representable
        (so the FMA is exact), and one more is undone by adding b back. Larger quotients,
        rare, take LLVM's ``frem`` (libm's fmod once per lane) behind a branch: that is
        some 30 ns a lane, against well under 1 ns here."""
        bld, ty = self.b, a.type
        c = (lambda v: self._const_like(ty, v))
        limit = 2.0 ** (22 if _element(ty) == F32 else 51)
        quotient = bld.fdiv(a, b)
        m = self._math1("trunc", quotient)
        fma = self._intrinsic(f"llvm.fma.{_mangle(ty)}", ty, [ty] * 3)
        r = bld.call(fma, [bld.fneg(m), b, a])
        # m one too far: the remainder came out with the sign opposite to a's
        overshot = self._nonzero_with_other_sign(r, a)
        r = bld.select(overshot, bld.fadd(r, self._math("copysign", [b, a])), r)
        abs_b = self._math1("abs", b)
        r = bld.select(bld.fcmp_ordered("==", abs_b, c(float("inf"))), a, r)   # fmod(a, inf)
        exact = bld.fcmp_ordered("<", self._math1("abs", quotient), c(limit))
        # the other NaN / inf / zero-divisor lanes are NaN, as fmod gives them
        r = bld.select(exact, r, c(float("nan")))
        finite = bld.and_(bld.fcmp_ordered("<", self._math1("abs", a), c(float("inf"))),
                          bld.fcmp_ordered("<", abs_b, c(float("inf"))))
        large = bld.and_(bld.and_(bld.xor(exact, self._const_like(exact.type, 1)), finite),
                         bld.fcmp_ordered("!=", b, c(0.0)))
        return self._patch_rare_lanes(r, large, lambda: bld.frem(a, b))

    def _patch_rare_lanes(self, value, rare, fallback):
        """``value`` with its lanes where the i1 mask ``rare`` holds taken from
        ``fallback()``, which is computed only behind a branch taken when some lane needs it
        (a libm call per lane is slow, and such lanes are rare)."""
        b = self.b
        any_rare = rare
        if isinstance(rare.type, ir.VectorType):
            reduce_or = self._intrinsic(f"llvm.vector.reduce.or.{_mangle(rare.type)}",
                                        ir.IntType(1), [rare.type])
            any_rare = b.call(reduce_or, [rare])
        before = b.block
        with b.if_then(any_rare, likely=False):
            patched = b.select(rare, fallback(), value)
            patched_block = b.block
        merged = b.phi(value.type)
        merged.add_incoming(value, before)
        merged.add_incoming(patched, patched_block)
        return merged

    def _minmax(self, op, a, b, dt):
        """min/max as compare + select (``a < b ? a : b``, vpminsd for ints). For floats a
        NaN in either operand is the result, as numpy's ``minimum``/``maximum``: the select
        also takes ``a`` when ``a`` is NaN, and ``b`` wins every compare with a NaN ``b``.
        So a min/max reduction keeps a NaN once it has read one."""
        bld = self.b
        cmp = "<" if op == "min" else ">"
        if dt.is_float:
            take_a = bld.or_(bld.fcmp_ordered(cmp, a, b), bld.fcmp_unordered("uno", a, a))
            return bld.select(take_a, a, b)
        if dt.is_signed:
            return bld.select(bld.icmp_signed(cmp, a, b), a, b)
        return bld.select(bld.icmp_unsigned(cmp, a, b), a, b)

    def _int_binop(self, op, a, b, dt, b_expr):
        bld = self.b
        signed = dt.is_signed
        if op == "add":
            return bld.add(a, b)
        if op == "sub":
            return bld.sub(a, b)
        if op == "mul":
            return bld.mul(a, b)
        if op in ("div", "floordiv", "mod"):
            return self._int_divmod(op == "mod", a, b, dt, _const_int(b_expr))
        if op in ("min", "max"):
            return self._minmax(op, a, b, dt)
        if op == "bitand":
            return bld.and_(a, b)
        if op == "bitor":
            return bld.or_(a, b)
        if op == "bitxor":
            return bld.xor(a, b)
        if op in ("shl", "shr"):
            return self._shift(op, a, b, dt)
        if op in self._FCMP:
            pred = self._FCMP[op]
            return bld.icmp_signed(pred, a, b) if signed else bld.icmp_unsigned(pred, a, b)
        raise AssertionError(f"internal error: {op} on {dt}")

    def _shift(self, op, a, b, dt):
        """numpy's shifts, never poison: the amount is read as unsigned (a negative one is
        huge), and an amount of the width or more gives 0 for ``<<`` and for a logical
        ``>>``, the sign (0 or -1) for an arithmetic one. Selects, so vectors stay vectors
        (AVX-512's vpsllvd / vpsrlvd / vpsravd give exactly this)."""
        bld = self.b
        width = self._const_like(b.type, dt.bits)
        in_range = bld.icmp_unsigned("<", b, width)
        if op == "shr" and dt.is_signed:
            # shifting by width - 1 fills every bit with the sign
            return bld.ashr(a, bld.select(in_range, b, self._const_like(b.type, dt.bits - 1)))
        # the mask keeps the unused shift well defined; the select discards its result
        amount = bld.and_(b, self._const_like(b.type, dt.bits - 1))
        shifted = bld.shl(a, amount) if op == "shl" else bld.lshr(a, amount)
        return bld.select(in_range, shifted, self._const_like(a.type, 0))

    def _int_divmod(self, want_mod, a, b, dt, const_b):
        """Python floor division / modulo; x // 0 == x % 0 == 0 and nothing ever traps.

        x86 ``idiv`` traps on a zero divisor and on INT_MIN / -1, so both are steered to a
        divisor of 1 and their results chosen by select. A constant positive divisor skips
        that, leaving LLVM free to turn the division into multiplies and shifts.
        """
        bld = self.b
        zero, one = self._const_like(a.type, 0), self._const_like(a.type, 1)
        if not dt.is_signed:
            if const_b is not None and const_b != 0:
                return bld.urem(a, b) if want_mod else bld.udiv(a, b)
            if const_b == 0:
                return zero
            is_zero = bld.icmp_unsigned("==", b, zero)
            safe = bld.select(is_zero, one, b)
            out = bld.urem(a, safe) if want_mod else bld.udiv(a, safe)
            return bld.select(is_zero, zero, out)
        if const_b == 0:
            return zero
        if const_b == -1:
            return zero if want_mod else bld.sub(zero, a)
        if const_b is not None and const_b > 0:
            q, r = bld.sdiv(a, b), bld.srem(a, b)
            negative = bld.icmp_signed("<", r, zero)  # remainder's sign differs from b's
            if want_mod:
                return bld.select(negative, bld.add(r, b), r)
            return bld.select(negative, bld.sub(q, one), q)
        minus_one = self._const_like(a.type, -1)
        is_zero = bld.icmp_signed("==", b, zero)
        is_minus_one = bld.icmp_signed("==", b, minus_one)
        safe = bld.select(bld.or_(is_zero, is_minus_one), one, b)
        q, r = bld.sdiv(a, safe), bld.srem(a, safe)
        # Floor: when the remainder is nonzero and its sign differs from the divisor's.
        adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                          bld.icmp_signed("<", bld.xor(r, safe), zero))
        if want_mod:
            out = bld.select(adjust, bld.add(r, safe), r)
            return bld.select(bld.or_(is_zero, is_minus_one), zero, out)
        out = bld.select(adjust, bld.sub(q, one), q)
        out = bld.select(is_minus_one, bld.sub(zero, a), out)
        return bld.select(is_zero, zero, out)

    def expr_UnOp(self, e):
        dt = e.a.dtype
        a = self.expr(e.a)
        if e.op == "not":
            return self.b.xor(a, self._const_like(a.type, -1 if not dt.is_bool else 1))
        if e.op == "neg":
            if dt.name == "bfloat16":
                return self.b.xor(a, self._const_like(a.type, -0x8000))  # flip the sign bit
            if dt.is_float:
                return self.b.fneg(a)
            return self.b.sub(self._const_like(a.type, 0), a)
        raise AssertionError(f"internal error: unary {e.op}")

    def expr_Select(self, e):
        cond, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        lanes = e.dtype.lanes
        if e.cond.dtype.lanes > 1 and lanes == 1:
            raise AssertionError(f"internal error: vector condition with scalar values: {e}")
        if e.cond.dtype.lanes == 1 and lanes > 1:
            cond = self._splat(cond, lanes)
        return self.b.select(cond, t, f)

    # ------------------------------------------------------------------ casts

    def expr_Cast(self, e):
        return self._cast(self.expr(e.value), e.value.dtype, e.dtype)

    def _cast(self, v, src: DType, dst: DType):
        bld = self.b
        lanes = src.lanes
        se, de = src.element(), dst.element()
        if se == de:
            return v
        dst_ty = reg_type(de.with_lanes(lanes))
        if de.is_bool:
            if se.is_float:
                v = self._to_f32(v, src) if se.name in ("float16", "bfloat16") else v
                return bld.fcmp_unordered("!=", v, self._const_like(v.type, 0.0))
            return bld.icmp_unsigned("!=", v, self._const_like(v.type, 0))
        if se.is_bool or se.is_int:
            unsigned = se.is_bool or se.is_unsigned
            if de.is_int:
                sw, dw = (1 if se.is_bool else se.bits), de.bits
                if dw < sw:
                    return bld.trunc(v, dst_ty)
                if dw == sw:
                    return v
                return bld.zext(v, dst_ty) if unsigned else bld.sext(v, dst_ty)
            if de.name in ("float32", "float64"):
                return bld.uitofp(v, dst_ty) if unsigned else bld.sitofp(v, dst_ty)
            if de.name == "bfloat16" and not se.is_bool and se.bits > 24:
                # int -> float32 would round once and float32 -> bfloat16 again: through a
                # double (exact for 32 bits; rounded to odd for 64) and the correct path
                wide = RT.i64_to_f64_round_to_odd(bld, self.module, v, unsigned) \
                    if se.bits == 64 else (bld.uitofp if unsigned else bld.sitofp)(
                        v, reg_type(T.float64.with_lanes(lanes)))
                return self._cast(wide, T.float64.with_lanes(lanes), dst)
            # Narrow floats: through float32 (exact for every int that fits in a half; a
            # bfloat16 has 8 bits, and an int of up to 24 bits is exact in float32)
            f32 = reg_type(T.float32.with_lanes(lanes))
            wide = bld.uitofp(v, f32) if unsigned else bld.sitofp(v, f32)
            return self._from_f32(wide, de.with_lanes(lanes))
        # se is a float from here on.
        if de.is_int:
            if se.name in ("float16", "bfloat16"):
                v = self._to_f32(v, src)
            return self._float_to_int(v, de.with_lanes(lanes))
        if se.name in ("float16", "bfloat16"):
            v = self._to_f32(v, src)
            se = T.float32
        if de.name == "float64":
            return bld.fpext(v, dst_ty)
        if de.name == "float32":
            return bld.fptrunc(v, dst_ty) if se.name == "float64" else v
        if se.name == "float64":
            # Round to odd into float32, then to nearest-even below: correctly rounded.
            v = RT.f64_to_f32_round_to_odd(bld, self.module, v)
        return self._from_f32(v, de.with_lanes(lanes))

    def _float_to_int(self, v, dst: DType):
        """A float converted toward zero to an integer type as numpy does on x86 (and the
        constant folder, ``E.float_to_int_bits``): a signed conversion of
        ``E.float_conversion_width`` bits whose most negative value stands for NaN and
        values out of its range (unsigned types of that width convert values from
        2**(w-1) on shifted down, with the top bit set back), wrapped to the destination's
        width. Never poison."""
        bld = self.b
        w = E.float_conversion_width(dst)
        wide_ty = reg_type(T.int64.with_lanes(dst.lanes) if w == 64 else
                           T.int32.with_lanes(dst.lanes))
        fn = self._intrinsic(f"llvm.fptosi.sat.{_mangle(wide_ty)}.{_mangle(v.type)}", wide_ty,
                             [v.type])
        limit = self._const_like(v.type, float(2 ** (w - 1)))
        top = self._const_like(wide_ty, -(1 << (w - 1)))

        def signed(x):
            inside = bld.and_(bld.fcmp_ordered(">=", x, bld.fneg(limit)),
                              bld.fcmp_ordered("<", x, limit))
            return bld.select(inside, bld.call(fn, [x]), top)
        r = signed(v)
        if dst.is_unsigned and dst.bits == w:
            high = bld.fcmp_ordered(">=", v, limit)
            r = bld.select(high, bld.xor(signed(bld.fsub(v, limit)), top), r)
        return r if dst.bits == w else bld.trunc(r, reg_type(dst))

    def _to_f32(self, v, dt: DType):
        """A float16 / bfloat16 value widened to float32 (exact)."""
        lanes = dt.lanes
        f32 = reg_type(T.float32.with_lanes(lanes))
        if dt.name == "float16":
            return self.b.fpext(v, f32)
        if dt.name == "bfloat16":
            i32 = reg_type(T.int32.with_lanes(lanes))
            bits = self.b.shl(self.b.zext(v, i32), self._const_like(i32, 16))
            return self.b.bitcast(bits, f32)
        return v

    def _from_f32(self, v, dt: DType):
        """A float32 value rounded (nearest-even) to float16 / bfloat16."""
        lanes = dt.lanes
        if dt.name == "float16":
            return self.b.fptrunc(v, reg_type(dt))
        if dt.name == "bfloat16":
            bld = self.b
            i32 = reg_type(T.int32.with_lanes(lanes))
            bits = bld.bitcast(v, i32)
            c = lambda x: self._const_like(i32, x)  # noqa: E731
            bias = bld.add(c(0x7FFF), bld.and_(bld.lshr(bits, c(16)), c(1)))
            rounded = bld.lshr(bld.add(bits, bias), c(16))
            # A NaN keeps its upper bits and is made quiet, so it cannot round to infinity.
            is_nan = bld.fcmp_unordered("uno", v, v)
            quiet = bld.or_(bld.lshr(bits, c(16)), c(0x40))
            return bld.trunc(bld.select(is_nan, quiet, rounded), reg_type(dt))
        return v

    def _coerce_int(self, v, src: DType, dst: DType):
        """An integer value of ``src`` converted to ``dst``'s width (loop bounds, vars)."""
        if reg_type(src) == reg_type(dst) or not (src.is_int and dst.is_int):
            return v
        return self._cast(v, src, dst.with_lanes(src.lanes))

    # ------------------------------------------------------------------ math

    _LLVM_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
                  "floor": "floor", "ceil": "ceil", "abs": "fabs", "pow": "pow",
                  "copysign": "copysign", "trunc": "trunc"}
    _LIBM = {"tanh", "erf"}
    _OWN_F32 = {"exp", "erf", "tanh", "log", "sin", "cos"}   # float32 with our own code
    _OWN_F64 = {"exp", "tanh"}                              # float64 with our own code

    def expr_Call(self, e):
        dt = e.dtype
        args = [self.expr(a) for a in e.args]
        if e.name == "abs" and not dt.is_float:
            a = args[0]
            if dt.is_unsigned or dt.is_bool:
                return a
            zero = self._const_like(a.type, 0)
            return self.b.select(self.b.icmp_signed("<", a, zero), self.b.sub(zero, a), a)
        if e.name == "pow" and dt.is_int:
            return self._int_pow(args[0], args[1], dt)
        if not dt.is_float:
            raise AssertionError(f"internal error: {e.name} of the non-float type {dt}")
        narrow = dt.name in ("float16", "bfloat16")
        if narrow:
            args = [self._to_f32(a, x.dtype) for a, x in zip(args, e.args)]
        out = self._math(e.name, args)
        return self._from_f32(out, dt) if narrow else out

    def _int_pow(self, base, exponent, dt):
        """``base ** exponent`` in the integer type ``dt``, wrapping as numpy's: square and
        multiply over every bit of the exponent (straight-line, so it vectorizes; LLVM folds
        it for a constant exponent). A negative exponent, which numpy refuses, gives 1 or -1
        for a base of 1 or -1 (the bit loop gets those right) and 0 for any other base."""
        b, ty = self.b, base.type
        one = self._const_like(ty, 1)
        result, square = one, base
        for bit in range(dt.bits):
            set_ = b.icmp_unsigned("!=", b.and_(b.lshr(exponent, self._const_like(ty, bit)), one),
                                   self._const_like(ty, 0))
            result = b.select(set_, b.mul(result, square), result)
            if bit + 1 < dt.bits:
                square = b.mul(square, square)
        if dt.is_signed:
            zero = self._const_like(ty, 0)
            unit = b.icmp_unsigned("<=", b.add(base, one), self._const_like(ty, 2))  # -1, 0, 1
            nonzero_unit = b.and_(unit, b.icmp_signed("!=", base, zero))
            negative = b.icmp_signed("<", exponent, zero)
            result = b.select(b.and_(negative, b.not_(nonzero_unit)), zero, result)
        return result

    def _math(self, name, args):
        scalar = args[0].type
        if (scalar == F32 and name in self._OWN_F32) or (scalar == F64 and name in self._OWN_F64):
            # a scalar takes the vector code on one lane: a vectorized loop and its scalar
            # tail (or another schedule) then give the same bits (libm's differ by an ulp)
            b = self.b
            one = b.insert_element(ir.Constant(ir.VectorType(scalar, 1), ir.Undefined),
                                   args[0], I32(0))
            return b.extract_element(self._math(name, [one]), I32(0))
        vector = isinstance(args[0].type, ir.VectorType)
        f32_vector = vector and _element(args[0].type) == F32
        if name == "exp" and vector and _element(args[0].type) == F64:
            return self._vector_exp64(args[0])
        if name == "tanh" and vector and _element(args[0].type) == F64:
            return self._vector_tanh64(args[0])
        if name == "exp" and f32_vector:
            return self._vector_expf(args[0])
        if name == "erf" and f32_vector:
            return self._vector_erff(args[0])
        if name == "tanh" and f32_vector:
            return self._vector_tanhf(args[0])
        if name == "log" and f32_vector:
            return self._vector_logf(args[0])
        if name in ("sin", "cos") and f32_vector:
            return self._vector_sincosf(args[0], name == "cos")
        if name == "rsqrt":
            s = self._math1("sqrt", args[0])
            return self.b.fdiv(self._const_like(s.type, 1.0), s)
        if name in self._LIBM:
            return self._libm_per_lane(name, args[0])
        if name not in self._LLVM_MATH:
            raise AssertionError(f"internal error: unknown math function {name}")
        ty = args[0].type
        fn = self._intrinsic(f"llvm.{self._LLVM_MATH[name]}.{_mangle(ty)}", ty, [ty] * len(args))
        return self.b.call(fn, args)

    def _vector_expf(self, x):
        """exp of a float32 vector without a libm call per lane: Cephes' range reduction
        x = n*ln2 + r, a degree-7 polynomial for e**r, and the scaling by 2**n: one
        AVX-512 ``vscalefps`` where the target has it (exact down to the subnormals, and a
        NaN flows through), else 2**n built from exponent bits in two halves. About 1 ulp;
        inf / 0 / NaN as libm gives them."""
        b, ty = self.b, x.type
        c = (lambda v: self._const_like(ty, v))
        ity = ir.VectorType(I32, ty.count)
        fmuladd = self._intrinsic(f"llvm.fmuladd.{_mangle(ty)}", ty, [ty] * 3)

        def fma(p, q, a):
            # p*q + a, fused where the CPU has FMA: half the instructions and latency
            return b.call(fmuladd, [p, q, a])
        scalef = self._x86_scalef(ty)
        if scalef is not None:
            # clamps that let a NaN through; below -104 the result rounds to 0
            xc = b.select(b.fcmp_ordered(">", x, c(88.72283935546875)), c(88.72283935546875), x)
            xc = b.select(b.fcmp_ordered("<", xc, c(-104.0)), c(-104.0), xc)
        else:
            xc = self._fminmax(self._fminmax(x, c(88.72283935546875), "min"), c(-103.97), "max")
        fx = self._math1("floor", fma(xc, c(1.44269504088896341), c(0.5)))
        r = fma(fx, c(2.12194440e-4), fma(fx, c(-0.693359375), xc))
        y = c(1.9875691500e-4)
        for k in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                  5.0000001201e-1):
            y = fma(y, r, c(k))
        y = b.fadd(fma(b.fmul(y, r), r, r), c(1.0))
        if scalef is not None:
            # y * 2**fx, rounding mode 4: the current one
            return b.call(scalef, [y, fx, c(0.0), ir.Constant(ir.IntType(16), -1), I32(4)])
        n = b.fptosi(fx, ity)
        half = b.ashr(n, ir.Constant(ity, [1] * ty.count))
        rest = b.sub(n, half)

        def pow2(k):
            bits = b.shl(b.add(k, ir.Constant(ity, [127] * ty.count)),
                         ir.Constant(ity, [23] * ty.count))
            return b.bitcast(bits, ty)
        out = b.fmul(b.fmul(y, pow2(half)), pow2(rest))
        # below ln(2**-150) the result rounds to 0 (the clamp alone would give 2**-149)
        out = b.select(b.fcmp_ordered("<", x, c(-103.972077)), c(0.0), out)
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

    def _vector_exp64(self, x):
        """exp of a float64 vector without a libm call per lane: x = n*ln2 + r with ln2 in
        two parts (fdlibm's, so n*ln2_hi is exact), e**r = 1 + r + r**2 P(r) with P the
        Taylor series to r**13 (|r| <= ln2/2, truncation below 0.02 ulp), and the scaling
        by 2**n in two exact steps so that a subnormal result rounds once. Within 1 ulp;
        inf / 0 / NaN as libm gives them."""
        b, ty = self.b, x.type
        c = (lambda v: self._const_like(ty, v))
        lty = ir.VectorType(ir.IntType(64), ty.count)
        fmuladd = self._intrinsic(f"llvm.fmuladd.{_mangle(ty)}", ty, [ty] * 3)
        # clamps that let a NaN through: past them the result is inf or rounds to 0
        xc = b.select(b.fcmp_ordered(">", x, c(710.0)), c(710.0), x)
        xc = b.select(b.fcmp_ordered("<", xc, c(-746.0)), c(-746.0), xc)
        fx = self._math1("floor", b.call(fmuladd, [xc, c(1.4426950408889634), c(0.5)]))
        r = b.call(fmuladd, [fx, c(-6.93147180369123816490e-01), xc])
        r = b.call(fmuladd, [fx, c(-1.90821492927058770002e-10), r])
        p = self._horner(r, [1.0 / math.factorial(k) for k in range(13, 1, -1)])
        y = b.fadd(b.call(fmuladd, [b.fmul(r, r), p, r]), c(1.0))
        n = b.fptosi(fx, lty)
        half = b.ashr(n, ir.Constant(lty, [1] * ty.count))

        def pow2(k):
            bits = b.shl(b.add(k, ir.Constant(lty, [1023] * ty.count)),
                         ir.Constant(lty, [52] * ty.count))
            return b.bitcast(bits, ty)
        # y * 2**half is exact (a normal number), so the second product rounds once
        out = b.fmul(b.fmul(y, pow2(half)), pow2(b.sub(n, half)))
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

    def _vector_tanh64(self, x):
        """tanh of a float64 vector without a libm call per lane (Cody and Waite's): below
        |x| = ln(3)/2 the odd rational |x| + |x| g P(g) / Q(g) with g = x**2, above it
        1 - 2 / (exp(2|x|) + 1) with the vector exp; the sign put back with copysign, so
        -0.0 stays -0.0. Within 2 ulp; +-inf give +-1, NaN stays NaN."""
        b, ty = self.b, x.type
        c = (lambda v: self._const_like(ty, v))
        f = self._math1("abs", x)
        g = b.fmul(f, f)
        p = b.fmul(g, self._horner(g, TANH64_NUMERATOR))
        q = self._horner(g, TANH64_DENOMINATOR)
        fmuladd = self._intrinsic(f"llvm.fmuladd.{_mangle(ty)}", ty, [ty] * 3)
        small = b.call(fmuladd, [f, b.fdiv(p, q), f])
        big = b.fsub(c(1.0), b.fdiv(c(2.0), b.fadd(self._vector_exp64(b.fadd(f, f)), c(1.0))))
        r = b.select(b.fcmp_ordered("<", f, c(0.5493061443340548)), small, big)
        r = self.b.call(self._intrinsic(f"llvm.copysign.{_mangle(ty)}", ty, [ty, ty]), [r, x])
        return b.select(b.fcmp_unordered("uno", x, x), x, r)

    def _horner(self, x, coeffs):
        """``coeffs[0] * x**(n-1) + ... + coeffs[-1]`` with fused multiply-adds."""
        ty = x.type
        fmuladd = self._intrinsic(f"llvm.fmuladd.{_mangle(ty)}", ty, [ty] * 3)
        p = self._const_like(ty, coeffs[0])
        for c in coeffs[1:]:
            p = self.b.call(fmuladd, [p, x, self._const_like(ty, c)])
        return p

    def _vector_erff(self, x):
        """erf of a float32 vector without a libm call per lane: an odd / even rational
        approximation on [-4, 4] (erf is +-1 in float32 beyond), evaluated in float64 so
        that its alternating terms do not cancel away float32 digits: within 2 ulp."""
        b = self.b
        dty = ir.VectorType(F64, x.type.count)
        d = b.fpext(x, dty)
        c = (lambda v: self._const_like(dty, v))
        d = b.select(b.fcmp_ordered(">", d, c(4.0)), c(4.0), d)
        d = b.select(b.fcmp_ordered("<", d, c(-4.0)), c(-4.0), d)
        d2 = b.fmul(d, d)
        p = b.fmul(d, self._horner(d2, ERF_NUMERATOR))
        q = self._horner(d2, ERF_DENOMINATOR)
        return b.fptrunc(b.fdiv(p, q), x.type)

    def _vector_tanhf(self, x):
        """tanh of a float32 vector without a libm call per lane: below |x| = 0.625 its
        Taylor series to x**21 in float64, above it 1 - 2 / (exp(2|x|) + 1) with the
        vector exp, the sign put back. Within 1.5 ulp; +-inf give +-1, NaN stays NaN."""
        b, ty = self.b, x.type
        dty = ir.VectorType(F64, ty.count)
        d = b.fpext(x, dty)
        small = b.fptrunc(b.fmul(d, self._horner(b.fmul(d, d), TANH_TAYLOR)), ty)
        c = (lambda v: self._const_like(ty, v))
        ax = self._math1("abs", x)
        e = self._vector_expf(b.fmul(ax, c(2.0)))
        big = b.fsub(c(1.0), b.fdiv(c(2.0), b.fadd(e, c(1.0))))
        big = b.select(b.fcmp_ordered("<", x, c(0.0)), b.fneg(big), big)
        return b.select(b.fcmp_ordered("<", ax, c(0.625)), small, big)

    def _vector_logf(self, x):
        """log of a float32 vector without a libm call per lane (Cephes' logf): x = m * 2**e
        with m in [sqrt(1/2), sqrt(2)), log(m) = f - f**2/2 + f**3 P(f) for f = m - 1, and
        e * ln 2 added in two parts. Within 1 ulp; subnormals are scaled up first; 0 gives
        -inf, inf gives inf, a negative number or NaN gives NaN."""
        b, ty = self.b, x.type
        ity = ir.VectorType(I32, ty.count)
        c = (lambda v: self._const_like(ty, v))
        ic = (lambda v: ir.Constant(ity, [v] * ty.count))
        tiny = b.fcmp_ordered("<", x, c(1.1754943508222875e-38))
        xs = b.select(tiny, b.fmul(x, c(8388608.0)), x)          # * 2**23
        bits = b.bitcast(xs, ity)
        e = b.sub(b.and_(b.lshr(bits, ic(23)), ic(0xff)), ic(127))
        e = b.select(tiny, b.sub(e, ic(23)), e)
        m = b.bitcast(b.or_(b.and_(bits, ic(0x007fffff)), ic(0x3f800000)), ty)
        big = b.fcmp_ordered(">", m, c(1.41421356))
        m = b.select(big, b.fmul(m, c(0.5)), m)
        e = b.select(big, b.add(e, ic(1)), e)
        f = b.fsub(m, c(1.0))
        z = b.fmul(f, f)
        ty3 = [ty] * 3
        fmuladd = self._intrinsic(f"llvm.fmuladd.{_mangle(ty)}", ty, ty3)
        y = b.fmul(b.fmul(self._horner(f, LOG_POLYNOMIAL), f), z)
        ef = b.sitofp(e, ty)
        y = b.call(fmuladd, [ef, c(-2.12194440e-4), y])
        y = b.call(fmuladd, [z, c(-0.5), y])
        r = b.call(fmuladd, [ef, c(0.693359375), b.fadd(f, y)])
        r = b.select(b.fcmp_ordered("==", x, c(float("inf"))), x, r)
        r = b.select(b.fcmp_ordered("==", x, c(0.0)), c(float("-inf")), r)
        return b.select(b.fcmp_unordered("<", x, c(0.0)), c(float("nan")), r)

    def _vector_sincosf(self, x, want_cos):
        """sin / cos of a float32 vector without a libm call per lane (Cephes' sinf / cosf):
        |x| reduced by the even multiple j of pi/4 nearest it (the remainder in float64, pi/4
        in two parts), then the sine or cosine polynomial by the octant. Exact reduction needs |x| <= 8192; a
        vector with a larger finite lane takes libm for every lane (rare); inf / NaN give
        NaN."""
        b, ty = self.b, x.type
        ity = ir.VectorType(I32, ty.count)
        c = (lambda v: self._const_like(ty, v))
        ic = (lambda v: ir.Constant(ity, [v] * ty.count))
        fmuladd = self._intrinsic(f"llvm.fmuladd.{_mangle(ty)}", ty, [ty] * 3)
        ax = self._math1("abs", x)
        small = b.fcmp_ordered("<=", ax, c(8192.0))
        axs = b.select(small, ax, c(0.0))
        j = b.fptosi(b.fmul(axs, c(1.2732395447351628)), ity)       # 4 / pi
        j = b.and_(b.add(j, ic(1)), ic(-2))
        # the remainder in float64 (pi/4 in two parts): near a zero of the result it is
        # tiny, and float32 parts of pi/4 left errors of 100+ ulps there
        dty = ir.VectorType(F64, ty.count)
        dc = (lambda v: self._const_like(dty, v))
        dfma = self._intrinsic(f"llvm.fmuladd.{_mangle(dty)}", dty, [dty] * 3)
        y = b.sitofp(j, dty)
        r = b.call(dfma, [y, dc(-0.7853981633974483), b.fpext(axs, dty)])
        r = b.fptrunc(b.call(dfma, [y, dc(-3.061616997868383e-17), r]), ty)
        z = b.fmul(r, r)
        sin_p = b.call(fmuladd, [b.fmul(self._horner(z, [-1.9515295891e-4, 8.3321608736e-3,
                                                          -1.6666654611e-1]), z), r, r])
        cos_p = b.fadd(b.call(fmuladd, [b.fmul(self._horner(z, [
            2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2]), z), z,
            b.fmul(z, c(-0.5))]), c(1.0))
        if want_cos:
            j = b.add(j, ic(2))         # cos(x) = sin(|x| + pi/2)
        octant_cos = b.icmp_signed("!=", b.and_(j, ic(2)), ic(0))
        p = b.select(octant_cos, cos_p, sin_p)
        negative = b.icmp_signed("!=", b.and_(j, ic(4)), ic(0))
        if not want_cos:                # sin is odd (by the sign bit: sin(-0.0) is -0.0)
            negative = b.xor(negative, b.icmp_signed("<", b.bitcast(x, ity), ic(0)))
        p = b.select(negative, b.fneg(p), p)
        p = b.select(small, p, c(float("nan")))
        finite_big = b.and_(b.xor(small, self._const_like(small.type, 1)),
                            b.fcmp_ordered("<", ax, c(float("inf"))))
        return self._patch_rare_lanes(
            p, finite_big, lambda: self._libm_per_lane("cos" if want_cos else "sin", x))

    def _x86_scalef(self, ty):
        """The AVX-512 ``vscalefps`` intrinsic for 16 float32 lanes when the target has the
        instruction, else None."""
        if ty.count != 16 or not self.vector_scalef:
            return None
        return self._intrinsic("llvm.x86.avx512.mask.scalef.ps.512", ty,
                               [ty, ty, ty, ir.IntType(16), I32])

    def _fminmax(self, a, bnd, which):
        cmp = self.b.fcmp_ordered("<" if which == "min" else ">", a, bnd)
        return self.b.select(cmp, a, bnd)

    def _math1(self, name, a):
        return self._math(name, [a])

    def _libm_per_lane(self, name, a):
        """A libm function (``tanhf``/``tanh``, ``erff``/``erf``), called once per lane."""
        elem = a.type.element if isinstance(a.type, ir.VectorType) else a.type
        cname = name + ("f" if elem == F32 else "")
        fn = self._c_function(cname, ir.FunctionType(elem, [elem]))
        if not isinstance(a.type, ir.VectorType):
            return self.b.call(fn, [a])
        out = ir.Constant(a.type, ir.Undefined)
        for lane in range(a.type.count):
            x = self.b.extract_element(a, I32(lane))
            out = self.b.insert_element(out, self.b.call(fn, [x]), I32(lane))
        return out
