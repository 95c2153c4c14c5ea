"""The fast CPU schedules the frontend gives a 2-D float32 matmul and a float32 conv2d
(the ones `schedlang bench` uses). Matmul: a 6 x 64 tile of the result accumulated in
AVX-512 registers (cache_write), the right operand's column panel packed once per panel
(cache_read + compute_at), panels in parallel. Conv2d (NCHW, groups 1): 8 output channels x
32 columns accumulated in registers, rows in parallel.
Example: ``gemm_schedule(s, f, True)`` on the Func of ``Tensor(a) @ Tensor(b)``.
"""
from __future__ import annotations

import schedlang as sl
from schedlang.algo import expr as E


def _right_operand(f, k, j):
    """The Func / Input read at [k, j] inside the matmul's reduction, if it is read directly."""
    found = []

    def visit(n):
        if (isinstance(n, E.FuncRef) and len(n.args) == 2 and isinstance(n.args[0], E.Var)
                and isinstance(n.args[1], E.Var) and n.args[0].name == k
                and n.args[1].name == j):
            found.append(n.func)
    E.walk_expr(f.definitions[0].value, visit)
    return found[0] if found else None


def gemm_schedule(s, f, is_output):
    """Schedule the 2-D matmul Func ``f`` (``f[i, j] = sum(a[i, k] * b[k, j])``) in ``s``.
    Returns False (leaving ``s`` untouched) when ``f`` does not have that form."""
    d = f.definitions[0]
    if len(d.args) != 2 or len(d.rvars) != 1 or f.dtype != sl.float32 or f.shape is None:
        return False
    m, n = (int(x.value) for x in f.shape)
    kk = int(d.rvars[0].rdom.bounds[0][1].value)
    if m < 6 or n < 16 or kk < 1:
        return False
    i, j, k = d.args[0].name, d.args[1].name, d.rvars[0].name
    src = _right_operand(f, k, j)
    tj = 64 if n >= 64 else 16 * (n // 16)
    nc = tj
    while nc * 2 <= n and kk * nc * 2 * 4 <= 512 * 1024:
        nc *= 2
    acc = s[f].cache_write("local")
    if not is_output:
        s[f].compute_root()
    jo, jr = s[f].split(j, nc, names=(f"{j}.panel", f"{j}.r"))
    jt, jv = s[f].split(jr, tj, names=(f"{j}.tile", f"{j}.v"))
    io, ii = s[f].split(i, 6, names=(f"{i}.o", f"{i}.i"))
    s[f].reorder(jo, io, jt, ii, jv).vectorize(jv, 16).parallel(jo)
    s[acc].compute_at(f, jt)
    s[acc].reorder(k, i, j).vectorize(j, 16).unroll(i).unroll(f"{j}.o")
    if src is not None and getattr(src, "shape", None) is not None:
        packed = s[src].cache_read(acc, memory="global")
        s[packed].compute_at(f, jo).vectorize(s[packed].loop_names()[-1], 16)
    return True


def conv_schedule(s, f, is_output):
    """Schedule the NCHW conv2d Func ``f`` (``f[n, o, y, x] = sum over (c, ky, kx)``) in ``s``.
    Returns False (leaving ``s`` untouched) when ``f`` does not have that form."""
    d = f.definitions[0]
    if len(d.args) != 4 or len(d.rvars) != 3 or f.dtype != sl.float32 or f.shape is None:
        return False
    _, o_ext, _, x_ext = (int(v.value) for v in f.shape)
    if o_ext % 8 or x_ext < 16:
        return False
    n, o, y, x = (a.name for a in d.args)
    r = [v.name for v in d.rvars]
    tx = 32 if x_ext >= 32 else 16
    acc = s[f].cache_write("local")
    if not is_output:
        s[f].compute_root()
    oo, oi = s[f].split(o, 8, names=(f"{o}.o", f"{o}.i"))
    xo, xi = s[f].split(x, tx, names=(f"{x}.o", f"{x}.i"))
    s[f].reorder(n, y, oo, xo, oi, xi).vectorize(xi, 16).parallel(y)
    s[acc].compute_at(f, xo)
    s[acc].reorder(*r, o, x).vectorize(x, 16).unroll(o)
    if tx > 16:
        s[acc].unroll(f"{x}.o")
    return True
