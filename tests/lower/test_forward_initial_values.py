"""Promoted accumulators start from the value their buffer was just initialised with:
the store of that value goes (the store after the reduction overwrites it), and nothing
is forwarded across a read, an overlapping store or a loop."""
import importlib

import numpy as np

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.algo import types as T

ir = importlib.import_module("schedlang.lower.ir")
promote = importlib.import_module("schedlang.lower.promote_accumulators")


def _c(v, dt=T.int64):
    return E.Const(v, dt)


def _matmul_kernel():
    A = sl.Input("A", sl.float32, (64, 32))
    B = sl.Input("B", sl.float32, (32, 48))
    i, j = sl.vars("i j")
    k = sl.RDom(32, name="k")
    C = sl.Func("C", shape=(64, 48))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    s[C].split(j, 16)
    s[C].reorder(i, "j.o", k, "j.i").vectorize("j.i")
    return sl.compile(C, s)


def test_a_reduction_into_its_output_writes_each_output_once():
    kern = _matmul_kernel()
    text = kern.loop_ir
    # the accumulator starts at zero; C itself is never zeroed first
    assert "C.acc1[ramp(0, 1, 16)] = x16(0.0)" in text
    assert not any(line.strip().startswith("C[") and line.strip().endswith("= x16(0.0)")
                   for line in text.splitlines())
    rng = np.random.default_rng(7)
    a = rng.random((64, 32), dtype=np.float32)
    b = rng.random((32, 48), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)


def test_an_initial_value_that_reads_memory_is_loaded_not_forwarded():
    # f's pure value reads A: the accumulator loads f after it is stored
    A = sl.Input("A", sl.float32, (16,))
    B = sl.Input("B", sl.float32, (16, 8))
    x = sl.Var("x")
    r = sl.RDom(8, name="r")
    f = sl.Func("f", shape=(16,))
    f[x] = A[x] * 2.0
    f[x] = f[x] + B[x, r]
    s = sl.Schedule(f)
    s[f].vectorize(x, 8)
    s[f].update(0).vectorize(x, 8).reorder("x.o", r, "x.i")
    rng = np.random.default_rng(8)
    a = rng.random(16, dtype=np.float32)
    b = rng.random((16, 8), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(A=a, B=b), a * 2 + b.sum(1), rtol=1e-5)


def _nest(between):
    """``C[0] = 5; <between>; allocate t: t = C[0]; for k in [0, 4): t = t + A[k];
    C[0] = t`` (as the promotion leaves it), run through the forwarding."""
    f32 = T.float32
    init = ir.Store("C", E.Const(5.0, f32), _c(0))
    body = ir.Store("t", ir.Load("t", _c(0), f32) + ir.Load("A", E.Var("k", T.int32), f32),
                    _c(0))
    nest = ir.Allocate("t", f32, [_c(1)], "local", ir.make_block([
        ir.Store("t", ir.Load("C", _c(0), f32), _c(0)),
        ir.For("k", _c(0, T.int32), _c(4, T.int32), "serial", body),
        ir.Store("C", ir.Load("t", _c(0), f32), _c(0))]))
    stmt = ir.make_block([init] + between + [nest])
    return promote.forward_initial_values(stmt, {"t"})


def _stores(stmt):
    found = []
    ir.walk_stmt(stmt, lambda s: found.append(s) if isinstance(s, ir.Store) else None)
    return found


def test_forwarding_drops_the_initial_store():
    out = _nest([])
    stores = _stores(out)
    assert [s.buffer for s in stores] == ["t", "t", "C"]
    assert isinstance(stores[0].value, E.Const) and stores[0].value.value == 5.0


def test_no_forwarding_across_a_read_an_overlapping_store_or_a_loop():
    f32 = T.float32
    read = ir.Store("D", ir.Load("C", _c(0), f32), _c(0))
    # four lanes from C[-2]: C[0] is one of them, at another index
    overlap = ir.Store("C", ir.Load("E", ir.Ramp(_c(0), _c(1), 4), f32.with_lanes(4)),
                       ir.Ramp(_c(-2), _c(1), 4))
    loop = ir.For("q", _c(0, T.int32), _c(2, T.int32), "serial",
                  ir.Store("C", E.Const(2.0, f32), _c(0)))
    for between in ([read], [overlap], [loop]):
        out = _nest(between)
        first = _stores(out)[0]
        assert first.buffer == "C", between      # the initial store stays
        pre = [s for s in _stores(out) if s.buffer == "t"][0]
        assert isinstance(pre.value, ir.Load) and pre.value.buffer == "C"


def test_a_disjoint_store_in_between_keeps_the_forwarding():
    f32 = T.float32
    other = ir.Store("C", E.Const(1.0, f32), _c(1))
    out = _nest([other])
    assert [s.buffer for s in _stores(out)] == ["C", "t", "t", "C"]
    assert _stores(out)[0].index.value == 1
