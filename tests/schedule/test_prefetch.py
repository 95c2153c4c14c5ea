"""The ``prefetch`` directive: where the fetches go in the loop IR, the instructions the
CPU backend makes of them, results unchanged (also far past the data's end), the trace,
and the errors."""
import json
import re

import numpy as np
import pytest

import schedlang as sl


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))


def _rows(shape=(12, 40)):
    """out[i, j] = e[i, j] * 2 with e = exp of a shifted X, e computed per row of out."""
    X = sl.Input("X", sl.float32, shape)
    i, j = sl.vars("i j")
    e = sl.Func("e")
    e[i, j] = sl.exp(X[i, j] - 1.0) + X[i, j]
    out = sl.Func("out", shape=shape)
    out[i, j] = e[i, j] * 2.0
    return X, e, out, i, j


def _ref(x):
    return (np.exp(x - np.float32(1)) + x) * np.float32(2)


def test_a_row_prefetch_fetches_the_next_row_beside_each_read():
    X, e, out, i, j = _rows((64, 64))
    s = sl.Schedule(out)
    s[out].parallel(i).vectorize(j, 16)
    s[e].compute_at(out, i).vectorize(j, 16).prefetch(X, i)
    text = str(sl.lower(out, s))
    fetches = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("prefetch")]
    assert fetches == ["prefetch X[ramp(out.s0.i * 64 + e.s0.j.o * 16 + 64, 1, 16)]"]
    kern = sl.compile(out, s)
    assert "llvm.prefetch" in kern.source
    assert "prefetcht0" in kern.assembly
    x = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
    np.testing.assert_allclose(kern(X=x), _ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("distance", [1, 3, -2, 1000, -(1 << 20)])
def test_fetching_past_either_end_of_the_data_is_harmless(distance, monkeypatch):
    X, e, out, i, j = _rows()
    s = sl.Schedule(out)
    s[e].compute_at(out, i).prefetch(X, i, distance)
    x = np.random.default_rng(1).standard_normal((12, 40), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(X=x), _ref(x), rtol=1e-5, atol=1e-6)
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")   # fetches are not accesses
    np.testing.assert_allclose(sl.compile(out, s)(X=x), _ref(x), rtol=1e-5, atol=1e-6)


def test_a_split_variable_is_shifted_through_its_pieces():
    X, e, out, i, j = _rows((8, 100))
    s = sl.Schedule(out)
    jo, ji = s[out].split(j, 16, tail="guard")
    s[out].vectorize(ji)
    s[out].prefetch(X, jo, 2)      # out reads X through the inline e
    text = str(sl.lower(out, s))
    assert "prefetch X[" in text and "+ 32" in text
    x = np.random.default_rng(2).standard_normal((8, 100), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(X=x), _ref(x), rtol=1e-5, atol=1e-6)
    # a variable the split consumed: j two further on, the same fetches
    s2 = sl.Schedule(out)
    s2[out].split(j, 16, tail="guard")
    s2[out].prefetch(X, j, 32)
    np.testing.assert_allclose(sl.compile(out, s2)(X=x), _ref(x), rtol=1e-5, atol=1e-6)


def test_a_reduction_prefetches_inside_its_reduction_loop():
    A = sl.Input("A", sl.float32, (16, 256))
    i = sl.Var("i")
    r = sl.RDom(256, name="r")
    total = sl.Func("total", shape=(16,))
    total[i] = sl.sum(A[i, r]) * 0.5
    s = sl.Schedule(total)
    s[total].prefetch(A, r, 64).parallel(i)
    text = str(sl.lower(total, s))
    loop = text.index("for total.s0.r")
    assert text.index("prefetch A[") > loop
    a = np.random.default_rng(3).random((16, 256), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(total, s)(A=a), a.sum(1) * 0.5, rtol=1e-5)


def test_a_stored_producer_can_be_prefetched():
    X, e, out, i, j = _rows((16, 48))
    s = sl.Schedule(out)
    s[e].compute_root()
    s[out].prefetch(e, i)
    assert "prefetch e[" in str(sl.lower(out, s))
    x = np.random.default_rng(4).standard_normal((16, 48), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(X=x), _ref(x), rtol=1e-5, atol=1e-6)


def test_the_directive_is_traced_and_replays():
    X, e, out, i, j = _rows()
    s = sl.Schedule(out)
    s[e].compute_at(out, i).prefetch(X, i, 2)
    assert "s[e].prefetch(X, 'i', 2)" in str(s)
    again = sl.Schedule.from_json(s.to_json(), out)
    assert str(again) == str(s)
    assert json.loads(s.to_json())["directives"][-1]["op"] == "prefetch"
    ns = {"sl": sl, "s": sl.Schedule(out), "X": X, "e": e, "out": out, "i": i, "j": j}
    exec(str(s), ns)                                   # noqa: S102 - the documented use
    assert str(ns["s"]) == str(s)


def test_prefetch_errors_name_the_directive_the_func_and_the_fix():
    X, e, out, i, j = _rows()
    Y = sl.Input("Y", sl.float32, (4,))
    other = sl.Func("other", shape=(4,))
    k = sl.Var("k")
    other[k] = Y[k]
    s = sl.Schedule([out, other])
    with pytest.raises(sl.ScheduleError, match=r"prefetch\(X, q\) on out: out has no variable named q"):
        s[out].prefetch(X, "q")
    for bad in (0, 1.5, True, "1"):
        with pytest.raises(sl.ScheduleError, match="distance must be a nonzero int"):
            s[out].prefetch(X, i, bad)
    with pytest.raises(sl.ScheduleError, match=r"prefetch\(Y, i\) on out: out does not read Y"):
        s[out].prefetch(Y, i)
    with pytest.raises(sl.ScheduleError, match="no Func or Input named 'Z'"):
        s[out].prefetch("Z", i)
    with pytest.raises(sl.ScheduleError, match="computed inline"):
        s2 = sl.Schedule(out)
        s2[e].prefetch(X, i)
        sl.compile(out, s2)


def test_a_read_stored_elsewhere_or_indexed_by_data_is_refused_at_compile():
    X, e, out, i, j = _rows()
    s = sl.Schedule(out)
    s[e].compute_root()
    s[out].prefetch(X, i)        # out reads X only through the stored e
    with pytest.raises(sl.ScheduleError, match=r"prefetch\(X, i\) on out: out does not read X "
                                               "where it is computed"):
        sl.compile(out, s)
    idx = sl.Input("idx", sl.int32, (8,))
    A = sl.Input("A", sl.float32, (100,))
    x = sl.Var("x")
    g = sl.Func("g", shape=(8,))
    g[x] = A[sl.clamp(idx[x], 0, 99)]
    s = sl.Schedule(g)
    s[g].prefetch(A, x)
    with pytest.raises(sl.ScheduleError, match=r"the read of A has an index that reads idx"):
        sl.compile(g, s)


def test_a_stencil_fetches_only_the_row_no_earlier_fetch_brought_in():
    # rows y, y+1 and y+2 are read; fetched two rows ahead, y and y+1 were already fetched
    # (as y+2) by the iterations before, and the reads x, x+1, x+2 of one row share a
    # cache line: one fetch per vector remains
    img = sl.Input("img", sl.float32, (40, 64))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = img[y, x] + img[y, x + 1] + img[y, x + 2]
    by = sl.Func("by", shape=(38, 62))
    by[y, x] = bx[y, x] + bx[y + 1, x] + bx[y + 2, x]
    s = sl.Schedule(by)
    s[by].vectorize(x, 16).parallel(y).prefetch(img, y, 2)
    fetches = [ln.strip() for ln in str(sl.lower(by, s)).splitlines()
               if ln.strip().startswith("prefetch")]
    assert len(fetches) == 1 and "by.s0.y * 64" in fetches[0] and "+ 258" in fetches[0], fetches
    a = np.random.default_rng(5).standard_normal((40, 64), dtype=np.float32)
    b = a[:, :-2] + a[:, 1:-1] + a[:, 2:]
    np.testing.assert_allclose(sl.compile(by, s)(img=a), b[:-2] + b[1:-1] + b[2:],
                               rtol=1e-5, atol=1e-5)


def test_reads_a_cache_line_apart_or_in_other_rows_each_keep_their_fetch():
    # columns 0 and 32 of a row are two lines apart; a row read 20 rows away is beyond
    # what earlier fetches cover: three fetches
    A = sl.Input("A", sl.float32, (64, 64))
    i, j = sl.vars("i j")
    out = sl.Func("out", shape=(44, 32))
    out[i, j] = A[i, j] + A[i, j + 32] + A[i + 20, j]
    s = sl.Schedule(out)
    s[out].vectorize(j, 16).prefetch(A, i, 1)
    fetches = [ln for ln in str(sl.lower(out, s)).splitlines() if "prefetch" in ln]
    assert len(fetches) == 3, fetches
    a = np.random.default_rng(6).standard_normal((64, 64), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(A=a),
                               a[:44, :32] + a[:44, 32:] + a[20:, :32], rtol=1e-6)


def _conv_row_tile():
    """A 1-D stride-2 convolution over a zero-padded image, its taps and 7 outputs of a
    tile unrolled: every unrolled read of one image row carries a prefetch."""
    X = sl.Input("X", sl.float32, (8, 4, 64))
    Wt = sl.Input("Wt", sl.float32, (8, 3, 16))
    y, x, k = sl.vars("y x k")
    r = sl.RDom(8, 3, name="r")
    acc = sl.Func("acc")
    acc[y, x, k] = sl.sum(sl.constant_exterior(X, 0.0)[r.x, y, 2 * x + r.y - 1] *
                          Wt[r.x, r.y, k])
    out = sl.Func("out", shape=(4, 28, 16))
    out[y, x, k] = acc[y, x, k]
    s = sl.Schedule(out)
    xo, xi = s[out].split(x, 7)
    s[out].reorder(y, xo, xi, k)
    s[acc].compute_at(out, xo)
    s[acc].reorder("r.x", "r.y", x, k).vectorize(k, 16).unroll(x).unroll("r.y")
    return X, Wt, out, s


def test_the_unrolled_reads_of_one_row_share_their_fetches():
    # 7 columns x 3 taps = 21 reads of one row, within 15 floats (60 bytes): a fetch at
    # each end of the span (it may cross a line boundary), not 21; the boundary
    # condition's clamps do not hide that the reads are neighbours
    X, Wt, out, s = _conv_row_tile()
    s["acc"].prefetch(X, "y", 1)
    fetches = [ln.strip() for ln in str(sl.lower(out, s)).splitlines()
               if ln.strip().startswith("prefetch")]
    assert len(fetches) == 2, fetches
    assert fetches[0].endswith("* 14 + 63]") and fetches[1].endswith("* 14 + 77]"), fetches
    assert not any("max(" in f or "min(" in f for f in fetches), fetches
    rng = np.random.default_rng(7)
    x, wt = (rng.standard_normal((8, 4, 64), dtype=np.float32),
             rng.standard_normal((8, 3, 16), dtype=np.float32))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    taps = np.stack([xp[:, :, t:t + 55:2] for t in range(3)], -1)
    want = np.einsum("cyxt,ctk->yxk", taps, wt)
    np.testing.assert_allclose(sl.compile(out, s)(X=x, Wt=wt), want, rtol=1e-4, atol=1e-4)


def test_a_clamped_vector_read_fetches_each_line_once():
    # a vector read through a boundary condition clamps each lane; its fetch drops the
    # clamps, so the CPU backend issues one prefetch per 64 bytes, not one per lane
    X = sl.Input("X", sl.float32, (16, 64))
    i, j = sl.vars("i j")
    out = sl.Func("out", shape=(16, 64))
    out[i, j] = sl.constant_exterior(X, 0.0)[i, j - 1] * 2.0
    s = sl.Schedule(out)
    s[out].vectorize(j, 16).prefetch(X, i, 1)
    kern = sl.compile(out, s)
    # however far LLVM unrolls the loops, at most one prefetch per 16-lane vector stored
    body = kern.source
    fetches = body.count("call void @llvm.prefetch")
    vectors = len(re.findall(r"store <16 x float>|masked\.store\.v16f32", body))
    assert 0 < fetches <= vectors, (fetches, vectors)
    x = np.random.default_rng(8).standard_normal((16, 64), dtype=np.float32)
    want = np.concatenate([np.zeros((16, 1), np.float32), x[:, :-1]], axis=1) * 2
    np.testing.assert_allclose(kern(X=x), want, rtol=1e-6)


def test_prefetching_an_inlined_func_says_it_has_no_storage():
    X, e, out, i, j = _rows()
    s = sl.Schedule(out)
    s[out].prefetch(e, i, 4)
    with pytest.raises(sl.ScheduleError, match=r"prefetch\(e, i\) on out: e is computed inline "
                       r".*\(s\[e\]\.compute_root\(\)"):
        sl.compile(out, s)
    s[e].compute_root()
    x = np.random.default_rng(9).standard_normal((12, 40), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(X=x), _ref(x), rtol=1e-5, atol=1e-6)
