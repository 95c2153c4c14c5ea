"""Multi-stage pipelines under producer/consumer schedules (SPEC section 2).

Every schedule must reproduce the numpy reference; schedules never change results beyond
floating-point reassociation.
"""
import re

import numpy as np
import pytest

import schedlang as sl

RNG = np.random.default_rng(1234)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------
# Separable 3x3 blur, "valid" region (the output is 2 smaller in each dimension), so
# blur_x reads its Input without a boundary condition.
# ---------------------------------------------------------------------------------------

def build_blur(symbolic=True):
    shape = ("H", "W") if symbolic else (37, 53)
    A = sl.Input("A", sl.float32, shape)
    y, x = sl.vars("y x")
    bx = sl.Func("blur_x")
    bx[y, x] = (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3
    by = sl.Func("blur_y", shape=(A.shape[0] - 2, A.shape[1] - 2))
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3
    return A, bx, by, y, x


def blur_ref(a):
    bx = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def blur_inline(s, bx, by, y, x):
    pass


def blur_root(s, bx, by, y, x):
    s[bx].compute_root()


def blur_root_vectorized(s, bx, by, y, x):
    s[bx].compute_root().vectorize(x, 8)
    s[by].vectorize(x, 8).parallel(y)


def blur_at_y(s, bx, by, y, x):
    s[bx].compute_at(by, y)


def blur_at_x(s, bx, by, y, x):
    s[bx].compute_at(by, x)


def blur_at_tile_xo(s, bx, by, y, x):
    yo, xo, yi, xi = s[by].tile(y, x, 8, 16)
    s[bx].compute_at(by, xo).vectorize(x, 8)


def blur_at_tile_yo(s, bx, by, y, x):
    yo, yi = s[by].split(y, 8)
    s[by].parallel(yo)
    s[bx].compute_at(by, yo)


def blur_at_yi(s, bx, by, y, x):
    yo, yi = s[by].split(y, 4)
    s[bx].compute_at(by, yi)


def blur_store_y_compute_x(s, bx, by, y, x):
    s[bx].store_at(by, y)
    s[bx].compute_at(by, x)


def blur_store_yo_compute_yi(s, bx, by, y, x):
    yo, yi = s[by].split(y, 8)
    s[bx].store_at(by, yo)
    s[bx].compute_at(by, yi)


def blur_root_split_tails(s, bx, by, y, x):
    s[bx].compute_root()
    s[bx].split(y, 8, tail="shift")
    s[bx].split(x, 16, tail="guard")


def blur_halide_lesson(s, bx, by, y, x):
    # The schedule from Halide's blur example: tile the consumer, compute the producer
    # per tile, vectorize both.
    yo, xo, yi, xi = s[by].tile(y, x, 8, 16)
    s[by].vectorize(xi, 8).parallel(yo)
    s[bx].compute_at(by, xo).vectorize(x, 8)


def blur_fuse_inline(s, bx, by, y, x):
    t = s[by].fuse(y, x)
    s[by].vectorize(t, 4)


def blur_fuse_root(s, bx, by, y, x):
    s[by].fuse(y, x)
    s[bx].compute_root()


def blur_tile_fuse_parallel_at(s, bx, by, y, x):
    yo, xo, yi, xi = s[by].tile(y, x, 4, 8)
    t = s[by].fuse(yo, xo)
    s[by].parallel(t)
    s[bx].compute_at(by, t)


BLUR_SCHEDULES = [
    blur_inline, blur_root, blur_root_vectorized, blur_at_y, blur_at_x, blur_at_tile_xo,
    blur_at_tile_yo, blur_at_yi, blur_store_y_compute_x, blur_store_yo_compute_yi,
    blur_root_split_tails, blur_halide_lesson, blur_fuse_inline, blur_fuse_root,
    blur_tile_fuse_parallel_at,
]

def _blur_params(symbolic=False):
    return [pytest.param(fn, id=fn.__name__[5:]) for fn in BLUR_SCHEDULES]


@pytest.mark.parametrize("sched", _blur_params(symbolic=True))
def test_blur_symbolic_sizes(sched):
    A, bx, by, y, x = build_blur(symbolic=True)
    s = sl.Schedule(by)
    sched(s, bx, by, y, x)
    a = rand(37, 53)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), blur_ref(a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sched", _blur_params())
def test_blur_constant_sizes(sched):
    A, bx, by, y, x = build_blur(symbolic=False)
    s = sl.Schedule(by)
    sched(s, bx, by, y, x)
    a = rand(37, 53)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), blur_ref(a), rtol=1e-5, atol=1e-5)


def test_a_producer_placed_in_a_funcs_loops_follows_them_into_its_cache_write():
    # the tiles of blur_y move to the staged copy cache_write makes, and blur_x, computed
    # per tile, is computed in the staged Func's tile loop
    A, bx, by, y, x = build_blur(symbolic=True)
    s = sl.Schedule(by)
    _, xo, _, _ = s[by].tile(y, x, 8, 8)
    s[bx].compute_at(by, xo)
    staged = s[by].cache_write()
    kern = sl.compile(by, s)
    a = rand(37, 53)
    np.testing.assert_allclose(kern(A=a), blur_ref(a), rtol=1e-5, atol=1e-5)
    assert f"compute_at({staged.name}" not in str(s)   # the replay repeats it the same way
    again = sl.Schedule.from_json(s.to_json(), by)
    np.testing.assert_allclose(sl.compile(by, again)(A=a), blur_ref(a), rtol=1e-5, atol=1e-5)
    assert "blur_y_cache.s0.x.o" in kern.loop_ir

@pytest.mark.parametrize("producer", ["g", "first cache"])
def test_a_fused_loop_moved_into_a_cache_write_bounds_the_producer_computed_outside_it(producer):
    # the staged copy's fused loop runs over its region's Lets, which are out of scope where
    # the producer's region is inferred (inside the staged loops); a constant region gives a
    # constant trip count, so the recovered y = yz // 4 is bounded (was: "no bound")
    A = sl.Input("A", sl.float32, (8, 6, 4))
    x, y, z = sl.vars("x y z")
    g = sl.Func("g")
    g[x, y, z] = A[x, y, z] + 1.0
    f = sl.Func("f", shape=(8, 6, 4))
    f[x, y, z] = g[x, y, z] * 2.0
    s = sl.Schedule(f)
    if producer == "first cache":
        g = s[f].cache_write("global")
    s[g].compute_at(f, x)
    s[f].fuse(y, z)
    s[f].cache_write("global")
    a = rand(8, 6, 4)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), (a + 1) * 2, rtol=1e-6)



@pytest.mark.parametrize("shape", [(10, 10), (19, 34), (64, 64)])
def test_blur_same_kernel_several_sizes(shape):
    A, bx, by, y, x = build_blur(symbolic=True)
    s = sl.Schedule(by)
    s[bx].compute_at(by, y).vectorize(x, 4)
    s[by].vectorize(x, 4)
    kern = sl.compile(by, s)
    a = rand(*shape)
    np.testing.assert_allclose(kern(A=a), blur_ref(a), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# Unsharp mask on a clamp_edge boundary: blur_x, blur_y, sharpen, mask.
# ---------------------------------------------------------------------------------------

def build_unsharp(shape=("H", "W")):
    A = sl.Input("A", sl.float32, shape)
    y, x = sl.vars("y x")
    Ae = sl.clamp_edge(A)
    bx = sl.Func("blur_x")
    bx[y, x] = (Ae[y, x - 1] + Ae[y, x] * 2 + Ae[y, x + 1]) * 0.25
    by = sl.Func("blur_y")
    by[y, x] = (bx[y - 1, x] + bx[y, x] * 2 + bx[y + 1, x]) * 0.25
    sharpen = sl.Func("sharpen")
    sharpen[y, x] = A[y, x] * 2 - by[y, x]
    out = sl.Func("unsharp", shape=(A.shape[0], A.shape[1]))
    out[y, x] = sl.clamp(sharpen[y, x], -1.5, 1.5)
    return A, bx, by, sharpen, out, y, x


def unsharp_ref(a):
    e = np.pad(a, 1, mode="edge")
    bx = (e[:, :-2] + e[:, 1:-1] * 2 + e[:, 2:]) * 0.25
    by = (bx[:-2] + bx[1:-1] * 2 + bx[2:]) * 0.25
    return np.clip(a * 2 - by, -1.5, 1.5)


def us_inline(s, bx, by, sh, out, y, x):
    pass


def us_root_all(s, bx, by, sh, out, y, x):
    s[bx].compute_root()
    s[by].compute_root()
    s[sh].compute_root()


def us_root_vectorized(s, bx, by, sh, out, y, x):
    s[bx].compute_root().vectorize(x, 8).parallel(y)
    s[by].compute_root().vectorize(x, 8).parallel(y)
    s[out].vectorize(x, 8).parallel(y)


def us_at_y(s, bx, by, sh, out, y, x):
    s[by].compute_at(out, y)
    s[bx].compute_at(out, y)


def us_at_tile(s, bx, by, sh, out, y, x):
    yo, xo, yi, xi = s[out].tile(y, x, 8, 16)
    s[out].parallel(yo).vectorize(xi, 8)
    s[by].compute_at(out, xo).vectorize(x, 8)
    s[bx].compute_at(out, xo).vectorize(x, 8)


def us_chain(s, bx, by, sh, out, y, x):
    # blur_x computed per row of blur_y, blur_y per strip of the output.
    yo, yi = s[out].split(y, 8)
    s[by].compute_at(out, yo)
    s[bx].compute_at(by, y)


def us_store_at(s, bx, by, sh, out, y, x):
    yo, yi = s[out].split(y, 8)
    s[bx].store_at(out, yo).compute_at(out, yi)
    s[by].compute_at(out, yi)


def us_sharpen_root_tail(s, bx, by, sh, out, y, x):
    # blur_x reads through clamp_edge, so its region may be rounded up ("pad");
    # sharpen reads A directly, so it may only be guarded or shifted.
    s[sh].compute_root()
    s[sh].split(x, 16, tail="guard")
    s[sh].split(y, 8, tail="shift")
    s[bx].compute_root()
    s[bx].split(x, 16, tail="pad")
    s[bx].split(y, 8, tail="shift")


UNSHARP_SCHEDULES = [us_inline, us_root_all, us_root_vectorized, us_at_y, us_at_tile,
                     us_chain, us_store_at, us_sharpen_root_tail]


def _unsharp_params():
    return [pytest.param(fn, sym, id=("symbolic-" if sym else "const-") + fn.__name__[3:])
            for sym in (True, False) for fn in UNSHARP_SCHEDULES]


@pytest.mark.parametrize("sched,symbolic", _unsharp_params())
@pytest.mark.parametrize("shape", [(32, 48), (29, 37)], ids=["div", "nondiv"])
def test_unsharp_mask(sched, shape, symbolic):
    A, bx, by, sh, out, y, x = build_unsharp(("H", "W") if symbolic else shape)
    s = sl.Schedule(out)
    sched(s, bx, by, sh, out, y, x)
    a = rand(*shape)
    np.testing.assert_allclose(sl.compile(out, s)(A=a), unsharp_ref(a), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# GEMM: the SPEC schedule, cache_read, cache_write, reductions with a split RDom.
# ---------------------------------------------------------------------------------------

def build_gemm(m="M", n="N", k="K"):
    """C = A @ B with symbolic sizes, or the sizes given."""
    A = sl.Input("A", sl.float32, (m, k))
    B = sl.Input("B", sl.float32, (k, n))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return A, B, C, i, j, k


GEMM_SIZES = [(64, 64, 64), (50, 70, 30), (1, 1, 1), (33, 17, 9)]   # (M, N, K)


def run_gemm(C, s, M, N, K):
    a, b = rand(M, K), rand(K, N)
    out = sl.compile(C, s)(A=a, B=b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def spec_schedule(s, C, i, j, k):
    io, ii = s[C].split(i, 32)
    jo, ji = s[C].split(j, 64)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji, 16).unroll(ki).parallel(io)
    return io, jo, ko, ii, ki, ji


@pytest.mark.parametrize("M,N,K", GEMM_SIZES)
def test_gemm_default(M, N, K):
    A, B, C, i, j, k = build_gemm()
    run_gemm(C, sl.Schedule(C), M, N, K)


@pytest.mark.parametrize("M,N,K", GEMM_SIZES)
def test_gemm_spec_schedule(M, N, K):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    spec_schedule(s, C, i, j, k)
    run_gemm(C, s, M, N, K)


def test_gemm_spec_schedule_with_var_objects_and_strings_alike():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    s[C].split("i", 32)
    s[C].split(j, 64)
    s[C].split("k", 8)
    s[C].reorder("i.o", "j.o", "k.o", "i.i", "k.i", "j.i")
    s[C].vectorize("j.i", 16).unroll("k.i").parallel("i.o")
    run_gemm(C, s, 50, 70, 30)


@pytest.mark.parametrize("memory", [None, "global", "shared", "local"])
@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (50, 70, 30)])
def test_gemm_cache_read_B_at_ko(M, N, K, memory):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    io, jo, ko, ii, ki, ji = spec_schedule(s, C, i, j, k)
    Bc = s[B].cache_read(C) if memory is None else s[B].cache_read(C, memory=memory)
    s[Bc].compute_at(C, ko)
    run_gemm(C, s, M, N, K)


@pytest.mark.parametrize("memory", ["global", "local"])
@pytest.mark.parametrize("loop", ["i", "j"])
def test_gemm_cache_read_at_unsplit_loop(memory, loop):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    Ac = s[A].cache_read(C, memory=memory)
    s[Ac].compute_at(C, loop)
    run_gemm(C, s, 50, 70, 30)


def test_gemm_cache_read_compute_root():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    Bc = s[B].cache_read(C, memory="global")
    s[Bc].compute_root()
    run_gemm(C, s, 50, 70, 30)


def test_gemm_cache_read_both_inputs():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    Ac = s[A].cache_read(C, memory="global")
    Bc = s[B].cache_read(C, memory="global")
    s[Ac].compute_at(C, "i")
    s[Bc].compute_root()
    run_gemm(C, s, 33, 17, 9)


@pytest.mark.parametrize("loop", ["i", "j"])
def test_gemm_cache_write_local_at_unsplit_loop(loop):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    Cl = s[C].cache_write(memory="local")
    s[Cl].compute_at(C, loop)
    run_gemm(C, s, 50, 70, 30)


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (50, 70, 30)])
def test_gemm_cache_write_local_at_tile(M, N, K):
    # TVM-style register blocking: the consumer is tiled, the staged reduction is computed
    # per tile and vectorized.
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    Cl = s[C].cache_write(memory="local")
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    s[Cl].compute_at(C, jo)
    s[Cl].vectorize(j, 4)
    run_gemm(C, s, M, N, K)


def test_gemm_cache_write_default_memory():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    s[C].cache_write()
    run_gemm(C, s, 33, 17, 9)


def test_cache_write_of_a_func_with_update_stages():
    # the staged Func takes every definition (the update reads the staged Func itself)
    A = sl.Input("A", sl.float32, (12, 20))
    y, x = sl.vars("y x")
    r = sl.RDom(20, name="r")
    rows = sl.Func("rows", shape=(12, 20))
    rows[y, x] = A[y, x] * 0.5
    rows[y, r] = rows[y, r] + sl.select(r > 0, rows[y, sl.max(r - 1, 0)], 0.0)   # a scan
    s = sl.Schedule(rows)
    staged = s[rows].cache_write("local")
    assert len(s.definitions(staged)) == 2 and "rows_cache" in str(s)
    s[staged].compute_at(rows, y)
    s[rows].parallel(y)
    a = np.random.default_rng(3).random((12, 20), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(rows, s)(A=a), np.cumsum(a * 0.5, axis=1), rtol=1e-5)


@pytest.mark.parametrize("factor,tail", [(4, "auto"), (7, "auto"), (7, "guard"), (30, "auto"),
                                         (64, "guard")])
def test_reduction_split_rdom(factor, tail):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    ko, ki = s[C].split(k, factor, tail=tail)
    s[C].reorder(i, ko, ki, j)
    s[C].vectorize(j, 8)
    run_gemm(C, s, 50, 70, 30)


def test_reduction_split_rdom_unrolled_outermost():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    ko, ki = s[C].split(k, 4)
    s[C].reorder(ko, i, j, ki).unroll(ki)
    run_gemm(C, s, 50, 70, 30)


def test_row_sum_reduction_split():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i, = sl.vars("i")
    r = sl.RDom(A.shape[1], name="r")
    f = sl.Func("rowsum", shape=(A.shape[0],))
    f[i] = sl.sum(A[i, r])
    s = sl.Schedule(f)
    ro, ri = s[f].split(r, 5)
    s[f].unroll(ri).parallel(i)
    a = rand(13, 23)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_maximum_reduction_root_then_consumer():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    mx = sl.Func("mx")
    mx[i] = sl.maximum(A[i, r])
    out = sl.Func("out", shape=(A.shape[0], A.shape[1]))
    out[i, j] = A[i, j] - mx[i]
    s = sl.Schedule(out)
    rs = s[mx].split(r, 4)
    s[mx].compute_at(out, i)
    s[out].vectorize(j, 8)
    a = rand(13, 23)
    np.testing.assert_allclose(sl.compile(out, s)(A=a), a - a.max(axis=1, keepdims=True),
                               rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Update stages scheduled through .update(n)
# ---------------------------------------------------------------------------------------

def build_update():
    A = sl.Input("A", sl.float32, ("N",))
    x, = sl.vars("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    f[x] = f[x] * 2
    return A, f, x


def upd_none(s, f, x):
    pass


def upd_split(s, f, x):
    s[f].update(0).split(x, 8)


def upd_split_guard_vectorize(s, f, x):
    xo, xi = s[f].update(0).split(x, 8, tail="guard")
    s[f].update(0).vectorize(xi)


def upd_vectorize_width(s, f, x):
    s[f].update(0).vectorize(x, 8)


def upd_parallel(s, f, x):
    xo, xi = s[f].update(0).split(x, 4)
    s[f].update(0).parallel(xo)


def upd_unroll(s, f, x):
    s[f].update(0).unroll(x, 4)


def upd_pure_and_update(s, f, x):
    s[f].vectorize(x, 4)
    s[f].update(0).vectorize(x, 8)


@pytest.mark.parametrize("sched", [upd_none, upd_split, upd_split_guard_vectorize,
                                   upd_vectorize_width, upd_parallel, upd_unroll,
                                   upd_pure_and_update], ids=lambda f: f.__name__[4:])
@pytest.mark.parametrize("n", [37, 64])
def test_update_stage_pure_var(sched, n):
    A, f, x = build_update()
    s = sl.Schedule(f)
    sched(s, f, x)
    a = rand(n)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), (a + 1) * 2, rtol=1e-6)


def test_update_stage_returns_stage_for_chaining():
    A, f, x = build_update()
    s = sl.Schedule(f)
    assert s[f].update(0).vectorize(x, 8) is not None
    a = rand(21)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), (a + 1) * 2, rtol=1e-6)


def test_two_update_stages_scheduled_differently():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x]
    f[y, x] = f[y, x] * 3
    f[y, x] = f[y, x] + sl.cast(sl.float32, x)
    s = sl.Schedule(f)
    s[f].update(0).reorder(x, y)
    s[f].update(1).vectorize(x, 4).parallel(y)
    a = rand(9, 15)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a * 3 + np.arange(15, dtype=np.float32),
                               rtol=1e-6)


def test_scan_update_split_and_unroll_reduction_var():
    A = sl.Input("A", sl.float32, ("N",))
    x, = sl.vars("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    f[r] = f[r - 1] + A[r]
    s = sl.Schedule(f)
    ro, ri = s[f].update(0).split(r, 4)
    s[f].update(0).unroll(ri)
    s[f].vectorize(x, 8)
    a = rand(29)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), np.cumsum(a), rtol=1e-5, atol=1e-5)


def test_update_of_intermediate_computed_at():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] + 1
    g[y, x] = g[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] - 1
    s = sl.Schedule(f)
    s[g].compute_at(f, y)
    s[g].update(0).vectorize(x, 4)
    a = rand(7, 19)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), (a + 1) * 2 - 1, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# bound() on an intermediate
# ---------------------------------------------------------------------------------------

def build_bound(h=16, w=20):
    A = sl.Input("A", sl.float32, (h, w))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(h, w))
    f[y, x] = g[y, x] + 1
    return A, g, f, y, x


def test_bound_on_intermediate_then_unroll():
    A, g, f, y, x = build_bound()
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].bound(x, 0, 20).bound(y, 0, 16)
    xo, xi = s[g].split(x, 4)
    s[g].vectorize(xi).unroll(xo)
    a = rand(16, 20)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a * 2 + 1, rtol=1e-6)


def test_a_bound_too_small_for_static_sizes_is_refused_at_compile():
    """Every call would fail (SPEC: compiled, or rejected; nothing in between)."""
    A, g, f, y, x = build_bound()
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].bound(x, 0, 12)
    with pytest.raises(sl.ScheduleError, match=r"bound\(x, 0, 12\) on g: g is needed over "
                                               r"\[0, 20\) along x, which the bound \[0, 12\) "
                                               r"does not cover"):
        sl.compile(f, s)


def test_bound_on_intermediate_with_boundary_condition_larger_than_needed():
    # A bound larger than the consumers need: g computes more (through clamp_edge), the
    # result is unchanged.
    A = sl.Input("A", sl.float32, (10, 12))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = sl.clamp_edge(A)[y, x] * 2
    f = sl.Func("f", shape=(10, 12))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    s[g].compute_root().bound(x, 0, 16)
    s[g].vectorize(x, 16)
    a = rand(10, 12)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a * 2 + 1, rtol=1e-6)


def test_bound_smaller_than_needed_is_rejected():
    A, g, f, y, x = build_bound()
    s = sl.Schedule(f)
    s[g].compute_root()
    with pytest.raises(sl.SchedlangError):
        s[g].bound(x, 0, 10)
        sl.compile(f, s)(A=rand(16, 20))


# ---------------------------------------------------------------------------------------
# parallel gives the same results as serial
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows", [1, 2, 3, 17, 64])
def test_parallel_matches_serial_blur(rows):
    a = rand(rows + 2, 40)
    results = []
    for par in (False, True):
        A, bx, by, y, x = build_blur(symbolic=True)
        s = sl.Schedule(by)
        s[bx].compute_at(by, y)
        if par:
            s[by].parallel(y)
        results.append(sl.compile(by, s)(A=a))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[1], blur_ref(a), rtol=1e-5, atol=1e-5)


def test_parallel_gemm_matches_serial_exactly():
    a, b = rand(67, 31), rand(31, 45)
    results = []
    for par in (False, True):
        A, B, C, i, j, k = build_gemm()
        s = sl.Schedule(C)
        io, ii = s[C].split(i, 4)
        if par:
            s[C].parallel(io)
        results.append(sl.compile(C, s)(A=a, B=b))
    np.testing.assert_array_equal(results[0], results[1])


def test_parallel_root_producer_and_consumer():
    A, bx, by, y, x = build_blur(symbolic=True)
    s = sl.Schedule(by)
    s[bx].compute_root().parallel(y)
    s[by].parallel(y)
    a = rand(80, 33)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), blur_ref(a), rtol=1e-5, atol=1e-5)


def test_parallel_repeated_calls_are_deterministic():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    spec_schedule(s, C, i, j, k)
    kern = sl.compile(C, s)
    a, b = rand(96, 40), rand(40, 80)
    first = kern(A=a, B=b)
    for _ in range(5):
        np.testing.assert_array_equal(kern(A=a, B=b), first)


# ---------------------------------------------------------------------------------------
# sl.assume: a fact about one algorithm's sizes
# ---------------------------------------------------------------------------------------

_ASSUME_SCRIPT = r"""
import numpy as np, schedlang as sl

def build():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x] + 1
    return A, f

A1, f1 = build()
sl.assume(A1.shape[1] >= 4)          # a fact about the first algorithm only
k1 = sl.compile(f1, sl.Schedule(f1))
try:
    k1(A=np.zeros((2, 2), np.float32))
    print("FIRST-NOT-CHECKED")
except sl.ArgumentError:
    print("FIRST-CHECKED")

A2, f2 = build()                     # a second, unrelated algorithm, no assume
k2 = sl.compile(f2, sl.Schedule(f2))
try:
    out = k2(A=np.zeros((2, 2), np.float32))
    print("SECOND-OK", out.sum())
except sl.ArgumentError as e:
    print("SECOND-REJECTED", e)
"""


def _run_isolated(script):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_assume_is_checked_at_call_time():
    out = _run_isolated(_ASSUME_SCRIPT)
    assert "FIRST-CHECKED" in out


def test_assume_does_not_leak_into_another_algorithm():
    out = _run_isolated(_ASSUME_SCRIPT)
    assert "SECOND-OK" in out, out


# ---------------------------------------------------------------------------------------
# Splitting a consumer loop after a producer was placed at it
# ---------------------------------------------------------------------------------------

def test_compute_at_then_split_of_that_loop_is_rejected_at_the_split():
    # SPEC section 2: every primitive checks legality at once, also against the directives
    # before it; the rejected split leaves the schedule as it was
    A, bx, by, y, x = build_blur(symbolic=True)
    s = sl.Schedule(by)
    s[bx].compute_at(by, y)
    with pytest.raises(sl.ScheduleError, match=r"split\(y, 4\) on blur_y: blur_x is computed at "
                                               r"blur_y.y \(compute_at\), a loop this directive "
                                               r"removes \(the loops would be y.o, y.i, x\)"):
        s[by].split(y, 4)
    assert s[by].loop_names() == ["y", "x"] and len(s.trace) == 1
    np.testing.assert_allclose(sl.compile(by, s)(A=np.ones((8, 9), np.float32)), 1.0, rtol=1e-6)


@pytest.mark.parametrize("directives, says", [
    (lambda s, bx, by, y, x: (s[bx].compute_at(by, x), s[by].fuse(y, x)),
     r"fuse\(y, x\) on blur_y: blur_x is computed at blur_y.x"),
    (lambda s, bx, by, y, x: (s[bx].compute_at(by, x), s[by].vectorize(x, 4)),
     r"vectorize\(x, 4\) on blur_y: blur_x is computed at blur_y.x"),
    (lambda s, bx, by, y, x: (s[bx].compute_at(by, x), s[by].tile(y, x, 4, 4)),
     r"tile\(y, x, 4, 4\) on blur_y: blur_x is computed at blur_y.x"),
    (lambda s, bx, by, y, x: (s[bx].store_at(by, y).compute_at(by, x), s[by].split(y, 2)),
     r"split\(y, 2\) on blur_y: blur_x is stored at blur_y.y \(store_at\)"),
    (lambda s, bx, by, y, x: (s[bx].compute_at(by, y).double_buffer(), s[by].parallel(y)),
     r"parallel\(y\) on blur_y: blur_x is double-buffered and computed at blur_y.y, which would "
     r"become parallel"),
])
def test_a_directive_that_breaks_an_earlier_placement_is_rejected_at_once(directives, says):
    A, bx, by, y, x = build_blur(symbolic=True)
    s = sl.Schedule(by)
    with pytest.raises(sl.ScheduleError, match=says):
        directives(s, bx, by, y, x)
    assert s[by].loop_names() == ["y", "x"]


def test_inlining_a_consumer_that_holds_a_producer_is_rejected_at_once():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f, g, h = sl.Func("f"), sl.Func("g"), sl.Func("h", shape=(A.shape[0],))
    f[x] = A[x] * 2
    g[x] = f[x] + 1
    h[x] = g[x] * 3
    s = sl.Schedule(h)
    s[g].compute_root()
    s[f].compute_at(g, x)
    with pytest.raises(sl.ScheduleError, match=r"compute_inline on g: f is computed at g.x, a loop "
                                               r"of g, but an inlined Func has no loops"):
        s[g].compute_inline()


# ---------------------------------------------------------------------------------------
# Nested splits of a consumer: the producer's region must follow the guards
# ---------------------------------------------------------------------------------------

def _split_chain_pipeline():
    A = sl.Input("A", sl.float32, ("W",))
    x = sl.Var("x")
    p = sl.Func("p")
    p[x] = A[x] * 2
    c = sl.Func("c", shape=(A.shape[0],))
    c[x] = p[x] + 1
    return A, p, c


@pytest.mark.parametrize("first,second,target", [
    (2, 4, "x.o"), (3, 2, "x.i"), (8, 3, "x.i"), (3, 8, "x.i"),
    (1, 8, "x.i"), (1, 3, "x.o"),
])
@pytest.mark.parametrize("tail", ["auto", "guard"])
def test_nested_split_of_consumer_with_root_producer(first, second, target, tail):
    A, p, c = _split_chain_pipeline()
    s = sl.Schedule(c)
    s[c].split("x", first, tail=tail)
    s[c].split(target, second, tail=tail)
    s[p].compute_root()
    a = rand(23)
    np.testing.assert_allclose(sl.compile(c, s)(A=a), a * 2 + 1, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# A Func with a scan update placed inside its consumer's loops
# ---------------------------------------------------------------------------------------

def _build_scan():
    """c[x] = A[x]; c[r] = c[max(r - 1, 0)] + A[r] for r in [0, N): c = cumsum(A) + A[0].

    The update also rewrites c[0], so a stale or uninitialised c cannot give the right
    answer by accident."""
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    c = sl.Func("c")
    c[x] = A[x]
    c[r] = c[sl.max(r - 1, 0)] + A[r]
    o = sl.Func("o", shape=(A.shape[0],))
    o[x] = c[x] * 2
    return A, c, o, x, r


def _scan_ref(a):
    return (np.cumsum(a) + a[0]) * 2


@pytest.mark.parametrize("place", ["root", "inline_default",
                                   "at_x",
                                   "at_x_split"])
def test_scan_producer_placements(place):
    A, c, o, x, r = _build_scan()
    s = sl.Schedule(o)
    if place == "root":
        s[c].compute_root()
    elif place == "at_x":
        s[c].compute_at(o, x)
    elif place == "at_x_split":
        xo, xi = s[o].split(x, 4)
        s[c].compute_at(o, xi)
        s[c].update(0).split(r, 4)
    a = np.arange(1, 12, dtype=np.float32)
    np.testing.assert_allclose(sl.compile(o, s)(A=a), _scan_ref(a), rtol=1e-6)


@pytest.mark.parametrize("place", ["root", "at_y", "at_x"])
def test_row_scan_producer_placements(place):
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    r = sl.RDom(A.shape[1], name="r")
    c = sl.Func("c")
    c[y, x] = A[y, x] * 3
    c[y, r] = c[y, sl.max(r - 1, 0)] + A[y, r]     # also rewrites c[y, 0]
    o = sl.Func("o", shape=(A.shape[0], A.shape[1]))
    o[y, x] = c[y, x] * 2
    s = sl.Schedule(o)
    if place == "root":
        s[c].compute_root()
    else:
        s[c].compute_at(o, y if place == "at_y" else x)
    a = rand(5, 9)
    want = (np.cumsum(a, axis=1) + 3 * a[:, :1]) * 2
    np.testing.assert_allclose(sl.compile(o, s)(A=a), want, rtol=1e-5, atol=1e-5)


def test_compute_at_on_an_input_places_its_staged_copy():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    s[C].split(k, 4)
    s[C].reorder("k.o", i, "k.i", j)
    staged = s[B].cache_read(C, memory="local")
    s[B].compute_at(C, "k.o")          # SPEC: on an Input, compute_at places the staged copy
    kern = sl.compile(C, s)
    ir = kern.loop_ir
    assert ir.index(f"for {staged.name}.s0") > ir.index("for C.s0.k.o")
    rng = np.random.default_rng(11)
    a = rng.random((5, 10), dtype=np.float32)
    b = rng.random((10, 3), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)
    s2 = sl.Schedule(C)
    exec(str(s), {"sl": sl, "s": s2, "A": A, "B": B, "C": C, "i": i, "j": j, "k": k})
    assert str(s2) == str(s)


@pytest.mark.parametrize("size", ["N", 10])
def test_a_split_factor_far_past_the_extent_runs_only_the_live_iterations(size):
    # split(i, 2**31 - 1) with a guard would otherwise run 2**31 - 1 guarded iterations
    # (a factor past the int32 loop range is refused: test_schedule_errors.py)
    A = sl.Input("A", sl.float32, (size,))
    i = sl.Var("i")
    r = sl.RDom(A.shape[0], name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] * 2
    total = sl.Func("total", shape=(1,))
    total[i] = sl.sum(f[r] + i)
    s = sl.Schedule(total)
    s[f].compute_root()
    s[f].split(i, 2 ** 31 - 1, tail="guard")
    s[total].split("r", 2 ** 30, tail="guard")
    a = np.arange(10, dtype=np.float32)
    kern = sl.compile(total, s)
    assert "min(" in kern.loop_ir or size == 10
    np.testing.assert_allclose(kern(A=a), [2 * a.sum()])


@pytest.mark.parametrize("order", ["CD", "DC"])
@pytest.mark.parametrize("place", ["root", "at"])
def test_a_root_producer_that_reads_one_output_runs_after_that_output(order, place):
    # outputs C and D = C - max(C, axis 1): the max is computed at root (or inside D's
    # loop) and reads C, so C's loop nest must come first, whatever order they are given
    A = sl.Input("A", sl.float32, (8, 5))
    i, j = sl.vars("i j")
    r = sl.RDom(5, name="r")
    C = sl.Func("C", shape=(8, 5))
    C[i, j] = A[i, j] * 2
    m = sl.Func("m")
    m[i] = sl.maximum(C[i, r])
    D = sl.Func("D", shape=(8, 5))
    D[i, j] = C[i, j] - m[i]
    outs = [C, D] if order == "CD" else [D, C]
    s = sl.Schedule(*outs)
    if place == "at":
        s[m].compute_at(D, i)
    kern = sl.compile(outs, s)
    a = np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32)
    want = {"C": a * 2, "D": a * 2 - (a * 2).max(1, keepdims=True)}
    got = kern(A=a)
    for f, g in zip(outs, got):
        np.testing.assert_allclose(g, want[f.name], rtol=1e-6)
    ir = kern.loop_ir
    first_m_store = re.search(r"^\s*m\[", ir, re.M).start()
    assert ir.index("for C.s0.i") < first_m_store < ir.index("D[")


def test_a_vectorized_tile_of_a_partial_panel_reads_only_inside():
    """The staged accumulator of a 16-column tile, vectorized, in a 48-column panel of a
    40-column matrix: its guard (j < tile min + extent) bounds the packed copy of B."""
    n = 40
    A, B, C, i, j, k = build_gemm(n, n, n)
    s = sl.Schedule(C)
    acc = s[C].cache_write(memory="local", name="C_acc")
    s[C].split(j, 48, names=("jp", "jr"))
    s[C].split("jr", 16, names=("jt", "jv"))
    s[C].reorder("jp", i, "jt", "jv")
    s[acc].compute_at(C, "jt").vectorize(j, 16)
    Bp = s[B].cache_read(acc, memory="global", name="B_panel")
    s[Bp].compute_at(C, "jp")
    rng = np.random.default_rng(5)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-4)


def test_double_buffering_next_to_a_root_producer_with_symbolic_sizes():
    A = sl.Input("A", sl.float32, ("R", "C"))
    i, j = sl.vars("i j")
    p = sl.Func("p")
    p[i] = A[i, 0] * 2.0
    q = sl.Func("q")
    q[i] = p[i] + 1.0
    out = sl.Func("out", shape=(A.shape[0], A.shape[1]))
    out[i, j] = A[i, j] * q[i]
    s = sl.Schedule(out)
    s[p].compute_root()
    s[q].compute_at(out, i)
    s[q].double_buffer()
    a = np.random.default_rng(2).random((7, 19), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(A=a), a * (a[:, :1] * 2 + 1), rtol=1e-6)


def test_a_fused_per_tile_region_reads_inside_and_an_algorithm_read_outside_is_refused():
    # the fused loop's clamp to its tile's min + extent is bounded with both together, so
    # the vectorized tail's region stays inside B (it used to be refused as unprovable)
    A, B, C, i, j, k = build_gemm(13, 19, 11)
    s = sl.Schedule(C)
    s[C].vectorize(j, 3)
    s[C].rfactor(k)
    inner = s[C].rfactor(k)
    s[inner].fuse(j, "k")
    s[inner].compute_at(C, "k")
    rng = np.random.default_rng(5)
    a, b = rng.random((13, 11), dtype=np.float32), rng.random((11, 19), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-4)
    # an algorithm that reads outside by itself stays an AlgorithmError
    D = sl.Func("D", shape=(13, 11))
    D[i, j] = A[i, j + 1]
    s = sl.Schedule(D)
    s[D].vectorize(j, 4)
    with pytest.raises(sl.AlgorithmError, match=r"D reads A\[i, j \+ 1\]"):
        sl.compile(D, s)


@pytest.mark.parametrize("shape", [(3, 4), (0, 4), (3, 0), (0, 0), (1, 1)])
@pytest.mark.parametrize("split", [None, 8])
def test_fused_reduction_loops_over_an_empty_input_compute_nothing(shape, split):
    # the fused loop's recovered row is clamped into [0, H - 1]; with H = 0 that clamp
    # made the producer's region one row at -1, and the call was refused. The clamp is
    # the identity on iterations that run, so the region is empty when the loop is
    A = sl.Input("A", sl.float32, ("H", "W"))
    i, j, x = sl.vars("i j x")
    p = sl.Func("p")
    p[i, j] = A[i, j] * 2
    r = sl.RDom((0, A.shape[0]), (0, A.shape[1]), name="r")
    out = sl.Func("out", shape=(1,))
    out[x] = 0.0
    out[x] += p[r.x, r.y]
    s = sl.Schedule(out)
    s[p].compute_root()
    f = s[out].update(0).fuse(r.x, r.y)
    if split:
        s[out].update(0).split(f, split, tail="guard")
    k = sl.compile(out, s)
    a = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    np.testing.assert_allclose(k(A=a), [2 * a.sum()], rtol=1e-6)


def test_pad_on_a_fused_loop_of_an_inline_reduction_is_refused_and_guard_is_right():
    # the padded iterations of a fused loop land back on real points (its row and column
    # are clamped), and the reduction added into them twice: [[6, 3, 3]] for [[3, 3, 3]]
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    r = sl.RDom(3, name="r")
    h = sl.Func("h")
    h[y, x] = sl.sum(A[y, x] + sl.cast(sl.float32, r))
    out = sl.Func("out", shape=(A.shape[0], A.shape[1]))
    out[y, x] = h[y, x]
    for tail in ("pad", "guard", "auto"):
        s = sl.Schedule(out)
        s[h].compute_root()
        f = s[h].fuse(y, x)
        if tail == "pad":
            with pytest.raises(sl.ScheduleError, match=r"split\(y\.x\.f, 4\) on h: y\.x\.f comes "
                                                       r"from a fuse.*count twice"):
                s[h].split(f, 4, tail="pad")
            continue
        fo, fi = s[h].split(f, 4, tail=tail)
        s[h].reorder(r, fo, fi)
        a = np.arange(15, dtype=np.float32).reshape(3, 5)
        np.testing.assert_array_equal(sl.compile(out, s)(A=a), 3 * a + 3)


@pytest.mark.parametrize("tail", ["guard", "auto"])
def test_fused_producer_inside_a_guarded_tail_computes_nothing_past_the_edge(tail):
    # past the edge in both dimensions the producer's region is empty with two negative
    # extents; their product once made a positive loop count, and the kernel wrote before
    # its buffer (heap corruption)
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = A[y, x] * 2
    by = sl.Func("by", shape=(A.shape[0], A.shape[1]))
    by[y, x] = bx[y, x] + 1
    s = sl.Schedule(by)
    s[by].split(y, 8, tail=tail)
    s[by].split(x, 8, tail=tail)
    s[bx].compute_at(by, "x.i")
    s[bx].fuse(y, x)
    kern = sl.compile(by, s)
    assert "max(bx.b0.extent, 0) * max(bx.b1.extent, 0)" in kern.loop_ir
    for h, w in [(1, 9), (2, 19), (3, 3), (5, 30), (17, 17)]:
        a = np.random.default_rng(h).standard_normal((h, w)).astype(np.float32)
        np.testing.assert_array_equal(kern(A=a), a * 2 + 1)


def test_fused_reduction_loops_of_two_empty_extents_run_no_iteration():
    # extents H - 1 and W - 1 are both -1 at H = W = 0: their product is no iteration
    A = sl.Input("A", sl.float32, ("H", "W"))
    i = sl.Var("i")
    r = sl.RDom((0, A.shape[0] - 1), (0, A.shape[1] - 1), name="r")
    o = sl.Func("o", shape=(1,))
    o[i] = 0.0
    o[0] = o[0] + A[r.x, r.y]
    s = sl.Schedule(o)
    s[o].update(0).fuse("r.x", "r.y")
    kern = sl.compile(o, s)
    for shape in [(0, 0), (1, 1), (0, 5), (3, 3), (4, 2)]:
        a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
        np.testing.assert_array_equal(kern(A=a), [a[:-1, :-1].sum()])
