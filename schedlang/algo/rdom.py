"""RDoms and inline reductions (SPEC §1): ``sl.RDom``, ``r.where``, ``sl.sum`` /
``product`` / ``maximum`` / ``minimum`` / ``argmax`` / ``argmin``, and the size and name
checks Funcs and Inputs share with them. Example::

    r = RDom((1, N - 1), name="r")
    total = sl.sum(A[r.where(r % 2 == 0)])
"""
from __future__ import annotations

import itertools
import re

from ..errors import AlgorithmError
from . import expr as E
from . import types as T
_counter = itertools.count()
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")   # \Z: "C\n" is not one


def _check_name(kind, name):
    if not isinstance(name, str) or not name:
        raise AlgorithmError(f"a {kind} needs a non-empty str name, got {name!r}")
    E.check_no_nul(kind, name)
    return name



def size_expr(x, what):
    """A dimension size: an int, a str naming a symbolic size, or an integer expression."""
    if isinstance(x, bool):
        raise AlgorithmError(f"{what}: a size must be an int or a str, got {x!r}")
    if isinstance(x, int):
        if x < 0:
            raise AlgorithmError(f"{what}: a size must be >= 0, got {x}")
        if x > T.MAX_EXTENT:
            raise AlgorithmError(f"{what}: {x} is more than {T.MAX_EXTENT}, the largest extent "
                                 "of one dimension (loop variables are int32)")
        return E.Const(x, T.int64)
    if isinstance(x, str):
        if not IDENT.match(x):
            raise AlgorithmError(f"{what}: the symbolic size {x!r} must be a Python identifier")
        return E.SizeVar(x)
    e = E.to_expr(x)
    if not e.dtype.is_int:
        raise AlgorithmError(f"{what}: a size must be an integer expression, got {e.dtype}")
    return E.cast(T.int64, E.fix_weak(e))




def _check_bound_has_no_loop_variable(name, lo, ext):
    """An RDom's min and extent are fixed when the kernel is called (ints, sizes, Params):
    a pure Var or another RDom's variable there would be undefined where the loop starts."""
    for part, text in ((lo, "min"), (ext, "extent")):
        found = []
        E.walk_expr(part, lambda n: found.append(n) if isinstance(n, E.Var) and not
                    isinstance(n, (E.SizeVar, E.Param)) else None)
        if found:
            v = found[0]
            if isinstance(v, E.RVar):
                what, fix = "the reduction variable", (
                    "use one RDom of both dimensions and restrict it: "
                    "r = sl.RDom((0, N), (0, N)); r = r.where(r.y < r.x)")
            else:
                what, fix = "the Var", (
                    "give it a fixed range and restrict it: "
                    f"r = sl.RDom(A.shape[0]); r = r.where(r < {v.name})")
            raise AlgorithmError(
                f"RDom {name}: its {text} uses {what} {v.name}; an RDom's min and extent are "
                "ints, sizes (A.shape[0]) or Params, fixed for the whole kernel. For a domain "
                f"that depends on {v.name} (a triangular one), {fix}")


def _settle_rdom_names(exprs):
    """Name the unnamed RDoms a definition uses, in the order they appear: ``r``, else the
    first of ``r1``, ``r2``, ... that no other variable of the definition has. A process-wide
    counter would name them differently each time the algorithm is built, and the loop
    names ``str(schedule)`` records would not replay onto the rebuilt algorithm."""
    unsettled, taken = [], set()

    def visit(n):
        if isinstance(n, E.RVar):
            rdom = getattr(n.rdom, "origin", n.rdom)
            if rdom.auto_named:
                if all(rdom is not u for u in unsettled):
                    unsettled.append(rdom)
                return
        if isinstance(n, E.Var):
            taken.add(n.name)
    for e in exprs:
        for part in (e.vars if isinstance(e, RDom) else [e]):
            E.walk_expr(E.to_expr(part), visit)
    for rdom in unsettled:
        k, name = 0, "r"
        while any(n in taken for n in _rvar_names(name, rdom.ndim)):
            k += 1
            name = f"r{k}"
        taken.update(_rvar_names(name, rdom.ndim))
        for r in [rdom] + rdom.derived:
            r.name = name
            for v, n in zip(r.vars, _rvar_names(name, rdom.ndim)):
                v.name = n
        rdom.auto_named = False



def _rvar_names(name, ndim):
    return [name] if ndim == 1 else [f"{name}.{c}" for c in "xyzw"[:ndim]]


class RDom(E.ExprOps):
    """A reduction domain: ``RDom(K)`` or ``RDom((lo, extent), (lo2, extent2), name="r")``.

    A 1-D RDom is itself an expression; dims are ``r.x, r.y, r.z, r.w``. The first
    dimension is the outermost loop.
    """

    def __init__(self, *ranges, name=None, _vars=None, _pred=None):
        if len(ranges) == 1 and isinstance(ranges[0], list):
            ranges = tuple(ranges[0])
        if not ranges:
            raise AlgorithmError("RDom needs at least one range: RDom(extent) or RDom((lo, extent))")
        self.name = name or f"r{next(_counter)}"
        # an unnamed RDom is named where it is first used (_settle_rdom_names): by its place
        # in the definition, so the same algorithm built again gets the same loop names
        self.auto_named = name is None
        self.derived = []           # the RDoms r.where(...) made of it
        _check_name("RDom", self.name)
        self.bounds = []
        for d, r in enumerate(ranges):
            if isinstance(r, tuple):
                if len(r) != 2:
                    raise AlgorithmError(f"RDom {self.name}: a range is (lo, extent), got {r!r}")
                lo, ext = r
            else:
                lo, ext = 0, r
            self.bounds.append((size_expr(lo, f"RDom {self.name} min") if not isinstance(lo, int)
                                else E.Const(lo, T.int64),
                                size_expr(ext, f"RDom {self.name} extent")))
        if len(self.bounds) > 4:
            raise AlgorithmError(f"RDom {self.name}: at most 4 dimensions (x, y, z, w)")
        for lo, ext in self.bounds:
            _check_bound_has_no_loop_variable(self.name, lo, ext)
            # RDom variables are int32 (SPEC §1): a constant range past it would wrap (the
            # kernel checks a range set by sizes or Params when it is called)
            if isinstance(lo, E.Const) and (not -2 ** 31 <= lo.value <= T.MAX_EXTENT or (
                    isinstance(ext, E.Const) and ext.value > 0
                    and lo.value + ext.value - 1 > T.MAX_EXTENT)):
                bad = lo.value if not -2 ** 31 <= lo.value <= T.MAX_EXTENT else \
                    lo.value + ext.value - 1
                raise AlgorithmError(
                    f"RDom {self.name}: its range (lo={lo.value}, extent={ext}) reaches {bad}, "
                    f"outside int32 (-2**31 .. 2**31 - 1), the type of RDom variables; give "
                    "it a range inside int32")
        if _vars is None:
            _vars = [E.RVar(n, self, d)
                     for d, n in enumerate(_rvar_names(self.name, len(self.bounds)))]
        self.vars = list(_vars)
        self.predicate = _pred

    @property
    def ndim(self):
        return len(self.bounds)

    def __getattr__(self, attr):
        if attr in ("x", "y", "z", "w"):
            d = "xyzw".index(attr)
            if d >= len(self.vars):
                raise AlgorithmError(f"RDom {self.name} has {len(self.vars)} dimension(s); "
                                     f".{attr} does not exist")
            return self.vars[d]
        raise AttributeError(attr)

    def __len__(self):
        return len(self.vars)

    def __iter__(self):
        return iter(self.vars)

    def as_expr(self):
        if len(self.vars) != 1:
            raise AlgorithmError(f"RDom {self.name} has {len(self.vars)} dimensions; use "
                                 f"{self.name}.x, {self.name}.y, ... in expressions")
        return self.vars[0]

    def where(self, pred):
        """A new RDom over the same box, restricted to points where ``pred`` holds."""
        pred = E.to_expr(pred)
        if not pred.dtype.is_bool:
            raise AlgorithmError(f"RDom {self.name}.where: the predicate {pred} must be a bool "
                                 "expression (a comparison)")
        origin = getattr(self, "origin", self)
        for v in _free(pred, E.RVar):
            if getattr(v.rdom, "origin", v.rdom) is not origin:
                raise AlgorithmError(
                    f"RDom {self.name}.where({pred}): {v.name} is a variable of another RDom; "
                    f"a predicate may use {self.name}'s own variables, pure Vars, sizes, Params "
                    "and reads of Funcs and Inputs")
        new = RDom.__new__(RDom)
        new.name, new.bounds = self.name, list(self.bounds)
        new.origin = origin   # r and r.where(...) may meet in one Func
        new.auto_named, new.derived = False, []
        new.origin.derived.append(new)
        new.vars = [E.RVar(v.name, new, v.dim) for v in self.vars]
        mapping = {id(o): n for o, n in zip(self.vars, new.vars)}
        pred = _replace_rvars(pred, mapping)
        old = _replace_rvars(self.predicate, mapping) if self.predicate is not None else None
        new.predicate = pred if old is None else E.binary("and", old, pred)
        return new

    def __repr__(self):
        return f"RDom({self.name!r})"


def _replace_rvars(e, mapping):
    def go(n):
        if isinstance(n, E.RVar) and id(n) in mapping:
            return mapping[id(n)]
        kids = n.kids()
        if not kids:
            return n
        return n.with_kids(tuple(go(k) for k in kids))
    return go(e)


# ---------------------------------------------------------------------------- reductions

def _free(e, cls):
    """Distinct nodes of class ``cls`` in ``e`` that no enclosing Reduce binds (a Reduce
    binds the variables of its RDom; ``sl.maximum(sl.sum(A[i, r1, r2], over=r2))`` leaves
    r1 to the outer reduction), in first-seen order."""
    seen, out, visited = set(), [], set()

    def go(n, bound):
        if (id(n), bound) in visited:
            return
        visited.add((id(n), bound))
        if isinstance(n, E.Reduce):
            go(n.body, bound | frozenset(id(v) for v in n.rdom.vars))
            return
        if isinstance(n, cls) and id(n) not in seen and id(n) not in bound:
            seen.add(id(n))
            out.append(n)
        for k in n.kids():
            go(k, bound)
    go(e, frozenset())
    return out


def _reduction(op, e, over):
    body = E.fix_weak(E.to_expr(e))
    rdoms = []
    if over is not None:
        over = over if isinstance(over, (list, tuple)) else [over]
        for o in over:
            rd = o if isinstance(o, RDom) else getattr(o, "rdom", None)
            if rd is None:
                raise AlgorithmError(f"sl.{op}(over=...): {o!r} is not an RDom")
            if all(rd is not r for r in rdoms):
                rdoms.append(rd)
        _check_over_names_the_used_version(op, body, rdoms)
    else:
        for v in _free(body, E.RVar):
            if all(v.rdom is not r for r in rdoms):
                rdoms.append(v.rdom)
    if not rdoms:
        raise AlgorithmError(f"sl.{op}({body}): the expression uses no RDom; reduce over an "
                             "RDom variable (or pass over=...)")
    # the message prints the body: only when it is raised (printing costs as much as the rest)
    _check_one_version_of_each_rdom(rdoms, lambda: f"sl.{op}({body})")
    if len(rdoms) > 1:
        if op in ("argmax", "argmin"):
            raise AlgorithmError(f"sl.{op}({body}) needs a single 1-D RDom, got "
                                 f"{', '.join(r.name for r in rdoms)}; use one 1-D RDom r over the "
                                 "flattened domain and index with r // n and r % n")
        rdoms = [_product_domain(rdoms)]
    (rd,) = rdoms
    if op in ("argmax", "argmin"):
        if rd.ndim != 1:
            raise AlgorithmError(f"sl.{op}({body}) needs a 1-D RDom; {rd.name} has {rd.ndim} "
                                 "dimensions; use one 1-D RDom r over the flattened domain "
                                 "and index with r // n and r % n")
        if body.dtype.is_bool:
            body = E.cast(T.int32, body)
        return E.Reduce(op, body, rd, T.int32)
    if body.dtype.is_bool:
        body = E.cast(T.int32, body) if op in ("sum", "product") else body
    if op in ("sum", "product") and body.dtype.is_float and body.dtype.bits == 16:
        # float16 / bfloat16: accumulate in float32 and round once, as numpy's and torch's
        # sum and prod do (a float16 sum of 4096 ones stalls at 2048, a bfloat16 one at 256)
        return E.cast(body.dtype, E.Reduce(op, E.cast(T.float32, body), rd, T.float32))
    return E.Reduce(op, body, rd, body.dtype)


def _check_over_names_the_used_version(op, body, rdoms):
    """``sl.sum(A[r.where(p)], over=r)``: the body uses the restricted copy of ``r`` while
    ``over=`` names ``r`` itself; say so rather than report a stray reduction variable."""
    for v in _free(body, E.RVar):
        if any(v.rdom is rd for rd in rdoms):
            continue
        origin = getattr(v.rdom, "origin", v.rdom)
        if any(getattr(rd, "origin", rd) is origin for rd in rdoms):
            raise AlgorithmError(
                f"sl.{op}({body}, over={v.rdom.name}): the expression uses a restricted "
                f"version of {v.rdom.name} ({v.rdom.name}.where(...)) but over= names another "
                f"version; keep the restricted RDom in a variable and use it in both places: "
                f"rw = {v.rdom.name}.where(...); sl.{op}(A[rw], over=rw)")


def _check_one_version_of_each_rdom(rdoms, where):
    """``r`` and ``r.where(...)`` (or two different ``where``s of ``r``) are one variable
    ``r`` restricted differently: reducing over both at once has no single meaning (and
    would be two loops of one name). ``where`` names the place: a str, or a callable
    giving it."""
    for k, rd in enumerate(rdoms):
        origin = getattr(rd, "origin", rd)
        for other in rdoms[:k]:
            if getattr(other, "origin", other) is origin:
                raise AlgorithmError(
                    f"{where() if callable(where) else where}: uses both {rd.name} and a restricted version of it "
                    f"({rd.name}.where(...)), which are one variable {rd.name}; use the same "
                    f"RDom everywhere in it (for example only the {rd.name}.where(...) one)")


def _predicate_vars(value):
    """The pure Vars (not reduction variables, sizes or Params) that the ``where``
    predicates of the RDoms reduced over in ``value`` use, in first-seen order."""
    out = []

    def visit(n):
        if isinstance(n, E.Reduce) and n.rdom.predicate is not None:
            for v in _free(n.rdom.predicate, E.Var):
                if not isinstance(v, (E.RVar, E.SizeVar, E.Param)) and \
                        all(v is not o for o in out):
                    out.append(v)
    E.walk_expr(value, visit)
    return out


def within_arg_range(index, rdom):
    """``index``, the int32 result of an argmax / argmin over the 1-D ``rdom``, clamped to
    the values it can take: the RDom's (its min when the RDom is empty). The clamp changes
    nothing; it states the range, so that bounds inference proves a read such as
    ``A[i, sl.argmax(A[i, k])]`` in bounds. Example: ``within_arg_range(ref, k)``."""
    lo, extent = rdom.bounds[0]
    lo = E.cast(T.int64, lo)
    last = lo + E.binary("max", E.cast(T.int64, extent) - 1, 0)
    return E.binary("max", E.binary("min", index, E.cast(T.int32, last)), E.cast(T.int32, lo))


def _product_domain(rdoms):
    """One RDom over the product of several, keeping their variables (first outermost)."""
    rd = RDom.__new__(RDom)
    rd.name = "*".join(r.name for r in rdoms)
    rd.bounds = [b for r in rdoms for b in r.bounds]
    rd.vars = [v for r in rdoms for v in r.vars]
    pred = None
    for r in rdoms:
        if r.predicate is not None:
            pred = r.predicate if pred is None else E.binary("and", pred, r.predicate)
    rd.predicate = pred
    return rd


def sum(e, over=None):  # noqa: A001 - the SPEC's name
    """``sl.sum(A[i, k] * B[k, j])``: sum over the RDoms in the expression."""
    return _reduction("sum", e, over)


def product(e, over=None):
    """Product over the RDoms in the expression."""
    return _reduction("product", e, over)


def maximum(e, over=None):
    """Maximum over the RDoms in the expression."""
    return _reduction("maximum", e, over)


def minimum(e, over=None):
    """Minimum over the RDoms in the expression."""
    return _reduction("minimum", e, over)


def argmax(e, over=None):
    """int32 value of the (1-D) RDom variable at the first maximum."""
    return _reduction("argmax", e, over)


def argmin(e, over=None):
    """int32 value of the (1-D) RDom variable at the first minimum."""
    return _reduction("argmin", e, over)


def reduce_identity(op, dtype):
    """The starting value of a reduction's accumulator."""
    if op == "sum":
        return E.Const(0, dtype)
    if op == "product":
        return E.Const(1, dtype)
    if op in ("maximum", "argmax"):
        return E.Const(dtype.min_value(), dtype)
    return E.Const(dtype.max_value(), dtype)
