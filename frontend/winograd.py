"""Winograd convolution F(m x m, 3 x 3) (Lavin & Gray, 2015) as algorithm Funcs, and its
schedule in the public schedule language. A 3x3 stride-1 conv computes each m x m tile of
output from an (m + 2) x (m + 2) tile of input with (m + 2)^2 multiplications per input /
output channel pair instead of 9 m^2: the input tile and the filter go through fixed
linear transforms (``B^T d B`` and ``G g G^T``), the products become (m + 2)^2 independent
matrix products over the input channels, and ``A^T M A`` turns them back into the tile.
F(2x2, 3x3) does 2.25x fewer multiplications with the rounding error of the direct sum;
F(4x4, 3x3) 4x fewer, with about ten times its rounding error (what oneDNN and cuDNN
accept). Every transform is a pure Func whose coefficients are constants: the position
loops are unrolled, so each position is a short chain of adds.

Example::

    X = sl.Input("X", sl.float32, (1, 64, 56, 56)); W = sl.Input("W", sl.float32, (64, 64, 3, 3))
    conv = winograd_conv3x3(lambda n, c, y, x: sl.constant_exterior(X, 0.0)[n, c, y - 1, x - 1],
                            lambda k, c, i, j: W[k, c, i, j], (1, 64, 56, 56, 64), m=4)
    s = sl.Schedule(conv.out); schedule_winograd(s, conv); kern = sl.compile(conv.out, s)
"""
from __future__ import annotations

import schedlang as sl
from schedlang.targets.host_cpu import vector_lanes, vector_registers

from .matmul_schedule import funcs_read

# (B^T, G, A^T) for the interpolation points 0, 1, -1 (m = 2) and 0, +-1, +-2 (m = 4)
TRANSFORMS = {
    2: (((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
        ((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1)),
        ((1, 1, 1, 0), (0, 1, -1, -1))),
    4: (((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
         (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1)),
        ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
         (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1)),
        ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))),
}


def _combine(coefs, terms):
    """sum(c * t) over the non-zero coefficients, +-1 as an add or a subtract."""
    e = None
    for c, t in zip(coefs, terms):
        if c == 0:
            continue
        if e is None:
            e = t if c == 1 else -t if c == -1 else float(c) * t
        else:
            e = e + t if c == 1 else e - t if c == -1 else e + float(c) * t
    return e if e is not None else sl.cast(sl.float32, 0.0)


def _by_position(index, exprs):
    """The expression of position ``index`` among ``exprs``: a chain of selects that the
    simplifier folds to one expression once the position loop is unrolled."""
    e = exprs[-1]
    for q in range(len(exprs) - 2, -1, -1):
        e = sl.select(index == q, exprs[q], e)
    return e


def _transform(mat_rows, mat_cols, at):
    """The (rows x cols) expressions ``sum_ij R[a, i] Cm[b, j] at(i, j)``, row-major."""
    inner = len(mat_cols[0])
    out = []
    for ra in mat_rows:
        for cb in mat_cols:
            rows = [_combine(cb, [at(i, j) for j in range(inner)]) for i in range(len(ra))]
            out.append(_combine(ra, rows))
    return out


class WinogradConv:
    """The Funcs of one Winograd conv: ``x_t`` (input, channels innermost), ``w_t`` and
    ``u`` (the transformed filter), ``v`` (the transformed input tiles), ``prod`` (the
    products summed over input channels), ``tiles`` (output tiles) and ``out`` (NCHW)."""

    def __init__(self, m, shape, funcs):
        self.m, self.shape = m, shape
        self.x_t, self.w_t, self.u, self.v, self.prod, self.tiles, self.out = funcs


def winograd_conv3x3(x_at, w_at, shape, m=2, name="conv", out=None):
    """Build the Funcs of a 3x3, stride-1 conv of output shape ``(N, O, Ho, Wo)`` from
    ``shape = (N, C, Ho, Wo, O)``: ``x_at(n, c, y, x)`` is the zero-padded input at padded
    coordinates (it is read up to ``m - 1`` rows and columns past ``Ho + 2`` / ``Wo + 2``,
    where it must be 0 or finite), ``w_at(k, c, i, j)`` the OIHW weights. ``m`` is 2 or 4.
    ``out``: a declared, undefined Func named ``name`` to define as the result.
    Example: ``winograd_conv3x3(xp, wt, (1, 64, 56, 56, 64), m=4).out``."""
    bt, g, at = TRANSFORMS[m]
    a = m + 2
    n_, c_, ho, wo, o_ = shape
    n, k, y, x, c, p, ty, tx, yy, xx, ai, bi, ky, kx = sl.vars(
        "n k y x c p ty tx yy xx ai bi ky kx")
    x_t = sl.Func(f"{name}_input")
    x_t[n, yy, xx, c] = x_at(n, c, yy, xx)
    w_t = sl.Func(f"{name}_weights")
    w_t[c, ky, kx, k] = w_at(k, c, ky, kx)
    u = sl.Func(f"{name}_filter_tiles")
    u[p, c, k] = _by_position(p, _transform(g, g, lambda i, j: w_t[c, i, j, k]))
    v = sl.Func(f"{name}_input_tiles")
    v[n, p, ty, tx, c] = _by_position(
        p, _transform(bt, bt, lambda i, j: x_t[n, m * ty + i, m * tx + j, c]))
    r = sl.RDom(c_, name="c_in")
    prod = sl.Func(f"{name}_products")
    prod[n, p, ty, tx, k] = sl.sum(v[n, p, ty, tx, r] * u[p, r, k], over=[r])
    tiles = sl.Func(f"{name}_tiles{m}x{m}")
    tiles[n, ty, tx, ai, bi, k] = _by_position(
        ai * m + bi, _transform(at, at, lambda i, j: prod[n, i * a + j, ty, tx, k]))
    out = sl.Func(name, shape=(n_, o_, ho, wo)) if out is None else out
    out[n, k, y, x] = tiles[n, y // m, x // m, y % m, x % m, k]
    return WinogradConv(m, shape, (x_t, w_t, u, v, prod, tiles, out))


def winograd_tile(in_channels, out_channels, out_h, out_w, accurate=True):
    """The m of the Winograd form that pays for a 3x3 stride-1 float32 conv, or None for the
    direct sum: channels in whole AVX-512 vectors and an image of at least 14 x 14 (on a
    7 x 7 image the direct sum measured faster: 1.3x at 128 channels, 1.2x at 512).
    F(4x4, 3x3) only when not asked to be ``accurate``, on images of 28 x 28 or more, and
    while its rounding error stays near 1e-5 of the outputs (C <= 128); otherwise
    F(2x2, 3x3). Example: ``winograd_tile(64, 64, 56, 56, accurate=False) == 4``."""
    if in_channels % 16 or out_channels % 16 or min(out_h, out_w) < 14:
        return None
    if not accurate and in_channels <= 128 and min(out_h, out_w) >= 28:
        return 4
    return 2


# filter tiles up to this size are computed once and streamed for every row of tiles;
# larger ones are computed per block of 32 output channels, which then stays in L2 while
# every tile of the image goes through it (F(2x2) at 256 channels on 14 x 14: 1.07 ->
# 0.61 ms; F(4x4) at 64 channels on 56 x 56: 0.40 -> 0.37 ms)
ROW_FILTER_TILE_BYTES = 512 * 1024


def schedule_winograd(s, conv):
    """Schedule the Funcs of ``conv`` in ``s``. The padded input (channels innermost) is
    copied once, in parallel. With small filter tiles (``ROW_FILTER_TILE_BYTES``), the
    weights are transformed once, then per row of output tiles (in parallel) come the
    input tiles, their products with the filter tiles (a register tile of up to 7 tiles x
    32 output channels over all input channels) and the output tiles, written out as NCHW.
    With larger ones, the input tiles of the whole image are computed once, then per block
    of 32 output channels (in parallel) the block's filter tiles, the products of every
    tile and, per row, the output tiles. Returns the Funcs it scheduled.
    Example: ``schedule_winograd(s, winograd_conv3x3(...))``."""
    m = conv.m
    _, c_, _, wo, o_ = conv.shape
    tw = -(-wo // m)
    f, x_t, w_t, u, v, prod, tiles = (conv.out, conv.x_t, conv.w_t, conv.u, conv.v,
                                      conv.prod, conv.tiles)
    n, k, y, x = (a.name for a in f.definitions[0].args)
    # register tile of the products: up to 7 rows of tiles x 2 vectors of output channels
    # with AVX-512's 32 registers; with AVX2's 16, up to 12 accumulators in all
    lanes = vector_lanes(4)
    kt = 2 * lanes if o_ % (2 * lanes) == 0 else lanes
    max_rows = 7 if vector_registers() >= 32 else 12 // (kt // lanes)
    blocked = (m + 2) ** 2 * c_ * o_ * 4 > ROW_FILTER_TILE_BYTES
    s[f].split(y, m, names=("y.tile", "y.in"))
    s[f].split(x, m, names=("x.tile", "x.in"))
    s[x_t].compute_root().parallel("yy").vectorize("c", 16)
    # each output row is 4 interleaved vectors of tiles (one per column inside a tile)
    if blocked:
        s[f].split(k, kt, names=("k.block", "k.in"))
        s[f].reorder("k.block", n, "y.tile", "k.in", "y.in", "x.in", "x.tile")
        s[f].parallel("k.block")
        s[v].compute_root().parallel("ty")
        for g in (w_t, u, prod):
            s[g].compute_at(f, "k.block")
        s[tiles].compute_at(f, "y.tile")
    else:
        s[f].reorder(n, "y.tile", k, "y.in", "x.in", "x.tile").parallel("y.tile")
        s[w_t].compute_root()
        s[u].compute_root().parallel("c")
        for g in (v, prod, tiles):
            s[g].compute_at(f, "y.tile")
    if tw >= 8:
        s[f].vectorize("x.tile", 16 if tw >= 12 else 8)
    s[w_t].vectorize("k", 16)
    s[u].reorder("c", "p", "k").vectorize("k", 16).unroll("p")
    # a tile's input transform for 16 channels at a time, every position from the same loads
    s[v].vectorize("c", 16).reorder("n", "ty", "tx", "c.o", "p", "c.i").unroll("p")
    # register tile: rows of tiles (broadcast) x kt output channels (vectors)
    rows = max(d for d in range(1, max_rows + 1) if tw % d == 0)
    if rows < 4 <= tw:
        rows = min(max_rows, tw)
    s[prod].split("tx", rows, names=("tx.o", "tx.i"))
    s[prod].split("k", kt, names=("k.o", "k.i"))
    s[prod].reorder("n", "p", "ty", "tx.o", "k.o", "c_in", "tx.i", "k.i")
    s[prod].vectorize("k.i", lanes).unroll("tx.i")
    if kt > lanes:
        s[prod].unroll("k.i.o")
    s[tiles].vectorize("k", 16).reorder("n", "ty", "tx", "k.o", "ai", "bi", "k.i")
    s[tiles].unroll("ai").unroll("bi")
    return [f, x_t, w_t, u, v, prod, tiles]


def find_winograd(f):
    """The ``WinogradConv`` whose output Func is ``f`` (found by following what ``f``
    reads), or None when ``f`` is not the output of ``winograd_conv3x3``."""
    if not hasattr(f, "definitions") or f.shape is None:
        return None
    name = f.name
    try:
        (tiles,) = funcs_read(f)
        (prod,) = funcs_read(tiles)
        by_name = {g.name: g for g in funcs_read(prod)}
        v, u = by_name[f"{name}_input_tiles"], by_name[f"{name}_filter_tiles"]
        (x_t,), (w_t,) = funcs_read(v), funcs_read(u)
    except (ValueError, KeyError):
        return None
    m = next((q for q in TRANSFORMS if tiles.name == f"{name}_tiles{q}x{q}"), None)
    if m is None or (prod.name, x_t.name, w_t.name) != (
            f"{name}_products", f"{name}_input", f"{name}_weights"):
        return None
    n_, o_, ho, wo = (int(d.value) for d in f.shape)
    c_ = int(prod.definitions[0].rvars[0].rdom.bounds[0][1].value)
    return WinogradConv(m, (n_, c_, ho, wo, o_), (x_t, w_t, u, v, prod, tiles, f))


def winograd_schedule(s, f, is_output):
    """The frontend's default schedule of a ``conv2d_winograd`` Func ``f``
    (``schedule_winograd``). Returns the Funcs it scheduled, or False when ``f`` is not
    the output of ``winograd_conv3x3``."""
    conv = find_winograd(f)
    return schedule_winograd(s, conv) if conv is not None else False
