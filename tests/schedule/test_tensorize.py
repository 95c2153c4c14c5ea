"""tensorize onto the CPU dot-product instructions of schedlang.intrinsics: results against
numpy, the instructions in the generated code, the semantics description as a reference,
and every rejected match with a message naming the loop and the instruction."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.intrinsics import INTRINSICS, vdpbf16ps, vpdpbusd
from schedlang.targets.llvm_jit import _resolve_target


def host_has(feature):
    return "+" + feature in _resolve_target("llvm")[1].split(",")


needs_vnni = pytest.mark.skipif(not host_has("avx512vnni"),
                                reason="this CPU has no AVX-512 VNNI to run vpdpbusd")


def lowp_gemm(M, N, K, a_t=sl.uint8, b_t=sl.int8, acc_t=sl.int32, depth=4, lanes=16, tile=64,
              intrinsic=vpdpbusd, lane_split=None, panel=True, unroll=True):
    """C = A @ B with B packed so that ``depth`` consecutive k of one column are adjacent,
    accumulated in a 6 x tile register tile whose 16-lane rows are tensorized."""
    A = sl.Input("A", a_t, (M, K))
    B = sl.Input("B", b_t, (K, N))
    i, j, ko, ki = sl.vars("i j ko ki")
    Bp = sl.Func("Bp")
    Bp[ko, j, ki] = B[depth * ko + ki, j]
    r = sl.RDom(K // depth, depth, name="r")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = sl.sum(sl.cast(acc_t, A[i, depth * r.x + r.y]) * sl.cast(acc_t, Bp[r.x, j, r.y]))
    s = sl.Schedule(C)
    acc = s[C].cache_write("local")
    jo, ji = s[C].split(j, tile)
    io, ii = s[C].split(i, 6)
    s[C].reorder(jo, io, ii, ji).vectorize(ji, 16)
    s[acc].compute_at(C, io)
    s[acc].split(j, lane_split or lanes, names=("jt", "jv"))
    s[acc].reorder("r.x", i, "jt", "jv", "r.y")
    if unroll:
        s[acc].unroll(i).unroll("jt")
    if panel:
        s[Bp].compute_at(C, jo)
    return C, s, acc


def int8_inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (M, K), dtype=np.uint8),
            rng.integers(-128, 128, (K, N), dtype=np.int8))


def exact_int_matmul(a, b):
    # float64 BLAS is exact here: |sum| < 2**53
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)


@needs_vnni
@pytest.mark.parametrize("M,N,K", [(12, 64, 32), (13, 128, 64), (6, 64, 4)])
def test_int8_gemm_vnni_is_exact(M, N, K):
    C, s, acc = lowp_gemm(M, N, K)
    s[acc].tensorize("jv", vpdpbusd)
    kern = sl.compile(C, s)
    a, b = int8_inputs(M, N, K)
    out = kern(A=a, B=b)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, exact_int_matmul(a, b))
    assert "vpdpbusd(" in kern.loop_ir
    assert "llvm.x86.avx512.vpdpbusd.512" in kern.source
    assert "vpdpbusd" in kern.assembly


def test_int8_gemm_compiles_to_vpdpbusd_for_a_cpu_with_it():
    # the instruction checks of the exactness test above, on any machine: compiled for a
    # CPU with AVX-512 VNNI (run only where this one has it)
    C, s, acc = lowp_gemm(12, 64, 32)
    s[acc].tensorize("jv", vpdpbusd)
    kern = sl.compile(C, s, target="llvm:sapphirerapids")
    assert "vpdpbusd(" in kern.loop_ir
    assert "llvm.x86.avx512.vpdpbusd.512" in kern.source
    assert "vpdpbusd" in kern.assembly
    if not host_has("avx512vnni"):
        with pytest.raises(sl.CompileError, match="not run here"):
            kern(A=np.zeros((12, 32), np.uint8), B=np.zeros((32, 64), np.int8))


@needs_vnni
def test_int8_extremes_wrap_like_int32():
    M, N, K = 6, 64, 64
    C, s, acc = lowp_gemm(M, N, K)
    s[acc].tensorize("jv", vpdpbusd)
    a = np.full((M, K), 255, np.uint8)
    b = np.full((K, N), -128, np.int8)
    np.testing.assert_array_equal(sl.compile(C, s)(A=a, B=b), exact_int_matmul(a, b))


def test_semantics_is_a_runnable_reference():
    rng = np.random.default_rng(1)
    acc = rng.integers(-1000, 1000, 16, dtype=np.int32)
    a = rng.integers(0, 256, (16, 4), dtype=np.uint8)
    b = rng.integers(-128, 128, (16, 4), dtype=np.int8)
    got = sl.compile(vpdpbusd.semantics())(acc=acc, a=a, b=b)
    want = acc + (a.astype(np.int32) * b.astype(np.int32)).sum(axis=1)
    np.testing.assert_array_equal(got, want)
    sem = vdpbf16ps.semantics()
    assert [x.name for x in sem.definitions[0].args] == ["j"]
    assert set(INTRINSICS) == {"vpdpbusd", "vdpbf16ps"}
    assert "avx512vnni" in repr(vpdpbusd)


def test_tensorized_schedule_prints_and_replays():
    C, s, acc = lowp_gemm(12, 64, 32)
    s[acc].tensorize("jv", vpdpbusd)
    assert 'tensorize("jv", "vpdpbusd")' in str(s) or "tensorize('jv', 'vpdpbusd')" in str(s)
    C2, s2, _ = lowp_gemm(12, 64, 32)
    s3 = sl.Schedule.from_json(s.to_json(), C2)
    text = sl.lower(C2, s3) if not host_has("avx512vnni") else sl.compile(C2, s3).loop_ir
    assert "vpdpbusd(" in str(text)


def test_bf16_gemm_compiles_to_vdpbf16ps_for_a_cpu_with_it():
    M, N, K = 12, 64, 32
    C, s, acc = lowp_gemm(M, N, K, sl.bfloat16, sl.bfloat16, sl.float32, depth=2,
                          intrinsic=vdpbf16ps)
    s[acc].tensorize("jv", vdpbf16ps)
    kern = sl.compile(C, s, target="llvm:sapphirerapids")
    assert "llvm.x86.avx512bf16.dpbf16ps.512" in kern.source
    # called with the operand type LLVM declares, not an older signature LLVM upgrades
    calls = [ln for ln in kern.source.splitlines() if "call <16 x float> @llvm.x86.avx512bf16" in ln]
    assert calls and all(ln.count("<32 x bfloat>") == 2 for ln in calls)
    assert "vdpbf16ps" in kern.assembly
    rng = np.random.default_rng(2)
    af = rng.standard_normal((M, K)).astype(np.float32)
    bf = rng.standard_normal((K, N)).astype(np.float32)
    a = (af.view(np.uint32) >> 16).astype(np.uint16)   # truncate to bfloat16 bits
    b = (bf.view(np.uint32) >> 16).astype(np.uint16)
    if not host_has("avx512bf16"):
        with pytest.raises(sl.CompileError, match="vdpbf16ps.*avx512bf16.*not run here"):
            kern(A=a, B=b)
        return
    want = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64) @ \
        (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    np.testing.assert_allclose(kern(A=a, B=b), want, rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(host_has("avx512bf16"), reason="this CPU has AVX512-BF16")
def test_host_target_without_the_feature_is_a_compile_error():
    C, s, acc = lowp_gemm(12, 64, 32, sl.bfloat16, sl.bfloat16, sl.float32, depth=2)
    s[acc].tensorize("jv", vdpbf16ps)
    with pytest.raises(sl.CompileError, match="vdpbf16ps needs the CPU feature avx512bf16"):
        sl.compile(C, s)


# ----------------------------------------------------------------------------- errors

def test_unknown_intrinsic():
    C, s, acc = lowp_gemm(12, 64, 32)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(jv\) on C_.*'vpdpbus' is not an "
                                               r"intrinsic.*available: vpdpbusd, vdpbf16ps"):
        s[acc].tensorize("jv", "vpdpbus")


def test_wrong_number_of_loops():
    C, s, acc = lowp_gemm(12, 64, 32)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(jt, vpdpbusd\).*exactly 2 loops "
                                               r"\(16 lanes x 4 reduction steps\).*jt, jv, r.y"):
        s[acc].tensorize("jt", vpdpbusd)


def test_lane_loop_must_be_pure_and_inner_a_reduction():
    C, s, acc = lowp_gemm(12, 64, 32)
    s[acc].reorder("r.x", i := "i", "jt", "r.y", "jv")
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(r.y, vpdpbusd\).*r.y must be a pure "
                                               r"loop"):
        s[acc].tensorize("r.y", vpdpbusd)
    assert i == "i"


def test_wrong_lane_extent():
    C, s, acc = lowp_gemm(12, 64, 32, lane_split=8)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(jv, vpdpbusd\).*jv has extent 8; "
                                               r"split it by 16"):
        s[acc].tensorize("jv", vpdpbusd)


def test_marked_loop_is_rejected():
    C, s, acc = lowp_gemm(12, 64, 32)
    s[acc].vectorize("jv")
    with pytest.raises(sl.ScheduleError, match=r"jv is marked vectorized"):
        s[acc].tensorize("jv", vpdpbusd)


def test_marking_after_tensorize_is_caught_when_lowering():
    C, s, acc = lowp_gemm(12, 64, 32)
    s[acc].tensorize("jv", vpdpbusd).unroll("r.y")
    sl.lower(C, s)                         # unrolled inner loops are replaced as well
    C, s, acc = lowp_gemm(12, 64, 32)
    s[acc].tensorize("jv", vpdpbusd).vectorize("jv")
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(jv, vpdpbusd\) on C_.*the loop jv is "
                                               r"marked vectorized"):
        sl.lower(C, s)


def test_wrong_operand_dtypes_name_the_instruction():
    C, s, acc = lowp_gemm(12, 64, 32, a_t=sl.int8)   # vpdpbusd wants uint8 x int8
    s[acc].tensorize("jv", vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(jv, vpdpbusd\) on C_.*reading A "
                                               r"\(int8\), Bp \(int8\).*a uint8 and b int8"):
        sl.lower(C, s)


def test_non_affine_operand_index():
    M, N, K = 12, 128, 32
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (K, N))
    i, j, jb, ko, ki = sl.vars("i j jb ko ki")
    Bp = sl.Func("Bp")
    Bp[jb, ko, j, ki] = B[4 * ko + ki, 64 * jb + j]
    r = sl.RDom(K // 4, 4, name="r")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = sl.sum(sl.cast(sl.int32, A[i, 4 * r.x + r.y])
                     * sl.cast(sl.int32, Bp[j // 64, r.x, j % 64, r.y]))
    s = sl.Schedule(C)
    s[Bp].compute_root()
    s[C].split(j, 16, names=("jt", "jv"))
    s[C].reorder(i, "r.x", "jt", "jv", "r.y")
    s[C].tensorize("jv", vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"index of Bp \(operand b\) is not affine in the "
                                               r"loop jv"):
        sl.lower(C, s)


def test_an_operand_stepping_by_a_runtime_size_is_told_to_pack():
    # B[4*r.x + r.y, j] with a symbolic N steps by N along r.y: affine, but not constant
    A = sl.Input("A", sl.uint8, ("M", "K"))
    B = sl.Input("B", sl.int8, ("K", "N"))
    i, j = sl.vars("i j")
    r = sl.RDom(A.shape[1] // 4, 4, name="r")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(sl.cast(sl.int32, A[i, 4 * r.x + r.y]) * sl.cast(sl.int32, B[4 * r.x + r.y, j]))
    s = sl.Schedule(C)
    s.assume(B.shape[1] % 16 == 0)
    s.assume(A.shape[1] % 4 == 0)
    _, ji = s[C].split(j, 16)
    s[C].reorder(i, "j.o", "r.x", ji, "r.y")
    s[C].tensorize(ji, vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(j.i, vpdpbusd\) on C: the index of B "
                       r"\(operand b\) steps by N along the loop r.y, a size known only at run "
                       r"time; vpdpbusd needs a constant step.*packed\[ko, j, ki\] = "
                       r"B\[4 \* ko \+ ki, j\]"):
        sl.lower(C, s)


@needs_vnni
def test_tensorize_directly_on_the_output_and_a_tail_guard():
    M, N, K = 5, 32, 16
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (K, N))
    i, j, ko, ki = sl.vars("i j ko ki")
    Bp = sl.Func("Bp")
    Bp[ko, j, ki] = B[4 * ko + ki, j]
    r = sl.RDom(K // 4, 4, name="r")
    C = sl.Func("C", shape=(M, N))
    C[i, j] = sl.sum(sl.cast(sl.int32, A[i, 4 * r.x + r.y]) * sl.cast(sl.int32, Bp[r.x, j, r.y]))
    s = sl.Schedule(C)
    s[Bp].compute_root()
    s[C].split(j, 16, names=("jt", "jv"))
    s[C].reorder(i, "r.x", "jt", "jv", "r.y").tensorize("jv", vpdpbusd)
    a, b = int8_inputs(M, N, K)
    np.testing.assert_array_equal(sl.compile(C, s)(A=a, B=b), exact_int_matmul(a, b))
    # 40 columns do not split evenly by 16: the guarded tail cannot become one instruction
    C2 = sl.Func("C2", shape=(M, 40))
    B2 = sl.Input("B2", sl.int8, (K, 40))
    Bq = sl.Func("Bq")
    Bq[ko, j, ki] = B2[4 * ko + ki, j]
    C2[i, j] = sl.sum(sl.cast(sl.int32, A[i, 4 * r.x + r.y]) * sl.cast(sl.int32, Bq[r.x, j, r.y]))
    s2 = sl.Schedule(C2)
    s2[Bq].compute_root()
    s2[C2].split(j, 16, names=("jt", "jv"), tail="guard")
    s2[C2].reorder(i, "r.x", "jt", "jv", "r.y").tensorize("jv", vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(jv, vpdpbusd\) on C2.*bounds guard"):
        sl.lower(C2, s2)


def test_vectorized_loop_around_a_tensorized_nest():
    C, s, acc = lowp_gemm(12, 64, 32, unroll=False)
    s[acc].vectorize("jt").tensorize("jv", vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"vectorize\(jt\) on C_.* encloses a tensorized "
                                               r"loop nest \(vpdpbusd\).*unroll jt instead"):
        sl.lower(C, s)


# ----------------------------------------------------------------------------- fuzzing

from hypothesis import HealthCheck, given, settings, strategies as hs  # noqa: E402


RAN = []   # examples that compiled and ran (checked after the fuzz test)


@needs_vnni
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(M=hs.integers(1, 14), N=hs.sampled_from([16, 32, 48, 64, 80]),
       K=hs.sampled_from([4, 8, 12, 36]), lane_split=hs.sampled_from([8, 16, 32]),
       tile=hs.sampled_from([16, 32, 64]), order=hs.permutations(["r.x", "i", "jt"]),
       unroll=hs.booleans(), panel=hs.booleans())
def test_random_tensorized_gemms_are_exact_or_rejected(M, N, K, lane_split, tile, order,
                                                       unroll, panel, monkeypatch):
    """Random sizes, tiles and loop orders: each either runs exactly (with every access
    checked) or is rejected with a ScheduleError; nothing else."""
    monkeypatch.setenv("SCHEDLANG_DEBUG", "bounds")
    C, s, acc = lowp_gemm(M, N, K, lane_split=lane_split, tile=tile, panel=panel,
                          unroll=False)
    try:
        s[acc].reorder(*order, "jv", "r.y")
        if unroll:
            s[acc].unroll("i")
        s[acc].tensorize("jv", vpdpbusd)
        kern = sl.compile(C, s)
    except sl.ScheduleError:
        return
    RAN.append(1)
    a, b = int8_inputs(M, N, K, seed=M * N + K)
    np.testing.assert_array_equal(kern(A=a, B=b), exact_int_matmul(a, b))


@needs_vnni
def test_the_fuzzing_ran_some_tensorized_kernels():
    if not RAN:
        pytest.skip("run together with the fuzz test above")
    assert len(RAN) >= 5


def test_a_lane_loop_holding_an_inline_sums_init_says_to_write_the_update_form():
    A = sl.Input("A", sl.uint8, (16, 4))
    B = sl.Input("B", sl.int8, (16, 4))
    j = sl.Var("j")
    r = sl.RDom(4, name="r")
    C = sl.Func("C", shape=(16,))
    C[j] = sl.sum(sl.cast(sl.int32, A[j, r]) * sl.cast(sl.int32, B[j, r]))
    s = sl.Schedule(C)
    s[C].tensorize(j, vpdpbusd)
    with pytest.raises(sl.ScheduleError, match=r"tensorize\(j, vpdpbusd\) on C: the loop j holds "
                                               r"both the initial value of C's inline reduction .*"
                                               r"tensorize s\[C\]\.update\(0\)"):
        sl.compile(C, s)
    if not host_has("avx512vnni"):
        return
    # the advice, followed, compiles to the instruction and is exact
    D = sl.Func("D", shape=(16,))
    D[j] = 0
    D[j] += sl.cast(sl.int32, A[j, r]) * sl.cast(sl.int32, B[j, r])
    s = sl.Schedule(D)
    s[D].update(0).tensorize(j, vpdpbusd)
    a = np.arange(64, dtype=np.uint8).reshape(16, 4) * 3
    b = (np.arange(64, dtype=np.int16).reshape(16, 4) - 32).astype(np.int8)
    np.testing.assert_array_equal(sl.compile(D, s)(A=a, B=b),
                                  (a.astype(np.int32) * b).sum(1))


@needs_vnni
def test_a_prefetch_beside_the_tensorized_update_goes_before_the_instruction():
    """prefetch is a hint: under a tensorized loop it is issued once before the instruction,
    for the first iteration of the loops it replaces, and the tile stays exact."""
    M, N, K = 12, 64, 128
    C, s, acc = lowp_gemm(M, N, K)
    s[acc].tensorize("jv", vpdpbusd)
    s[acc].prefetch("A", "r.x", 8)
    kern = sl.compile(C, s)
    a, b = int8_inputs(M, N, K)
    np.testing.assert_array_equal(kern(A=a, B=b), exact_int_matmul(a, b))
    lines = kern.loop_ir.splitlines()
    first_op = next(n for n, line in enumerate(lines) if "vpdpbusd(" in line)
    fetches = [line.strip() for line in lines if line.strip().startswith("prefetch A[")]
    assert fetches and "prefetch A[" in lines[first_op - 1], "\n".join(lines)
    # one per row of the 6-row tile (merged across the unrolled columns), 8 r.x = 32 k ahead
    assert len(fetches) == 6 and all("r.x * 4 + " in f for f in fetches), fetches
    assert "llvm.prefetch" in kern.source and "prefetcht0" in kern.assembly


def test_an_operand_read_backwards_is_told_to_pack_not_called_a_runtime_size():
    i, j = sl.vars("i j")
    k = sl.RDom(8, name="k")
    a = sl.Input("a", sl.uint8, (2, 8))
    b = sl.Input("b", sl.int8, (8, 16))
    acc = sl.Func("acc", shape=(2, 16))
    acc[i, j] = sl.cast(sl.int32, 0)
    acc[i, j] = acc[i, j] + sl.cast(sl.int32, a[i, k]) * sl.cast(sl.int32, b[7 - k, j])
    s = sl.Schedule(acc)
    u = s[acc].update(0)
    jo, ji = u.split(j, 16)
    ko, ki = u.split(k, 4)
    u.reorder(i, jo, ko, ji, ki)
    u.tensorize(ji, vpdpbusd)
    with pytest.raises(sl.ScheduleError) as e:
        sl.lower(acc, s)
    msg = str(e.value)
    assert "the index of b (operand b) steps by -16 along the loop k.i; vpdpbusd reads each " \
           "operand forward in memory" in msg and "packed[ko, j, ki]" in msg, msg
    assert "run time" not in msg
