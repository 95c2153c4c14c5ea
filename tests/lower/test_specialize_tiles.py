"""The ``specialize_tiles`` pass: with symbolic sizes, a tile computed inside a loop gets a
copy of its code for the full tile (constant loops, registers, stack storage) beside the
exact code for edge tiles. Both copies must compute the algorithm's result at every size."""
import numpy as np
import pytest

import schedlang as sl


def _gemm(sizes=("M", "N", "K"), whole_unroll=False):
    m, n, kk = sizes
    A = sl.Input("A", sl.float32, (m, kk))
    B = sl.Input("B", sl.float32, (kk, n))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    acc = s[C].cache_write("local")
    jo, jr = s[C].split(j, 64, names=("jo", "jr"))
    jt, jv = s[C].split(jr, 32, names=("jt", "jv"))
    io, ii = s[C].split(i, 6, names=("io", "ii"))
    s[C].reorder(jo, io, jt, ii, jv).vectorize(jv, 16).parallel(jo)
    s[acc].compute_at(C, jt)
    s[acc].reorder(k, i, j).vectorize(j, 16).unroll("j.o", 2)
    if whole_unroll:
        s[acc].unroll(i)
    else:
        s[acc].unroll(i, 6)
    Bp = s[B].cache_read(acc, memory="global")
    s[Bp].compute_at(C, jo).vectorize(s[Bp].loop_names()[-1], 16)
    return C, s


def test_a_register_tile_of_symbolic_size_gets_a_constant_copy():
    C, s = _gemm()
    text = str(sl.lower(C, s))
    # tail='auto' shifts the last tile inward (it overlaps the one before) while M >= 6
    assert "let C_cache.b0.min = max(min(C.s0.io * 6, M - 6), 0)" in text, text
    assert ("if min(max(min(C.s0.io * 6, M - 6), 0) + 5, M - 1) - max(min(C.s0.io * 6, M - 6), "
            "0) + 1 == 6 && ") in text, text
    assert "allocate C_cache[float32; 6 x 32] in local" in text, text
    # the full tile's accumulators are registers, as with constant sizes
    assert "allocate C_cache.acc1[float32; 16] in local" in text, text
    # the panel of B it reads is specialized too (its row stride becomes a constant)
    assert "allocate B_C_cache[float32; K x 64] in global" in text, text


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (5, 63, 3), (6, 64, 8), (7, 65, 17),
                                     (13, 100, 5), (24, 128, 33), (31, 200, 2)])
def test_full_and_edge_tiles_compute_the_product(m, n, k):
    C, s = _gemm()
    kern = sl.compile(C, s)
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


def test_constant_sizes_that_tile_exactly_need_no_copy():
    C, s = _gemm((48, 128, 16))
    text = str(sl.lower(C, s))
    assert " == 6 && " not in text and "else:" not in text, text


def _blur(h="H", w="W", tile=(8, 32)):
    A = sl.Input("A", sl.float32, (h, w))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = A[y, x] + A[y, x + 1] + A[y, x + 2]
    by = sl.Func("by", shape=(A.shape[0] - 2, A.shape[1] - 2))
    by[y, x] = bx[y, x] + bx[y + 1, x] + bx[y + 2, x]
    s = sl.Schedule(by)
    yo, xo, yi, xi = s[by].tile(y, x, *tile)
    s[by].vectorize(xi, 16).parallel(yo)
    s[bx].compute_at(by, xo).vectorize(x, 16)
    return by, s


def test_a_stencil_tile_of_symbolic_size_is_stack_storage_in_its_full_copy():
    by, s = _blur()
    text = str(sl.lower(by, s))
    assert "allocate bx[float32; 10 x 32] in local" in text, text
    assert "allocate bx[float32; bx.b0.extent x bx.b1.extent]" in text, text


@pytest.mark.parametrize("h, w", [(3, 3), (9, 33), (10, 34), (11, 35), (40, 97), (3, 200)])
def test_stencil_tiles_compute_the_blur_at_every_size(h, w):
    by, s = _blur()
    a = np.random.default_rng(h * w).random((h, w), dtype=np.float32)
    bx = a[:, :-2] + a[:, 1:-1] + a[:, 2:]
    np.testing.assert_allclose(sl.compile(by, s)(A=a), bx[:-2] + bx[1:-1] + bx[2:], rtol=1e-5)


def test_storage_computed_once_outside_every_loop_is_left_alone():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f")
    f[x] = A[sl.min(x, 7)] * 2
    g = sl.Func("g", shape=(sl.min(A.shape[0], 8),))
    g[x] = f[x] + 1
    s = sl.Schedule(g)
    s[f].compute_root()
    text = str(sl.lower(g, s))
    assert " == " not in text, text
    a = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(g, s)(A=a), a * 2 + 1)


def test_an_unrolled_register_tile_of_symbolic_size_compiles_and_runs_at_every_size():
    # unroll(i) without a factor: the full-tile copy has 6 rows to unroll; the edge copy
    # (fewer rows than 6, or fewer columns than 32) runs them as a loop
    C, s = _gemm(whole_unroll=True)
    kern = sl.compile(C, s)
    rng = np.random.default_rng(5)
    for m, n, k in ((2, 3, 4), (6, 32, 1), (8, 70, 9)):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


def test_a_vectorized_split_of_a_symbolic_loop_keeps_its_guard_and_vector_tail():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * 2
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    text = str(sl.lower(f, s))
    assert "max(min(" not in text, text     # no shifted (overlapping) vectors
    for n in (1, 15, 16, 17, 100):
        a = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 2)


def test_the_edge_copy_keeps_its_loops_rolled_in_the_machine_code():
    # LLVM unrolling the edge copy's short loops took seconds per kernel, for code that
    # runs on the last tiles only; the full-tile copy keeps LLVM's usual optimizations
    C, s = _gemm()
    assert "rolled" not in str(sl.lower(C, s))      # the loop IR reads as before
    source = sl.compile(C, s).source
    assert '!"llvm.loop.unroll.disable"' in source
    assert source.count("!llvm.loop !") > 10
    constant = sl.compile(*_gemm((48, 128, 16))).source
    assert "llvm.loop.unroll.disable" not in constant
