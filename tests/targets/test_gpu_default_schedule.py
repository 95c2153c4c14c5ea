"""The GPU default schedule (``sl.compile(f, target="cuda")`` without a schedule) on matrix
products: bench's GEMM schedule (64 x 64 tiles per block, 4 x 4 registers a thread, k
slices staged in shared memory) where the product is exactly ``A[.., i, k] * B[.., k, j]``
with one batch loop at most; plain 16 x 16 tiles otherwise. Results against numpy."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.frontend import Tensor
from schedlang.schedule.gpu_default import gpu_default_schedule

pytestmark = pytest.mark.filterwarnings("ignore:no .* device here")


@pytest.mark.parametrize("sa, sb", [((40, 70), (70, 33)), ((3, 20, 17), (3, 17, 9)),
                                    ((1, 1), (1, 1)), ((65, 17), (17, 130))])
def test_matmul_takes_the_staged_gemm_schedule(sa, sb):
    x, w = Tensor.input("x", sa), Tensor.input("w", sb)
    kern = sl.compile((x @ w).relu(), target="cuda")
    rng = np.random.default_rng(len(sa) + sa[-1])
    a, b = rng.standard_normal(sa, dtype=np.float32), rng.standard_normal(sb, dtype=np.float32)
    np.testing.assert_allclose(kern(x=a, w=b), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    src = kern.source
    assert src.count("__shared__ float") == 2 and "__launch_bounds__(256)" in src
    assert "__syncthreads();" in src


def test_the_schedule_reads_like_bench_gemm():
    A = sl.Input("A", sl.float32, ("M", "K"))
    B = sl.Input("B", sl.float32, ("K", "N"))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    text = str(gpu_default_schedule([C]))
    assert "s[C].tile('i', 'j', 64, 64" in text and "s[C].split('k', 16" in text
    assert "cache_read(C, memory='shared'" in text and "gpu_threads" in text


@pytest.mark.parametrize("build", ["two batch dims", "transposed operand", "scaled operand"])
def test_other_products_fall_back_to_plain_tiles_and_stay_right(build):
    rng = np.random.default_rng(7)
    if build == "two batch dims":
        sa, sb = (2, 5, 8, 30), (30, 12)
        x, w = Tensor.input("x", sa), Tensor.input("w", sb)
        y, a = x @ w, rng.standard_normal(sa, dtype=np.float32)
        b = rng.standard_normal(sb, dtype=np.float32)
        want, args = a @ b, {"x": a, "w": b}
    elif build == "transposed operand":
        x = Tensor.input("x", (30, 40))
        y, a = x @ x.transpose(1, 0), rng.standard_normal((30, 40), dtype=np.float32)
        want, args = a @ a.T, {"x": a}
    else:
        x, w = Tensor.input("x", (30, 40)), Tensor.input("w", (40, 20))
        y = (x * 2) @ w
        a, b = rng.standard_normal((30, 40), dtype=np.float32), rng.standard_normal(
            (40, 20), dtype=np.float32)
        want, args = (a * 2) @ b, {"x": a, "w": b}
    np.testing.assert_allclose(sl.compile(y, target="cuda")(**args), want, rtol=1e-5,
                               atol=1e-4)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layernorm"])
@pytest.mark.parametrize("shape", [(6, 1000), (2, 3, 300), (5, 1)])
def test_row_ops_run_as_one_kernel_a_block_per_row(op, shape):
    x = Tensor.input("x", shape)
    kern = sl.compile(getattr(x, op)(-1) if op != "layernorm" else x.layernorm(),
                      target="cuda")
    a = np.random.default_rng(3).standard_normal(shape, dtype=np.float32)
    m = a.max(-1, keepdims=True)
    want = {"softmax": np.exp(a - m) / np.exp(a - m).sum(-1, keepdims=True),
            "log_softmax": a - m - np.log(np.exp(a - m).sum(-1, keepdims=True)),
            "layernorm": (a - a.mean(-1, keepdims=True))
            / np.sqrt(a.var(-1, keepdims=True) + 1e-5)}[op]
    np.testing.assert_allclose(kern(x=a), want, rtol=1e-5, atol=2e-6)
    assert kern.source.count("__global__") == 1
    from schedlang.targets.gpu_compilers import check_compiles
    if shape == (2, 3, 300):
        check_compiles(kern.source, "cuda")


def test_a_row_reduction_also_read_elsewhere_keeps_its_own_kernel():
    x = Tensor.input("x", (6, 50))
    mx = x.max(-1, keepdims=True)
    y = (x - mx).relu()
    kern = sl.compile([y, mx], target="cuda")
    a = np.random.default_rng(4).standard_normal((6, 50), dtype=np.float32)
    got_y, got_mx = kern(x=a)
    np.testing.assert_allclose(got_mx, a.max(-1, keepdims=True))
    np.testing.assert_allclose(got_y, np.maximum(a - a.max(-1, keepdims=True), 0))


@pytest.mark.parametrize("n", [1, 300, 4097, 100000])
def test_a_reduction_into_one_value_runs_on_many_threads(n):
    x = Tensor.input("x", (n,))
    a = np.random.default_rng(n).standard_normal(n, dtype=np.float32)
    kern = sl.compile(x.sum(), target="cuda")
    # 4096 strided partials (a kernel of 16 blocks), then one thread folds them
    assert kern.source.count("__global__") == 2
    assert abs(float(kern(x=a)) - float(a.astype(np.float64).sum())) <= 1e-6 * n + 1e-6
    np.testing.assert_allclose(sl.compile(x - x.max(), target="cuda")(x=a), a - a.max())


def test_an_argmax_into_one_value_keeps_one_thread_and_its_ties():
    X = sl.Input("X", sl.int32, ("N",))
    r = sl.RDom(X.shape[0], name="r")
    f = sl.Func("f", shape=())
    f[()] = sl.argmax(X[r])
    b = np.array([3, 9, 1, 9, 2] * 300, np.int32)
    assert int(sl.compile(f, target="cuda")(X=b)) == 1
