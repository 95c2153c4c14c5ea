"""Multi-stage pipelines and index math a user writes from SPEC sections 1-3: narrowing casts,
floor division / modulo in indices, update stages with RDoms of any minimum, under splits,
unrolls and vectorized loops; each result is compared with a numpy oracle."""
import numpy as np
import pytest

import schedlang as sl


@pytest.mark.parametrize("schedule", ["vectorize", "split_split_vectorize"])
def test_a_narrowing_cast_of_a_vectorized_index_wraps_in_every_lane(schedule):
    # SPEC: narrowing ints wrap. uint16(i * 5000) passes 65535 at i = 14: in a vectorized
    # loop the cast must wrap each lane, not become a ramp of stride 5000 (which read B
    # far out of bounds)
    B = sl.Input("B", sl.int32, (256,))
    i = sl.Var("i")
    out = sl.Func("out", shape=(40,))
    out[i] = B[sl.cast(sl.int32, sl.cast(sl.uint16, i * 5000)) // 300]
    s = sl.Schedule(out)
    if schedule == "vectorize":
        s[out].vectorize(i, 8)
    else:
        _, ii = s[out].split(i, 8)
        s[out].split(ii, 4)
        s[out].vectorize("i.i.i").unroll("i.i.o")
    b = np.arange(256, dtype=np.int32) * 3 + 1
    idx = (np.arange(40) * 5000 % 65536) // 300
    np.testing.assert_array_equal(sl.compile(out, s)(B=b), b[idx])


def test_a_clamp_of_an_unsigned_wrap_is_kept():
    # uint32(i - 5) wraps to about 4e9 for i < 5, so its quotient by 2**28 is 15 there; the
    # clamp to [0, 255] is not the identity and must stay (it read B[0] for every i)
    B = sl.Input("B", sl.int32, (256,))
    i = sl.Var("i")
    out = sl.Func("out", shape=(37,))
    out[i] = B[sl.clamp(sl.cast(sl.int32, sl.cast(sl.uint32, i - 5) // 2**28), 0, 255)]
    s = sl.Schedule(out)
    s[out].split(i, 16, tail="shift")
    b = np.arange(256, dtype=np.int32) * 7 - 100
    idx = np.clip((np.arange(37) - 5) % 2**32 // 2**28, 0, 255)
    np.testing.assert_array_equal(sl.compile(out, s)(B=b), b[idx])


def test_a_read_at_an_unsigned_wrap_outside_the_input_is_refused():
    # uint32(i - 5) // 2**29 is 7 for i < 5: B[8] is outside B's 4 elements, whatever the
    # int32 range [-5, 2] of i - 5 suggests; SPEC: never read out of bounds
    B = sl.Input("B", sl.int32, (4,))
    i = sl.Var("i")
    out = sl.Func("out", shape=(8,))
    out[i] = B[sl.cast(sl.int32, sl.cast(sl.uint32, i - 5) // 2**29) + 1]
    with pytest.raises(sl.AlgorithmError, match=r"out reads B\[int32\(uint32\(i - 5\) // "
                                                r"536870912\) \+ 1\].*\[1, 8\].*B's extent"):
        sl.compile(out, sl.Schedule(out))


@pytest.mark.parametrize("n,ok", [(4, True), (3, False)])
def test_an_unsigned_cast_of_a_producers_variable_under_compute_at(n, ok):
    # h's region starts at i.o * 4 - 1 (symbolic, -1 in the first tile): uint32(-1) // 2**30
    # reads A[3], inside A for n = 4 and outside it (refused, naming the cast) for n = 3
    A = sl.Input("A", sl.int32, (n,))
    x, i = sl.vars("x i")
    h = sl.Func("h")
    h[x] = A[sl.cast(sl.int32, sl.cast(sl.uint32, x) // 2**30)] + x
    out = sl.Func("out", shape=(8,))
    out[i] = h[i - 1]
    s = sl.Schedule(out)
    s[out].split(i, 4, tail="shift")
    s[h].compute_at(out, "i.o")
    s[out].vectorize("i.i")
    if not ok:
        with pytest.raises(sl.AlgorithmError, match=r"h reads A\[int32\(uint32\(x\) // "
                                                    r"1073741824\)\].*\[0, 3\]"):
            sl.compile(out, s)
        return
    a = np.arange(n, dtype=np.int32) * 5
    ii = np.arange(8) - 1
    np.testing.assert_array_equal(sl.compile(out, s)(A=a), a[ii % 2**32 // 2**30] + ii)


def test_unsigned_arithmetic_in_an_index_wraps_for_the_access_check():
    # uint32(i) - 5 wraps to about 4e9 for i < 5, so the index is 8 there: outside B. The
    # check modelled it as i - 5 (quotient -1, index 0) and let the kernel read B[8]
    B = sl.Input("B", sl.int32, (4,))
    i = sl.Var("i")
    out = sl.Func("out", shape=(8,))
    out[i] = B[sl.cast(sl.int32, (sl.cast(sl.uint32, i) - 5) // 2**29) + 1]
    with pytest.raises(sl.AlgorithmError, match=r"out reads B\[int32\(\(uint32\(i\) - 5\) // "
                                                r"536870912\) \+ 1\].*\[1, 8\].*B's extent"):
        sl.compile(out, sl.Schedule(out))


@pytest.mark.parametrize("vectorize", [False, True])
def test_narrow_arithmetic_in_an_index_is_bounded_by_its_type(vectorize):
    # uint8(i) * 200 and int8(i) + 125 wrap; their quotients by 64 stay in [0, 3] (the
    # check used to claim [0, 796] / [1, 5] and refuse reads that are inside B)
    B = sl.Input("B", sl.int32, (4,))
    i = sl.Var("i")
    out = sl.Func("out", shape=(8,))
    out[i] = B[sl.cast(sl.int32, sl.cast(sl.uint8, i) * 200) // 64] \
        + B[sl.cast(sl.int32, sl.cast(sl.int8, i) + 125) // 64 + 2]
    s = sl.Schedule(out)
    if vectorize:
        s[out].vectorize(i, 4)
    b = np.arange(4, dtype=np.int32) * 10 + 1
    ii = np.arange(8)
    want = b[(ii * 200 % 256) // 64] + b[((ii + 125 + 128) % 256 - 128) // 64 + 2]
    np.testing.assert_array_equal(sl.compile(out, s)(B=b), want)


def test_a_min_of_a_wrapped_unsigned_difference_is_kept():
    # uint8(i) - 2 is 254 / 255 for i < 2: min(., 200) binds there and must not be dropped
    B = sl.Input("B", sl.int32, (256,))
    i = sl.Var("i")
    out = sl.Func("out", shape=(8,))
    out[i] = B[sl.cast(sl.int32, sl.min(sl.cast(sl.uint8, i) - 2, 200))]
    b = np.arange(256, dtype=np.int32) * 2
    want = b[np.minimum((np.arange(8) - 2) % 256, 200)]
    np.testing.assert_array_equal(sl.compile(out, sl.Schedule(out))(B=b), want)


def test_a_wrong_consumer_of_compute_at_or_store_at_names_the_directive():
    A = sl.Input("A", sl.float32, ("M", "K"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], A.shape[1]))
    C[i, j] = 0.0
    C[i, j] = C[i, j] + A[i, k] * A[i, j]
    s = sl.Schedule(C)
    Ac = s[A].cache_read(C, memory="local")
    with pytest.raises(sl.ScheduleError, match=r"^compute_at on A_C takes a Func, an Input, "
                                               r"a frontend Tensor or a name, got None"):
        s[Ac].compute_at(None, i)
    with pytest.raises(sl.ScheduleError, match=r"^store_at on A_C: no Func or Input named "
                                               r"'Cc' in this pipeline; it has: .*C"):
        s[Ac].store_at("Cc", i)
    assert [d.op for d in s.trace] == ["cache_read"]
