"""``Schedule``: an algorithm plus an ordered trace of directives (SPEC §2).

Manual scheduling and the autotuner build the same object. The trace prints as Python
(``str(s)``), serializes to JSON and replays onto a freshly built identical algorithm.
Example::

    s = sl.Schedule(C)
    io, ii = s[C].split(i, 32)
    s[C].vectorize(ii, 8).parallel(io)
    s2 = sl.Schedule.from_json(s.to_json(), C)
"""
from __future__ import annotations

import inspect
import json
import keyword

from ..algo import expr as E
from ..algo.boundary import BoundaryView
from ..algo.func import (ASSUMPTIONS, IDENT, Func, Input, cached_on_definition, check_fact,
                         definition_exprs, settle_func_names)
from ..algo.printer import expr_to_python, user_text
from ..deep_recursion import deep_recursion
from ..errors import NameClashError, SchedlangError, ScheduleError
from .fact_text import parse_fact
from .names import pipeline_names, rdoms_in_order, rename_directives
from .placement import Placement, refs  # noqa: F401 - refs: staging.py imports it from here
from .stage import StageSchedule

MEMORIES = ("global", "shared", "local")
# the primitives a recorded directive may name (SPEC section 2), in the order SPEC lists them
DIRECTIVE_OPS = ("split", "fuse", "tile", "reorder", "unroll", "vectorize", "parallel",
                 "gpu_blocks", "gpu_threads", "gpu_tile", "compute_root", "compute_inline",
                 "compute_at", "store_at", "store_root", "cache_read", "cache_write",
                 "double_buffer", "tensorize", "rfactor", "bound", "prefetch", "assume")


class FuncSchedule:
    """Where a Func is computed and stored. ``compute``/``store`` are ("inline",), ("root",)
    or ("at", consumer Func, stage index, loop name)."""

    def __init__(self, default):
        self.compute = default
        self.compute_given = False  # compute set by a directive, not the default
        self.store = None
        self.memory = None
        self.double_buffer = False


class Directive:
    """One recorded primitive call: ``func`` name, ``stage`` index, ``op``, args, kwargs."""

    def __init__(self, func, stage, op, args, kwargs):
        self.func, self.stage, self.op = func, stage, op
        self.args, self.kwargs = list(args), dict(kwargs)

    def to_dict(self):
        return {"func": self.func, "stage": self.stage, "op": self.op, "args": self.args,
                "kwargs": self.kwargs}

    def to_python(self, user_funcs):
        target = f"s[{self.func}]" if self.func in user_funcs else f"s[{self.func!r}]"
        if self.stage:
            target += f".update({self.stage - 1})"
        args = []
        for i, a in enumerate(self.args):
            if self.op in ("compute_at", "store_at", "cache_read", "prefetch") and i == 0:
                args.append(a if a in user_funcs else repr(a))
            else:
                args.append(repr(a))
        for k, v in self.kwargs.items():
            args.append(f"{k}={tuple(v)!r}" if isinstance(v, list) else f"{k}={v!r}")
        if self.op == "assume":
            return f"s.assume({self.args[0]!r})"
        return f"{target}.{self.op}({', '.join(args)})"

    def __repr__(self):
        return self.to_python(set())


class _PipelineView:
    """The Funcs, Inputs and definitions of a pipeline at one moment (what ``names`` walks)."""

    def __init__(self, funcs, inputs, defs):
        self.funcs, self.inputs, self._defs = funcs, inputs, defs

    def definitions(self, f):
        return self._defs[id(f)]


class InputDirectiveError(ScheduleError, AttributeError):
    """A loop directive asked of an Input's schedule. Also an AttributeError, so that
    ``hasattr(s[A], "split")`` is False rather than an exception."""


class InputSchedule:
    """``s[A]`` for an Input: only ``cache_read`` and ``compute_at`` of the staged copy."""

    def __init__(self, schedule, inp):
        self.schedule, self.func, self.index = schedule, inp, 0
        self.name = inp.name
        self.staged = []

    def cache_read(self, consumer, memory="shared", name=None):
        """Stage a copy of this Input for ``consumer``; returns the staged Func."""
        return self.schedule._cache_read(self, consumer, memory, name)

    def compute_at(self, consumer, v):
        """Compute the staged copy made by ``cache_read`` inside loop ``v`` of ``consumer``."""
        if not self.staged:
            raise ScheduleError(f"compute_at on {self.name}: {self.name} is an Input; call "
                                f"s[{self.name}].cache_read(consumer) first, then place the copy")
        return self.schedule[self.staged[-1]].compute_at(consumer, v)

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        raise InputDirectiveError(f"{attr} on {self.name}: {self.name} is an Input; only "
                                  "cache_read and compute_at (of the staged copy) apply to it")


def _nodes_of(exprs, kind):
    """The distinct nodes of type ``kind`` in ``exprs``, in first-seen order."""
    out, seen = [], set()

    def visit(n):
        if isinstance(n, kind) and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
    for e in exprs:
        E.walk_expr(e, visit)
    return out


class Schedule(Placement):
    """The schedule of a pipeline ending in ``outputs`` (one Func or several)."""

    @deep_recursion(ScheduleError, "sl.Schedule")
    def __init__(self, *outputs):
        if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)):
            outputs = tuple(outputs[0])
        if not outputs:
            raise ScheduleError("Schedule(...) needs the output Func(s) of the pipeline")
        # a frontend Tensor stands for its output Func (unscheduled here)
        outputs = tuple(o.__schedlang_pipeline__()[0] if hasattr(o, "__schedlang_pipeline__")
                        else o for o in outputs)
        for o in outputs:
            if not isinstance(o, Func):
                raise ScheduleError(f"Schedule(...): {o!r} is not a Func; pass the output Func")
            if not o.defined:
                raise ScheduleError(f"Schedule({o.name}): {o.name} has no definition yet; "
                                    f"define it ({o.name}[...] = ...) before building its "
                                    "Schedule")
        for n, o in enumerate(outputs):
            if any(o is p for p in outputs[:n]):
                raise ScheduleError(f"Schedule(...): the output {o.name} is listed twice; "
                                    "list each output Func once")
        self.outputs = list(outputs)
        self.trace: list[Directive] = []
        self.assumptions: list = []
        self.funcs: list[Func] = []           # every Func, in discovery order
        self.inputs: list[Input] = []
        self.defs: dict = {}                  # id(func) -> [Definition] (rewritten by directives)
        self.stages: dict = {}                # id(func) -> [StageSchedule]
        self.fsched: dict = {}                # id(func) -> FuncSchedule
        self.input_scheds: dict = {}
        self.moved_updates: dict = {}         # id(func) -> Func cache_write moved updates to
        self.defined_stages: dict = {}        # id(func) -> (func, its definitions when seen)
        self._recording = True
        for o in self.outputs:
            self._discover(o)
        if any(f.auto_named for f in self.funcs):
            settle_func_names(self.funcs, {g.name for g in self.inputs} | self._var_names())
        # str(s) names these bare; an unnamed Func (or a reduction's helper) by string, and
        # so a Func named like a Var or RDom (the replay namespace binds that name once)
        loop_names = self._var_names() | {v.rdom.name for f in self.funcs
                                          for d in self.defs[id(f)] for v in d.rvars}
        self.user_funcs = {g.name for g in self.funcs + self.inputs if _bare_name_ok(g.name)
                           and not getattr(g, "born_unnamed", False)
                           and g.name not in loop_names}
        # the algorithm as built, before any directive adds or rewrites a Func: its
        # canonical names (for to_json / from_json) are found from this when first needed
        self._unscheduled = _PipelineView(list(self.funcs), list(self.inputs),
                                          {id(f): self.definitions(f) for f in self.funcs})
        self._names = None
        self._record_algorithm_facts()     # sl.assume facts are directives of the schedule

    @property
    def pipeline_names(self):
        """The algorithm's Func, Input and RDom names in canonical order (``names``)."""
        if self._names is None:
            self._names = pipeline_names(self._unscheduled)
        return self._names

    # ------------------------------------------------------------------ pipeline
    def _discover(self, f):
        if isinstance(f, Input):
            if all(f is not i for i in self.inputs):
                self._check_unique(f)
                self.inputs.append(f)
            return
        if id(f) in self.defs:
            return
        if not f.definitions:
            raise ScheduleError(f"Schedule(...): Func {f.name} is read but has no definition; "
                                f"define it ({f.name}[...] = ...) before building the Schedule")
        self._check_unique(f)
        self.defs[id(f)] = list(f.definitions)
        self.defined_stages[id(f)] = (f, len(f.definitions))
        self.funcs.append(f)
        self._add_func_state(f)
        for d in f.definitions:
            for ref in refs(d):
                self._discover(ref.func)
        for inp in f.extra_inputs:
            self._discover(inp)
        # Inputs whose sizes the pipeline uses (a shape, an RDom bound) are arguments too
        sizes = [sv for d in f.definitions for sv in cached_on_definition(
            d, "_size_vars", lambda d=d: _nodes_of(definition_exprs(d), E.SizeVar))]
        sizes += _nodes_of(f.shape or (), E.SizeVar)
        for sv in sizes:
            if sv.source is not None:
                self._discover(sv.source)

    def _var_names(self):
        """Names of the Vars and reduction variables the pipeline's definitions use."""
        names = set()
        for f in self.funcs:
            for d in self.defs[id(f)]:
                names |= cached_on_definition(d, "_var_names", lambda d=d: {
                    n.name for n in _nodes_of(definition_exprs(d), E.Var)
                    if not isinstance(n, (E.SizeVar, E.Param))})
        return names

    def _check_unique(self, f):
        for g in self.funcs + self.inputs:
            # an unnamed Func not yet named gets a free name after discovery
            if g.name == f.name and g is not f and not getattr(f, "auto_named", False) and \
                    not getattr(g, "auto_named", False):
                unnamed = " (an unnamed sl.Func() is named f, f1, ... by the first Schedule " \
                    "that covers it)" if getattr(f, "born_unnamed", False) or \
                    getattr(g, "born_unnamed", False) else ""
                inputs = [h for h in (f, g) if not hasattr(h, "definitions")]
                how = ("sl.Input(\"name\", ...) (or Tensor.input(\"name\", ...))" if inputs
                       else "sl.Func(\"name\")")
                if len(inputs) == 1:    # an Input named like a Func (a frontend op's result)
                    how = f"rename the Input: {how}"
                raise NameClashError(f"two different Funcs/Inputs are both named {f.name!r}"
                                    f"{unnamed}; give each a unique name: {how}")

    def _add_func_state(self, f):
        defs = self.defs[id(f)]
        self.stages[id(f)] = [StageSchedule(self, f, n, d) for n, d in enumerate(defs)]
        has_red = len(defs) > 1 or bool(defs[0].reductions)
        out = any(f is o for o in self.outputs)
        self.fsched[id(f)] = FuncSchedule(("root",) if (has_red or out) else ("inline",))

    def _defn(self, f, n):
        return self.stages[id(f)][n].definition

    def lookup(self, key, where="s[...]"):
        """The Func or Input named ``key`` (or ``key`` itself if it is one; a frontend
        Tensor stands for its output Func). ``where`` is the directive a wrong key is
        reported against (``cache_read on A``)."""
        if hasattr(key, "__schedlang_pipeline__"):
            key = self._lowerable_func(key, where)
        if isinstance(key, (Func, Input)):
            for g in self.funcs + self.inputs:
                if g is key:
                    return g
            if any(g.name == key.name for g in self.funcs + self.inputs):
                raise ScheduleError(
                    f"{key.name} is another Func of the same name as this schedule's "
                    f"{key.name} (was the algorithm built again?); index the schedule with the "
                    "Funcs of the algorithm it was made for, or with the name as a string")
            raise ScheduleError(f"{key.name} is not part of the pipeline this schedule covers "
                                f"(outputs: {', '.join(o.name for o in self.outputs)})")
        if isinstance(key, str):
            for g in self.funcs + self.inputs:
                if g.name == key:
                    return g
            names = ", ".join(g.name for g in self.funcs + self.inputs)
            raise ScheduleError(("" if where == "s[...]" else f"{where}: ") +
                                f"no Func or Input named {key!r} in this pipeline; it has: {names}")
        if isinstance(key, (StageSchedule, InputSchedule)):
            kind = "an Input" if isinstance(key, InputSchedule) else "a Func"
            shown = f"s[{key.func.name}]" + (f".update({key.index - 1})" if key.index else "")
            raise ScheduleError(f"{where}: {shown} is a schedule, not {kind}; pass the "
                                f"{kind.split()[1]} {key.func.name} itself")
        if isinstance(key, BoundaryView):
            src, idx = key.source.name, ", ".join(f"i{n}" for n in range(len(key.shape)))
            raise ScheduleError(
                f"{f's[{key!r}]' if where == 's[...]' else where}: {key!r} is a boundary view "
                f"of {src}, computed inline where it is read, so it has no schedule of its own; "
                f"to schedule it, define a Func from it (e.g. g[{idx}] = {key!r}[{idx}]) and "
                f"schedule that, or stage {src} with s[{src}].cache_read(consumer)")
        raise ScheduleError(f"{where} takes a Func, an Input, a frontend Tensor or a name, got "
                            f"{key!r}")

    def _lowerable_func(self, obj, where):
        """The Func or Input of this pipeline that a lowerable object (a frontend Tensor)
        stands for: its own stored Func / Input (``__schedlang_func__``) when this pipeline
        has it, else its output Func when that is one of this schedule's outputs."""
        own_of = getattr(obj, "__schedlang_func__", None)
        own = own_of() if own_of is not None else None
        if own is not None and (isinstance(own, Input) or any(g is own for g in self.funcs)):
            return own
        out = obj.__schedlang_pipeline__()[0]
        if own is None and not any(o is out for o in self.outputs):
            raise ScheduleError(
                f"{where}: {obj!r} is computed inline in its consumers (elementwise math and "
                "views have no Func of their own), so it has no schedule; schedule the Func "
                f"that reads it (this pipeline has: {', '.join(g.name for g in self.funcs)})")
        if not any(o is out for o in self.outputs):
            # its Funcs' generated names would mean nothing to the user: name the Tensor
            raise ScheduleError(
                f"{where}: {obj!r} is not part of the pipeline this schedule covers (outputs: "
                f"{', '.join(o.name for o in self.outputs)}); index the schedule with the "
                "Tensors that the scheduled outputs read, or build the schedule from the "
                "outputs you compile: s = sl.Schedule(y)")
        return out

    def __getitem__(self, key):
        f = self.lookup(key)
        if isinstance(f, Input):
            if id(f) not in self.input_scheds:
                self.input_scheds[id(f)] = InputSchedule(self, f)
            return self.input_scheds[id(f)]
        return self.stages[id(f)][0]

    def _stage(self, f, n, what):
        stages = self.stages[id(f)]
        moved = self.moved_updates.get(id(f))
        if moved is not None and n >= 1:
            raise ScheduleError(f"{what} on {f.name}: cache_write on {f.name} moved its update "
                                f"stages to {moved}; schedule them with "
                                f"s[{moved!r}].update({n - 1})")
        if not 1 <= n < len(stages):
            raise ScheduleError(f"{what} on {f.name}: {f.name} has {len(stages) - 1} update "
                                f"stage(s)" + (f"; use update(0) .. update({len(stages) - 2})"
                                               if len(stages) > 1 else
                                               f"; schedule its definition with s[{f.name}] "
                                               "itself"))
        return stages[n]

    def _func_sched(self, f, directive):
        return self.fsched[id(f)]

    def stage_schedules(self, f):
        """Every StageSchedule of Func ``f`` (pure definition first)."""
        return self.stages[id(f)]

    def func_schedule(self, f) -> FuncSchedule:
        return self.fsched[id(f)]

    def definitions(self, f):
        """The definitions of ``f`` as this schedule computes them (after cache_read etc.)."""
        return [st.definition for st in self.stages[id(f)]]

    # ------------------------------------------------------------------ trace
    def _record(self, stage, op, args, kwargs):
        if self._recording:
            self.trace.append(Directive(stage.func.name, stage.index, op, args, kwargs))

    def _pause(self):
        rec, self._recording = self._recording, False
        return rec

    def _resume(self, rec):
        self._recording = rec

    def __str__(self):
        self._record_algorithm_facts()
        lines = [d.to_python(self.user_funcs) for d in self.trace]
        return "\n".join(lines) + ("\n" if lines else "")

    def __repr__(self):
        return (f"<Schedule of {', '.join(o.name for o in self.outputs)}: "
                f"{len(self.trace)} directives>")

    def to_json(self) -> str:
        """The directives as JSON text; ``Schedule.from_json(text, C)`` replays them."""
        self._record_algorithm_facts()
        return json.dumps({"schedlang_schedule": 1,
                           "outputs": [o.name for o in self.outputs],
                           "names": self.pipeline_names,
                           "directives": [d.to_dict() for d in self.trace]})

    @classmethod
    def from_json(cls, text, *outputs):
        """Rebuild a schedule from ``to_json`` text onto the algorithm ending in ``outputs``."""
        expected = "give the text that Schedule.to_json() writes"
        try:
            # the text as read from a file in binary mode is the same JSON
            data = json.loads(text) if isinstance(text, (str, bytes, bytearray)) else text
        except ValueError as e:
            if isinstance(text, str) and text.lstrip().startswith(("s[", "s.assume(")):
                # the Python source str(s) prints, not the JSON
                expected = ("this is the Python text of str(s): exec it in a namespace with "
                            "s = sl.Schedule(...), or pass s.to_json() here")
            raise ScheduleError(f"Schedule.from_json: not JSON ({e}); {expected}") from None
        except RecursionError:
            raise ScheduleError("Schedule.from_json: the JSON nests too deeply to be a "
                                f"schedule; {expected}") from None
        if not isinstance(data, dict):
            kind = {list: "an array", str: "a string", int: "a number", float: "a number",
                    bool: "a bool", type(None): "null"}.get(type(data), type(data).__name__)
            raise ScheduleError(f"Schedule.from_json: not a schedlang schedule ({kind}, not an "
                                f"object with \"directives\"); {expected}")
        if "directives" not in data:
            raise ScheduleError("Schedule.from_json: not a schedlang schedule (it has no "
                                f"\"directives\"); {expected}")
        directives = data["directives"]
        if not isinstance(directives, list):
            raise ScheduleError("Schedule.from_json: not a schedlang schedule (\"directives\" "
                                "must be a list of directives)")
        version = data.get("schedlang_schedule")
        if type(version) is not int or version != 1:
            raise ScheduleError(f"Schedule.from_json: unsupported schedule format version "
                                f"{version!r} ({type(version).__name__}); this schedlang reads "
                                "\"schedlang_schedule\": 1 (the int)")
        for n, d in enumerate(directives):
            _directive_from_json(n, d)
        if not outputs:
            raise ScheduleError("Schedule.from_json(text, ...): give the output Func(s) of the "
                                "algorithm to replay the schedule onto: "
                                "Schedule.from_json(text, C)")
        s = cls(*outputs)
        stored = data.get("names")
        if stored is not None and not (isinstance(stored, list)
                                       and all(isinstance(n, str) for n in stored)):
            raise ScheduleError(f"Schedule.from_json: \"names\" must be a list of the "
                                f"pipeline's Func, Input and RDom names, got {stored!r:.80}; "
                                f"{expected}")
        by_name = stored is not None and sorted(stored) == sorted(s.pipeline_names) and \
            not any(getattr(f, "born_unnamed", False) for f in s.funcs)
        if stored is not None and not by_name:
            # a rebuild of the same algorithm may have given its unnamed Funcs and RDoms
            # other automatic names: replay by canonical position. The user's own names in
            # another order (the outputs listed otherwise) name the same Funcs: no renaming
            try:
                data = rename_directives(data, stored, s.pipeline_names,
                                         len(rdoms_in_order(s._unscheduled)))
            except (ValueError, TypeError) as e:
                raise ScheduleError(f"Schedule.from_json: {e}; it was written for another "
                                    "algorithm") from None
            directives = data["directives"]
        names = [o.name for o in s.outputs]
        if data.get("outputs", names) != names:
            outs = data.get("outputs")
            how = f"; list them in that order: Schedule.from_json(text, {', '.join(map(str, outs))})" \
                if isinstance(outs, list) and sorted(map(str, outs)) == sorted(names) else ""
            raise ScheduleError(f"Schedule.from_json: the schedule is for outputs "
                                f"{outs}, not {names}{how}")
        for n, d in enumerate(directives):
            directive = _directive_from_json(n, d)
            try:
                s.apply(directive)
            except SchedlangError as e:
                # say which directive of the text failed; the error itself names the primitive.
                # An AlgorithmError here (a bad name or literal in the text) is the text's fault
                what = "" if str(e).startswith(directive.op) else f" ({directive.op})"
                raise ScheduleError(f"Schedule.from_json: directive {n}{what}: {e}") from None
        return s

    def apply(self, d: Directive):
        """Re-apply one recorded directive (used by from_json and the autotuner)."""
        if d.op not in DIRECTIVE_OPS:
            raise ScheduleError(f"unknown directive {d.op!r} for {d.func or 'the schedule'}; "
                                f"the directives are: {', '.join(DIRECTIVE_OPS)}")
        if d.op == "assume":
            target, where = self, "assume"
            if len(d.args) == 1 and not isinstance(d.args[0], str):
                raise ScheduleError(f"assume: a recorded fact is one str, its text as str(s) "
                                    f"prints it, got the arguments {d.args!r}")
        else:
            target = self[d.func]
            if d.stage:
                target = target.update(d.stage - 1)
            where = f"{d.op} on {target.name}"
        method = getattr(target, d.op)
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.kwargs.items()}
        try:
            inspect.signature(method).bind(*d.args, **kwargs)
        except TypeError as e:
            # the recorded arguments do not fit the primitive (an edited or foreign trace)
            raise ScheduleError(f"{where}: the recorded arguments {d.args!r} and keyword "
                                f"arguments {d.kwargs!r} do not fit {d.op}: {e}") from None
        return method(*d.args, **kwargs)

    def copy(self, upto=None):
        """A new Schedule of the same outputs with the same directives (the first ``upto``
        of them: ``s.copy(len(s.trace) - 1)`` undoes the last). Example: ``t = s.copy()``."""
        s = Schedule(*self.outputs)
        s._names = self._names      # the same algorithm: nothing to rename
        for d in self.trace[:upto]:
            s.apply(d)
        return s

    # ------------------------------------------------------------------ facts
    def assume(self, cond):
        """A fact about sizes / Params the compiler may rely on; checked when the kernel is
        called. A fact the schedule already holds is not recorded again.
        Example: ``s.assume(A.shape[0] % 16 == 0)``."""
        text = cond if isinstance(cond, str) else None
        if text is not None:
            cond = _parse_fact(text, self)
        cond = check_fact(cond, "assume", ScheduleError)
        alien = self._foreign_variable(cond)
        if alien is not None:
            source = getattr(alien, "source", None)
            what = (f"the size {alien.name} (of {source.name})" if source is not None else
                    f"the size {alien.name}") if isinstance(alien, E.SizeVar) else \
                f"the Param {alien.name}"
            outs = ", ".join(o.name for o in self.outputs)
            raise ScheduleError(f"assume({user_text(cond)}): {what} is not used by the pipeline "
                                f"of {outs}, so no call of its kernel passes a value to check "
                                "the fact against; state facts about the sizes of its Inputs "
                                "and the Params it uses")
        key = E.structural_key(cond)
        if any(E.structural_key(c) == key for c in self.assumptions):
            return self
        self.assumptions.append(cond)
        if self._recording:
            self.trace.append(Directive("", 0, "assume", [text or expr_to_python(cond)], {}))
        return self

    def algorithm_facts(self):
        """The ``sl.assume`` facts about this pipeline that the schedule does not hold yet:
        every size in the fact belongs to one of its Inputs (or is an output size it uses)
        and every Param in it is one the pipeline uses (by identity, so a fact about another
        algorithm's ``N`` does not apply)."""
        if not ASSUMPTIONS:     # the common case: no walk of the pipeline
            return []
        held = {E.structural_key(c) for c in self.assumptions}
        out = []
        known = self._pipeline_variables()
        for fact in ASSUMPTIONS:
            if self._foreign_variable(fact, known) is None and \
                    E.structural_key(fact) not in held:
                held.add(E.structural_key(fact))
                out.append(fact)
        return out

    def _foreign_variable(self, fact, known=None):
        """The first size or Param of ``fact`` that is not one of this pipeline's (a size
        of an Input it does not read, by identity, or a Param it does not use), or None.
        ``known``: ``_pipeline_variables()``, when the caller asks about several facts."""
        inputs, params, size_names = known or self._pipeline_variables()
        foreign = []

        def check(n):
            if isinstance(n, E.Param):
                ok = id(n) in params
            elif isinstance(n, E.SizeVar):
                ok = (id(n.source) in inputs) if n.source is not None else (
                    n.name in size_names)
            else:
                return
            if not ok:
                foreign.append(n)
        E.walk_expr(fact, check)
        return foreign[0] if foreign else None

    def _pipeline_variables(self):
        """(ids of the Inputs, ids of the Params, names of the sizes) of this pipeline."""
        inputs = {id(i) for i in self.inputs}
        params, size_names = set(), set()

        def note(n):
            if isinstance(n, E.Param):
                params.add(id(n))
            elif isinstance(n, E.SizeVar):
                size_names.add(n.name)
        for g in self.funcs + self.inputs:
            for x in getattr(g, "shape", None) or ():
                E.walk_expr(x, note)
            for d in self.definitions(g) if isinstance(g, Func) else []:
                for e in definition_exprs(d):
                    E.walk_expr(e, note)
        return inputs, params, size_names

    def _record_algorithm_facts(self):
        """Record the ``sl.assume`` facts about this pipeline as ``assume`` directives, so
        that ``str(s)`` and ``to_json`` carry them onto the algorithm built again."""
        for fact in self.algorithm_facts():
            self.assume(fact)

    # ------------------------------------------------------------------ staging
    def _new_func(self, name, default_name, where="cache_read"):
        """A new Func named ``name`` (``default_name`` when None; a taken name gets a number).
        ``where``: the directive, for the error."""
        if name is None:
            name = default_name
        if not isinstance(name, str) or not name:
            raise ScheduleError(f"{where}: name= must be a non-empty str (the new Func's "
                                f"name), got {name!r}; pass a name, or leave it out")
        if any(g.name == name for g in self.funcs + self.inputs):
            base, n = name, 1
            while any(g.name == name for g in self.funcs + self.inputs):
                name, n = f"{base}{n}", n + 1
        return Func(name)

    def _install(self, g, defs, compute=("root",)):
        self.funcs.append(g)
        self.defs[id(g)] = defs
        g.definitions = list(defs)   # the staged Func is the schedule's own object
        self.stages[id(g)] = [StageSchedule(self, g, n, d) for n, d in enumerate(defs)]
        self.fsched[id(g)] = FuncSchedule(compute)

    def _cache_read(self, st, consumer, memory, name):
        from .staging import cache_read
        return cache_read(self, st, consumer, memory, name)

    def _cache_write(self, st, memory, name):
        from .staging import cache_write
        return cache_write(self, st, memory, name)

    def _rfactor(self, st, rv, name):
        from .rfactor import rfactor
        return rfactor(self, st, rv, name)


def _directive_from_json(n, d):
    """Directive number ``n`` of a JSON schedule, checked to have the shape ``to_json``
    writes: {"func": str, "stage": int, "op": str, "args": list, "kwargs": {str: ...}}."""
    where = f"Schedule.from_json: directive {n}"
    if not isinstance(d, dict):
        raise ScheduleError(f"{where} is {d!r}; each directive must be an object with func, "
                            "stage, op, args and kwargs")
    op = d.get("op")
    if not isinstance(op, str):
        raise ScheduleError(f"{where}: " + ("it has no \"op\"" if "op" not in d else
                                              f"\"op\" must be a str, got {op!r}")
                            + f"; give the primitive's name ({', '.join(DIRECTIVE_OPS)})")
    if op not in DIRECTIVE_OPS:
        raise ScheduleError(f"{where}: unknown directive {op!r}; the directives are: "
                            f"{', '.join(DIRECTIVE_OPS)}")
    unknown = sorted(set(d) - {"func", "stage", "op", "args", "kwargs"})
    if unknown:
        raise ScheduleError(f"{where} ({op}): unknown field(s) {', '.join(map(repr, unknown))}; "
                            "a directive has func, stage, op, args and kwargs")
    for key, want, ok in (("func", "a str (the Func's name)", lambda x: isinstance(x, str)),
                          ("stage", "an int >= 0 (0: the pure definition, n: update(n - 1))",
                           lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0),
                          ("args", "a list", lambda x: isinstance(x, list))):
        if key not in d:
            raise ScheduleError(f"{where} ({op}): it has no {key!r}; it must be {want}")
        if not ok(d[key]):
            raise ScheduleError(f"{where} ({op}): {key!r} must be {want}, got {d[key]!r}")
    kwargs = d.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ScheduleError(f"{where} ({op}): 'kwargs' must be an object of keyword arguments, "
                            f"got {kwargs!r}")
    return Directive(d["func"], d["stage"], op, d["args"], kwargs)


def _bare_name_ok(name):
    """Can ``str(s)`` refer to this Func by its bare name in the replay namespace?"""
    return bool(IDENT.match(name)) and not keyword.iskeyword(name) and name not in ("s", "sl")


def _parse_fact(text, s):
    """The fact printed as ``text`` (an ``assume`` directive read back), over the sizes and
    Params of the pipeline ``s`` covers; parsed as data, never run (``fact_text``)."""
    names = {}
    for g in s.funcs + s.inputs:
        for d in ([] if isinstance(g, Input) else s.definitions(g)):
            for e in list(d.args) + [d.value]:
                E.walk_expr(e, lambda n: names.setdefault(n.name, n)
                            if isinstance(n, (E.SizeVar, E.Param)) else None)
        for x in getattr(g, "shape", None) or ():
            E.walk_expr(x, lambda n: names.setdefault(n.name, n)
                        if isinstance(n, E.SizeVar) else None)
    return parse_fact(text, names)
