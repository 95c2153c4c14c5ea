"""Probes of how a user calls a compiled kernel (SPEC sections 3 and 7): targets for other
CPUs, array protocols, ``out=``, Params and ``kern.time`` with the same arguments."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import schedlang as sl

from schedlang.targets.llvm_host_check import missing_feature

AVX2_HOST = "+sse4.2,+popcnt,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+lzcnt,+movbe"
EVERY_FEATURE_HOST = AVX2_HOST + (",+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512cd,+avx512fp16,"
                           "+fma4,+xop")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("line,feature", [
    # AVX-512 instructions without a VEX form, on ymm0-15 / xmm0-15 and without a mask:
    # what LLVM emits for skylake-avx512 / znver4 (256-bit vectors preferred)
    ("vpminsq (%rax,%rsi), %ymm0, %ymm0", "avx512vl"),          # int64 min
    ("vpmaxuq (%rax,%rsi), %ymm0, %ymm0", "avx512vl"),          # uint64 max
    ("vpabsq (%rax,%rdx), %ymm0", "avx512vl"),                  # int64 abs
    ("vpsraq $3, (%rax,%rdx), %ymm0", "avx512vl"),              # int64 >> 3
    ("vpsravq %ymm2, %ymm1, %ymm1", "avx512vl"),
    ("vpternlogd $228, (%rax,%rsi), %xmm0, %xmm1", "avx512vl"),  # (a & b) | (~a & c)
    ("vpmovqd %ymm0, (%rcx,%rdx)", "avx512vl"),                 # int64 -> int32
    ("vpmovdb %xmm0, (%rcx,%rdx)", "avx512vl"),
    ("vcvtudq2ps (%rax,%rdx), %xmm0", "avx512vl"),              # uint32 -> float32
    ("vprolq $32, %xmm5, %xmm6", "avx512vl"),
    ("vpermt2d %xmm7, %xmm1, %xmm5", "avx512vl"),
    ("vpbroadcastd %eax, %ymm0", "avx512vl"),                   # from a general register
    ("vptestmb %xmm1, %xmm1, %k0", "avx512vl"),
    ("kmovw %k0, %eax", "avx512f"),                             # mask register k0
    ("vcvtusi2ssl %eax, %xmm0, %xmm0", "avx512f"),
    ("vaddss {rn-sae}, %xmm1, %xmm2, %xmm3", "avx512f"),
    ("vcvtps2phx (%rax), %ymm0", "avx512fp16"),
    # 8 doubles from memory to 8 floats: a 512-bit conversion whose only register is a ymm
    ("vcvtpd2ps 64(%rax,%rcx,8), %ymm3", "avx512f"),
    ("vcvttpd2dq (%rax), %ymm0", "avx512f"),
    # AMD Bulldozer (llvm:bdver1): FMA4 and XOP, which neither Intel nor Zen CPUs have
    ("vfmaddps %xmm0, %xmm1, %xmm2, %xmm3", "fma4"),
    ("vpcmov %xmm0, %xmm1, %xmm2, %xmm3", "xop"),
    ("vprotd $3, %xmm0, %xmm1", "xop"),
    ("vpshld %xmm0, %xmm1, %xmm2", "xop"),
    ("vmovw %eax, %xmm0", "avx512fp16"),
])
def test_avx512_only_instructions_on_narrow_registers_are_found(line, feature):
    asm = f"\t.text\nkernel:\n\t{line}\n\tretq\n"
    assert missing_feature(asm, AVX2_HOST) == (line, feature)
    assert missing_feature(asm, EVERY_FEATURE_HOST) is None


@pytest.mark.parametrize("line", [
    "vpbroadcastd %xmm0, %ymm0", "vpbroadcastd (%rax), %ymm0", "vpcmpeqd %ymm0, %ymm1, %ymm2",
    "vpmovsxbd (%rax), %ymm0", "vpmovmskb %ymm0, %eax", "vcvttps2dq %ymm0, %ymm1",
    "vcvtps2ph $4, %ymm0, (%rax)", "vpblendd $3, %ymm0, %ymm1, %ymm2", "vpsravd %ymm0, %ymm1, %ymm2",
    "vperm2i128 $1, %ymm0, %ymm1, %ymm2", "vbroadcastf128 (%rax), %ymm0", "vpsrlq $3, %ymm0, %ymm0",
    "vpalignr $4, %ymm0, %ymm1, %ymm2", "vcvttss2si %xmm0, %eax", "vroundps $9, %ymm0, %ymm0",
    "vcvtpd2ps %ymm0, %xmm0", "vcvtpd2psy (%rax), %xmm0", "vcvttpd2dqy (%rax), %xmm1",
    "vfmadd231ps %ymm0, %ymm1, %ymm2", "vfmaddsub213pd %ymm0, %ymm1, %ymm2",
    "vfnmadd132ss %xmm0, %xmm1, %xmm2", "vphaddd %ymm0, %ymm1, %ymm2", "vpshufd $1, %ymm0, %ymm1",
    "vpshufhw $1, %ymm0, %ymm1", "vpermilps $1, %ymm0, %ymm1", "vpermd %ymm0, %ymm1, %ymm2",
])
def test_avx2_instructions_are_not_taken_for_avx512_ones(line):
    assert missing_feature(f"\t{line}\n", AVX2_HOST) is None


_INT64_MIN_FOR_SKYLAKE = textwrap.dedent("""
    import numpy as np, schedlang as sl
    import llvmlite.binding as llvm
    x = sl.Var("x")
    A = sl.Input("A", sl.int64, (64,))
    B = sl.Input("B", sl.int64, (64,))
    f = sl.Func("f", shape=(64,))
    f[x] = sl.min(A[x], B[x])
    s = sl.Schedule(f)
    s[f].vectorize(x, 4)
    kern = sl.compile(f, s, target="llvm:skylake-avx512")
    a, b = np.arange(64), np.arange(64)[::-1].copy()
    if llvm.get_host_cpu_features().get("avx512vl", False):
        assert np.array_equal(kern(A=a, B=b), np.minimum(a, b))
    else:
        for call in (lambda: kern(A=a, B=b), lambda: kern.time(A=a, B=b, repeats=1)):
            try:
                call()
            except sl.CompileError as e:
                assert "skylake-avx512" in str(e) and "avx512" in str(e), e
                assert "target='llvm'" in str(e), e
            else:
                raise AssertionError("ran")
    print("done")
""")


def test_an_int64_min_compiled_for_skylake_avx512_is_refused_or_right_never_a_crash():
    # before: vpminsq on ymm registers passed the check and the call died of SIGILL on an
    # AVX2 machine (run in a child process, so such a failure cannot stop the test run)
    r = subprocess.run([sys.executable, "-c", _INT64_MIN_FOR_SKYLAKE], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "done", (r.returncode, r.stderr[-2000:])


_DOUBLES_TO_FLOATS_FOR_SKYLAKE = textwrap.dedent("""
    import numpy as np, schedlang as sl
    import llvmlite.binding as llvm
    x = sl.Var("x")
    A = sl.Input("A", sl.float64, (64,))
    f = sl.Func("f", shape=(64,))
    f[x] = sl.cast(sl.float32, A[x])
    s = sl.Schedule(f)
    s[f].vectorize(x, 8)
    kern = sl.compile(f, s, target="llvm:skylake-avx512")
    a = np.linspace(-3, 3, 64)
    if llvm.get_host_cpu_features().get("avx512f", False):
        assert np.array_equal(kern(A=a), a.astype(np.float32))
    else:
        try:
            kern(A=a)
        except sl.CompileError as e:
            assert "skylake-avx512" in str(e) and "avx512f" in str(e), e
        else:
            raise AssertionError("ran")
    print("done")
""")


def test_doubles_to_floats_compiled_for_skylake_avx512_are_refused_or_right_never_a_crash():
    # before: vcvtpd2ps (%rax), %ymm0 (a 512-bit source) looked like AVX and ran: SIGILL
    r = subprocess.run([sys.executable, "-c", _DOUBLES_TO_FLOATS_FOR_SKYLAKE],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "done", (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("target, says", [
    ("llvm:skylake-avx51", "LLVM does not know the CPU 'skylake-avx51'"),
    ("llvm:i386", "32-bit x86 CPU")])
def test_lower_refuses_a_cpu_name_that_compile_refuses(target, says):
    # before: sl.lower printed the loop IR for any llvm:<name>, misspelled or 32-bit
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    for call in (lambda: sl.lower(f, target=target), lambda: sl.compile(f, target=target)):
        with pytest.raises(sl.CompileError, match=re.escape(says)):
            call()
    assert "for " in str(sl.lower(f, target="llvm:x86-64"))
