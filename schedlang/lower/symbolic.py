"""sympy views of index expressions, for messages a person reads: the range of an
out-of-bounds access is shown in its simplest symbolic form.

Example: ``pretty(simplify((N + 31) // 32 * 32 - 1))`` gives ``'(N + 31) // 32 * 32 - 1'``:
Python's spelling (``//``, ``%``, ``min``, ``max``), as the user writes indices.
sympy is imported on first use: it is needed only for messages, and importing it would
double the time ``import schedlang`` takes.
"""
from __future__ import annotations

import functools

from ..algo import expr as E


def to_sympy(e):
    """A sympy expression for an integer expression, or None if it has no counterpart."""
    import sympy
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
        if op in ("floordiv", "div", "mod") and e.dtype.is_int and b == 0:
            return sympy.Integer(0)     # x // 0 and x % 0 are 0 (numpy's); sympy raises
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


@functools.lru_cache(maxsize=None)
def _python_index_printer():
    """The printer class, made once sympy is imported."""
    import sympy
    from sympy.printing.str import StrPrinter

    class PythonIndexPrinter(StrPrinter):
        """sympy's text with Python's integer operators: ``floor(p/q)`` as ``(p) // q``,
        ``Mod`` as ``%``, ``Min`` / ``Max`` as ``min`` / ``max``."""

        def _print_floor(self, e):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            if den == 1:
                return self._print(num)
            return f"{self._wrap(num)} // {self._wrap(den)}"

        def _print_Mod(self, e):
            return f"{self._wrap(e.args[0])} % {self._wrap(e.args[1])}"

        def _print_Min(self, e):
            return "min(" + ", ".join(self._print(a) for a in e.args) + ")"

        def _print_Max(self, e):
            return "max(" + ", ".join(self._print(a) for a in e.args) + ")"

        def _print_Mul(self, e):
            # Python's // and % bind like *, left to right: a floor division or remainder
            # goes first, bare; any later one, and any sum, gets parentheses
            c, rest = e.as_coeff_Mul()
            factors = sympy.Mul.make_args(rest)
            if not any(isinstance(f, (sympy.floor, sympy.Mod)) for f in factors):
                return super()._print_Mul(e)
            factors = sorted(factors, key=lambda f: not isinstance(f, (sympy.floor, sympy.Mod)))
            parts = [self._print(factors[0])] + [
                f"({self._print(f)})" if isinstance(f, (sympy.floor, sympy.Mod, sympy.Add))
                else self._print(f) for f in factors[1:]]
            text = " * ".join(parts)
            if abs(c) != 1:
                text += f" * {self._print(abs(c))}"
            return text if c > 0 else f"-({text})"

        def _wrap(self, x):
            text = self._print(x)
            return text if x.is_Atom or isinstance(x, (sympy.Min, sympy.Max)) else f"({text})"

    return PythonIndexPrinter


def pretty(e) -> str:
    """The simplest symbolic text of ``e`` in Python's spelling (falls back to our own
    printer)."""
    s = to_sympy(e)
    if s is None:
        return str(e)
    import sympy
    try:
        return _python_index_printer()().doprint(sympy.simplify(s))
    except (TypeError, ValueError, RecursionError):  # sympy gave up: keep our form
        return str(e)
