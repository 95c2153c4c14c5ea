"""Vectorized ``//`` and ``%`` by a constant: a ramp whose lanes provably share one quotient
(its base's known remainder plus its span stays inside the divisor) becomes a broadcast
quotient and a ramp remainder, so a packed layout indexed as ``P[j // 128, k, j % 128]``
is read with whole-vector loads instead of gathers; any other ramp keeps the per-lane
division and its results."""
import re

import numpy as np
import pytest

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.lower.vectorize import modulus_remainder


def _var(name):
    return E.Var(name, sl.int32)


def test_modulus_remainder_of_affine_index_math():
    x, y = _var("x"), _var("y")
    assert modulus_remainder(x * 128 + y * 64 + 16, {}) == (64, 16)
    assert modulus_remainder(x * 6 + 4, {}) == (6, 4)
    assert modulus_remainder(E.Const(37, sl.int32), {}) == (0, 37)
    # a let-bound variable carries its facts; an unknown one is "any integer"
    assert modulus_remainder(x + 3, {"x": (8, 2)}) == (8, 5)
    assert modulus_remainder(x - 3, {"x": (8, 2)}) == (8, 7)
    assert modulus_remainder(x * y, {"x": (4, 0), "y": (6, 0)}) == (24, 0)
    assert modulus_remainder(x + 1, {}) == (1, 0)
    # narrowing keeps residues modulo 2**bits only
    wide = E.Var("w", sl.int64)
    assert modulus_remainder(E.Cast(sl.int32, wide * 64 + 8), {}) == (64, 8)
    assert modulus_remainder(E.Cast(sl.int8, wide * 1024 + 8), {}) == (256, 8)


def _packed_panels(n, k, panel, width):
    """``C[i, j] = sum_r A[i, r] * P[j // panel, r, j % panel]`` with ``P`` the column
    panels of B stored contiguously, and ``C``'s columns vectorized by ``width``."""
    A = sl.Input("A", sl.float32, (8, k))
    B = sl.Input("B", sl.float32, (k, n))
    i, j, jo, kv, jj = sl.vars("i j jo kv jj")
    P = sl.Func("P")
    P[jo, kv, jj] = B[kv, jo * panel + jj]
    r = sl.RDom(k, name="r")
    C = sl.Func("C", shape=(8, n))
    C[i, j] = sl.sum(A[i, r] * P[j // panel, r, j % panel])
    s = sl.Schedule(C)
    s[C].vectorize(j, width)
    s[P].compute_root()
    return C, s


@pytest.mark.parametrize("n,panel,width,dense", [
    (256, 128, 16, True),     # 16-lane vectors never straddle a 128-column panel
    (256, 64, 16, True),
    (240, 24, 16, False),     # 24 is not a multiple of 16: some vectors straddle panels
    (96, 32, 8, True),
])
def test_packed_panel_reads_are_whole_vectors_exactly_when_lanes_share_a_panel(
        n, panel, width, dense):
    C, s = _packed_panels(n, 32, panel, width)
    kern = sl.compile(C, s)
    rng = np.random.default_rng(n + panel)
    a = rng.random((8, 32), dtype=np.float32)
    b = rng.random((32, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)
    reads = [line for line in kern.loop_ir.splitlines() if "* P[" in line]
    assert reads
    whole = re.compile(r"P\[ramp\([^]]*, 1, \d+\)\]")     # the index is one ramp
    assert all((whole.search(line) is not None) == dense for line in reads), reads
    assert all(("// x" in line) != dense for line in reads), reads


def test_a_ramp_with_unknown_alignment_keeps_the_per_lane_division():
    # x starts at a runtime offset: the lanes of ramp(off + x, 1, 16) // 16 may differ
    A = sl.Input("A", sl.float32, (64,))
    off = sl.Param("off", sl.int32)
    x = sl.Var("x")
    f = sl.Func("f", shape=(32,))
    f[x] = A[sl.clamp((x + off) // 16 * 16 + (x + off) % 3, 0, 63)]
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    a = np.arange(64, dtype=np.float32)
    for o in (0, 5, 17):
        xs = np.arange(32) + o
        np.testing.assert_array_equal(kern(A=a, off=o), a[np.clip(xs // 16 * 16 + xs % 3, 0, 63)])
