"""After s[f].cache_write(), f's update stages belong to the staged Func: s[f].update(n)
says where they went and how to reach them (not "f has 0 update stage(s)"), and the
schedule it names replays and computes the right result."""
import numpy as np
import pytest

import schedlang as sl


def _histogram():
    A = sl.Input("A", sl.uint8, ("H", "W"))
    i = sl.Var("i")
    r = sl.RDom((0, A.shape[0]), (0, A.shape[1]), name="r")
    h = sl.Func("h", shape=(16,))
    h[i] = 0
    h[sl.clamp(sl.cast(sl.int32, A[r.x, r.y]) // 16, 0, 15)] += 1
    return A, h


def test_update_of_a_func_whose_updates_cache_write_moved_names_the_staged_func():
    A, h = _histogram()
    s = sl.Schedule(h)
    staged = s[h].cache_write()
    with pytest.raises(sl.ScheduleError) as e:
        s[h].update(0)
    assert str(e.value) == (f"update(0) on h: cache_write on h moved its update stages to "
                            f"{staged.name}; schedule them with s['{staged.name}'].update(0)")
    s[staged].update(0).unroll("r.y", 2)
    img = np.random.default_rng(3).integers(0, 256, (5, 7)).astype(np.uint8)
    want = np.bincount(img.ravel() // 16, minlength=16)
    np.testing.assert_array_equal(sl.compile(h, s)(A=img), want)
    A2, h2 = _histogram()
    again = sl.Schedule(h2)
    exec(str(s), {"sl": sl, "s": again, "A": A2, "h": h2})
    assert str(again) == str(s)
    np.testing.assert_array_equal(sl.compile(h2, again)(A=img), want)


def test_update_out_of_range_without_cache_write_keeps_its_message():
    A, h = _histogram()
    s = sl.Schedule(h)
    with pytest.raises(sl.ScheduleError, match=r"update\(1\) on h: h has 1 update stage\(s\); "
                                               r"use update\(0\) \.\. update\(0\)"):
        s[h].update(1)
