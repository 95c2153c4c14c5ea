"""The default schedule of the frontend's reductions (``sum`` / ``max`` / ``min`` and what
is built on them: ``mean``, norms). Two shapes, told apart by the algorithm itself:

- the reduced dimension is the one the data is contiguous along (row sums, full sums):
  the innermost reduction loop is split and ``rfactor``'d into 64 partial results held in
  four vector accumulators, combined once at the end;
- the kept dimension is the contiguous one (column sums, ``x.sum(0)``): 128 results are
  kept in vector registers while the reduction runs over whole rows of 128 values.

The kept dimensions run in parallel. Example: ``reduction_schedule(s, f, True)`` on the
Func of ``Tensor(x).sum(0)``.
"""
from __future__ import annotations

import schedlang as sl
from schedlang.algo import expr as E

VECTOR = 16          # lanes of one AVX-512 float32 register
PARTIALS = 64        # partial results of a row reduction: four vector accumulators
COLUMNS = 128        # results a column reduction keeps in registers


def _extent(f, name):
    """The constant extent of pure Var ``name`` of ``f``, or None."""
    args = [a.name for a in f.definitions[0].args]
    size = f.shape[args.index(name)] if f.shape is not None else None
    return int(size.value) if isinstance(size, E.Const) else None


def _rvar_extent(rv):
    ext = rv.rdom.bounds[rv.dim][1]
    return int(ext.value) if isinstance(ext, E.Const) else ext if isinstance(ext, int) else None


def _last_index_rvars(f):
    """The reduction variables that appear in the last index of some read of ``f``: a
    reduction along the dimension the data is contiguous in."""
    names = {v.name for v in f.definitions[0].rvars}
    found = set()

    def visit(n):
        if isinstance(n, E.FuncRef) and n.args:
            found.update(names & E.expr_vars(n.args[-1]))
    E.walk_expr(f.definitions[0].value, visit)
    return found


def reduction_schedule(s, f, is_output):
    """Schedule the reduction Func ``f`` (one inline reduction over constant extents) in
    ``s``. Returns the Funcs it scheduled, or False when ``f`` is not that form."""
    d = f.definitions[0]
    if f.shape is None or not d.rvars or len(d.reductions) != 1:
        return False
    pure = [a.name for a in d.args]
    extents = [_extent(f, p) for p in pure]
    if any(e is None for e in extents):
        return False
    contiguous = _last_index_rvars(f)
    outer = next((p for p, e in zip(pure, extents) if e > 1), None)
    if contiguous:
        rv = next(v for v in reversed(d.rvars) if v.name in contiguous)
        ext = _rvar_extent(rv)
        if ext is None or ext < VECTOR:
            return False
        lanes = PARTIALS if ext >= 4 * PARTIALS else VECTOR
        s[f].split(rv.name, lanes, names=(f"{rv.name}.o", f"{rv.name}.i"), tail="guard")
        part = s[f].rfactor(f"{rv.name}.i")
        if pure:
            s[part].compute_at(f, pure[-1])
        loops = [n for n in s[part].loop_names() if n != f"{rv.name}.i"]
        s[part].reorder(*loops, f"{rv.name}.i").vectorize(f"{rv.name}.i", VECTOR)
        if lanes > VECTOR:
            s[part].unroll(f"{rv.name}.i.o")
        if outer is not None:
            s[f].parallel(outer)
        return [f, part]
    if not pure or extents[-1] < VECTOR:
        return False
    last = pure[-1]
    tile = COLUMNS if extents[-1] >= COLUMNS else VECTOR * (extents[-1] // VECTOR)
    lo, li = s[f].split(last, tile, names=(f"{last}.o", f"{last}.i"))
    rvars = [n for n in s[f].loop_names() if n not in pure and n not in (lo.name, li.name)]
    s[f].reorder(*pure[:-1], lo.name, *rvars, li.name).vectorize(li.name, VECTOR)
    if tile > VECTOR:
        s[f].unroll(f"{li.name}.o")
    s[f].parallel(outer if outer != last else lo.name)
    return [f]
