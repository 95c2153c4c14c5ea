"""tensorize onto vpdpbusd / vdpbf16ps as a user writes it: guards of loops outside the
instruction, where() predicates that do not depend on it, and the errors for an instruction
not from schedlang.intrinsics, a tail inside the tile, a region of run-time size and an
operand computed in place."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.algo import types as T
from schedlang.intrinsics import Intrinsic, vpdpbusd
from schedlang.targets.llvm_jit import _resolve_target


def host_has(feature):
    return "+" + feature in _resolve_target("llvm")[1].split(",")


def int8_inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (M, K), dtype=np.uint8),
            rng.integers(-128, 128, (K, N), dtype=np.int8))


def update_gemm(M, N, K, pred=None):
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (K, N))
    i, j = sl.vars("i j")
    r = sl.RDom(K // 4, 4, name="r")
    if pred is not None:
        r = r.where(pred(r, i))
    C = sl.Func("C", shape=(M, N))
    C[i, j] = 0
    C[i, j] += sl.cast(sl.int32, A[i, 4 * r.x + r.y]) * sl.cast(sl.int32, B[4 * r.x + r.y, j])
    return C, i, j


def test_a_guarded_row_tail_outside_the_tile_encloses_the_instruction():
    # 7 rows split by 3: the row guard sits innermost but does not depend on the lanes
    # or the reduction steps, so the instruction runs under it instead of being refused
    M, N, K = 7, 32, 8
    C, i, j = update_gemm(M, N, K)
    s = sl.Schedule(C)
    u = s[C].update(0)
    io, ii = u.split(i, 3, tail="guard")
    jo, ji = u.split(j, 16)
    u.reorder(io, jo, "r.x", ii, ji, "r.y").tensorize(ji, vpdpbusd)
    text = str(sl.lower(C, s))
    assert "vpdpbusd(" in text and "if " in text, text
    if host_has("avx512vnni"):
        a, b = int8_inputs(M, N, K)
        got = sl.compile(C, s)(A=a, B=b)
        np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


def test_a_where_predicate_outside_the_tile_encloses_the_instruction():
    # block-triangular: row i sums the k-blocks 4 * r.x <= i; the predicate does not
    # depend on the lanes or r.y
    M, N, K = 6, 32, 16
    C, i, j = update_gemm(M, N, K, pred=lambda r, i: 4 * r.x <= i)
    s = sl.Schedule(C)
    u = s[C].update(0)
    jo, ji = u.split(j, 16)
    u.reorder(i, "r.x", jo, ji, "r.y").tensorize(ji, vpdpbusd)
    assert "vpdpbusd(" in str(sl.lower(C, s))
    if host_has("avx512vnni"):
        a, b = int8_inputs(M, N, K, seed=3)
        want = np.zeros((M, N), np.int64)
        for row in range(M):
            ks = [k for k in range(K) if 4 * (k // 4) <= row]
            want[row] = a[row, ks].astype(np.int64) @ b[ks].astype(np.int64)
        np.testing.assert_array_equal(sl.compile(C, s)(A=a, B=b), want)


def test_an_intrinsic_not_from_schedlang_intrinsics_is_refused_at_the_directive():
    mine = Intrinsic("vpdpbusd256", 8, 4, T.int32, T.uint8, T.int8, ("avx512vnni", "avx512vl"),
                     "llvm.x86.avx512.vpdpbusd.256", ("i32", 8), "8 lanes")
    C, i, j = update_gemm(3, 16, 8)
    s = sl.Schedule(C)
    u = s[C].update(0)
    jo, ji = u.split(j, 8)
    u.reorder(i, jo, "r.x", ji, "r.y")
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(j\.i\) on C\.update\(0\): "
                                               r"<intrinsic vpdpbusd256.*is not one of the "
                                               r"instructions of schedlang\.intrinsics "
                                               r"\(available: vpdpbusd, vdpbf16ps\)"):
        u.tensorize(ji, mine)
    assert s[C].update(0).tensorized is None


def test_a_reduction_tail_inside_the_tile_names_the_reduction_loop():
    M, N, K = 6, 32, 6
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (K, N))
    i, j = sl.vars("i j")
    k = sl.RDom(K, name="k")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = 0
    C[i, j] += sl.cast(sl.int32, A[i, k]) * sl.cast(sl.int32, B[k, j])
    s = sl.Schedule(C)
    u = s[C].update(0)
    jo, ji = u.split(j, 16)
    ko, ki = u.split(k, 4)
    u.reorder(i, jo, ko, ji, ki).tensorize(ji, vpdpbusd)
    with pytest.raises(sl.ScheduleError) as e:
        sl.lower(C, s)
    msg = str(e.value)
    assert msg.startswith("tensorize(j.i, vpdpbusd) on C.update(0): the loop nest under j.i "
                          "holds a bounds guard on "), msg
    assert msg.split(": ")[1].endswith("bounds guard on k.i"), msg
    assert "make the reduction a multiple of 4" in msg and "lanes' extent" not in msg, msg


def test_an_operand_region_of_run_time_size_is_named_in_the_users_terms():
    # Bp computed at a guarded 48-column tile: its region, hence the step along r.y, varies
    M, N, K = 6, 64, 16
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (N, K))
    i, j, kk = sl.vars("i j kk")
    Bp = sl.Func("Bp")
    Bp[kk, j] = B[j, kk]
    r = sl.RDom(K // 4, 4, name="r")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = sl.sum(sl.cast(sl.int32, A[i, 4 * r.x + r.y]) * sl.cast(sl.int32, Bp[4 * r.x + r.y, j]))
    s = sl.Schedule(C)
    acc = s[C].cache_write("local")
    jo, ji = s[C].split(j, 48, tail="guard")
    s[C].reorder(jo, i, ji)
    s[acc].compute_at(C, jo)
    ajo, aji = s[acc].split(j, 16, tail="pad")
    s[acc].reorder("r.x", i, ajo, aji, "r.y").tensorize(aji, vpdpbusd)
    s[Bp].compute_at(C, jo)
    with pytest.raises(sl.ScheduleError) as e:
        sl.lower(C, s)
    msg = str(e.value)
    assert "the index of Bp (operand b) steps along the loop r.y by the size of Bp's computed " \
           "region" in msg and "compute_root Bp" in msg, msg
    assert ".b1." not in msg and ".extent" not in msg, msg


def test_an_operand_inlined_into_the_update_is_named():
    # a boundary condition read inline is a select, not a read the instruction can take
    M, N, K = 4, 16, 4
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (K, N))
    i, j, kk = sl.vars("i j kk")
    Bz = sl.Func("Bz")
    Bz[kk, j] = sl.constant_exterior(B, 0)[kk, j]
    k = sl.RDom(K, name="k")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = 0
    C[i, j] += sl.cast(sl.int32, A[i, k]) * sl.cast(sl.int32, Bz[k, j])
    s = sl.Schedule(C)
    s[C].update(0).reorder(i, j, k).tensorize(j, vpdpbusd)
    with pytest.raises(sl.ScheduleError) as e:
        sl.lower(C, s)
    msg = str(e.value)
    assert "the update stores C[i, j] + int32(A[i, k]) * int32(Bz[k, j]) into C" in msg, msg
    assert "Bz is inlined" in msg and "compute_root or compute_at Bz" in msg, msg
    s2 = sl.Schedule(C)
    s2[C].update(0).reorder(i, j, k).tensorize(j, vpdpbusd)
    s2[Bz].compute_root()
    assert "vpdpbusd(" in str(sl.lower(C, s2))


def test_a_non_matching_update_is_shown_as_written():
    i, j = sl.vars("i j")
    A = sl.Input("A", sl.uint8, (3, 8))
    B = sl.Input("B", sl.int8, (8, 16))
    k = sl.RDom(8, name="k")
    C = sl.Func("C", shape=(3, 16))
    C[i, j] = 0
    C[i, j] = C[i, j] - sl.cast(sl.int32, A[i, k]) * sl.cast(sl.int32, B[k, j])
    s = sl.Schedule(C)
    u = s[C].update(0)
    ko, ki = u.split(k, 4)
    u.reorder(i, ko, j, ki).tensorize(j, vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(j, vpdpbusd\) on C\.update\(0\): the "
                                               r"update stores C\[i, j\] - int32\(A\[i, k\]\) \* "
                                               r"int32\(B\[k, j\]\) into C"):
        sl.lower(C, s)

