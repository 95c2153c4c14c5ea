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
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    if dtype.is_float:
        if op == "div":
            if b == 0:
                return math.copysign(math.inf, a) * (1 if b >= 0 else -1) if a != 0 else math.nan
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
    if op == "shl":
        return a << (b & (dtype.bits - 1))
    if op == "shr":
        b &= dtype.bits - 1
        if dtype.is_unsigned:
            return (a % (1 << dtype.bits)) >> b
        return a >> b
    return None



def evaluate(e, env):
    """The Python value of ``e`` with Vars taken from ``env`` (name -> number)."""
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Var):
        if e.name not in env:
            raise Unbound(e.name)
        return env[e.name]
    if isinstance(e, E.Cast):
        return E._convert_value(evaluate(e.value, env), e.dtype.element())
    if isinstance(e, E.BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        r = fold(e.op, a, b, e.a.dtype)
        if r is None:
            raise Unbound(str(e))
        if e.dtype.is_int:
            r = E._convert_value(r, e.dtype)
        return r
    if isinstance(e, E.UnOp):
        a = evaluate(e.a, env)
        return -a if e.op == "neg" else (not a if e.dtype.is_bool else ~a)
    if isinstance(e, E.Select):
        return evaluate(e.t, env) if evaluate(e.cond, env) else evaluate(e.f, env)
    if isinstance(e, E.Call) and e.name in _MATH:
        return _MATH[e.name](*[evaluate(a, env) for a in e.args])
    raise Unbound(str(e))
