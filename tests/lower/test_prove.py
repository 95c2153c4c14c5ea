"""The z3 prover: facts it must prove, counterexamples, floor semantics, caching."""
import time

from hypothesis import given, settings, strategies as st

import schedlang.algo.expr as E
import schedlang.algo.types as T
from schedlang.lower import ir
from schedlang.lower import prove as P
from schedlang.lower.prove import counterexample, prove

x, y = E.Var("x"), E.Var("y")
n = E.SizeVar("n")


def test_floordiv_times_divisor_le_x():
    assert prove(x // 4 * 4 <= x)
    assert not prove(x // 4 * 4 == x)


def test_mod_constant_bounds():
    assert prove((x % 8) < 8)
    assert prove((x % 8) >= 0)
    assert prove(x % -8 <= 0)


def test_mod_symbolic_given_positive():
    assert prove((0 <= x % n) & (x % n < n), facts=[n > 0])
    assert not prove(x % n < n)  # n may be 0: x % 0 == 0


def test_min_clamp():
    assert prove(E.minimum2(x, n - 1) <= n - 1)
    assert prove(E.clamp(x, 0, n - 1) >= 0, facts=[n > 0])


def test_counterexample_off_by_one():
    cex = counterexample(x + 1 < n, facts=[0 <= x, x < n])
    assert cex is not None
    assert cex["x"] == cex["n"] - 1 and cex["x"] >= 0
    assert counterexample(x < n, facts=[0 <= x, x < n]) is None
    assert not prove(x + 1 < n, facts=[0 <= x, x < n])


def test_floordiv_and_mod_of_negatives_are_floor():
    assert prove(E.Const(-7, T.int32) // 2 == -4)
    assert prove(E.Const(-7, T.int32) % 2 == 1)
    assert prove((x // 2 == -4) & (x % 2 == 1), facts=[x == -7])
    assert prove((x // y == -4) & (x % y == -1), facts=[x == 7, y == -2])
    assert prove(x == (x // y) * y + x % y, facts=[y != 0])


def test_division_by_zero_is_zero():
    assert prove((x // y == 0) & (x % y == 0), facts=[y == 0])
    zero = E.Const(0, T.int32)
    assert prove(x // zero == 0)
    assert prove(x % zero == 0)


@settings(max_examples=60, deadline=None)
@given(a=st.integers(-1000, 1000), b=st.integers(-40, 40))
def test_floor_semantics_match_python(a, b):
    qa = a // b if b else 0
    ra = a % b if b else 0
    assert prove((x // y == qa) & (x % y == ra), facts=[x == a, y == b])
    ca, cb = E.Const(a, T.int32), E.Const(b, T.int32)
    assert prove((ca // cb == qa) & (ca % cb == ra))


def test_type_ranges_and_casts():
    u = E.Var("u", T.uint8)
    assert prove(u >= 0)
    assert prove(u <= 255)
    assert prove(E.cast(T.int64, x) < 2**31)
    assert prove(E.cast(T.uint8, x) <= 255)
    assert prove(E.cast(T.int32, E.cast(T.uint8, x)) < 256)
    assert prove(E.cast(T.uint8, x) == 44, facts=[x == 300])
    assert prove(E.cast(T.int8, x) == -56, facts=[x == 200])
    assert prove(E.cast(T.int64, x) == x)
    assert prove(n >= 0)  # sizes are never negative


def test_bit_tricks():
    assert prove((x & 7) == x % 8)
    assert prove((x >> 2) == x // 4)
    assert prove((x << 3) == x * 8)
    assert not prove((x | 1) > x)  # bitor is not modelled: never claimed


def test_select_and_bools():
    assert prove(E.select(x < y, x, y) <= y)
    b = E.Var("b", T.bool_)
    assert prove(b | ~b)
    assert not prove(b)
    cex = counterexample(b & (x > 0))
    assert cex is not None


def test_ramp_is_checked_in_every_lane():
    r = ir.Ramp(E.cast(T.int64, x) * 8, ir.i64(1), 8)
    lt = E.BinOp("lt", r, ir.Broadcast(E.cast(T.int64, x) * 8 + 8, 8))
    assert prove(lt)
    le = E.BinOp("lt", r, ir.Broadcast(E.cast(T.int64, x) * 8 + 7, 8))
    assert not prove(le)


def test_loads_are_opaque_and_distinguished_by_buffer():
    idx = E.cast(T.int64, x)
    la, lb = ir.Load("A", idx, T.int32), ir.Load("B", idx, T.int32)
    assert prove(la == ir.Load("A", idx, T.int32))
    assert not prove(la == lb)
    assert prove(la <= 2**31 - 1)


def test_float_facts_are_not_provable():
    f = E.Param("alpha", T.float32)
    assert not prove(f + 1.0 > f)
    assert counterexample(f + 1.0 > f) is None or isinstance(counterexample(f + 1.0 > f), dict)
    assert not prove(E.cast(T.int32, f) >= 0)
    assert prove(E.cast(T.int32, f) <= 2**31 - 1)  # still an int32 value
    assert not prove(E.call_math("exp", f) > 0.0)


def test_counterexample_only_names_visible_vars():
    cex = counterexample(x * 2 + y != ir.Load("A", E.cast(T.int64, y), T.int32))
    assert cex is not None and set(cex) == {"x", "y"}


def test_cache_hits():
    P.clear_cache()
    cond = x // 3 * 3 <= x
    before = P.stats()
    assert prove(cond)
    assert prove(cond)
    # a structurally identical but separately built query also hits
    assert prove(E.Var("x") // 3 * 3 <= E.Var("x"))
    after = P.stats()
    assert after["queries"] - before["queries"] == 3
    assert after["cache_hits"] - before["cache_hits"] == 2
    # prove and counterexample share one solve
    c2 = x + 5 < n
    counterexample(c2, [x < n])
    hits = P.stats()["cache_hits"]
    assert not prove(c2, [x < n])
    assert P.stats()["cache_hits"] == hits + 1


def test_hard_query_times_out_conservatively():
    # nonlinear integer arithmetic: z3 may give up; the answer must be False, never an error
    a, b, c = E.Var("a"), E.Var("b"), E.Var("c")
    cond = (a * a * a + b * b * b != c * c * c) | (a <= 0) | (b <= 0) | (c <= 0)
    t0 = time.perf_counter()
    assert prove(cond, timeout_ms=50) in (True, False)
    assert time.perf_counter() - t0 < 5
    assert counterexample(cond, timeout_ms=50) is None


def test_python_bools_and_trivial():
    assert prove(True)
    assert not prove(False)
    assert counterexample(False) == {}
    assert prove(x <= x)


# ---------------------------------------------------------------- differential check
# Random integer expressions over x, y: for concrete x, y the prover must agree with a
# direct evaluation under schedlang's semantics (floor //, %, division by zero is 0).

def _ev(e, env):
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Var):
        return env[e.name]
    if isinstance(e, E.Select):
        return _ev(e.t, env) if _ev(e.cond, env) else _ev(e.f, env)
    if isinstance(e, E.Cast):
        return E._convert_value(_ev(e.value, env), e.dtype)
    if isinstance(e, E.UnOp):
        return -_ev(e.a, env)
    a, b = _ev(e.a, env), _ev(e.b, env)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "floordiv": lambda: a // b if b else 0, "mod": lambda: a % b if b else 0,
            "min": lambda: min(a, b), "max": lambda: max(a, b), "lt": lambda: a < b,
            "le": lambda: a <= b, "eq": lambda: a == b}[e.op]()


def _exprs():
    leaf = st.sampled_from([x, y]) | st.integers(-9, 9).map(lambda v: E.Const(v, T.int32))
    ops = ["add", "sub", "mul", "floordiv", "mod", "min", "max"]

    def extend(sub):
        return (st.tuples(st.sampled_from(ops), sub, sub).map(lambda t: E.BinOp(t[0], t[1], t[2]))
                | st.tuples(sub, sub, sub, sub).map(
                    lambda t: E.Select(E.BinOp("lt", t[0], t[1]), t[2], t[3]))
                | sub.map(lambda a: E.UnOp("neg", a))
                | sub.map(lambda a: E.cast(T.int32, E.cast(T.int8, a))))
    return st.recursive(leaf, extend, max_leaves=6)


@settings(max_examples=80, deadline=None)
@given(e=_exprs(), a=st.integers(-300, 300), b=st.integers(-20, 20))
def test_translation_agrees_with_evaluation(e, a, b):
    v = _ev(e, {"x": a, "y": b})
    facts = [x == a, y == b]
    big = E.cast(T.int64, e)
    assert prove(big == E.Const(v, T.int64), facts, timeout_ms=2000)
    assert not prove(big == E.Const(v + 1, T.int64), facts, timeout_ms=2000)
    cex = counterexample(big != E.Const(v, T.int64), facts, timeout_ms=2000)
    assert cex == {"x": a, "y": b}
