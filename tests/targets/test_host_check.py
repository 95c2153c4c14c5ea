"""Kernels compiled for a named CPU (``llvm:<cpu>``) are checked against this machine before
they run: an instruction this CPU lacks is a CompileError naming it, never a crash."""
import numpy as np
import pytest

import llvmlite.binding as llvm
import schedlang as sl
from schedlang.targets.llvm_host_check import missing_feature

ALL_AVX512 = ("+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+lzcnt,+popcnt,+movbe,+avx512f,+avx512bw,"
              "+avx512vl,+avx512dq,+avx512cd")


def host_has(feature):
    return llvm.get_host_cpu_features().get(feature, False)


@pytest.mark.parametrize("line,host,feature", [
    ("vaddph %zmm1, %zmm2, %zmm3", ALL_AVX512, "avx512fp16"),
    ("vmovsh (%rax), %xmm0", ALL_AVX512, "avx512fp16"),
    ("vdpbf16ps %zmm1, %zmm2, %zmm3", ALL_AVX512, "avx512bf16"),
    ("vpdpbusd %zmm1, %zmm2, %zmm3", ALL_AVX512, "avx512vnni"),
    ("{vex} vpdpbusd %ymm1, %ymm2, %ymm3", ALL_AVX512, "avxvnni"),
    ("vpermb %zmm1, %zmm2, %zmm3", ALL_AVX512, "avx512vbmi"),
    ("vpopcntd %zmm1, %zmm2", ALL_AVX512, "avx512vpopcntdq"),
    ("tileloadd (%rax,%rcx), %tmm0", ALL_AVX512, "amx-tile"),
    ("vaddps %zmm1, %zmm2, %zmm3", "+avx,+avx2,+fma", "avx512f"),
    ("vmovups %zmm0, (%rax) {%k1}", "+avx,+avx2,+fma", "avx512f"),
    ("vaddps %xmm1, %xmm2, %xmm3 {%k1}", "+avx,+avx2,+fma,+avx512f", "avx512vl"),
    ("vpaddw %zmm1, %zmm2, %zmm3", "+avx,+avx2,+fma,+avx512f", "avx512bw"),
    ("vfmadd231ps %ymm1, %ymm2, %ymm3", "+avx,+avx2", "fma"),
    ("vpaddd %ymm1, %ymm2, %ymm3", "+avx,+fma", "avx2"),
    ("vaddps %ymm1, %ymm2, %ymm3", "+sse4.2,+popcnt", "avx"),
    ("shlxq %rax, %rbx, %rcx", "+avx,+avx2,+bmi", "bmi2"),
    # APX: extended registers, the no-flags prefix, three-operand integer forms
    ("movq %r17, 8(%rdi,%rax,4)", ALL_AVX512, "egpr"),
    ("{nf} andq %r8, %rax, %rdi", ALL_AVX512, "nf"),
    ("andq %r8, %rax, %rdi", ALL_AVX512, "ndd"),
    ("imulq 8(%rdi,%rax), %rbx, %rcx", ALL_AVX512, "ndd"),
    ("negq %rax, %rcx", ALL_AVX512, "ndd"),
    ("push2 %rax, %rbx", ALL_AVX512, "push2pop2"),
])
def test_instruction_families_name_the_feature_they_need(line, host, feature):
    asm = f"\t.text\nkernel:\n\t{line}  # comment\n\tretq\n"
    assert missing_feature(asm, host) == (line, feature)
    assert missing_feature(asm, host + ",+" + feature) is None


def test_plain_code_and_unlisted_features_pass():
    asm = "\tvmovups (%rdi), %zmm0\n\tvfmadd231ps %zmm1, %zmm2, %zmm0 {%k1}\n\tvzeroupper\n"
    assert missing_feature(asm, ALL_AVX512) is None
    # legacy integer forms that look like APX's three-operand ones
    legacy = ("\timulq $5, %rax, %rdx\n\taddq 8(%rdi,%rax), %rcx\n\tshldq $3, %rax, %rdx\n"
              "\tleaq 8(%rdi,%rax,4), %rcx\n\tcmovneq %rax, %rbx\n\tnegq %r15\n")
    assert missing_feature(legacy, ALL_AVX512) is None
    assert missing_feature("\tmovq %rax, %rbx\n\taddq $1, %rax\n", "+sse2") is None
    assert missing_feature("\tvaddph %zmm1, %zmm2, %zmm3\n", "") is None   # nothing to compare


def _half_kernel(target):
    A = sl.Input("A", sl.float16, (64,))
    i = sl.Var("i")
    f = sl.Func("f", shape=(64,))
    f[i] = A[i] * A[i] + A[i]
    s = sl.Schedule(f)
    s[f].vectorize(i, 32)
    return sl.compile(f, s, target=target)


def test_a_kernel_for_a_cpu_with_instructions_this_one_lacks_is_refused_not_run():
    kern = _half_kernel("llvm:sapphirerapids")
    a = np.linspace(-2, 2, 64).astype(np.float16)
    if host_has("avx512fp16"):
        np.testing.assert_allclose(kern(A=a), a * a + a, rtol=1e-2, atol=1e-3)
        return
    assert "ph" in kern.module.assembly
    # on an AVX-512 machine without FP16 the first instruction it lacks is a half-precision
    # one; on one without AVX-512 (AVX2) it is the first 512-bit instruction, whichever
    if host_has("avx512f"):
        used, feature = r"v\w+ph", "avx512fp16"
    else:
        used, feature = r"v\w+", "avx512f"
        # against an AVX-512 CPU's features the same code names its FP16 instructions
        line, need = missing_feature(kern.module.assembly, ALL_AVX512)
        assert need == "avx512fp16" and "ph" in line.split()[0], line
    with pytest.raises(sl.CompileError, match=rf"compiled for sapphirerapids and uses {used} "
                       rf"\({feature}\).*not run here.*target='llvm'"):
        kern(A=a)
    with pytest.raises(sl.CompileError, match=feature):
        kern.time(A=a)
    assert "define" in kern.source          # it can still be inspected


def test_a_kernel_using_apx_registers_is_refused_on_a_cpu_without_apx():
    if "diamondrapids" not in _known_cpu_names() or host_has("egpr"):
        pytest.skip("needs an LLVM that knows diamondrapids and a CPU without APX")
    x = sl.Var("x")
    A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],))
    f[x] = A[x] + 1
    kern = sl.compile(f, target="llvm:diamondrapids")
    found = missing_feature(kern.module.assembly, llvm.get_host_cpu_features().flatten())
    if found is None:
        pytest.skip("this LLVM's code for diamondrapids uses no APX instruction")
    with pytest.raises(sl.CompileError, match=r"compiled for diamondrapids and uses .*not run here"):
        kern(A=np.zeros(64, np.float32))


def _known_cpu_names():
    from schedlang.targets.llvm_jit import _known_cpus
    return _known_cpus()


@pytest.mark.parametrize("target", ["llvm:x86-64", "llvm:" + llvm.get_host_cpu_name()])
def test_kernels_for_this_cpu_or_an_older_one_run(target):
    kern = _half_kernel(target)
    a = np.linspace(-2, 2, 64).astype(np.float16)
    np.testing.assert_allclose(kern(A=a), a * a + a, rtol=1e-2, atol=1e-3)
