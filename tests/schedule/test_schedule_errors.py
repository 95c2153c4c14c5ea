"""One test per illegal directive (SPEC section 2): each raises sl.ScheduleError at once
(or, where the SPEC allows, sl.CompileError at compile time) whose message names the
directive, the Func, the variable and the reason."""
import re

import numpy as np
import pytest

import schedlang as sl


def build_gemm():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return A, B, C, i, j, k


def build_blur():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    bx = sl.Func("blur_x")
    bx[y, x] = (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3
    by = sl.Func("blur_y", shape=(A.shape[0] - 2, A.shape[1] - 2))
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3
    return A, bx, by, y, x


def build_update():
    A = sl.Input("A", sl.float32, ("N",))
    x, = sl.vars("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    f[x] = f[x] * 2
    return A, f, x


def build_two_stage():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    return A, g, f, y, x


def names_all(msg, *words):
    for w in words:
        assert w in msg, f"{w!r} not in error message {msg!r}"


def word(msg, w):
    """w occurs in msg as a whole identifier (so 'i' does not match inside 'is')."""
    return re.search(r"(?<![\w.])" + re.escape(w) + r"(?![\w])", msg) is not None


# --- reduction variables ---------------------------------------------------------------

def test_vectorize_reduction_variable():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].vectorize(k)
    msg = str(e.value)
    names_all(msg, "vectorize(k)", "C", "reduction variable", "rfactor")
    assert s.trace == []


def test_vectorize_reduction_variable_with_width():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].vectorize(k, 8)
    names_all(str(e.value), "vectorize", "C", "reduction")
    assert word(str(e.value), "k")


def test_vectorize_inner_part_of_split_reduction_variable():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    ko, ki = s[C].split(k, 8)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].vectorize(ki)
    names_all(str(e.value), "vectorize(k.i)", "C", "reduction")


def test_parallel_reduction_variable():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].parallel(k)
    names_all(str(e.value), "parallel(k)", "C", "reduction")


def test_parallel_outer_part_of_split_reduction_variable():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    ko, ki = s[C].split(k, 4)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].parallel(ko)
    names_all(str(e.value), "parallel(k.o)", "C", "reduction")


def test_vectorize_scan_reduction_variable_of_update():
    A = sl.Input("A", sl.float32, ("N",))
    x, = sl.vars("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x]
    r = sl.RDom((1, A.shape[0] - 1), name="r")
    f[r] = f[r - 1] + A[r]
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].update(0).vectorize(r, 4)
    names_all(str(e.value), "vectorize(r)", "f", "reduction")
    with pytest.raises(sl.ScheduleError) as e:
        s[f].update(0).parallel(r)
    names_all(str(e.value), "parallel(r)", "f", "reduction")


# --- split ----------------------------------------------------------------------------

@pytest.mark.parametrize("factor", [0, -1, 2.5, "4", None])
def test_split_bad_factor(factor):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, factor)
    msg = str(e.value)
    names_all(msg, "split(i", "C", "factor")
    assert repr(factor) in msg or str(factor) in msg
    assert s.trace == []


def test_split_bad_tail_name():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, 4, tail="round")
    msg = str(e.value)
    names_all(msg, "split(i", "C", "tail", "round")
    for legal in ("guard", "shift", "pad", "auto"):
        assert legal in msg


def test_split_tail_shift_on_update_stage():
    A, f, x = build_update()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].update(0).split(x, 8, tail="shift")
    msg = str(e.value)
    names_all(msg, "split(x", "f", "update", "shift", "guard")
    assert "only legal on the pure loops of a pure stage, and f.update(0) is an update stage" \
        in msg, msg


def test_a_schedule_indexed_with_a_rebuilt_func_of_the_same_name_says_so():
    A, f, x = build_update()
    s = sl.Schedule(f)
    A2, f2, x2 = build_update()
    with pytest.raises(sl.ScheduleError, match=r"f is another Func of the same name as this "
                                               r"schedule's f \(was the algorithm built again\?\)"):
        s[f2]
    assert s["f"] is s[f]


def test_split_tail_shift_on_an_inline_reduction_is_refused_at_the_directive():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, 8, tail="shift")
    names_all(str(e.value), "split(i, 8)", "C", "shift", "reduction", "guard")
    s[C].split(i, 8, tail="guard")


def test_split_tail_pad_on_output():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, 4, tail="pad")
    msg = str(e.value)
    names_all(msg, "split(i", "C", "pad", "output")


def test_split_loop_already_split():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    s[C].split(i, 4)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, 2)
    msg = str(e.value)
    names_all(msg, "split(i", "C", "i.o", "i.i")


@pytest.mark.parametrize("names", [("a",), ("a", "a"), ("a", 3), ("j", "q")])
def test_split_bad_names(names):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, 4, names=names)
    names_all(str(e.value), "split(i", "C", "name")


def test_split_after_parallel():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    s[C].parallel(i)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].split(i, 4)
    names_all(str(e.value), "split(i", "C", "parallel")


# --- unknown loop names ------------------------------------------------------------------

@pytest.mark.parametrize("directive", ["split", "vectorize", "unroll", "parallel", "reorder"])
def test_unknown_loop_name_lists_the_loops(directive):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    s[C].split(j, 8)
    args = ("q", 4) if directive == "split" else ("q",)
    with pytest.raises(sl.ScheduleError) as e:
        getattr(s[C], directive)(*args)
    msg = str(e.value)
    names_all(msg, directive, "C", "q", "i", "j.o", "j.i", "k")


def test_unknown_loop_name_of_a_split_away_var():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    s[C].split(i, 4)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].vectorize(i)
    names_all(str(e.value), "vectorize(i)", "C", "i.o", "i.i")


# --- fuse / reorder / tile -------------------------------------------------------------

def test_fuse_non_adjacent_loops():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    io, ii = s[C].split(i, 4)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].fuse(io, j)
    msg = str(e.value)
    names_all(msg, "fuse(i.o, j)", "C", "reorder")


def test_fuse_inner_outer_order():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].fuse(j, i)
    names_all(str(e.value), "fuse(j, i)", "C")


def test_fuse_loop_with_itself():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].fuse(j, j)
    names_all(str(e.value), "fuse(j, j)", "C")


def test_reorder_names_a_loop_twice():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].reorder(i, j, i)
    msg = str(e.value)
    names_all(msg, "reorder(i, j, i)", "C", "twice")


@pytest.mark.parametrize("directive", ["tile", "gpu_tile"])
def test_tile_bad_factor_names_tile(directive):
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        getattr(s[f], directive)(y, x, 0, 4)
    names_all(str(e.value), f"{directive}(y, x", "f", "factor")


# --- vectorize / unroll arguments ------------------------------------------------------

@pytest.mark.parametrize("width", [0, -4, 2.5])
def test_vectorize_bad_width(width):
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].vectorize(x, width)
    names_all(str(e.value), "vectorize(x", "f", "width")


@pytest.mark.parametrize("factor", [0, -2])
def test_unroll_bad_factor_names_unroll(factor):
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].unroll(x, factor)
    names_all(str(e.value), "unroll(x", "f", "factor")


def test_unroll_of_non_constant_extent_loop():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].unroll(x)          # an output's extent is its shape: refused at the directive
    msg = str(e.value)
    names_all(msg, "unroll(x)", "f", "constant", "W")
    xo, _ = s[f].split(x, 4)
    with pytest.raises(sl.ScheduleError, match=r"unroll\(x\.o\) on f: .*depends on W"):
        s[f].unroll(xo)


def test_unroll_of_non_constant_extent_loop_of_intermediate():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[g].compute_root()
        s[g].unroll(y)
        sl.compile(f, s)
    names_all(str(e.value), "unroll(y)", "g", "constant")


@pytest.mark.parametrize("directive", ["vectorize", "unroll"])
def test_non_constant_extent_of_producer_message_has_no_internal_names(directive):
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[bx].compute_root()
    with pytest.raises(sl.ScheduleError) as e:
        getattr(s[bx], directive)(x)
        sl.compile(by, s)
    msg = str(e.value)
    names_all(msg, f"{directive}(x)", "blur_x", "constant")
    assert ".extent" not in msg and ".s0." not in msg, msg


def test_unroll_of_non_constant_reduction_loop():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].unroll(k)          # the RDom's extent is K: refused at the directive
    names_all(str(e.value), "unroll(k)", "C", "constant", "K")


# --- compute_at / store_at / compute_inline ----------------------------------------------

def test_compute_at_consumer_that_does_not_use_the_func():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    h = sl.Func("h")
    h[y, x] = A[y, x] + 1
    out = sl.Func("out", shape=(A.shape[0], A.shape[1]))
    out[y, x] = g[y, x] + h[y, x]
    s = sl.Schedule(out)
    with pytest.raises(sl.ScheduleError) as e:
        s[g].compute_at(h, y)
    msg = str(e.value)
    names_all(msg, "compute_at(h, y)", "g", "does not use", "Legal locations", "root",
              "out.y", "out.x")


def test_compute_at_loop_that_does_not_exist():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].compute_at(by, "zz")
    msg = str(e.value)
    names_all(msg, "compute_at(blur_y, zz)", "blur_x", "Legal locations", "root",
              "blur_y.y.o", "blur_y.y.i", "blur_y.x")


def test_compute_at_split_away_var():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    s[by].split(y, 8)
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].compute_at(by, y)
    names_all(str(e.value), "compute_at(blur_y, y)", "blur_x", "Legal locations", "blur_y.y.o")


def test_store_at_loop_that_does_not_exist():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].store_at(by, "zz")
    names_all(str(e.value), "store_at(blur_y, zz)", "blur_x", "Legal locations")


def test_compute_at_itself():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    with pytest.raises(sl.ScheduleError) as e:
        s[bx].compute_at(bx, y)
    names_all(str(e.value), "compute_at(blur_x, y)", "blur_x")


def test_compute_at_of_output_inside_its_producer():
    A, bx, by, y, x = build_blur()
    s = sl.Schedule(by)
    with pytest.raises(sl.ScheduleError) as e:
        s[by].compute_at(bx, y)
    names_all(str(e.value), "compute_at(blur_x, y)", "blur_y")


def test_compute_at_on_an_update_stage():
    A = sl.Input("A", sl.float32, ("N",))
    x, = sl.vars("x")
    g = sl.Func("g")
    g[x] = A[x]
    g[x] = g[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[g].update(0).compute_at(f, x)
    names_all(str(e.value), "compute_at", "g", "update")


def test_compute_inline_of_a_reduction():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1], name="r")
    mx = sl.Func("mx")
    mx[i] = sl.maximum(A[i, r])
    out = sl.Func("out", shape=(A.shape[0], A.shape[1]))
    out[i, j] = A[i, j] - mx[i]
    s = sl.Schedule(out)
    with pytest.raises(sl.ScheduleError) as e:
        s[mx].compute_inline()
    msg = str(e.value)
    names_all(msg, "compute_inline", "mx", "reduction", "compute_root")


def test_compute_inline_of_a_func_with_update_stage():
    A = sl.Input("A", sl.float32, ("N",))
    x, = sl.vars("x")
    g = sl.Func("g")
    g[x] = A[x]
    g[x] = g[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[g].compute_inline()
    names_all(str(e.value), "compute_inline", "g", "update")


def test_compute_inline_of_the_output():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].compute_inline()
    names_all(str(e.value), "compute_inline", "C", "output")


# --- update() --------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 5, -1])
def test_update_index_out_of_range(n):
    A, f, x = build_update()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].update(n)
    msg = str(e.value)
    names_all(msg, f"update({n})", "f", "1 update")


def test_update_on_func_without_updates():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].update(5)
    names_all(str(e.value), "update(5)", "f", "0 update")


# --- Inputs ----------------------------------------------------------------------------

INPUT_DIRECTIVES = {
    "split": ("i", 4), "vectorize": ("i",), "parallel": ("i",), "unroll": ("i",),
    "reorder": ("i", "k"), "fuse": ("i", "k"), "tile": ("i", "k", 4, 4),
    "compute_root": (), "compute_inline": (), "bound": ("i", 0, 4), "cache_write": (),
}


@pytest.mark.parametrize("directive", sorted(INPUT_DIRECTIVES))
def test_directive_on_an_input(directive):
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        getattr(s[A], directive)(*INPUT_DIRECTIVES[directive])
    msg = str(e.value)
    names_all(msg, directive, "A", "Input", "cache_read")
    assert s.trace == []


def test_store_at_on_an_input():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[A].store_at(C, i)
    names_all(str(e.value), "store_at", "A", "cache_read")


def test_compute_at_on_an_input_without_cache_read():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[A].compute_at(C, i)
    names_all(str(e.value), "compute_at", "A", "cache_read")


def test_cache_read_bad_memory():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[A].cache_read(C, memory="texture")
    names_all(str(e.value), "cache_read", "A", "texture", "global", "shared", "local")


def test_cache_write_bad_memory():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].cache_write(memory="texture")
    names_all(str(e.value), "cache_write", "C", "texture")


# --- bound -----------------------------------------------------------------------------

def test_bound_on_unknown_dimension():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    s[g].compute_root()
    with pytest.raises(sl.ScheduleError) as e:
        s[g].bound("z", 0, 4)
    names_all(str(e.value), "bound(z)", "g", "y", "x")


def test_bound_non_positive_extent():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    s[g].compute_root()
    with pytest.raises(sl.ScheduleError) as e:
        s[g].bound(x, 0, 0)
    names_all(str(e.value), "bound(x)", "g", "extent")


def test_bound_on_an_output_of_another_extent_or_not_from_zero():
    A = sl.Input("A", sl.float32, (16, 20))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x] + 1
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].bound(x, 0, 16)
    names_all(str(e.value), "bound(x, 0, 16)", "f", "output", "[0, 20)")
    with pytest.raises(sl.ScheduleError, match=r"bound\(y, 2, 14\) on f: .*\[0, 16\)"):
        s[f].bound(y, 2, 14)
    s[f].bound(x, 0, 20)        # what the shape says: accepted


def test_bound_on_a_symbolic_output_is_a_fact_checked_at_the_call():
    # SPEC: bound(v, lo, extent) is a fact the compiler may rely on, checked at call time
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x] + 1
    s = sl.Schedule(f)
    s[f].bound(x, 0, 48)
    s[f].vectorize(x, 16)
    s[f].unroll("x.o")          # a constant extent now: 3 vectors
    kern = sl.compile(f, s)
    assert kern.loop_ir.count("ramp(") == 6 and "if " not in kern.loop_ir, kern.loop_ir
    a = np.random.default_rng(3).random((5, 48), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a), a + 1)
    with pytest.raises(sl.ArgumentError) as e:
        kern(A=np.zeros((5, 40), np.float32))
    names_all(str(e.value), "bound(x, 0, 48)", "f", "W", "40")


@pytest.mark.parametrize("after", ["rfactor", "cache_write"])
def test_bound_on_an_output_survives_directives_that_rebuild_its_stage(after):
    A = sl.Input("A", sl.float32, ("M", "K"))
    i = sl.Var("i")
    k = sl.RDom(A.shape[1], name="k")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.sum(A[i, k])
    s = sl.Schedule(f)
    s[f].bound(i, 0, 4)
    if after == "rfactor":
        s[f].rfactor(k)
    else:
        s[f].cache_write()
    kern = sl.compile(f, s)
    a = np.random.default_rng(1).random((4, 3), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a), a.sum(1), rtol=1e-6)
    for rows in (3, 6):
        with pytest.raises(sl.ArgumentError, match=r"bound\(i, 0, 4\) on f: .* M = " + str(rows)):
            kern(A=np.ones((rows, 3), np.float32))


def test_unroll_of_a_fused_loop_over_symbolic_sizes_is_refused_at_the_directive():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    p = s[f].fuse(y, x)
    with pytest.raises(sl.ScheduleError, match=r"unroll\(y\.x\.f\) on f: .*not a "
                       r"compile-time constant"):
        s[f].unroll(p)


def test_bound_too_small_names_func_and_var():
    A = sl.Input("A", sl.float32, (16, 20))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(16, 20))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    s[g].compute_root().bound(x, 0, 10)
    with pytest.raises(sl.SchedlangError) as e:
        sl.compile(f, s)(A=np.zeros((16, 20), np.float32))
    names_all(str(e.value), "bound(x", "g")


# --- GPU directives and targets ------------------------------------------------------

def test_gpu_blocks_compiled_for_llvm():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    yo, xo, yi, xi = s[f].tile(y, x, 8, 8)
    s[f].gpu_blocks(yo, xo)
    s[f].gpu_threads(yi, xi)
    with pytest.raises(sl.CompileError) as e:
        sl.compile(f, s, target="llvm")
    names_all(str(e.value), "gpu_blocks", "f", "y.o", "llvm")


def test_gpu_threads_compiled_for_llvm():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    xo, xi = s[f].split(x, 32)
    s[f].gpu_threads(xi)
    with pytest.raises(sl.CompileError) as e:
        sl.compile(f, s)
    names_all(str(e.value), "gpu_threads", "f", "x.i")


def test_gpu_tile_on_intermediate_compiled_for_llvm():
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].gpu_tile(y, x, 8, 8)
    with pytest.raises(sl.CompileError) as e:
        sl.compile(f, s)
    names_all(str(e.value), "gpu_", "g")


@pytest.mark.parametrize("target", ["cuda:80", "cuda:gfx942", "hip:sm_80", "metal:m1", "bogus"])
def test_compile_for_malformed_targets_raises_schedlang_error(target):
    A, g, f, y, x = build_two_stage()
    s = sl.Schedule(f)
    yo, xo, yi, xi = s[f].tile(y, x, 8, 8)
    s[f].gpu_blocks(yo, xo).gpu_threads(yi, xi)
    with pytest.raises(sl.SchedlangError):
        sl.compile(f, s, target=target)


def test_compile_unknown_target():
    A, g, f, y, x = build_two_stage()
    with pytest.raises(sl.SchedlangError) as e:
        sl.compile(f, sl.Schedule(f), target="bogus")
    assert "bogus" in str(e.value)


# --- a rejected directive leaves the schedule usable -------------------------------------

def test_rejected_directive_is_not_recorded_and_schedule_still_compiles():
    A, B, C, i, j, k = build_gemm()
    s = sl.Schedule(C)
    io, ii = s[C].split(i, 8)
    before = str(s)
    for bad in (lambda: s[C].vectorize(k), lambda: s[C].split(i, 4),
                lambda: s[C].fuse(io, j), lambda: s[C].reorder(j, j)):
        with pytest.raises(sl.ScheduleError):
            bad()
    assert str(s) == before and len(s.trace) == 1
    s[C].vectorize(j, 8)
    a = np.ones((9, 4), np.float32)
    b = np.ones((4, 11), np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b)


def test_errors_are_schedlang_errors():
    for cls in (sl.ScheduleError, sl.CompileError, sl.AlgorithmError, sl.ArgumentError):
        assert issubclass(cls, sl.SchedlangError)


def test_loop_directives_on_an_input_are_refused_and_hasattr_is_false():
    A = sl.Input("A", sl.float32, (8,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(8,))
    f[x] = A[x] * 2
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=r"split on A: A is an Input; only cache_read and "
                                               r"compute_at \(of the staged copy\) apply"):
        s[A].split(x, 2)
    assert not hasattr(s[A], "vectorize") and hasattr(s[A], "cache_read")


def test_fuse_name_clash_names_the_keyword_fuse_takes():
    A = sl.Input("A", sl.float32, (4, 4))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(4, 4))
    f[i, j] = A[i, j]
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].fuse(i, j, name="i")
    assert "the loop name 'i' is already used; pass name=... with a new name" in str(e.value)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].split(i, 2, names=("j", "k"))
    assert "pass names=(...) with a new name" in str(e.value)


def test_a_schedule_of_an_algorithm_built_again_is_refused_with_a_reason():
    def build():
        A = sl.Input("A", sl.float32, (4,))
        x = sl.Var("x")
        C = sl.Func("C", shape=(4,))
        C[x] = A[x] + 1
        return C
    c1, c2 = build(), build()
    with pytest.raises(sl.CompileError) as e:
        sl.compile(c2, sl.Schedule(c1))
    msg = str(e.value)
    assert "another Func of the same name: was the algorithm built again?" in msg
    assert "Schedule.from_json(s.to_json(), ...)" in msg


def test_a_pad_split_that_makes_a_producer_read_outside_an_input_is_blamed():
    # the producers read the Input correctly for the region the algorithm needs; only the
    # rounded-up region of their consumer reaches past it, and the split is named
    y, x = sl.vars("y x")
    A = sl.Input("A", sl.float32, ("H", "W"))
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    h = sl.Func("h")
    h[y, x] = g[y, x] + 1
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = h[y, x] * 3
    s = sl.Schedule(f)
    s[h].compute_root()
    s[h].split(x, 4, tail="pad")
    s[g].compute_root()
    with pytest.raises(sl.ScheduleError) as e:
        sl.compile(f, s)
    assert str(e.value).startswith(
        "split(x, 4, tail='pad') on h: rounding the region of h up makes g, which h reads over "
        "that region, read A[y, x] outside A's extent; use tail='guard' or 'shift'")


def test_numpy_integers_are_accepted_as_factors_widths_and_bounds():
    # factors computed with numpy (np.prod, an array's shape) are ints to the user
    A = sl.Input("A", sl.float32, (16, 32))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(16, 32))
    f[y, x] = A[y, x] * 2
    s = sl.Schedule(f)
    yo, xo, yi, xi = s[f].tile(y, x, np.int64(4), np.int32(16))
    s[f].split(yi, np.int64(2))
    s[f].unroll("y.i.i", np.int64(2))
    s[f].vectorize(xi, np.int16(8))
    s[f].bound(y, np.int64(0), np.int64(16))
    assert "4" in str(s) and "np." not in str(s)
    assert sl.Schedule.from_json(s.to_json(), f).to_json() == s.to_json()
    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 2)


def test_a_reduction_loop_of_an_update_stage_is_not_sent_to_rfactor():
    y, i = sl.vars("y i")
    A = sl.Input("A", sl.int32, ("H", "W"))
    r = sl.RDom(A.shape[1], name="r")
    h = sl.Func("h", shape=(A.shape[0], 8))
    h[y, i] = 0
    h[y, sl.clamp(A[y, r], 0, 7)] += 1
    s = sl.Schedule(h)
    advice = "the reduction loop of an update stage runs in order; use one of its pure loops (y)"
    for call in (lambda: s[h].update(0).vectorize(r, 4), lambda: s[h].update(0).parallel(r)):
        with pytest.raises(sl.ScheduleError, match=re.escape(advice)) as info:
            call()
        assert "rfactor" not in str(info.value)
    *_, C, _, _, k = build_gemm()
    with pytest.raises(sl.ScheduleError, match=r"is a reduction variable; use rfactor first"):
        sl.Schedule(C)[C].vectorize(k)


def test_nested_full_unrolls_are_limited_by_the_copies_they_make_together():
    # each loop alone is within the limit; together they would copy the body 262144 times
    y, x = sl.vars("y x")
    A = sl.Input("A", sl.float32, (512, 512))
    f = sl.Func("f", shape=(512, 512))
    f[y, x] = A[y, x] * 2
    s = sl.Schedule(f)
    s[f].unroll(y).unroll(x)
    with pytest.raises(sl.ScheduleError, match=re.escape(
            "unroll(x) on f: unrolling 512 iterations inside unrolled loops that already make "
            "512 copies is too many copies of the body (262144, at most 1024)")):
        sl.compile(f, s)
    s = sl.Schedule(f)
    s[f].split(y, 8)
    s[f].unroll("y.i").unroll(x, 64)                # 8 x 64 copies: fine
    a = np.ones((512, 512), np.float32)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), a * 2)


def test_a_split_factor_past_the_int32_loop_range_is_refused():
    # the outer extent (64 + F - 1) // F would overflow int64 near 2**63: refused instead
    A = sl.Input("A", sl.float32, (64,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(64,))
    f[i] = A[i] * 2
    for factor in (2 ** 31, 2 ** 63 - 63, 2 ** 63):
        with pytest.raises(sl.ScheduleError, match=re.escape(
                f"split(i, {factor}) on f: the factor must be at most 2147483647 (loop "
                "variables are int32)")):
            sl.Schedule(f)[f].split(i, factor)
    s = sl.Schedule(f)
    s[f].split(i, 2 ** 31 - 1)
    np.testing.assert_array_equal(sl.compile(f, s)(A=np.ones(64, np.float32)), np.full(64, 2))


def test_update_takes_an_int_stage_number():
    x = sl.Var("x")
    A = sl.Input("A", sl.int32, (8,))
    f = sl.Func("f", shape=(8,))
    f[x] = A[x]
    f[x] = f[x] * 2
    s = sl.Schedule(f)
    for bad in ("0", 0.0, None, [0], True):
        with pytest.raises(sl.ScheduleError, match=re.escape(
                f"update({bad!r}) on f: the stage number must be an int (update(0) is the "
                "first update)")):
            s[f].update(bad)
    assert s[f].update(np.int64(0)) is s[f].update(0)
    with pytest.raises(sl.ScheduleError, match=r"update\(1\) on f: f has 1 update stage"):
        s[f].update(1)


def test_messages_of_placement_and_staging_mistakes_say_what_to_do():
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    bx = sl.Func("bx")
    bx[y, x] = A[y, x] * 2
    by = sl.Func("by", shape=(A.shape[0], A.shape[1]))
    by[y, x] = bx[y, x] + 1
    s = sl.Schedule(by)
    with pytest.raises(sl.ScheduleError, match=r"update\(0\) on by: by has 0 update stage\(s\); "
                                                r"schedule its definition with s\[by\] itself"):
        s[by].update(0)
    with pytest.raises(sl.ScheduleError, match=r"store_at\(bx, y\) on bx: a Func cannot be stored "
                                                r"inside its own loops; name a loop of a Func "
                                                r"that reads bx, or 'root'"):
        s[bx].store_at(bx, y)
    with pytest.raises(sl.ScheduleError, match=r"cache_read\(bx\) on by: bx does not read by "
                                                r"directly; no Func reads by \(is it the output"):
        s[by].cache_read(bx)


def test_a_loop_that_cache_write_gave_to_the_copy_is_pointed_to():
    A = sl.Input("A", sl.float32, (8, 8))
    B = sl.Input("B", sl.float32, (8, 8))
    i, j = sl.vars("i j")
    k = sl.RDom(8, name="k")
    C = sl.Func("C", shape=(8, 8))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.Schedule(C)
    s[C].split(j, 4)
    copy = s[C].cache_write()
    staged_a = s[A].cache_read(copy, memory="global")
    with pytest.raises(sl.ScheduleError, match=r"compute_at\(C, j.o\) on A_C_cache: C has no loop "
                                                r"named j.o \(C_cache has one: cache_write gave "
                                                r"its copy the loops split before it\)"):
        s[staged_a].compute_at(C, "j.o")
    s[staged_a].compute_at(copy, "j.o")
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=a), a @ a, rtol=1e-6)


def test_unroll_by_more_than_the_copy_limit_is_refused_at_the_directive():
    # accepted up to 4096 copies before, which took minutes to compile
    from schedlang.schedule.stage_loops import MAX_UNROLL
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] + 1
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError, match=rf"unroll\(i, {MAX_UNROLL + 1}\) on f: that many "
                                               rf"copies of the body \(at most {MAX_UNROLL}\)"):
        s[f].unroll(i, MAX_UNROLL + 1)
    with pytest.raises(sl.ScheduleError, match="at most"):
        s[f].unroll(i, 100000)
    assert not s.trace
    s[f].unroll(i, 8)
    np.testing.assert_array_equal(sl.compile(f, s)(A=np.zeros(20, np.float32)), 1.0)


def test_reorder_of_an_update_where_the_last_write_wins_is_refused():
    # h[0] = A[r] and a scatter that does not read the Func: several iterations write one
    # element, so the order of the reduction loops decides the result
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    r = sl.RDom(A.shape[0], name="r")
    h = sl.Func("h", shape=(1,))
    h[x] = -1
    h[0] = A[r]
    s = sl.Schedule(h)
    s[h].update(0).split(r, 4, tail="guard")
    with pytest.raises(sl.ScheduleError, match=r"reorder\(r.i, r.o\) on h.update\(0\): it changes "
                       r"the order .* may write one element of h at several iterations, and "
                       "the last write wins"):
        s[h].update(0).reorder("r.i", "r.o")
    np.testing.assert_array_equal(sl.compile(h, s)(A=np.arange(10, dtype=np.int32) * 10), [90])
    img = sl.Input("img", sl.int32, ("H", "W"))
    b = sl.Var("b")
    q = sl.RDom((0, img.shape[0]), (0, img.shape[1]), name="q")
    g = sl.Func("g", shape=(4,))
    g[b] = -1
    g[sl.clamp(img[q.x, q.y], 0, 3)] = q.x * 100 + q.y
    with pytest.raises(sl.ScheduleError, match="the last write wins"):
        sl.Schedule(g)[g].update(0).reorder("q.y", "q.x")


@pytest.mark.parametrize("lhs", ["r.y, r.x", "r.y + 1, 3 - r.x", "7 - r.y, r.x + 8"])
def test_reorder_of_an_update_writing_each_element_once_is_allowed(lhs):
    A = sl.Input("A", sl.int32, (4, 4))
    y, x = sl.vars("y x")
    r = sl.RDom((0, 4), (0, 4), name="r")
    f = sl.Func("f", shape=(16, 16))
    f[y, x] = 0
    exec(f"f[{lhs}] = A[r.x, r.y] + r.x * 10", {"f": f, "A": A, "r": r})
    s = sl.Schedule(f)
    s[f].update(0).reorder("r.y", "r.x")
    a = np.arange(16, dtype=np.int32).reshape(4, 4)
    np.testing.assert_array_equal(sl.compile(f, s)(A=a), sl.compile(f)(A=a))


def _inline_pair():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g")
    g[x] = A[x] * 2
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = g[x] + 1
    return f, g, x


def test_compute_inline_of_a_func_whose_loops_are_scheduled_is_refused_at_once():
    f, g, x = _inline_pair()
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].parallel(x)
    with pytest.raises(sl.ScheduleError, match=r"compute_inline on g: parallel\(x\) schedules "
                       "loops of g, but an inlined Func has no loops"):
        s[g].compute_inline()
    s = sl.Schedule(f)
    s[g].compute_root()
    s[g].split(x, 4)
    c = s[g].cache_write("global")
    with pytest.raises(sl.ScheduleError, match="compute_inline on g_cache: the loops g_cache "
                       "took over when it was staged"):
        s[c].compute_inline()


@pytest.mark.parametrize("explicit", [True, False])
def test_a_loop_directive_on_an_inline_func_says_why_it_is_inline(explicit):
    f, g, x = _inline_pair()
    s = sl.Schedule(f)
    if explicit:
        s[g].compute_inline()
    s[g].split(x, 4)
    why = r"compute_inline\(\)" if explicit else "the default for a pure Func"
    with pytest.raises(sl.ScheduleError, match=rf"split\(x\) on g: g is computed inline \({why}\)"):
        sl.compile(f, s)
