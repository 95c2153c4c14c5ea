"""The schedule a GPU target uses when none is given. Every Func computed at root gets its
pure loops tiled onto blocks and threads (16 x 16 threads over the last two dimensions, 256
along a single one, the dimensions before those fused onto blockIdx.z; a block loop longer
than y or z hold, 65535, goes on x instead), its reduction loops
left inside each thread. A *matrix product* (a sum over one reduction variable of a read
along its last axis times a read along another, as matmul makes) instead takes
``bench/gpu_workloads.py``'s GEMM schedule: 64 x 64 tiles of C per block, 4 x 4 of them
in each thread's registers, both operands' k slices of 16 staged in shared memory
(10-13 TFLOP/s on an H200). An intermediate *row reduction* (a max or a sum along the last
axis of what it reads, as softmax and layernorm make) instead runs one block per row:
256 threads read the row in coalesced strides into partial results in shared memory
(``rfactor``), and one thread folds them; a Func that reads such reductions at its own
row (softmax's output) takes them into its kernel, a block per row. A reduction into one
value is split into 4096 strided partials on as many threads before one thread folds
them. Inline Funcs stay inline.

Example: ``s = gpu_default_schedule([C])`` for ``C[i, j] = sl.sum(A[i, k] * B[k, j])``
gives ``s[C].tile('i', 'j', 64, 64)``, registers and shared k slices as above.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo.func import definition_exprs
from ..errors import SchedlangError
from .schedule import Schedule

TILE_2D = (16, 16)
TILE_1D = 256
ROW_THREADS = 256
MATMUL_BLOCK, MATMUL_REGISTERS, MATMUL_K = (64, 64), (4, 4), 16
ONE_VALUE_PARTIALS = 4096
GRID_YZ = 65535     # blocks a grid holds along y and z (along x: 2**31 - 1)


def gpu_default_schedule(outputs):
    """A correct GPU schedule for ``outputs`` (a list of Funcs) that keeps the GPU busy."""
    s = Schedule(*outputs)
    s, fused = _row_kernels(s, outputs)
    for f in list(s.funcs):
        if s.fsched[id(f)].compute != ("root",) or id(f) in fused:
            continue
        for index in range(len(s.stage_schedules(f))):
            st = s.stage_schedules(f)[index]
            pure = [d.name for d in st.dims if not d.is_rvar]
            rvars = [d.name for d in st.dims if d.is_rvar]
            d = s.definitions(f)[index]
            # (a reduction into one value has no row loop to put on the grid)
            if f not in outputs and pure and len(rvars) == 1 \
                    and len(st.dims) == len(pure) + 1 and _reads_along_last_axis(d, rvars[0]):
                _row_reduction(s, f, _stage(s, f, index), pure, rvars[0])
                continue
            # (one batch loop at most: the k slices of operands staged at a fused batch
            # loop would span every batch its index splits into)
            operands = _matmul_operands(d, pure, rvars) if 2 <= len(pure) <= 3 else None
            if operands is not None:
                mark = len(s.trace)
                try:
                    _matmul_tiles(s, f, _stage(s, f, index), pure, rvars[0], operands,
                                  _extents(f, len(pure)))
                    continue
                except SchedlangError:
                    s = s.copy(mark)    # (an operand inlined, say): plain tiles instead
            if pure:
                _tiles(_stage(s, f, index), pure, rvars, _extents(f, len(pure)))
            elif len(rvars) == 1 and len(s.stage_schedules(f)) == 1:
                mark = len(s.trace)
                try:
                    _partials_of_one_value(s, f, rvars[0])
                except SchedlangError:
                    s = s.copy(mark)    # one thread runs it
            # else: a reduction into one value, which one thread runs
    return s


def _partials_of_one_value(s, f, rvar):
    """A reduction into one value (a whole tensor's sum): ``ONE_VALUE_PARTIALS`` threads
    each reduce a coalesced stride of it (``rfactor``), in blocks of 256, before one
    thread folds their partials, rather than one thread doing it all."""
    _, ri = s[f].split(rvar, ONE_VALUE_PARTIALS)
    partial = s[f].rfactor(ri)
    s[partial].compute_root()
    for pst in s.stage_schedules(partial):
        _stage(s, partial, pst.index).gpu_tile(ri, TILE_1D)


def _row_kernels(s, outputs):
    """Give a Func that reads row reductions of its own rows (softmax's output reads the
    row's max and sum) one kernel for the lot: a block per row computes each reduction's
    partials with all its threads, folds them, then writes the row. The row is read from
    memory once (again from cache), in one launch. Returns (schedule, ids scheduled)."""
    done = set()
    for o in list(s.funcs):
        stages = s.stage_schedules(o)
        if s.fsched[id(o)].compute != ("root",) or len(stages) != 1 or \
                any(d.is_rvar for d in stages[0].dims):
            continue
        pure = [d.name for d in stages[0].dims]
        reductions = _row_reductions_read(s, o, pure, outputs)
        if not 2 <= len(pure) <= 4 or not reductions:
            continue
        mark = len(s.trace)
        try:
            rows, (last,) = pure[:-1], pure[-1:]
            jo, ji = s[o].split(last, ROW_THREADS)
            s[o].reorder(*rows, ji, jo)
            _on_grid(s[o], list(reversed(rows)), _extents(o, len(pure))[-2::-1])
            s[o].gpu_threads(ji)
            pending = list(reductions)
            while pending:
                # a reduction read by another one goes in after it (log_softmax's max is
                # read by its sum); one read outside the row kernel cannot go in at all
                r = next((r for r in pending if f"{o.name}.{rows[-1]}" in
                          s.legal_locations(r)), None)
                if r is None:
                    raise SchedlangError("a row reduction is read outside the row kernel")
                pending.remove(r)
                rvar = next(d.name for d in s.stage_schedules(r)[0].dims if d.is_rvar)
                _, ri = s[r].split(rvar, ROW_THREADS)
                partial = s[r].rfactor(ri)
                s[r].compute_at(o, rows[-1])
                s[partial].compute_at(o, rows[-1])
                for pst in s.stage_schedules(partial):
                    _stage(s, partial, pst.index).gpu_threads(ri)
            done |= {id(o)} | {id(r) for r in reductions}
        except SchedlangError:
            s = s.copy(mark)        # read elsewhere too, say: separate kernels
    return s, done


def _row_reductions_read(s, o, pure, outputs):
    """The row reductions ``o`` reads at exactly its own row (``r[i0]`` in ``o[i0, j]``,
    directly or through inline Funcs): root intermediates of one stage and one reduction
    variable, along the last axis."""
    found = []

    def visit(expr, env, depth):
        def fn(n):
            if not isinstance(n, E.FuncRef):
                return
            r = n.func
            args = [E.substitute(a, env) if env else a for a in n.args]
            sched = s.fsched.get(id(r))
            if sched is None or r in outputs or any(r is x for x in found):
                return
            if sched.compute == ("inline",) and depth < 8 and len(r.definitions) == 1:
                d = r.definitions[0]
                visit(d.value, {v.name: a for v, a in zip(d.args, args)}, depth + 1)
                return
            if sched.compute != ("root",) or len(args) != len(pure) - 1 or not all(
                    isinstance(a, E.Var) and a.name == v for a, v in zip(args, pure)):
                return
            st = s.stage_schedules(r)
            rvars = [d.name for d in st[0].dims if d.is_rvar]
            if len(st) == 1 and len(rvars) == 1 and \
                    _reads_along_last_axis(s.definitions(r)[0], rvars[0]):
                found.append(r)
        E.walk_expr(expr, fn)
    for e in definition_exprs(s.definitions(o)[0]):
        visit(e, {}, 0)
    return found


def _stage(s, f, index):
    return s[f] if index == 0 else s[f].update(index - 1)


def _extents(f, n):
    """``f``'s size along each of its ``n`` dimensions, None where it is not known when
    compiling (a Func with no shape= takes its sizes from bounds inference; an update
    stage may have fewer pure loops than the Func has dimensions)."""
    if f.shape is None or len(f.shape) != n:
        return [None] * n
    return [x.value if isinstance(x, E.Const) else None for x in f.shape]


def _blocks(extent, tile):
    return None if extent is None else -(-extent // tile)


def _product(extents):
    out = 1
    for x in extents:
        if x is None:
            return None
        out *= x
    return out


def _on_grid(stage, loops, extents):
    """``stage.gpu_blocks(*loops)`` (the first on x), but the longest loop on x when one
    has more blocks than the grid's y or z holds (a softmax over 70000 rows of 8, say):
    the device refuses such a launch, and x holds 2**31 - 1."""
    loops, extents = list(loops), list(extents)
    big = [n for n, x in enumerate(extents) if n and x is not None and x > GRID_YZ]
    if big:
        n = max(big, key=lambda n: extents[n])
        loops[0], loops[n] = loops[n], loops[0]
    stage.gpu_blocks(*loops)


def _matmul_operands(d, pure, rvars):
    """The two Funcs a matrix product ``sum(A[.., i, k] * B[.., k, j])`` reads, exactly so
    indexed (``i, j`` the stage's last two pure variables, ``k`` its reduction variable;
    a k slice of each then is a small tile), or None when ``d`` is not one."""
    if len(rvars) != 1:
        return None
    k, (i, j) = rvars[0], pure[-2:]
    found = {"A": set(), "B": set(), "other": set()}

    def named(e, name):
        return isinstance(e, E.Var) and e.name == name

    def fn(n):
        if not isinstance(n, E.FuncRef):
            return
        args = n.args
        if len(args) >= 2 and named(args[-1], k) and named(args[-2], i):
            found["A"].add(n.func)
        elif len(args) >= 2 and named(args[-2], k) and named(args[-1], j):
            found["B"].add(n.func)
        elif any(k in E.expr_vars(a) for a in args):
            found["other"].add(n.func)
    for e in definition_exprs(d):
        E.walk_expr(e, fn)
    a, b = found["A"], found["B"]
    if len(a) == 1 and len(b) == 1 and a != b and not found["other"]:
        return next(iter(a)), next(iter(b))
    return None


def _matmul_tiles(s, f, stage, pure, rvar, operands, extents):
    """bench/gpu_workloads.py's GEMM schedule on a matrix-product stage."""
    outer = pure[:-2]
    y, x = pure[-2:]
    yo, xo, yi, xi = stage.tile(y, x, *MATMUL_BLOCK)
    ty, ry = stage.split(yi, MATMUL_REGISTERS[0])
    tx, rx = stage.split(xi, MATMUL_REGISTERS[1])
    ko, ki = stage.split(rvar, MATMUL_K)
    stage.reorder(*(outer + [yo, xo, ko, ty, tx, ki, ry, rx]))
    _on_grid(stage, [xo, yo, *outer], [_blocks(extents[-1], MATMUL_BLOCK[1]),
                                         _blocks(extents[-2], MATMUL_BLOCK[0]), *extents[:-2]])
    stage.gpu_threads(tx, ty)
    stage.unroll(ry).unroll(rx)
    threads = (MATMUL_BLOCK[0] // MATMUL_REGISTERS[0], MATMUL_BLOCK[1] // MATMUL_REGISTERS[1])
    for g in operands:
        staged = s[g].cache_read(f, memory="shared")
        s[staged].compute_at(f, ko)
        names = [dim.name for dim in s[staged].dims]
        rows, cols = names[-2:]
        co, ci = s[staged].split(cols, threads[1])
        ro, ri = s[staged].split(rows, threads[0])
        s[staged].reorder(*(names[:-2] + [ri, ci, ro, co]))
        s[staged].gpu_threads(ci, ri)


def _tiles(stage, pure, rvars, extents):
    if len(pure) == 1:
        stage.gpu_tile(pure[0], TILE_1D)
        return
    outer = pure[:-2]
    while len(outer) > 1:
        outer[0:2] = [stage.fuse(outer[0], outer[1])]
    y, x = pure[-2:]
    yo, xo, yi, xi = stage.tile(y, x, *TILE_2D)
    stage.reorder(*(([outer[0]] if outer else []) + [yo, xo, yi, xi] + rvars))
    blocks = [_blocks(extents[-1], TILE_2D[1]), _blocks(extents[-2], TILE_2D[0])]
    _on_grid(stage, [xo, yo, *outer], blocks + [_product(extents[:-2])] * len(outer))
    stage.gpu_threads(xi, yi)


def _row_reduction(s, f, stage, pure, rvar):
    """One block per row (its pure loops on the grid), its threads over strided partials."""
    ro, ri = stage.split(rvar, ROW_THREADS)
    partial = stage.rfactor(ri)
    # the row's own loops on the grid, the leading ones fused past three: the partials
    # computed at a fused loop would span every row its index splits into (bounds
    # inference cannot see that a // and a % of one value name one row), too many for
    # shared memory
    rows, extents = list(pure), _extents(f, len(pure))
    while len(rows) > 3:
        rows[0:2] = [stage.fuse(rows[0], rows[1])]
        extents[0:2] = [_product(extents[0:2])]
    _on_grid(stage, list(reversed(rows)), extents[::-1])
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
