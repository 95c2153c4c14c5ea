"""Error messages of common user mistakes: each names the Func / directive / argument in the
user's names and says what to do (SPEC section 7)."""
import pytest

import schedlang as sl
from schedlang.frontend import Tensor


def _matmul():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return C, i, j, k


def _two_stage():
    A = sl.Input("A", sl.float32, ("N", "M"))
    i, j = sl.vars("i j")
    g = sl.Func("g")
    g[i, j] = A[i, j] * 2
    f = sl.Func("f", shape=A.shape)
    f[i, j] = g[i, j] + 1
    return A, g, f, i, j


def test_var_not_on_left_hand_side_says_how_to_fix():
    A = sl.Input("A", sl.float32, ("N", "M"))
    i, j = sl.vars("i j")
    f = sl.Func("f", shape=(A.shape[0],))
    with pytest.raises(sl.AlgorithmError) as e:
        f[i] = A[i, j]
    msg = str(e.value)
    assert "f[i]" in msg and "Var j" in msg
    assert "f[i, j] = ..." in msg and "RDom" in msg


def test_definition_with_more_args_than_shape_says_how_to_fix():
    A = sl.Input("A", sl.float32, ("N",))
    x, y = sl.vars("x y")
    f = sl.Func("f", shape=(A.shape[0],))
    with pytest.raises(sl.AlgorithmError) as e:
        f[x, y] = A[x]
    msg = str(e.value)
    assert "f has a shape of 1 dimension(s)" in msg and "2 argument(s)" in msg
    assert "one Var per dimension" in msg and "shape=" in msg


def test_marking_a_marked_loop_again_says_split_first():
    A, g, f, i, j = _two_stage()
    s = sl.Schedule(f)
    jo, ji = s[f].split(j, 8)
    s[f].vectorize(ji)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].parallel(ji)
    msg = str(e.value)
    assert "parallel(j.i) on f" in msg and "already vectorized" in msg
    assert "split j.i first" in msg


def test_fuse_pure_with_reduction_loop_names_both_and_says_what_to_fuse():
    C, i, j, k = _matmul()
    s = sl.Schedule(C)
    with pytest.raises(sl.ScheduleError) as e:
        s[C].fuse(j, k)
    msg = str(e.value)
    assert "fuse(j, k) on C" in msg
    assert "j is pure" in msg and "k a reduction loop" in msg
    assert "fuse two pure loops or two reduction loops" in msg


def test_fuse_marked_loop_names_the_marked_loop():
    A, g, f, i, j = _two_stage()
    s = sl.Schedule(f)
    jo, ji = s[f].split(j, 8)
    s[f].parallel(i)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].fuse(i, jo)
    msg = str(e.value)
    assert "fuse(i, j.o) on f" in msg and "i is already marked parallel" in msg
    assert "mark the fused loop" in msg


def test_reorder_names_the_repeated_loop():
    A, g, f, i, j = _two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].reorder(j, j)
    msg = str(e.value)
    assert "reorder(j, j) on f" in msg and "the loop j is named twice" in msg
    assert "name each loop once" in msg


def test_compute_inline_of_an_output_says_what_to_do():
    A, g, f, i, j = _two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[f].compute_inline()
    msg = str(e.value)
    assert "compute_inline on f" in msg and "output" in msg
    assert "leave it out" in msg


def test_compute_at_an_input_lists_legal_locations():
    A, g, f, i, j = _two_stage()
    s = sl.Schedule(f)
    with pytest.raises(sl.ScheduleError) as e:
        s[g].compute_at(A, i)
    msg = str(e.value)
    assert "compute_at(A, i) on g" in msg and "A is an Input" in msg
    assert "Legal locations for g are: root, f.i, f.j" in msg


def test_schedule_of_an_undefined_func_says_define_it():
    f = sl.Func("f")
    with pytest.raises(sl.ScheduleError) as e:
        sl.Schedule(f)
    msg = str(e.value)
    assert "Schedule(f)" in msg and "no definition" in msg and "f[...] = ..." in msg


def test_argmax_over_two_rdoms_says_how_to_flatten():
    A = sl.Input("A", sl.float32, (10, 10))
    x = sl.Var("x")
    r, q = sl.RDom(10, name="r"), sl.RDom(10, name="q")
    h = sl.Func("h", shape=(3,))
    with pytest.raises(sl.AlgorithmError) as e:
        h[x] = sl.argmax(A[r, q])
    msg = str(e.value)
    assert "sl.argmax(A[r, q])" in msg and "r, q" in msg and "flattened" in msg


def test_argmax_over_2d_rdom_says_how_to_flatten():
    A = sl.Input("A", sl.float32, (10, 10))
    x = sl.Var("x")
    r = sl.RDom((0, 10), (0, 10), name="r")
    h = sl.Func("h", shape=(3,))
    with pytest.raises(sl.AlgorithmError) as e:
        h[x] = sl.argmax(A[r.x, r.y])
    msg = str(e.value)
    assert "sl.argmax(" in msg and "r has 2" in msg and "flattened" in msg


def test_invert_of_float_names_operand_and_says_cast():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    with pytest.raises(sl.AlgorithmError) as e:
        ~A[x]
    msg = str(e.value)
    assert "'~'" in msg and "A[x]" in msg and "sl.cast" in msg


def test_abs_of_bool_names_operand_and_says_cast():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    with pytest.raises(sl.AlgorithmError) as e:
        sl.abs(A[x] > 0)
    msg = str(e.value)
    assert "sl.abs" in msg and "A[x]" in msg and "sl.cast" in msg


def test_clamp_with_incompatible_bound_is_named_clamp_not_max():
    A = sl.Input("A", sl.uint64, ("N",))
    B = sl.Input("B", sl.int8, ("N",))
    x = sl.Var("x")
    with pytest.raises(sl.AlgorithmError) as e:
        sl.clamp(A[x], B[x], 3)
    msg = str(e.value)
    assert "'clamp'" in msg and "'max'" not in msg and "A[x]" in msg and "B[x]" in msg
    assert "sl.cast" in msg


def test_clamp_with_compatible_typed_bounds_still_works():
    A = sl.Input("A", sl.uint8, ("N",))
    B = sl.Input("B", sl.int16, ("N",))
    x = sl.Var("x")
    assert sl.clamp(A[x], B[x], 3).dtype == sl.int16


def test_pipeline_cycle_through_an_update_says_what_to_do():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=A.shape)
    f[x] = A[x]
    g = sl.Func("g")
    g[x] = f[x]
    h = sl.Func("h", shape=A.shape)
    h[x] = g[x]
    f[x] = f[x] + h[x]
    with pytest.raises(sl.AlgorithmError) as e:
        sl.compile(h)
    msg = str(e.value)
    assert "cycle through h" in msg and "new Func" in msg


def test_frontend_repeated_axis_says_name_each_once():
    x = Tensor.input("x", (2, 3))
    with pytest.raises(sl.AlgorithmError) as e:
        x.sum(axis=(1, 1))
    msg = str(e.value)
    assert "sum" in msg and "(1, 1)" in msg and "each axis once" in msg


def test_frontend_max_over_empty_axis_says_what_to_do():
    x = Tensor.input("x", (2, 0))
    with pytest.raises(sl.AlgorithmError) as e:
        x.max(axis=1)
    msg = str(e.value)
    assert "max" in msg and "(2, 0)" in msg and "non-empty" in msg
