"""The loops of a stage as the schedule records them (``Dim``, ``Split``) and the checks of
the names and numbers a user passes to a loop primitive.
Example: ``var_name(i, "split", "C") == "i"``.
"""
from __future__ import annotations

import operator

from ..algo import expr as E
from ..errors import ScheduleError

TAILS = ("auto", "guard", "shift", "pad")


class Dim:
    """One loop of a stage: its name, its kind, and whether it derives from an RDom."""

    __slots__ = ("name", "kind", "is_rvar", "gpu_dim")

    def __init__(self, name, kind="serial", is_rvar=False, gpu_dim=0):
        self.name, self.kind, self.is_rvar, self.gpu_dim = name, kind, is_rvar, gpu_dim

    def copy(self):
        return Dim(self.name, self.kind, self.is_rvar, self.gpu_dim)


# copies of a loop body that unrolling may make (nested unrolls multiply): compile time
# grows faster than the copies (4096 copies of one add: 160 s; 1024: about 5 s)
MAX_UNROLL = 1024

# lanes a loop vectorized whole (vectorize(v) without a width) may have: LLVM takes
# minutes past a few thousand lanes and aborts the process at 65536
MAX_VECTOR_LANES = 4096


def too_many_lanes(where, name, lanes):
    """The message refusing to vectorize loop ``name`` whole, ``lanes`` lanes (past
    ``MAX_VECTOR_LANES``); ``where`` names the directive and the stage."""
    return (f"{where}: its extent is {lanes}, too many lanes for one vector (at most "
            f"{MAX_VECTOR_LANES}); vectorize with a width (vectorize({name}, 16)), which "
            "splits it first")


class Split:
    """``old`` = ``outer * factor + inner`` (kind "split") or ``fused`` = ``outer * ext(inner) +
    inner`` (kind "fuse")."""

    __slots__ = ("kind", "old", "outer", "inner", "factor", "tail")

    def __init__(self, kind, old, outer, inner, factor=None, tail=None):
        self.kind, self.old, self.outer, self.inner = kind, old, outer, inner
        self.factor, self.tail = factor, tail


def _positive_int(x) -> bool:
    """A split factor / tile size: an int >= 1 (not a bool)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _int_like(x):
    """``x`` as a Python int when it is an integer of another kind (``np.int64(4)``, a
    sizes computed with numpy), else ``x`` unchanged for the directive's own check."""
    if isinstance(x, int) or not hasattr(type(x), "__index__"):
        return x
    return operator.index(x)


def _names_ok(names, n) -> bool:
    """``names=`` of a split / tile: a tuple or list of ``n`` non-empty strings."""
    return isinstance(names, (list, tuple)) and len(names) == n and all(
        isinstance(x, str) and x for x in names)


def _renamed(error, directive, stage):
    """``error``, raised by a primitive inside the compound ``directive`` on ``stage``,
    restated as ``directive``'s own error: the reason stays, the inner directive's name goes."""
    text = str(error)
    marker = f" on {stage}: "
    reason = text.split(marker, 1)[1] if marker in text else text
    return type(error)(f"{directive} on {stage}: {reason}")


def var_name(v, directive, stage) -> str:
    """The loop name a user passed: a Var, RVar, 1-D RDom or str."""
    if isinstance(v, str):
        return v
    if isinstance(v, E.Var):
        return v.name
    vars_ = getattr(v, "vars", None)
    if vars_ is not None:
        if len(vars_) != 1:
            raise ScheduleError(f"{directive} on {stage}: the RDom {v.name} has {len(vars_)} "
                                f"dimensions; name one of them ({v.name}.x, ...)")
        return vars_[0].name
    raise ScheduleError(f"{directive} on {stage}: {v!r} is not a loop variable; pass a Var, an "
                        "RVar or a loop name")


LOOP_DIRECTIVES = ("split", "fuse", "tile", "reorder", "unroll", "vectorize", "parallel",
                   "gpu_blocks", "gpu_threads", "gpu_tile", "tensorize", "bound", "store_at",
                   "double_buffer", "rfactor", "prefetch")


def loop_directives(schedule, f):
    """Text naming what schedules the loops of Func ``f``'s pure stage (its first loop
    directive, or the loops a staged Func took over from its source), or '' when its loops
    are as the algorithm gives them. Example: ``loop_directives(s, g)`` gives
    ``'parallel(x)'`` after ``s[g].parallel(x)``."""
    st = schedule.stage_schedules(f)[0]
    for d in schedule.trace:
        if d.func == f.name and d.stage == 0 and d.op in LOOP_DIRECTIVES:
            return f"{d.op}({', '.join(str(a) for a in d.args[:1])})"
    if st.splits or any(d.kind != "serial" for d in st.dims):
        return f"the loops {f.name} took over when it was staged"
    return ""
