"""The GPU matmul the GPU tests schedule in their own ways: C = A @ B in tiles of C per
block, one thread an element, k slices outside the thread loops, and a helper that stages
an operand's k slices in shared memory at those slices."""
import schedlang as sl


def tiled_matmul(tile=8, k_tile=8, shape=("M", "K", "N"), read_a=None):
    """(A, B, C, s, ko): ``tile`` x ``tile`` blocks of C, ``k_tile``-deep k slices at
    ``ko``; ``read_a(A, i, k)`` reads A (default ``A[i, k]``, e.g. through a boundary
    condition)."""
    m, kk, n = shape
    A = sl.Input("A", sl.float32, (m, kk))
    B = sl.Input("B", sl.float32, (kk, n))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum((read_a or (lambda a, x, r: a[x, r]))(A, i, k) * B[k, j])
    s = sl.Schedule(C)
    io, jo, ii, ji = s[C].tile(i, j, tile, tile)
    ko, ki = s[C].split("k", k_tile)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].gpu_blocks(jo, io).gpu_threads(ji, ii)
    return A, B, C, s, ko


def stage_in_shared(s, src, C, ko, threads=True):
    """``src``'s k slices in shared memory at ``ko``; with ``threads``, its loops bound to
    gpu_threads (the last on x)."""
    staged = s[src].cache_read(C, memory="shared")
    s[staged].compute_at(C, ko)
    if threads:
        s[staged].gpu_threads(*reversed([d.name for d in s[staged].dims]))
    return staged
