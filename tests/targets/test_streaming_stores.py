"""Streaming (non-temporal) stores: which stores ``mark_streaming_stores`` marks, the code
the LLVM backend makes of them, and that results stay exact with and without threads."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.algo.expr import walk_expr
from schedlang.lower import mark_streaming_stores as streaming
from schedlang.lower import ir
from schedlang.lower.lower import PASSES, lower_pipeline


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def small_threshold(monkeypatch):
    """Streaming from 64 KiB, so the tests run on small arrays."""
    monkeypatch.setattr(streaming, "STREAMING_MIN_BYTES", 64 << 10)


def _scaled(shape, vector=16, threads=True):
    X = sl.Input("X", sl.float32, shape if shape else ("H", "W"))
    y, x = sl.vars("y x")
    out = sl.Func("scaled", shape=X.shape)
    out[y, x] = X[y, x] * 2.0 + 1.0
    s = sl.Schedule(out)
    s[out].vectorize(x, vector)
    if threads:
        s[out].parallel(y)
    return out, s


def _stores(stmt):
    found = []
    ir.walk_stmt(stmt, lambda s: found.append(s) if isinstance(s, ir.Store) else None)
    return found


def test_the_pass_runs_last():
    assert PASSES[-1][0] == "mark_streaming_stores"


def test_a_large_output_written_once_gets_streaming_vector_stores():
    out, s = _scaled((1024, 4096))       # 16 MiB
    stmt, _ = lower_pipeline(s)
    marked = [st for st in _stores(stmt) if st.buffer == "scaled"]
    assert marked and all(st.streaming is not None for st in marked)
    assert "# streaming when true" in str(sl.lower(out, s))


def test_a_small_output_stays_cached():
    out, s = _scaled((64, 256))          # 64 KiB, below the default threshold
    stmt, _ = lower_pipeline(s)
    assert all(st.streaming is None for st in _stores(stmt))


def test_scalar_and_narrow_stores_are_not_marked(small_threshold):
    for vector in (1, 4):                # 4 floats: 16 bytes, under a 32-byte run
        out, s = _scaled((256, 256), vector=vector)
        stmt, _ = lower_pipeline(s)
        assert all(st.streaming is None for st in _stores(stmt)), vector


def test_an_output_the_kernel_reads_back_is_not_marked(small_threshold):
    A = sl.Input("A", sl.float32, (256, 256))
    i, j = sl.vars("i j")
    r = sl.RDom(8, name="r")
    acc = sl.Func("acc", shape=(256, 256))
    acc[i, j] = 0.0
    acc[i, j] += A[i, j] * sl.cast(sl.float32, r)   # the update reads acc
    s = sl.Schedule(acc)
    s[acc].vectorize(j, 16)
    s[acc].update(0).vectorize(j, 16)
    stmt, _ = lower_pipeline(s)
    assert any(isinstance(n, ir.Load) and n.buffer == "acc"
               for st in _stores(stmt) for n in _walk(st.value))
    assert all(st.streaming is None for st in _stores(stmt))
    a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(acc, s)(A=a), a * 28.0, rtol=1e-6)


def _walk(e):
    seen = []
    walk_expr(e, seen.append)
    return seen


def test_a_symbolic_shape_decides_at_run_time(small_threshold):
    out, s = _scaled(None)
    text = str(sl.lower(out, s))
    assert "# streaming when" in text and "H" in text.split("# streaming when")[1]
    kern = sl.compile(out, s)
    assert "if" in kern.source or "br i1" in kern.source
    rng = np.random.default_rng(1)
    for h, w in ((3, 40), (256, 256), (129, 1000)):   # below and above 64 KiB
        x = rng.random((h, w), dtype=np.float32)
        np.testing.assert_array_equal(kern(X=x), x * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("threads", [True, False])
def test_streaming_stores_are_non_temporal_fenced_and_exact(small_threshold, threads):
    out, s = _scaled((300, 1000), threads=threads)   # rows not a multiple of a cache line
    kern = sl.compile(out, s)
    assert "!nontemporal" in kern.source
    asm = kern.assembly
    assert "movnt" in asm
    assert "sfence" in asm
    x = np.random.default_rng(2).standard_normal((300, 1000), dtype=np.float32)
    expect = x * np.float32(2) + np.float32(1)
    for _ in range(3):
        np.testing.assert_array_equal(kern(X=x), expect)
    into = np.full_like(x, np.nan)
    kern(X=x, out=into)
    np.testing.assert_array_equal(into, expect)


def test_bench_softmax_output_streams():
    """The softmax of bench writes its 64 MiB result once: its stores stream."""
    from schedlang.bench.workloads import Softmax
    out, s = Softmax((4096, 4096)).algorithm()
    assert str(sl.lower(out, s)).count("# streaming when true") == 1


def test_a_store_that_jumps_between_rows_is_not_streamed(small_threshold):
    # a tiled transpose stores one vector per output row: streaming would leave each line
    # half written in the write-combining buffers; the row-order copy still streams
    X = sl.Input("X", sl.float32, (256, 256))
    i, j = sl.vars("i j")
    t = sl.Func("t", shape=(256, 256))
    t[i, j] = X[j, i] + 1
    s = sl.Schedule(t)
    io, ii = s[t].split(i, 16)
    jo, ji = s[t].split(j, 16)
    s[t].reorder(jo, io, ii, ji).vectorize(ji).parallel(jo)
    assert [st.streaming for st in _stores(lower_pipeline(s, "llvm")[0])] == [None]
    x = np.random.default_rng(4).standard_normal((256, 256), dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(t, s)(X=x), x.T + 1)
    s = sl.Schedule(t)
    s[t].vectorize(j, 16)
    assert [st.streaming is not None for st in _stores(lower_pipeline(s, "llvm")[0])] == [True]
