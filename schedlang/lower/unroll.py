"""Pass: unroll loops marked ``unrolled`` into straight-line copies (their extent must be
a compile-time constant). Example: ``for x in [0, 3) unrolled`` becomes three blocks
with ``let x = 0``, ``let x = 1``, ``let x = 2``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..errors import ScheduleError
from ..schedule.stage_loops import MAX_UNROLL
from . import ir
from .simplify import const_value, simplify


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
    def unroll(stmt, outer):
        """``stmt`` with its unrolled loops copied out; ``outer`` is the number of copies the
        unrolled loops around it already make (nested unrolls multiply)."""
        def stmt_fn(s):
            if not (isinstance(s, ir.For) and s.kind == "unrolled"):
                return None
            n = const_value(simplify(s.extent))
            where = describe_loop(ctx, s.var, "unroll")
            if n is None:
                dim = ctx.loop_names.get(s.var, (None, s.var))[1]
                raise ScheduleError(f"{where}: its extent is not a compile-time constant "
                                    f"({describe_extent(s.extent)}); unroll with a factor "
                                    f"(unroll({dim}, 4)) or split it first")
            if n * outer > MAX_UNROLL:
                within = f" inside unrolled loops that already make {outer} copies" \
                    if outer > 1 else ""
                raise ScheduleError(f"{where}: unrolling {n} iterations{within} is too many "
                                    f"copies of the body ({n * outer}, at most {MAX_UNROLL}); "
                                    "unroll fewer iterations (a smaller factor, or split the "
                                    "loop first)")
            body = unroll(s.body, outer * n)
            return ir.make_block([ir.LetStmt(s.var, simplify(s.min + E.Const(k, T.int64)), body)
                                  for k in range(n)]) or ir.Evaluate(E.Const(0, T.int32))
        return ir.map_stmt(stmt, stmt_fn)
    return unroll(stmt, 1)
