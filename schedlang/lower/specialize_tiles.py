"""Pass (CPU targets): give a tile computed inside a loop its own code for the full tile.

With symbolic sizes, a Func computed at a consumer's tile loop (a register accumulator
``cache_write``'d at the tile of a GEMM) covers ``min(io*6 + 5, M - 1) - io*6 + 1`` rows:
only the last tile is short, yet every tile's loops, guards and storage take that symbolic
size, so nothing is unrolled into registers (a 1024^3 GEMM ran 37x slower than with
constant sizes). This pass writes

    if rows == 6 and cols == 64: <the tile's code with 6 and 64>
    else:                        <the tile's code as it is>

so full tiles get constant loops, as with constant sizes, and edge tiles stay exact. The
condition only restates the region's own extents, so both branches compute the same
values. Storage nested in specialized storage is specialized in both copies, up to
``MAX_NESTED`` deep (each level doubles the code under it).
Example: ``realize C_cache([io*6, min(io*6 + 5, M - 1) - io*6 + 1), ...)`` inside
``for io`` gains a copy for extent 6.
"""
from __future__ import annotations

from ..algo import expr as E
from . import ir
from .gpu_kernels import is_gpu_target
from .interval import constant_upper_bound
from .simplify import const_value

# the largest full tile (elements) given its own copy: register tiles and cache blocks
MAX_TILE_ELEMENTS = 1 << 16
# storage specialized inside specialized storage, at most (the code doubles each time)
MAX_NESTED = 3


def specialize_tiles(stmt, ctx):
    if is_gpu_target(ctx.target):
        return stmt     # GPU storage already takes its constant upper bound

    def in_loop(s, depth=0):
        if isinstance(s, ir.Realize) and depth < MAX_NESTED:
            # a tile inside a specialized panel is specialized in both of its copies
            return _specialized(s, lambda body: ir.map_stmt(body, lambda x: in_loop(x, depth + 1)))
        return None

    def outside(s):
        # storage outside every loop is computed once: nothing to gain from a copy
        if isinstance(s, ir.For):
            return s.replace(body=ir.map_stmt(s.body, in_loop))
        return None
    return ir.map_stmt(stmt, outside)


def _specialized(r, inner):
    """``if <full tile>: r with constant extents else: r``, or None when ``r`` has no
    symbolic extent with a constant bound (or its full tile is too large). A dimension
    with no constant bound keeps its extent in both copies."""
    full = {}
    elements = 1
    for _, ext in r.bounds:
        c = const_value(ext)
        if c is None:
            c = constant_upper_bound(ext)
            if c is None or c < 1:
                continue        # a dimension as long as the data (a panel's k) stays
            full[E.structural_key(ext)] = (ext, E.Const(c, ext.dtype))
        elements *= max(c, 1)
    if not full or elements > MAX_TILE_ELEMENTS:
        return None
    cond = None
    for ext, c in full.values():
        eq = E.binary("eq", ext, c)
        cond = eq if cond is None else E.binary("and", cond, eq)

    def fixed(e):
        hit = full.get(E.structural_key(e))
        return hit[1] if hit is not None else e

    def lets(s):
        # the region's extent Lets (``let C_cache.i.extent = ...``) become the constants,
        # which simplification then carries into every loop and index
        if isinstance(s, ir.LetStmt) and E.structural_key(s.value) in full:
            return ir.LetStmt(s.var, fixed(s.value), ir.map_stmt(s.body, lets), s.in_range)
        return None
    body = inner(ir.map_stmt(r.body, lets))
    bounds = [(m, fixed(ext)) for m, ext in r.bounds]
    return ir.IfThenElse(cond, ir.Realize(r.func, bounds, r.memory, body),
                         r.replace(body=inner(_rolled(r.body))))


def _rolled(body):
    """``body`` with its loops kept rolled: the edge tiles' copy. Unrolled with symbolic
    extents, each copy of a loop body is guarded and split into a vector part and a tail,
    and a register tile's worth of them took LLVM half a minute to compile; LLVM's own
    unrolling of the same loops (of a few iterations each) still took seconds."""
    def fn(s):
        if isinstance(s, ir.For) and s.kind in ("serial", "unrolled", "vectorized"):
            kind = "serial" if s.kind == "unrolled" else s.kind
            return s.replace(kind=kind, rolled=True, body=ir.map_stmt(s.body, fn))
        return None
    return ir.map_stmt(body, fn)
