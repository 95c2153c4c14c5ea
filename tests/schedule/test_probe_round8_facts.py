"""A fact read back as text (s.assume('...'), Schedule.from_json, the tuning database) is
data: numbers in it stay within the int64 range of sizes, so a tampered or mistyped fact
such as ``9**9**9`` is a ScheduleError at once instead of hours of big-integer arithmetic."""
import json
import time

import pytest

import schedlang as sl


def _pipeline():
    A = sl.Input("A", sl.float32, ("N",))
    p = sl.Param("p", sl.int32)
    x = sl.Var("x")
    h = sl.Func("h", shape=(A.shape[0],))
    h[x] = A[x] * sl.cast(sl.float32, p)
    return A, p, h


def _assume_doc(fact):
    return json.dumps({"schedlang_schedule": 1, "outputs": ["h"], "directives": [
        {"func": "", "stage": 0, "op": "assume", "args": [fact], "kwargs": {}}]})


@pytest.mark.parametrize("fact, says", [
    ("N < 9**9**9", "9 ** 387420489 is beyond the int64 range"),
    ("N < (1 << 10**12)", "1 << 1000000000000 is beyond the int64 range"),
    ("N < 2**100000", "2 ** 100000 is beyond the int64 range"),
    ("N < 10**30", "is beyond the int64 range"),
], ids=["power_tower", "huge_shift", "big_power", "big_product"])
def test_a_fact_with_a_huge_constant_is_refused_at_once(fact, says):
    A, p, h = _pipeline()
    for read in (lambda: sl.Schedule.from_json(_assume_doc(fact), h),
                 lambda: sl.Schedule(h).assume(fact)):
        t0 = time.perf_counter()
        with pytest.raises(sl.ScheduleError, match=r"assume\(") as e:
            read()
        assert time.perf_counter() - t0 < 1.0
        assert says in str(e.value)


def test_facts_with_int64_constants_still_parse():
    A, p, h = _pipeline()
    s = sl.Schedule(h)
    s.assume("N % 2**4 == 0")
    s.assume("N < 2**62")
    s.assume("p > -(2**31)")
    s.assume("(p << 3) < 1024")
    back = sl.Schedule.from_json(s.to_json(), h)
    assert str(back) == str(s)
