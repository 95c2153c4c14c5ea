"""Pass: storage flattening. Multi-dimensional Funcs become flat buffers: ``Realize``
becomes ``Allocate`` (row-major, last dimension contiguous, as numpy), ``Provide``
becomes ``Store``, ``Prefetch`` becomes ``FlatPrefetch``, and reads become ``Load`` of a flat
int64 index.
Example: ``f[y, x]`` over region [y0, y0+h) x [x0, x0+w) reads ``f[(y - y0) * w + (x - x0)]``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from .gpu_kernels import is_gpu_target
from .simplify import const_value, simplify

LOCAL_BYTES = 64 * 1024



class _Layout:
    def __init__(self, name, mins, extents):
        self.name = name
        self.mins = mins
        strides, acc = [], E.Const(1, T.int64)
        for ext in reversed(extents):
            strides.append(acc)
            acc = simplify(acc * ext)
        self.strides = list(reversed(strides))

    def index(self, args):
        idx = E.Const(0, T.int64)
        for a, m, st in zip(args, self.mins, self.strides):
            idx = idx + (ir.as_int64(a) - m) * st
        return simplify(idx)


def storage_flattening(stmt, ctx):
    layouts = {}
    for b in list(ctx.schedule.inputs) + [o for o in ctx.outputs]:
        shape = [simplify(E.cast(T.int64, x)) for x in b.shape]
        layouts[id(b)] = _Layout(b.name, [E.Const(0, T.int64)] * len(shape), shape)

    def expr_fn(e):
        if not E.node_flags(e) & E.FUNC_READ:
            return e

        def fn(n):
            if isinstance(n, E.FuncRef):
                lay = layouts[id(n.func)]
                return ir.Load(lay.name, lay.index(n.args), n.func.dtype)
            return None
        return E.map_expr(e, fn)

    def stmt_fn(s):
        if isinstance(s, ir.Realize):
            f = s.func
            mins, exts = [], []
            for d, (lo, ext) in enumerate(s.bounds):
                mins.append(E.Var(f"{f.name}.b{d}.min", T.int64))
                exts.append(E.Var(f"{f.name}.b{d}.extent", T.int64))
            layouts[id(f)] = _Layout(f.name, mins, exts)
            body = ir.map_stmt(s.body, stmt_fn, expr_fn)
            memory = s.memory
            nbytes = f.dtype.bytes
            for _, ext in s.bounds:
                c = const_value(ext)
                nbytes = None if (c is None or nbytes is None) else nbytes * c
            if memory == "shared" and not is_gpu_target(ctx.target):
                memory = "global"       # the GPU pass picks a scope from where it is
            if memory == "global" and nbytes is not None and nbytes <= LOCAL_BYTES:
                memory = "local"
            ctx.allocations[f.name] = memory
            out = ir.Allocate(f.name, f.dtype, exts, memory, body)
            for d in reversed(range(len(s.bounds))):
                lo, ext = s.bounds[d]
                out = ir.LetStmt(mins[d].name, ir.as_int64(lo), ir.LetStmt(exts[d].name, ir.as_int64(ext), out))
            return out
        if isinstance(s, ir.Provide):
            lay = layouts[id(s.func)]
            return ir.Store(lay.name, expr_fn(s.value), lay.index([expr_fn(a) for a in s.args]))
        if isinstance(s, ir.Prefetch):
            lay = layouts[id(s.func)]
            return ir.FlatPrefetch(lay.name, lay.index([expr_fn(a) for a in s.args]),
                                   s.func.dtype.bytes)
        return None
    return ir.map_stmt(stmt, stmt_fn, expr_fn)
