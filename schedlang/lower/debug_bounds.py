"""Pass (only with ``SCHEDLANG_DEBUG=bounds``): check every flat load and store index
against its buffer's size at run time; a violation stops the kernel with error code 1.
Example: ``out[i] = a[i + 1]`` gets ``assert 0 <= i + 1 < size(a)`` before the store.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from .simplify import simplify


def _product(exts):
    out = E.Const(1, T.int64)
    for x in exts:
        out = out * E.cast(T.int64, x)
    return simplify(out)


def debug_bounds(stmt, ctx):
    if not ctx.debug_bounds:
        return stmt
    sizes = {b.name: _product(b.shape) for b in list(ctx.schedule.inputs) + ctx.outputs}

    def checks(exprs, extra=None):
        conds = []

        def fn(n):
            if isinstance(n, ir.Load):
                conds.append((n.buffer, n.index))
        for e in exprs:
            E.walk_expr(e, fn)
        if extra is not None:
            conds.append(extra)
        out = []
        for buf, idx in conds:
            size = sizes[buf]
            out.append(ir.Assert(E.binary("and", E.binary("ge", idx, 0),
                                          E.binary("lt", idx, size)), 1))
        return out

    def stmt_fn(s):
        if isinstance(s, ir.Allocate):
            sizes[s.buffer] = _product(s.extents)
            return None
        if isinstance(s, ir.Store):
            return ir.make_block(checks([s.value, s.index], (s.buffer, s.index)) + [s])
        if isinstance(s, ir.TensorOp):
            # the lowest and highest element each operand tile touches
            dims = (s.intrinsic.lanes, s.intrinsic.depth)
            ends = []
            for op in s.operands:
                for pick in (min, max):
                    off = sum(pick(0, st) * (n - 1) for st, n in zip(op.strides, dims))
                    ends.append((op.buffer, E.binary("add", op.base, off)))
            return ir.make_block([c for end in ends for c in checks([], end)] + [s])
        if isinstance(s, (ir.LetStmt, ir.IfThenElse, ir.For)):
            pre = checks(ir.stmt_exprs(s))
            if pre:
                return ir.make_block(pre + [ir.map_stmt(s, _skip_first(s, stmt_fn))])
        return None
    return ir.map_stmt(stmt, stmt_fn)


def _skip_first(node, fn):
    def inner(s):
        return None if s is node else fn(s)
    return inner
