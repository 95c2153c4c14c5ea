"""The schedule a GPU target uses when none is given: every Func computed at root gets
its pure loops tiled onto blocks and threads (16 x 16 threads over the last two
dimensions, 256 along a single one, the dimensions before those fused onto blockIdx.z),
with its reduction loops left inside each thread. Inline Funcs stay inline.

Example: ``s = gpu_default_schedule([C])`` for ``C[i, j] = sl.sum(A[i, k] * B[k, j])``
gives ``s[C].gpu_tile('i', 'j', 16, 16)``.
"""
from __future__ import annotations

from .schedule import Schedule

TILE_2D = (16, 16)
TILE_1D = 256


def gpu_default_schedule(outputs):
    """A correct, simple GPU schedule for ``outputs`` (a list of Funcs)."""
    s = Schedule(*outputs)
    for f in s.funcs:
        if s.fsched[id(f)].compute != ("root",):
            continue
        for st in s.stage_schedules(f):
            pure = [d.name for d in st.dims if not d.is_rvar]
            if not pure:
                continue        # a reduction into one value: one thread runs it
            stage = s[f] if st.index == 0 else s[f].update(st.index - 1)
            if len(pure) == 1:
                stage.gpu_tile(pure[0], TILE_1D)
                continue
            outer = pure[:-2]
            while len(outer) > 1:
                outer[0:2] = [stage.fuse(outer[0], outer[1])]
            y, x = pure[-2:]
            yo, xo, yi, xi = stage.tile(y, x, *TILE_2D)
            order = ([outer[0]] if outer else []) + [yo, xo, yi, xi]
            rvars = [d.name for d in st.dims if d.is_rvar]
            stage.reorder(*(order + rvars))
            stage.gpu_blocks(xo, yo, *outer).gpu_threads(xi, yi)
    return s
