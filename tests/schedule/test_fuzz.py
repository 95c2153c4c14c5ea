"""Random schedules (SPEC section 2): "A schedule either compiles to code that computes the
algorithm's result or is rejected with that error; nothing in between."

Algorithms: 2-D elementwise, a blur pipeline, a small GEMM with a reduction (plus a
consumer, so that the reduction can be placed), and two with explicit update stages.

A hypothesis strategy draws a sequence of abstract directives (split with random factors
and tails, reorder by a random permutation, vectorize / unroll / parallel of a random loop,
fuse of adjacent loops, tile, and compute_root / compute_inline / compute_at / store_at for
producers). They are applied to a fresh schedule of one of three algorithms; a directive
that raises sl.ScheduleError is simply not applied. The result must then either be
rejected by sl.compile with sl.ScheduleError / sl.CompileError, or run (with
SCHEDLANG_DEBUG=bounds, which checks every memory access) and match numpy.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import schedlang as sl

# derandomize: the same examples every run (so an xfail below is deterministic);
# no shrinking: the failure message already prints the whole schedule, and shrinking
# across several distinct failures takes minutes.
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

TAILS = ["auto", "guard", "shift", "pad"]


# ---------------------------------------------------------------------------------------
# The three algorithms. Each builder returns (output, stages, producers, inputs_fn, ref_fn)
#   stages:    {name: (Func, update index or None, [initial loop names])}
#   producers: [(producer Func, [consumer Funcs])]
# ---------------------------------------------------------------------------------------

def elementwise():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x] * 2 + sl.cast(sl.float32, x - y * 3)
    stages = {"f": (f, None, ["y", "x"])}

    def inputs(rng, h, w, _k):
        return {"A": rng.standard_normal((h, w)).astype(np.float32)}

    def ref(a):
        hh, ww = a["A"].shape
        yy, xx = np.meshgrid(np.arange(hh), np.arange(ww), indexing="ij")
        return a["A"] * 2 + (xx - yy * 3).astype(np.float32)
    return f, stages, [], inputs, ref


def blur():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    bx = sl.Func("blur_x")
    bx[y, x] = (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3
    by = sl.Func("blur_y", shape=(A.shape[0] - 2, A.shape[1] - 2))
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3
    stages = {"blur_x": (bx, None, ["y", "x"]), "blur_y": (by, None, ["y", "x"])}

    def inputs(rng, h, w, _k):
        return {"A": rng.standard_normal((h + 2, w + 2)).astype(np.float32)}

    def ref(a):
        a = a["A"]
        t = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) / 3
        return (t[:-2] + t[1:-1] + t[2:]) / 3
    return by, stages, [(bx, [by])], inputs, ref


def gemm():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    # a consumer so that C is a producer that can be placed
    D = sl.Func("D", shape=(A.shape[0], B.shape[1]))
    D[i, j] = C[i, j] * 2 + 1
    stages = {"C": (C, None, ["i", "j", "k"]), "D": (D, None, ["i", "j"])}

    def inputs(rng, m, n, kk):
        return {"A": rng.standard_normal((m, kk)).astype(np.float32),
                "B": rng.standard_normal((kk, n)).astype(np.float32)}

    def ref(a):
        return (a["A"] @ a["B"]) * 2 + 1
    return D, stages, [(C, [D])], inputs, ref


def updates():
    """Pure + update stages on both an intermediate and the output."""
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] + 1
    g[y, x] = g[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] - 1
    f[y, x] = f[y, x] + sl.cast(sl.float32, x)
    stages = {"g": (g, None, ["y", "x"]), "g.update0": (g, 0, ["y", "x"]),
              "f": (f, None, ["y", "x"]), "f.update0": (f, 0, ["y", "x"])}

    def inputs(rng, h, w, _k):
        return {"A": rng.standard_normal((h, w)).astype(np.float32)}

    def ref(a):
        return (a["A"] + 1) * 2 - 1 + np.arange(a["A"].shape[1], dtype=np.float32)
    return f, stages, [(g, [f])], inputs, ref


def scan():
    """A row-wise prefix sum (an update over an RDom) consumed by a pure output. The update
    also rewrites column 0, so stale memory cannot give the right answer by accident."""
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    r = sl.RDom(A.shape[1], name="r")
    c = sl.Func("c")
    c[y, x] = A[y, x]
    c[y, r] = c[y, sl.max(r - 1, 0)] + A[y, r]
    o = sl.Func("o", shape=(A.shape[0], A.shape[1]))
    o[y, x] = c[y, x] * 2
    stages = {"c": (c, None, ["y", "x"]), "c.update0": (c, 0, ["y", "r"]),
              "o": (o, None, ["y", "x"])}

    def inputs(rng, h, w, _k):
        return {"A": rng.standard_normal((h, w)).astype(np.float32)}

    def ref(a):
        return (np.cumsum(a["A"], axis=1) + a["A"][:, :1]) * 2
    return o, stages, [(c, [o])], inputs, ref


ALGORITHMS = {"elementwise": elementwise, "blur": blur, "gemm": gemm, "updates": updates,
              "scan": scan}


# ---------------------------------------------------------------------------------------
# Abstract directives: loops are picked by index into the stage's current loop list, so
# that the same draw stays meaningful whatever happened before.
# ---------------------------------------------------------------------------------------

pick = st.integers(0, 7)


def loop_ops(known_bugs=True):
    """known_bugs=False leaves out the directives that have had bugs (fuse, the 'pad' tail,
    split by 1) so that the rest keeps being fuzzed while one of those is broken."""
    factors = [1, 2, 3, 4, 5, 8, 16] if known_bugs else [2, 3, 4, 5, 8, 16]
    tails = TAILS if known_bugs else [t for t in TAILS if t != "pad"]
    ops = [
        st.tuples(st.just("split"), pick, st.sampled_from(factors), st.sampled_from(tails)),
        st.tuples(st.just("tile"), pick, st.sampled_from([2, 3, 4, 8]),
                  st.sampled_from([2, 4, 5, 8])),
        st.tuples(st.just("reorder"), st.permutations(list(range(8)))),
        st.tuples(st.just("vectorize"), pick, st.sampled_from([None, 2, 4, 8])),
        st.tuples(st.just("unroll"), pick, st.sampled_from([None, 2, 3, 4])),
        st.tuples(st.just("parallel"), pick),
        st.tuples(st.just("prefetch"), pick, pick, st.sampled_from([-2, -1, 1, 2, 7])),
    ]
    if known_bugs:
        ops.append(st.tuples(st.just("fuse"), pick))
    return st.one_of(*ops)


op_place = st.tuples(st.just("place"),
                     st.sampled_from(["root", "inline", "at", "store_at+at"]), pick, pick)


@st.composite
def schedules(draw, stage_names, known_bugs=True):
    loop_op = loop_ops(known_bugs)
    ops = []
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["loop", "loop", "loop", "place"]))
        if kind == "loop":
            ops.append((draw(st.sampled_from(stage_names)), draw(loop_op)))
        else:
            ops.append((None, draw(op_place)))
    return ops


def _name(v):
    return v if isinstance(v, str) else v.name


class Applier:
    """Applies abstract ops to a Schedule, tracking each stage's loop names."""

    def __init__(self, s, stages, producers):
        self.s, self.stages, self.producers = s, stages, producers
        self.loops = {n: list(ls) for n, (_, _, ls) in stages.items()}

    def stage(self, name):
        f, upd, _ = self.stages[name]
        return self.s[f] if upd is None else self.s[f].update(upd)

    def apply(self, name, op):
        try:
            self._apply(name, op)
        except sl.ScheduleError:
            pass                        # rejected at once: legal outcome, not recorded

    def _apply(self, name, op):
        kind = op[0]
        if kind == "place":
            return self._place(op)
        loops = self.loops[name]
        st_ = self.stage(name)
        n = len(loops)
        if kind == "split":
            _, p, factor, tail = op
            v = loops[p % n]
            vo, vi = st_.split(v, factor, tail=tail)
            loops[p % n:p % n + 1] = [_name(vo), _name(vi)]
        elif kind == "tile":
            _, p, fy, fx = op
            if n < 2:
                return
            a, b = loops[p % (n - 1)], loops[p % (n - 1) + 1]
            vs = st_.tile(a, b, fy, fx)
            i = p % (n - 1)
            loops[i:i + 2] = [_name(v) for v in vs]
        elif kind == "reorder":
            perm = [q for q in op[1] if q < n]
            new = [loops[q] for q in perm]
            st_.reorder(*new)
            loops[:] = new
        elif kind == "vectorize":
            _, p, w = op
            v = loops[p % n]
            if w is None:
                st_.vectorize(v)
            else:
                st_.vectorize(v, w)
                loops[p % n:p % n + 1] = [v + ".o", v + ".i"]
        elif kind == "unroll":
            _, p, fct = op
            v = loops[p % n]
            if fct is None:
                st_.unroll(v)
            else:
                st_.unroll(v, fct)
                loops[p % n:p % n + 1] = [v + ".o", v + ".i"]
        elif kind == "parallel":
            st_.parallel(loops[op[1] % n])
        elif kind == "prefetch":
            # any Input or Func of the pipeline: one the stage does not read is refused
            _, p, q, distance = op
            sources = list(self.s.inputs) + list(self.s.funcs)
            st_.prefetch(sources[q % len(sources)], loops[p % n], distance)
        elif kind == "fuse":
            if n < 2:
                return
            i = op[1] % (n - 1)
            v = st_.fuse(loops[i], loops[i + 1])
            loops[i:i + 2] = [_name(v)]

    def _place(self, op):
        if not self.producers:
            return
        _, how, p, q = op
        prod, consumers = self.producers[p % len(self.producers)]
        if how == "root":
            self.s[prod].compute_root()
        elif how == "inline":
            self.s[prod].compute_inline()
        else:
            cons = consumers[q % len(consumers)]
            cl = self.loops[cons.name]
            loop = cl[q % len(cl)]
            if how == "store_at+at":
                outer = cl[(q // 2) % len(cl)]
                outer, loop = sorted([outer, loop], key=cl.index)
                self.s[prod].store_at(cons, outer)
            self.s[prod].compute_at(cons, loop)


def run_case(algo, ops, sizes, seed):
    out, stages, producers, inputs, ref = ALGORITHMS[algo]()
    s = sl.Schedule(out)
    app = Applier(s, stages, producers)
    for name, op in ops:
        app.apply(name, op)
    src = str(s)
    try:
        kern = sl.compile(out, s)
    except (sl.ScheduleError, sl.CompileError):
        return
    except Exception as e:  # noqa: BLE001 - report the schedule with the failure
        raise AssertionError(f"compile raised {type(e).__name__}: {e}\nschedule:\n{src}") from e
    args = inputs(np.random.default_rng(seed), *sizes)
    try:
        res = kern(**args)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"kernel raised {type(e).__name__}: {e}\nschedule:\n{src}") from e
    want = ref(args)
    assert res.shape == want.shape, f"shape {res.shape} != {want.shape}\nschedule:\n{src}"
    if not np.allclose(res, want, rtol=1e-4, atol=1e-4):
        bad = np.argwhere(~np.isclose(res, want, rtol=1e-4, atol=1e-4))
        raise AssertionError(f"wrong result at {len(bad)} points, first {bad[0].tolist()}"
                             f"\nschedule:\n{src}")


sizes_st = st.tuples(st.integers(1, 13), st.integers(1, 19), st.integers(1, 11))


def _fuzz(algo, monkeypatch, known_bugs):
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    _, stages, _, _, _ = ALGORITHMS[algo]()
    names = sorted(stages)

    @SETTINGS
    @given(ops=schedules(names, known_bugs=known_bugs), sizes=sizes_st,
           seed=st.integers(0, 2**16))
    def inner(ops, sizes, seed):
        run_case(algo, ops, sizes, seed)

    inner()


def test_fuzz_elementwise(monkeypatch):
    _fuzz("elementwise", monkeypatch, known_bugs=True)


def test_fuzz_blur(monkeypatch):
    _fuzz("blur", monkeypatch, known_bugs=True)


def test_fuzz_gemm(monkeypatch):
    _fuzz("gemm", monkeypatch, known_bugs=True)


def test_fuzz_updates(monkeypatch):
    _fuzz("updates", monkeypatch, known_bugs=True)


def test_fuzz_scan(monkeypatch):
    _fuzz("scan", monkeypatch, known_bugs=True)


# The same fuzzing without fuse, tail='pad' and split by 1 (directives that have had
# bugs), so that a failure there does not hide failures of every other directive.

@pytest.mark.parametrize("algo", ["blur", "elementwise", "gemm", "updates"])
def test_fuzz_without_known_bugs(algo, monkeypatch):
    _fuzz(algo, monkeypatch, known_bugs=False)


# ---------------------------------------------------------------------------------------
# The harness itself: a few fixed schedules through the same path.
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("algo,ops", [
    ("elementwise", []),
    ("elementwise", [("f", ("split", 1, 4, "guard")), ("f", ("vectorize", 2, None))]),
    ("blur", [(None, ("place", "root", 0, 0)), ("blur_y", ("parallel", 0))]),
    ("blur", [("blur_y", ("split", 0, 4, "auto")), (None, ("place", "at", 0, 0))]),
    ("gemm", [("C", ("split", 2, 4, "auto")), (None, ("place", "at", 0, 1))]),
    ("gemm", [("C", ("vectorize", 2, None))]),       # rejected at once, still compiles
    ("updates", [("f.update0", ("vectorize", 1, 4)), (None, ("place", "at", 0, 0))]),
    ("scan", [("c.update0", ("split", 1, 4, "guard")), (None, ("place", "root", 0, 0))]),
])
def test_fixed_cases_through_the_fuzz_harness(algo, ops, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    run_case(algo, ops, (5, 7, 3), 0)
