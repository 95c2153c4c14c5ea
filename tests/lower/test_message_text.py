"""Index ranges in error messages: printed as Python a user can read and evaluate."""
import re

import pytest

import schedlang as sl
import schedlang.algo.expr as E
import schedlang.algo.types as T
from schedlang.algo.evaluate import evaluate
from schedlang.lower.simplify import simplify
from schedlang.lower.symbolic import pretty

_N, _K = E.SizeVar("N", T.int32), E.SizeVar("K", T.int32)
_TEXT_CASES = [
    (_N + 31) // 32 * 32 - 1, _N % 4 + 2 * (_N // 3), -(_N // 4) * 4,
    E.minimum2(_N - 1, (_K + 3) // 4 * 4 - 1) // 4 * 4 + 4, (0 - _N) // 4 + _K % 3 * 2,
    (_N * 3 - _K) // 7, -(_N % 5) * 3 + E.maximum2(_N, _K) // 2, (_N // 2) * (_K // 3),
    (_N // 2) * (_K + 1) * 3, 0 - (_N // 2), (_N % 3) * (_N % 4) * -2]


@pytest.mark.parametrize("e", _TEXT_CASES, ids=str)
def test_ranges_in_messages_are_python_that_computes_the_same_value(e):
    """Messages print index ranges as Python (// % min max), never sympy's floor/Min."""
    text = pretty(simplify(e))
    assert "floor" not in text and "Min" not in text and "Max" not in text and "Mod" not in text
    for n in range(-9, 10):
        for k in range(-5, 6):
            got = eval(text, {"min": min, "max": max}, {"N": n, "K": k})  # noqa: S307
            assert got == evaluate(e, {"N": n, "K": k}), (text, n, k)


def test_an_out_of_bounds_message_shows_the_range_as_python():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g", shape=("N",))
    k = sl.RDom("K", name="k")
    g[x] = sl.sum(A[x + k * 3])
    s = sl.Schedule(g)
    s[g].split(k, 4, tail="guard")
    with pytest.raises(sl.AlgorithmError) as err:
        sl.compile(g, s)
    msg = str(err.value)
    assert "g reads A[x + k * 3]" in msg
    assert "(K + 3) // 4 * 4 - 1" in msg and "floor" not in msg and "Min(" not in msg


def test_an_update_writing_outside_the_output_gets_advice_for_writes():
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    r = sl.RDom(A.shape[0] + 5, name="r")
    f[r] = 1.0
    with pytest.raises(sl.AlgorithmError) as info:
        sl.compile(f)
    msg = str(info.value)
    assert msg.startswith("f writes f[r]: dimension 0 ranges over [0, N + 4], which may fall "
                          "outside f's extent 0..N - 1"), msg
    assert "restrict the RDom (r.where(...)) or shrink its extent, clamp the index" in msg
    assert "boundary condition" not in msg


def test_a_bound_that_makes_a_producer_read_outside_an_input_is_blamed():
    y, x = sl.vars("y x")
    A = sl.Input("A", sl.float32, ("H", "W"))
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].bound(x, 0, 4)
    with pytest.raises(sl.ScheduleError, match=re.escape(
            "bound(x, 0, 4) on g: computing g over that region makes g read A[y, x] outside "
            "A's extent; bound it to a region inside what the sizes allow, or remove the bound")):
        sl.compile(f, s)


def test_a_read_out_of_bounds_by_an_inlined_producer_says_the_index_is_its_consumers():
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    g = sl.Func("g")
    g[i] = A[i] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = g[i] + g[i + 3]
    with pytest.raises(sl.AlgorithmError, match=re.escape(
            "g (inlined into its consumer, at the index the consumer reads) reads A[i + 3]: "
            "dimension 0 ranges over [3, N + 2]")):
        sl.compile(f)
    s = sl.Schedule(f)
    s[g].compute_root()
    with pytest.raises(sl.AlgorithmError, match=re.escape("g reads A[i]: dimension 0 ranges "
                                                          "over [0, N + 2]")):
        sl.compile(f, s)
