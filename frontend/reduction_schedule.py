"""The default schedule of the frontend's reductions (``sum`` / ``max`` / ``min`` and what
is built on them: ``mean``, norms). Two shapes, told apart by the algorithm itself:

- the reduced dimension is the one the data is contiguous along (row sums, full sums):
  the innermost reduction loop is split and ``rfactor``'d into 64 partial results held in
  four vector accumulators, combined once at the end;
- the kept dimension is the contiguous one (column sums, ``x.sum(0)``): 128 results are
  kept in vector registers while the reduction runs over whole rows of 128 values.

The kept dimensions run in parallel. A large reduction to one value (``x.sum()``) has none,
so it is first rfactor'd into pieces (its outer rows, or chunks of its contiguous loop)
computed in parallel and combined at the end. Example: ``reduction_schedule(s, f, True)`` on the
Func of ``Tensor(x).sum(0)``.
"""
from __future__ import annotations

import schedlang as sl
from schedlang.algo import expr as E

VECTOR = 16          # lanes of one AVX-512 float32 register
PARTIALS = 64        # partial results of a row reduction: four vector accumulators
COLUMNS = 128        # results a column reduction keeps in registers
PARALLEL_MIN = 1 << 16   # a reduction to one value this large runs in parallel pieces
CHUNKS = 16          # pieces of a reduction to one value along its contiguous variable
# below this many points (result elements times reduction steps) a loop runs on one
# thread: handing it to the pool costs more than it saves, and each parallel loop is a
# function of its own for LLVM (30 layernorms of 8 x 64: compile 13 -> 6.4 s, a call
# 0.070 -> 0.030 ms)
PARALLEL_WORK = 1 << 15


def worth_parallel(f):
    """True when the default schedule of Func ``f`` should run its outer loop on threads:
    its work (result elements times the steps of each reduction in its definitions) is
    at least ``PARALLEL_WORK``, or not known. Example: ``if worth_parallel(f): s[f].parallel(y)``."""
    if f.shape is None:
        return True
    work = 1
    for n in f.shape:
        if not isinstance(n, E.Const):
            return True
        work *= int(n.value)
    for d in f.definitions:
        rdoms = [v.rdom for v in d.rvars] + [r.rdom for r in d.reductions]
        for rd in {id(r): r for r in rdoms}.values():
            for _, ext in rd.bounds:
                e = _const_extent(ext)
                if e is None:
                    return True
                work *= max(e, 1)
    return work >= PARALLEL_WORK


def _extent(f, name):
    """The constant extent of pure Var ``name`` of ``f``, or None."""
    args = [a.name for a in f.definitions[0].args]
    size = f.shape[args.index(name)] if f.shape is not None else None
    return int(size.value) if isinstance(size, E.Const) else None


def _const_extent(ext):
    """An RDom extent as an int, or None when it is symbolic."""
    return int(ext.value) if isinstance(ext, E.Const) else ext if isinstance(ext, int) else None


def _rvar_extent(rv):
    return _const_extent(rv.rdom.bounds[rv.dim][1])


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


def _vector_partials(s, f, rv, ext, at):
    """Split reduction loop ``rv`` (extent ``ext``) of ``f`` and rfactor its inner part into
    vector partial results, computed at loop ``at`` of ``f`` (or once, when None)."""
    lanes = PARTIALS if ext >= 4 * PARTIALS else VECTOR
    s[f].split(rv, lanes, names=(f"{rv}.o", f"{rv}.i"), tail="guard")
    part = s[f].rfactor(f"{rv}.i")
    if at is not None:
        s[part].compute_at(f, at)
    loops = [n for n in s[part].loop_names() if n != f"{rv}.i"]
    s[part].reorder(*loops, f"{rv}.i").vectorize(f"{rv}.i", VECTOR)
    if lanes <= VECTOR:
        return [part]
    s[part].unroll(f"{rv}.i.o")
    return [part, fold_partials(s, f, rv, VECTOR, f, at)]


def fold_partials(s, red, rv, width, consumer, at):
    """Fold the partial results that ``red``'s loop ``{rv}.i`` combines (after its rfactor)
    into ``width`` lanes by vector ops, in a Func computed at loop ``at`` of ``consumer``
    (or where the schedule leaves it, when None), before the last, scalar chain: a chain of
    one dependent scalar op per partial (64) was about a third of a 256-long row's softmax,
    and held 8192 row sums of 256 to 0.24x torch. Returns the new Func.
    Example: ``fold_partials(s, row_max, "r", 16, out, "i")``."""
    s[red].split(f"{rv}.i", width, names=(f"{rv}.i.o", f"{rv}.i.i"))
    fold = s[red].rfactor(f"{rv}.i.i")
    if at is not None:
        s[fold].compute_at(consumer, at)
    loops = [n for n in s[fold].loop_names() if n != f"{rv}.i.i"]
    s[fold].reorder(*loops, f"{rv}.i.i").vectorize(f"{rv}.i.i")
    return fold


def _parallel_chunks(s, f, d, rv, ext):
    """A reduction to one value (no kept dimension to run in parallel) of at least
    ``PARALLEL_MIN`` elements: rfactor it into independent pieces computed in parallel, each
    reduced with vector partials, then combined. The pieces are the outermost reduction
    variable's iterations when it is not the contiguous one, else chunks of ``rv``.
    Returns the Funcs scheduled, or None when the reduction is too small."""
    total = 1
    for v in d.rvars:
        e = _rvar_extent(v)
        if not isinstance(e, int):
            return None
        total *= e
    if total < PARALLEL_MIN:
        return None
    first = d.rvars[0]
    if first is not rv and _rvar_extent(first) >= CHUNKS // 2:
        piece = first.name
    else:
        size = -(-ext // CHUNKS)
        size = -(-size // PARTIALS) * PARTIALS
        s[f].split(rv.name, size, names=(f"{rv.name}.chunk", f"{rv.name}.in"), tail="guard")
        piece, rv_inner = f"{rv.name}.chunk", f"{rv.name}.in"
        ext = size
    pieces = s[f].rfactor(piece)
    s[pieces].compute_root().parallel(piece)
    inner = rv.name if piece == first.name else rv_inner
    return [f, pieces, *_vector_partials(s, pieces, inner, ext, piece)]


def reduction_schedule(s, f, is_output, columns=False):
    """Schedule the reduction Func ``f`` (one inline reduction over constant extents) in
    ``s``. ``columns``: keep results of the contiguous kept dimension in registers even
    when some read is contiguous along the reduction (``v @ m``: v is, m is not, and m is
    the big one). Returns the Funcs it scheduled, or False when ``f`` is not that form."""
    d = f.definitions[0]
    if f.shape is None or not d.rvars or len(d.reductions) != 1:
        return False
    pure = [a.name for a in d.args]
    extents = [_extent(f, p) for p in pure]
    if any(e is None for e in extents):
        return False
    contiguous = set() if columns and pure and extents[-1] >= VECTOR else _last_index_rvars(f)
    outer = next((p for p, e in zip(pure, extents) if e > 1), None)
    if contiguous:
        rv = next(v for v in reversed(d.rvars) if v.name in contiguous)
        ext = _rvar_extent(rv)
        if ext is None or ext < VECTOR:
            return False
        if outer is None:
            chunked = _parallel_chunks(s, f, d, rv, ext)
            if chunked:
                return chunked
        parts = _vector_partials(s, f, rv.name, ext, pure[-1] if pure else None)
        if outer is not None and worth_parallel(f):
            s[f].parallel(outer)
        return [f, *parts]
    if not pure or extents[-1] < VECTOR:
        return False
    last = pure[-1]
    tile = COLUMNS if extents[-1] >= COLUMNS else VECTOR * (extents[-1] // VECTOR)
    lo, li = s[f].split(last, tile, names=(f"{last}.o", f"{last}.i"))
    rvars = [n for n in s[f].loop_names() if n not in pure and n not in (lo.name, li.name)]
    s[f].reorder(*pure[:-1], lo.name, *rvars, li.name).vectorize(li.name, VECTOR)
    if tile > VECTOR:
        s[f].unroll(f"{li.name}.o")
    if worth_parallel(f):
        s[f].parallel(outer if outer != last else lo.name)
    return [f]
