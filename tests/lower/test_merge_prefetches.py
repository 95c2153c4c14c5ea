"""The merge_prefetches pass: the fetches of one block at constant offsets from each other
keep one per cache line of their span; others stay as they are."""
from schedlang.algo import expr as E
from schedlang.algo import types as T
from schedlang.lower import ir
from schedlang.lower.merge_prefetches import merge_prefetches


def _fetch(buffer, index, elem_bytes=4):
    return ir.FlatPrefetch(buffer, index, elem_bytes)


def _offsets(stmt):
    out = []
    ir.walk_stmt(stmt, lambda s: out.append((s.buffer, str(s.index)))
                 if isinstance(s, ir.FlatPrefetch) else None)
    return out


def test_a_span_keeps_its_ends_and_one_fetch_per_line_between():
    b = E.Var("b", T.int64)
    c = lambda k: b + E.Const(k, T.int64)  # noqa: E731
    store = ir.Store("out", E.Const(1.0, T.float32), b)
    block = ir.Block([_fetch("X", c(k)) if i % 2 == 0 else store
                      for i, k in enumerate(k for k in (0, 0, 8, 8, 17, 17, 30, 30, 40, 40))])
    got = _offsets(merge_prefetches(block, None))
    assert got == [("X", "b + 0"), ("X", "b + 17"), ("X", "b + 40")], got


def test_other_buffers_other_rows_and_vector_fetches_stay():
    b, r = E.Var("b", T.int64), E.Var("r", T.int64)
    vec = _fetch("X", ir.Ramp(b, E.Const(1, T.int64), 16))
    block = ir.Block([_fetch("X", b), _fetch("Y", b), _fetch("X", b + r), vec,
                      _fetch("X", b + E.Const(2, T.int64)), _fetch("H", b, elem_bytes=2),
                      _fetch("H", b + E.Const(31, T.int64), elem_bytes=2)])
    got = _offsets(merge_prefetches(block, None))
    # b and b + 2 may straddle a line boundary: both ends stay; so do b and b + 31 of
    # 2-byte elements (62 bytes)
    assert got == [("X", "b"), ("X", "b + 2"), ("Y", "b"), ("X", "b + r"),
                   ("X", str(vec.index)), ("H", "b"), ("H", "b + 31")], got
    block = ir.Block([_fetch("X", b), _fetch("X", b)])
    assert _offsets(merge_prefetches(block, None)) == [("X", "b")]
