"""Evaluate scalar size / Param expressions in Python (argument checks at call time),
and fold one operation with schedlang's semantics (shared with the simplifier).

Example: ``evaluate(M % 16 == 0, {"M": 64})`` is ``True``.
"""
from __future__ import annotations

import math

from . import expr as E

_MATH = {"exp": math.exp, "log": math.log, "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos,
         "tanh": math.tanh, "floor": math.floor, "ceil": math.ceil, "erf": math.erf, "abs": abs,
         "rsqrt": lambda x: 1 / math.sqrt(x), "pow": math.pow}


class Unbound(Exception):
    """The expression uses a variable with no value in the environment."""


def fold(op, a, b, dtype):
    """Fold a binary op on two Python values with schedlang semantics."""
    if op in E.CMP_OPS:
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                "ge": a >= b}[op]
    if op == "and":
        return bool(a and b)
    if op == "or":
        return bool(a or b)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("min", "max"):
        # as the generated code (and numpy's minimum / maximum): a NaN on either side wins,
        # and of two equal values (0.0 and -0.0) the second is taken
        if isinstance(a, float) and math.isnan(a):
            return a
        return a if (a < b if op == "min" else a > b) else b
    if dtype.is_float:
        if op == "div":
            if b == 0:
                if a == 0 or math.isnan(a):
                    return math.nan
                return math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
        return None
    if op in ("floordiv", "div"):
        return 0 if b == 0 else a // b
    if op == "mod":
        return 0 if b == 0 else a % b
    if op == "bitand":
        return a & b
    if op == "bitor":
        return a | b
    if op == "bitxor":
        return a ^ b
    if op in ("shl", "shr"):
        return _shift(op, a, b, dtype)
    return None


def _shift(op, a, b, dtype):
    """numpy's shifts: the amount is read as unsigned, and an amount of the width or more
    shifts every bit out (``<<`` gives 0, ``>>`` gives 0, or -1 for a negative signed value)."""
    bits = dtype.bits
    if b % (1 << bits) >= bits:
        return -1 if op == "shr" and dtype.is_signed and a < 0 else 0
    if op == "shl":
        return a << b       # the caller wraps the result to the type
    return (a % (1 << bits)) >> b if dtype.is_unsigned else a >> b



def int_pow(a, b, bits):
    """An integer ``a ** b`` modulo ``2**bits`` (the caller wraps it to the type); a negative
    exponent, which numpy refuses, gives the integer part of the true power: 1 or -1 for a
    base of 1 or -1, else 0 (as torch)."""
    if b >= 0:
        return pow(a, b, 1 << bits)
    if a == 1:
        return 1
    if a == -1:
        return -1 if b % 2 else 1
    return 0


def evaluate(e, env, exact=False):
    """The Python value of ``e`` with Vars taken from ``env`` (name -> number). ``exact``:
    integer operations and integer casts do not wrap (the compiler proves accesses safe
    over the integers, assuming no overflow, so the facts it relied on are checked so at
    call time: ``p + 4 <= N`` with p = 2**31 - 1 is false, not wrapped to true)."""
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Var):
        if e.name not in env:
            raise Unbound(e.name)
        return env[e.name]
    if isinstance(e, E.Cast):
        v = evaluate(e.value, env, exact)
        if exact and e.dtype.is_int and e.value.dtype.is_int:
            return v
        return E._convert_value(v, e.dtype.element())
    if isinstance(e, E.BinOp):
        a, b = evaluate(e.a, env, exact), evaluate(e.b, env, exact)
        r = fold(e.op, a, b, e.a.dtype)
        if r is None:
            raise Unbound(str(e))
        if e.dtype.is_int and (not exact or e.op == "shl"):     # a shift always wraps
            r = E._convert_value(r, e.dtype)
        return r
    if isinstance(e, E.UnOp):
        a = evaluate(e.a, env, exact)
        if e.op == "neg":
            return -a if exact or not e.dtype.is_int else E._convert_value(-a, e.dtype)
        return not a if e.dtype.is_bool else ~a
    if isinstance(e, E.Select):
        return evaluate(e.t, env, exact) if evaluate(e.cond, env, exact) else \
            evaluate(e.f, env, exact)
    if isinstance(e, E.Call) and e.name == "pow" and e.dtype.is_int:
        a, b = (evaluate(x, env, exact) for x in e.args)
        return E._convert_value(int_pow(a, b, e.dtype.bits), e.dtype)
    if isinstance(e, E.Call) and e.name in _MATH:
        return _MATH[e.name](*[evaluate(a, env, exact) for a in e.args])
    raise Unbound(str(e))
