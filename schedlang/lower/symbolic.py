"""sympy views of index expressions, for messages a person reads: the range of an
out-of-bounds access is shown in its simplest symbolic form.

Example: ``pretty(simplify((N + 31) // 32 * 32 - 1))`` gives ``'32*floor((N + 31)/32) - 1'``.
"""
from __future__ import annotations

import sympy

from ..algo import expr as E


def to_sympy(e):
    """A sympy expression for an integer expression, or None if it has no counterpart."""
    if isinstance(e, E.Const):
        return sympy.Integer(int(e.value)) if not e.dtype.is_float else None
    if isinstance(e, E.Var):
        return sympy.Symbol(e.name, integer=True)
    if isinstance(e, E.Cast):
        return to_sympy(e.value) if e.dtype.is_int and e.value.dtype.is_int else None
    if isinstance(e, E.BinOp):
        a, b = to_sympy(e.a), to_sympy(e.b)
        if a is None or b is None:
            return None
        op = e.op
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op in ("floordiv", "div") and e.dtype.is_int:
            return sympy.floor(a / b)
        if op == "mod" and e.dtype.is_int:
            return sympy.Mod(a, b)
        if op == "min":
            return sympy.Min(a, b)
        if op == "max":
            return sympy.Max(a, b)
        return None
    if isinstance(e, E.UnOp) and e.op == "neg":
        a = to_sympy(e.a)
        return None if a is None else -a
    return None


def pretty(e) -> str:
    """The simplest symbolic text of ``e`` (falls back to our own printer)."""
    s = to_sympy(e)
    if s is None:
        return str(e)
    try:
        return str(sympy.simplify(s))
    except (TypeError, ValueError, RecursionError):  # sympy gave up: keep our form
        return str(e)
