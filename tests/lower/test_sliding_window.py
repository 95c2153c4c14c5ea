"""Sliding windows: a producer stored outside the serial loop it is computed in computes,
after that loop's first iteration, only the part of its region the iteration before did
not. Results never change; where the window does not apply, the whole region is computed
each time as before."""
import numpy as np
import pytest

import schedlang as sl

RNG = np.random.default_rng(77)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))


def _blur(shape):
    A = sl.Input("A", sl.float32, shape)
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = A[y, x] + A[y, x + 1] * 2 + A[y, x + 2]
    by = sl.Func("by", shape=(A.shape[0] - 2, A.shape[1] - 2))
    by[y, x] = bx[y, x] + bx[y + 1, x] * 3 + bx[y + 2, x]
    return A, bx, by, y, x


def _blur_ref(a):
    b = a[:, :-2] + a[:, 1:-1] * 2 + a[:, 2:]
    return b[:-2] + b[1:-1] * 3 + b[2:]


def _producer_region(text, name="bx"):
    """The (min, extent) let lines of the producer's rows."""
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith(f"let {name}.y.")]


@pytest.mark.parametrize("tail", ["guard", "shift"])
@pytest.mark.parametrize("shape", [(37, 53), ("H", "W")])
def test_a_row_producer_stored_per_tile_computes_one_new_row_per_output_row(shape, tail):
    A, bx, by, y, x = _blur(shape)
    s = sl.Schedule(by)
    yo, yi = s[by].split(y, 8, tail=tail)
    s[by].parallel(yo)
    s[bx].store_at(by, yo).compute_at(by, yi)
    text = str(sl.lower(by, s))
    region = _producer_region(text)
    # after the first row of a tile, the rows computed start where the last row ended
    assert region and "select(by.s0.y.i <= 0" in region[0], text
    if tail == "shift" and shape != ("H", "W"):
        assert "+ 2)" in region[0], region     # two further on
    a = RNG.standard_normal((37, 53)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), _blur_ref(a), rtol=1e-5, atol=1e-5)


def test_the_storage_holds_the_tile_not_more():
    A, bx, by, y, x = _blur((64, 64))
    s = sl.Schedule(by)
    yo, yi = s[by].split(y, 8)
    s[bx].store_at(by, yo).compute_at(by, yi).vectorize(x, 16)
    text = str(sl.lower(by, s))
    assert "allocate bx[float32; 10 x 62]" in text, text


def test_each_pass_of_an_outer_serial_loop_starts_with_the_whole_region():
    # y.o is serial; each of its iterations restarts y.i at 0, where the full region of
    # three rows is computed again (the window only reuses rows within one pass)
    A, bx, by, y, x = _blur((30, 20))
    s = sl.Schedule(by)
    yo, yi = s[by].split(y, 6, tail="guard")
    s[bx].store_at(by, yo).compute_at(by, yi)
    a = RNG.standard_normal((30, 20)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), _blur_ref(a), rtol=1e-5, atol=1e-5)


def test_a_region_moving_backward_is_computed_whole_each_time():
    A = sl.Input("A", sl.float32, (24, 16))
    y, x = sl.vars("y x")
    f = sl.Func("f")
    f[y, x] = A[y, x] * 2
    g = sl.Func("g", shape=(22, 16))
    g[y, x] = f[21 - y, x] + f[23 - y, x]
    s = sl.Schedule(g)
    yo, yi = s[g].split(y, 11)
    s[f].store_at(g, yo).compute_at(g, yi)
    text = str(sl.lower(g, s))
    assert "select(" not in " ".join(_producer_region(text, "f")), text
    a = RNG.standard_normal((24, 16)).astype(np.float32)
    want = a[21::-1] * 2 + a[23:1:-1] * 2
    np.testing.assert_allclose(sl.compile(g, s)(A=a), want, rtol=1e-6)


def test_a_region_moving_along_two_dimensions_is_computed_whole_each_time():
    A = sl.Input("A", sl.float32, (20, 20))
    i = sl.Var("i")
    y, x = sl.vars("y x")
    f = sl.Func("f")
    f[y, x] = A[y, x] + 1
    g = sl.Func("g", shape=(18,))
    g[i] = f[i, i] + f[i + 1, i + 1] + f[i + 2, i + 2]
    s = sl.Schedule(g)
    io, ii = s[g].split(i, 6)
    s[f].store_at(g, io).compute_at(g, ii)
    text = str(sl.lower(g, s))
    assert "select(" not in text, text
    a = RNG.standard_normal((20, 20)).astype(np.float32)
    d = np.diag(a) + 1
    np.testing.assert_allclose(sl.compile(g, s)(A=a), d[:-2] + d[1:-1] + d[2:], rtol=1e-6)


@pytest.mark.parametrize("producer_schedule", ["split", "vectorize", "unroll", "update"])
def test_a_producer_whose_rows_cannot_shrink_is_computed_whole(producer_schedule):
    # a split, vector or unrolled row loop needs its full extent; a Func with an update
    # stage rewrites its region each time: no window, same results
    A = sl.Input("A", sl.float32, (40, 32))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = A[y, x] + A[y, x + 1]
    if producer_schedule == "update":
        bx[y, 0] = bx[y, 0] * 2
    by = sl.Func("by", shape=(38, 31))
    by[y, x] = bx[y, x] + bx[y + 1, x] + bx[y + 2, x]
    s = sl.Schedule(by)
    yo, yi = s[by].split(y, 8)
    s[bx].store_at(by, yo).compute_at(by, yi)
    if producer_schedule == "split":
        s[bx].split(y, 2, tail="guard")
    elif producer_schedule == "vectorize":
        s[bx].vectorize(y, 3)
    elif producer_schedule == "unroll":
        s[bx].unroll(y, 3)
    text = str(sl.lower(by, s))
    assert not any("select(" in ln for ln in _producer_region(text)), text
    a = RNG.standard_normal((40, 32)).astype(np.float32)
    b = a[:, :-1] + a[:, 1:]
    if producer_schedule == "update":
        b[:, 0] *= 2
    np.testing.assert_allclose(sl.compile(by, s)(A=a), b[:-2] + b[1:-1] + b[2:], rtol=1e-5)


def test_a_chain_of_windows_is_right():
    # two producers, each sliding inside the same serial loop
    A = sl.Input("A", sl.float32, (50, 24))
    y, x = sl.vars("y x")
    f = sl.Func("f")
    f[y, x] = A[y, x] * 0.5
    g = sl.Func("g")
    g[y, x] = f[y, x] + f[y + 1, x]
    h = sl.Func("h", shape=(46, 24))
    h[y, x] = g[y, x] - g[y + 3, x]
    s = sl.Schedule(h)
    yo, yi = s[h].split(y, 12, tail="guard")
    s[h].parallel(yo)
    s[g].store_at(h, yo).compute_at(h, yi)
    s[f].store_at(h, yo).compute_at(h, yi)
    a = RNG.standard_normal((50, 24)).astype(np.float32)
    ff = a * 0.5
    gg = ff[:-1] + ff[1:]
    np.testing.assert_allclose(sl.compile(h, s)(A=a), gg[:46] - gg[3:49], rtol=1e-5, atol=1e-6)
