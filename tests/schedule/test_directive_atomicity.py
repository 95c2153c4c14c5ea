"""A directive is either applied and recorded in ``s.trace``, or rejected at the call with a
ScheduleError naming the directive the user called, leaving the schedule exactly as it was
(SPEC section 2). Covers compound directives (tile, gpu_tile, vectorize / unroll with a
width), legality that can be known at the call (symbolic vectorize extents, store level vs
compute level, races on shared storage), the qualified loop spellings that "Legal locations"
prints, and malformed JSON schedules."""
import json

import numpy as np
import pytest

import schedlang as sl
from test_pipelines import blur_ref, build_blur


def build_small():
    y, x = sl.vars("y x")
    A = sl.Input("A", sl.float32, (8, 8))
    f = sl.Func("f", shape=(8, 8))
    f[y, x] = A[y, x] * 2
    return A, f, y, x


def build_symbolic():
    y, x = sl.vars("y x")
    A = sl.Input("A", sl.float32, ("H", "W"))
    g = sl.Func("g", shape=(A.shape[0], A.shape[1]))
    g[y, x] = A[y, x] + 1
    return A, g, y, x


def build_scan():
    """A scan whose update reads the Func G: f[r] = f[r - 1] + G[r]."""
    x, = sl.vars("x")
    A = sl.Input("A", sl.float32, (8,))
    G = sl.Func("G")
    G[x] = A[x] * 3
    f = sl.Func("f", shape=(8,))
    f[x] = A[x]
    r = sl.RDom((1, 7), name="r")
    f[r] = f[r - 1] + G[r]
    return A, G, f, x, r


def loops_and_kinds(stage):
    return [(d.name, d.kind) for d in stage.dims]


def assert_unchanged(s, stage, loops_before, trace_before):
    assert loops_and_kinds(stage) == loops_before
    assert [repr(d) for d in s.trace] == trace_before


# --- compound directives are atomic and named by the user's call ----------------------------

def test_tile_of_one_loop_twice_is_rejected_and_changes_nothing():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].tile(y, y, 4, 4)
    msg = str(e.value)
    assert msg.startswith("tile(y, y, 4, 4) on f: "), msg
    assert "split" not in msg
    assert s.trace == [] and str(s) == ""
    assert s[f].loop_names() == ["y", "x"]


def test_tile_whose_second_split_fails_restores_the_first():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    s[f].parallel(x)
    before = loops_and_kinds(s[f]), [repr(d) for d in s.trace]
    with pytest.raises(sl.ScheduleError) as e:
        s[f].tile(y, x, 4, 4)
    msg = str(e.value)
    assert msg.startswith("tile(y, x, 4, 4) on f: x is already marked parallel"), msg
    assert_unchanged(s, s[f], *before)
    # the failed call left no half-made loop names behind: the same tile of fresh loops works
    s2 = sl.Schedule(f)
    s2[f].tile(y, x, 4, 4)
    assert s2[f].loop_names() == ["y.o", "x.o", "y.i", "x.i"]


def test_tile_whose_names_collide_restores_the_schedule():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].tile(y, x, 4, 4, names=("a", "b", "c", "a"))
    msg = str(e.value)
    assert msg.startswith("tile(y, x, 4, 4) on f: the loop name 'a' is already used"), msg
    assert s[f].loop_names() == ["y", "x"] and s.trace == []
    yo, xo, yi, xi = s[f].tile(y, x, 4, 4, names=("a", "b", "c", "d"))
    assert s[f].loop_names() == ["a", "b", "c", "d"]
    assert len(s.trace) == 1


@pytest.mark.parametrize("names", [("a", "b"), ("a", "b", "c", "d", "e"), "abcd", 5,
                                   ("a", "b", "c", 4), ("a", "", "c", "d")])
def test_tile_with_wrong_names_is_a_schedule_error(names):
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].tile(y, x, 4, 8, names=names)
    msg = str(e.value)
    assert msg.startswith("tile(y, x, 4, 8) on f: tile takes 4 names (yo, xo, yi, xi)"), msg
    assert s[f].loop_names() == ["y", "x"] and s.trace == []


@pytest.mark.parametrize("names", [5, "ab", ("a",), ("a", 1)])
def test_split_with_wrong_names_is_a_schedule_error(names):
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=r"split\(x, 4\) on f: names must be two"):
        s[f].split(x, 4, names=names)


@pytest.mark.parametrize("setup, directive, message", [
    (lambda st: st.split("y", 2, names=("x.o", "y.i")), lambda st: st.vectorize("x", 4),
     "vectorize(x, 4) on f: the loop name 'x.o' is already used"),
    (lambda st: st.gpu_threads("x"), lambda st: st.unroll("x", 4),
     "unroll(x, 4) on f: x is already marked gpu_thread"),
    (lambda st: st.parallel("x"), lambda st: st.gpu_tile("y", "x", 4, 4),
     "gpu_tile(y, x, 4, 4) on f: x is already marked parallel"),
], ids=["vectorize", "unroll", "gpu_tile"])
def test_a_compound_directive_whose_split_fails_names_itself_and_changes_nothing(
        setup, directive, message):
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    setup(s[f])
    before = loops_and_kinds(s[f]), [repr(d) for d in s.trace]
    with pytest.raises(sl.ScheduleError) as e:
        directive(s[f])
    assert str(e.value).startswith(message), str(e.value)
    assert_unchanged(s, s[f], *before)


def test_gpu_tile_of_one_loop_twice_is_rejected():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=r"gpu_tile\(y, y, 4, 4\) on f: a loop is given "
                                               "twice"):
        s[f].gpu_tile(y, y, 4, 4)
    assert s[f].loop_names() == ["y", "x"] and s.trace == []


def test_gpu_blocks_binds_nothing_when_a_later_loop_is_rejected():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=r"gpu_blocks\(zz\) on f: f has no loop named zz"):
        s[f].gpu_blocks(x, "zz")
    assert loops_and_kinds(s[f]) == [("y", "serial"), ("x", "serial")]
    with pytest.raises(sl.ScheduleError, match=r"gpu_blocks\(x, x\) on f: x is given twice"):
        s[f].gpu_blocks(x, x)
    assert loops_and_kinds(s[f]) == [("y", "serial"), ("x", "serial")]
    assert s.trace == []


def test_schedule_after_a_rejected_compound_directive_replays_and_runs():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError):
        s[f].tile(y, y, 4, 4)
    s[f].tile(y, x, 4, 4)       # the legal tile is applied as one directive
    s[f].vectorize("x.i")
    assert [d.op for d in s.trace] == ["tile", "vectorize"]
    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(f, s)(A=a), a * 2)
    replay = sl.Schedule.from_json(s.to_json(), f)
    assert str(replay) == str(s)


# --- legality known at the call -------------------------------------------------------------

def test_vectorize_of_symbolic_extent_is_rejected_at_once():
    A, g, y, x = build_symbolic()
    s = sl.Schedule(g)
    with pytest.raises(sl.ScheduleError) as e:
        s[g].vectorize(x)
    msg = str(e.value)
    assert msg.startswith("vectorize(x) on g: its extent is not a compile-time constant"), msg
    assert "W" in msg and "vectorize(x, 8)" in msg and "bound(x, 0, n)" in msg
    assert s.trace == [] and s[g].dims[1].kind == "serial"


def test_vectorize_of_split_outer_loop_of_symbolic_extent_is_rejected_at_once():
    A, g, y, x = build_symbolic()
    s = sl.Schedule(g)
    s[g].split(x, 4)
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(x\.o\) on g: .*depends on W"):
        s[g].vectorize("x.o")


def test_vectorize_of_bounded_symbolic_extent_is_accepted():
    A, g, y, x = build_symbolic()
    s = sl.Schedule(g)
    s[g].bound(x, 0, 16).vectorize(x)
    a = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(g, s)(A=a), a + 1)


@pytest.mark.parametrize("directive", ["vectorize", "unroll"])
def test_update_stage_loop_of_symbolic_output_extent_is_rejected_at_once(directive):
    x, = sl.vars("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    f[x] = f[x] * 2
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        getattr(s[f].update(0), directive)(x)
    msg = str(e.value)
    assert msg.startswith(f"{directive}(x) on f.update(0): its extent is not a compile-time "
                          "constant (it depends on N)"), msg
    assert "s[f].bound(x, 0, n)" in msg
    assert s.trace == []


def test_store_inside_compute_rejected_at_compute_at():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    s[bx].store_at(by, "y.i")
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].compute_at(by, "y.o")
    msg = str(e.value)
    assert msg.startswith("compute_at(blur_y, y.o) on blur_x: blur_x would be stored at "
                          "blur_y.y.i and computed at blur_y.y.o"), msg
    assert "y.i is inside its loop y.o" in msg and "at or outside the compute level" in msg
    assert [d.op for d in s.trace] == ["split", "store_at"]


def test_store_inside_compute_rejected_at_store_at():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    s[bx].compute_at(by, "y.o")
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].store_at(by, "y.i")
    msg = str(e.value)
    assert msg.startswith("store_at(blur_y, y.i) on blur_x: blur_x would be stored at "
                          "blur_y.y.i and computed at blur_y.y.o"), msg
    assert [d.op for d in s.trace] == ["split", "compute_at"]


def test_reorder_that_puts_store_level_inside_compute_level_is_rejected():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    s[bx].store_at(by, "y.o").compute_at(by, "y.i")
    with pytest.raises(sl.ScheduleError) as e:
        s[by].reorder("y.i", "y.o")
    msg = str(e.value)
    assert msg.startswith("reorder(y.i, y.o) on blur_y: blur_x is stored at blur_y.y.o and "
                          "computed at blur_y.y.i"), msg
    assert s[by].loop_names() == ["y.o", "y.i", "x"]


def test_parallel_loop_between_store_and_compute_level_is_rejected_at_once():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    s[bx].store_at(by, "y.o").compute_at(by, "y.i")
    with pytest.raises(sl.ScheduleError) as e:
        s[by].parallel("y.i")
    msg = str(e.value)
    assert msg.startswith("parallel(y.i) on blur_y: blur_x is stored at blur_y.y.o and "
                          "computed at blur_y.y.i"), msg
    assert "a race" in msg
    assert [d.kind for d in s[by].dims] == ["serial"] * 3
    s[by].parallel("y.o")       # outside the store level: each iteration has its own copy


def test_store_root_outside_a_parallel_compute_loop_is_rejected_at_once():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    s[by].parallel("y.o")
    s[bx].compute_at(by, "y.i")
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].store_root()
    msg = str(e.value)
    assert msg.startswith("store_root on blur_x: blur_x would be stored at root and computed "
                          "at blur_y.y.i, but blur_y's loop y.o is parallel"), msg


@pytest.mark.parametrize("store_first", [True, False])
def test_legal_store_and_compute_levels_in_either_order_run(store_first):
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    if store_first:
        s[bx].store_at(by, "y.o").compute_at(by, "y.i")
    else:
        s[bx].compute_at(by, "y.i").store_at(by, "y.o")
    a = np.random.default_rng(2).standard_normal((20, 12)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), blur_ref(a), rtol=1e-5)


def build_row_sums(rows, cols):
    """``out[i] = 2 * r[i]`` with the reduction ``r[i] = sum over k of A[i, k]``."""
    A = sl.Input("A", sl.float32, (rows, cols))
    i = sl.Var("i")
    k = sl.RDom(cols, name="k")
    r = sl.Func("r")
    r[i] = sl.sum(A[i, k])
    out = sl.Func("out", shape=(rows,))
    out[i] = r[i] * 2
    return i, r, out


def test_store_at_before_compute_at_of_a_reduction_stays_legal():
    # a reduction is computed at root by default: store_at first, then compute_at, is fine
    i, r, out = build_row_sums(16, 4)
    s = sl.Schedule(out)
    io, ii = s[out].split(i, 4)
    s[r].store_at(out, io).compute_at(out, ii)
    a = np.random.default_rng(3).standard_normal((16, 4)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(out, s)(A=a), a.sum(1) * 2, rtol=1e-5)


def test_splitting_an_inline_func_before_compute_root_stays_legal():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[bx].split(x, 4)
    s[bx].compute_root()
    a = np.random.default_rng(4).standard_normal((10, 12)).astype(np.float32)
    np.testing.assert_allclose(sl.compile(by, s)(A=a), blur_ref(a), rtol=1e-5)


# --- the loop spellings "Legal locations" prints are accepted --------------------------------

def test_legal_locations_spelling_of_an_update_loop_is_accepted():
    A, G, f, x, r = build_scan()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[G].compute_at(f, "zz")
    msg = str(e.value)
    # only the update reads G: no loop of the pure stage encloses its uses
    assert "Legal locations for G are: root, f.update(0).r" in msg, msg
    for spelled in ("f.update(0).r", "r", r):
        s = sl.Schedule(f)
        s[G].compute_at(f, spelled)
        assert s.func_schedule(G).compute[2:] == (1, "r")
        assert str(s) == "s[G].compute_at(f, 'r')\n"
    a = np.random.default_rng(5).standard_normal(8).astype(np.float32)
    want = a.copy()
    for t in range(1, 8):
        want[t] = want[t - 1] + 3 * a[t]
    np.testing.assert_allclose(sl.compile(f, s)(A=a), want, rtol=1e-5)


def test_a_loop_of_a_stage_that_does_not_read_the_producer_is_refused_at_once():
    A, G, f, x, r = build_scan()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[G].store_at(f, "f.x")
    assert ("store_at(f, x) on G: f.update(0) reads G too, outside f.x; no loop of one "
            "stage of f encloses every use of G. Legal locations for G are: root, "
            "f.update(0).r") in str(e.value)
    assert s.trace == []


def test_a_bare_loop_name_means_the_stage_that_reads_the_producer():
    # both stages loop over x; only the pure one reads G: the update's f[x] reads f's own
    # earlier values, not G, so a bare x means f.x, and f.update(0).x is refused at once
    x, = sl.vars("x")
    A = sl.Input("A", sl.float32, (8,))
    G = sl.Func("G")
    G[x] = A[x] * 3
    f = sl.Func("f", shape=(8,))
    f[x] = G[x]
    f[x] = f[x] * 2
    for spelled in (x, "x", "f.x"):
        s = sl.Schedule(f)
        s[G].compute_at(f, spelled)
        assert s.func_schedule(G).compute[2:] == (0, "x")
        assert str(s) == "s[G].compute_at(f, 'x')\n"
    assert s.legal_locations(G) == ["root", "f.x"]
    for replay in (sl.Schedule.from_json(s.to_json(), f), s.copy()):
        assert replay.func_schedule(G).compute[2:] == (0, "x")
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 6)
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[G].store_at(f, "f.update(0).x")
    assert "store_at(f, f.update(0).x) on G: f reads G too, outside f.update(0).x" in str(e.value)
    assert "Legal locations for G are: root, f.x" in str(e.value)
    assert s.trace == []


def test_a_staged_input_copy_read_by_one_stage_goes_in_that_stage():
    # cache_read(f) redirects f's own reads of A; the update reads A through p, not the
    # copy, so the copy's place is the pure stage's loop
    x, = sl.vars("x")
    A = sl.Input("A", sl.float32, ("N",))
    p = sl.Func("p")
    p[x] = A[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[x] = f[x] + p[x]
    s = sl.Schedule(f)
    c = s[A].cache_read(f, memory="global")
    s[c].compute_at(f, x)
    assert s.func_schedule(c).compute[2:] == (0, "x")
    a = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 3)


def test_a_copy_read_by_two_stages_has_no_loop_of_one_stage_to_go_in():
    x, = sl.vars("x")
    A = sl.Input("A", sl.float32, (6,))
    f = sl.Func("f", shape=(6,))
    f[x] = A[x]
    f[x] = f[x] + A[x] * 2
    s = sl.Schedule(f)
    c = s[A].cache_read(f, memory="global")
    assert s.legal_locations(c) == ["root"]
    for spelled in (x, "f.x"):
        with pytest.raises(sl.ScheduleError) as e:
            s[c].compute_at(f, spelled)
        assert "no loop of one stage of f encloses every use of A_f" in str(e.value)
        assert "Legal locations for A_f are: root" in str(e.value)
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 3)


# --- malformed JSON schedules ---------------------------------------------------------------

def small_json():
    A, f, y, x = build_small()
    s = sl.Schedule(f)
    s[f].split(x, 4)
    return f, json.loads(s.to_json())


@pytest.mark.parametrize("change, expected", [
    (lambda d: d.update(args=5), "directive 0 (split): 'args' must be a list, got 5"),
    (lambda d: d["kwargs"].update(bogus=1),
     "directive 0: split on f: the recorded arguments"),
    (lambda d: d.pop("op"), "directive 0: it has no \"op\""),
    (lambda d: d.update(op=7), "directive 0: \"op\" must be a str, got 7"),
    (lambda d: d.update(op="frobnicate"), "directive 0: unknown directive 'frobnicate'"),
    (lambda d: d.update(op="loop_names"), "directive 0: unknown directive 'loop_names'"),
    (lambda d: d.pop("func"), "directive 0 (split): it has no 'func'"),
    (lambda d: d.update(stage="0"), "directive 0 (split): 'stage' must be an int >= 0"),
    (lambda d: d.update(stage=-1), "directive 0 (split): 'stage' must be an int >= 0"),
    (lambda d: d.update(kwargs=[1]), "directive 0 (split): 'kwargs' must be an object"),
    (lambda d: d.update(kwarg={}), "directive 0 (split): unknown field(s) 'kwarg'"),
    (lambda d: d.update(args=["x"]), "missing a required argument: 'factor'"),
    (lambda d: d.update(op="assume", args=[]), "directive 0: assume: the recorded arguments"),
    (lambda d: d.update(args=["zz", 4]), "directive 0: split(zz) on f: f has no loop named zz"),
])
def test_malformed_directive_in_json_is_a_schedule_error(change, expected):
    f, data = small_json()
    change(data["directives"][0])
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule.from_json(json.dumps(data), f)
    msg = str(e.value)
    assert msg.startswith("Schedule.from_json: "), msg
    assert expected in msg, msg


def test_malformed_directive_in_json_is_reported_before_renaming():
    f, data = small_json()
    data["names"] = ["other_f", "other_A"]      # a rebuild with other automatic names
    data["directives"][0]["args"] = 5
    with pytest.raises(sl.ScheduleError, match=r"directive 0 \(split\): 'args' must be a list"):
        sl.Schedule.from_json(json.dumps(data), f)


@pytest.mark.parametrize("directives", [5, "abc", [5]])
def test_json_whose_directives_are_not_directive_objects_is_a_schedule_error(directives):
    f, data = small_json()
    data["directives"] = directives
    with pytest.raises(sl.ScheduleError, match=r"Schedule\.from_json: "):
        sl.Schedule.from_json(json.dumps(data), f)


def test_store_at_of_a_func_computed_at_the_root_is_refused_not_ignored():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[bx].compute_root()
    with pytest.raises(sl.ScheduleError, match=r"store_at\(blur_y, y\) on blur_x: it is computed at "
                                               r"the root, outside every loop.*compute_at\(blur_y, "
                                               r"y\)"):
        s[bx].store_at(by, y)
    # a reduction is computed at the root by default: store_at alone is refused at compile
    i, r, out = build_row_sums(8, 8)
    s = sl.Schedule(out)
    s[r].store_at(out, i)
    with pytest.raises(sl.ScheduleError, match=r"store_at\(out, i\) on r: r is computed at the "
                                               r"root .*add compute_at\(out, a loop inside i\)"):
        sl.compile(out, s)
