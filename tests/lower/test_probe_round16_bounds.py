"""Regression tests: a stage computed per tile of a guarded split (its region's min and
extent both depend on the tile) and split again; a producer computed further out must
be sized to what the tiles read, not to the split loops bounded one by one."""
import numpy as np

import schedlang as sl


def _gemm_split_in_tile(tile, factor):
    M, N, K = 2, 80, 12
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (N, K))
    i, j, kk = sl.vars("i j kk")
    Bp = sl.Func("Bp")
    Bp[kk, j] = B[j, kk]
    k = sl.RDom(K, name="k")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = sl.sum(sl.cast(sl.int32, A[i, k]) * sl.cast(sl.int32, Bp[k, j]))
    s = sl.Schedule(C)
    acc = s[C].cache_write("local")
    jo, ji = s[C].split(j, tile, tail="guard")
    s[C].reorder(jo, i, ji)
    s[acc].compute_at(C, jo)
    s[acc].split(j, factor, tail="guard")   # divides every tile: no guard is needed
    s[Bp].compute_root()
    rng = np.random.default_rng(16)
    a = rng.integers(0, 256, (M, K), dtype=np.uint8)
    b = rng.integers(-128, 128, (N, K), dtype=np.int8)
    return C, s, a, b, a.astype(np.int32) @ b.astype(np.int32).T


def test_a_cache_write_split_again_inside_guarded_tiles_reads_only_the_producers_columns(
        monkeypatch):
    # the producer's region came out as [0, 143] (a tile's min 64 plus a tile's extent
    # bounded apart as 80), so the schedule was refused with a ScheduleError
    C, s, a, b, want = _gemm_split_in_tile(32, 16)   # tiles of 32, 32 and 16 columns
    kern = sl.compile(C, s)
    assert "Bp[int8; 12 x 80]" in kern.loop_ir, kern.loop_ir
    np.testing.assert_array_equal(kern(A=a, B=b), want)
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    np.testing.assert_array_equal(sl.compile(C, s)(A=a, B=b), want)


def test_a_cache_write_split_by_8_inside_tiles_of_24_compiles():
    C, s, a, b, want = _gemm_split_in_tile(24, 8)    # tiles of 24, 24, 24 and 8
    np.testing.assert_array_equal(sl.compile(C, s)(A=a, B=b), want)


def _three_stages(N=80):
    """f[x] = 3 * g[x], g[x] = h[x] + h[x + 1], h = 2 * I: (funcs, their Schedule, input,
    expected output)."""
    inp = np.arange(N + 1, dtype=np.float32) * 0.5
    I = sl.Input("I", sl.float32, (N + 1,))
    x = sl.Var("x")
    h = sl.Func("h")
    h[x] = I[x] * 2
    g = sl.Func("g")
    g[x] = h[x] + h[x + 1]
    f = sl.Func("f", shape=(N,))
    f[x] = g[x] * 3
    return (f, g, h, x), sl.Schedule(f), inp, (inp[:N] * 2 + inp[1:] * 2) * 3


def test_a_1d_stage_split_again_inside_guarded_tiles_sizes_its_root_producer(monkeypatch):
    (f, g, h, x), s, inp, want = _three_stages()
    xo, xi = s[f].split(x, 32, tail="guard")
    s[g].compute_at(f, xo)
    s[g].split(x, 16, tail="guard")
    s[h].compute_root()
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    np.testing.assert_allclose(sl.compile(f, s)(I=inp), want)


def test_a_double_buffered_stage_split_inside_guarded_tiles_sizes_its_root_producer(
        monkeypatch):
    # the next tile's copy is computed with the tile variable moved on one: the split's
    # promised range moves with it
    (f, g, h, x), s, inp, want = _three_stages()
    s[f].split(x, 24, tail="guard")
    s[g].compute_at(f, "x.o")
    s[g].split(x, 8, tail="guard")
    s[g].double_buffer()
    s[h].compute_root()
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    np.testing.assert_allclose(sl.compile(f, s)(I=inp), want)
