"""GPU renderer semantics a Halide / TVM user relies on, through the public API: integer
arithmetic that wraps as on the CPU (C's signed overflow is undefined, and the vendors'
compilers use that), and Func / Input names that are C++ keywords or the languages' own
names. Results against numpy (on a GPU where one is present, else in the CPU emulator) and
the generated source compiled for real where nvcc / clang are installed."""
import re

import numpy as np
import pytest

import schedlang as sl
from schedlang.targets.gpu_compilers import check_compiles

pytestmark = pytest.mark.filterwarnings("ignore:no .* device here")

TARGETS = (("cuda", "cuda:sm_90"), ("hip", "hip:gfx942"))


def kernel_text(out, vendor):
    """The device code of the one kernel in compiler output ``out``."""
    return out[out.index(".entry" if vendor == "cuda" else "sl_f_kernel0:"):]


@pytest.mark.parametrize("dt, npdt", [(sl.int32, np.int32), (sl.int64, np.int64)])
def test_signed_overflow_of_data_wraps_in_the_generated_code(dt, npdt):
    # A[i] + 1 > A[i] is false at the type's maximum (it wraps, as numpy); rendered as C's
    # signed +, nvcc and clang folded it to true and never loaded A
    A = sl.Input("A", dt, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = sl.select(A[i] + 1 > A[i], 7, 3)
    s = sl.Schedule(f)
    s[f].gpu_tile(i, 64)
    a = np.array([np.iinfo(npdt).max, 0, -5], npdt)
    out = sl.compile(f, s, target="cuda")(A=a)
    np.testing.assert_array_equal(out, np.where(a + npdt(1) > a, 7, 3))
    compiled = 0
    for vendor, target in TARGETS:
        text = check_compiles(sl.compile(f, s, target=target).source, vendor)
        if text is None:
            continue        # that compiler is not installed here
        compiled += 1
        assert re.search(r"ld\.global|global_load|buffer_load", kernel_text(text, vendor)), \
            f"{vendor}: the comparison was folded away"
    if not compiled:
        pytest.skip("neither nvcc nor clang is installed")


@pytest.mark.parametrize("inputs, output", [
    (("float", "int"), "if"),
    (("half", "signed"), "__syncthreads"),
    (("sl_u64", "SL_FN"), "o"),
    (("expf", "threadIdx"), "out"),
])
def test_names_that_are_words_of_the_gpu_languages(inputs, output):
    # a parameter named float, a kernel variable named __syncthreads, or one shadowing the
    # expf the kernel calls did not compile
    ins = [sl.Input(n, sl.float32, ("N",)) for n in inputs]
    i = sl.Var("i")
    f = sl.Func(output, shape=(ins[0].shape[0],))
    f[i] = sl.exp(ins[0][i]) + ins[1][i] * 2
    s = sl.Schedule(f)
    s[f].gpu_tile(i, 32)
    rng = np.random.default_rng(0)
    arrays = {n: rng.standard_normal(37, dtype=np.float32) for n in inputs}
    out = sl.compile(f, s, target="cuda")(**arrays)
    np.testing.assert_allclose(out, np.exp(arrays[inputs[0]]) + arrays[inputs[1]] * 2,
                               rtol=1e-5)
    for vendor, target in TARGETS:
        check_compiles(sl.compile(f, s, target=target).source, vendor)
