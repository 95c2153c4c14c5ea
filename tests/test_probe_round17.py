"""Mistakes found by a seventeenth independent round of testing from SPEC.md alone:
- ``Tensor.input("_c0", ...)`` after a constant ``Tensor(array)`` clashed with the name
  the frontend had given the constant, and the ScheduleError blamed the user;
- two Inputs of one name raised only ScheduleError, though the algorithm is at fault;
- an update storing a literal too large for its Func's type said "widen the operand";
- ``avg_pool2d``'s message named a ``dilation`` it does not take; ``pad`` took a fill value
  given twice (``value=`` and ``constant_values=``) and used one silently;
- ``cuda:sm_9`` and ``cuda:sm_1000`` passed as CUDA architectures;
- ``bench conv --size 1x2x3`` suggested ``--size 1024`` for the five-number conv form;
- a tail='pad' split of the outer loop of an exact split (``split(x, 1)`` then
  ``split("x.o", 64, tail="pad")``) ran past the storage and the input: the process died;
- ``unroll(v, 4)`` / ``vectorize(v, 4)`` of a parallel loop was refused, though both are
  "split, then mark the inner loop"; splitting a loop twice said "has no loop named";
- a tail='pad' split by 1 of an output was refused; a fact about sizes that are constants
  (``A.shape[1] % 4 == 0`` with a width of 16) was refused even when true;
- a tail='pad' split of a fused loop with a producer computed inside it read the producer
  below its region (a memory-safety fuzzer with guard pages found it)."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor


def test_tensor_input_may_not_take_a_constants_name():
    c = Tensor(np.ones(2, np.float32))
    name = c.input_node.name
    with pytest.raises(sl.AlgorithmError, match=rf"Tensor.input\('{name}'\): the frontend "
                       r"already gave this name to a constant Tensor\(array\); choose another"):
        Tensor.input(name, (2,))
    # another name works beside the constant, and the constant keeps its data
    x = Tensor.input("x_round16", (2,))
    out = sl.compile(x + c)(x_round16=np.array([1, 2], np.float32))
    np.testing.assert_array_equal(out, [2, 3])


def test_two_inputs_of_one_name_are_an_algorithm_and_a_schedule_error():
    x = sl.Var("x")
    a1, a2 = sl.Input("A", sl.float32, (4,)), sl.Input("A", sl.float32, (4,))
    g = sl.Func("g", shape=(4,))
    g[x] = a1[x] + a2[x]
    for cls in (sl.AlgorithmError, sl.ScheduleError):
        with pytest.raises(cls, match=r"two different Funcs/Inputs are both named 'A'; give "
                           r"each a unique name"):
            sl.compile(g)


def test_update_literal_too_large_for_the_funcs_type_names_the_func():
    A = sl.Input("A", sl.uint8, (8,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(8,))
    f[x] = A[x]
    with pytest.raises(sl.AlgorithmError, match=r"the literal 300 does not fit sl.uint8 \(the "
                       r"type of Func f\); store a value that fits, or give Func f a wider "
                       r"type in its first definition \(sl.cast there\)"):
        f[x] = 300
    # an operand's literal still says to widen the operand
    with pytest.raises(sl.AlgorithmError, match=r"does not fit sl.uint8 .*use sl.cast to "
                       r"widen the operand first"):
        A[x] + 300


def test_pool_messages_name_only_their_own_arguments():
    t = Tensor(np.ones((1, 1, 4, 4), np.float32))
    with pytest.raises(sl.AlgorithmError) as e:
        F.avg_pool2d(t, 0)
    assert str(e.value) == ("avg_pool2d: kernel_size and stride must be >= 1, got "
                            "kernel_size=0, stride=None")
    with pytest.raises(sl.AlgorithmError, match=r"max_pool2d: kernel_size, stride and "
                       r"dilation must be >= 1, got kernel_size=2, stride=None, dilation=0"):
        F.max_pool2d(t, 2, dilation=0)


def test_pad_refuses_a_fill_value_given_twice():
    t = Tensor(np.ones((2, 2), np.float32))
    with pytest.raises(sl.AlgorithmError, match=r"pad: the fill value is given twice "
                       r"\(value=1 and constant_values=2\); give one of them"):
        t.pad(1, value=1, constant_values=2)
    # constant_values alone, or beside the default value, is numpy's spelling
    got = t.pad(1, constant_values=2).numpy()
    np.testing.assert_array_equal(got, np.pad(np.ones((2, 2), np.float32), 1,
                                              constant_values=2))
    got = F.pad(t, ((0, 1), (1, 0)), 0, constant_values=3).numpy()
    np.testing.assert_array_equal(got, np.pad(np.ones((2, 2), np.float32), ((0, 1), (1, 0)),
                                              constant_values=3))


def _add_one():
    A = sl.Input("A", sl.float32, (4,))
    x = sl.Var("x")
    f = sl.Func("f", shape=(4,))
    f[x] = A[x] + 1
    return f


@pytest.mark.parametrize("arch", ["sm_9", "sm_1000", "sm_09", "sm_"])
def test_cuda_architecture_needs_two_or_three_digits(arch):
    with pytest.raises(sl.CompileError, match=rf"'{arch}' is not a cuda architecture; use "
                       r"'cuda' \(the device's own\) or e.g. 'cuda:sm_90'"):
        sl.compile(_add_one(), target=f"cuda:{arch}")


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a", "sm_100", "sm_120f"])
def test_cuda_architectures_of_two_or_three_digits_are_taken(arch):
    assert "__global__" in sl.compile(_add_one(), target=f"cuda:{arch}").source


def test_bench_conv_size_message_gives_a_conv_example(cli_run):
    r = cli_run("bench", "conv", "--size", "1x2x3")
    assert r.returncode != 0
    assert "--size '1x2x3' does not fit workload conv, which takes C or NxCxHxWxK (e.g. " \
        "--size 1x64x56x56x64)" in r.stderr


# ---------------------------------------------------------------- schedules (SPEC §2)
def _root_producer(read=lambda A: A):
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f")
    f[x] = read(A)[x] * 2.0
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = f[x] + 1.0
    s = sl.Schedule(g)
    s[f].compute_root()
    return A, x, f, g, s


def test_pad_split_of_an_exact_splits_outer_loop_is_refused_where_it_reads_outside():
    # once: f was stored over N points while its loops ran over (N + 63) // 64 * 64, and
    # A was read as far: the process died in malloc
    A, x, f, g, s = _root_producer()
    s[f].split(x, 1)
    s[f].split("x.o", 64, tail="pad")
    with pytest.raises(sl.ScheduleError, match=r"split\(x.o, 64, tail='pad'\) on f: rounding "
                       r"the region of f up makes f read A\[x\] outside A's extent"):
        sl.compile(g, s)


@pytest.mark.parametrize("n", [1, 5, 64, 65, 200])
def test_pad_split_of_an_exact_splits_outer_loop_pads_the_storage(n):
    A, x, f, g, s = _root_producer(sl.clamp_edge)
    s[f].split(x, 1)
    s[f].split("x.o", 64, tail="pad")
    ir_text = str(sl.lower(g, s))
    assert "let f.b0.extent = max((N + 63) // 64 * 64 - 1, N - 1) + 1" in ir_text, ir_text
    a = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(g, s)(A=a), a * 2 + 1)


def test_pad_split_after_a_split_known_exact_by_an_assumption_pads_the_storage():
    A, x, f, g, s = _root_producer(sl.clamp_edge)
    s.assume(A.shape[0] % 4 == 0)
    s[f].split(x, 4)
    s[f].split("x.o", 64, tail="pad")
    a = np.arange(40, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(g, s)(A=a), a * 2 + 1)


def test_unroll_or_vectorize_with_a_factor_keeps_a_parallel_loop_parallel_outside():
    A = sl.Input("A", sl.float32, (64, 100))
    i, j = sl.vars("i j")
    D = sl.Func("D", shape=(64, 100))
    D[i, j] = A[i, j] * 2
    a = np.random.default_rng(0).random((64, 100), dtype=np.float32)
    for how in ("unroll", "vectorize"):
        s = sl.Schedule(D)
        s[D].parallel(i)
        getattr(s[D], how)(i, 4)
        assert s[D].loop_names() == ["i.o", "i.i", "j"]
        text = str(sl.lower(D, s))
        assert "parallel for D.s0.i.o in [0, 16):" in text, text
        assert f"s[D].{how}('i', 4)" in str(s)
        np.testing.assert_array_equal(sl.compile(D, s)(A=a), a * 2)
        replay = sl.Schedule(D)
        exec(str(s), dict(sl=sl, s=replay, A=A, D=D, i=i, j=j))
        assert str(sl.lower(D, replay)) == text


def test_a_split_or_fused_away_loop_is_named_as_such():
    A = sl.Input("A", sl.float32, (64, 100))
    i, j = sl.vars("i j")
    D = sl.Func("D", shape=(64, 100))
    D[i, j] = A[i, j] * 2
    s = sl.Schedule(D)
    s[D].split(i, 4)
    with pytest.raises(sl.ScheduleError) as e:
        s[D].split(i, 8)
    assert str(e.value) == ("split(i) on D: i was split into i.o and i.i, so it is no longer a "
                            "loop; use one of its loops: i.o, i.i, j")
    s[D].fuse("i.o", "i.i", name="ii")
    with pytest.raises(sl.ScheduleError) as e:
        s[D].vectorize("i.i")
    assert str(e.value) == ("vectorize(i.i) on D: i.i was fused into ii, so it is no longer a "
                            "loop; use one of its loops: ii, j")


def test_pad_split_by_one_of_an_output_is_taken():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    g = sl.Func("g", shape=(A.shape[0],))
    g[x] = A[x] + 1.0
    s = sl.Schedule(g)
    s[g].split(x, 1, tail="pad")
    a = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(sl.compile(g, s)(A=a), a + 1)
    with pytest.raises(sl.ScheduleError, match=r"tail='pad' rounds the computed region up, but "
                       "g is an output"):
        s[g].split("x.o", 2, tail="pad")


def test_a_fact_about_constant_sizes_is_taken_when_true_and_refused_when_false():
    A = sl.Input("A", sl.float32, (64, 16))
    i, j = sl.vars("i j")
    D = sl.Func("D", shape=(64, 16))
    D[i, j] = A[i, j] * 2
    s = sl.Schedule(D)
    s.assume(A.shape[1] % 4 == 0)       # the same line serves a symbolic width
    s[D].vectorize(j, 4)
    a = np.ones((64, 16), np.float32)
    np.testing.assert_array_equal(sl.compile(D, s)(A=a), a * 2)
    assert str(sl.Schedule.from_json(s.to_json(), D)) == str(s)
    with pytest.raises(sl.ScheduleError, match=r"assume\(16 % 3 == 0\): the fact is false \(it "
                       r"mentions no size or Param that a call could change"):
        s.assume(A.shape[1] % 3 == 0)
    with pytest.raises(sl.AlgorithmError, match=r"sl.assume\(64 < 10\): the fact is false"):
        sl.assume(A.shape[0] < 10)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 15, 16, 17, 40])
def test_pad_split_of_a_fused_loop_with_a_producer_inside_reads_only_what_it_computed(n):
    # the padded iterations are clamped back onto the last point; the producer's region
    # was taken from the unclamped index, came out empty, and the consumer read below it
    A = sl.Input("A", sl.int32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f")
    f[x] = A[x] * 2
    g = sl.Func("g")
    g[x] = f[x] + 1
    o = sl.Func("o", shape=(A.shape[0],))
    o[x] = g[x] + 1
    s = sl.Schedule(o)
    s[g].compute_root()
    s[g].split("x", 2, tail="guard")
    s[g].fuse("x.o", "x.i")
    s[g].split("x.o.x.i.f", 8, tail="pad")
    s[f].compute_at(g, "x.o.x.i.f.i")
    a = np.arange(n, dtype=np.int32)
    np.testing.assert_array_equal(sl.compile(o, s)(A=a), a * 2 + 2)


def test_pad_split_of_a_fused_loop_passes_the_bounds_checked_build(monkeypatch):
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    test_pad_split_of_a_fused_loop_with_a_producer_inside_reads_only_what_it_computed(11)
