"""A shared-memory stage computed inside the consumer's gpu_threads loops (Halide's GPU
GEMM: each thread keeps its tile of C in registers over all of k, and at every k slice the
block's threads copy the slices of A and B to shared memory together, between barriers).
Results against numpy (in the emulator here, on the device where there is one), the
barriers and register accumulators in the CUDA source, real compiles, and the refusals."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.bench.gpu_workloads import gemm_gpu
from schedlang.targets.gpu_compilers import check_compiles

from gpu_matmul import stage_in_shared, tiled_matmul

pytestmark = pytest.mark.filterwarnings("ignore:no .* device here")


def gemm(m, n, k, block=(16, 16), reg=(2, 2), k_tile=8, fill_threads=None):
    return gemm_gpu(m, n, k, block, reg, k_tile, registers_over_k=True,
                    fill_threads=fill_threads)


@pytest.mark.parametrize("m, n, k", [(32, 48, 16), (37, 29, 21), (1, 1, 1), (16, 16, 100)])
def test_registers_over_k_with_cooperative_fills_match_numpy(m, n, k):
    C, s = gemm(m, n, k)
    kern = sl.compile(C, s, target="cuda")
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5, atol=1e-4)


def test_the_fills_sit_between_barriers_and_the_sums_stay_in_registers():
    C, s = gemm(64, 64, 64)
    src = sl.compile(C, s, target="cuda").source
    body = src[src.index("for (long long C_s0_k_o"):]
    # a barrier before the fills (the last readers are done), one between them, and one
    # after them (they are complete): the second fill's wait before is the first's after
    assert body.count("__syncthreads();") == 3, body
    fill = body.index("B_C[")
    assert body.rfind("__syncthreads();", 0, fill) != -1
    # the four sums of a thread's 2 x 2 tile are registers declared before the k loop
    head = src[:src.index("for (long long C_s0_k_o")]
    assert head.count("float C_acc") == 4
    assert "__shared__ float A_C[" in src and "__shared__ float B_C[" in src


def test_the_cooperative_source_compiles_for_real():
    C, s = gemm(37, 29, 21)
    for vendor, target in (("cuda", "cuda:sm_90"), ("hip", "hip:gfx942")):
        out = check_compiles(sl.compile(C, s, target=target).source, vendor)
        if out is None:
            continue        # that compiler is not installed here
        # (a block of one 64-wide AMD wave needs only a "wave barrier")
        assert ("bar.sync" in out) if vendor == "cuda" else ("barrier" in out)


def test_a_fill_wider_than_the_threads_around_it_is_refused():
    # the fill wants 32 threads along x, the consumer's loops only 8: the other threads
    # would never reach the barriers inside the consumer's loops
    C, s = gemm(32, 32, 32, fill_threads=(8, 32))
    with pytest.raises(sl.CompileError) as e:
        sl.compile(C, s, target="cuda")
    msg = str(e.value)
    assert "ti of C" in msg and "tj of C" in msg and "span the whole block" in msg


def doubled_staged_inside_threads(memory):
    """C = A * 2 in 8 x 8 GPU tiles, A staged in ``memory`` at C's innermost thread loop."""
    A = sl.Input("A", sl.float32, (32, 32))
    i, j = sl.vars("i j")
    C = sl.Func("C", shape=(32, 32))
    C[i, j] = A[i, j] * 2
    s = sl.Schedule(C)
    s[C].gpu_tile(i, j, 8, 8)
    st = s[A].cache_read(C, memory=memory)
    s[st].compute_at(C, "j.i")
    return C, s, st


def test_a_shared_stage_inside_the_threads_without_thread_loops_is_refused():
    C, s, _ = doubled_staged_inside_threads("shared")
    with pytest.raises(sl.CompileError) as e:
        sl.compile(C, s, target="cuda")
    assert "A_C is staged in shared memory at a loop inside the gpu_threads loops" in \
        str(e.value) and "bind its loops with gpu_threads" in str(e.value)


def test_thread_loops_inside_thread_loops_need_shared_memory():
    _, s, st = doubled_staged_inside_threads("global")
    with pytest.raises(sl.ScheduleError) as e:
        s[st].gpu_threads(*[d.name for d in s[st].dims][::-1])
    assert "stage it in shared memory" in str(e.value)


@pytest.mark.parametrize("m, n, k", [(13, 11, 9), (16, 16, 16)])
def test_a_stage_of_an_input_read_through_clamp_edge_gets_its_tile_size(m, n, k):
    # the staged tile's extent, min(max(min(t*8 + 7, M - 1), 0), M - 1) - min(t*8, M - 1)
    # + 1, is at most 8, which interval arithmetic alone cannot see
    A, B, C, s, ko = tiled_matmul(read_a=lambda a, x, r: sl.clamp_edge(a)[x, r])
    stage_in_shared(s, A, C, ko)
    kern = sl.compile(C, s, target="cuda")
    assert "__shared__ float A_C[64];" in kern.source
    rng = np.random.default_rng(m)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-5)


def test_a_serial_loop_between_a_stages_own_thread_loops_is_named():
    A, B, C, s, ko = tiled_matmul(shape=(32, 32, 32))
    staged = stage_in_shared(s, A, C, ko, threads=False)
    y, x = [d.name for d in s[staged].dims]
    xo, xi = s[staged].split(x, 4)
    s[staged].reorder(y, xo, xi)
    s[staged].gpu_threads(xi, y)
    with pytest.raises(sl.CompileError, match=r"the gpu_threads loops i, k\.i of A_C have the "
                       r"loop k\.o between them; a stage's thread loops must be adjacent"):
        sl.compile(C, s, target="cuda")
