"""GPU bindings are checked when the directive is made (SPEC section 2: every primitive
checks legality at once): thread loops run inside block loops, and one stage binds each of
blockIdx / threadIdx .x/.y/.z once, so a second gpu_blocks / gpu_threads call that would
bind another loop to the same axis is refused, as is a reorder that puts a thread loop
outside a block loop."""
import pytest

import schedlang as sl


def _func():
    A = sl.Input("A", sl.float32, (16, 16))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(16, 16))
    f[y, x] = A[y, x] + 1
    return f, y, x


def test_gpu_blocks_inside_a_gpu_threads_loop_is_refused():
    f, y, x = _func()
    s = sl.Schedule(f)
    s[f].gpu_threads(y)
    with pytest.raises(sl.ScheduleError, match=r"gpu_blocks\(x\) on f: the gpu_threads loop y "
                                               r"would enclose the gpu_blocks loop x"):
        s[f].gpu_blocks(x)
    assert [(d.name, d.kind) for d in s[f].dims] == [("y", "gpu_thread"), ("x", "serial")]
    assert len(s.trace) == 1


def test_reorder_that_puts_threads_outside_blocks_is_refused():
    f, y, x = _func()
    s = sl.Schedule(f)
    s[f].gpu_blocks(y).gpu_threads(x)
    with pytest.raises(sl.ScheduleError, match=r"reorder\(x, y\) on f: the gpu_threads loop x "
                                               r"would enclose the gpu_blocks loop y"):
        s[f].reorder(x, y)
    assert s[f].loop_names() == ["y", "x"]


@pytest.mark.parametrize("directive,axis", [("gpu_blocks", "blockIdx"),
                                            ("gpu_threads", "threadIdx")])
def test_a_second_call_binding_the_same_axis_is_refused(directive, axis):
    f, y, x = _func()
    s = sl.Schedule(f)
    getattr(s[f], directive)(y)
    with pytest.raises(sl.ScheduleError, match=rf"{directive}\(x\) on f: y is already bound to "
                                               rf"{axis}\.x, where this call binds x; bind all "
                                               rf"the {directive} loops of f in one call"):
        getattr(s[f], directive)(x)
    # binding them together, or the same loop again, is fine
    getattr(s[f], directive)(x, y)
    getattr(s[f], directive)(x, y)
    assert [(d.name, d.gpu_dim) for d in s[f].dims] == [("y", 1), ("x", 0)]


def test_legal_gpu_schedules_still_replay():
    f, y, x = _func()
    s = sl.Schedule(f)
    yo, xo, yi, xi = s[f].tile(y, x, 4, 4)
    s[f].gpu_blocks(yo, xo).gpu_threads(yi, xi)
    t = sl.Schedule(f)
    t[f].gpu_tile(y, x, 4, 4)
    for sched in (s, t):
        f2, y2, x2 = _func()
        again = sl.Schedule(f2)
        exec(str(sched), {"sl": sl, "s": again, "f": f2, "y": y2, "x": x2})
        assert str(again) == str(sched)
        assert str(sl.Schedule.from_json(sched.to_json(), f2)) == str(sched)
