"""Schedules as data (SPEC section 2): s.trace, str(s) as replayable Python source,
to_json / from_json, custom loop names."""
import json

import numpy as np
import pytest

import schedlang as sl

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def build_gemm():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return dict(A=A, B=B, C=C, i=i, j=j, k=k), C


def build_blur():
    A = sl.Input("A", sl.float32, (21, 35))
    y, x = sl.vars("y x")
    blur_x = sl.Func("blur_x")
    blur_x[y, x] = (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3
    blur_y = sl.Func("blur_y", shape=(19, 33))
    blur_y[y, x] = (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) / 3
    return dict(A=A, blur_x=blur_x, blur_y=blur_y, y=y, x=x), blur_y


def build_update():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    f[y, x] = f[y, x] * 3
    return dict(A=A, g=g, f=f, y=y, x=x), f


# Each schedule: (builder, apply(s, ns) -> number of directives applied, inputs(), reference)

def gemm_spec(s, n):
    C, i, j, k = n["C"], n["i"], n["j"], n["k"]
    io, ii = s[C].split(i, 32)
    jo, ji = s[C].split(j, 64)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji, 16).unroll(ki).parallel(io)
    return 7


def gemm_caches(s, n):
    A, B, C = n["A"], n["B"], n["C"]
    Ac = s[A].cache_read(C)
    s[Ac].compute_root()
    Bc = s[B].cache_read(C, memory="global")
    s[Bc].compute_at(C, "i")
    Cl = s[C].cache_write(memory="local")
    s[Cl].compute_at(C, "i")
    s[Cl].vectorize("j", 4)
    return 7


def gemm_names(s, n):
    C, i, j, k = n["C"], n["i"], n["j"], n["k"]
    io, ii = s[C].split(i, 4, names=("io", "ii"))
    jo, ji = s[C].split(j, 8, tail="guard", names=("jo", "ji"))
    s[C].reorder(io, jo, ii, k, ji)
    s[C].vectorize("ji").parallel("io")
    return 5


def blur_tiled(s, n):
    bx, by, y, x = n["blur_x"], n["blur_y"], n["y"], n["x"]
    yo, xo, yi, xi = s[by].tile(y, x, 8, 16)
    s[by].vectorize(xi, 8).parallel(yo)
    s[bx].compute_at(by, xo).vectorize(x, 8)
    return 5


def blur_store(s, n):
    bx, by, y, x = n["blur_x"], n["blur_y"], n["y"], n["x"]
    yo, yi = s[by].split(y, 4, tail="shift")
    s[bx].store_at(by, yo).compute_at(by, yi)
    s[bx].unroll(x, 3)
    return 4


def update_sched(s, n):
    g, f, y, x = n["g"], n["f"], n["y"], n["x"]
    s[f].unroll(y, 2)
    s[g].compute_at(f, "y.o")
    s[g].split(x, 4, tail="guard")
    s[f].update(0).vectorize(x, 8)
    s[f].update(0).parallel(y)
    return 5


def gemm_io():
    a, b = rand(19, 13), rand(13, 23)
    return dict(A=a, B=b), a @ b


def blur_io():
    a = rand(21, 35)
    bx = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) / 3
    return dict(A=a), (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def update_io():
    a = rand(9, 14)
    return dict(A=a), (a * 2 + 1) * 3


CASES = {
    "gemm_spec": (build_gemm, gemm_spec, gemm_io),
    "gemm_caches": (build_gemm, gemm_caches, gemm_io),
    "gemm_names": (build_gemm, gemm_names, gemm_io),
    "blur_tiled": (build_blur, blur_tiled, blur_io),
    "blur_store": (build_blur, blur_store, blur_io),
    "update": (build_update, update_sched, update_io),
}


def _run(out, s, io):
    args, ref = io
    res = sl.compile(out, s)(**args)
    np.testing.assert_allclose(res, ref, rtol=1e-4, atol=1e-4)
    return res


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_has_one_entry_per_directive(case):
    build, apply, io = CASES[case]
    ns, out = build()
    s = sl.Schedule(out)
    assert len(s.trace) == 0
    n = apply(s, ns)
    assert len(s.trace) == n
    assert len([ln for ln in str(s).splitlines() if ln.strip()]) == n


@pytest.mark.parametrize("case", sorted(CASES))
def test_str_replays_on_a_fresh_schedule(case):
    build, apply, io = CASES[case]
    ns, out = build()
    s = sl.Schedule(out)
    apply(s, ns)
    s2 = sl.Schedule(out)
    exec(str(s), {"sl": sl, "s": s2, **ns})
    assert str(s2) == str(s)
    assert len(s2.trace) == len(s.trace)
    data = io()
    r1 = _run(out, s, data)
    r2 = _run(out, s2, data)
    np.testing.assert_array_equal(r1, r2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_str_replays_on_a_freshly_built_algorithm(case):
    build, apply, io = CASES[case]
    ns, out = build()
    s = sl.Schedule(out)
    apply(s, ns)
    ns2, out2 = build()
    s2 = sl.Schedule(out2)
    exec(str(s), {"sl": sl, "s": s2, **ns2})
    assert str(s2) == str(s)
    data = io()
    np.testing.assert_array_equal(_run(out, s, data), _run(out2, s2, data))


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_round_trip_same_algorithm(case):
    build, apply, io = CASES[case]
    ns, out = build()
    s = sl.Schedule(out)
    apply(s, ns)
    text = s.to_json()
    json.loads(text)                       # it is plain JSON data
    s2 = sl.Schedule.from_json(text, out)
    assert str(s2) == str(s)
    assert s2.to_json() == text
    assert len(s2.trace) == len(s.trace)
    data = io()
    np.testing.assert_array_equal(_run(out, s, data), _run(out, s2, data))


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_round_trip_onto_freshly_built_algorithm(case):
    build, apply, io = CASES[case]
    ns, out = build()
    s = sl.Schedule(out)
    apply(s, ns)
    ns2, out2 = build()                     # new Func objects with the same names
    s2 = sl.Schedule.from_json(s.to_json(), out2)
    assert str(s2) == str(s)
    data = io()
    np.testing.assert_array_equal(_run(out, s, data), _run(out2, s2, data))


def test_json_survives_a_text_round_trip_through_a_file(tmp_path):
    ns, C = build_gemm()
    s = sl.Schedule(C)
    gemm_spec(s, ns)
    p = tmp_path / "sched.json"
    p.write_text(s.to_json())
    ns2, C2 = build_gemm()
    s2 = sl.Schedule.from_json(p.read_text(), C2)
    assert s2.to_json() == s.to_json()


def test_empty_schedule():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    assert s.trace == [] or len(s.trace) == 0
    s2 = sl.Schedule(C)
    exec(str(s), {"sl": sl, "s": s2, **ns})
    assert str(s2) == str(s)
    s3 = sl.Schedule.from_json(s.to_json(), C)
    assert len(s3.trace) == 0
    _run(C, s3, gemm_io())


def test_default_split_names():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    io, ii = s[C].split(ns["i"], 4)
    assert io.name == "i.o" and ii.name == "i.i"
    ko, ki = s[C].split(ns["k"], 2)
    assert ko.name == "k.o" and ki.name == "k.i"
    assert "'i.o'" in str(s) and "'i.i'" in str(s)


def test_custom_split_names():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    io, ii = s[C].split(ns["i"], 32, names=("io", "ii"))
    assert io.name == "io" and ii.name == "ii"
    s[C].vectorize("ii", 8)
    s[C].parallel(io)
    src = str(s)
    assert "names=('io', 'ii')" in src
    assert "i.o" not in src
    with pytest.raises(sl.ScheduleError) as e:
        s[C].unroll("i.o")
    assert "io" in str(e.value) and "ii" in str(e.value)
    _run(C, s, gemm_io())
    # replay keeps the custom names
    s2 = sl.Schedule(C)
    exec(src, {"sl": sl, "s": s2, **ns})
    assert str(s2) == src
    s3 = sl.Schedule.from_json(s.to_json(), C)
    assert str(s3) == src


def test_custom_tile_names_through_replay():
    ns, out = build_blur()
    s = sl.Schedule(out)
    s[out].split("y", 4, names=("ty", "yy"))
    s[out].split("x", 8, names=("tx", "xx"))
    s[out].reorder("ty", "tx", "yy", "xx")
    s[ns["blur_x"]].compute_at(out, "tx")
    ns2, out2 = build_blur()
    s2 = sl.Schedule.from_json(s.to_json(), out2)
    assert str(s2) == str(s)
    data = blur_io()
    np.testing.assert_array_equal(_run(out, s, data), _run(out2, s2, data))


def test_rejected_directive_is_not_in_trace():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    s[C].split(ns["i"], 4)
    with pytest.raises(sl.ScheduleError):
        s[C].vectorize(ns["k"])
    with pytest.raises(sl.ScheduleError):
        s[C].split("zz", 4)
    assert len(s.trace) == 1
    assert len(str(s).strip().splitlines()) == 1


def test_trace_records_update_stage():
    ns, f = build_update()
    s = sl.Schedule(f)
    s[f].update(0).vectorize("x", 4)
    assert len(s.trace) == 1
    assert "update(0)" in str(s)


def test_from_json_for_another_output_is_rejected():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    gemm_spec(s, ns)
    ns2, blur_y = build_blur()
    with pytest.raises(sl.ScheduleError):
        sl.Schedule.from_json(s.to_json(), blur_y)


def test_from_json_garbage_is_rejected():
    ns, C = build_gemm()
    with pytest.raises(sl.ScheduleError):
        sl.Schedule.from_json("{not json", C)


def test_from_json_replays_legality_checks():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    s[C].split(ns["i"], 4)
    doc = json.loads(s.to_json())
    # tamper: vectorize the reduction variable
    bad = dict(doc["directives"][0])
    bad.update(op="vectorize", args=["k"], kwargs={})
    doc["directives"].append(bad)
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule.from_json(json.dumps(doc), C)
    assert "vectorize(k)" in str(e.value)


def test_from_json_unknown_directive_is_rejected():
    ns, C = build_gemm()
    doc = json.loads(sl.Schedule(C).to_json())
    doc["directives"] = [{"func": "C", "stage": 0, "op": "__class__", "args": [], "kwargs": {}}]
    with pytest.raises(sl.ScheduleError):
        sl.Schedule.from_json(json.dumps(doc), C)


def test_str_and_json_do_not_depend_on_var_objects_vs_strings():
    ns, C = build_gemm()
    s1 = sl.Schedule(C)
    io, ii = s1[C].split(ns["i"], 8)
    s1[C].reorder(ns["j"], io, ii, ns["k"])
    s2 = sl.Schedule(C)
    s2[C].split("i", 8)
    s2[C].reorder("j", "i.o", "i.i", "k")
    assert str(s1) == str(s2)
    assert s1.to_json() == s2.to_json()


@pytest.mark.parametrize("fname", ["class", "lambda", "s"])
def test_str_is_valid_python_for_any_func_name(fname):
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func(fname)
    g[x] = A[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].vectorize(x, 4)
    src = str(s)
    compile(src, "<schedule>", "exec")
    s2 = sl.Schedule(f)
    ns = {"sl": sl, "s": s2, "A": A, "f": f, "x": x}
    if fname.isidentifier() and fname not in ("s", "sl") and fname not in __import__(
            "keyword").kwlist:
        ns[fname] = g
    exec(src, ns)
    assert str(s2) == src


@pytest.mark.parametrize("fname", ["blur-x", "g2"])
def test_str_replays_for_unusual_but_legal_func_names(fname):
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func(fname)
    g[x] = A[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].vectorize(x, 4)
    s2 = sl.Schedule(f)
    ns = {"sl": sl, "s": s2, "A": A, "f": f, "x": x}
    if fname.isidentifier():
        ns[fname] = g
    exec(str(s), ns)
    assert str(s2) == str(s)
    a = rand(13)
    np.testing.assert_allclose(sl.compile(f, s2)(A=a), a * 2 + 1, rtol=1e-6)


def _unnamed_scan():
    # the SPEC's scan, with an unnamed Func and an unnamed RDom: automatic names (f7, r3)
    # come from a process-wide counter, so each build gets new ones
    g = sl.Input("g", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func(shape=(g.shape[0],))
    f[x] = g[x]
    r = sl.RDom((1, g.shape[0] - 1))
    f[r] = f[r - 1] + g[r]
    total = sl.Func(shape=(g.shape[0],))
    total[x] = f[x] * 2
    return total, f, r, x


def test_json_replays_onto_a_rebuild_whose_automatic_names_differ():
    total, f, r, x = _unnamed_scan()
    s = sl.Schedule(total)
    s[f].compute_root().vectorize(x, 8)
    s[total].split(x, 4)
    s[f].update(0).unroll(r, 2)
    total2, f2, r2, _ = _unnamed_scan()
    assert (f2.name, r2.name) != (f.name, r.name)
    s2 = sl.Schedule.from_json(s.to_json(), total2)
    assert str(s2) == str(s).replace(f.name, f2.name).replace(r.name, r2.name).replace(
        total.name, total2.name)
    g = np.arange(1, 30, dtype=np.float32)
    np.testing.assert_allclose(sl.compile(total2, s2)(g=g), np.cumsum(g) * 2)


# --- a stage handle kept in a variable (st = s[C]) across cache_write / rfactor -----------

def _replays_to_the_same_loops(s, out, build):
    want = str(sl.lower(out, s))
    ns, fresh = build()
    again = sl.Schedule(fresh)
    exec(str(s), {"sl": sl, "s": again, **ns})
    assert str(sl.lower(fresh, again)) == want
    fresh = build()[1]
    assert str(sl.lower(fresh, sl.Schedule.from_json(s.to_json(), fresh))) == want


def test_a_handle_kept_across_cache_write_still_schedules_the_func():
    ns, C = build_gemm()
    s = sl.Schedule(C)
    st = s[C]
    cache = st.cache_write("local")
    jo, ji = st.split(ns["j"], 4)
    st.vectorize(ji)
    s[cache].compute_at(C, jo)
    assert st is s[C] and [d.name for d in st.dims] == ["i", "j.o", "j.i"]
    assert [d.name for d in s[cache].dims] == ["i", "j", "k"]
    assert "s[C].split('j', 4" in str(s)
    _replays_to_the_same_loops(s, C, build_gemm)
    a, b = rand(5, 3), rand(3, 8)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-5)


def test_a_handle_kept_across_rfactor_still_schedules_the_func():
    def build():
        x = sl.Var("x")
        A = sl.Input("A", sl.float32, ("M", "N"))
        r = sl.RDom(A.shape[1], name="r")
        f = sl.Func("f", shape=(A.shape[0],))
        f[x] = sl.sum(A[x, r])
        return dict(A=A, f=f, x=x, r=r), f
    ns, f = build()
    s = sl.Schedule(f)
    st = s[f]
    st.split(ns["r"], 8)
    st.rfactor("r.i")
    st.parallel(ns["x"])
    assert st is s[f] and "parallel for f.s0.x" in str(sl.lower(f, s))
    _replays_to_the_same_loops(s, f, build)
    a = rand(6, 19)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a.sum(axis=1), rtol=1e-5)


def test_a_handle_of_an_update_stage_that_cache_write_moved_is_refused():
    ns, f = build_update()
    s = sl.Schedule(f)
    upd = s[f].update(0)
    s[f].cache_write("global")
    with pytest.raises(sl.ScheduleError) as e:
        upd.split(ns["x"], 4)
    assert ("split on f.update(0): cache_write on f moved its update stages to f_cache; this "
            "stage no longer exists") in str(e.value)
    with pytest.raises(sl.ScheduleError):
        upd.parallel("y")
    assert [d.op for d in s.trace] == ["cache_write"]


def test_str_of_a_schedule_replays_onto_a_rebuilt_scan_with_an_unnamed_rdom():
    # SPEC section 1's scan names no RDom: its loops must be named the same way each time
    # the algorithm is built, or str(s) would name loops the rebuilt algorithm lacks
    def build():
        G = sl.Input("G", sl.float32, ("N",))
        x = sl.Var("x")
        f = sl.Func("f", shape=(G.shape[0],))
        f[x] = G[x]
        r = sl.RDom((1, G.shape[0] - 1))
        f[r] = f[r - 1] + G[r]
        return dict(G=G, x=x, f=f, r=r), f
    ns, f = build()
    s = sl.Schedule(f)
    s[f].update(0).split(ns["r"], 4)
    _replays_to_the_same_loops(s, f, build)
    g = rand(11)
    np.testing.assert_allclose(sl.compile(f, s)(G=g), np.cumsum(g), rtol=1e-5)


def test_unnamed_rdoms_of_one_definition_get_distinct_names():
    A = sl.Input("A", sl.float32, ("M", "N"))
    x = sl.Var("x")
    r1, r2 = sl.RDom(A.shape[1]), sl.RDom(A.shape[1])
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = sl.sum(A[x, r1]) + sl.maximum(A[x, r2])
    assert {r1.name, r2.name} == {"r", "r1"}
    r = sl.RDom(4, 2)
    below = r.where(r.x > r.y)
    h = sl.Func("h", shape=())
    h[()] = sl.sum(A[0, below.x] * below.y)
    assert [v.name for v in below.vars] == [v.name for v in r.vars] == ["r.x", "r.y"]
    a = rand(3, 4)
    np.testing.assert_allclose(sl.compile(g)(A=a), a.sum(1) + a.max(1), rtol=1e-5)


def test_str_replays_onto_a_rebuilt_algorithm_with_unnamed_funcs():
    # sl.Func() without a name is named by the first Schedule that covers it (f, f1, ...,
    # its inline reductions' helpers after it), so the same algorithm built again gets the
    # same names and str(s) replays onto it
    def build():
        A = sl.Input("A", sl.float32, ("M", "N"))
        i, j = sl.vars("i j")
        k, m = sl.RDom(A.shape[1], name="k"), sl.RDom(A.shape[1], name="m")
        g = sl.Func()
        g[i, j] = A[i, j] * 2 + sl.sum(A[i, k]) * sl.maximum(A[i, m])
        h = sl.Func()
        h[i, j] = g[i, j] + 1
        out = sl.Func("f", shape=(A.shape[0], A.shape[1]))
        out[i, j] = h[i, j] - A[i, j]
        return dict(A=A, i=i, j=j, k=k, m=m, g=g, h=h, f=out), out
    ns, out = build()
    s = sl.Schedule(out)
    g, h = ns["g"], ns["h"]
    assert (h.name, g.name) == ("f1", "f2")     # "f" is the output's; discovery order
    assert [f.name for f in g.helpers] == ["f2_maximum0"]
    s[g].compute_root().vectorize(ns["j"], 8)
    s[h].compute_at(out, ns["i"])
    s[g.helpers[0]].compute_at(g, ns["i"])
    # no variable of the user's holds them by these names: str(s) names them by string
    assert "s['f2'].compute_root()" in str(s) and "s['f1'].compute_at(f, 'i')" in str(s)
    assert "s['f2_maximum0'].compute_at('f2', 'i')" in str(s)
    _replays_to_the_same_loops(s, out, build)
    a = rand(5, 12)
    want = a * 2 + a.sum(1, keepdims=True) * a.max(1, keepdims=True) + 1 - a
    np.testing.assert_allclose(sl.compile(out, s)(A=a), want, rtol=1e-5)


def test_two_unnamed_funcs_named_alike_by_separate_schedules_are_refused_by_name():
    A = sl.Input("A", sl.float32, (8,))
    x = sl.Var("x")
    outs = []
    for n in ("o1", "o2"):
        p = sl.Func()
        p[x] = A[x] + 1
        o = sl.Func(n, shape=(8,))
        o[x] = p[x]
        sl.Schedule(o)          # names p "f"
        outs.append(o)
    with pytest.raises(sl.ScheduleError, match=r"both named 'f' \(an unnamed sl\.Func\(\) is "
                       r"named f, f1, \.\.\. by the first Schedule.*sl\.Func\(\"name\"\)"):
        sl.Schedule(*outs)


def test_sl_assume_facts_are_directives_of_the_schedule_and_replay():
    # SPEC section 2 lists sl.assume among the primitives: its fact about the pipeline is
    # in s.trace, str(s) and to_json, and a replay gives the same loop nest (no tail loop)
    def build(assume=True):
        A = sl.Input("A", sl.float32, ("H", "W"))
        y, x = sl.vars("y x")
        f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
        f[y, x] = A[y, x] + 1
        if assume:
            sl.assume(A.shape[1] % 8 == 0)
        return dict(A=A, y=y, x=x, f=f), f
    ns, f = build()
    s = sl.Schedule(f)
    s[f].vectorize(ns["x"], 8)
    assert [d.op for d in s.trace] == ["assume", "vectorize"]
    assert str(s).startswith("s.assume('((W % 8) == 0)')")      # as written, no int64 casts
    _replays_to_the_same_loops(s, f, build)                         # the rebuild assumes too
    _replays_to_the_same_loops(s, f, lambda: build(assume=False))   # the replay brings it
    assert "if " not in str(sl.lower(f, s))       # W % 8 == 0: no tail guard
    again = sl.Schedule(f)
    exec(str(s), {"sl": sl, "s": again, **ns})
    assert str(again) == str(s)          # a fact already held is not recorded twice
    with pytest.raises(sl.ArgumentError, match="W"):
        sl.compile(f, s)(A=np.zeros((2, 12), np.float32))


@pytest.mark.parametrize("fact, match", [
    (lambda A, x: x >= 1, r"sl.assume\(x >= 1\): x is a loop variable; a fact is about sizes"),
    (lambda A, x: sl.cast(sl.bool, 0), r"mentions no size or Param"),
    (lambda A, x: A.shape[0] + 1, r"must be a bool expression"),
])
def test_sl_assume_refuses_facts_it_could_never_check(fact, match):
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    with pytest.raises(sl.AlgorithmError, match=match):
        sl.assume(fact(A, x))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    with pytest.raises(sl.ScheduleError, match=match.replace("sl.assume", "assume")):
        sl.Schedule(f).assume(fact(A, x))


def _assume_doc(fact, output="h"):
    return json.dumps({"schedlang_schedule": 1, "outputs": [output], "directives": [
        {"func": "", "stage": 0, "op": "assume", "args": [fact], "kwargs": {}}]})


def _fact_pipeline():
    A = sl.Input("A", sl.float32, ("N",))
    p = sl.Param("p", sl.int32)
    x = sl.Var("x")
    h = sl.Func("h", shape=(A.shape[0],))
    h[x] = A[x] * sl.cast(sl.float32, p)
    return A, p, h


def test_every_printed_fact_form_replays_from_json_and_python():
    A, p, h = _fact_pipeline()
    s = sl.Schedule(h)
    for fact in [A.shape[0] % 16 == 0, (p > 0) & (p < 10), sl.min(p, 3) >= 1,
                 sl.max(A.shape[0] * 2 - 3, 1) > 0, ~(p == 3), sl.cast(sl.int64, p) < 2**40,
                 p // 2 != 1, sl.abs(p) < 4, sl.select(p > 1, p, 2) > 0, (p << 2) > 1,
                 -p < 0, sl.clamp(p, 0, 9) <= 9]:
        s.assume(fact)
    back = sl.Schedule.from_json(s.to_json(), h)
    assert str(back) == str(s)
    ns = {"sl": sl, "s": sl.Schedule(h), "A": A, "p": p, "h": h}
    exec(str(s), ns)
    assert str(ns["s"]) == str(s)


@pytest.mark.parametrize("fact, says", [
    # a schedule read from JSON (or the tuning database) is data: its facts never run
    ("(().__class__.__base__.__subclasses__(), N > 0)[1]", "is not allowed"),
    ("__import__('os').system('true') > 0", "is not allowed"),
    ("N.__class__", "is not allowed"),
    ("open('/tmp/x', 'w')", "is not allowed"),
    ("lambda: 1", "is not allowed"),
    ("Z > 1", "'Z' is not a size or Param of this pipeline"),
    ("N > ", "SyntaxError"),
    ("(" * 2000 + "N" + ")" * 2000, "cannot rebuild the fact"),
    ("-" * 3000 + "N > 0", "cannot rebuild the fact"),
    ("N" + " + 1" * 20000 + " > 0", "a fact must be the text of an expression"),
])
def test_a_fact_read_from_json_is_parsed_as_data_never_run(fact, says):
    A, p, h = _fact_pipeline()
    with pytest.raises(sl.ScheduleError, match=r"assume\(") as e:
        sl.Schedule.from_json(_assume_doc(fact), h)
    assert says in str(e.value)
    assert len(str(e.value)) < 400                      # a long fact is cut in the message


def test_from_json_of_deeply_nested_json_is_a_schedule_error():
    A, p, h = _fact_pipeline()
    with pytest.raises(sl.ScheduleError, match="nests too deeply"):
        sl.Schedule.from_json("[" * 100000 + "]" * 100000, h)


def test_a_func_named_like_a_var_is_printed_by_string():
    # the replay namespace binds the name x once (to the Var): str(s) names the Func 'x'
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("x")
    f[x] = A[x] * 2
    h = sl.Func("h", shape=(A.shape[0],))
    h[x] = f[x] + 1
    s = sl.Schedule(h)
    s[h].vectorize(x, 4)
    s[f].compute_at(h, "x.o")
    assert str(s) == "s[h].vectorize('x', 4)\ns['x'].compute_at(h, 'x.o')\n"
    ns = {"sl": sl, "s": sl.Schedule(h), "A": A, "x": x, "h": h}
    exec(str(s), ns)
    assert str(ns["s"]) == str(s)


@pytest.mark.parametrize("names", ["abc", [1, 2], {"h": 1}])
def test_from_json_with_malformed_names_says_so(names):
    A, p, h = _fact_pipeline()
    doc = json.loads(sl.Schedule(h).to_json())
    doc["names"] = names
    with pytest.raises(sl.ScheduleError, match=r'Schedule.from_json: "names" must be a list of '
                                               r"the pipeline's Func, Input and RDom names"):
        sl.Schedule.from_json(json.dumps(doc), h)


@pytest.mark.parametrize("param_name, size_name", [
    ("my-alpha", "M"), ("class", "lambda"), ("a.b", "None"), ("name", "sl"), ("é", "M")])
def test_facts_about_names_that_are_not_identifiers_replay(param_name, size_name):
    # a fact printed with a bare "my-alpha" could not be parsed back: such names are
    # quoted as name('my-alpha'), in str(s) and in JSON alike
    A = sl.Input("A", sl.float32, (size_name,))
    a = sl.Param(param_name, sl.float32)
    i = sl.Var("i")
    C = sl.Func("C", shape=(A.shape[0],))
    C[i] = A[i] * a
    sl.assume(a > 0)
    s = sl.Schedule(C)
    s.assume(A.shape[0] % 2 == 0)
    s[C].vectorize(i, 4)
    assert f"name({param_name!r})" in str(s)
    from_json = sl.Schedule.from_json(s.to_json(), C)
    replayed = sl.Schedule(C)
    exec(str(s), {"sl": sl, "s": replayed, "C": C, "A": A, "i": i})
    for t in (from_json, replayed):
        assert str(sl.lower(C, t)) == str(sl.lower(C, s))
        out = sl.compile(C, t)(A=np.ones(4, np.float32), **{param_name: 2.0})
        np.testing.assert_array_equal(out, 2.0)
    with pytest.raises(sl.ArgumentError, match="violate assume"):
        sl.compile(C, from_json)(A=np.ones(4, np.float32), **{param_name: -1.0})


def test_a_func_name_with_a_trailing_newline_is_not_printed_bare():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    C = sl.Func("C\n", shape=(A.shape[0],))
    C[i] = A[i] * 2
    s = sl.Schedule(C)
    s[C].vectorize(i, 4)
    assert "s[C\n]" not in str(s)
    replayed = sl.Schedule(C)
    namespace = {"sl": sl, "s": replayed, "A": A, "i": i}
    namespace.update({"C\n": C})
    exec(str(s), namespace)
    assert replayed.to_json() == s.to_json()
    with pytest.raises(sl.AlgorithmError, match="identifier"):
        sl.Input("B", sl.float32, ("M\n",))


@pytest.mark.parametrize("make", [
    lambda: sl.Var("i\x00"), lambda: sl.Func("C\x00"), lambda: sl.Param("p\x00", sl.int32),
    lambda: sl.Input("A\x00", sl.float32, (4,)), lambda: sl.RDom(4, name="r\x00")])
def test_a_name_with_a_nul_character_is_refused_where_it_is_made(make):
    with pytest.raises(sl.AlgorithmError, match="NUL character"):
        make()


def test_loop_names_given_to_split_and_fuse_are_checked_at_the_directive():
    env, C = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError, match=r"split\(i, 4\) on C: names=.*NUL"):
        s[C].split(env["i"], 4, names=("a\x00", "b"))
    with pytest.raises(sl.ScheduleError, match=r"fuse\(i, j\) on C: name=\.\.\. must give "
                                               r"non-empty str names.*got 3"):
        s[C].fuse(env["i"], env["j"], name=3)
    assert not s.trace


@pytest.mark.parametrize("lo, extent", [(0, 10 ** 20), (2 ** 31 - 4, 8), (-2 ** 40, 4)])
def test_bound_outside_the_int32_range_is_refused_at_the_directive(lo, extent):
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f")
    f[x] = A[x] * 2
    C = sl.Func("C", shape=(A.shape[0],))
    C[x] = f[x]
    s = sl.Schedule(C)
    s[f].compute_root()
    with pytest.raises(sl.ScheduleError, match=rf"bound\(x, {lo}, {extent}\) on f: .*int32"):
        s[f].bound(x, lo, extent)


@pytest.mark.parametrize("args, says", [
    ([["M > 0"]], "a recorded fact is one str"),
    ([{"a": 1}], "a recorded fact is one str"),
    (["M > 99999999999999999999999999"], "does not fit"),
    (["sl.cast(5, M) > 0"], "not a schedlang type"),
])
def test_a_tampered_assume_in_json_says_which_directive(args, says):
    env, C = build_gemm()
    s = sl.Schedule(C)
    s.assume(env["A"].shape[0] > 0)
    data = json.loads(s.to_json())
    data["directives"][0]["args"] = args
    with pytest.raises(sl.ScheduleError, match=rf"from_json: directive 0.*{says}"):
        sl.Schedule.from_json(json.dumps(data), C)


@pytest.mark.parametrize("version", ["1", True, 1.0, 2, None])
def test_from_json_takes_only_the_int_format_version_1(version):
    env, C = build_gemm()
    data = json.loads(sl.Schedule(C).to_json())
    data["schedlang_schedule"] = version
    with pytest.raises(sl.ScheduleError, match=r"unsupported schedule format version .*"
                                               r"reads \"schedlang_schedule\": 1 \(the int\)"):
        sl.Schedule.from_json(json.dumps(data), C)
