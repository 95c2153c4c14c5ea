"""Pass: prove that every read of an Input and every access of an output stays inside
its extent, for all sizes allowed by the ``assume`` facts. A read that cannot be proven
in bounds is an ``AlgorithmError`` naming the Func, the input, the dimension and the
range, with a concrete counterexample when z3 finds one.
Example: ``g[x] = A[x + 1]`` with g as long as A fails: "g reads A[x + 1] ... when N=1".
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..algo.func import Input
from ..errors import AlgorithmError, ScheduleError
from . import ir
from .bounds_inference import AccessBoxes, user_names, user_text
from .interval import bounds_of
from .prove import counterexample, prove
from .simplify import simplify
from .symbolic import pretty


def _site_name(site, ctx=None):
    """The Func to name as the reader; an inline one is read at its consumer's index."""
    owner = getattr(site, "owner", None)
    if site is None:
        return "the pipeline"
    func = owner or site
    try:
        inline = ctx is not None and ctx.schedule.func_schedule(func).compute[0] == "inline"
    except KeyError:
        inline = False
    if inline:
        return f"{func.name} (inlined into its consumer, at the index the consumer reads)"
    helper_of = getattr(func, "helper_of", None)
    if helper_of is not None:     # a helper Func made of an inline reduction: the user's own
        parent, op = helper_of
        return f"{_site_name(parent, ctx)} (in its sl.{op}(...))"
    return func.name


def _blame_directive(ctx, site, f, idx):
    """A read made out of bounds by a directive that enlarges a region is that directive's
    fault: a tail='pad' split or a ``bound`` on the reading Func itself, or on a Func that
    (through others) consumes it, whose larger region makes the reader compute more."""
    func = getattr(site, "owner", None) or site
    if func is None or not hasattr(func, "definitions"):
        return
    sched = ctx.schedule
    consumers = [g for g in sched.funcs if g is not func and sched._uses(g, func)]
    for g in [func] + consumers:
        try:
            stages = sched.stage_schedules(g)
        except KeyError:
            continue
        through = "" if g is func else f", which {g.name} reads over that region,"
        for st in stages:
            for sp in st.splits:
                if sp.kind == "split" and sp.tail == "pad":
                    raise ScheduleError(
                        f"split({sp.old}, {sp.factor}, tail='pad') on {st.name}: rounding the "
                        f"region of {g.name} up makes {func.name}{through} read "
                        f"{f.name}[{idx}] outside {f.name}'s extent; use tail='guard' or "
                        "'shift', or read it through a boundary condition")
        for name in stages[0].bounds:
            raise ScheduleError(
                f"{stages[0].bound_text(name)}: computing {g.name} over that "
                f"region makes {func.name}{through} read {f.name}[{idx}] outside {f.name}'s "
                "extent; bound it to a region inside what the sizes allow, or remove the bound")


def _read_error(site, message):
    """The AlgorithmError of a read that may fall outside an Input, tagged with the name of
    the Func that reads (the pipeline may blame the schedule instead: lower.py)."""
    err = AlgorithmError(message)
    func = getattr(site, "owner", None) or site
    err.reader = getattr(func, "name", None)
    return err


def check_access_bounds(stmt, ctx):
    if any(isinstance(x, E.Const) and x.value == 0 for o in ctx.outputs for x in o.shape or ()):
        # an empty output is returned without running the kernel (targets/kernel.py): none
        # of its accesses ever happens, and a region inferred over an empty loop is no
        # evidence of a read
        return stmt
    checked = set()
    walker = None

    def visit(kind, f, args, scope, site):
        if not (isinstance(f, Input) or ctx.is_output(f)):
            return
        for d, a in enumerate(args):
            iv = bounds_of(ir.as_int64(a), scope)
            n = simplify(E.cast(T.int64, f.shape[d]))
            what = "reads" if kind == "call" else "writes"
            idx = ", ".join(user_text(x) for x in args)
            if iv.lo is None or iv.hi is None:
                # an update's read of its own Func (hist[img[r]] += 1) is where it writes:
                # a boundary condition of the Func being written is no fix
                own = (getattr(site, "owner", None) or site) is f
                raise _read_error(site,
                    f"{_site_name(site, ctx)} {'updates' if own else what} {f.name}[{idx}]: "
                    f"dimension {d} is indexed by a value with no bound, which may fall outside "
                    f"0..{pretty(simplify(n - 1))}; clamp the index (sl.clamp)" + (
                        " or use a boundary condition such as sl.clamp_edge"
                        if kind == "call" and not own else ""))
            lo, hi = simplify(iv.lo), simplify(iv.hi)
            key = (id(f), d, E.structural_key(lo), E.structural_key(hi))
            if key in checked:
                continue
            checked.add(key)
            cond = E.binary("and", E.binary("ge", lo, 0), E.binary("le", hi, n - 1))
            # an empty range touches nothing
            cond = E.binary("or", E.binary("lt", hi, lo), cond)
            if prove(cond, ctx.facts):
                continue
            # the interval bounds lost a correlation: ask again with every fact on the path
            ai = simplify(ir.as_int64(a))
            exact = E.binary("and", E.binary("ge", ai, 0), E.binary("le", ai, n - 1))
            if prove(exact, list(walker.facts) + list(ctx.facts), timeout_ms=2000):
                continue
            # in bounds whenever no size is 0: check that when the kernel is called
            sizes = {}
            for x in (lo, hi, n):
                E.walk_expr(x, lambda v: sizes.setdefault(v.name, v)
                            if isinstance(v, E.SizeVar) else None)
            def proven_when_nonempty(vs):
                nonempty = [E.binary("ge", v, 1) for v in vs]
                return bool(nonempty) and (prove(cond, list(ctx.facts) + nonempty) or prove(
                    exact, list(walker.facts) + list(ctx.facts) + nonempty, timeout_ms=2000))
            if proven_when_nonempty(sizes.values()):
                # check only the sizes this read needs: a clamped read of B inside
                # i - N (a concatenation) needs M >= 1, not N >= 1, and an empty A must be
                # named as A's problem, not as B's
                needed = list(sizes.values())
                for v in list(needed):
                    rest = [u for u in needed if u is not v]
                    if rest and proven_when_nonempty(rest):
                        needed = rest
                for v in needed:
                    ctx.call_checks.append((E.binary("ge", v, 1),
                                            f"{_site_name(site)} reads {f.name} at an index "
                                            f"that is in bounds only when {v.name} >= 1 (the "
                                            "index is clamped, wrapped, taken modulo a size, "
                                            "an arg-reduction's or recovered from a fused "
                                            "loop); pass a non-empty "
                                            "array"))
                continue
            _blame_directive(ctx, site, f, idx)
            cex = counterexample(cond, ctx.facts)
            example = ""
            if cex:
                example = " (for example when " + ", ".join(
                    f"{k}={v}" for k, v in sorted(cex.items()) if "." not in k) + ")"
            advice = (f"use a boundary condition (sl.clamp_edge({f.name}), ...), shrink the "
                      "output, or state the sizes with sl.assume") if kind == "call" else (
                "restrict the RDom (r.where(...)) or shrink its extent, clamp the index "
                "(sl.clamp), or state the sizes with sl.assume")
            const = simplify(ir.as_int64(a))
            if isinstance(const, E.Const) and const.value < 0:
                # A[-1] is numpy's last element, but here an index is a position
                fixed = [user_text(x) for x in args]
                fixed[d] = pretty(simplify(n + const.value))
                advice += (f"; a negative index does not count from the end as in numpy: "
                           f"write {f.name}[{', '.join(fixed)}] for that")
            raise _read_error(site,
                f"{_site_name(site, ctx)} {what} {f.name}[{idx}]: dimension {d} ranges over "
                f"[{pretty(user_names(lo))}, {pretty(user_names(hi))}], which may fall "
                f"outside {f.name}'s extent 0..{pretty(simplify(n - 1))}{example}; {advice}")
    walker = AccessBoxes(visit, track_facts=True)
    walker.stmt(stmt)
    return stmt
