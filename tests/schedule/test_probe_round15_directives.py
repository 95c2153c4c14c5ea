"""SPEC section 2's fact and hardware directives on the CPU target: tensorize onto the
instructions of schedlang.intrinsics, bound / assume, and the GPU bindings (checked when
the directive is made, refused when compiled for llvm). Each test is a mistake or an
unusual-but-legal use, with the error class and the words of its message."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import schedlang as sl
from schedlang.intrinsics import vpdpbusd


def _dot(n=32, depth=4, where=None):
    """D[j] = 0; D[j] += int32(A[j, r]) * int32(B[j, r]): the instruction's own form."""
    A = sl.Input("A", sl.uint8, (n, depth))
    B = sl.Input("B", sl.int8, (n, depth))
    j = sl.Var("j")
    r = sl.RDom(depth, name="r")
    if where is not None:
        r = r.where(where(r, j))
    D = sl.Func("D", shape=(n,))
    D[j] = 0
    D[j] += sl.cast(sl.int32, A[j, r]) * sl.cast(sl.int32, B[j, r])
    return A, B, D, j, r


def _elementwise(shape=("N",)):
    A = sl.Input("A", sl.float32, shape)
    i = sl.Var("i")
    C = sl.Func("C", shape=(A.shape[0],))
    C[i] = A[i] * 2
    return A, C, i


# ----------------------------------------------------------------------------- vectorize / bound

def test_vectorizing_a_whole_loop_of_too_many_lanes_is_refused_not_an_abort():
    # LLVM aborted the process building a 100000-lane vector
    A, C, i = _elementwise()
    s = sl.Schedule(C)
    s[C].bound(i, 0, 100000)
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(i\) on C: its extent is 100000, too "
                                               r"many lanes.*at most 4096.*vectorize\(i, 16\)"):
        s[C].vectorize(i)
    s = sl.Schedule(C)
    s[C].split(i, 5000)
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(i\.i\) on C: its extent is 5000"):
        s[C].vectorize("i.i")
    # a bound given after the vectorize is caught when lowering
    s = sl.Schedule(C)
    s[C].bound(i, 0, 16).vectorize(i)
    s[C].bound(i, 0, 100000)
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(i\) on C: its extent is 100000, too "
                                               r"many lanes"):
        sl.lower(C, s)
    s = sl.Schedule(C)
    s[C].bound(i, 0, 64).vectorize(i)
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(C, s)(A=a), a * 2)


def test_bound_takes_a_constant_size_expression_and_names_a_runtime_one():
    A2 = sl.Input("A2", sl.float32, (40,))
    i = sl.Var("i")
    C2 = sl.Func("C2", shape=(A2.shape[0] - 8,))
    C2[i] = A2[i + 8]
    s = sl.Schedule(C2)
    s[C2].bound(i, 0, A2.shape[0] - 8).vectorize(i, 8)    # was "must be an int, got 32"
    assert "s[C2].bound('i', 0, 32)" in str(s)
    np.testing.assert_array_equal(sl.compile(C2, s)(A2=np.arange(40, dtype=np.float32)),
                                  np.arange(8, 40, dtype=np.float32))
    A, C, i = _elementwise()
    with pytest.raises(sl.ScheduleError, match=r"bound\(i\) on C: extent must be an int, got N, "
                                               r"a size known only at run time"):
        sl.Schedule(C)[C].bound(i, 0, A.shape[0])


def test_a_bound_producer_relying_on_an_assume_is_checked_at_each_call():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1] - 2))
    f[y, x] = g[y, x] + g[y, x + 2]
    s = sl.Schedule(f)
    s.assume(A.shape[1] >= 34)          # makes g's bounded reads of A provably inside it
    s[g].compute_at(f, y).bound(x, 0, 34).vectorize(x, 8)
    kern = sl.compile(f, s)
    a = np.random.default_rng(0).standard_normal((5, 34)).astype(np.float32)
    np.testing.assert_allclose(kern(A=a), 2 * a[:, :-2] + 2 * a[:, 2:], rtol=1e-6)
    # was "need g over a larger region": the region needed lies outside the bound's
    with pytest.raises(sl.ArgumentError, match=r"bound\(x, 0, 34\) on g: these sizes need g along "
                                               r"x outside the bound's region \[0, 34\); widen"):
        kern(A=np.zeros((5, 40), np.float32))
    with pytest.raises(sl.ArgumentError, match=r"violate assume\(W >= 34\) \(W=30\)"):
        kern(A=np.zeros((5, 30), np.float32))


# ----------------------------------------------------------------------------- assume

def test_assume_about_a_size_or_param_the_pipeline_does_not_use_is_refused():
    # it was recorded, never checked at a call, and its to_json could not be read back
    A, C, i = _elementwise(("Nown",))
    B = sl.Input("B", sl.float32, ("Qother",))
    p = sl.Param("p_unused", sl.int32)
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError, match=r"assume\(Qother > 3\): the size Qother \(of B\) "
                                               r"is not used by the pipeline of C.*sizes of its "
                                               r"Inputs and the Params it uses"):
        s.assume(B.shape[0] > 3)
    with pytest.raises(sl.ScheduleError, match=r"assume\(p_unused > 0\): the Param p_unused is "
                                               r"not used by the pipeline of C"):
        s.assume(p > 0)
    assert s.trace == []
    s.assume(A.shape[0] % 4 == 0)
    kern = sl.compile(C, sl.Schedule.from_json(s.to_json(), C))
    with pytest.raises(sl.ArgumentError, match=r"violate assume\(Nown % 4 == 0\) \(Nown=6\)"):
        kern(A=np.ones(6, np.float32))


# ----------------------------------------------------------------------------- tensorize

def test_tensorizing_an_rdom_with_where_names_the_predicate_not_a_tail_guard():
    A, B, D, j, r = _dot(16, where=lambda r, j: r <= j)
    s = sl.Schedule(D)
    s[D].update(0).tensorize(j, vpdpbusd)
    with pytest.raises(sl.ScheduleError) as e:
        sl.lower(D, s)
    msg = str(e.value)
    assert "tensorize(j, vpdpbusd) on D.update(0): the loop nest under j holds the condition of " \
           "the RDom's where() predicate (r <= j)" in msg and "tail" not in msg, msg


def test_tensorize_on_the_pure_stage_of_a_func_with_updates_points_to_the_update():
    A, B, D, j, r = _dot(16)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(j, vpdpbusd\) on D: D has no reduction "
                                               r"loop.*tensorize the stage that reduces, "
                                               r"s\[D\]\.update\(n\)"):
        sl.Schedule(D)[D].tensorize(j, vpdpbusd)


def test_splitting_or_fusing_the_tensorized_loop_afterwards_is_refused_at_once():
    A, B, D, j, r = _dot()
    s = sl.Schedule(D)
    u = s[D].update(0)
    jo, ji = u.split(j, 16)
    u.tensorize(ji, vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"split\(j\.i, 8\) on D\.update\(0\): j\.i is "
                                               r"tensorized \(tensorize\(j\.i, vpdpbusd\)\).*split "
                                               r"it before tensorizing"):
        u.split(ji, 8)
    with pytest.raises(sl.ScheduleError, match=r"fuse\(j\.o, j\.i\) on D\.update\(0\): j\.i is "
                                               r"tensorized.*fuse the loops before tensorizing"):
        u.fuse(jo, ji)
    assert u.loop_names() == ["j.o", "j.i", "r"]
    assert "vpdpbusd(" in str(sl.lower(D, s))


def test_rfactor_of_a_tensorized_stage_is_refused_not_the_tensorize_dropped():
    A, B, D, j, r = _dot()
    s = sl.Schedule(D)
    u = s[D].update(0)
    u.split(j, 16)
    u.tensorize("j.i", vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"rfactor\(r\) on D\.update\(0\): D\.update\(0\) "
                                               r"is tensorized \(tensorize\(j\.i, vpdpbusd\)\).*"
                                               r"rfactor before tensorize"):
        u.rfactor(r)
    assert "vpdpbusd(" in str(sl.lower(D, s))


@pytest.mark.parametrize("at", ["j.i", "r"])
def test_a_producer_computed_inside_the_tensorized_loops_is_named(at):
    A = sl.Input("A", sl.uint8, (32, 4))
    B = sl.Input("B", sl.int8, (32, 4))
    j, q = sl.vars("j q")
    r = sl.RDom(4, name="r")
    g = sl.Func("g")
    g[j, q] = A[j, q] + 1
    D = sl.Func("D", shape=(32,))
    D[j] = 0
    D[j] += sl.cast(sl.int32, g[j, r]) * sl.cast(sl.int32, B[j, r])
    s = sl.Schedule(D)
    u = s[D].update(0)
    u.split(j, 16)
    u.tensorize("j.i", vpdpbusd)
    s[g].compute_at(D, at)
    # was "no reduction loop is nested under j.i" (at j.i)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(j\.i, vpdpbusd\) on D\.update\(0\): "
                                               r"the loop nest under j\.i also stores and computes "
                                               r"g .*compute_at g at a loop outside j\.i"):
        sl.lower(D, s)
    s[g].compute_at(D, "j.o")
    assert "vpdpbusd(" in str(sl.lower(D, s))


def test_a_kernel_for_a_cpu_with_the_instruction_is_refused_here_without_killing_the_process():
    code = textwrap.dedent("""
        import numpy as np, schedlang as sl
        from schedlang.intrinsics import vpdpbusd
        from schedlang.targets.llvm_jit import _resolve_target
        A = sl.Input("A", sl.uint8, (16, 4)); B = sl.Input("B", sl.int8, (16, 4))
        j = sl.Var("j"); r = sl.RDom(4, name="r")
        D = sl.Func("D", shape=(16,))
        D[j] = 0
        D[j] += sl.cast(sl.int32, A[j, r]) * sl.cast(sl.int32, B[j, r])
        s = sl.Schedule(D)
        s[D].update(0).tensorize(j, vpdpbusd)
        k = sl.compile(D, s, target="llvm:znver4")
        assert "llvm.x86.avx512.vpdpbusd.512" in k.source and "vpdpbusd" in k.assembly
        a = np.arange(64, dtype=np.uint8).reshape(16, 4)
        b = (np.arange(64) - 32).astype(np.int8).reshape(16, 4)
        if "+avx512vnni" in _resolve_target("llvm")[1].split(","):
            want = (a.astype(np.int32) * b).sum(1)
            assert (k(A=a, B=b) == want).all()
            print("RAN")
        else:
            try:
                k(A=a, B=b)
            except sl.CompileError as e:
                print("REFUSED", e)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
        + [x for x in [os.environ.get("PYTHONPATH")] if x]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "RAN" in out or ("REFUSED" in out and "znver4" in out and "vpdpbusd (avx512vnni)" in out
                            and "not run here" in out), out


# ----------------------------------------------------------------------------- GPU bindings

def test_gpu_tile_compiled_for_llvm_names_gpu_tile():
    A = sl.Input("A", sl.float32, (64, 64))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(64, 64))
    f[y, x] = A[y, x] + 1
    s = sl.Schedule(f)
    s[f].gpu_tile(y, x, np.int64(8), 8)      # numpy sizes, as split takes them
    assert "s[f].gpu_tile('y', 'x', 8, 8, tail='auto')" in str(s)
    with pytest.raises(sl.CompileError, match=r"gpu_tile\(y, x, 8, 8\) \(which binds y\.o\) on f "
                                              r"needs a GPU target.*parallel"):
        sl.compile(f, s)


def _producer_consumer():
    A = sl.Input("A", sl.float32, (64, 64))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(64, 64))
    f[y, x] = g[y, x] + 1
    return A, g, f, y, x


def test_gpu_loops_nested_across_funcs_are_refused_at_the_directive():
    A, g, f, y, x = _producer_consumer()
    s = sl.Schedule(f)
    s[f].gpu_tile(y, x, 8, 8)
    s[g].compute_at(f, "x.o")
    with pytest.raises(sl.ScheduleError, match=r"gpu_blocks\(y\) on g: g's gpu_blocks loop y would "
                                               r"run inside the gpu_blocks loop f\.x\.o \(g is "
                                               r"computed at f\.x\.o\), a kernel inside a kernel; "
                                               r"bind g's loops with gpu_threads there"):
        s[g].gpu_blocks(y)
    with pytest.raises(sl.ScheduleError, match=r"parallel\(y\) on g: g's parallel loop y would run "
                                               r"inside the gpu_blocks loop f\.x\.o.*no CPU "
                                               r"threads"):
        s[g].parallel(y)
    s[g].gpu_threads(x, y)                    # threads of a producer inside blocks: legal
    t = sl.Schedule(f)
    t[f].gpu_tile(y, x, 8, 8)
    t[g].gpu_threads(x, y)
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(f, x\.i\) on g: g's gpu_threads loop "
                                               r"y would run inside the gpu_threads loop f\.x\.i"):
        t[g].compute_at(f, "x.i")
    assert "compute_at" not in str(t)
    # the consumer's loops bound after the producer was placed in them
    u = sl.Schedule(f)
    u[g].compute_at(f, y).gpu_blocks(x)
    with pytest.raises(sl.ScheduleError, match=r"gpu_blocks\(y\) on f: g's gpu_blocks loop x would "
                                               r"run inside the gpu_blocks loop f\.y"):
        u[f].gpu_blocks(y)
    assert [d.kind for d in u[f].dims] == ["serial", "serial"]
    # a legal nest still prints and replays onto a fresh algorithm
    A2, g2, f2, y2, x2 = _producer_consumer()
    again = sl.Schedule(f2)
    exec(str(s), {"sl": sl, "s": again, "f": f2, "g": g2, "A": A2, "y": y2, "x": x2})
    assert str(again) == str(s) == str(sl.Schedule.from_json(s.to_json(), f2))
