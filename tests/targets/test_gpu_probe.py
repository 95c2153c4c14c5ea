"""GPU schedules a Halide / TVM user writes, through the public API: results against numpy
(on a GPU where one is present, else in the CPU emulator) and the generated CUDA compiled
by nvcc + ptxas where installed."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang import cli
from schedlang.frontend import Tensor
from schedlang.targets.gpu_compilers import check_compiles

from gpu_matmul import stage_in_shared, tiled_matmul

pytestmark = pytest.mark.filterwarnings("ignore:no .* device here")


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def rng(seed=0):
    return np.random.default_rng(seed)


def matmul_staged(double_buffer=False, vector=False):
    """8 x 8 tiles of C, A's k slices of 8 staged in shared memory."""
    A, B, C, s, ko = tiled_matmul()
    As = stage_in_shared(s, A, C, ko, threads=False)
    rows, cols = [d.name for d in s[As].dims]
    if vector:
        co, ci = s[As].split(cols, 4)
        s[As].vectorize(ci).gpu_threads(co, rows)
    else:
        s[As].gpu_threads(cols, rows)
    if double_buffer:
        s[As].double_buffer()
    return C, s


@pytest.mark.parametrize("shape", [(19, 23, 17), (1, 1, 1), (16, 16, 16)])
def test_double_buffered_shared_stage(shape):
    # its two copies' size was bounded over the whole k range, so no constant size
    M, K, N = shape
    C, s = matmul_staged(double_buffer=True)
    kern = sl.compile(C, s, target="cuda")
    a = rng().standard_normal((M, K), dtype=np.float32)
    b = rng(1).standard_normal((K, N), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)
    assert "__shared__ float A_C[128]" in kern.source.replace("  ", " ")
    check_compiles(kern.source, "cuda")


def test_vectorized_split_of_a_shared_stage_thread_loop():
    # a thread loop of extent min(ko*8 + 7, K - 1) // 4 - ko*2 + 1 (at most 2)
    C, s = matmul_staged(vector=True)
    kern = sl.compile(C, s, target="hip")
    a = rng().standard_normal((19, 23), dtype=np.float32)
    b = rng(1).standard_normal((23, 17), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["layernorm", "log_softmax"])
def test_default_schedule_row_reduction_of_a_4d_tensor(op):
    # the rows' loops were fused onto one block loop, and the partials computed there
    # spanned every row of the fused dimensions: more than 48 KiB of shared memory
    x = rng().standard_normal((2, 4, 11, 13), dtype=np.float32)
    t = Tensor.input("x", x.shape)
    y = F.layernorm(t) if op == "layernorm" else F.log_softmax(t, -1)
    kern = sl.compile(y, target="cuda")
    if op == "layernorm":
        want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    else:
        m = x.max(-1, keepdims=True)
        want = x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))
    np.testing.assert_allclose(kern(x=x), want, rtol=1e-4, atol=1e-4)
    check_compiles(kern.source, "cuda")


def test_default_schedule_row_reduction_of_a_5d_tensor():
    x = rng().standard_normal((2, 3, 2, 5, 300), dtype=np.float32)
    kern = sl.compile(F.layernorm(Tensor.input("x", x.shape)), target="cuda")
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(kern(x=x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("workload", ["gemm", "blur", "conv"])
def test_cli_show_with_a_gpu_target(workload, capsys):
    # it compiled the CPU schedule of bench/ for the GPU: stack buffers over local memory
    cli.main(["show", workload, "--target", "cuda"])
    out = capsys.readouterr().out
    assert "# generated code" in out and "__global__" in out and "blockIdx" in out


def test_assume_bounds_a_thread_loop():
    # a fact the compiler may rely on: the block's size comes from it
    A = sl.Input("A", sl.float32, ("H", "W"))
    i, j = sl.vars("i j")
    out = sl.Func("out", shape=A.shape)
    out[i, j] = A[i, j] + 1.0
    s = sl.Schedule(out)
    s.assume(A.shape[1] < 40)
    s[out].gpu_blocks(i).gpu_threads(j)
    kern = sl.compile(out, s, target="cuda")
    assert "threads 39 x 1 x 1" in kern.loop_ir
    for w in (35, 1, 39):
        a = rng(w).standard_normal((5, w), dtype=np.float32)
        np.testing.assert_array_equal(kern(A=a), a + 1)
    with pytest.raises(sl.ArgumentError):
        kern(A=np.zeros((2, 40), np.float32))
    check_compiles(kern.source, "cuda")
