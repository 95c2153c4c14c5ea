"""Seed schedules derived from the algorithm's structure (never from Func names).

Beam search from the default schedule alone cannot reach a register-tiled matmul in a
minute: it needs a dozen coordinated directives. So the search starts from templates
that recognise the shape of a stage and write the schedule an expert would:

- ``register_tile``: a reduction whose body reads one operand along the innermost pure
  Var ``v`` but not along another pure Var ``u``, and another operand along ``u`` but not
  ``v`` (matmul: ``A[i, k] * B[k, j]``; conv: ``X[.., x + r] * W[k, ..]``). A tile of
  ``tu x tv`` results is accumulated in vector registers (``cache_write``), ``u`` unrolled,
  ``v`` vectorized, the reduction loops outside the tile; the ``v`` operand is packed into a
  contiguous panel (``cache_read``) when it is a plain matrix read.
- ``consumer_register_tile``: the same tile for a reduction whose only reader is an output
  that reads it as a transpose (NHWC conv sums read out as NCHW): the reduction is computed
  per ``v`` tile of that output, so no whole intermediate is stored and copied.
- ``stencil_tile``: a pure output that reads pure producers at several offsets (blur):
  tiles of the output, the producers computed per tile, both vectorized.
- ``rows``: an output whose producers share its outermost Var (softmax): everything
  computed per row, row reductions split into vector lanes with ``rfactor``.
- ``flat``: every stored Func parallel over its outermost loop and vectorized innermost.

Each template comes in a few parameter variants (tile sizes fitting the register file of
this CPU). Example: ``for s in seed_schedules([C], extents): ...``.
"""
from __future__ import annotations

import contextvars

from ..algo import expr as E
from ..errors import ScheduleError
from ..schedule.schedule import Schedule
from ..targets.host_cpu import target_features, vector_lanes
from .space import extents_of, reads

# Register-tile shapes (rows unrolled, vectors per row) by register file: 32 vector
# registers with AVX-512 (keep 4 for operands), 16 with AVX2 / SSE.
TILES_32_REGS = [(6, 4), (4, 4), (8, 3), (12, 2), (8, 2), (4, 2)]
TILES_16_REGS = [(6, 2), (4, 3), (3, 4), (4, 2), (12, 1), (8, 1)]
# The packed panel of the vector operand stays within this many bytes (half an L2).
PANEL_BYTES = 512 * 1024
# Tiles (rows unrolled, vectors) for the chunked and per-consumer variants: 16
# accumulators with AVX-512, 8 with 16 registers.
CHUNK_TILES = [(8, 2), (4, 4)]
CHUNK_TILES_16_REGS = [(4, 2), (8, 1)]
STENCIL_TILES = [(16, 1024), (32, 256), (8, 512), (64, 128), (4, 2048)]


# The target the seeds are built for: an ``llvm:<cpu>`` kernel runs on that CPU, whose
# vectors and register file may differ from this machine's (set by ``seed_schedules``).
_TARGET = contextvars.ContextVar("schedlang_template_target", default="llvm")


def vector_width(dtype_bytes=4, features=None):
    """SIMD lanes for elements of ``dtype_bytes`` on the target CPU (AVX-512: 64 bytes, AVX:
    32, else 16). Example: ``vector_width(4)`` is 16 on an AVX-512 machine."""
    return vector_lanes(dtype_bytes, target_features(_TARGET.get()) if features is None
                        else features)


def _register_tiles(features=None):
    feats = target_features(_TARGET.get()) if features is None else features
    return TILES_32_REGS if "+avx512f" in feats else TILES_16_REGS


def _vars_of(ref):
    names = set()
    for a in ref.args:
        E.walk_expr(a, lambda n: names.add(n.name) if isinstance(n, E.Var) else None)
    return names


def _plain_matrix_read(ref):
    return all(isinstance(a, E.Var) for a in ref.args)


def _tile_roles(f, d0, ext):
    """``(u, v, vector operand read)`` for register tiling of Func ``f``, or None."""
    pure = [a.name for a in d0.args]
    if len(pure) < 2:
        return None         # a 0-d or 1-d Func has no pair of loops to tile
    v = pure[-1]
    refs = [r for r in reads(d0) if r.func is not f]
    best = None
    for u in pure[:-1]:
        if (ext.get(u) or 0) < 2:
            continue
        along_v = [r for r in refs if v in _vars_of(r) and u not in _vars_of(r)]
        along_u = [r for r in refs if u in _vars_of(r) and v not in _vars_of(r)]
        # the longest such Var; among equals the inner one (its operand rows are contiguous)
        if along_v and along_u and (best is None or (ext.get(u) or 0) >= (ext.get(best[0]) or 0)):
            best = (u, v, along_v[0])
    return best


def _inline_producers(s, f):
    """Pure Funcs ``f`` reads that are inlined by default (boundary handling, padding)."""
    out = []
    for r in reads(s.definitions(f)[0]):
        g = r.func
        if g is f or not hasattr(g, "definitions") or any(g is x for x in out):
            continue
        if s.func_schedule(g).compute == ("inline",):
            out.append(g)
    return out


def _parallel_first(st, loops, ext, threads):
    """Mark the first loop (of ``loops``, outermost first) long enough to share out."""
    for name in loops:
        n = ext.get(name)
        if n is not None and n >= min(2, threads):
            st.parallel(name)
            return name
    return None


def register_tile(outputs, f_name, tu, vecs, pack, producers_root, threads, chunk=None):
    """The register-tiled schedule of reduction Func ``f_name`` (see the module docstring):
    a ``tu x vecs`` tile of vectors. With ``chunk``, the accumulators cover a whole row of
    ``u`` and the outermost reduction loop runs in chunks of ``chunk`` outside the tiles,
    so that one chunk of the ``v`` operand is reused by every tile of the row from L1 (a
    conv's input channels). Raises ScheduleError when it does not apply.
    Example: ``register_tile([C], "C", 6, 4, True, False, 2)``."""
    s = Schedule(*outputs)
    f = s.lookup(f_name)
    d0 = s.definitions(f)[0]
    ext = extents_of(s)[f.name]
    roles = _tile_roles(f, d0, ext)
    if roles is None or len(d0.reductions) != 1 or len(s.definitions(f)) != 1:
        raise ScheduleError(f"register_tile on {f.name}: not a two-operand reduction")
    u, v, vec_read = roles
    vw = vector_width(f.dtype.bytes)
    ext_v, ext_u = ext.get(v) or 0, ext.get(u) or 0
    tv = vw * vecs
    if ext_v < vw or ext_u < 2:
        raise ScheduleError(f"register_tile on {f.name}: loops too short")
    while tv > ext_v and tv > vw:
        tv -= vw
    tu = min(tu, ext_u)
    rvars = [rv.name for rv in d0.rvars]
    red_extent = 1
    for rv in rvars:
        red_extent *= ext.get(rv) or 1
    pack = pack and _plain_matrix_read(vec_read) and not hasattr(vec_read.func, "definitions")
    nc = tv
    if pack:
        while nc * 2 <= ext_v and red_extent * nc * 2 * f.dtype.bytes <= PANEL_BYTES:
            nc *= 2
    panel = pack and nc < ext_v
    if chunk is not None:
        if pack or (ext.get(rvars[0]) or 0) <= chunk or (ext.get(rvars[0]) or 0) % chunk:
            raise ScheduleError(f"register_tile on {f.name}: no reduction chunks of {chunk}")
        return _chunked_register_tile(s, f, d0, (u, v, tu, tv, vw), rvars, chunk,
                                      producers_root, threads)
    producers = _inline_producers(s, f)
    acc = s[f].cache_write("local", name=f"{f.name}_acc")
    st = s[f]      # cache_write gave f a new stage (the copy out of the accumulator)
    order_head = [a.name for a in d0.args if a.name not in (u, v)]
    if panel:
        st.split(v, nc, names=(f"{v}.panel", f"{v}.r"))
        st.split(f"{v}.r", tv, names=(f"{v}.tile", f"{v}.vec"))
        order_head.append(f"{v}.panel")
    else:
        st.split(v, tv, names=(f"{v}.tile", f"{v}.vec"))
    st.split(u, tu, names=(f"{u}.tile", f"{u}.reg"))
    order = order_head + [f"{u}.tile", f"{v}.tile", f"{u}.reg", f"{v}.vec"]
    st.reorder(*order).vectorize(f"{v}.vec", vw)
    loop_ext = extents_of(s)[st.name]
    _parallel_first(st, order, loop_ext, threads)
    s[acc].compute_at(f, f"{v}.tile")
    s[acc].reorder(*(rvars + [u, v])).vectorize(v, vw).unroll(u)
    if tv > vw:
        s[acc].unroll(f"{v}.o")
    if pack:
        copy = s[vec_read.func].cache_read(acc, memory="global", name=f"{vec_read.func.name}_panel")
        where = f"{v}.panel" if panel else order[0]
        s[copy].compute_at(f, where)
        s[copy].vectorize(s[copy].loop_names()[-1], vw)
    return _place_the_rest(s, f, producers, producers_root, threads)


def _chunked_register_tile(s, f, d0, tile, rvars, chunk, producers_root, threads):
    """``register_tile`` with ``chunk``: the accumulator Func is computed per ``v`` tile
    over all of ``u``; inside it the loops are (reduction chunk, ``u`` tile, rest of the
    reduction, ``u`` unrolled, ``v`` vectorized)."""
    u, v, tu, tv, vw = tile
    ext_u = extents_of(s)[f.name].get(u) or 0
    tu = max(d for d in range(1, tu + 1) if ext_u % d == 0)   # whole tiles, no guards
    producers = _inline_producers(s, f)
    acc = s[f].cache_write("local", name=f"{f.name}_acc")
    st = s[f]
    st.split(v, tv, names=(f"{v}.tile", f"{v}.vec"))
    order = [a.name for a in d0.args if a.name not in (u, v)] + [f"{v}.tile", u, f"{v}.vec"]
    st.reorder(*order).vectorize(f"{v}.vec", vw)
    _parallel_first(st, order, extents_of(s)[st.name], threads)
    s[acc].compute_at(f, f"{v}.tile")
    r0 = rvars[0]
    s[acc].split(r0, chunk, names=(f"{r0}.chunk", f"{r0}.in"))
    s[acc].split(u, tu, names=(f"{u}.tile", f"{u}.reg"))
    s[acc].reorder(f"{r0}.chunk", f"{u}.tile", f"{r0}.in", *rvars[1:], f"{u}.reg", v)
    s[acc].vectorize(v, vw).unroll(f"{u}.reg")
    if tv > vw:
        s[acc].unroll(f"{v}.o")
    return _place_the_rest(s, f, producers, producers_root, threads)


def _permuting_consumer(s, f):
    """``(o, names)`` when the only reader of ``f`` is a pure output ``o`` that reads it
    once with plain Vars (a transpose, e.g. NCHW from NHWC sums): ``names`` maps each pure
    Var of ``f`` to the Var of ``o`` at that position. Otherwise None."""
    readers = [(g, r) for g in s.funcs for d in s.definitions(g) for r in reads(d)
               if r.func is f and g is not f]
    if len(readers) != 1:
        return None
    o, ref = readers[0]
    d0 = s.definitions(o)[0]
    o_vars = [a.name for a in d0.args]
    if not any(o is x for x in s.outputs) or len(s.definitions(o)) != 1 or d0.reductions \
            or not _plain_matrix_read(ref) or sorted(a.name for a in ref.args) != sorted(o_vars):
        return None
    return o, {a.name: b.name for a, b in zip(s.definitions(f)[0].args, ref.args)}


def consumer_register_tile(outputs, f_name, tu, vecs, chunk, producers_root, threads):
    """The register tile of reduction ``f_name`` computed inside its pure consumer: the
    output that reads ``f`` as a permutation (NCHW out of NHWC conv sums) is split into
    tiles of ``v``, and ``f`` is computed per tile, so its results go from registers to
    the output through a small, cache-resident buffer instead of a whole intermediate.
    Inside ``f``: reduction chunks of ``chunk`` (or none), ``u`` tiles of ``tu`` (whole
    tiles), the rest of the reduction, ``u`` unrolled, ``v`` vectorized in ``vecs``
    vectors. Raises ScheduleError when it does not apply.
    Example: ``consumer_register_tile([conv], "conv_nhwc", 8, 2, 32, True, 2)``."""
    s = Schedule(*outputs)
    f = s.lookup(f_name)
    d0 = s.definitions(f)[0]
    extents = extents_of(s)
    roles = _tile_roles(f, d0, extents[f.name])
    found = _permuting_consumer(s, f)
    if roles is None or found is None or len(d0.reductions) != 1:
        raise ScheduleError(f"consumer_register_tile on {f.name}: no permuting consumer")
    u, v, _ = roles
    o, names = found
    ext = extents[o.name]
    vw = vector_width(f.dtype.bytes)
    ov, ou = names[v], names[u]
    ext_v, ext_u = ext.get(ov) or 0, ext.get(ou) or 0
    tv = vw * vecs
    if ext_v < tv or ext_v % tv or ext_u < 2:
        raise ScheduleError(f"consumer_register_tile on {f.name}: {v} is not whole tiles")
    rvars = [rv.name for rv in d0.rvars]
    r0_ext = extents[f.name].get(rvars[0]) or 0
    if chunk is not None and (r0_ext <= chunk or r0_ext % chunk):
        raise ScheduleError(f"consumer_register_tile on {f.name}: no chunks of {chunk}")
    producers = _inline_producers(s, f)
    st = s[o]
    st.split(ov, tv, names=(f"{ov}.tile", f"{ov}.in"))
    order = [n for n in (a.name for a in s.definitions(o)[0].args) if n not in (ov, ou)]
    order += [f"{ov}.tile", f"{ov}.in", ou]
    st.reorder(*order)
    # the output's rows are short (a conv's width): the widest vector that divides them
    width = next((w for w in (vw, vw // 2) if w and ext_u % w == 0), vw)
    if ext_u >= width:
        st.vectorize(ou, width)
    _parallel_first(st, order, extents_of(s)[st.name], threads)
    s[f].compute_at(o, f"{ov}.tile")
    tu = max(d for d in range(1, min(tu, ext_u) + 1) if ext_u % d == 0)
    inner = list(rvars)
    if chunk is not None:
        s[f].split(rvars[0], chunk, names=(f"{rvars[0]}.chunk", f"{rvars[0]}.in"))
        inner = [f"{rvars[0]}.in"] + rvars[1:]
    s[f].split(u, tu, names=(f"{u}.tile", f"{u}.reg"))
    head = [f"{rvars[0]}.chunk"] if chunk is not None else []
    s[f].reorder(*(head + [f"{u}.tile"] + inner + [f"{u}.reg", v]))
    s[f].vectorize(v, vw).unroll(f"{u}.reg")
    if tv > vw:
        s[f].unroll(f"{v}.o")
    return _place_the_rest(s, o, producers, producers_root, threads)


def _place_the_rest(s, f, producers, producers_root, threads):
    """After register-tiling ``f``: its inlined producers stored once (``producers_root``),
    and outputs other than ``f`` (e.g. the NCHW copy of an NHWC conv) parallel and
    vectorized. Returns ``s``."""
    if producers_root:
        for g in producers:
            _root_vectorized(s, g, threads)
    for o in s.outputs:
        if o is not f:
            _flat_stage(s, o, extents_of(s), threads)
    return s


def _root_vectorized(s, g, threads):
    st = s[g].compute_root()
    pure = [a.name for a in s.definitions(g)[0].args]
    vw = vector_width(g.dtype.bytes)
    ext = extents_of(s).get(st.name, {})
    if pure and (ext.get(pure[-1]) is None or ext.get(pure[-1]) >= vw):
        st.vectorize(pure[-1], vw)
    if len(pure) > 1:
        _parallel_first(st, pure[:-1], ext, threads)


def stencil_tile(outputs, f_name, ty, tx, producers, threads):
    """Tiles of pure output ``f_name`` with its pure producers computed per tile
    (``producers="tile"``) or once in full (``"root"``). Raises ScheduleError when it does
    not apply. Example: ``stencil_tile([blur_y], "blur_y", 16, 1024, "tile", 2)``."""
    s = Schedule(*outputs)
    f = s.lookup(f_name)
    d0 = s.definitions(f)[0]
    pure = [a.name for a in d0.args]
    if d0.reductions or len(pure) < 2:
        raise ScheduleError(f"stencil_tile on {f.name}: needs a pure Func of 2+ dimensions")
    ext = extents_of(s)[f.name]
    y, x = pure[-2], pure[-1]
    ty, tx = min(ty, ext.get(y) or ty), min(tx, ext.get(x) or tx)
    vw = vector_width(f.dtype.bytes)
    st = s[f]
    st.tile(y, x, ty, tx)
    if tx >= vw:
        st.vectorize(f"{x}.i", vw)
    _parallel_first(st, pure[:-2] + [f"{y}.o"], extents_of(s)[st.name], threads)
    prods = [g for g in s.funcs if g is not f and s.func_schedule(g).compute == ("inline",)
             and len(s.definitions(g)) == 1 and not s.definitions(g)[0].reductions]
    if not prods:
        raise ScheduleError(f"stencil_tile on {f.name}: no producers to place")
    for g in prods:
        if producers == "root":
            _root_vectorized(s, g, threads)
        else:
            s[g].compute_at(f, f"{x}.o")
            gp = [a.name for a in s.definitions(g)[0].args]
            if tx >= vw:
                s[g].vectorize(gp[-1], vw)
    return s


def rows(outputs, f_name, split_reductions, threads):
    """Every Func of the pipeline computed per iteration of the output's outermost loop
    (softmax-like row pipelines); with ``split_reductions``, row reductions accumulate in
    vector lanes through rfactor. Raises ScheduleError when it does not apply.
    Example: ``rows([softmax], "softmax", True, 2)``."""
    s = Schedule(*outputs)
    f = s.lookup(f_name)
    pure = [a.name for a in s.definitions(f)[0].args]
    if len(pure) < 2:
        raise ScheduleError(f"rows on {f.name}: needs 2+ dimensions")
    row, col = pure[0], pure[-1]
    vw = vector_width(f.dtype.bytes)
    ext = extents_of(s)
    st = s[f]
    _parallel_first(st, [row], ext[st.name], threads)
    if (ext[st.name].get(col) or vw) >= vw:
        st.vectorize(col, vw)
    others = [g for g in s.funcs if g is not f]
    uses = {id(g): 0 for g in others}
    for g in s.funcs:
        for d in s.definitions(g):
            for r in reads(d):
                if id(r.func) in uses:
                    uses[id(r.func)] += 1
    placed = 0
    for g in others:
        d0 = s.definitions(g)[0]
        inline = s.func_schedule(g).compute == ("inline",)
        if inline and uses[id(g)] < 2:
            continue
        s[g].compute_at(f, row)
        placed += 1
        gpure = [a.name for a in d0.args]
        if len(d0.reductions) == 1 and split_reductions and d0.reductions[0].op in (
                "sum", "maximum", "minimum", "product") and len(d0.rvars) == 1:
            rv = d0.rvars[0].name
            s[g].split(rv, vw, names=(f"{rv}.o", f"{rv}.i"))
            part = s[g].rfactor(f"{rv}.i", name=f"{g.name}_lanes")
            s[part].compute_at(f, row).reorder(f"{rv}.o", f"{rv}.i").vectorize(f"{rv}.i")
        elif len(gpure) > 1 and not d0.reductions:
            s[g].vectorize(gpure[-1], vw)
    if not placed:
        raise ScheduleError(f"rows on {f.name}: no producer to place per row")
    return s


def flat(outputs, threads):
    """Every stored Func parallel over its outermost pure loop and vectorized along its
    innermost pure loop (when that loop is innermost). Example: ``flat([f], 2)``."""
    s = Schedule(*outputs)
    ext = extents_of(s)
    changed = False
    for g in s.funcs:
        if s.func_schedule(g).compute != ("inline",):
            changed |= _flat_stage(s, g, ext, threads)
    if not changed:
        raise ScheduleError("flat: nothing to parallelize or vectorize")
    return s


def _flat_stage(s, g, ext, threads):
    """Stored Func ``g``: parallel over its outermost pure loop of extent > 1, vectorized
    along its innermost pure loop when that loop is innermost. True when it changed
    anything."""
    st = s[g]
    pure = [d.name for d in st.dims if not d.is_rvar]
    if not pure:
        return False
    changed = False
    vw = vector_width(g.dtype.bytes)
    if st.dims[-1].name == pure[-1] and (ext[st.name].get(pure[-1]) or 0) >= vw:
        st.vectorize(pure[-1], vw)
        changed = True
    if len(pure) > 1 or st.dims[-1].is_rvar:
        # the outermost loop long enough to share (a batch of one is skipped)
        outer = pure[:-1] if len(pure) > 1 else pure
        changed |= _parallel_first(st, outer, ext[st.name], threads) is not None
    return changed


def seed_schedules(outputs, threads, target="llvm"):
    """``[(template name, Schedule)]``: every template variant that applies to the pipeline
    ending in ``outputs``, best guesses first, sized for ``target``'s vectors and registers.
    Example: ``seed_schedules([C], 2)``."""
    token = _TARGET.set(target)
    try:
        return _seed_schedules(outputs, threads)
    finally:
        _TARGET.reset(token)


def _seed_schedules(outputs, threads):
    base = Schedule(*outputs)
    ext = extents_of(base)
    seeds = []

    def attempt(name, fn, *args):
        try:
            seeds.append((name, fn(*args)))
        except ScheduleError:
            pass
    for f in base.funcs:
        d0 = base.definitions(f)[0]
        if len(d0.reductions) == 1 and len(base.definitions(f)) == 1 and f.dtype.is_float and \
                _tile_roles(f, d0, ext[f.name]) is not None and base.func_schedule(f).compute \
                == ("root",):
            has_producers = bool(_inline_producers(base, f))
            for n, (tu, vecs) in enumerate(_register_tiles()):
                for pack in (True, False):
                    for prod_root in ((True, False) if has_producers else (False,)):
                        if n >= 3 and (not pack or not prod_root):
                            continue
                        attempt(f"register_tile({f.name}, {tu}x{vecs}, pack={pack}, "
                                f"producers_root={prod_root})", register_tile, outputs, f.name,
                                tu, vecs, pack, prod_root, threads)
            chunk_tiles = CHUNK_TILES if _register_tiles() is TILES_32_REGS \
                else CHUNK_TILES_16_REGS
            # computed per tile of a consumer that transposes it (an NHWC conv read as NCHW)
            if _permuting_consumer(base, f) is not None:
                for tu, vecs in chunk_tiles:
                    for chunk in (32, 16, None):
                        attempt(f"consumer_register_tile({f.name}, {tu}x{vecs}, "
                                f"chunk={chunk})", consumer_register_tile, outputs, f.name,
                                tu, vecs, chunk, True, threads)
            # reduction chunks (a conv's input channels) for the operands that stay unpacked
            for tu, vecs in chunk_tiles:
                for chunk in (16, 32):
                    attempt(f"register_tile({f.name}, {tu}x{vecs}, chunk={chunk})",
                            register_tile, outputs, f.name, tu, vecs, False, True, threads,
                            chunk)
    for o in base.outputs:
        for ty, tx in STENCIL_TILES:
            for where in ("tile", "root"):
                if where == "root" and (ty, tx) != STENCIL_TILES[0]:
                    continue
                attempt(f"stencil_tile({o.name}, {ty}x{tx}, {where})", stencil_tile, outputs,
                        o.name, ty, tx, where, threads)
        for split in (True, False):
            attempt(f"rows({o.name}, rfactor={split})", rows, outputs, o.name, split, threads)
    attempt("flat", flat, outputs, threads)
    return _distinct(seeds)


def _distinct(seeds):
    seen, out = set(), []
    for name, s in seeds:
        k = s.to_json()
        if k not in seen:
            seen.add(k)
            out.append((name, s))
    return out


__all__ = ["seed_schedules", "register_tile", "consumer_register_tile", "stencil_tile", "rows",
           "flat", "vector_width"]
