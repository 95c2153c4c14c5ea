"""Schedules a user writes from SPEC sections 2 and 3 (schedule language, compile and run on
the llvm target): legal schedules compile to the algorithm's result, illegal ones are refused
with a ScheduleError / CompileError that names the directive and says what to do."""
import re

import numpy as np
import pytest

import schedlang as sl
from test_pipelines import build_gemm


def _blur_with_updates():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    g[y, x] = g[y, x] + 1
    h = sl.Func("h")
    h[y, x] = g[y, x] + g[y, x + 1]
    out = sl.Func("out", shape=(A.shape[0], A.shape[1] - 1))
    out[y, x] = h[y, x]
    out[y, x] = out[y, x] * 3
    return g, h, out, y, x


@pytest.mark.parametrize("tail", ["auto", "guard", "shift"])
def test_a_fused_producer_per_tile_feeds_a_root_producer_without_overshoot(tail):
    # h is computed per tile of out and its loops fused; g (computed at the root) must
    # cover exactly what h reads, not one tile more (which would read A out of bounds)
    g, h, out, y, x = _blur_with_updates()
    s = sl.Schedule(out)
    s[out].split(x, 3, tail=tail)
    s[h].fuse(y, x)
    s[h].compute_at(out, "x.o")
    s[g].compute_root()
    s[g].update(0).vectorize(y, 8)
    kern = sl.compile(out, s)
    rng = np.random.default_rng(0)
    for W in (2, 4, 5, 7, 11):
        a = rng.random((3, W), dtype=np.float32)
        gg = a * 2 + 1
        np.testing.assert_allclose(kern(A=a), (gg[:, :-1] + gg[:, 1:]) * 3, rtol=1e-6)


def _gemm():
    _, B, C, i, _, _ = build_gemm()
    return B, C, i


def test_double_buffer_of_a_func_computed_at_the_root_is_refused_at_the_directive():
    B, C, i = _gemm()
    s = sl.Schedule(C)
    Bc = s[B].cache_read(C, memory="global")
    s[Bc].compute_root()
    with pytest.raises(sl.ScheduleError, match=r"double_buffer on B_C: B_C is computed at the "
                                               r"root \(compute_root\(\)\).*compute_at\("):
        s[Bc].double_buffer()
    assert [d.op for d in s.trace][-1] == "compute_root"
    s[Bc].compute_at(C, i).double_buffer()      # placed in a serial loop, it is legal
    a = np.ones((3, 4), np.float32)
    b = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b)


def test_compute_root_of_a_double_buffered_func_is_refused_at_the_directive():
    B, C, i = _gemm()
    s = sl.Schedule(C)
    Bc = s[B].cache_read(C, memory="global")
    s[Bc].compute_at(C, i).double_buffer()
    with pytest.raises(sl.ScheduleError, match=r"compute_root on B_C: B_C is double-buffered "
                                               r"\(double_buffer\(\)\).*compute_at\("):
        s[Bc].compute_root()
    assert [d.op for d in s.trace][-1] == "double_buffer"


def test_double_buffer_of_an_inline_func_says_to_compute_it_at_a_loop_not_at_the_root():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g")
    g[x] = A[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    s = sl.Schedule(f)
    s[g].compute_inline()
    with pytest.raises(sl.ScheduleError, match=r"double_buffer on g: g is computed inline "
                                               r"\(compute_inline\(\)\).*compute_at\("):
        s[g].double_buffer()
    s = sl.Schedule(f)
    s[g].double_buffer()        # a later compute_at may still place it
    with pytest.raises(sl.ScheduleError, match=r"double_buffer\(\) on g: .*inline") as e:
        sl.compile(f, s)
    assert "compute_at(consumer, loop)" in str(e.value)
    assert "compute_root" not in str(e.value)
    s = sl.Schedule(f)
    s[g].compute_at(f, x).double_buffer()
    with pytest.raises(sl.ScheduleError, match=r"compute_inline on g: double_buffer\(\)") as e:
        s[g].compute_inline()
    assert "compute_root" not in str(e.value)


_COMPILE_FOR_CPU = """
import schedlang as sl
A = sl.Input("A", sl.float32, ("N",))
x = sl.Var("x")
f = sl.Func("f", shape=(A.shape[0],))
f[x] = A[x] * 2
for cpu in ("i386", "pentium4", "athlon-xp"):
    try:
        sl.compile(f, sl.Schedule(f), target="llvm:" + cpu)
    except sl.CompileError as e:
        print("refused:", e)
"""


def test_a_32_bit_cpu_name_is_a_compile_error_not_an_aborted_process():
    import subprocess
    import sys
    import llvmlite.binding as llvm
    if not llvm.get_default_triple().startswith("x86_64"):
        pytest.skip("the 32-bit x86 CPU names apply to an x86_64 host")
    r = subprocess.run([sys.executable, "-c", _COMPILE_FOR_CPU], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    assert "the CPU 'i386' in target 'llvm:i386' is a 32-bit x86 CPU" in lines[0]
    assert all("64-bit CPU name such as 'x86-64'" in line for line in lines)


def test_unrolling_a_scans_reduction_loop_does_not_point_to_bound_which_cannot_fix_it():
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    f[r] = f[r - 1] + A[r]
    s = sl.Schedule(f)
    s[f].bound(x, 0, 8)         # fixes f's region, not the RDom's extent
    with pytest.raises(sl.ScheduleError, match=r"unroll\(r\) on f.update\(0\): its extent is "
                                               r"not a compile-time constant \(it depends on "
                                               r"N - 1\); unroll with a factor") as e:
        s[f].update(0).unroll(r)
    assert "bound(" not in str(e.value)
    s[f].update(0).unroll(r, 3)
    a = np.arange(8, dtype=np.int32) - 3
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), np.cumsum(a))


def test_from_json_takes_the_text_as_bytes_read_from_a_file_in_binary_mode(tmp_path):
    B, C, i = _gemm()
    s = sl.Schedule(C)
    s[C].split(i, 4, names=("io", "ii"))
    s[C].vectorize("j", 8)
    path = tmp_path / "sched.json"
    path.write_text(s.to_json())
    B2, C2, i2 = _gemm()
    for data in (path.read_bytes(), bytearray(path.read_bytes())):
        assert str(sl.Schedule.from_json(data, C2)) == str(s)
    with pytest.raises(sl.ScheduleError, match=r"Schedule.from_json: not JSON"):
        sl.Schedule.from_json(b"\x80 not json", C2)


@pytest.mark.parametrize("directive, bad", [("cache_read", 5), ("cache_write", ""),
                                            ("rfactor", b"acc")])
def test_a_bad_name_for_a_new_func_names_the_directive(directive, bad):
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0],))
    C[i] = sl.sum(A[i, k] * 2.0)
    s = sl.Schedule(C)
    call = {"cache_read": lambda: s[A].cache_read(C, name=bad),
            "cache_write": lambda: s[C].cache_write(name=bad),
            "rfactor": lambda: s[C].rfactor(k, name=bad)}[directive]
    where = {"cache_read": r"cache_read\(C\) on A", "cache_write": r"cache_write on C",
             "rfactor": r"rfactor\(k\) on C"}[directive]
    with pytest.raises(sl.ScheduleError, match=where + r": name= must be a non-empty str .*got "
                                                + re.escape(repr(bad))):
        call()
    assert not s.trace and [f.name for f in s.funcs] == ["C"]


def test_fusing_a_loop_with_itself_says_it_is_given_twice():
    A = sl.Input("A", sl.float32, ("N", "M"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x]
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=r"fuse\(x, x\) on f: x is given twice; fuse two "
                                               r"adjacent loops of f \(y, x\)"):
        s[f].fuse(x, "x")
    assert not s.trace
