"""Lowering as a user sees it: pass dumps, the debug bounds mode, vector code in the
generated IR, partitioned tails, and the errors lowering raises."""
import re

import numpy as np
import pytest

import schedlang as sl


def _axpy():
    A = sl.Input("A", sl.float32, ("N",))
    B = sl.Input("B", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] * 3.0 + B[x]
    return A, B, x, f


def test_dump_prints_every_pass_and_times(monkeypatch, capfd):
    A, B, x, f = _axpy()
    monkeypatch.setenv("SCHEDLANG_DUMP", "1")
    sl.lower(f)
    err = capfd.readouterr().err
    for name in ("schedule_functions", "bounds_inference", "storage_flattening",
                 "vectorize_loops", "final_simplify"):
        assert f"after {name}:" in err
    monkeypatch.setenv("SCHEDLANG_DUMP", "time")
    sl.compile(f)
    err = capfd.readouterr().err
    assert "lowering total" in err and " ms" in err and "llvm codegen + jit" in err


def test_vectorized_multiply_add_is_16_lanes_rounded_as_numpy_in_the_llvm_ir():
    # an elementwise a*x + y is a multiply then an add, each rounded, as numpy computes
    # it (only accumulations fuse into an FMA)
    A, B, x, f = _axpy()
    s = sl.Schedule(f)
    s[f].vectorize(x, 16)
    kern = sl.compile(f, s)
    assert "<16 x float>" in kern.source
    assert "fmul <16 x float>" in kern.source and "fmuladd" not in kern.source
    a = np.arange(37, dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=a), a * 4, rtol=1e-6)


def test_symbolic_tail_is_partitioned_into_a_vector_loop_and_a_guarded_tail():
    A, B, x, f = _axpy()
    s = sl.Schedule(f)
    s[f].vectorize(x, 8)
    ir = str(sl.lower(f, s))
    assert "ramp(" in ir          # the steady part runs on vectors
    assert "if f.s0.x.o * 8 + f.s0.x.i < N" in ir   # the tail keeps its guard


def test_debug_bounds_mode_checks_every_access(monkeypatch):
    A, B, x, f = _axpy()
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    kern = sl.compile(f)
    assert "assert " in kern.loop_ir
    a = np.ones(5, np.float32)
    np.testing.assert_array_equal(kern(A=a, B=a), np.full(5, 4, np.float32))


def test_parallel_iterations_may_not_share_a_producer_buffer():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    s[f].parallel(y)
    # caught at the directive that makes the race, not only at compile
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(f, y\) on g: .*f's loop y is "
                                               r"parallel.*race"):
        s[g].store_root().compute_at(f, y)


def test_loop_directives_on_an_inlined_func_are_rejected():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g")
    g[x] = A[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    s = sl.Schedule(f)
    s[g].vectorize(x, 8)
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(x\) on g: g is computed inline.*"
                                                r"compute_root"):
        sl.compile(f, s)


def test_compute_at_lists_legal_locations():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    h = sl.Func("h", shape=(A.shape[0], A.shape[1]))
    h[y, x] = g[y, x] + f[y, x]
    s = sl.Schedule(h)
    s[f].compute_root()
    # the output h reads g too, outside f's loops: refused at the directive
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(f, x\) on g: the output h reads g, "
                                                r"outside f.x.*Legal locations for "
                                                r"g are: root$"):
        s[g].compute_at(f, x)
    assert s.func_schedule(g).compute == ("inline",)
    # a consumer that is not an output may still move later: that case is found at lowering
    h2 = sl.Func("h2", shape=(A.shape[0], A.shape[1]))
    e = sl.Func("e")
    e[y, x] = g[y, x] * 3
    h2[y, x] = e[y, x] + f[y, x]
    s = sl.Schedule(h2)
    s[f].compute_root()
    s[e].compute_root()
    s[g].compute_at(f, x)
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(f, x\) on g: .*Legal locations for "
                                                r"g are: root$"):
        sl.compile(h2, s)


def test_legal_locations_follow_inlined_consumers_and_compute_levels():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    h = sl.Func("h")
    h[y, x] = g[y, x] - 1
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = h[y, x] + 1
    s = sl.Schedule(f)
    # h is inlined into f: g's reads happen in f's loops, not in h's (it has none)
    assert s.legal_locations(g) == ["root", "f.y", "f.x"]
    s[h].compute_at(f, y)
    # now h reads g, inside f.y: h's own loops and the f loops around it
    assert s.legal_locations(g) == ["root", "h.y", "h.x", "f.y"]
    s[g].compute_at(f, y)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 2)


def test_accumulators_of_an_inner_reduction_loop_are_promoted():
    A = sl.Input("A", sl.float32, (64, 32))
    B = sl.Input("B", sl.float32, (32, 48))
    i, j = sl.vars("i j")
    k = sl.RDom(32, name="k")
    C = sl.Func("C", shape=(64, 48))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    s[C].split(j, 16)
    s[C].reorder(i, "j.o", k, "j.i").vectorize("j.i")
    kern = sl.compile(C, s)
    # C[i, j-tile] lives in a local accumulator across the k loop, stored once after it
    assert "C.acc" in kern.loop_ir
    rng = np.random.default_rng(5)
    a = rng.random((64, 32), dtype=np.float32)
    b = rng.random((32, 48), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)


def test_guarded_accumulators_are_not_promoted():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[i, k])
    s = sl.Schedule(f)
    s[f].split(i, 4)          # guarded: M may not be a multiple of 4
    s[f].reorder("i.o", k, "i.i")
    kern = sl.compile(f, s)
    assert "f.acc" not in kern.loop_ir
    a = np.random.default_rng(6).random((7, 5), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a), a.sum(1), rtol=1e-5)


def _loop_depth_of(loop_ir, needle):
    """Indentation (loop depth) of the first line of ``loop_ir`` containing ``needle``."""
    line = next(ln for ln in loop_ir.splitlines() if needle in ln)
    return (len(line) - len(line.lstrip())) // 2


def test_accumulators_stay_in_registers_across_a_whole_reduction_nest():
    # a 3-deep reduction (channels x 3 x 3, as in a conv): the accumulators are loaded
    # before the outermost reduction loop and stored after it, not reloaded every 3 steps
    X = sl.Input("X", sl.float32, (8, 10, 34))
    Wt = sl.Input("W", sl.float32, (4, 8, 3, 3))
    k, y, x = sl.vars("k y x")
    r = sl.RDom(8, 3, 3, name="r")
    out = sl.Func("out", shape=(4, 8, 32))
    out[k, y, x] = sl.sum(X[r.x, y + r.y, x + r.z] * Wt[k, r.x, r.y, r.z])
    s = sl.Schedule(out)
    acc = s[out].cache_write("local")
    s[out].reorder(y, k, x).parallel(y).vectorize(x, 16)
    s[acc].compute_at(out, y)
    s[acc].reorder(y, "r.x", "r.y", "r.z", k, x).vectorize(x, 16).unroll(k).unroll("x.o")
    kern = sl.compile(out, s)
    ir_text = kern.loop_ir
    # the accumulators are allocated around the outermost reduction loop, not inside it
    assert _loop_depth_of(ir_text, "allocate out_cache.acc") == \
        _loop_depth_of(ir_text, "for out_cache.s0.r.x ")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((8, 10, 34), dtype=np.float32)
    w = rng.standard_normal((4, 8, 3, 3), dtype=np.float32)
    ref = np.zeros((4, 8, 32), np.float32)
    for ry in range(3):
        for rx in range(3):
            ref += np.einsum("cyx,kc->kyx", a[:, ry:ry + 8, rx:rx + 32], w[:, :, ry, rx])
    np.testing.assert_allclose(kern(X=a, W=w), ref, rtol=1e-4, atol=1e-4)


def test_a_loop_that_runs_once_becomes_a_binding():
    A = sl.Input("A", sl.float32, (6, 16))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(6, 16))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    s[g].compute_at(f, y)        # g's y loop inside f's y has exactly one iteration
    kern = sl.compile(f, s)
    assert "for g.s0.y " not in kern.loop_ir
    # g's y is f's y: the store into g's one-row buffer no longer has a y term
    assert "g[g.s0.x] = A[f.s0.y * 16 + g.s0.x]" in kern.loop_ir
    a = np.random.default_rng(9).random((6, 16), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a), a * 2 + 1)


def _plane_matvec(staged=False):
    """``out[k, y, x] = sum_r W[k, r] * X[r, y, x]`` (with ``staged``: of ``g = X * 2``):
    ``(out, g or None, y, x, inputs, numpy result)``."""
    X = sl.Input("X", sl.float32, (8, 6, 40))
    W = sl.Input("W", sl.float32, (4, 8))
    c, k, y, x = sl.vars("c k y x")
    g = None
    if staged:
        g = sl.Func("g")
        g[c, y, x] = X[c, y, x] * 2
    r = sl.RDom(8, name="r")
    out = sl.Func("out", shape=(4, 6, 40))
    out[k, y, x] = sl.sum(W[k, r] * (g if staged else X)[r, y, x])
    rng = np.random.default_rng(4)
    a, w = rng.random((8, 6, 40), dtype=np.float32), rng.random((4, 8), dtype=np.float32)
    ref = np.einsum("kc,cyx->kyx", w, a) * (2 if staged else 1)
    return out, g, y, x, {"X": a, "W": w}, ref


def test_a_fused_plane_is_one_dense_vector_loop():
    # y * 40 + x with y = p // 40 and x = p % 40 is p again: whole-vector loads and stores,
    # no gathers, although vectors cross row ends (240 = 15 vectors of 16)
    out, _, y, x, inputs, ref = _plane_matvec()
    s = sl.Schedule(out)
    p = s[out].fuse(y, x, "p")
    s[out].vectorize(p, 16)
    kern = sl.compile(out, s)
    assert "X[ramp(out.s0.r * 240 + out.s0.p.o * 16, 1, 16)]" in kern.loop_ir, kern.loop_ir
    assert "// x16(40)" not in kern.loop_ir and "% x16(40)" not in kern.loop_ir
    np.testing.assert_allclose(kern(**inputs), ref, rtol=1e-5)


def test_a_plane_read_through_a_flat_index_is_one_dense_vector_loop():
    # the algorithm itself reads X[c, p // 40, p % 40] (a reshape of the plane): the
    # int32 quotient and remainder are widened to int64 for the flat index, and
    # int64(p // 40) * 40 + int64(p % 40) still folds back to int64(p)
    X = sl.Input("X", sl.float32, (8, 6, 40))
    W = sl.Input("W", sl.float32, (4, 8))
    k, p = sl.vars("k p")
    r = sl.RDom(8, name="r")
    out = sl.Func("out", shape=(4, 240))
    out[k, p] = sl.sum(W[k, r] * X[r, p // 40, p % 40])
    s = sl.Schedule(out)
    s[out].vectorize(p, 16)
    kern = sl.compile(out, s)
    assert "X[ramp(out.s0.r * 240 + out.s0.p.o * 16, 1, 16)]" in kern.loop_ir, kern.loop_ir
    assert "// x16(40)" not in kern.loop_ir and "% x16(40)" not in kern.loop_ir
    rng = np.random.default_rng(5)
    a, w = rng.random((8, 6, 40), dtype=np.float32), rng.random((4, 8), dtype=np.float32)
    np.testing.assert_allclose(kern(X=a, W=w), w @ a.reshape(8, 240), rtol=1e-5)


@pytest.mark.parametrize("tail", ["guard", "pad", "shift"])
def test_a_fused_plane_split_with_a_tail_keeps_its_range(tail):
    # 240 is not a multiple of 64: with a guard or padding the last tile runs past the
    # plane, so the row stays clamped from above (bounds inference needs the range; the
    # clamp from below cannot bind and goes); a shifted tile stays inside the plane and
    # folds like an exact split
    out, g, y, x, inputs, ref = _plane_matvec(staged=True)
    s = sl.Schedule(out)
    s[g].compute_root()
    p = s[g].fuse(y, x, "p")
    s[g].split(p, 64, tail=tail)
    kern = sl.compile(out, s)
    assert ("min((g.s0.p.o * 64 + g.s0.p.i) // 40, 5)" in kern.loop_ir) == (tail != "shift"), kern.loop_ir
    assert "max(" not in kern.loop_ir
    np.testing.assert_allclose(kern(**inputs), ref, rtol=1e-5)


def test_a_guarded_fused_plane_is_dense_in_its_steady_part_and_tiled_in_its_tail():
    # blocks of 96 pixels (tiles of 32, vectors of 16) over a 240-pixel plane: the two
    # whole blocks run dense and unclamped; in the last, partial block the whole tiles are
    # split from the guarded one, so only a single tile runs lane by lane
    out, g, y, x, inputs, ref = _plane_matvec(staged=True)
    s = sl.Schedule(out)
    s[g].compute_root()
    p = s[g].fuse(y, x, "p")
    s[g].split(p, 96, names=("pb", "pin"), tail="guard")
    s[g].split("pin", 32, names=("pt", "pv"))
    s[g].vectorize("pv", 16)
    kern = sl.compile(out, s)
    ir_text = kern.loop_ir
    assert "for g.s0.pb in [0, 2):" in ir_text    # the last block runs once, after it
    assert "X[ramp(g.s0.c * 240 + g.s0.pb * 96 + g.s0.pt * 32 + g.s0.pv.o * 16, 1, 16)]" in ir_text, ir_text
    # the last block's whole tile (pixels 192..223) folds to dense vectors too
    assert "X[ramp(g.s0.c * 240 + g.s0.pv.o * 16 + 192, 1, 16)]" in ir_text, ir_text
    assert "for g.s0.pt in [1, 3):" in ir_text
    assert ir_text.count("if ") == 1
    np.testing.assert_allclose(kern(**inputs), ref, rtol=1e-5)


def test_a_producer_of_a_per_tile_region_under_a_guarded_split_is_bounded_exactly():
    # C is computed per tile of a guarded split: min x.o*4, extent min(x.o*4+3, 12) -
    # x.o*4 + 1. Bounded apart, the last tile reaches 12 + 4 - 1 = 15 and B (at root)
    # would read A beyond its 13 values; min and extent are bounded together
    A = sl.Input("A", sl.float32, (13,))
    x = sl.Var("x")
    B, Cf = sl.Func("B"), sl.Func("Cf")
    B[x] = A[x] + 1
    Cf[x] = B[x] * 2
    f = sl.Func("f", shape=(13,))
    f[x] = Cf[x]
    s = sl.Schedule(f)
    s[f].split(x, 4, tail="guard")
    s[B].compute_root()
    s[Cf].compute_at(f, "x.o")
    a = np.arange(13, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), (a + 1) * 2)
    assert "allocate B[float32; 13]" in str(sl.lower(f, s))
    # a staged producer read per column of rows split by 3 (10 rows: a ragged last tile)
    A2 = sl.Input("A2", sl.float32, (10, 8))
    y = sl.Var("y")
    g = sl.Func("g")
    g[y, x] = A2[y, x] * 2
    C = sl.Func("C", shape=(10, 8))
    C[y, x] = g[y, x] + 1
    s = sl.Schedule(C)
    gc = s[g].cache_read(C)
    s[gc].compute_at(C, x)
    s[C].split(y, 3, tail="guard")
    a2 = np.random.default_rng(0).random((10, 8), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A2=a2), a2 * 2 + 1, rtol=1e-6)


def test_funcs_mentioned_sees_reads_writes_and_realizes_and_is_redone_for_a_new_node():
    from schedlang.algo import expr as E
    from schedlang.lower import ir
    A = sl.Input("A", sl.float32, (8,))
    x = sl.Var("x")
    g, h, k = sl.Func("g"), sl.Func("h"), sl.Func("k")
    g[x] = A[x]
    h[x] = g[x]
    k[x] = h[x]
    i = E.Var("i", sl.int64)
    zero, eight = ir.i64(0), ir.i64(8)
    write_h = ir.Provide(h, [i], E.FuncRef(g, [i]))
    loop = ir.For("i", zero, eight, "serial", write_h)
    nest = ir.Realize(k, [], "global", ir.make_block([loop, ir.Evaluate(E.Const(0, sl.int32))]))
    assert ir.funcs_mentioned(nest) == {id(g), id(h), id(k)}
    assert ir.funcs_mentioned(loop) == {id(g), id(h)}
    # a node made by replace() is a new statement: what it mentions is found again
    other = loop.replace(body=ir.Provide(k, [i], E.FuncRef(A, [i])))
    assert ir.funcs_mentioned(other) == {id(k), id(A)}
    assert ir.funcs_mentioned(loop) == {id(g), id(h)}


def _distinct_nodes(stmt):
    from schedlang.lower import ir as L
    from schedlang.algo import expr as E
    seen = set()

    def on_stmt(s):
        for e in L.stmt_exprs(s):
            E.walk_expr(e, lambda n: seen.add(id(n)))
    L.walk_stmt(stmt, on_stmt)
    return len(seen)


def test_inline_funcs_read_twice_stay_shared_expressions():
    # h[i] = g[i] * g[i] through 16 inline Funcs: expanded apart, 2**16 leaves (lowering
    # took 17 s, compiling 23 s more); shared, a few nodes per level
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    g = A
    for n in range(16):
        h = sl.Func(f"g{n}")
        h[i] = g[i] * g[i]
        g = h
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = g[i]
    assert _distinct_nodes(sl.lower(f, sl.Schedule(f))) < 200
    a = np.full(3, 1.0001, np.float32)
    want = a.copy()
    for _ in range(16):
        want = want * want
    np.testing.assert_allclose(sl.compile(f, sl.Schedule(f))(A=a), want, rtol=1e-4)


def test_vectorizing_a_shared_sub_expression_keeps_it_shared():
    # 12 Newton steps for 1/sqrt(x) reuse y three times each: vectorized as a tree, the
    # work tripled per step (10 steps: 26 s to compile)
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    x = A[i]
    y = x * 0.0 + 1.0
    for _ in range(12):
        y = y * (1.5 - 0.5 * x * y * y)
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = y
    s = sl.Schedule(f)
    s[f].vectorize(i, 8)
    assert _distinct_nodes(sl.lower(f, s)) < 400
    np.testing.assert_allclose(sl.compile(f, s)(A=np.full(16, 0.25, np.float32)), 2.0, rtol=1e-5)


def test_a_packed_panel_read_through_a_split_index_folds_to_one_base():
    # a 6-row panel of A, packed Ap[i // 6, k, i % 6]: with i split by 6 and unrolled, each
    # row's read is the panel's base plus a constant (no quotient, no remainder), so the
    # six broadcasts of a micro-kernel share one address register
    m, n, kk = 12, 16, 8
    A = sl.Input("A", sl.float32, (m, kk))
    B = sl.Input("B", sl.float32, (kk, n))
    i, j, it, kx, ii = sl.vars("i j it kx ii")
    k = sl.RDom(kk, name="k")
    Ap = sl.Func("Ap")
    Ap[it, kx, ii] = A[6 * it + ii, kx]
    C = sl.Func("C", shape=(m, n))
    C[i, j] = sl.cast(sl.float32, 0)
    C[i, j] += Ap[i // 6, k, i % 6] * B[k, j]
    s = sl.Schedule(C)
    u = s[C].update(0)
    u.split(i, 6, names=("io", "ii"))
    u.reorder("io", k, "ii", j).vectorize(j, 8).unroll("ii")
    s[Ap].compute_at(u, "io")
    kern = sl.compile(C, s)
    reads = re.findall(r"Ap\[([^]]*)\]", kern.loop_ir.split("for C.s1.k")[1])
    assert len(reads) == 6, kern.loop_ir
    assert not any("//" in r or "%" in r for r in reads), reads
    assert [r[len(reads[0]):] for r in reads] == ["", " + 1", " + 2", " + 3", " + 4", " + 5"]
    rng = np.random.default_rng(3)
    a, b = rng.random((m, kk), dtype=np.float32), rng.random((kk, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)
