"""The schedule a GPU target uses when none is given. Every Func computed at root gets its
pure loops tiled onto blocks and threads (16 x 16 threads over the last two dimensions, 256
along a single one, the dimensions before those fused onto blockIdx.z), its reduction loops
left inside each thread. An intermediate *row reduction* (a max or a sum along the last
axis of what it reads, as softmax and layernorm make) instead runs one block per row:
256 threads read the row in coalesced strides into partial results in shared memory
(``rfactor``), and one thread folds them. Inline Funcs stay inline.

Example: ``s = gpu_default_schedule([C])`` for ``C[i, j] = sl.sum(A[i, k] * B[k, j])``
gives ``s[C].gpu_tile('i', 'j', 16, 16)``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo.func import definition_exprs
from .schedule import Schedule

TILE_2D = (16, 16)
TILE_1D = 256
ROW_THREADS = 256


def gpu_default_schedule(outputs):
    """A correct GPU schedule for ``outputs`` (a list of Funcs) that keeps the GPU busy."""
    s = Schedule(*outputs)
    for f in s.funcs:
        if s.fsched[id(f)].compute != ("root",):
            continue
        for st in s.stage_schedules(f):
            stage = s[f] if st.index == 0 else s[f].update(st.index - 1)
            pure = [d.name for d in st.dims if not d.is_rvar]
            rvars = [d.name for d in st.dims if d.is_rvar]
            if f not in outputs and len(rvars) == 1 and len(st.dims) == len(pure) + 1 \
                    and _reads_along_last_axis(s.definitions(f)[st.index], rvars[0]):
                _row_reduction(s, f, stage, pure, rvars[0])
            elif pure:
                _tiles(stage, pure, rvars)
            # else: a reduction into one value, which one thread runs
    return s


def _tiles(stage, pure, rvars):
    if len(pure) == 1:
        stage.gpu_tile(pure[0], TILE_1D)
        return
    outer = pure[:-2]
    while len(outer) > 1:
        outer[0:2] = [stage.fuse(outer[0], outer[1])]
    y, x = pure[-2:]
    yo, xo, yi, xi = stage.tile(y, x, *TILE_2D)
    stage.reorder(*(([outer[0]] if outer else []) + [yo, xo, yi, xi] + rvars))
    stage.gpu_blocks(xo, yo, *outer).gpu_threads(xi, yi)


def _row_reduction(s, f, stage, pure, rvar):
    """One block per row (its pure loops on the grid), its threads over strided partials."""
    ro, ri = stage.split(rvar, ROW_THREADS)
    partial = stage.rfactor(ri)
    # the row's own loops on the grid, the leading ones fused past three: the partials
    # computed at a fused loop would span every row its index splits into (bounds
    # inference cannot see that a // and a % of one value name one row), too many for
    # shared memory
    rows = list(pure)
    while len(rows) > 3:
        rows[0:2] = [stage.fuse(rows[0], rows[1])]
    stage.gpu_blocks(*reversed(rows))
    s[partial].compute_at(f, rows[-1])
    for pst in s.stage_schedules(partial):
        pstage = s[partial] if pst.index == 0 else s[partial].update(pst.index - 1)
        pstage.gpu_threads(ri)


def _reads_along_last_axis(d, rvar):
    """Whether every read that uses ``rvar`` uses it in its last index only (a row
    reduction; a matmul's ``B[k, j]`` is not one)."""
    base = rvar.split(".")[0]
    found = []

    def fn(n):
        if isinstance(n, E.FuncRef):
            uses = [any(v.split(".")[0] == base for v in E.expr_vars(a)) for a in n.args]
            if any(uses):
                found.append(uses[-1] and not any(uses[:-1]))
    for e in definition_exprs(d):
        E.walk_expr(e, fn)
    return bool(found) and all(found)
