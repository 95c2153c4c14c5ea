"""State shared by the lowering passes of one ``sl.lower`` call.

Example: ``ctx = LowerContext(schedule, target="llvm")`` then each pass reads
``ctx.schedule``, ``ctx.order`` (realization order) and records names for errors.
"""
from __future__ import annotations

import os

from ..algo import expr as E
from ..algo import types as T


class AccFunc:
    """The accumulator storage of an inline reduction (not a user Func)."""

    def __init__(self, name, dtype, ndim, owner):
        self.name, self.dtype, self.ndim, self.owner = name, dtype, ndim, owner
        self.shape = None

    def __repr__(self):
        return f"AccFunc({self.name!r})"


class LowerContext:
    """Everything the passes share: the schedule, the target, facts, and name maps."""

    def __init__(self, schedule, target="llvm"):
        self.schedule = schedule
        self.target = target
        self.outputs = list(schedule.outputs)
        self.order = []            # non-inline Funcs, producers first
        self.defs = {}             # id(func) -> effective definitions (inline Funcs expanded)
        self.loop_names = {}       # loop var name -> (stage name, user loop name)
        # the schedule's facts and the sl.assume facts about this pipeline made since
        self.user_facts = list(schedule.assumptions) + schedule.algorithm_facts()
        self.facts = list(self.user_facts)
        # the kernel runs only when every output has at least one element (an empty output
        # is returned without running it; a negative size is an ArgumentError)
        for o in self.outputs:
            for x in o.shape or ():
                if not isinstance(x, E.Const):
                    self.facts.append(E.binary("ge", x, 1))
        self.debug_bounds = "bounds" in os.environ.get("SCHEDLANG_DEBUG", "")
        self.call_checks = []      # (cond Expr, message) checked when the kernel is called
        self._output_bounds()
        self._rdom_ranges()
        self._arg_reductions_nonempty()
        self.assert_messages = {}  # Assert code -> what the user is told when it fails
        self.allocations = {}      # buffer name -> memory scope chosen
        self.region_values = {}    # (id(func), dim) -> (min, extent) Exprs of the region Lets

    def _output_bounds(self):
        """``bound(j, 0, 64)`` on an output: its extent along j is 64, a fact the passes use
        and the kernel checks when called."""
        for o in self.outputs:
            st0 = self.schedule.stage_schedules(o)[0]
            for d, size in enumerate(o.shape or ()):
                name = _dim_name(o, d)
                if name not in st0.bounds:
                    continue
                ext = st0.bounds[name][1]
                cond = E.binary("eq", size, ext)
                self.facts.append(cond)
                self.call_checks.append((cond, f"bound({name}, 0, {ext}) on {o.name}: the output "
                                               f"{o.name} has extent {size} along {name}, not "
                                               f"{ext}; call the kernel with sizes that give "
                                               f"{ext}, or change the bound"))

    def _rdom_ranges(self):
        """RDom variables are int32: a range set by Params or sizes must fit, which the
        kernel checks when called (an int64 Param as a lower bound would wrap)."""
        seen = set()
        for g in self.schedule.funcs:
            for d in self.schedule.definitions(g):
                for rv in d.rvars:
                    rdom = getattr(rv.rdom, "origin", rv.rdom)
                    key = (id(rdom), rv.dim)
                    if key in seen:
                        continue
                    seen.add(key)
                    lo, ext = rv.rdom.bounds[rv.dim]
                    if isinstance(lo, E.Const) and isinstance(ext, E.Const):
                        continue
                    lo64, ext64 = E.cast(T.int64, lo), E.cast(T.int64, ext)
                    fits = E.binary("and", E.binary("ge", lo64, -2 ** 31),
                                    E.binary("le", lo64 + ext64, 2 ** 31))
                    self.call_checks.append((
                        E.binary("or", E.binary("le", ext64, 0), fits),
                        f"RDom {rv.name}: its range [{lo}, {lo} + {ext}) must lie within "
                        "int32, the type of RDom variables"))

    def _arg_reductions_nonempty(self):
        """An argmax / argmin over an empty range has no index to give (numpy and torch
        raise): its RDom's extent must be at least 1 when the kernel runs, which it does
        only when every output has an element."""
        found = []
        for g in self.schedule.funcs:
            for d in self.schedule.definitions(g):
                E.walk_expr(d.value, lambda n, g=g: found.append((g, n))
                            if isinstance(n, E.Reduce) and n.op in ("argmax", "argmin")
                            else None)
        empty_output = E.Const(False, T.bool_)
        for o in self.outputs:
            for x in o.shape or ():
                if not isinstance(x, E.Const):
                    empty_output = E.binary("or", empty_output, E.binary("eq", x, 0))
        for g, red in found:
            for lo, ext in red.rdom.bounds:
                if isinstance(ext, E.Const) and ext.value >= 1:
                    continue
                self.call_checks.append((
                    E.binary("or", E.binary("ge", E.cast(T.int64, ext), 1), empty_output),
                    f"{g.name}: sl.{red.op} over {red.rdom.name}, whose extent {ext} is 0 for "
                    "these arguments; an arg-reduction of nothing has no index (numpy and "
                    "torch raise too): pass a non-empty array"))

    def is_output(self, f):
        return any(f is o for o in self.outputs)

    def region_vars(self, f, d):
        """The Vars holding the computed region of dimension ``d`` of Func ``f``."""
        name = _dim_name(f, d)
        return (E.Var(f"{f.name}.{name}.min", T.int64), E.Var(f"{f.name}.{name}.extent", T.int64))

    def region(self, f, d):
        """The computed region (min, extent) of dimension ``d`` of ``f`` as the loops see it:
        the values of ``bound()`` (for an output, checked against its shape at call time),
        else the shape for outputs, else the region Vars."""
        from .simplify import simplify
        st0 = self.schedule.stage_schedules(f)[0] if hasattr(f, "definitions") else None
        name = _dim_name(f, d)
        if self.is_output(f) and (st0 is None or name not in st0.bounds):
            return E.Const(0, T.int64), simplify(E.cast(T.int64, f.shape[d]))
        if st0 is not None and name in st0.bounds:
            lo, ext = st0.bounds[name]
            return E.Const(lo, T.int64), E.Const(ext, T.int64)
        return self.region_vars(f, d)

    def loop_var(self, f, stage, dim):
        name = f"{f.name}.s{stage}.{dim}"
        self.loop_names[name] = (f.name if stage == 0 else f"{f.name}.update({stage - 1})", dim)
        return name


def _dim_name(f, d):
    defs = getattr(f, "definitions", None)
    if defs:
        return defs[0].args[d].name
    return str(d)
