"""compute_at / store_at may name the consumer by its stage's schedule,
``s[h].compute_at(s[g].update(0), r)``: the loop is a loop of that stage, and the trace
replays it as the qualified level."""
import numpy as np
import pytest

import schedlang as sl


def _pipeline():
    A = sl.Input("A", sl.float32, ("N", "M"))
    y, x = sl.vars("y x")
    h = sl.Func("h")
    h[y, x] = A[y, x] * 3
    g = sl.Func("g")
    g[y] = 0.0
    r = sl.RDom(A.shape[1], name="r")
    g[y] = g[y] + h[y, r]
    f = sl.Func("f", shape=(A.shape[0],))
    f[y] = g[y] * 2
    return dict(sl=sl, A=A, y=y, x=x, h=h, g=g, r=r, f=f)


def test_compute_at_a_loop_of_an_update_stage_named_by_its_schedule():
    ns = _pipeline()
    g, h, f = ns["g"], ns["h"], ns["f"]
    s = sl.Schedule(f)
    s[g].compute_root()
    s[h].compute_at(s[g].update(0), ns["y"])
    s[h].store_at(s[g].update(0), ns["y"])
    s[h].vectorize(ns["x"], 4)
    assert "s[h].compute_at(g, 'y')" in str(s)
    a = np.random.default_rng(3).random((5, 7), dtype=np.float32)
    want = (a * 3).sum(1) * 2
    np.testing.assert_allclose(sl.compile(f, s)(A=a), want, rtol=1e-5)
    again = _pipeline()
    replay = dict(again, s=sl.Schedule(again["f"]))
    exec(str(s), replay)
    assert str(replay["s"]) == str(s)
    np.testing.assert_allclose(sl.compile(again["f"], replay["s"])(A=a), want, rtol=1e-5)


def test_compute_at_a_stage_schedule_names_the_stage_and_its_loops():
    ns = _pipeline()
    s = sl.Schedule(ns["f"])
    s[ns["g"]].compute_root()
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(g.update\(0\), zz\) on h: "
                       r"g.update\(0\) has no loop named zz; its loops are: y, r"):
        s[ns["h"]].compute_at(s[ns["g"]].update(0), "zz")
    other = sl.Schedule(ns["f"])
    with pytest.raises(sl.ScheduleError, match="is a stage of another schedule"):
        s[ns["h"]].compute_at(other[ns["g"]].update(0), ns["r"])


def test_a_schedule_passed_where_a_func_is_taken_says_so_and_names_the_directive():
    ns = _pipeline()
    s = sl.Schedule(ns["f"])
    with pytest.raises(sl.ScheduleError, match=r"^cache_read on A: s\[h\] is a schedule, not "
                       r"a Func; pass the Func h itself"):
        s[ns["A"]].cache_read(s[ns["h"]])
    with pytest.raises(sl.ScheduleError, match=r"^prefetch on g: s\[A\] is a schedule, not "
                       r"an Input; pass the Input A itself"):
        s[ns["g"]].prefetch(s[ns["A"]], ns["y"])
