"""The fast CPU schedules the frontend gives a 2-D float32 matmul and a float32 conv2d
(the ones `schedlang bench` uses). Matmul: a 6-row tile of the result accumulated in
vector registers (cache_write; 4 registers a row with AVX-512, 2 with AVX2), the right
operand's column panel packed once per panel (cache_read + compute_at), panels in
parallel. A 1x1 conv: the image plane as one fused loop, 4 channels x 64 pixels in
registers (x 16 with AVX2), input pixels copied to panels. Conv2d (groups 1): sums with
output channels innermost, 16 or 32 channels x up to 8 columns in registers (fewer with
AVX2), input channels in passes whose weights fit L1, rows in parallel; other NCHW
convs: 8 channels x 32 columns.
Example: ``gemm_schedule(s, f, True)`` on the Func of ``Tensor(a) @ Tensor(b)``.
"""
from __future__ import annotations

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.targets.host_cpu import l2_cache_bytes, vector_lanes, vector_registers

from .reduction_schedule import fold_partials, worth_parallel
from .tensor import transposing_reads


def _read_at(f, names):
    """The Func / Input that ``f``'s value reads at exactly the Vars ``names``, if any."""
    found = []

    def visit(n):
        if isinstance(n, E.FuncRef) and len(n.args) == len(names) and all(
                isinstance(a, E.Var) and a.name == nm for a, nm in zip(n.args, names)):
            found.append(n.func)
    E.walk_expr(f.definitions[0].value, visit)
    return found[0] if found else None


def gemm_schedule(s, f, is_output):
    """Schedule the float32 / float64 matmul Func ``f`` (``f[..., i, j] = sum(a[..., i, k] *
    b[..., k, j])``, any number of leading batch dims) in ``s``: tiles of 6 rows x 4 vector
    registers (2 where the CPU has 16 registers, not AVX-512's 32) accumulated in
    registers, the right operand copied per column panel (transposed when it is read
    transposed, ``x @ w.T``), and the batch, the panels or the row tiles in parallel,
    whichever come first with enough of them. Returns the Funcs it scheduled, or False
    (leaving ``s`` untouched) when ``f`` does not have that form."""
    d = f.definitions[0]
    if len(d.args) < 2 or len(d.rvars) != 1 or f.dtype not in (sl.float32, sl.float64) \
            or f.shape is None:
        return False
    # a tile is 6 rows x 4 registers with AVX-512's 32 (24 accumulators), 6 rows x 2
    # with 16 (AVX2: 12 accumulators; 4 per row spill, at a third of numpy's speed)
    size = f.dtype.bytes
    lanes = vector_lanes(size)
    wide = vector_registers() >= 32
    regs = 4 if wide else 2
    dims = [int(x.value) for x in f.shape]
    m, n = dims[-2:]
    kk = int(d.rvars[0].rdom.bounds[0][1].value)
    if m < 6 or n < lanes or kk < 1:
        return False
    *batch, i, j = (a.name for a in d.args)
    k = d.rvars[0].name
    src = _read_at(f, batch + [k, j])
    tj = regs * lanes if n >= regs * lanes else lanes * (n // lanes)
    nc = tj
    # the packed panel fills half the L2; a quarter with the AVX2 tile (Zen 3, 2048: 69
    # against 60 GFLOP/s with half)
    while nc * 2 <= n and kk * nc * 2 * size <= l2_cache_bytes() // (2 if wide else 4):
        nc *= 2
    acc = s[f].cache_write("local")
    if not is_output:
        s[f].compute_root()
        # the whole product, as torch computes it: a consumer that reads a slice would
        # leave the region (and so the register tile's extents) unknown until run time.
        # After cache_write, which would give the bound to the per-tile accumulator
        for name, extent in zip(batch + [i, j], dims):
            s[f].bound(name, 0, extent)
    jo, jr = s[f].split(j, nc, names=(f"{j}.panel", f"{j}.r"))
    jt, jv = s[f].split(jr, tj, names=(f"{j}.tile", f"{j}.v"))
    io, ii = s[f].split(i, 6, names=(f"{i}.o", f"{i}.i"))
    s[f].reorder(*batch, jo, io, jt, ii, jv).vectorize(jv, lanes)
    # the outermost loop with work for a few threads: a batch dim, the panels, the rows
    loops = [(b, e) for b, e in zip(batch, dims) if e > 1]
    loops += [(jo, -(-n // nc)), (io, -(-m // 6))]
    s[f].parallel(next((v for v, e in loops if e >= 4), loops[0][0]))
    s[acc].compute_at(f, jt)
    s[acc].reorder(k, i, j).vectorize(j, lanes).unroll(i).unroll(f"{j}.o")
    if src is not None and src.name.startswith("matmul_rhs"):
        # a right operand of its own Func (frontend.nn.matmul), copied per panel
        *_, pk, pj = (a.name for a in src.definitions[0].args)
        s[src].compute_at(f, jo)
        po, pi = s[src].split(pj, lanes, names=(f"{pj}.o", f"{pj}.i"))
        if src.name.startswith("matmul_rhs_t"):
            # read transposed: in tiles of 16 columns, so each of the 16 rows it reads
            # stays in cache while its next 16 values are gathered
            s[src].reorder(po, pk, pi)
        s[src].vectorize(pi)
        return [f, src]
    if src is not None and getattr(src, "shape", None) is not None:
        packed = s[src].cache_read(acc, memory="global")
        s[packed].compute_at(f, jo).vectorize(s[packed].loop_names()[-1], lanes)
    return [f]


def matmul_schedule(s, f, is_output):
    """A matmul's schedule: the register-tiled one (``gemm_schedule``) where it applies,
    else (fewer than 6 rows or one register of columns, or neither float32 nor float64)
    the reduction schedule, rows in parallel: a matrix times a vector reduces each row with
    vector partial sums; a few rows times a matrix keep 128 columns of results in registers
    while the rows of the right operand stream by (v @ m, x[4, :] @ m: 7-13x slower than
    torch before, with no parallel loop and the right operand read down its columns)."""
    done = gemm_schedule(s, f, is_output)
    if done:
        return done
    from .reduction_schedule import reduction_schedule
    return reduction_schedule(s, f, is_output, columns=True)


def _accumulators():
    """Vector registers a register tile may hold as accumulators: 16 of AVX-512's 32, 12
    of AVX2's 16 (the rest hold the operands)."""
    return 16 if vector_registers() >= 32 else 12


def conv_tiles(out_width, out_channels, in_channels, taps=9, shift_tail=False):
    """(channels per register tile, columns per tile, input channels per pass) for the
    channel-vectorized conv: 16 accumulators with AVX-512 (12 with AVX2), a column count
    that divides the output width (no guarded tiles), and a pass's weights (``taps`` =
    kernel area) within about 40 KB so they stay in L1/L2-near while every column tile
    reuses them. With ``shift_tail``, a width no divisor of 4 or more fits takes the
    widest tile the accumulators allow (its last tile shifts back over the one before)."""
    lanes, accs = vector_lanes(4), _accumulators()
    tk = 2 * lanes if out_channels % (2 * lanes) == 0 else lanes
    tx = max(d for d in range(1, accs * lanes // tk + 1) if out_width % d == 0)
    if tx < 4 and out_channels % (4 * lanes) == 0:
        tk, tx = 4 * lanes, max(d for d in range(1, accs // 4 + 1) if out_width % d == 0)
    if shift_tail and tx < 4 <= out_width:
        tx = min(accs * lanes // tk, out_width)
    cc = max(d for d in range(1, in_channels + 1)
             if in_channels % d == 0 and (d == 1 or d * taps * tk * 4 <= 40 * 1024))
    return tk, tx, cc


def _read(f):
    """Every Func and Input ``f``'s definition reads directly, each once."""
    found = {}
    E.walk_expr(f.definitions[0].value,
                lambda n: found.setdefault(id(n.func), n.func) if isinstance(n, E.FuncRef)
                else None)
    return list(found.values())


def funcs_read(f):
    """Every Func (not Input) ``f``'s definition reads directly, each once."""
    return [g for g in _read(f) if hasattr(g, "definitions")]


def _funcs_read(f):
    """The Funcs ``f``'s definition reads, split into (pure ones, reductions)."""
    funcs = funcs_read(f)
    return ([g for g in funcs if not g.definitions[0].rvars],
            [g for g in funcs if g.definitions[0].rvars])


def _inputs_read_along(f, var):
    """The Inputs ``f``'s definition reads directly at an index that depends on the Var
    named ``var``, in a dimension of more than one element (a row broadcast to every row,
    or a one-row operand of a concat, is read at one place by all)."""
    found = {}

    def along(inp, d, a):
        n = inp.shape[d]
        return var in E.expr_vars(a) and not (isinstance(n, E.Const) and n.value <= 1)

    def visit(n):
        if isinstance(n, E.FuncRef) and not hasattr(n.func, "definitions") and any(
                along(n.func, d, a) for d, a in enumerate(n.args)):
            found.setdefault(id(n.func), n.func)
    E.walk_expr(f.definitions[0].value, visit)
    return list(found.values())


def _schedule_nhwc_sums(s, acc, o=None):
    """The register-tiled loops of the NHWC sums Func ``acc[n, y, x, o]`` inside whatever
    loop it is computed at (``o``: the name of its channel loop, when already split)."""
    n, y, x, o_arg = (a.name for a in acc.definitions[0].args)
    o = o or o_arg
    rc, ry, rx = (v.name for v in acc.definitions[0].rvars)
    _, _, wo, ko = (int(v.value) for v in acc.shape)
    c, ky, kx = (int(b[1].value) for b in acc.definitions[0].rvars[0].rdom.bounds)
    tk, tx, cc = conv_tiles(wo, ko, c, ky * kx)
    co, ci = s[acc].split(rc, cc, names=(f"{rc}.o", f"{rc}.i"))
    xo, xi = s[acc].split(x, tx, names=(f"{x}.o", f"{x}.i"))
    lanes = vector_lanes(4)
    s[acc].reorder(co, xo, ci, ry, rx, xi, o).vectorize(o, lanes).unroll(xi)
    if tk > lanes:
        s[acc].unroll(f"{o}.o")
    return tk


def _conv_weights(acc):
    """The transposed-weights Func (``conv2d_weights``, OIHW stored as IHWO) the NHWC sums
    ``acc`` read, in a list (empty when they read the weights some other way)."""
    return [g for g in funcs_read(acc) if g.name.startswith("conv2d_weights")]


def _order_conv_loops(s, f, acc, outer, inner, channel_tiles):
    """Order the loops of conv output ``f`` (``outer`` = its batch, row and output-channel
    tile loops, then ``inner``) and place the transposed weights that its sums ``acc`` read.
    With 4 or more channel tiles, the channel tiles run outermost and in parallel, each
    transposing its own slice of the weights just before using it for every row: at
    512 channels on 7 x 7 the weights are 9.4 MB and re-reading them per row ran 3.4x
    slower. With fewer, the rows run in parallel (the tiles alone would not keep many
    cores busy) and the whole weights are transposed once, 16 output channels at a time
    so each read line is used whole."""
    n, y, ko = outer
    tiles_outermost = channel_tiles >= 4
    if tiles_outermost:
        s[f].reorder(ko, n, y, *inner).parallel(ko)
    else:
        s[f].reorder(n, y, ko, *inner).parallel(y)
    for wt in _conv_weights(acc):
        c, ky, kx, o = (a.name for a in wt.definitions[0].args)
        if tiles_outermost:
            s[wt].compute_at(f, ko)
            s[wt].reorder(c, ky, kx, o).vectorize(o, vector_lanes(4))
        else:
            oo, oi = s[wt].split(o, 16, names=(f"{o}.o", f"{o}.i"))
            s[wt].reorder(oo, c, ky, kx, oi).vectorize(oi).parallel(oo)


def conv_schedule(s, f, is_output):
    """Schedule a conv2d in ``s``: either the NCHW output Func ``f`` that reads the NHWC
    sums of the fast form (``frontend.nn.conv2d`` with groups 1), or a plain NCHW conv
    Func (``f[n, o, y, x] = sum over (c, ky, kx)``). Returns the Funcs it scheduled (truthy),
    or False (leaving ``s`` untouched) when ``f`` has neither form."""
    d = f.definitions[0]
    if f.dtype not in (sl.float32, sl.float64) or f.shape is None or len(d.args) != 4:
        return False
    if not d.rvars and f.dtype == sl.float32:
        pure, reds = _funcs_read(f)
        if not is_output or pure or len(reds) != 1 or len(reds[0].definitions[0].rvars) != 3:
            return False
        acc = reds[0]
        n, o, y, x = (a.name for a in d.args)
        _, o_ext, _, x_ext = (int(v.value) for v in f.shape)
        # one register tile (tk channels x tx columns) is summed over the whole reduction,
        # then written out transposed: 1.07x over sums kept for a row in passes of inputs
        tk, tx, _ = conv_tiles(x_ext, o_ext, 1, shift_tail=True)
        lanes = vector_lanes(4)
        ko, ki = s[f].split(o, tk, names=(f"{o}.o", f"{o}.i"))
        xo, xi = s[f].split(x, tx, names=(f"{x}.o", f"{x}.i"))
        _order_conv_loops(s, f, acc, (n, y, ko), (xo, ki, xi), o_ext // tk)
        s[f].vectorize(xi)
        s[acc].compute_at(f, xo)
        *_, ax, ao = (a.name for a in acc.definitions[0].args)
        s[acc].reorder(*(v.name for v in acc.definitions[0].rvars), ax, ao)
        s[acc].vectorize(ao, lanes).unroll(ax)
        if tk > lanes:
            s[acc].unroll(f"{ao}.o")
        return [f, acc] + _conv_weights(acc)
    if len(d.rvars) != 3:
        return False
    _, o_ext, _, x_ext = (int(v.value) for v in f.shape)
    lanes = vector_lanes(f.dtype.bytes)
    if x_ext < 16:
        return False
    n, o, y, x = (a.name for a in d.args)
    r = [v.name for v in d.rvars]
    # a tile of 8 channels x 2 registers of columns with AVX-512 (16 accumulators), of
    # 6 channels x 2 registers with AVX2 (12)
    wide = vector_registers() >= 32
    tx = 2 * lanes if x_ext >= 2 * lanes else lanes
    acc = s[f].cache_write("local")
    if not is_output:
        s[f].compute_root()
    # 8 channels per tile; a count that 8 does not divide shifts its last tile back over
    # the one before (the tile stays 8 channels, so its accumulators stay registers), and
    # fewer than 8 make one tile (12 channels were 12x slower than torch in the generic
    # schedule)
    to = min(8 if wide else 6, o_ext)
    oo, oi = s[f].split(o, to, names=(f"{o}.o", f"{o}.i"),
                        tail="shift" if o_ext % to else "auto")
    xo, xi = s[f].split(x, tx, names=(f"{x}.o", f"{x}.i"))
    s[f].reorder(n, y, oo, xo, oi, xi).vectorize(xi, lanes).parallel(y)
    s[acc].compute_at(f, xo)
    s[acc].reorder(*r, o, x).vectorize(x, lanes).unroll(o)
    if tx > lanes:
        s[acc].unroll(f"{x}.o")
    return [f]


def conv_nhwc_schedule(s, acc, is_output):
    """Schedule the NHWC sums Func of a conv2d stored on its own (its NCHW reader was
    fused into a consumer, e.g. a bias add or relu): rows in parallel, register tiles.
    Returns the Funcs it scheduled, or False when ``acc`` is not that form."""
    d = acc.definitions[0]
    if acc.dtype != sl.float32 or acc.shape is None or len(d.args) != 4 or len(d.rvars) != 3:
        return False
    n, y = d.args[0].name, d.args[1].name
    o = d.args[3].name
    o_ext = int(acc.shape[3].value)
    tk = conv_tiles(int(acc.shape[2].value), o_ext, 1)[0]
    s[acc].split(o, tk, names=(f"{o}.tile", f"{o}.t"))
    _order_conv_loops(s, acc, acc, (n, y, f"{o}.tile"), (), o_ext // tk)
    _schedule_nhwc_sums(s, acc, f"{o}.t")
    return [acc] + _conv_weights(acc)


def pointwise_tile(out_channels):
    """(output channels, pixels) of a 1x1 conv's register tile: 8 x 32 with AVX-512's 32
    registers (16 accumulators; 1.25x over 4 x 64: half the pixel loads per FMA), 4 x 64
    when 8 does not divide the channels; 6 channels x 2 registers with AVX2's 16 (12
    accumulators, as the GEMM's tile; the last tile of channels is guarded when 6 does not
    divide them: Zen 3, 64 channels, 56 x 56, one thread: 0.86-0.93 against 0.96-1.03 ms
    with 4 x 2, paired runs).
    Example: ``pointwise_tile(64)`` is (8, 32) on an AVX-512 machine."""
    if vector_registers() >= 32:
        regs = 8 if out_channels % 8 == 0 else 4
        return regs, 256 // regs
    return 6, 2 * vector_lanes(4)


def pointwise_block(plane, pixels):
    """Pixels of a 1x1 conv's parallel block (its input panel is copied per block): the
    largest multiple of 64 up to 512 that divides the ``plane`` with AVX-512's tile; with
    AVX2's, the largest multiple of the tile's ``pixels`` up to 256 (Zen 3, 56 x 56: 224
    ran 0.76-0.89 ms against 0.86-0.91 with 448 on one thread, alike on two).
    Example: ``pointwise_block(56 * 56, 16)`` is 224 on an AVX2 machine."""
    if vector_registers() >= 32:
        return max(b for b in range(64, 513, 64) if plane % b == 0)
    return max([b for b in range(pixels, 257, pixels) if plane % b == 0] or [64])


def pointwise_conv_schedule(s, f, is_output):
    """Schedule a 1x1 conv ``f[n, o, y, x] = sum over c of w[o, c] * x[n, c, y, x]``: the
    image plane is one fused loop cut in blocks (in parallel), 8 output channels x 32
    pixels (or 4 x 64) accumulate in registers over all input channels, and each block
    of the input's pixels is first copied to a contiguous panel (its rows are a whole
    plane apart, each on another page). Returns the Funcs it scheduled, or False when
    ``f`` is not that form."""
    d = f.definitions[0]
    if f.dtype != sl.float32 or f.shape is None or len(d.args) != 4 or len(d.rvars) != 1:
        return False
    _, o_ext, h_ext, w_ext = (int(v.value) for v in f.shape)
    plane = h_ext * w_ext
    if o_ext % 4 or plane % 64:
        return False
    n, o, y, x = (a.name for a in d.args)
    r = d.rvars[0].name
    regs, pixels = pointwise_tile(o_ext)
    block = pointwise_block(plane, pixels)
    if not is_output:
        s[f].compute_root()
    p = s[f].fuse(y, x, f"{y}_{x}")
    pb, pi = s[f].split(p, block, names=(f"{p}.block", f"{p}.in"))
    lanes = vector_lanes(4)
    pt, pv = s[f].split(pi, pixels, names=(f"{p}.tile", f"{p}.vec"))
    ot, oreg = s[f].split(o, regs, names=(f"{o}.tile", f"{o}.reg"))
    s[f].reorder(n, pb, ot, pt, r, oreg, pv)
    s[f].parallel(pb).vectorize(pv, lanes).unroll(oreg).unroll(f"{pv}.o")
    src = _read_at(f, [n, r, y, x])
    if src is not None:
        panel = s[src].cache_read(f, memory="global")
        s[panel].compute_at(f, pb).vectorize(s[panel].loop_names()[-1], lanes)
    return [f]


def softmax_schedule(s, f, is_output):
    """Schedule a last-axis softmax output Func ``f`` (``e / sum(e)`` with
    ``e = exp(x - max(x))``): rows in parallel, and per row the max, the exponentials and
    the sum computed into cache, each reduction with four vector accumulators of partial
    results (64 float32 or 32 float64), the next row of an Input fetched while a row's exponentials run.
    Returns the Funcs it scheduled, or False when ``f`` is not that form."""
    d = f.definitions[0]
    if not is_output or f.dtype not in (sl.float32, sl.float64) or f.shape is None \
            or len(d.args) < 2:
        return False
    pure, reds = _funcs_read(f)
    if len(pure) != 1 or len(reds) != 1:
        return False
    (e,), (den,) = pure, reds
    e_pure, e_reds = _funcs_read(e)
    if e_pure or len(e_reds) != 1:
        return False
    mx = e_reds[0]
    rv = mx.definitions[0].rvars[0].name
    if transposing_reads(mx.definitions[0].value, rv):
        # rows read down a column (x.T.softmax(-1)): the generic schedule tiles such reads;
        # this one would gather a column per row (10x slower than torch)
        return False
    cols = int(f.shape[-1].value)
    row, col = d.args[-2].name, d.args[-1].name
    lanes, vw = _row_vectors(cols, f.dtype)
    s[f].vectorize(col, vw)
    if worth_parallel(f):
        s[f].parallel(d.args[0].name)
    s[e].compute_at(f, row).vectorize(e.definitions[0].args[-1].name, vw)
    e_row = e.definitions[0].args[-2].name
    for source in _inputs_read_along(e, e_row):
        # the next row of the input comes in while this row's exponentials are computed
        s[e].prefetch(source, e_row)
    _row_reductions(s, f, row, (mx, den), lanes, vw)
    return [f, e, mx, den]


def _row_vectors(cols, dtype):
    """(partial results of a reduction along a row, vector width) for rows of ``cols``
    elements of ``dtype``: four registers of partials and one register a vector, or one
    register of partials for short rows, or scalars for rows shorter than a register."""
    reg = vector_lanes(dtype.bytes)          # elements in one vector register
    vw = reg if cols >= reg else 1
    return (4 * reg if cols >= 16 * reg else vw), vw


def _row_reductions(s, f, row, reds, lanes, vw):
    """Compute each reduction of ``reds`` (along the row, in order) per iteration of loop
    ``row`` of ``f``, with ``lanes`` partial results in vectors of ``vw``."""
    for red in reds:
        rv = red.definitions[0].rvars[0].name
        s[red].compute_at(f, row)
        s[red].split(rv, lanes, names=(f"{rv}.o", f"{rv}.i"))
        part = s[red].rfactor(f"{rv}.i")
        s[part].compute_at(f, row).reorder(f"{rv}.o", f"{rv}.i").vectorize(f"{rv}.i", vw)
        if lanes > vw:
            s[part].unroll(f"{rv}.i.o")
            fold_partials(s, red, rv, vw, f, row)


def layernorm_schedule(s, f, is_output):
    """Schedule a last-axis layernorm Func ``f`` (``(x - mean) * rsqrt(var + eps)``,
    optionally times a weight plus a bias; the output, or stored where it feeds other
    ops): rows in parallel, and per row the sum for the mean and the one for the variance
    computed while the row is in cache, each with four vector accumulators of partial
    results (one pass over memory where three separate loops took three: 4096 x 1024
    float32, 12.4 -> 5.1 ms on one thread).
    Returns the Funcs it scheduled, or False when ``f`` is not that form."""
    d = f.definitions[0]
    if f.dtype not in (sl.float32, sl.float64) or f.shape is None or len(d.args) < 2:
        return False
    # (the pure Funcs it reads, such as the layer before, are read where they are stored)
    reds = _funcs_read(f)[1]
    row, col = d.args[-2].name, d.args[-1].name
    # the variance's sum reads the mean's: compute them in that order
    reds.sort(key=lambda r: any(g is not r and g in reds for g in funcs_read(r)))
    if len(reds) != 2 or any(
            len(r.definitions) != 1 or len(r.definitions[0].rvars) != 1
            or len(r.definitions[0].args) not in (len(d.args) - 1, len(d.args)) for r in reds):
        return False
    cols = int(f.shape[-1].value)
    s[f].vectorize(col, _row_vectors(cols, f.dtype)[1])
    if worth_parallel(f):
        s[f].parallel(d.args[0].name)
    # the sums accumulate in float64: half as many lanes a register
    _row_reductions(s, f, row, reds, *_row_vectors(cols, reds[0].dtype))
    return [f, *reds]
