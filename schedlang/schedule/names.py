"""Canonical names of a pipeline, so that a schedule written for one build of an algorithm
replays onto another build whose unnamed Funcs and RDoms got other automatic names
(``f3`` / ``r7`` come from a process-wide counter).

The canonical order is: Funcs, then Inputs (both in the Schedule's order), then RDoms in
the order the definitions mention them. Example::

    old = pipeline_names(sl.Schedule(C1)); new = pipeline_names(sl.Schedule(C2))
    data = rename_directives(json.loads(s.to_json()), old, new)
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo.func import definition_exprs


def rdoms_in_order(s):
    """The RDoms of the (unscheduled) Schedule ``s``'s pipeline, each once, in the order its
    definitions mention them."""
    found, names = [], set()
    for f in s.funcs:
        for d in s.definitions(f):
            def visit(n):
                rd = getattr(n, "rdom", None)
                if rd is not None and rd.name not in names:
                    names.add(rd.name)
                    found.append(rd)
            for e in definition_exprs(d):
                E.walk_expr(e, visit)
            for v in d.rvars:
                visit(v)
    return found


def pipeline_names(s):
    """The Func, Input and RDom names of the (unscheduled) Schedule ``s``, canonical order."""
    return [f.name for f in s.funcs] + [i.name for i in s.inputs] + [
        r.name for r in rdoms_in_order(s)]


# the argument positions of directives that name a Func or Input; the others name loops
_FUNC_ARGS = {"compute_at": (0,), "store_at": (0,), "cache_read": (0,), "prefetch": (0,)}


def rename_directives(data, old_names, new_names, n_rdoms=0):
    """Schedule JSON data (a dict) written for a pipeline with ``old_names`` (canonical
    order; the last ``n_rdoms`` are RDoms), with each name replaced by the one at the same
    position in ``new_names``. Func and Input names are renamed where a directive names a
    Func; loop names such as ``k7.o`` only by their RDom parts, component by component (a
    Func named ``y`` must not rename the loop ``y``). Returns a new dict; raises ValueError
    when the two pipelines differ in size."""
    if list(old_names) == list(new_names):
        return data
    if len(old_names) != len(new_names):
        raise ValueError("the schedule's pipeline has a different number of Funcs / Inputs / "
                         "RDoms")
    split = len(old_names) - n_rdoms
    funcs = {a: b for a, b in zip(old_names[:split], new_names[:split]) if a != b}
    rdoms = {a: b for a, b in zip(old_names[split:], new_names[split:]) if a != b}

    def ren(x, mapping):
        if isinstance(x, str):
            return ".".join(mapping.get(c, c) for c in x.split("."))
        if isinstance(x, list):
            return [ren(y, mapping) for y in x]
        return x

    def directive(d):
        if d.get("op") == "assume":
            return d
        func_args = _FUNC_ARGS.get(d.get("op"), ())
        return {**d, "func": ren(d["func"], funcs),
                "args": [ren(a, funcs if k in func_args else rdoms)
                         for k, a in enumerate(d["args"])],
                "kwargs": {k: ren(v, funcs if k == "name" else rdoms)
                           for k, v in d.get("kwargs", {}).items()}}
    out = dict(data)
    out["directives"] = [directive(d) for d in data.get("directives", [])]
    out["outputs"] = [ren(o, funcs) for o in data.get("outputs", [])]
    out["names"] = list(new_names)
    return out
