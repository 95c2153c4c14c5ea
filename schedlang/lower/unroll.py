"""Pass: unroll loops marked ``unrolled`` into straight-line copies (their extent must be
a compile-time constant). Example: ``for x in [0, 3) unrolled`` becomes three blocks
with ``let x = 0``, ``let x = 1``, ``let x = 2``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..errors import ScheduleError
from . import ir
from .simplify import const_value, simplify

MAX_UNROLL = 4096


def describe_extent(e):
    """The extent of a loop in words a user knows (no internal region names)."""
    text = str(simplify(e))
    if ".extent" in text or ".min" in text or ".s" in text:
        return "it depends on the region its consumers need"
    return f"it is {text}"


def describe_loop(ctx, var, directive):
    stage, dim = ctx.loop_names.get(var, (None, var))
    return f"{directive}({dim}) on {stage}" if stage else f"{directive}({var})"


def unroll_loops(stmt, ctx):
    def stmt_fn(s):
        if isinstance(s, ir.For) and s.kind == "unrolled":
            body = ir.map_stmt(s.body, stmt_fn)
            n = const_value(simplify(s.extent))
            if n is None:
                raise ScheduleError(f"{describe_loop(ctx, s.var, 'unroll')}: its extent is not "
                                    f"a compile-time constant ({describe_extent(s.extent)}); "
                                    "unroll with a factor (unroll(v, 4)) or split it first")
            if n > MAX_UNROLL:
                raise ScheduleError(f"{describe_loop(ctx, s.var, 'unroll')}: unrolling {n} "
                                    f"iterations is too many (at most {MAX_UNROLL}); unroll with "
                                    "a factor")
            return ir.make_block([ir.LetStmt(s.var, simplify(s.min + E.Const(k, T.int64)), body)
                                  for k in range(n)]) or ir.Evaluate(E.Const(0, T.int32))
        return None
    return ir.map_stmt(stmt, stmt_fn)
