"""SPEC section 2 (printing / JSON of schedules, s[...] lookup) and section 4 (autotuning):
round 14 probes of combinations the earlier rounds did not cover."""
import pytest

import schedlang as sl


def _blur_of(view):
    A = sl.Input("A", sl.float32, (20, 30))
    y, x = sl.vars("y x")
    Ab = view(A)
    bx = sl.Func("bx")
    bx[y, x] = Ab[y, x - 1] + Ab[y, x + 1]
    out = sl.Func("out", shape=(20, 30))
    out[y, x] = bx[y - 1, x] + bx[y + 1, x]
    return A, Ab, bx, out


@pytest.mark.parametrize("view, shown", [
    (sl.clamp_edge, "sl.clamp_edge(A)"),
    (lambda A: sl.constant_exterior(A, 0.5), "sl.constant_exterior(A, 0.5)"),
    (lambda A: sl.mirror(sl.wrap(A)), "sl.mirror(sl.wrap(A))"),
])
def test_scheduling_a_boundary_view_says_it_has_no_schedule_and_what_to_do(view, shown):
    A, Ab, bx, out = _blur_of(view)
    s = sl.Schedule(out)
    for call, where in ((lambda: s[Ab], f"s[{shown}]"),
                        (lambda: s[bx].compute_at(Ab, "y"), "compute_at on bx"),
                        (lambda: s[A].cache_read(Ab), "cache_read on A")):
        with pytest.raises(sl.ScheduleError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(where), msg
        assert f"{shown} is a boundary view of A" in msg
        assert "object at 0x" not in msg
        assert "define a Func from it (e.g. g[i0, i1] = " in msg
        assert "s[A].cache_read(consumer)" in msg
    assert not s.trace


def test_a_boundary_view_passed_as_the_output_is_named_as_written():
    A, Ab, bx, out = _blur_of(sl.clamp_edge)
    with pytest.raises(sl.ScheduleError, match=r"Schedule\(\.\.\.\): sl\.clamp_edge\(A\) is "
                                               "not a Func; pass the output Func"):
        sl.Schedule(Ab)
    with pytest.raises(sl.CompileError, match=r"got sl\.clamp_edge\(A\)"):
        sl.compile(Ab)


@pytest.mark.parametrize("directive, fix", [("unroll", "unroll(x, 4)"),
                                            ("vectorize", "vectorize(x, 8)")])
def test_a_producer_loop_of_symbolic_extent_names_the_loop_in_the_fix(directive, fix):
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    getattr(s[g].compute_root(), directive)(x)
    with pytest.raises(sl.ScheduleError) as e:
        sl.lower(f, s)
    msg = str(e.value)
    assert msg.startswith(f"{directive}(x) on g: its extent is not a compile-time constant "
                          "(it is W)"), msg
    assert f"({fix}) or split it first" in msg


def test_autotune_into_a_directory_as_database_is_refused_before_tuning(tmp_path):
    A = sl.Input("A", sl.float32, (16, 16))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=(16, 16))
    C[i, j] = A[i, j] * 2
    with pytest.raises(sl.ScheduleError) as e:
        sl.autotune(C, budget_s=0.5, database=tmp_path, progress=False)
    msg = str(e.value)
    assert msg.startswith("autotune(database=") and "that is a directory" in msg, msg
    assert repr(str(tmp_path / "tuning.sqlite3")) in msg
    assert not list(tmp_path.iterdir())


def _scaled():
    A = sl.Input("A", sl.float32, (16, 16))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=(16, 16))
    C[i, j] = A[i, j] * 2
    return C, i


def test_from_json_without_outputs_names_from_json_and_says_what_to_pass():
    C, i = _scaled()
    s = sl.Schedule(C)
    s[C].split(i, 4)
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule.from_json(s.to_json())
    msg = str(e.value)
    assert msg.startswith("Schedule.from_json(text, ...): give the output Func(s)"), msg
    assert "Schedule.from_json(text, C)" in msg


def test_from_json_of_the_printed_python_says_to_exec_it_or_pass_to_json():
    C, i = _scaled()
    s = sl.Schedule(C)
    s[C].split(i, 4)
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule.from_json(str(s), C)
    msg = str(e.value)
    assert msg.startswith("Schedule.from_json: not JSON"), msg
    assert "Python text of str(s): exec it" in msg and "s.to_json()" in msg
    # what it says works
    s2 = sl.Schedule(C)
    exec(str(s), {"sl": sl, "s": s2, "C": C, "A": None, "i": i})
    assert str(s2) == str(s)


def _two_outputs():
    A = sl.Input("A", sl.float32, (16, 24))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=(16, 24))
    C[i, j] = A[i, j] + 1
    D = sl.Func("D", shape=(16, 24))
    D[i, j] = A[i, j] * 2
    return C, D, i, j


def test_from_json_with_the_outputs_listed_otherwise_never_swaps_their_directives():
    C, D, i, j = _two_outputs()
    s = sl.Schedule(C, D)
    s[C].split(i, 4, names=("ci_o", "ci_i"))
    s[D].vectorize(j, 8)
    text = s.to_json()
    # the same order replays as written, also onto a rebuild
    C2, D2, _, _ = _two_outputs()
    assert str(sl.Schedule.from_json(text, C2, D2)) == str(s)
    # another order must not put C's directives on D (it did, renaming by position)
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule.from_json(text, D, C)
    msg = str(e.value)
    assert "the schedule is for outputs ['C', 'D'], not ['D', 'C']" in msg, msg
    assert "Schedule.from_json(text, C, D)" in msg
