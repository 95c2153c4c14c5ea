"""Index ranges in error messages: printed as Python a user can read and evaluate."""
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
