"""Rebuild a fact (``s.assume('N % 16 == 0')``) from its printed text, without ``eval``.

A schedule read back from JSON or from the tuning database is data: its ``assume``
directives carry a fact as text, and that text must never run as Python. The text is
parsed with ``ast`` and only the forms ``expr_to_python`` prints are rebuilt: numbers,
the names of sizes and Params (``name('my-alpha')`` for one that is not an identifier),
arithmetic, bitwise and comparison operators, and calls of the algorithm language's
functions (``sl.min``, ``sl.cast(sl.int64, ...)``, ...).
"""
from __future__ import annotations

import ast
import operator

from ..algo import expr as E
from ..algo import math as M
from ..algo import types as T
from ..errors import AlgorithmError, ScheduleError

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_FUNCTIONS = {"min": E.minimum2, "max": E.maximum2, "select": E.select, "clamp": E.clamp,
              "cast": E.cast, **{n: getattr(M, n) for n in (
                  "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "pow", "floor",
                  "ceil", "erf")}}
_DTYPES = T.BY_NAME


class _NotAFact(Exception):
    pass


def parse_fact(text, names):
    """The fact expression printed as ``text``; ``names`` maps the size and Param names it
    may use to their expressions. Anything else (attribute access, a call of another
    function, a subscript, a lambda) is a ``ScheduleError``.
    Example: ``parse_fact('(N % 16) == 0', {'N': N})``."""
    if not isinstance(text, str) or len(text) > 10_000:
        raise ScheduleError(f"assume({_short(text)}): a fact must be the text of an expression "
                            "about sizes and Params, as str(s) prints it")
    shown = _short(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _build(tree.body, names)
    except (SyntaxError, RecursionError, MemoryError) as e:
        raise ScheduleError(f"assume({shown}): cannot rebuild the fact "
                            f"({type(e).__name__})") from None
    except _NotAFact as e:
        raise ScheduleError(f"assume({shown}): cannot rebuild the fact: {e}; a fact uses "
                            "sizes, Params, numbers, operators and sl functions only") from None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AlgorithmError) as e:
        raise ScheduleError(f"assume({shown}): cannot rebuild the fact ({e})") from None


def _build(node, names):
    if isinstance(node, ast.Constant):
        if type(node.value) in (int, float, bool):
            return node.value
        raise _NotAFact(f"{node.value!r} is not a number")
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise _NotAFact(f"{node.id!r} is not a size or Param of this pipeline")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _fold(node.op, _build(node.left, names), _build(node.right, names))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_build(node.operand, names))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](_build(node.left, names),
                                           _build(node.comparators[0], names))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "name" and len(node.args) == 1 and not node.keywords and \
            isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        # a size or Param whose name is not an identifier, quoted: name('my-alpha')
        return _build(ast.Name(id=node.args[0].value), names)
    if isinstance(node, ast.Attribute) and _is_sl(node.value) and node.attr in _DTYPES:
        return _DTYPES[node.attr]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            _is_sl(node.func.value) and node.func.attr in _FUNCTIONS and not node.keywords:
        return _FUNCTIONS[node.func.attr](*(_build(a, names) for a in node.args))
    raise _NotAFact(f"'{ast.unparse(node)[:60]}' is not allowed")


def _fold(op, a, b):
    """``a <op> b``. Two plain ints stay within 64 bits: a fact's numbers are int64 sizes,
    and text such as ``9**9**9`` or ``1 << 10**12`` would otherwise take Python hours or
    all memory to compute while a schedule is read back."""
    both_int = type(a) is int and type(b) is int
    if both_int and ((isinstance(op, ast.Pow) and abs(a) >= 2 and b >= 64)
                     or (isinstance(op, ast.LShift) and a != 0 and b >= 64)):
        raise _NotAFact(f"{a} {'**' if isinstance(op, ast.Pow) else '<<'} {b} is beyond "
                        "the int64 range of sizes")
    out = _BINARY[type(op)](a, b)
    if both_int and type(out) is int and abs(out) >= 2 ** 64:
        raise _NotAFact(f"the number {_short(str(out))} is beyond the int64 range of sizes")
    return out


def _short(text):
    """``text`` as the message shows it: its repr, cut to 80 characters."""
    r = repr(text)
    return r if len(r) <= 80 else r[:77] + "..."


def _is_sl(node):
    return isinstance(node, ast.Name) and node.id == "sl"
